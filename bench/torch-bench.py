#!/usr/bin/python3
"""The same shapes as bench_peak, in PyTorch on one thread: the code a
user of the PyTorch PositionalEncoding module and of torch.nn would
otherwise run.  Prints JSON on stdout for bench/report.py.

Usage: /usr/bin/python3 bench/torch-bench.py [--min-time S] [--repetitions N]
                                              [--filter REGEX] [--quick]

Debian's python3-torch (1.13) lives under /usr/bin/python3, not under a
pyenv or venv interpreter.  torch.set_num_threads(1): bench_peak is
single-threaded, so is every baseline.

Timings: per case, the number of calls is calibrated so one repetition
lasts at least --min-time seconds, then --repetitions repetitions give the
median, min and max seconds per call, wall clock (time.perf_counter) and
CPU time (time.process_time), as bench_peak's real_time and cpu_time.
Names and shapes are bench_peak's (family/torch/arg:val/...), so the report
pairs them:
  pe_table   PositionalEncoding.__init__'s table (float32 formula)
  embedding  nn.Embedding(ids) * sqrt(d_model) + pe[P:P+S]  (fly:0 only; P = pos0,
             0 unless the name says)
  pe_add     PositionalEncoding.forward(): x + pe[:, :S] (out of place, as written)
  softmax    x.softmax(-1); causal: x.masked_fill(mask, -inf).softmax(-1),
             H heads of L x L
  layernorm  F.layer_norm(x + r, (d,), gamma, beta, 1e-5)
  exp        torch.exp(x, out=y)
  attention  q @ k^T * scale, masked_fill for causal, softmax, @ v on
             [H, L, 64] tensors (torch 1.13 has no scaled_dot_product_attention;
             nn.MultiheadAttention adds the projections, so it is not the
             same computation); warm K/V only (cold:0)
Accuracy: the float32 result against the same computation in float64
(torch's own float64 path as the oracle), max abs and ULP as peak_accuracy
counts them, on inputs of the same distributions (not the same bits).
"""

import argparse
import json
import math
import re
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--min-time", type=float, default=0.1)
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--filter", default="")
    p.add_argument("--quick", action="store_true", help="small accuracy samples")
    return p.parse_args(argv)


# ---- the shapes (bench_peak's lists) -------------------------------------------------

PE_SHAPES = [(5000, 512), (50, 512), (128, 768), (512, 768), (1024, 768), (2048, 768),
             (4096, 768)]
# (batch, seq_len, d_model, pos0)
EMBEDDING_SHAPES = [(2, 50, 512, 0), (1, 128, 768, 0), (1, 512, 768, 0), (1, 1024, 768, 0),
                    (1, 4096, 768, 0), (64, 512, 512, 0), (1, 1, 768, 2047), (32, 1, 768, 2047)]
PE_ADD_SHAPES = [(2, 50, 512), (1, 128, 768), (1, 512, 768), (1, 1024, 768), (1, 2048, 768),
                 (1, 4096, 768), (32, 512, 768)]
# (heads, L)
SOFTMAX_SHAPES = [(8, 128), (8, 512), (8, 1024), (8, 2048), (12, 128), (12, 512), (12, 1024),
                  (12, 4096)]
LAYERNORM_SHAPES = [(100, 512), (128, 768), (512, 768), (1024, 768), (4096, 512),
                    (4096, 768), (65536, 512), (65536, 768)]
EXP_SIZES = [4096, 65536, 1 << 20, 1 << 24]
# (H, Lq, Lk, causal), cold:0 only
ATTENTION_SHAPES = [(8, 128, 128, 0), (8, 128, 128, 1), (8, 512, 512, 0), (8, 512, 512, 1),
                    (8, 2048, 2048, 0), (8, 2048, 2048, 1), (8, 4096, 4096, 0),
                    (8, 4096, 4096, 1), (12, 128, 128, 0), (12, 512, 512, 0),
                    (12, 1024, 1024, 0), (12, 1024, 1024, 1), (8, 50, 512, 0), (8, 1, 2048, 0)]


