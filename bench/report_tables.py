"""report_tables - the report's markdown (part of bench/report.py, the entry
point): the summary at one headline shape per family, the machine limits,
one table per family, the speed-up goals, the accuracy table, the context
lines (CPU, run, noise), the whole bench/results/<cpu>.md and the README's
Benchmarks block.
"""

import datetime
import os

from report_data import family_name, median
from report_model import (FAMILY_ORDER, FAMILY_TITLE, NOT_AN_IMPL, PLAIN, TIERS,
                          TRANSCENDENTAL_FLOPS, fmt_rate, fmt_time, peak_ref, shape_order,
                          throughput, variant_order)

# The summary's rows: (family, shape, what it stands for).
HEADLINES = [
    ("pe_table", "seq_len:5000/d_model:512", "PositionalEncoding's table"),
    ("embedding", "batch:2/seq_len:50/d_model:512/fly:0", "the 2 x 50 example batch"),
    ("embedding", "batch:1/seq_len:1/d_model:768/pos0:2047/fly:0", "decode, 1 token at 2047"),
    ("pe_add", "batch:2/seq_len:50/d_model:512/fly:0", "PositionalEncoding.forward()"),
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


def md_goals(rows):
    out = ["| family | shape | ratio of median times | measured | goal | |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        name = f"{r['den']} / {r['num']}"
        if r["ratio"] is None:
            out.append(f"| {r['family']} | {r['shape']} | {name} | n/a ({r['why']}) | "
                       f">= {r['goal']:g}x | |")
            continue
        verdict = "met" if r["ratio"] >= r["goal"] else "missed"
        out.append(f"| {r['family']} | {r['shape']} | {name} | {r['ratio']:.2f}x | "
                   f">= {r['goal']:g}x | {verdict} |")
    return out


CLOCK_NOTE = ("CPU time of the benchmarking thread (Google Benchmark's cpu_time, "
              "Python's process_time), not wall-clock: on this shared machine other "
              "processes held the core for much of the wall-clock time (see noise), "
              "which CPU time leaves out and stalls on memory keep in; wall-clock "
              "medians are in the .json")

BEGIN, END = "<!-- bench-report:begin -->", "<!-- bench-report:end -->"


def context_lines(ctx, cpu, results, torch_doc, notes, clock):
    """The run's context: CPU, date and load, versions, repetitions, clock,
    PyTorch, noise and the caller's notes, one markdown list item each."""
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
        f"- run: {when}, host load average at start {load}; one thread everywhere except "
        "where a thread count is named (the thread scaling and PyTorch 2.x sections)",
        f"- peak {ctx.get('peak_version', '?')}, dispatch tier {ctx.get('peak_isa_active', '?')}"
        f"; Google Benchmark {ctx.get('library_build_type', '?')} build (Debian's)",
        f"- medians of {reps} repetitions (interleaved at random), min - max beside them; "
        "all ratios between medians of this one run",
        "- times: " + (CLOCK_NOTE if clock == "cpu" else
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
    context_lines += [f"- {n}" for n in notes]
    return context_lines


def md_report(ctx_lines, cpu, slug, command, rows, limits, results, goals, acc, torch_doc,
              pngs):
    """The lines of bench/results/<cpu>.md."""
    md = [f"# peak benchmark report: {cpu.get('model_name', slug)}", "",
          f"Made by `{command}`.", ""] + ctx_lines + [""]
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
           "Throughputs use one traffic/FLOP model per family (bench/report_model.py), the same "
           f"for every variant; sin, cos and exp count {TRANSCENDENTAL_FLOPS} nominal FLOPs.",
           ""]
    for family in FAMILY_ORDER:
        if family in results:
            md += md_family_table(family, results[family])
            if family in pngs:
                md += [f"![{family}]({pngs[family]})", ""]
    md += ["## Speed-up goals", "",
           "Ratios of median times in this run against the goals the pe_table and "
           "softmax kernels were written to meet (GOALS in bench/report_model.py).", ""]
    md += md_goals(goals) + [""]
    md += ["## Accuracy", "",
           "Against an x87 long double oracle for peak and the C baselines "
           "(bench/accuracy.c), against torch's own float64 for PyTorch (same input "
           "distributions, not the same bits).  ULP: |error| / ulp(exact); for embedding, "
           "pe_add, layernorm and attention in units of ulp(max |exact| of the row). "
           "exp: relative error instead of absolute.", ""]
    md += md_accuracy(acc, torch_doc) + [""]
    return md


def readme_block(readme, out_dir, slug, command, ctx_lines, rows, pngs):
    """The README's Benchmarks block, between the bench-report markers."""
    rel = os.path.relpath(out_dir, os.path.dirname(os.path.abspath(readme)))
    block = [BEGIN, "",
             f"One command builds the benchmarks (release), runs them with "
             f"repetitions, runs the same shapes in PyTorch and the accuracy "
             f"program, and writes [`{rel}/{slug}.md`]({rel}/{slug}.md) (every family, "
             f"shape, baseline and accuracy figure), its `.json` and the plots:", "",
             "```sh", command, "```", ""] + ctx_lines + [""]
    block += md_summary(rows) + [""]
    if "roofline" in pngs:
        block += [f"![roofline]({rel}/{pngs['roofline']})", ""]
    block += [END]
    return "\n".join(block)


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
