#!/usr/bin/python3
"""compare.py - compare two bench_peak runs, as Google Benchmark's
tools/compare.py does: per benchmark, the change of the median real time
(B/A and %) and a two-sided Mann-Whitney U test on the per-repetition
times.  It reports; it does not gate: the exit status is 0 unless the
arguments are bad (2).

  /usr/bin/python3 bench/compare.py RUN_A RUN_B [--alpha 0.05] [--filter REGEX]

A RUN is a Google Benchmark JSON file (bench_peak --benchmark_out=FILE
--benchmark_out_format=json, or --benchmark_format=json's output) or
HISTORY.jsonl@N, the N-th line of a history file of bench/report_history.py
(from 0; negative from the end: bench/results/history/<cpu>.jsonl@-1 is the
latest run).  "faster"/"slower" only when p < alpha; with fewer than 4
repetitions on either side (a history line seeded from a report keeps no
per-repetition times) there is no test: "too few repetitions".  The U test
is scipy.stats.mannwhitneyu when scipy imports (Debian: python3-scipy),
else mann_whitney_u() below (the same method scipy picks by default).
Each benchmark is tested on its own, with no correction for testing many:
of N unchanged benchmarks about N * alpha are called faster or slower by
chance (two runs of one binary gave one "slower" at p = 0.026 in 17), so
read a lone verdict near alpha as noise until a rerun repeats it.
"""

import argparse
import json
import math
import re
import sys
from functools import lru_cache

from report_history import TIME_UNITS as TIME_UNIT
from report_history import benchmarks_from_gb, check_benchmarks, history_run

MIN_REPETITIONS = 4


# ---- the U test without scipy ------------------------------------------------------------
# Mirrors scipy.stats.mannwhitneyu(x, y, alternative="two-sided") with its
# default method="auto" (scipy 1.7 - 1.10): the exact distribution of U
# when there are no ties and one sample has at most 8 values, else the
# normal approximation with the tie correction of the variance and a
# continuity correction of 0.5.  bench/test_compare.py checks it against
# scipy where scipy is installed.

