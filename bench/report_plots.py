"""report_plots - the report's PNG plots (part of bench/report.py, the entry
point): throughput against size per family, one subplot per mask or PE
source, and the roofline of every family's peak entry and baselines.
Needs matplotlib (python3-matplotlib); without it write_plots() writes
nothing and says so, and the tables are still written.
"""

import os
import sys

from report_data import shape_args
from report_model import (FAMILY_ORDER, FAMILY_TITLE, NOT_AN_IMPL, TIERS, fmt_rate, model,
                          peak_ref, stream_bw, throughput, variant_order)

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


def write_plots(results, limits, out_dir, slug, cpu_name):
    """Writes out_dir/<slug>-<family>.png and <slug>-roofline.png; returns
    {family or "roofline": file name} of those written."""
    pngs = {}
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        for family in FAMILY_ORDER:
            if family in results:
                path = os.path.join(out_dir, f"{slug}-{family}.png")
                plot_family(plt, family, results[family], path)
                pngs[family] = os.path.basename(path)
        path = os.path.join(out_dir, f"{slug}-roofline.png")
        plot_roofline(plt, results, limits, path, cpu_name)
        pngs["roofline"] = os.path.basename(path)
    except ImportError as e:
        print(f"report: no matplotlib ({e}); tables only", file=sys.stderr)
    return pngs


# ---- the run history (bench/results/history/<cpu>.jsonl, bench/report_history.py) ------

# The headline shapes of the history plot: (label, benchmark name); those in
# none of the runs are left out.
HISTORY_HEADLINES = (
    ("attention L 2048 causal", "attention/dispatch/H:8/Lq:2048/Lk:2048/causal:1/cold:0/real_time"),
    ("decode, 2048 cache", "attention/dispatch/H:8/Lq:1/Lk:2048/causal:0/cold:0/real_time"),
    ("softmax BERT 12x512", "softmax/dispatch/heads:12/L:512/causal:0/real_time"),
    ("LayerNorm 65536x768", "layernorm/dispatch/rows:65536/d_model:768/real_time"),
    ("embedding 64x512x512", "embedding/dispatch/batch:64/seq_len:512/d_model:512/fly:0/real_time"),
    ("PE table 5000x512", "pe_table/dispatch/seq_len:5000/d_model:512/real_time"),
)
SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def history_series(runs, headlines=HISTORY_HEADLINES):
    """[(label, unit, [throughput or None per run])]: items/s or bytes/s when
    every run that has the benchmark reports that counter, else calls/s
    (1 / median real time), so one line never mixes units."""
    out = []
    for label, name in headlines:
        es = [r.get("benchmarks", {}).get(name) for r in runs]
        have = [e for e in es if e]
        if not have:
            continue
        counters = {next(iter(e["rate"])) if e.get("rate") else None for e in have}
        counter = counters.pop() if len(counters) == 1 else None
        if counter:
            ys = [e["rate"][counter] if e else None for e in es]
            unit = counter.replace("_per_second", "/s")
        else:
            ys = [1.0 / (e["median"] * SECONDS[e.get("unit", "ns")]) if e else None for e in es]
            unit = "calls/s"
        out.append((label, unit, ys))
    return out


def plot_history(runs, out_dir, slug, cpu_name):
    """out_dir/<slug>-history.png: the headline shapes' throughput over the
    runs of the history, x = run index labelled with short commit hashes;
    only with >= 2 runs.  Returns {"history": file name} or {}."""
    series = history_series(runs)
    if len(runs) < 2 or not series:
        return {}
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"report: no matplotlib ({e}); no history plot", file=sys.stderr)
        return {}
    fig, ax = plt.subplots(figsize=(max(7.0, 0.6 * len(runs) + 5), 4.6))
    xs = list(range(len(runs)))
    for i, (label, unit, ys) in enumerate(series):
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", markersize=4,
                color=plt.get_cmap("tab10")(i % 10), label=f"{label} ({unit})")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{i}\n{(r.get('commit') or 'unknown')[:7]}"
                        f"{'+' if r.get('dirty') else ''}" for i, r in enumerate(runs)],
                       fontsize=7)
    ax.set_xlabel("run (history line) and commit; + : uncommitted changes")
    ax.set_yscale("log")
    ax.set_ylabel("throughput (median)")
    ax.set_title(f"Headline shapes over the runs, one core of {cpu_name}\n"
                 "(runs differ in machine load: see each line's note)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    path = os.path.join(out_dir, f"{slug}-history.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return {"history": os.path.basename(path)}
