#!/usr/bin/env python3
"""peak against PyTorch 2.x's scaled_dot_product_attention and ONNX Runtime's
MultiHeadAttention / GroupQueryAttention, at equal thread counts, in one
process, calls interleaved.  Prints JSON on stdout (or --out) and a table on
stderr; bench/report.py reads the JSON (--peers).

Run it with the peers venv's interpreter (scripts/peers-venv.sh makes it):
  .venv-peers/bin/python bench/peers-bench.py [--threads 1,2] [--filter REGEX]
      [--repetitions N] [--min-time S] [--out FILE] [--quick]

peak: the checkout's python/ package, with the library from $PEAK_LIBRARY,
else the first of build/, build-bench/ that holds libpeak.so.4 (the package's
own search then applies).  torch is required; onnxruntime (and onnx, to build
the one-node models) is optional: without it the ONNX Runtime columns are
left out, with a note.

The shapes (SHAPES below; B = 1 and head_dim 64 unless named):
  self H8 L512, BERT-base H12 L512, self H8 L2048, causal H8 L2048, causal
  H8 L4096, cross H8 Lq50 Lk512, GQA 32/8 causal L1024, decode H8 Lk2048,
  decode GQA 32/8 Lk8192, batch 8 H12 L128; and softmax H12 L512 unmasked.
  All bfloat16 (BF16_SHAPES; needs ml_dtypes): self H8 L2048 and decode GQA
  32/8 Lk8192, Q, K, V and O bfloat16 for both, torch's tensors and peak's
  ml_dtypes arrays holding the same bits (no ONNX Runtime column).
Layouts: each peer gets its natural layout and peak runs on the very same
arrays in that layout, so every ratio compares like with like:
  torch  [B, H, L, D] (scaled_dot_product_attention's); peak layout="bhld"
  ORT    [B, L, H*D] (MultiHeadAttention's and GroupQueryAttention's 3-D
         query/key/value, i.e. [B, L, H, D]); peak layout="blhd"
  decode: the K/V cache is [B, Hkv, Lk, D] for all three (ORT's BNSH
         key/value, or GroupQueryAttention's past_key/past_value sharing its
         buffer with present_key/present_value); the same cache arrays are
         read by every implementation, so they are equally warm.
What each call does:
  peak   peak.attention(q, k, v, layout, causal, out=o, threads=n) into a
         preallocated o (peak.softmax(x, out=y, threads=n))
  torch  torch.set_num_threads(n); F.scaled_dot_product_attention(q, k, v,
         is_causal, enable_gqa) under torch.inference_mode() (GQA: K/V
         repeated with repeat_interleave inside the call when the torch
         build lacks enable_gqa); it allocates its output (no out= in its
         API); torch.softmax(x, -1, out=y) into a preallocated y
  ORT    a one-node com.microsoft model (MultiHeadAttention, num_heads,
         unidirectional for causal; GQA shapes: GroupQueryAttention, which
         is always causal, with seqlens_k and total_sequence_length), one
         session per thread count (intra_op_num_threads = n,
         inter_op_num_threads = 1, sequential, session.force_spinning_stop
         so that its workers stop spinning when a run ends instead of
         taking a core from the next library: --ort-spinning leaves ORT's
         default), run through an IOBinding on the numpy arrays (no copies
         in or out); softmax: the ONNX Softmax op
Timing: per shape and thread count, a few warm-up calls of each, then
--repetitions rounds; each round times one sample of each implementation in
turn (peak, torch, peak in ORT's layout, ORT, then the next round), a
sample being k back-to-back calls (k calibrated so a sample lasts at least
--min-time), wall clock (time.perf_counter), seconds per call.  Between
samples the process sleeps --gap seconds (untimed), so that one library's
spinning workers (OpenMP's, ORT's, peak's pthreadpool) have gone quiet
before the next one runs.  pthreadpool's workers spin for milliseconds
after a call: with 2 ms between samples, torch's 2-thread softmax (H12
L512) took 1.7 ms after a sample of peak's pooled calls against 0.85 ms
alone; with 20 ms, 0.88 ms (Sapphire Rapids, 2 cores).  Hence 50 ms.
Reported: median, min and max seconds per call; speed-ups as the peer's
median over peak's (> 1: peak is faster); every output's max abs
difference from torch's, against a bound of 1e-4 * max|V|.

The logit options (family "logits"; peak_logits) at H8 L2048 causal, one
option each, against torch doing the same without a fused kernel:
  alibi    SDPA with attn_mask = the ALiBi bias + causal -inf, [1, 8, 2048,
           2048] float32 made once outside the timing (peak: alibi="causal",
           peak_alibi_slopes' slopes)
  softcap  the long way: matmul, cap * tanh(s / cap) (cap 30), + the causal
           mask, softmax, matmul (peak: softcap=30)
  sinks    the long way: matmul, + the causal mask, a column of the sinks
           concatenated, softmax, the column dropped, matmul (peak: sinks=)

RoPE (the JSON's "rope" list; needs transformers; --filter rope runs only
these), against Hugging Face transformers' Llama code at rope_theta 10000,
head_dim 128, each call timed as above:
  rope-apply-q32-k8-l4096  modeling_llama.apply_rotary_pos_emb(q, k, cos,
         sin) on q [1, 32, 4096, 128], k [1, 8, 4096, 128] (cos/sin from
         LlamaRotaryEmbedding, given), against peak_rope_apply on the same
         arrays (strides of [B, H, L, D]), Q then K, out of place into
         preallocated arrays: from a cache holding HF's own cos/sin rows
         (peak.h: then HF's bits exactly) and on the fly in HF_F32 mode
         (within 2 ulp of HF's cos/sin); also hf_emb: HF's
         LlamaRotaryEmbedding.forward plus apply_rotary_pos_emb
  rope-cache-131072x128   LlamaRotaryEmbedding.forward for positions
         0 .. 131071 (float32 cos and sin, [1, 131072, 128] each) against
         peak_rope_cache's [131072, 128] table in HF_F32 mode (checked within
         2 ulp of HF's) and EXACT mode (within 2^-22 of float64 cos/sin)
  peak: the binding's rope_apply (layout "bhld") / rope_cache, on a
  ThreadPool of n workers.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name, B, H, Hkv, Lq, Lk, causal, kind, what
SHAPES = [
    ("self-h8-l512", 1, 8, 8, 512, 512, False, "self", "self-attention H8 L512"),
    ("bert-base-h12-l512", 1, 12, 12, 512, 512, False, "self", "BERT-base H12 L512"),
    ("self-h8-l2048", 1, 8, 8, 2048, 2048, False, "self", "self-attention H8 L2048"),
    ("causal-h8-l2048", 1, 8, 8, 2048, 2048, True, "self", "causal H8 L2048"),
    ("causal-h8-l4096", 1, 8, 8, 4096, 4096, True, "self", "causal H8 L4096"),
    ("cross-h8-lq50-lk512", 1, 8, 8, 50, 512, False, "cross", "cross H8 Lq50 Lk512"),
    ("gqa-32-8-causal-l1024", 1, 32, 8, 1024, 1024, True, "self", "GQA 32/8 causal L1024"),
    ("decode-h8-lk2048", 1, 8, 8, 1, 2048, False, "decode", "decode H8 Lk2048 (K/V cache)"),
    ("decode-gqa-32-8-lk8192", 1, 32, 8, 1, 8192, False, "decode",
     "decode GQA 32/8 Lk8192 (K/V cache)"),
    ("batch8-h12-l128", 8, 12, 12, 128, 128, False, "self", "batch 8 H12 L128"),
]
SOFTMAX_SHAPES = [("softmax-h12-l512", 1, 12, 512, "softmax H12 L512 unmasked")]
BF16_SHAPES = [
    ("bf16-self-h8-l2048", 1, 8, 8, 2048, 2048, False, "self",
     "all bfloat16 self-attention H8 L2048"),
    ("bf16-decode-gqa-32-8-lk8192", 1, 32, 8, 1, 8192, False, "decode",
     "all bfloat16 decode GQA 32/8 Lk8192 (K/V cache)"),
]
# Outputs rounded to bfloat16 by both: apart by at most about one of its
# ulps at max|V| (2^-8 relative), so twice that.
BF16_TOL = 2.0 ** -7
# The logit options (peak_logits) at H8 L2048 causal, against torch doing
# the same with a materialised [1, H, L, L] bias or the long way (its SDPA
# has none of them): name, option, what
LOGIT_CASES = [
    ("alibi-causal-h8-l2048", "alibi", "ALiBi causal H8 L2048"),
    ("softcap-causal-h8-l2048", "softcap", "soft-cap 30 causal H8 L2048"),
    ("sinks-causal-h8-l2048", "sinks", "sinks causal H8 L2048"),
]
LOGIT_L, LOGIT_H, SOFTCAP = 2048, 8, 30.0
D = 64
GOALS = {"attention": 1.3, "softmax": 1.5, "logits": 2.0, "bf16": 1.3}
TOL = 1e-4  # max abs difference from torch, relative to max|V| (softmax: to 1)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--filter", default="", help="regex on the shape names")
    p.add_argument("--repetitions", type=int, default=11, help="samples per implementation "
                   "(>= 7)")
    p.add_argument("--min-time", type=float, default=0.01, help="seconds per sample, at least")
    p.add_argument("--warmup", type=int, default=2, help="warm-up calls of each")
    p.add_argument("--gap", type=float, default=0.05, help="idle seconds between samples")
    p.add_argument("--no-ort", action="store_true", help="leave ONNX Runtime out")
    p.add_argument("--ort-spinning", action="store_true",
                   help="let ORT's workers spin on after a run (its default)")
    p.add_argument("--quick", action="store_true",
                   help="7 repetitions of >= 2 ms: checks the pipeline, not for publishing")
    p.add_argument("--out", help="write the JSON here instead of stdout")
    a = p.parse_args(argv)
    if a.quick:
        a.repetitions, a.min_time = 7, 0.002
    if a.repetitions < 7:
        p.error("--repetitions: at least 7")
    a.threads = [int(t) for t in a.threads.split(",") if t.strip()]
    return a


def log(*args):
    print(*args, file=sys.stderr, flush=True)


# ---- the libraries ------------------------------------------------------------------

def import_peak():
    """The checkout's binding; the library from PEAK_LIBRARY or a build dir."""
    if not os.environ.get("PEAK_LIBRARY"):
        for d in ("build", "build-bench"):
            for name in ("libpeak.so.4", "libpeak.so"):
                lib = os.path.join(ROOT, d, name)
                if os.path.exists(lib):
                    os.environ["PEAK_LIBRARY"] = lib
                    break
            if os.environ.get("PEAK_LIBRARY"):
                break
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import peak
    return peak


