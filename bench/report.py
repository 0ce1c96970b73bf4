#!/usr/bin/python3
"""Merge bench_peak's JSON, peak_accuracy's JSON and torch-bench.py's JSON
into the comparison report: bench/results/<cpu>.md and .json, and PNG plots.

Usage (bench/report.sh runs it; it can also be re-run on kept raw files):
  /usr/bin/python3 bench/report.py --bench BENCH.json [--accuracy ACC.json]
      [--torch TORCH.json] [--out-dir bench/results] [--readme README.md]
      [--command "sh bench/report.sh"] [--note TEXT]

Medians over the repetitions, with min-max; every ratio is taken between
medians of the same run.  Throughputs come from one model per family (the
bytes an algorithm must move and a nominal FLOP count, FAMILIES below), the
same for every implementation, so a ratio of throughputs is a ratio of
times.  The plots need matplotlib (python3-matplotlib); without it the
tables are still written.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import sys

# Nominal FLOPs of one sin, cos or exp evaluation: range reduction and a
# degree 5-7 polynomial, about 8 FMAs.  Only the roofline's x and y axes
# depend on it; every ratio in the report is a ratio of times.
TRANSCENDENTAL_FLOPS = 16
DH = 64  # the attention benchmarks' head_dim


def shape_args(shape):
    return {k: int(v) for k, v in (p.split(":", 1) for p in shape.split("/") if ":" in p)}


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
    "pe_add": "x += PE (peak_pe_add, the seed's forward)",
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
# The summary's rows: (family, shape, what it stands for).
HEADLINES = [
    ("pe_table", "seq_len:5000/d_model:512", "the seed's table"),
    ("embedding", "batch:2/seq_len:50/d_model:512/fly:0", "the seed's 2 x 50 batch"),
    ("embedding", "batch:1/seq_len:1/d_model:768/pos0:2047/fly:0", "decode, 1 token at 2047"),
    ("pe_add", "batch:2/seq_len:50/d_model:512/fly:0", "the seed's forward()"),
    ("pe_add", "batch:1/seq_len:4096/d_model:768/fly:0", "long context"),
    ("softmax", "heads:12/L:512/causal:0", "BERT-base"),
    ("softmax", "heads:12/L:1024/causal:1", "GPT-2 small, causal"),
    ("softmax", "heads:12/L:4096/causal:1", "long context, causal"),
    ("layernorm", "rows:512/d_model:768", "BERT-base, 512 tokens"),
    ("exp", "n:65536", "in L2"),
    ("attention", "H:12/Lq:512/Lk:512/causal:0/cold:0", "BERT-base"),
    ("attention", "H:12/Lq:1024/Lk:1024/causal:1/cold:0", "GPT-2 small, causal"),
    ("attention", "H:8/Lq:4096/Lk:4096/causal:1/cold:0", "long context, causal"),
    ("attention", "H:8/Lq:1/Lk:2048/causal:0/cold:1", "decode, 2048 cache, cold"),
]


# ---- loading ---------------------------------------------------------------------------

# Family names of earlier versions of bench_peak, torch-bench.py and
# peak_accuracy, read as today's: raw files kept from before the rename
# still make a report.
OLD_FAMILY = {"embed": "embedding", "sdpa": "attention"}


def family_name(family):
    return OLD_FAMILY.get(family, family)


def split_name(name):
    parts = [p for p in name.split("/") if p != "real_time"]
    if len(parts) < 2 or ":" in parts[1]:  # memcpy/bytes:N: no variant
        return family_name(parts[0]), "", "/".join(parts[1:])
    return family_name(parts[0]), parts[1], "/".join(parts[2:])


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


TIME_UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


CLOCK = "cpu"  # set from --clock in main()


def load_bench(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    runs = {}
    for r in doc.get("benchmarks", []):
        if r.get("run_type") == "aggregate":
            continue
        name = r.get("run_name", r["name"])
        slot = runs.setdefault(name, {"times": [], "cpu": [], "counters": {}, "label": ""})
        if r.get("error_occurred"):
            slot["error"] = r.get("error_message", "error")
            continue
        unit = TIME_UNIT[r.get("time_unit", "ns")]
        slot["times"].append(r["real_time"] * unit)
        slot["cpu"].append(r["cpu_time"] * unit)
        slot["label"] = r.get("label", "") or slot["label"]
        for k in ("GFLOPs", "GFLOPs_visible", "bytes_per_second", "items_per_second"):
            if k in r:
                slot["counters"].setdefault(k, []).append(r[k])
    return doc.get("context", {}), runs


def load_torch(path):
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return None if "error" in doc else doc


# ---- the merged results ------------------------------------------------------------------

def stats_from_times(times):
    return {"median_s": median(times), "min_s": min(times), "max_s": max(times),
            "repetitions": len(times)}


def clock_times(slot):
    return slot["cpu"] if CLOCK == "cpu" else slot["times"]


def build(ctx, runs, torch_doc):
    """results[family][shape][variant] = entry; limits = measured ceilings."""
    results = {}
    limits = {"bandwidth": {}, "fma_peak": {}}
    for name, slot in runs.items():
        family, variant, shape = split_name(name)
        if family in ("memcpy", "read", "write"):
            if slot["times"]:
                n = shape_args(shape)["bytes"]
                moved = n * (2 if family == "memcpy" else 1)
                bw = [moved / t for t in clock_times(slot)]
                limits["bandwidth"].setdefault(family, {})[str(n)] = {
                    "median_Bps": median(bw), "min_Bps": min(bw), "max_Bps": max(bw)}
            continue
        if family == "fma_peak":
            if slot["counters"].get("GFLOPs"):
                # the counter is a rate over real time; over CPU time:
                g = [x * t / c if CLOCK == "cpu" else x for x, t, c in
                     zip(slot["counters"]["GFLOPs"], slot["times"], slot["cpu"])]
                limits["fma_peak"][variant] = {"median": median(g), "min": min(g),
                                               "max": max(g)}
            continue
        e = {"source": "bench_peak"}
        if "error" in slot and not slot["times"]:
            e["skipped"] = slot["error"]
        else:
            e.update(stats_from_times(clock_times(slot)))
            e["real"] = stats_from_times(slot["times"])
            e["cpu_over_real"] = median([c / t for c, t in zip(slot["cpu"], slot["times"])])
            if slot["label"]:
                e["label"] = slot["label"]
        results.setdefault(family, {}).setdefault(shape, {})[variant] = e
    if torch_doc:
        for r in torch_doc.get("benchmarks", []):
            family, variant, shape = split_name(r["name"])
            e = {"source": "torch", "repetitions": r["repetitions"], "real": r["real"]}
            e.update(r[CLOCK])
            e["cpu_over_real"] = r["cpu"]["median_s"] / r["real"]["median_s"]
            results.setdefault(family, {}).setdefault(shape, {})[variant] = e
    # derived throughputs
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
    return results, limits


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


# ---- formatting --------------------------------------------------------------------------

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


def md_family_table(family, shapes):
    out = [f"### {FAMILY_TITLE.get(family, family)}", ""]
    extra = " | GFLOP/s causal-visible" if family == "attention" else ""
    out.append("| shape | variant | median | min - max | throughput | GFLOP/s" + extra +
               " | peak / this | % of limit |")
    out.append("|---|---|---|---|---|---|" + ("---|" if extra else "") + "---|---|")
    for shape in shape_order(family, shapes):
        variants = shapes[shape]
        _, ref = peak_ref(variants)
        for v in variant_order(variants):
            e = variants[v]
            name = v + (f" ({e['label']})" if e.get("label") and len(e["label"]) < 40 else "")
            if "median_s" not in e:
                reason = e.get("skipped", "not measured")
                if reason.startswith("isa unsupported") or reason.startswith("not measured"):
                    continue
                out.append(f"| {shape} | {name} | skipped: {reason} |" + " |" * (6 if extra else 5))
                continue
            _, tp = throughput(family, e)
            ratio = (f"{e['median_s'] / ref['median_s']:.2f}x" if ref and v != "dispatch"
                     and v not in NOT_AN_IMPL else "")
            lim = (f"{100 * e['roof_fraction']:.0f}% ({e['bound']})"
                   if "roof_fraction" in e and v not in NOT_AN_IMPL else "")
            row = (f"| {shape} | {name} | {fmt_time(e['median_s'])} | "
                   f"{fmt_time(e['min_s'])} - {fmt_time(e['max_s'])} | {tp} | "
                   f"{e['gflops']:.3g} |")
            if extra:
                row += f" {e.get('gflops_visible', e['gflops']):.3g} |"
            out.append(row + f" {ratio} | {lim} |")
    out.append("")
    return out


def summary_rows(results):
    rows = []
    for family, shape, what in HEADLINES:
        variants = results.get(family, {}).get(shape)
        if not variants:
            continue
        pv, ref = peak_ref(variants)
        if ref is None:
            continue
        _, tp = throughput(family, ref)
        tier = ref.get("label") or pv

        def best_of(pred):
            cands = [(e["median_s"], v) for v, e in variants.items()
                     if pred(v) and "median_s" in e]
            return min(cands) if cands else None
        plain = best_of(lambda v: v in PLAIN)
        lib = best_of(lambda v: v not in PLAIN and v not in TIERS and v != "torch"
                      and v not in NOT_AN_IMPL)
        tor = best_of(lambda v: v == "torch")

        def ratio(c):
            return f"{c[0] / ref['median_s']:.2f}x" if c else "-"
        rows.append({
            "family": family, "shape": shape, "what": what, "tier": tier,
            "peak": f"{fmt_time(ref['median_s'])} ({fmt_time(ref['min_s'])} - "
                    f"{fmt_time(ref['max_s'])})",
            "throughput": tp,
            "vs_plain": (ratio(plain) + f" ({plain[1]})") if plain else "-",
            "vs_lib": (ratio(lib) + f" ({lib[1]})") if lib else "-",
            "vs_torch": ratio(tor),
            "limit": (f"{100 * ref['roof_fraction']:.0f}% of {ref['bound']} bound"
                      if "roof_fraction" in ref else "-"),
        })
    return rows


def md_summary(rows):
    out = ["| family | shape | peak median (min - max) | throughput | vs plain C | "
           "vs best other library | vs PyTorch | roofline |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['family']} ({r['what']}) | {r['shape']} | {r['peak']} | "
                   f"{r['throughput']} | {r['vs_plain']} | {r['vs_lib']} | {r['vs_torch']} | "
                   f"{r['limit']} |")
    return out


def md_limits(limits):
    out = ["| limit | median | min - max |", "|---|---|---|"]
    for kind in ("memcpy", "read", "write"):
        for n, v in sorted(limits["bandwidth"].get(kind, {}).items(), key=lambda x: int(x[0])):
            size = fmt_rate(int(n), "B").replace(" ", " ")
            out.append(f"| {kind} {size} (bytes read + written) | "
                       f"{v['median_Bps'] / 1e9:.3g} GB/s | {v['min_Bps'] / 1e9:.3g} - "
                       f"{v['max_Bps'] / 1e9:.3g} |")
    for t, v in limits["fma_peak"].items():
        out.append(f"| FP32 FMA peak, one core, {t} | {v['median']:.3g} GFLOP/s | "
                   f"{v['min']:.3g} - {v['max']:.3g} |")
    return out


def md_accuracy(acc_doc, torch_doc):
    entries = list(acc_doc.get("entries", [])) if acc_doc else []
    if torch_doc:
        entries += torch_doc.get("accuracy", [])
    fam_order = ["pe_table", "exp", "softmax", "embedding", "pe_add", "layernorm", "attention"]
    out = ["| family | shape | variant | max abs error | max ULP | sin/cos ULP of its own "
           "angle | note |", "|---|---|---|---|---|---|---|"]
    for fam in fam_order:
        for e in entries:
            if family_name(e["family"]) != fam:
                continue
            fn = f"{e['fn_ulp']:.3g}" if "fn_ulp" in e else ""
            abs_txt = (f"{e['max_rel']:.3g} (relative)" if fam == "exp" and "max_rel" in e
                       else f"{e['max_abs']:.3g}")
            if fam == "exp" and "max_rel" not in e:
                abs_txt = "-"
            out.append(f"| {fam} | {e['shape']} | {e['variant']} | {abs_txt} | "
                       f"{e['max_ulp']:.3g} | {fn} | {e.get('note', '')} |")
    return out


# ---- plots -------------------------------------------------------------------------------

def series_key(shape):
    """One subplot per mask (softmax, attention) or PE source (embedding, pe_add),
    and per head count for softmax (its x axis is L); attention's head counts
    and cold decode share their mask's subplot."""
    a = shape_args(shape)
    return tuple((k, a[k]) for k in ("heads", "causal", "fly") if k in a)