def positional_encoding_table(torch, max_len, d_model):
    """The float32 table the PyTorch PositionalEncoding module's __init__
    builds, line for line."""
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def cases(torch):
    """Yields (name, fn): fn() runs one call; setup happens here, untimed."""
    F = torch.nn.functional
    g = torch.Generator().manual_seed(1)
    for n_pos, d in PE_SHAPES:
        yield f"pe_table/torch/seq_len:{n_pos}/d_model:{d}", (
            lambda n_pos=n_pos, d=d: positional_encoding_table(torch, n_pos, d))
    for b, s, d, p0 in EMBEDDING_SHAPES:
        emb = torch.nn.Embedding(32000, d)
        ids = torch.randint(0, 32000, (b, s), generator=g)
        pe = positional_encoding_table(torch, p0 + s, d)
        scale = math.sqrt(d)

        def embedding(emb=emb, ids=ids, pe=pe, scale=scale, s=s, p0=p0):
            with torch.no_grad():
                return emb(ids) * scale + pe[p0:p0 + s]
        pos = f"/pos0:{p0}" if p0 else ""
        yield f"embedding/torch/batch:{b}/seq_len:{s}/d_model:{d}{pos}/fly:0", embedding
    for b, s, d in PE_ADD_SHAPES:
        x = torch.randn(b, s, d, generator=g)
        pe = positional_encoding_table(torch, s, d).unsqueeze(0)
        yield f"pe_add/torch/batch:{b}/seq_len:{s}/d_model:{d}/fly:0", (
            lambda x=x, pe=pe, s=s: x + pe[:, :s])
    for h, L in SOFTMAX_SHAPES:
        x = torch.randn(h, L, L, generator=g) * 3.0
        mask = torch.ones(L, L, dtype=torch.bool).triu(1)
        yield f"softmax/torch/heads:{h}/L:{L}/causal:0", (lambda x=x: x.softmax(-1))
        yield f"softmax/torch/heads:{h}/L:{L}/causal:1", (
            lambda x=x, mask=mask: x.masked_fill(mask, -math.inf).softmax(-1))
    for rows, d in LAYERNORM_SHAPES:
        x = torch.rand(rows, d, generator=g) * 5 - 2
        r = torch.rand(rows, d, generator=g) * 2 - 1
        gamma = torch.rand(d, generator=g) + 0.5
        beta = torch.rand(d, generator=g) * 2 - 1
        yield f"layernorm/torch/rows:{rows}/d_model:{d}", (
            lambda x=x, r=r, gamma=gamma, beta=beta, d=d:
            F.layer_norm(x + r, (d,), gamma, beta, 1e-5))
    for n in EXP_SIZES:
        x = torch.rand(n, generator=g) * 175 - 87
        y = torch.empty(n)
        yield f"exp/torch/n:{n}", (lambda x=x, y=y: torch.exp(x, out=y))
    for h, lq, lk, causal in ATTENTION_SHAPES:
        q = torch.rand(h, lq, 64, generator=g) * 2 - 1
        k = torch.rand(h, lk, 64, generator=g) * 2 - 1
        v = torch.rand(h, lk, 64, generator=g) * 2 - 1
        mask = torch.ones(lq, lk, dtype=torch.bool).triu(1) if causal else None

        def attention(q=q, k=k, v=v, mask=mask):
            s = torch.matmul(q, k.transpose(-1, -2)) * 0.125
            if mask is not None:
                s.masked_fill_(mask, -math.inf)
            return torch.matmul(s.softmax(-1), v)
        yield f"attention/torch/H:{h}/Lq:{lq}/Lk:{lk}/causal:{causal}/cold:0", attention


def summary(xs):
    xs = sorted(xs)
    n = len(xs)
    med = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    return {"median_s": med, "min_s": xs[0], "max_s": xs[-1]}


def time_case(fn, min_time, reps):
    """Seconds per call, wall clock (perf_counter) and this process's CPU
    time (process_time: one thread computes, so it is that thread's),
    as bench_peak reports real_time and cpu_time."""
    fn()  # warm up: allocations, first-touch, lazy init
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time / 4 or n >= 1 << 20:
            break
        n *= 4 if t < min_time / 40 else 2
    n = max(1, int(math.ceil(n * min_time / max(t, 1e-9))))
    real, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        cpu.append((time.process_time() - c0) / n)
        real.append((time.perf_counter() - t0) / n)
    return {"real": summary(real), "cpu": summary(cpu), "iterations": n, "repetitions": reps}


# ---- accuracy ------------------------------------------------------------------------

def ulp_of(np, v):
    v = np.abs(v)
    e = np.floor(np.log2(np.maximum(v, 2.0 ** -126)))
    return np.where(v < 2.0 ** -126, 2.0 ** -149, 2.0 ** (e - 23))


def errs(np, got, want, rowwise=False):
    got = got.astype(np.float64)
    err = np.abs(got - want)
    if rowwise:
        u = ulp_of(np, np.max(np.abs(want), axis=-1, keepdims=True))
    else:
        u = ulp_of(np, want)
    nz = want != 0
    rel = float((err[nz] / np.abs(want[nz])).max()) if nz.any() else 0.0
    return float(err.max()), float((err / u).max()), rel