def import_ort(no_ort):
    if no_ort:
        return None, None, "left out (--no-ort)"
    try:
        import onnx
        import onnxruntime
    except ImportError as e:
        return None, None, f"not importable ({e})"
    return onnx, onnxruntime, None


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        m = re.search(r"^Model name:\s*(.*)$", out, re.M)
        if m:
            return m.group(1).strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def loadavg():
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


# ---- peak's threads ---------------------------------------------------------------------

class PeakThreads:
    """The keyword arguments that run a peak call on n threads: a pool made
    once per count when the binding has pool objects, else threads=n."""

    def __init__(self, peak):
        self.peak = peak
        self.pools = {}

    def kwargs(self, n):
        peak = self.peak
        cls = getattr(peak, "ThreadPool", None)
        if cls is not None:
            if n not in self.pools:
                self.pools[n] = cls(n)
            return {"pool": self.pools[n]}
        return {"threads": n}

    def close(self):
        for pool in self.pools.values():
            close = getattr(pool, "close", None)
            if close is not None:
                close()
        self.pools.clear()


# ---- ONNX Runtime models ------------------------------------------------------------------

class Ort:
    def __init__(self, onnx, ort, spinning=False):
        self.onnx, self.ort = onnx, ort
        self.spinning = spinning
        self.sessions = {}

    def session(self, key, build, n):
        if (key, n) not in self.sessions:
            model = build()
            so = self.ort.SessionOptions()
            so.intra_op_num_threads = n
            so.inter_op_num_threads = 1
            so.execution_mode = self.ort.ExecutionMode.ORT_SEQUENTIAL
            so.log_severity_level = 3
            if not self.spinning:
                # ORT's workers spin after a run by default, taking a core
                # from whichever library runs next; they still spin within
                # a run
                so.add_session_config_entry("session.force_spinning_stop", "1")
            self.sessions[(key, n)] = self.ort.InferenceSession(
                model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return self.sessions[(key, n)]

    def model(self, node, inputs, outputs):
        h = self.onnx.helper
        f32 = self.onnx.TensorProto.FLOAT
        i32 = self.onnx.TensorProto.INT32

        def vi(name, shape, dtype):
            return h.make_tensor_value_info(name, i32 if dtype == "int32" else f32, shape)
        graph = h.make_graph([node], node.op_type, [vi(*i) for i in inputs],
                             [vi(*o) for o in outputs])
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17),
                                               h.make_opsetid("com.microsoft", 1)])
        m.ir_version = min(m.ir_version, 9)  # what ORT releases of 2023 on read
        return m

    def binding(self, sess, inputs, outputs):
        """An IOBinding on numpy arrays, no copies: inputs, outputs are
        {name: ndarray}; an output array that is also an input (a KV buffer
        shared between past and present) is bound to the same OrtValue."""
        io = sess.io_binding()
        vals = {}
        for name, a in inputs.items():
            vals[id(a)] = self.ort.OrtValue.ortvalue_from_numpy(a)
            io.bind_ortvalue_input(name, vals[id(a)])
        for name, a in outputs.items():
            ov = vals.get(id(a)) or self.ort.OrtValue.ortvalue_from_numpy(a)
            io.bind_ortvalue_output(name, ov)
        return io, vals