def plot_family(plt, family, shapes, path):
    groups = {}
    for shape, variants in shapes.items():
        groups.setdefault(series_key(shape), []).append(shape)
    keys = sorted(groups)
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys) + 1.8, 4.4), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, key in zip(axes[0], keys):
        lines = {}
        for shape in groups[key]:
            m = model(family, shape_args(shape))
            for v, e in shapes[shape].items():
                if "median_s" not in e or v in NOT_AN_IMPL:
                    continue
                val, _ = throughput(family, e)
                lines.setdefault(v, []).append((m["size"], val))
        for i, v in enumerate(variant_order(lines)):
            pts = sorted(lines[v])
            style = "-o" if v in TIERS else ("--s" if v != "torch" else ":^")
            if i >= 10:  # tab10 repeats: tell the repeats apart by their line
                style = "-.D"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=v, markersize=4,
                    color=cmap(i % 10))
        ax.set_xscale("log")
        ax.set_yscale("log")
        unit = ("GFLOP/s" if family == "attention" else
                "bytes/s" if family in ("embedding", "pe_add", "layernorm") else "elements/s")
        xl = {"softmax": "L (keys per row)", "attention": "Lq x Lk x H",
              "layernorm": "rows x d_model", "exp": "n"}.get(family, "elements per call")
        ax.set_xlabel(xl)
        ax.set_ylabel(unit)
        ax.set_title(", ".join(f"{k}={v}" for k, v in key) or "all shapes", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(FAMILY_TITLE.get(family, family) + " (medians)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_roofline(plt, results, limits, path, cpu):
    fig, ax = plt.subplots(figsize=(9, 6))
    xs = [2 ** k for k in range(-5, 11)]
    for t, v in sorted(limits["fma_peak"].items(), key=lambda x: x[1]["median"]):
        ax.axhline(v["median"], color="grey", lw=1, ls="-")
        ax.text(xs[0], v["median"] * 1.05, f"FMA peak {t} {v['median']:.0f} GFLOP/s",
                fontsize=7, color="grey")
    top = max((v["median"] for v in limits["fma_peak"].values()), default=1e3)
    bws = stream_bw(limits)
    for i, n in enumerate(sorted(bws)):
        bw = bws[n] * 1e-9
        ax.plot(xs, [min(top, bw * x) for x in xs], color="tab:grey", lw=0.8, ls="--")
        x0 = 2.0 ** (-4.5 + 0.9 * i)
        if bw * x0 < top:
            ax.text(x0, bw * x0 * 1.1, f"{fmt_rate(n, 'B')}: {bw:.3g} GB/s", fontsize=6,
                    color="tab:grey", rotation=30)
    colors = {"pe_table": "tab:blue", "embedding": "tab:orange", "pe_add": "tab:green",
              "softmax": "tab:red", "layernorm": "tab:purple", "exp": "tab:brown",
              "attention": "tab:pink"}
    for family in FAMILY_ORDER:
        shapes = results.get(family, {})
        pts, base = [], []
        for shape, variants in shapes.items():
            pv, ref = peak_ref(variants)
            if ref is not None and "ai" in ref:
                pts.append((ref["ai"], ref["roof_gflops"] * ref["roof_fraction"]))
            for v, e in variants.items():
                if v in TIERS or v in NOT_AN_IMPL or "ai" not in e:
                    continue
                base.append((e["ai"], e["roof_gflops"] * e["roof_fraction"]))
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], color=colors.get(family),
                       label=f"peak {family}", s=22, zorder=3)
        if base:
            ax.scatter([p[0] for p in base], [p[1] for p in base], facecolors="none",
                       edgecolors=colors.get(family), s=14, lw=0.7, zorder=2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(xs[0], xs[-1])
    ax.set_ylim(top / 3e3, top * 2)
    ax.set_xlabel("arithmetic intensity (nominal FLOPs / byte moved)")
    ax.set_ylabel("GFLOP/s (nominal; attention: 4 Lq Lk Dh H, causal: visible pairs)")
    ax.set_title(f"Roofline, one core of {cpu}: filled = peak (dispatch), hollow = baselines;"
                 "\nceilings: FMA peak per tier, best of memcpy/read/write bandwidth per "
                 "buffer size (dashed)", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# ---- the CPU ---------------------------------------------------------------------------

def cpu_info():
    info = {"model_name": platform.processor() or "unknown"}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
        for key, field in (("model name", "model_name"), ("cpu family", "family"),
                           ("model", "model"), ("stepping", "stepping"),
                           ("flags", "flags")):
            m = re.search(rf"^{key}\s*:\s*(.*)$", text, re.M)
            if m:
                info[field] = m.group(1).strip()
        info["hypervisor"] = "hypervisor" in info.get("flags", "").split()
        flags = set(info.pop("flags", "").split())
        info["isa"] = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                                   "avx512dq", "avx512_fp16", "amx_tile") if f in flags]
    except OSError:
        pass
    return info


