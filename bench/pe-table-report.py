#!/usr/bin/env python3
"""Summarise bench_peak's pe_table JSON: median throughput per variant and
the speed-up ratios the PE table issue sets as goals.

Usage: pe-table-report.py RESULTS.json

RESULTS.json is Google Benchmark's JSON output (--benchmark_out=FILE
--benchmark_out_format=json), ideally from --benchmark_repetitions=9
--benchmark_report_aggregates_only=true as bench/run-pe-table.sh runs it.
Medians, not means: the machine is shared and a descheduled repetition
should not move the figure.  With a single repetition (no aggregates) the
one measured value stands in for the median.  Standard library only.
"""

import json
import sys

MAIN_SHAPE = "seq_len:5000/d_model:512"

# (numerator, denominator, goal): the targets at MAIN_SHAPE.
GOALS = [
    ("avx512", "libm_loop", 12.0),
    ("avx512", "sleef_avx512", 3.0),
    ("avx2", "libm_loop", 6.0),
]

# Display order; anything else the binary reports is appended.
VARIANT_ORDER = ["scalar", "avx2", "avx512", "neon", "dispatch", "libm_loop",
                 "sleef_avx2", "sleef_avx512"]


def split_name(run_name):
    """'pe_table/avx2/seq_len:512/d_model:768/real_time' -> ('avx2',
    'seq_len:512/d_model:768'); None for other families."""
    parts = run_name.split("/")
    if len(parts) < 3 or parts[0] != "pe_table":
        return None
    shape = [p for p in parts[2:] if ":" in p]
    return parts[1], "/".join(shape)


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    # results[shape][variant] = {"median": run, "cv": run} or {"error": msg}
    results = {}
    # Registration order (the shapes' smallest family_index): interleaved
    # repetitions arrive shuffled, and the main figure should come first.
    first_family = {}
    reps = 1
    for run in doc.get("benchmarks", []):
        key = split_name(run.get("run_name", run.get("name", "")))
        if key is None:
            continue
        variant, shape = key
        reps = max(reps, run.get("repetitions", 1))
        family = run.get("family_index", len(first_family))
        first_family[shape] = min(first_family.get(shape, family), family)
        slot = results.setdefault(shape, {}).setdefault(variant, {})
        if run.get("error_occurred"):
            slot.setdefault("error", run.get("error_message", "error"))
        elif run.get("run_type") == "aggregate":
            slot[run.get("aggregate_name")] = run
        else:
            slot.setdefault("single", run)
    for per_shape in results.values():
        for slot in per_shape.values():
            if "median" not in slot and "single" in slot:
                slot["median"] = slot["single"]
    shapes = sorted(results, key=lambda shape: first_family[shape])
    return doc.get("context", {}), shapes, results, reps


def rate(slot):
    run = slot.get("median") if slot else None
    return run.get("items_per_second") if run else None


def why_missing(per_shape, variant):
    slot = per_shape.get(variant)
    if slot is None:
        return "not in the results"
    return slot.get("error", "no median")


def print_context(ctx, reps):
    cpus = ctx.get("num_cpus", "?")
    mhz = ctx.get("mhz_per_cpu", "?")
    print(f"host {ctx.get('host_name', '?')}: {cpus} CPUs @ {mhz} MHz, "
          f"load {', '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))}; "
          f"{ctx.get('date', '')}")
    print(f"peak {ctx.get('peak_version', '?')}, active tier "
          f"{ctx.get('peak_isa_active', '?')} ({ctx.get('peak_isa_reason', '?')})")
    print(f"repetitions: {reps}; times are wall-clock; "
          f"Google Benchmark library_build_type={ctx.get('library_build_type', '?')}")
    if ctx.get("cpu_scaling_enabled"):
        print("warning: CPU frequency scaling is enabled; numbers will be noisy")


def print_shape(shape, per_shape):
    base = rate(per_shape.get("libm_loop"))
    print(f"\npe_table {shape}")
    print(f"  {'variant':<14}{'median time':>15}{'Gelem/s':>10}{'GB/s':>9}"
          f"{'cv':>8}{'vs libm_loop':>15}")
    order = [v for v in VARIANT_ORDER if v in per_shape]
    order += sorted(v for v in per_shape if v not in VARIANT_ORDER)
    for variant in order:
        slot = per_shape[variant]
        med = slot.get("median")
        if med is None:
            print(f"  {variant:<14}skipped: {slot.get('error', 'no median')}")
            continue
        t = f"{med['real_time']:.1f} {med.get('time_unit', '')}"
        items = med.get("items_per_second", 0.0) / 1e9
        gbs = med.get("bytes_per_second", 0.0) / 1e9
        cv = slot.get("cv")
        cv_s = f"{100.0 * cv['real_time']:.1f}%" if cv else "-"
        r = rate(slot)
        vs = f"{r / base:.2f}x" if base and r else "-"
        label = f"  [{med['label']}]" if med.get("label") else ""
        print(f"  {variant:<14}{t:>15}{items:>10.3f}{gbs:>9.2f}{cv_s:>8}{vs:>15}{label}")


def cpu_time(slot):
    run = slot.get("median") if slot else None
    return run.get("cpu_time") if run else None


def print_goals(results):
    per_shape = results.get(MAIN_SHAPE, {})
    # The goal is judged on wall-clock throughput.  The CPU-time ratio is
    # printed beside it because on a shared machine a run that was
    # descheduled loses wall-clock time but not CPU time: when the two
    # disagree, the figure was disturbed and should be measured again.
    print(f"\nratios at {MAIN_SHAPE} (median items/s, wall-clock; goal from the issue;"
          f" in brackets the ratio of median CPU times)")
    for num, den, goal in GOALS:
        rn, rd = rate(per_shape.get(num)), rate(per_shape.get(den))
        name = f"{num} / {den}"
        if rn is None or rd is None:
            missing = num if rn is None else den
            print(f"  {name:<24} n/a   ({missing}: {why_missing(per_shape, missing)})")
            continue
        ratio = rn / rd
        verdict = "MET" if ratio >= goal else "MISSED"
        cn, cd = cpu_time(per_shape.get(num)), cpu_time(per_shape.get(den))
        cpu = f"[cpu {cd / cn:.2f}x]" if cn and cd else ""
        print(f"  {name:<24}{ratio:6.2f}x  {cpu:<13} goal >= {goal:g}x  {verdict}")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ctx, shapes, results, reps = load(argv[1])
    if not shapes:
        print(f"{argv[1]}: no pe_table results", file=sys.stderr)
        return 1
    print_context(ctx, reps)
    for shape in shapes:
        print_shape(shape, results[shape])
    print_goals(results)
    # The goals are reported, not enforced: a missed goal is a finding for
    # the kernel's author, not a failure of the measurement.
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