# ---- the cases ----------------------------------------------------------------------------

def torch_sdpa(torch, tq, tk, tv, causal, notes):
    """torch's SDPA on [B, H, L, D] tensors as a call returning O: GQA
    (fewer K/V heads) through enable_gqa, or, in a torch without it, K/V
    repeated with repeat_interleave inside the call (said in notes)."""
    F = torch.nn.functional
    r = tq.shape[1] // tk.shape[1]
    if r > 1 and "enable_gqa" not in (F.scaled_dot_product_attention.__doc__ or ""):
        notes.append("torch: no enable_gqa; K/V repeated with repeat_interleave in the call")

        def fn():
            with torch.inference_mode():
                return F.scaled_dot_product_attention(
                    tq, tk.repeat_interleave(r, dim=1), tv.repeat_interleave(r, dim=1),
                    is_causal=causal)
        return fn
    gqa = {"enable_gqa": True} if r > 1 else {}

    def fn():
        with torch.inference_mode():
            return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, **gqa)
    return fn


def attention_case(sh, n, np, torch, peak, pt, orts, data):
    """(impls, check, notes): impls is a list of (label, fn) run in turn."""
    name, B, H, Hkv, Lq, Lk, causal, kind, _ = sh
    q, k, v, q3, k3, v3 = data
    notes = []
    # torch: [B, H, L, D]; peak on the same arrays
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    torch_fn = torch_sdpa(torch, tq, tk, tv, causal, notes)
    kw = pt.kwargs(n)
    o_bhld = np.empty((B, H, Lq, D), np.float32)

    def peak_fn():
        return peak.attention(q, k, v, layout="bhld", causal=causal, out=o_bhld, **kw)
    impls = [("peak", peak_fn), ("torch", torch_fn)]
    results = {"peak": lambda: o_bhld}
    state = {}

    def torch_keep():
        state["torch"] = torch_fn()
        return state["torch"]
    impls[1] = ("torch", torch_keep)
    results["torch"] = lambda: state["torch"].numpy()

    if orts is not None:
        # peak in ORT's layout, on ORT's arrays: [B, L, H, D] views of [B, L, H*D]
        o3 = np.empty((B, Lq, H * D), np.float32)
        q4 = q3.reshape(B, Lq, H, D)
        if kind == "decode":
            k4, v4 = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # the [B,Hkv,Lk,D] cache
        else:
            k4, v4 = k3.reshape(B, Lk, Hkv, D), v3.reshape(B, Lk, Hkv, D)
        o4 = o3.reshape(B, Lq, H, D)

        def peak_blhd():
            return peak.attention(q4, k4, v4, layout="blhd", causal=causal, out=o4, **kw)
        results["peak_ort_layout"] = lambda: o4.transpose(0, 2, 1, 3)
        ort_fn, note = ort_attention(orts, sh, n, np, q, k, v, q3, k3, v3, o3)
        if note:
            notes.append(note)
        impls.append(("peak_ort_layout", peak_blhd))
        if ort_fn is not None:
            impls.append(("ort", ort_fn))
            results["ort"] = lambda: o3.reshape(B, Lq, H, D).transpose(0, 2, 1, 3)
    bound = TOL * float(np.abs(v).max())
    return impls, results, bound, notes