def accuracy(torch, quick):
    import numpy as np
    F = torch.nn.functional
    out = []
    g = torch.Generator().manual_seed(2)

    def add(family, shape, got, want, rowwise=False, note=None):
        a, u, rel = errs(np, got.numpy(), want.numpy(), rowwise)
        e = {"family": family, "variant": "torch", "shape": shape, "max_abs": a, "max_ulp": u,
             "max_rel": rel}
        if note:
            e["note"] = note
        out.append(e)

    # pe_table: PositionalEncoding's float32 table against the exact formula in float64
    n_pos, d = 5000, 512
    pos = torch.arange(0, n_pos, dtype=torch.float64).unsqueeze(1)
    w = torch.pow(torch.tensor(10000.0, dtype=torch.float64),
                  -torch.arange(0, d, 2, dtype=torch.float64) / d)
    exact = torch.zeros(n_pos, d, dtype=torch.float64)
    exact[:, 0::2] = torch.sin(pos * w)
    exact[:, 1::2] = torch.cos(pos * w)
    add("pe_table", "seq_len:5000/d_model:512", positional_encoding_table(torch, n_pos, d), exact,
        note="PositionalEncoding's float32 formula")
    # exp over the normal range
    n = 1 << (16 if quick else 20)
    x = torch.linspace(-87.3, 88.7, n, dtype=torch.float32)
    add("exp", "x:[-87.3,88.7]", torch.exp(x), torch.exp(x.double()))
    # softmax
    for L in (128, 512, 2048):
        rows = 16 if quick else max(256, L // 2)
        x = torch.randn(rows, L, generator=g) * 3.0
        mask = torch.ones(rows, L, dtype=torch.bool).triu(1)
        add("softmax", f"L:{L}/causal:0", x.softmax(-1), x.double().softmax(-1))
        add("softmax", f"L:{L}/causal:1", x.masked_fill(mask, -math.inf).softmax(-1),
            x.double().masked_fill(mask, -math.inf).softmax(-1))
    # layernorm
    rows, d = (16 if quick else 256), 768
    x = torch.rand(rows, d, generator=g) * 5 - 2
    r = torch.rand(rows, d, generator=g) * 2 - 1
    gamma = torch.rand(d, generator=g) + 0.5
    beta = torch.rand(d, generator=g) * 2 - 1
    s64 = x.double() + r.double()
    add("layernorm", f"rows:{rows}/d_model:{d}", F.layer_norm(x + r, (d,), gamma, beta, 1e-5),
        F.layer_norm(s64, (d,), gamma.double(), beta.double(), 1e-5), rowwise=True,
        note="ULP of the row's max |y|")
    # embedding and pe_add: exact PE and float64 arithmetic as the oracle
    b, s, d = 2, 50, 512
    emb = torch.nn.Embedding(1000, d)
    ids = torch.randint(0, 1000, (b, s), generator=g)
    pe32 = positional_encoding_table(torch, s, d)
    with torch.no_grad():
        got = emb(ids) * math.sqrt(d) + pe32
        want = emb.weight.double()[ids] * math.sqrt(d) + exact[:s]
    add("embedding", f"batch:{b}/seq_len:{s}/d_model:{d}/fly:0", got, want, rowwise=True,
        note="PositionalEncoding's float32 PE; ULP of the row's max |y|")
    xa = torch.rand(b, s, d, generator=g) * 2 - 1
    add("pe_add", f"batch:{b}/seq_len:{s}/d_model:{d}/fly:0", xa + pe32.unsqueeze(0),
        xa.double() + exact[:s].unsqueeze(0), rowwise=True,
        note="PositionalEncoding's float32 PE; ULP of the row's max |y|")
    # attention
    for h, lq, lk, causal in ((8, 128, 128, 0), (8, 128, 128, 1), (8, 1, 2048, 0)):
        q = torch.rand(h, lq, 64, generator=g) * 2 - 1
        k = torch.rand(h, lk, 64, generator=g) * 2 - 1
        v = torch.rand(h, lk, 64, generator=g) * 2 - 1
        mask = torch.ones(lq, lk, dtype=torch.bool).triu(1) if causal else None

        def attention(q, k, v):
            sc = torch.matmul(q, k.transpose(-1, -2)) * 0.125
            if mask is not None:
                sc = sc.masked_fill(mask, -math.inf)
            return torch.matmul(sc.softmax(-1), v)
        add("attention", f"H:{h}/Lq:{lq}/Lk:{lk}/causal:{causal}", attention(q, k, v),
            attention(q.double(), k.double(), v.double()), rowwise=True,
            note="matmul-softmax-matmul; ULP of the row's max |O|")
    return out


def main(argv):
    args = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"error": f"no torch: {e}"}))
        return 0
    torch.set_num_threads(1)
    cfg = torch.__config__.show()
    cap = re.search(r"CPU capability usage: (\S+)", cfg)
    ctx = {"torch_version": torch.__version__, "threads": torch.get_num_threads(),
           "cpu_capability": cap.group(1) if cap else "?",
           "python": sys.version.split()[0], "min_time_s": args.min_time,
           "repetitions": args.repetitions}
    flt = re.compile(args.filter) if args.filter else None
    results = []
    with torch.no_grad():
        for name, fn in cases(torch):
            if flt and not flt.search(name):
                continue
            r = time_case(fn, args.min_time, args.repetitions)
            r["name"] = name
            results.append(r)
            print(f"torch-bench: {name}: {r['real']['median_s'] * 1e6:.1f} us "
                  f"(cpu {r['cpu']['median_s'] * 1e6:.1f} us)", file=sys.stderr)
        acc = accuracy(torch, args.quick)
    json.dump({"context": ctx, "benchmarks": results, "accuracy": acc}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
