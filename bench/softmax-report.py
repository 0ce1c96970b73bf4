#!/usr/bin/env python3
"""Summarise bench_peak's softmax JSON: median time per variant and shape,
and the speed-up ratios the softmax issue sets as goals.

Usage: softmax-report.py RESULTS.json

RESULTS.json is Google Benchmark's JSON output, ideally from
bench/run-softmax.sh (9 interleaved repetitions, aggregates only).
Medians, not means: the machine is shared.  With a single repetition the
one measured value stands in for the median.  Standard library only.
"""

import json
import sys

# (numerator, denominator, causal, goal, lengths): the targets,
# as ratios of median throughput (higher is faster).
GOALS = [
    ("avx512", "onednn", 0, 1.3, (128, 512)),
    ("avx512", "onednn", 0, 1.0, (2048,)),
    ("avx512", "expf_loop", 0, 8.0, (128, 512, 2048)),
    ("avx512", "onednn", 1, 1.6, (128, 512, 2048)),
]

VARIANT_ORDER = ["scalar", "avx2", "avx512", "neon", "dispatch", "expf_loop", "onednn"]


def split_name(run_name):
    """'softmax/avx2/L:512/causal:1/real_time' -> ('avx2', 512, 1)."""
    parts = run_name.split("/")
    if len(parts) < 4 or parts[0] != "softmax":
        return None
    args = dict(p.split(":", 1) for p in parts[2:] if ":" in p)
    if int(args.get("heads", 8)) != 8:  # the targets are for 8 heads
        return None
    return parts[1], int(args["L"]), int(args["causal"])


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    results = {}  # (L, causal) -> variant -> {"median": run, "cv": run} | {"error": msg}
    reps = 1
    for run in doc.get("benchmarks", []):
        key = split_name(run.get("run_name", run.get("name", "")))
        if key is None:
            continue
        variant, length, causal = key
        reps = max(reps, run.get("repetitions", 1))
        slot = results.setdefault((length, causal), {}).setdefault(variant, {})
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
    return doc.get("context", {}), results, reps


def rate(slot):
    run = slot.get("median") if slot else None
    return run.get("items_per_second") if run else None


def print_context(ctx, reps):
    print(f"host {ctx.get('host_name', '?')}: {ctx.get('num_cpus', '?')} CPUs @ "
          f"{ctx.get('mhz_per_cpu', '?')} MHz, load "
          f"{', '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))}; {ctx.get('date', '')}")
    print(f"peak {ctx.get('peak_version', '?')}, active tier {ctx.get('peak_isa_active', '?')}")
    print(f"repetitions: {reps} (interleaved); times are wall-clock medians; "
          f"Google Benchmark library_build_type={ctx.get('library_build_type', '?')}")


def print_shape(key, per_shape):
    length, causal = key
    base = rate(per_shape.get("onednn"))
    print(f"\nsoftmax L={length} rows={8 * length} {'causal' if causal else 'no mask'}")
    print(f"  {'variant':<11}{'median time':>14}{'Gelem/s':>10}{'cv':>8}{'vs onednn':>12}")
    order = [v for v in VARIANT_ORDER if v in per_shape]
    order += sorted(v for v in per_shape if v not in VARIANT_ORDER)
    for variant in order:
        slot = per_shape[variant]
        med = slot.get("median")
        if med is None:
            print(f"  {variant:<11}skipped: {slot.get('error', 'no median')}")
            continue
        t = f"{med['real_time']:.1f} {med.get('time_unit', '')}"
        cv = slot.get("cv")
        cv_s = f"{100.0 * cv['real_time']:.1f}%" if cv else "-"
        r = rate(slot)
        vs = f"{r / base:.2f}x" if base and r else "-"
        label = f"  [{med['label']}]" if med.get("label") else ""
        print(f"  {variant:<11}{t:>14}{r / 1e9:>10.3f}{cv_s:>8}{vs:>12}{label}")


def print_goals(results):
    print("\nratios (median items/s, wall-clock) against the issue's goals")
    for num, den, causal, goal, lengths in GOALS:
        for length in lengths:
            per_shape = results.get((length, causal), {})
            rn, rd = rate(per_shape.get(num)), rate(per_shape.get(den))
            name = f"{num} / {den} L={length} {'causal' if causal else 'no mask'}"
            if rn is None or rd is None:
                missing = num if rn is None else den
                slot = per_shape.get(missing, {})
                print(f"  {name:<40} n/a ({missing}: {slot.get('error', 'not measured')})")
                continue
            ratio = rn / rd
            verdict = "MET" if ratio >= goal else "MISSED"
            print(f"  {name:<40}{ratio:7.2f}x  goal >= {goal:g}x  {verdict}")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ctx, results, reps = load(argv[1])
    if not results:
        print(f"{argv[1]}: no softmax results", file=sys.stderr)
        return 1
    print_context(ctx, reps)
    for key in sorted(results):
        print_shape(key, results[key])
    print_goals(results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