def ort_attention(orts, sh, n, np, q, k, v, q3, k3, v3, o3):
    """(fn, note): one ORT call on the shape, or (None, why)."""
    name, B, H, Hkv, Lq, Lk, causal, kind, _ = sh
    h = orts.onnx.helper
    if Hkv == H:
        # MultiHeadAttention; decode: key/value are the [B, H, Lk, D] cache (BNSH)
        kshape = [B, H, Lk, D] if kind == "decode" else [B, Lk, H * D]
        node = h.make_node("MultiHeadAttention", ["query", "key", "value"], ["output"],
                           domain="com.microsoft", num_heads=H, unidirectional=int(causal))
        ins = [("query", [B, Lq, H * D], "f"), ("key", kshape, "f"), ("value", kshape, "f")]
        outs = [("output", [B, Lq, H * D], "f")]
        try:
            sess = orts.session(("mha", name), lambda: orts.model(node, ins, outs), n)
        except Exception as e:  # noqa: BLE001 - ORT raises its own types
            return None, f"ORT MultiHeadAttention: session failed ({e})"
        kk, vv = (k, v) if kind == "decode" else (k3, v3)
        io, _ = orts.binding(sess, {"query": q3, "key": kk, "value": vv}, {"output": o3})
        note = ("ORT: MultiHeadAttention" + (" unidirectional=1" if causal else "") +
                (", key/value the BNSH cache" if kind == "decode" else ""))
        return (lambda: sess.run_with_iobinding(io)), note
    # GroupQueryAttention: always causal (bottom-right), K/V through past/present
    if not causal and kind != "decode":
        return None, "ORT: GroupQueryAttention is causal only; not run"
    gq = ["query", "key", "value", "past_key", "past_value", "seqlens_k",
          "total_sequence_length"]
    node = h.make_node("GroupQueryAttention", gq, ["output", "present_key", "present_value"],
                       domain="com.microsoft", num_heads=H, kv_num_heads=Hkv)
    if kind == "decode":
        # past_key/past_value: the [B, Hkv, Lk, D] cache itself, shared with
        # present_*; the new token (position Lk - 1) is written into it by
        # ORT with the values it already holds
        P = Lk
        knew = np.ascontiguousarray(k[:, :, Lk - 1:, :].transpose(0, 2, 1, 3)).reshape(B, 1, -1)
        vnew = np.ascontiguousarray(v[:, :, Lk - 1:, :].transpose(0, 2, 1, 3)).reshape(B, 1, -1)
        past_k, past_v = k, v
        seqlens = np.full((B,), Lk - 1, np.int32)
    else:
        P = 0
        knew, vnew = k3, v3
        past_k = np.zeros((B, Hkv, 0, D), np.float32)
        past_v = np.zeros((B, Hkv, 0, D), np.float32)
        seqlens = np.full((B,), Lk - 1, np.int32)
    total = np.array(Lk, np.int32)
    pres_k = past_k if kind == "decode" else np.empty((B, Hkv, Lk, D), np.float32)
    pres_v = past_v if kind == "decode" else np.empty((B, Hkv, Lk, D), np.float32)
    ins = [("query", [B, Lq, H * D], "f"), ("key", [B, Lq, Hkv * D], "f"),
           ("value", [B, Lq, Hkv * D], "f"), ("past_key", [B, Hkv, P, D], "f"),
           ("past_value", [B, Hkv, P, D], "f"), ("seqlens_k", [B], "int32"),
           ("total_sequence_length", [], "int32")]
    outs = [("output", [B, Lq, H * D], "f"), ("present_key", [B, Hkv, Lk, D], "f"),
            ("present_value", [B, Hkv, Lk, D], "f")]
    try:
        sess = orts.session(("gqa", name), lambda: orts.model(node, ins, outs), n)
        io, _ = orts.binding(
            sess, {"query": q3, "key": knew, "value": vnew, "past_key": past_k,
                   "past_value": past_v, "seqlens_k": seqlens, "total_sequence_length": total},
            {"output": o3, "present_key": pres_k, "present_value": pres_v})
        sess.run_with_iobinding(io)
    except Exception as e:  # noqa: BLE001
        return None, f"ORT GroupQueryAttention failed ({str(e).splitlines()[0][:200]}); not run"
    note = ("ORT: GroupQueryAttention (causal)" +
            (", past_key/past_value the cache, shared with present_key/present_value"
             if kind == "decode" else ", no past: writes K/V to present_key/present_value"))
    return (lambda: sess.run_with_iobinding(io)), note


def softmax_case(sh, n, np, torch, peak, pt, orts, x):
    name, B, H, L, _ = sh
    tx = torch.from_numpy(x)
    y = np.empty_like(x)
    ty = torch.empty_like(tx)
    kw = pt.kwargs(n)
    state = {}

    def torch_fn():
        # out=: a fresh 12 MB output per call costs torch page faults that
        # would be counted against it
        with torch.inference_mode():
            state["torch"] = torch.softmax(tx, -1, out=ty)

    def peak_fn():
        peak.softmax(x, out=y, **kw)
    impls = [("peak", peak_fn), ("torch", torch_fn)]
    results = {"peak": lambda: y, "torch": lambda: state["torch"].numpy()}
    notes = []
    if orts is not None:
        h = orts.onnx.helper
        node = h.make_node("Softmax", ["x"], ["y"], axis=-1)
        shape = list(x.shape)
        try:
            sess = orts.session(("softmax", name),
                                lambda: orts.model(node, [("x", shape, "f")],
                                                   [("y", shape, "f")]), n)
            y_ort = np.empty_like(x)
            io, _ = orts.binding(sess, {"x": x}, {"y": y_ort})
            impls.append(("ort", lambda: sess.run_with_iobinding(io)))
            results["ort"] = lambda: y_ort
            notes.append("ORT: the ONNX Softmax op (axis -1)")
        except Exception as e:  # noqa: BLE001
            notes.append(f"ORT Softmax failed ({e}); not run")
    return impls, results, TOL, notes


def bf16_case(sh, n, np, torch, peak, pt, data):
    """peak.attention on ml_dtypes bfloat16 arrays against torch's SDPA on
    bfloat16 tensors of the same bits, both writing bfloat16 O ([B, H, L,
    D]; GQA as torch_sdpa calls it)."""
    import ml_dtypes
    name, B, H, Hkv, Lq, Lk, causal, kind, _ = sh
    tq, tk, tv = (torch.from_numpy(a).to(torch.bfloat16) for a in data[:3])
    q, k, v = (t.view(torch.int16).numpy().view(ml_dtypes.bfloat16) for t in (tq, tk, tv))
    notes = ["Q, K, V and O bfloat16 for both; peak's arrays are torch's bits (ml_dtypes)"]
    sdpa = torch_sdpa(torch, tq, tk, tv, causal, notes)
    kw = pt.kwargs(n)
    o = np.empty((B, H, Lq, D), ml_dtypes.bfloat16)
    state = {}

    def torch_fn():
        state["torch"] = sdpa()

    def peak_fn():
        peak.attention(q, k, v, layout="bhld", causal=causal, out=o, **kw)
    impls = [("peak", peak_fn), ("torch", torch_fn)]
    results = {"peak": lambda: o.astype(np.float32),
               "torch": lambda: state["torch"].float().numpy()}
    return impls, results, BF16_TOL * float(np.abs(v.astype(np.float32)).max()), notes


