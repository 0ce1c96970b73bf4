"""Attention split over two processes and merged with peak: the decode /
context-parallel pattern.  Two ranks on loopback (torch.distributed, gloo)
each run peak attention over half of the keys with its log-sum-exp, swap
(o, lse) with all_gather, and merge them with peak.torch.attention_merge;
the result must match the one-process call over all keys.

Run: python3 python/tests/run.py distributed (meson test: python-distributed).
Skipped (exit 77) without torch 2.x with torch.distributed and gloo: Debian
12's python3-torch is 1.13.  To run it, use an interpreter with a newer
torch, for example a venv:

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install torch numpy
    PEAK_LIBRARY=build/libpeak.so.4 PYTHONPATH=python \\
        /tmp/venv/bin/python python/tests/run.py distributed
"""
import os
import socket
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import peak

WORLD = 2
B, H, HKV, LQ, LK, D, DV = 2, 8, 2, 7, 301, 64, 48


def why_not():
    """None if this interpreter can run the test, else the reason it cannot."""
    try:
        import torch
    except ImportError:
        return f"{sys.executable} cannot import torch"
    major = int(torch.__version__.split(".")[0])
    if major < 2:
        return (f"torch {torch.__version__} is too old (2.x needed; Debian 12's python3-torch "
                "is 1.13): run it with a newer torch, see this file's docstring")
    import torch.distributed as dist
    if not dist.is_available():
        return f"torch {torch.__version__} was built without torch.distributed"
    if not dist.is_gloo_available():
        return f"torch {torch.__version__} has no gloo backend"
    if not hasattr(peak, "attention_merge"):
        return "this peak has no attention_merge"
    return None