def cpu_slug(info):
    name = info.get("model_name", "unknown")
    name = re.sub(r"\((R|TM|tm|r)\)", "", name)
    name = re.sub(r"\b(CPU|Processor)\b", "", name) if re.search(r"\d", name) else name
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not re.search(r"\d", slug) and "family" in info:
        slug += f"-family{info['family']}-model{info['model']}"
    return slug or "unknown-cpu"


# ---- README --------------------------------------------------------------------------

CLOCK_NOTE = ("CPU time of the benchmarking thread (Google Benchmark's cpu_time, "
              "Python's process_time), not wall-clock: on this shared machine other "
              "processes held the core for much of the wall-clock time (see noise), "
              "which CPU time leaves out and stalls on memory keep in; wall-clock "
              "medians are in the .json")

BEGIN, END = "<!-- bench-report:begin -->", "<!-- bench-report:end -->"


def update_readme(path, block):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if BEGIN in text and END in text:
        a, b = text.index(BEGIN), text.index(END) + len(END)
        text = text[:a] + block + text[b:]
    else:
        anchor = "## Measured figures"
        section = "## Benchmarks\n\n" + block + "\n\n"
        text = text.replace(anchor, section + anchor, 1) if anchor in text else \
            text.rstrip("\n") + "\n\n" + section
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---- main ----------------------------------------------------------------------------