def logits_case(case, n, np, torch, peak, pt, data, slopes, sinks):
    """peak.attention with one logit option against torch: ALiBi through
    SDPA's attn_mask, the bias (ALiBi plus the causal -inf) materialised
    once, outside the timing; the cap and the sinks the long way, scores
    [1, H, L, L] materialised per call (q k^T * scale, cap * tanh(s / cap)
    or a sink column concatenated, + the materialised causal mask,
    softmax, @ v), as a caller of PyTorch's SDPA must."""
    name, option, _ = case
    q, k, v = data[:3]
    L, H = LOGIT_L, LOGIT_H
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    scale = 1.0 / math.sqrt(D)
    i = torch.arange(L).view(L, 1)
    j = torch.arange(L).view(1, L)
    causal = torch.zeros(L, L).masked_fill(j > i, float("-inf"))
    kw = pt.kwargs(n)
    o = np.empty((1, H, L, D), np.float32)
    state = {}
    if option == "alibi":
        dist = (i - j).clamp(min=0).to(torch.float32)
        bias = (-torch.from_numpy(slopes).view(1, H, 1, 1) * dist + causal).contiguous()

        def torch_fn():
            with torch.inference_mode():
                state["torch"] = torch.nn.functional.scaled_dot_product_attention(
                    tq, tk, tv, attn_mask=bias)

        def peak_fn():
            peak.attention(q, k, v, layout="bhld", causal=True, alibi="causal", out=o, **kw)
        notes = ["torch: SDPA with attn_mask = the ALiBi bias + causal -inf, "
                 "[1, 8, 2048, 2048] float32, made once"]
    elif option == "softcap":
        def torch_fn():
            with torch.inference_mode():
                s = torch.matmul(tq, tk.transpose(-1, -2)) * scale
                s = torch.tanh(s / SOFTCAP) * SOFTCAP + causal
                state["torch"] = torch.matmul(torch.softmax(s, -1), tv)

        def peak_fn():
            peak.attention(q, k, v, layout="bhld", causal=True, softcap=SOFTCAP, out=o, **kw)
        notes = ["torch: matmul, tanh, + causal mask, softmax, matmul ([1, 8, 2048, 2048] "
                 "scores per call)"]
    else:
        tsink = torch.from_numpy(sinks).view(1, H, 1, 1).expand(1, H, L, 1)

        def torch_fn():
            with torch.inference_mode():
                s = torch.matmul(tq, tk.transpose(-1, -2)) * scale + causal
                p = torch.softmax(torch.cat([s, tsink], -1), -1)[..., :L]
                state["torch"] = torch.matmul(p, tv)

        def peak_fn():
            peak.attention(q, k, v, layout="bhld", causal=True, sinks=sinks, out=o, **kw)
        notes = ["torch: matmul, + causal mask, a sink column concatenated, softmax, "
                 "the column dropped, matmul"]
    impls = [("peak", peak_fn), ("torch", torch_fn)]
    results = {"peak": lambda: o, "torch": lambda: state["torch"].numpy()}
    return impls, results, TOL * float(np.abs(v).max()), notes


# ---- timing -------------------------------------------------------------------------------

def calibrate(fn, min_time):
    t0 = time.perf_counter()
    fn()
    dt = max(time.perf_counter() - t0, 1e-7)
    return max(1, int(math.ceil(min_time / dt)))


def measure(impls, args):
    for _, fn in impls:
        for _ in range(args.warmup):
            fn()
    inner = {label: calibrate(fn, args.min_time) for label, fn in impls}
    samples = {label: [] for label, _ in impls}
    for _ in range(args.repetitions):
        for label, fn in impls:
            k = inner[label]
            time.sleep(args.gap)
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            samples[label].append((time.perf_counter() - t0) / k)
    return samples, inner