def inputs():
    """The same q, k, v and mask in every process (a fixed seed).  The
    additive mask hides some keys, the whole second half of the keys for
    query row 1 (rank 1's part of that row is empty: lse -inf), and every
    key for query row 2 (no part sees anything: zeros)."""
    rng = np.random.default_rng(20261202)
    q = rng.uniform(-1, 1, (B, H, LQ, D)).astype(np.float32)
    k = rng.uniform(-1, 1, (B, HKV, LK, D)).astype(np.float32)
    v = rng.uniform(-1, 1, (B, HKV, LK, DV)).astype(np.float32)
    bias = np.where(rng.random((B, 1, LQ, LK)) < 0.2, -np.inf, rng.uniform(-1, 1, (B, 1, LQ, LK)))
    bias[:, :, 1, LK // 2:] = -np.inf
    bias[:, :, 2, :] = -np.inf
    return q, k, v, bias.astype(np.float32)


def key_parts(world=WORLD):
    """The keys of each rank: contiguous slices, in rank order."""
    step = LK // world
    return [slice(r * step, LK if r == world - 1 else (r + 1) * step) for r in range(world)]


def worker(rank, world, port, outdir, threads):
    """One rank: attention over its keys, all_gather of (o, lse), merge."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import peak.torch as pt

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:
        q, k, v, bias = (torch.from_numpy(a) for a in inputs())
        part = key_parts(world)[rank]
        with torch.no_grad():
            # k[:, :, part] is a strided view: peak reads it without a copy
            o, lse = pt.scaled_dot_product_attention(
                q, k[:, :, part], v[:, :, part], attn_mask=bias[..., part], return_lse=True,
                threads=threads)
        os_ = [torch.empty_like(o) for _ in range(world)]
        lses = [torch.empty_like(lse) for _ in range(world)]
        dist.all_gather(os_, o)
        dist.all_gather(lses, lse)
        # every rank got the others' bytes unchanged, its own in its slot
        assert torch.equal(os_[rank], o) and torch.equal(lses[rank], lse)
        merged, merged_lse = pt.attention_merge(list(zip(os_, lses)), return_lse=True,
                                                threads=threads)
        np.save(os.path.join(outdir, f"o{rank}.npy"), merged.numpy())
        np.save(os.path.join(outdir, f"lse{rank}.npy"), merged_lse.numpy())
        for r in range(world):  # the parts, for the parent's own merge
            np.save(os.path.join(outdir, f"part{rank}-{r}.npy"), os_[r].numpy())
            np.save(os.path.join(outdir, f"partlse{rank}-{r}.npy"), lses[r].numpy())
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def same_bytes(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@unittest.skipIf(why_not(), why_not())
class TwoRanks(unittest.TestCase):
    def run_ranks(self, outdir, threads):
        """Starts the ranks (subprocesses of this interpreter), returns when
        both are done; retries with another port if the one picked was
        taken in the meantime."""
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(peak.__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [pkg] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
        for attempt in range(3):
            port = free_port()
            procs = [subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", str(r), str(WORLD),
                 str(port), outdir, str(threads)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for r in range(WORLD)]
            logs = []
            for p in procs:
                try:
                    logs.append(p.communicate(timeout=180)[0])
                except subprocess.TimeoutExpired:
                    for other in procs:
                        other.kill()
                    self.fail("a rank did not finish in 180 s")
            if all(p.returncode == 0 for p in procs):
                return
            if not any("address already in use" in log.lower() for log in logs):
                break
        self.fail("ranks failed:\n" + "\n".join(
            f"--- rank {r} (exit {p.returncode}):\n{log}"
            for r, (p, log) in enumerate(zip(procs, logs))))

    def test_merge_over_two_processes(self):
        import torch

        import peak.torch as pt

        q, k, v, bias = (torch.from_numpy(a) for a in inputs())
        with torch.no_grad():
            want, want_lse = pt.scaled_dot_product_attention(q, k, v, attn_mask=bias,
                                                             return_lse=True)
        want, want_lse = want.numpy(), want_lse.numpy()
        results = {}
        for threads in (1, 2):
            with tempfile.TemporaryDirectory() as outdir:
                self.run_ranks(outdir, threads)
                load = lambda name: np.load(os.path.join(outdir, name + ".npy"))  # noqa: E731
                got = [load(f"o{r}") for r in range(WORLD)]
                lse = [load(f"lse{r}") for r in range(WORLD)]
                parts = [(load(f"part0-{r}"), load(f"partlse0-{r}")) for r in range(WORLD)]
            # every rank merged the same parts in the same order: the same bytes
            for r in range(1, WORLD):
                self.assertTrue(same_bytes(got[r], got[0]), f"rank {r} differs from rank 0")
                self.assertTrue(same_bytes(lse[r], lse[0]), f"rank {r}'s lse differs")
            # and the bytes of a merge in this process, at any thread count
            local, local_lse = peak.attention_merge(parts, return_lse=True)
            self.assertTrue(same_bytes(got[0], local))
            self.assertTrue(same_bytes(lse[0], local_lse))
            results[threads] = got[0]
            # the one-process call over all keys, within the bound of peak.h
            # (peak_attention_merge): peak_attention() over the union within
            # its own bound (the 1e-5 max|V| target for q, k in [-1, 1]) plus
            # 2^-24 |O|, so two such results within twice that; lse within
            # attention's 4e-6 (1 + |lse|) each, plus one ULP
            self.assertTrue(np.all(got[0][:, :, 2] == 0), "a row with no visible key is zeros")
            self.assertTrue(np.all(np.isneginf(lse[0][:, :, 2])))
            v = inputs()[2]
            bound = 2 * 1e-5 * np.abs(v).max() + 2.0 ** -24 * np.abs(want).max()
            np.testing.assert_allclose(got[0], want, rtol=0, atol=bound)
            finite = np.isfinite(want_lse)
            np.testing.assert_array_equal(np.isfinite(lse[0]), finite)
            a = np.abs(want_lse[finite])
            self.assertTrue(np.all(np.abs(lse[0][finite] - want_lse[finite])
                                   <= 8e-6 * (1 + a) + np.spacing(a)))
        self.assertTrue(same_bytes(results[1], results[2]), "threads=1 and threads=2 differ")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        rank, world, port, outdir, threads = sys.argv[2:7]
        worker(int(rank), int(world), int(port), outdir, int(threads))
    else:
        unittest.main()
