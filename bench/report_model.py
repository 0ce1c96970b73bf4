"""report_model - the figures the report derives from the merged times (part
of bench/report.py, the entry point): one traffic and FLOP model per family
(model()), the throughputs and roofline fractions it gives every entry,
the speed-up goals checked against the measured ratios, which entry is
"peak" (dispatch, else the best tier), the order of variants and shapes,
and the units the tables and plots print.
"""

from report_data import shape_args

# Nominal FLOPs of one sin, cos or exp evaluation: range reduction and a
# degree 5-7 polynomial, about 8 FMAs.  Only the roofline's x and y axes
# depend on it; every ratio in the report is a ratio of times.
TRANSCENDENTAL_FLOPS = 16
DH = 64  # the attention benchmarks' head_dim


def softmax_visible(L, causal, heads=8):
    return heads * (L * (L + 1) // 2 if causal else L * L)


def attention_visible(a):
    lq, lk = a["Lq"], a["Lk"]
    if not a["causal"]:
        return lq * lk
    return sum(min(i + 1, lk) for i in range(lq))


# family -> model(args) -> dict(elems, bytes, flops, flops_visible, size)
#   elems: the unit of "elements/s"; bytes: read + written once (the least
#   any implementation must move); flops: nominal; size: the x axis of the
#   throughput-vs-size plots.
def model(family, a):
    if family == "pe_table":
        n = a["seq_len"] * a["d_model"]
        return dict(elems=n, bytes=4 * n, flops=(1 + TRANSCENDENTAL_FLOPS) * n, size=n)
    if family == "exp":
        n = a["n"]
        return dict(elems=n, bytes=8 * n, flops=TRANSCENDENTAL_FLOPS * n, size=n)
    if family == "embedding":
        tok = a["batch"] * a["seq_len"]
        n = tok * a["d_model"]
        rows = 2 if a["fly"] else 3
        fl = (2 + (TRANSCENDENTAL_FLOPS if a["fly"] else 0)) * n
        return dict(elems=n, bytes=tok * (4 * a["d_model"] * rows + 4), flops=fl, size=n)
    if family == "pe_add":
        n = a["batch"] * a["seq_len"] * a["d_model"]
        fl = (1 + (TRANSCENDENTAL_FLOPS if a["fly"] else 0)) * n
        return dict(elems=n, bytes=(8 if a["fly"] else 12) * n, flops=fl, size=n)
    if family == "softmax":
        L, h = a["L"], a.get("heads", 8)
        n = h * L * L
        vis = softmax_visible(L, a["causal"], h)
        return dict(elems=n, bytes=8 * n, flops=(TRANSCENDENTAL_FLOPS + 4) * vis, size=L)
    if family == "layernorm":
        n = a["rows"] * a["d_model"]
        return dict(elems=n, bytes=12 * n + 8 * a["d_model"], flops=8 * n, size=n)
    if family == "attention":
        h, lq, lk = a["H"], a["Lq"], a["Lk"]
        full = 4 * lq * lk * DH * h
        vis = 4 * attention_visible(a) * DH * h
        return dict(elems=lq * h, bytes=4 * h * DH * (2 * lq + 2 * lk), flops=full,
                    flops_visible=vis, size=lq * lk * h)
    return None


FAMILY_TITLE = {
    "pe_table": "Sinusoid table (peak_pe_table)",
    "embedding": "Embedding + PE (peak_embed_pe)",
    "pe_add": "x += PE (peak_pe_add, PositionalEncoding.forward)",
    "softmax": "Masked softmax (peak_softmax), H heads of L x L",
    "layernorm": "Residual + LayerNorm (peak_add_layernorm)",
    "exp": "Vector exp (peak_exp)",
    "attention": "Attention (peak_attention), head_dim 64",
}
FAMILY_ORDER = ["pe_table", "embedding", "pe_add", "softmax", "layernorm", "exp", "attention"]
TIERS = ["scalar", "avx2", "avx512", "neon", "dispatch"]
# Plain C loops: what a user writes without a library.
PLAIN = {"libm_loop", "expf_loop", "plain_loop", "plain_loop_novec"}
# Yardsticks that are not implementations of the kernel.
NOT_AN_IMPL = {"memcpy", "row_copy"}

# Speed-up goals the pe_table and softmax kernels were written to meet:
# (family, shape, numerator, denominator, goal), the goal a ratio of the
# denominator's median time over the numerator's (higher: the numerator is
# faster), both measured in the same run.
GOALS = [
    ("pe_table", "seq_len:5000/d_model:512", "avx512", "libm_loop", 12.0),
    ("pe_table", "seq_len:5000/d_model:512", "avx512", "sleef_avx512", 3.0),
    ("pe_table", "seq_len:5000/d_model:512", "avx2", "libm_loop", 6.0),
] + [("softmax", f"heads:8/L:{n}/causal:{c}", "avx512", den, goal)
     for den, c, goal, lengths in (("onednn", 0, 1.3, (128, 512)), ("onednn", 0, 1.0, (2048,)),
                                   ("expf_loop", 0, 8.0, (128, 512, 2048)),
                                   ("onednn", 1, 1.6, (128, 512, 2048)))
     for n in lengths]


# ---- derived figures ---------------------------------------------------------------------

def add_throughputs(results):
    """elements, bytes and FLOPs per second of every measured entry."""
    for family, shapes in results.items():
        for shape, variants in shapes.items():
            m = model(family, shape_args(shape))
            if m is None:
                continue
            for e in variants.values():
                if "median_s" not in e:
                    continue
                t, lo, hi = e["median_s"], e["min_s"], e["max_s"]
                e["elems_per_s"] = m["elems"] / t
                e["bytes_per_s"] = m["bytes"] / t
                e["gflops"] = m["flops"] / t * 1e-9
                e["gflops_range"] = [m["flops"] / hi * 1e-9, m["flops"] / lo * 1e-9]
                if "flops_visible" in m:
                    e["gflops_visible"] = m["flops_visible"] / t * 1e-9


def stream_bw(limits):
    """{size: best median bytes/s of memcpy, read and write at that size}:
    the bandwidth ceiling at that cache level (bytes read + written)."""
    best = {}
    for kind in ("memcpy", "read", "write"):
        for n, v in limits["bandwidth"].get(kind, {}).items():
            best[int(n)] = max(best.get(int(n), 0.0), v["median_Bps"])
    return best


def bw_for(limits, working_set):
    """The stream bandwidth measured at the smallest size that holds the
    working set (bytes a call touches), the largest size's beyond."""
    best = stream_bw(limits)
    if not best:
        return None, None
    for s in sorted(best):
        if working_set <= s:
            return best[s], s
    s = max(best)
    return best[s], s


def annotate_limits(results, limits):
    """fraction of the roofline bound min(FMA peak, AI x bandwidth) for
    every measured entry; the FMA peak is the machine's best tier's."""
    peaks = limits["fma_peak"]
    best = max((v["median"] for v in peaks.values()), default=None)
    for family, shapes in results.items():
        for shape, variants in shapes.items():
            m = model(family, shape_args(shape))
            if m is None:
                continue
            bw, level = bw_for(limits, m["bytes"])
            flops = m.get("flops_visible", m["flops"])
            ai = flops / m["bytes"]
            for e in variants.values():
                if "median_s" not in e or bw is None or best is None:
                    continue
                achieved = flops / e["median_s"] * 1e-9
                mem_bound = ai * bw * 1e-9
                bound = min(best, mem_bound)
                e["ai"] = ai
                e["roof_gflops"] = bound
                e["roof_fraction"] = achieved / bound
                e["bound"] = "memory" if mem_bound < best else "compute"
                e["bw_fraction"] = e["bytes_per_s"] / bw
                e["bw_level_bytes"] = level


def goal_rows(results):
    """GOALS against this run: dicts of family, shape, num, den, goal and
    ratio (None, with why, when either side was not measured)."""
    rows = []
    for family, shape, num, den, goal in GOALS:
        variants = results.get(family, {}).get(shape, {})
        r = {"family": family, "shape": shape, "num": num, "den": den, "goal": goal,
             "ratio": None}
        en, ed = variants.get(num, {}), variants.get(den, {})
        if "median_s" in en and "median_s" in ed:
            r["ratio"] = ed["median_s"] / en["median_s"]
        else:
            missing, e = (num, en) if "median_s" not in en else (den, ed)
            r["why"] = f"{missing}: {e.get('skipped', 'not measured')}"
        rows.append(r)
    return rows


# ---- units, the reference entry, orders -------------------------------------------------

def fmt_time(s):
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if s >= f:
            return f"{s / f:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def fmt_rate(x, unit):
    for p, f in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= f:
            return f"{x / f:.3g} {p}{unit}"
    return f"{x:.3g} {unit}"


def throughput(family, e):
    """(value, text) in the family's headline unit."""
    if family == "attention":
        vis = e.get("gflops_visible", e["gflops"])
        extra = f" ({vis:.3g} visible)" if vis < 0.99 * e["gflops"] else ""
        return e["gflops"], f"{e['gflops']:.3g} GFLOP/s{extra}"
    if family in ("embedding", "pe_add", "layernorm"):
        return e["bytes_per_s"], fmt_rate(e["bytes_per_s"], "B/s")
    return e["elems_per_s"], fmt_rate(e["elems_per_s"], "elem/s")


def peak_ref(variants):
    """The entry peak users get: dispatch, else the best tier measured."""
    if "median_s" in variants.get("dispatch", {}):
        return "dispatch", variants["dispatch"]
    best = None
    for t in TIERS:
        e = variants.get(t, {})
        if "median_s" in e and (best is None or e["median_s"] < best[1]["median_s"]):
            best = (t, e)
    return best if best else (None, None)


def variant_order(variants):
    def key(v):
        if v in TIERS:
            return (0, TIERS.index(v))
        if v in PLAIN:
            return (1, v)
        if v == "torch":
            return (3, v)
        if v in NOT_AN_IMPL:
            return (4, v)
        return (2, v)
    return sorted(variants, key=key)


def shape_order(family, shapes):
    def key(s):
        a = shape_args(s)
        m = model(family, a)
        return (tuple(a.get(k, 0) for k in ("causal", "fly", "cold", "heads")) +
                (m["size"] if m else 0,))
    return sorted(shapes, key=key)