def median(xs):
    xs = sorted(xs)
    m = len(xs)
    return xs[m // 2] if m % 2 else 0.5 * (xs[m // 2 - 1] + xs[m // 2])


def make_data(np, rng, sh):
    name, B, H, Hkv, Lq, Lk, causal, kind, _ = sh
    q = rng.standard_normal((B, H, Lq, D), dtype=np.float32)
    k = rng.standard_normal((B, Hkv, Lk, D), dtype=np.float32)
    v = rng.standard_normal((B, Hkv, Lk, D), dtype=np.float32)

    def blh(a, L, h):  # [B, h, L, D] -> [B, L, h*D], contiguous
        return np.ascontiguousarray(a.transpose(0, 2, 1, 3)).reshape(B, L, h * D)
    return q, k, v, blh(q, Lq, H), blh(k, Lk, Hkv), blh(v, Lk, Hkv)


def run_case(kind, sh, n, impls, results, bound, notes, args, torch, np):
    torch.set_num_threads(n)
    samples, inner = measure(impls, args)
    ref = results["torch"]()
    diffs = {}
    for label in results:
        if label == "torch" or label not in samples:
            continue
        diffs[label] = float(np.abs(results[label]() - ref).max())
    med = {lab: median(s) for lab, s in samples.items()}
    entry = {
        "family": kind, "name": sh[0], "what": sh[-1], "threads": n,
        "median_s": med,
        "min_s": {lab: min(s) for lab, s in samples.items()},
        "max_s": {lab: max(s) for lab, s in samples.items()},
        "samples": {lab: len(s) for lab, s in samples.items()},
        "calls_per_sample": inner,
        "speedup_vs_torch": med["torch"] / med["peak"],
        "max_abs_diff_vs_torch": diffs, "bound": bound,
        "agree": all(d <= bound for d in diffs.values()),
        "notes": notes,
    }
    if "ort" in med:
        entry["speedup_vs_ort"] = med["ort"] / med["peak_ort_layout" if "peak_ort_layout"
                                                    in med else "peak"]
    if kind == "logits":
        entry["shape"] = {"B": 1, "H": LOGIT_H, "Hkv": LOGIT_H, "Lq": LOGIT_L, "Lk": LOGIT_L,
                          "D": D, "causal": True, "kind": "self", "option": sh[1]}
    elif kind in ("attention", "bf16"):
        B, H, Hkv, Lq, Lk, causal = sh[1:7]
        entry["shape"] = {"B": B, "H": H, "Hkv": Hkv, "Lq": Lq, "Lk": Lk, "D": D,
                          "causal": causal, "kind": sh[7]}
        entry["layouts"] = {"peak": "bhld", "torch": "[B,H,L,D]",
                            "peak_ort_layout": "blhd" if sh[7] != "decode" else
                            "blhd (K/V: the [B,Hkv,Lk,D] cache)",
                            "ort": "[B,L,H*D]" if sh[7] != "decode" else
                            "query [B,1,H*D], K/V the [B,Hkv,Lk,D] cache"}
    else:
        B, H, L = sh[1:4]
        entry["shape"] = {"B": B, "H": H, "L": L, "masked": False}
    entry["goal"] = GOALS[kind]
    return entry


def fmt_t(s):
    return f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def print_table(entries):
    log("")
    log(f"{'shape':<24} {'thr':>3} {'peak':>10} {'torch':>10} {'vs torch':>8} "
        f"{'peak blhd':>10} {'ORT':>10} {'vs ORT':>7}  max|diff| / bound")
    for e in entries:
        m = e["median_s"]
        ort = m.get("ort")
        pb = m.get("peak_ort_layout")
        diffs = ", ".join(f"{k} {v:.1e}" for k, v in e["max_abs_diff_vs_torch"].items())
        log(f"{e['name']:<24} {e['threads']:>3} {fmt_t(m['peak']):>10} {fmt_t(m['torch']):>10} "
            f"{e['speedup_vs_torch']:>7.2f}x {fmt_t(pb) if pb else '-':>10} "
            f"{fmt_t(ort) if ort else '-':>10} "
            f"{(format(e['speedup_vs_ort'], '.2f') + 'x') if 'speedup_vs_ort' in e else '-':>7}"
            f"  {diffs} / {e['bound']:.1e}{'' if e['agree'] else '  DISAGREE'}")


# ---- RoPE: Hugging Face transformers' Llama rotary embedding ------------------------------

# name, B, Hq, Hkv, L, head_dim, what
ROPE_APPLY_SHAPES = [
    ("rope-apply-q32-k8-l4096", 1, 32, 8, 4096, 128,
     "RoPE Q [1,32,4096,128] + K [1,8,4096,128], half split"),
]
# name, positions, rotary_dim, what
ROPE_CACHE_SHAPES = [
    ("rope-cache-131072x128", 131072, 128, "RoPE cos/sin table, 131072 positions, rotary_dim 128"),
]
ROPE_GOALS = {"rope_apply": 4.0, "rope_cache": 10.0}
ROPE_THETA = 10000.0


class PeakRope:
    """peak's RoPE calls through the binding (peak.rope_apply, peak.rope_cache)
    on n workers (PeakThreads: a ThreadPool made once per count)."""

    def __init__(self, peak):
        self.peak, self.pt = peak, PeakThreads(peak)

    def apply_call(self, y, x, n, cache=None):
        """Rotates x ([B, H, L, D]) into y: from cache, else HF_F32 on the fly."""
        kw = self.pt.kwargs(n)
        if cache is not None:
            return lambda: self.peak.rope_apply(x, layout="bhld", cache=cache, out=y, **kw)
        return lambda: self.peak.rope_apply(x, layout="bhld", mode="hf", out=y, **kw)

    def cache_call(self, out, n_pos, mode, n):
        """Fills out with the table of positions 0 .. n_pos - 1, mode "hf" or "exact"."""
        kw = self.pt.kwargs(n)
        return lambda: self.peak.rope_cache(n_pos, out.shape[1], mode=mode, out=out, **kw)

    def close(self):
        self.pt.close()


def hf_rotary(torch, head_dim, max_pos):
    """transformers' LlamaRotaryEmbedding for rope_theta 10000, head_dim."""
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama
    cfg = LlamaConfig(vocab_size=32, hidden_size=2 * head_dim, intermediate_size=4 * head_dim,
                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                      head_dim=head_dim, max_position_embeddings=max_pos,
                      rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA})
    return modeling_llama.LlamaRotaryEmbedding(cfg), modeling_llama.apply_rotary_pos_emb


def ulps(np, a, b):
    """Largest distance in float32 ulps between two float32 arrays."""
    def ordered(x):
        i = np.ascontiguousarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return int(np.max(np.abs(ordered(a) - ordered(b))))


def rope_apply_case(sh, n, np, torch, pr, data):
    """peak_rope_apply on Q and K ([B, H, L, D] via strides, out of place
    into preallocated arrays) against transformers' apply_rotary_pos_emb on
    the same tensors; peak's cos/sin from a cache holding HF's own rows, and
    on the fly (HF_F32 mode)."""
    q, k, tq, tk, cos, sin, rotary, apply_rope, pos_ids = data
    half = sh[5] // 2  # head_dim
    cache = np.ascontiguousarray(np.concatenate(
        [cos[0, :, :half].numpy(), sin[0, :, :half].numpy()], axis=1))  # [L, Dh]: HF's rows
    qo, ko = np.empty_like(q), np.empty_like(k)
    q_c, k_c = pr.apply_call(qo, q, n, cache), pr.apply_call(ko, k, n, cache)
    q_f, k_f = pr.apply_call(qo, q, n), pr.apply_call(ko, k, n)
    state = {}

    def peak_cache():
        q_c()
        k_c()

    def peak_fly():
        q_f()
        k_f()

    def hf():
        with torch.inference_mode():
            state["hf"] = apply_rope(tq, tk, cos, sin)

    def hf_emb():
        with torch.inference_mode():
            c, s = rotary(tq, pos_ids)
            state["hf_emb"] = apply_rope(tq, tk, c, s)
    impls = [("peak_cache", peak_cache), ("peak_fly", peak_fly), ("hf", hf),
             ("hf_emb", hf_emb)]

    def check():
        """{label: max abs diff from HF} and {label: bound}: from HF's own
        rows peak must give HF's bits (peak.h); on the fly its cos/sin are
        within 2 ulp of HF's, so (|x| + |x'|) 2^-23 plus the rounding."""
        hq, hk = (t.numpy() for t in state["hf"])
        out = {}
        for label, fn in (("peak_cache", peak_cache), ("peak_fly", peak_fly)):
            fn()
            out[label] = max(float(np.abs(qo - hq).max()), float(np.abs(ko - hk).max()))
        xmax = max(float(np.abs(q).max()), float(np.abs(k).max()))
        return out, {"peak_cache": 0.0, "peak_fly": xmax * 2.0 ** -20}
    return impls, check, ["HF: transformers.models.llama.modeling_llama.apply_rotary_pos_emb"
                          "(q, k, cos, sin) on [B, H, L, D] tensors, cos/sin from "
                          "LlamaRotaryEmbedding; it allocates its outputs",
                          "hf_emb: LlamaRotaryEmbedding.forward for positions 0..L-1, then "
                          "apply_rotary_pos_emb (HF runs the first once per model forward)",
                          "peak: peak.rope_apply(x, layout=\"bhld\", out=y) on the same "
                          "arrays (peak_rope_apply, [b, l, h] strides {H*L*D, D, L*D}), Q then "
                          "K, out of place into preallocated arrays; "
                          "peak_cache reads a [L, 128] cache holding HF's cos/sin rows, "
                          "peak_fly computes them (HF_F32 mode)"]