def main(argv):
    p = argparse.ArgumentParser(description="peak's comparison report")
    p.add_argument("--bench", required=True)
    p.add_argument("--accuracy")
    p.add_argument("--torch")
    p.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "results"))
    p.add_argument("--readme")
    p.add_argument("--command", default="sh bench/report.sh")
    p.add_argument("--note", action="append", default=[])
    p.add_argument("--clock", choices=("cpu", "real"), default="cpu",
                   help="which time the medians use (default cpu: see CLOCK_NOTE)")
    args = p.parse_args(argv)
    global CLOCK
    CLOCK = args.clock

    ctx, runs = load_bench(args.bench)
    acc = None
    if args.accuracy and os.path.exists(args.accuracy):
        with open(args.accuracy, encoding="utf-8") as f:
            acc = json.load(f)
    torch_doc = load_torch(args.torch)
    results, limits = build(ctx, runs, torch_doc)
    annotate_limits(results, limits)
    cpu = cpu_info()
    slug = cpu_slug(cpu)
    os.makedirs(args.out_dir, exist_ok=True)
    rows = summary_rows(results)

    # plots
    pngs = {}
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        for family in FAMILY_ORDER:
            if family in results:
                path = os.path.join(args.out_dir, f"{slug}-{family}.png")
                plot_family(plt, family, results[family], path)
                pngs[family] = os.path.basename(path)
        path = os.path.join(args.out_dir, f"{slug}-roofline.png")
        plot_roofline(plt, results, limits, path, cpu.get("model_name", slug))
        pngs["roofline"] = os.path.basename(path)
    except ImportError as e:
        print(f"report: no matplotlib ({e}); tables only", file=sys.stderr)

    ratios = [e["cpu_over_real"] for s in results.values() for v in s.values()
              for e in v.values() if "cpu_over_real" in e and e.get("source") == "bench_peak"]
    share = median(ratios) if ratios else None
    when = ctx.get("date", datetime.datetime.now().isoformat())
    load = ", ".join(f"{x:.2f}" for x in ctx.get("load_avg", []))
    cpu_line = (f"{cpu.get('model_name', '?')} (family {cpu.get('family', '?')}, model "
                f"{cpu.get('model', '?')}, stepping {cpu.get('stepping', '?')}"
                f"{', KVM/VM guest' if cpu.get('hypervisor') else ''}), "
                f"{ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz; "
                f"ISA: {' '.join(cpu.get('isa', []))}")
    reps = max((e.get("repetitions", 1) for s in results.values() for v in s.values()
                for e in v.values()), default=1)
    context_lines = [
        f"- CPU: {cpu_line}",
        f"- run: {when}, host load average at start {load}; one thread everywhere",
        f"- peak {ctx.get('peak_version', '?')}, dispatch tier {ctx.get('peak_isa_active', '?')}"
        f"; Google Benchmark {ctx.get('library_build_type', '?')} build (Debian's)",
        f"- medians of {reps} repetitions (interleaved at random), min - max beside them; "
        "all ratios between medians of this one run",
        "- times: " + (CLOCK_NOTE if CLOCK == "cpu" else
                       "wall-clock time (CPU-time medians are in the .json)"),
    ]
    if "openblas_corename" in ctx:
        context_lines.append(f"- OpenBLAS ({ctx.get('openblas_config', '')}): core "
                             f"{ctx['openblas_corename']} (OPENBLAS_CORETYPE set for the run)")
    if torch_doc:
        tc = torch_doc["context"]
        context_lines.append(f"- PyTorch {tc['torch_version']} (Debian python3-torch), "
                             f"{tc['threads']} thread, ATen CPU capability "
                             f"{tc['cpu_capability']}; medians of {tc['repetitions']} "
                             "repetitions of >= "
                             f"{tc['min_time_s']} s")
    else:
        context_lines.append("- PyTorch: not measured (python3-torch not importable)")
    if share is not None:
        context_lines.append(
            f"- noise: the median benchmark got {100 * share:.0f}% of a core's CPU time "
            "over its wall-clock time (100% on an idle machine); the machine is shared, so "
            "absolute figures move between runs by tens of percent, ratios less (the "
            "min - max columns show by how much within this run)")
    context_lines += [f"- {n}" for n in args.note]

    md = [f"# peak benchmark report: {cpu.get('model_name', slug)}", "",
          f"Made by `{args.command}`.", ""] + context_lines + [""]
    md += ["## Summary", "",
           "peak through its public API (the dispatched tier) at one headline shape per "
           "family; \"vs X\" is X's median time over peak's (higher: peak is faster); "
           "roofline: peak's share of min(FMA peak, intensity x stream bandwidth at the "
           "working set's cache level); above 100% means the data stayed in a faster "
           "level than the bandwidth probe of that size found (the probes are as noisy "
           "as the rest).", ""]
    md += md_summary(rows) + [""]
    if "roofline" in pngs:
        md += [f"![roofline]({pngs['roofline']})", ""]
    md += ["## Machine limits (measured in the same run)", ""] + md_limits(limits) + [""]
    md += ["## Per family", "",
           "\"peak / this\": this variant's median time over peak's (dispatch); "
           "\"% of limit\": achieved over the roofline bound at the shape's working set. "
           "Throughputs use one traffic/FLOP model per family (bench/report.py), the same "
           f"for every variant; sin, cos and exp count {TRANSCENDENTAL_FLOPS} nominal FLOPs.",
           ""]
    for family in FAMILY_ORDER:
        if family in results:
            md += md_family_table(family, results[family])
            if family in pngs:
                md += [f"![{family}]({pngs[family]})", ""]
    md += ["## Accuracy", "",
           "Against an x87 long double oracle for peak and the C baselines "
           "(bench/accuracy.c), against torch's own float64 for PyTorch (same input "
           "distributions, not the same bits).  ULP: |error| / ulp(exact); for embedding, "
           "pe_add, layernorm and attention in units of ulp(max |exact| of the row). "
           "exp: relative error instead of absolute.", ""]
    md += md_accuracy(acc, torch_doc) + [""]
    md_path = os.path.join(args.out_dir, f"{slug}.md")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write("\n".join(md))

    doc = {"cpu": cpu, "context": ctx, "torch_context": torch_doc["context"] if torch_doc
           else None, "command": args.command, "limits": limits, "summary": rows,
           "results": results, "accuracy": (acc or {}).get("entries", []) +
           ((torch_doc or {}).get("accuracy", [])), "plots": pngs,
           "model": {"transcendental_flops": TRANSCENDENTAL_FLOPS}}
    json_path = os.path.join(args.out_dir, f"{slug}.json")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)

    if args.readme:
        rel = os.path.relpath(args.out_dir, os.path.dirname(os.path.abspath(args.readme)))
        block = [BEGIN, "",
                 f"One command builds the benchmarks (release), runs them with "
                 f"repetitions, runs the same shapes in PyTorch and the accuracy "
                 f"program, and writes [`{rel}/{slug}.md`]({rel}/{slug}.md) (every family, "
                 f"shape, baseline and accuracy figure), its `.json` and the plots:", "",
                 "```sh", args.command, "```", ""] + context_lines + [""]
        block += md_summary(rows) + [""]
        if "roofline" in pngs:
            block += [f"![roofline]({rel}/{pngs['roofline']})", ""]
        block += [END]
        update_readme(args.readme, "\n".join(block))

    print("\n".join(md_summary(rows)))
    print(f"\nreport: wrote {md_path}, {json_path} and {len(pngs)} plots", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