def _ranks(values):
    """Mid-ranks (1-based; ties get the mean of their ranks) and the tie
    group sizes."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = 0.5 * (i + j) + 1
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


@lru_cache(maxsize=None)
def _u_count(m, n, u):
    """How many orderings of m x's and n y's give U_x = u (U_x: the number
    of (x, y) pairs with x > y)."""
    if u < 0 or u > m * n:
        return 0
    if m == 0 or n == 0:
        return 1 if u == 0 else 0
    # the largest value is an x (beats all n y's) or a y (beats no x)
    return _u_count(m - 1, n, u - n) + _u_count(m, n - 1, u)


def mann_whitney_u(x, y):
    """Two-sided Mann-Whitney U test: (U of x, p-value)."""
    n1, n2 = len(x), len(y)
    ranks, ties = _ranks(list(x) + list(y))
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    u2 = n1 * n2 - u1
    big = max(u1, u2)
    has_ties = any(t > 1 for t in ties)
    if (n1 <= 8 or n2 <= 8) and not has_ties:
        total = math.comb(n1 + n2, n1)
        sf = sum(_u_count(n1, n2, k) for k in range(int(round(big)), n1 * n2 + 1)) / total
        p = 2 * sf
    else:
        n = n1 + n2
        tie_term = sum(t ** 3 - t for t in ties) / (n * (n - 1))
        sd = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term))
        if sd == 0:
            return u1, 1.0
        z = (big - n1 * n2 / 2 - 0.5) / sd
        p = math.erfc(z / math.sqrt(2))  # 2 * the normal survival function at z
    return u1, min(1.0, max(0.0, p))


def u_test(x, y):
    """(p-value, which implementation)."""
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:
        return mann_whitney_u(x, y)[1], "compare.mann_whitney_u"
    return float(mannwhitneyu(x, y, alternative="two-sided").pvalue), "scipy"


# ---- runs --------------------------------------------------------------------------------

def load_run(spec):
    """{name: entry} (entries as report_history stores them) and a label."""
    rec = history_run(spec)
    if rec is not None:
        if not isinstance(rec, dict):
            raise ValueError(f"{spec}: not a history record")
        label = f"{rec.get('commit', 'unknown')[:10]}{'+dirty' if rec.get('dirty') else ''}" \
                f" {rec.get('date') or ''}".strip()
        try:
            check_benchmarks(rec.get("benchmarks"))
        except ValueError as e:
            raise ValueError(f"{spec}: {e}") from None
        return rec["benchmarks"], label
    with open(spec, encoding="utf-8") as f:
        doc = json.load(f)
    try:
        return benchmarks_from_gb(doc), spec
    except ValueError as e:
        raise ValueError(f"{spec}: {e}") from None


def seconds(e, key):
    return e[key] * TIME_UNIT[e.get("unit", "ns")]


def compare_entry(a, b, alpha):
    """One benchmark: the median ratio and the verdict."""
    ma, mb = seconds(a, "median"), seconds(b, "median")
    ratio = mb / ma if ma > 0 else float("nan")
    ta = [t * TIME_UNIT[a.get("unit", "ns")] for t in a.get("times") or []]
    tb = [t * TIME_UNIT[b.get("unit", "ns")] for t in b.get("times") or []]
    row = {"a_median_s": ma, "b_median_s": mb, "ratio": ratio, "change_pct": 100 * (ratio - 1),
           "n_a": len(ta), "n_b": len(tb), "p": None}
    if len(ta) < MIN_REPETITIONS or len(tb) < MIN_REPETITIONS:
        row["verdict"] = "too few repetitions"
        return row
    row["p"], row["test"] = u_test(ta, tb)
    if row["p"] < alpha:
        row["verdict"] = "faster" if ratio < 1 else "slower" if ratio > 1 else "same median"
    else:
        row["verdict"] = "no significant change"
    return row


def compare_runs(run_a, run_b, alpha=0.05, pattern=None):
    names = [n for n in run_a if n in run_b and (pattern is None or re.search(pattern, n))]
    return [(n, compare_entry(run_a[n], run_b[n], alpha)) for n in names]


def fmt_time(s):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if s >= scale or unit == "ns":
            return f"{s / scale:.4g} {unit}"
    return f"{s} s"


def format_table(rows, alpha):
    head = ("benchmark", "A median", "B median", "B/A", "change", "reps", "p", "verdict")
    body = [(n, fmt_time(r["a_median_s"]), fmt_time(r["b_median_s"]), f"{r['ratio']:.3f}",
             f"{r['change_pct']:+.1f}%", f"{r['n_a']}/{r['n_b']}",
             "-" if r["p"] is None else f"{r['p']:.4f}", r["verdict"]) for n, r in rows]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i in (0, 7) else c.rjust(w)
                       for i, (c, w) in enumerate(zip(x, widths))).rstrip()
             for x in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def main(argv):
    p = argparse.ArgumentParser(description="compare two bench_peak runs (median change "
                                "and a two-sided Mann-Whitney U test per benchmark)")
    p.add_argument("run_a", metavar="RUN_A", help="Google Benchmark JSON or HISTORY.jsonl@N")
    p.add_argument("run_b", metavar="RUN_B", help="Google Benchmark JSON or HISTORY.jsonl@N")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (0.05)")
    p.add_argument("--filter", help="regex on benchmark names (re.search)")
    args = p.parse_args(argv)
    if not 0 < args.alpha < 1:
        p.error("--alpha must be in (0, 1)")
    try:
        pattern = re.compile(args.filter) if args.filter else None
        (a, label_a), (b, label_b) = load_run(args.run_a), load_run(args.run_b)
    except (OSError, ValueError, IndexError, KeyError, TypeError, AttributeError, OverflowError,
            RecursionError, re.error) as e:
        p.error(f"{type(e).__name__}: {e}" if isinstance(e, (KeyError, TypeError)) else str(e))
    rows = compare_runs(a, b, args.alpha, pattern)
    print(f"A: {label_a} ({len(a)} benchmarks)")
    print(f"B: {label_b} ({len(b)} benchmarks)")
    print(f"{len(rows)} in both{' matching ' + args.filter if args.filter else ''}; "
          f"real time, medians; two-sided Mann-Whitney U, alpha {args.alpha}; "
          f"B/A < 1: B is faster")
    if rows:
        print()
        print("\n".join(format_table(rows, args.alpha)))
        tests = {r.get("test") for _, r in rows if r.get("test")}
        counts = {}
        for _, r in rows:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        print()
        print("summary: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) +
              (f" (U test: {', '.join(sorted(tests))})" if tests else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