def rope_cache_case(sh, n, np, torch, pr, rotary, pos_ids):
    _, n_pos, rdim, _ = sh
    hf_out = np.empty((n_pos, rdim), np.float32)
    exact_out = np.empty((n_pos, rdim), np.float32)
    peak_hf = pr.cache_call(hf_out, n_pos, "hf", n)
    peak_exact = pr.cache_call(exact_out, n_pos, "exact", n)
    x = torch.zeros(1, dtype=torch.float32)  # LlamaRotaryEmbedding reads its dtype and device
    state = {}

    def hf():
        with torch.inference_mode():
            state["hf"] = rotary(x, pos_ids)
    impls = [("peak_hf_f32", peak_hf), ("peak_exact", peak_exact), ("hf", hf)]

    def check():
        """HF_F32 against HF's cos/sin in ulps (bound 2); EXACT against
        float64 cos/sin of the exact angle (bound 2^-22)."""
        cos, sin = (t[0, :, :rdim // 2].numpy() for t in state["hf"])
        half = rdim // 2
        u = max(ulps(np, hf_out[:, :half], cos), ulps(np, hf_out[:, half:], sin))
        w = ROPE_THETA ** (-np.arange(0, rdim, 2, dtype=np.float64) / rdim)
        a = np.arange(n_pos, dtype=np.float64)[:, None] * w
        e = max(float(np.abs(exact_out[:, :half] - np.cos(a)).max()),
                float(np.abs(exact_out[:, half:] - np.sin(a)).max()))
        hf_err = max(float(np.abs(cos - np.cos(a)).max()), float(np.abs(sin - np.sin(a)).max()))
        return ({"peak_hf_f32_ulps_vs_hf": u, "peak_exact_vs_float64": e,
                 "hf_vs_float64": hf_err},
                {"peak_hf_f32_ulps_vs_hf": 2, "peak_exact_vs_float64": 2.0 ** -22})
    return impls, check, ["HF: LlamaRotaryEmbedding.forward(x, position_ids 0..n-1) in "
                          "float32 -> cos, sin [1, n, 128] each (both halves; 2x peak's "
                          "bytes)", "peak: peak_rope_cache -> [n, 128] rows of 64 cos then "
                          "64 sin, HF_F32 (HF's float32 program) and EXACT mode"]


def run_rope_case(family, sh, n, impls, check, notes, args, torch):
    torch.set_num_threads(n)
    samples, inner = measure(impls, args)
    diffs, bounds = check()
    med = {lab: median(s) for lab, s in samples.items()}
    if family == "rope_apply":
        speed = {"peak_cache_vs_hf": med["hf"] / med["peak_cache"],
                 "peak_fly_vs_hf": med["hf"] / med["peak_fly"],
                 "peak_fly_vs_hf_emb": med["hf_emb"] / med["peak_fly"]}
        _, B, Hq, Hkv, L, Dh, _ = sh
        shape = {"B": B, "Hq": Hq, "Hkv": Hkv, "L": L, "head_dim": Dh, "layout": "[B,H,L,D]"}
    else:
        speed = {"peak_hf_f32_vs_hf": med["hf"] / med["peak_hf_f32"],
                 "peak_exact_vs_hf": med["hf"] / med["peak_exact"]}
        shape = {"n_pos": sh[1], "rotary_dim": sh[2]}
    return {
        "family": family, "name": sh[0], "what": sh[-1], "threads": n, "shape": shape,
        "median_s": med,
        "min_s": {lab: min(s) for lab, s in samples.items()},
        "max_s": {lab: max(s) for lab, s in samples.items()},
        "samples": {lab: len(s) for lab, s in samples.items()},
        "calls_per_sample": inner, "speedup_vs_hf": speed,
        "diffs": diffs, "bounds": bounds,
        "agree": all(diffs[k] <= b for k, b in bounds.items()),
        "goal": ROPE_GOALS[family], "notes": notes,
    }


def run_rope(args, rx, np, torch, peak, rng):
    entries = []
    todo_a = [s for s in ROPE_APPLY_SHAPES if not rx or rx.search(s[0])]
    todo_c = [s for s in ROPE_CACHE_SHAPES if not rx or rx.search(s[0])]
    if not todo_a and not todo_c:
        return entries
    try:
        import transformers  # noqa: F401
    except ImportError as e:
        log(f"peers-bench: RoPE left out: transformers not importable ({e})")
        return entries
    if not (hasattr(peak, "rope_apply") and hasattr(peak, "rope_cache")):
        log("peers-bench: RoPE left out: this peak binding has no rope_apply / rope_cache")
        return entries
    pr = PeakRope(peak)
    for sh in todo_a:
        _, B, Hq, Hkv, L, Dh, _ = sh
        rotary, apply_rope = hf_rotary(torch, Dh, max(L, 4096))
        q = rng.standard_normal((B, Hq, L, Dh), dtype=np.float32)
        k = rng.standard_normal((B, Hkv, L, Dh), dtype=np.float32)
        tq, tk = torch.from_numpy(q), torch.from_numpy(k)
        pos_ids = torch.arange(L, dtype=torch.int64)[None].expand(B, L)
        with torch.inference_mode():
            cos, sin = rotary(tq, pos_ids)
        data = (q, k, tq, tk, cos, sin, rotary, apply_rope, pos_ids)
        for n in args.threads:
            log(f"peers-bench: {sh[0]}, {n} thread{'s' if n > 1 else ''}")
            impls, check, notes = rope_apply_case(sh, n, np, torch, pr, data)
            entries.append(run_rope_case("rope_apply", sh, n, impls, check, notes, args, torch))
    for sh in todo_c:
        _, n_pos, rdim, _ = sh
        rotary, _ = hf_rotary(torch, rdim, n_pos)
        pos_ids = torch.arange(n_pos, dtype=torch.int64)[None]
        for n in args.threads:
            log(f"peers-bench: {sh[0]}, {n} thread{'s' if n > 1 else ''}")
            impls, check, notes = rope_cache_case(sh, n, np, torch, pr, rotary, pos_ids)
            entries.append(run_rope_case("rope_cache", sh, n, impls, check, notes, args, torch))
    pr.close()
    return entries


def print_rope_table(entries):
    if not entries:
        return
    log("")
    log(f"{'RoPE case':<26} {'thr':>3}  medians; speed-ups (HF / peak)")
    for e in entries:
        m = e["median_s"]
        times = ", ".join(f"{k} {fmt_t(v)}" for k, v in m.items())
        sp = ", ".join(f"{k} {v:.2f}x" for k, v in e["speedup_vs_hf"].items())
        d = ", ".join(f"{k} {v:.2g}" for k, v in e["diffs"].items())
        log(f"{e['name']:<26} {e['threads']:>3}  {times}")
        log(f"{'':<26} {'':>3}  {sp} (goal {e['goal']:g}x); {d}"
            f"{'' if e['agree'] else '  DISAGREE'}")


def main(argv):
    args = parse_args(argv)
    import numpy as np
    import torch
    peak = import_peak()
    onnx, ort, ort_why = import_ort(args.no_ort)
    orts = Ort(onnx, ort, args.ort_spinning) if ort is not None else None
    if ort_why:
        log(f"peers-bench: ONNX Runtime {ort_why}: its columns are left out")
    pt = PeakThreads(peak)
    load_before = loadavg()
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    rx = re.compile(args.filter) if args.filter else None
    entries = []
    rng = np.random.default_rng(20240601)
    def attention_and_ort(sh, n, np, torch, peak, pt, data):
        return attention_case(sh, n, np, torch, peak, pt, orts, data)
    for family, shapes, case in (("attention", SHAPES, attention_and_ort),
                                 ("bf16", BF16_SHAPES, bf16_case)):
        for sh in shapes:
            if rx and not rx.search(sh[0]):
                continue
            data = make_data(np, rng, sh)
            for n in args.threads:
                log(f"peers-bench: {sh[0]}, {n} thread{'s' if n > 1 else ''}")
                impls, results, bound, notes = case(sh, n, np, torch, peak, pt, data)
                entries.append(run_case(family, sh, n, impls, results, bound, notes, args,
                                        torch, np))
    for sh in SOFTMAX_SHAPES:
        if rx and not rx.search(sh[0]):
            continue
        _, B, H, L, _ = sh
        x = rng.standard_normal((B, H, L, L), dtype=np.float32) * 3.0
        for n in args.threads:
            log(f"peers-bench: {sh[0]}, {n} thread{'s' if n > 1 else ''}")
            impls, results, bound, notes = softmax_case(sh, n, np, torch, peak, pt, orts, x)
            entries.append(run_case("softmax", sh, n, impls, results, bound, notes, args,
                                    torch, np))
    logit_data = None
    for case in LOGIT_CASES:
        if rx and not rx.search(case[0]):
            continue
        if logit_data is None:
            sh = ("logits", 1, LOGIT_H, LOGIT_H, LOGIT_L, LOGIT_L, True, "self", "")
            logit_data = make_data(np, rng, sh)
            slopes = peak.alibi_slopes(LOGIT_H)
            sinks = rng.uniform(-1.0, 3.0, LOGIT_H).astype(np.float32)
        for n in args.threads:
            log(f"peers-bench: {case[0]}, {n} thread{'s' if n > 1 else ''}")
            impls, results, bound, notes = logits_case(case, n, np, torch, peak, pt,
                                                       logit_data, slopes, sinks)
            entries.append(run_case("logits", case, n, impls, results, bound, notes, args,
                                    torch, np))
    pt.close()
    rope_entries = run_rope(args, rx, np, torch, peak, rng)
    if entries:
        print_table(entries)
    print_rope_table(rope_entries)

    def ver(mod):
        return getattr(mod, "__version__", None) if mod is not None else None
    ctx = {
        "date": started, "cpu_model": cpu_model(), "nproc": os.cpu_count(),
        "load_avg_before": load_before, "load_avg_after": loadavg(),
        "python": platform.python_version(), "executable": sys.executable,
        "peak_version": peak.version(), "peak_library": peak.library_path(),
        "peak_isa": peak.isa_active(),
        "torch_version": torch.__version__, "torch_cuda_build": torch.version.cuda,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_parallel_info": torch.__config__.parallel_info().splitlines()[:12],
        "onnxruntime_version": ver(ort), "onnx_version": ver(onnx),
        "transformers_version": ver(sys.modules.get("transformers")),
        "onnxruntime_missing": ort_why, "numpy_version": np.__version__,
        "threads": args.threads, "repetitions": args.repetitions,
        "min_time_s": args.min_time, "warmup": args.warmup, "gap_s": args.gap,
        "quick": args.quick, "filter": args.filter, "ort_spinning": args.ort_spinning,
        "clock": "wall (time.perf_counter), seconds per call",
        "tolerance": f"max abs diff from torch <= {TOL:g} * max|V| (softmax: {TOL:g})",
        "speedup": "peer median time / peak median time (> 1: peak is faster)",
    }
    doc = {"context": ctx, "results": entries, "rope": rope_entries}
    text = json.dumps(doc, indent=1, sort_keys=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    bad = [e["name"] for e in entries + rope_entries if not e["agree"]]
    if bad:
        log(f"peers-bench: outputs disagree with torch beyond the bound: {', '.join(bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
