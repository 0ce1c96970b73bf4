#!/usr/bin/python3
"""report_history - the per-CPU run history (part of bench/report.py's
tooling; bench/report.sh runs it after bench_peak).  Appends one JSON line
per run to bench/results/history/<cpu-slug>.jsonl (the slug of the report's
bench/results/<cpu-slug>.md), append-only, keys sorted:

  {"benchmarks": {NAME: {"max", "median", "min", "repetitions",
                         "threads", "times": [real_time per repetition],
                         "unit": "ns"|"us"|"ms"|"s",
                         ["rate": {"items_per_second"|"bytes_per_second": median}]}},
   "commit": "<git rev-parse HEAD>" or "unknown", "dirty": true|false|null,
   "cpu": "<model name>", "cpu_slug": "...", "date": "<bench_peak's date>",
   "load_avg": [...], "note": "...", "repetitions": N, "schema": 1,
   "threads": [distinct thread counts]}

NAME is Google Benchmark's run_name (no /repeats suffix); times are
real_time in the benchmark's own time_unit, in repetition order.
bench/compare.py compares two runs (history lines or bench_peak JSON).

  /usr/bin/python3 bench/report_history.py --bench BENCH.json
      [--history FILE] [--note TEXT] [--commit SHA] [--dirty|--clean]
  /usr/bin/python3 bench/report_history.py --from-report bench/results/<cpu>.json ...
"""

import argparse
import json
import os
import re
import subprocess
import sys

from report_data import cpu_info, cpu_slug, median, shape_args

SCHEMA = 1
HERE = os.path.dirname(os.path.abspath(__file__))
HISTORY_DIR = os.path.join(HERE, "results", "history")
RATE_COUNTERS = ("items_per_second", "bytes_per_second")


def history_path(slug, history_dir=HISTORY_DIR):
    return os.path.join(history_dir, f"{slug}.jsonl")


def git_commit(root=HERE):
    """(HEAD's hash, whether the tree has uncommitted changes); ("unknown",
    None) outside a git checkout."""
    try:
        sha = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True).stdout.strip()
        st = subprocess.run(["git", "-C", root, "status", "--porcelain",
                             "--untracked-files=no"], check=True, capture_output=True,
                            text=True).stdout
        return sha, bool(st.strip())
    except (OSError, subprocess.CalledProcessError):
        return "unknown", None


def bench_threads(name, r):
    """peak's pool size (a /threads:<n> shape) else Google Benchmark's threads."""
    n = shape_args("/".join(name.split("/")[1:])).get("threads")
    return int(n) if n is not None else int(r.get("threads", 1))


TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def _seconds_ok(t, unit):
    """t (in unit) a number whose seconds are finite and > 0."""
    if isinstance(t, bool) or not isinstance(t, (int, float)) or unit not in TIME_UNITS:
        return False
    try:
        sec = float(t) * TIME_UNITS[unit]
    except OverflowError:  # an integer beyond float range
        return False
    return 0 < sec < float("inf")


def _name_ok(name):
    """A benchmark name: text that prints (no control characters, no lone
    surrogates)."""
    if not isinstance(name, str) or not name or any(c < " " or c == "\x7f" for c in name):
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_benchmarks(benches):
    """ValueError unless benches is a non-empty {name: entry} of entries
    with a known unit, a positive median and positive repetition times."""
    if not isinstance(benches, dict) or not benches:
        raise ValueError("no benchmarks")
    for name, e in benches.items():
        if not _name_ok(name):
            raise ValueError(f"benchmark name {name!r} is not printable text")
        if not isinstance(e, dict):
            raise ValueError(f"{name}: not an entry")
        unit = e.get("unit", "ns")
        times = e.get("times") or []
        if not isinstance(times, list) or not all(
                _seconds_ok(t, unit) for t in [e.get("median")] + times):
            raise ValueError(f"{name}: median or times not positive numbers of a known unit "
                             f"(unit {unit!r})")


def _gb_time(r, unit):
    """A repetition's real_time in `unit` (its benchmark's first
    repetition's): a finite positive number (ValueError else)."""
    t = r.get("real_time")
    if r.get("time_unit", "ns") != unit:
        raise ValueError(f"{r.get('name', '?')!r}: repetitions in {unit!r} and "
                         f"{r.get('time_unit')!r}")
    if not _seconds_ok(t, unit):
        raise ValueError(f"{r.get('name', '?')!r}: real_time {t!r} {unit} is not a positive "
                         f"number of a known unit ({', '.join(TIME_UNITS)})")
    return float(t)


def benchmarks_from_gb(doc):
    """{run_name: entry} from Google Benchmark JSON (aggregates skipped);
    ValueError for a document that is not one, or holds no run."""
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ValueError("not Google Benchmark JSON (no benchmarks list)")
    raw = {}
    for r in doc["benchmarks"]:
        if not isinstance(r, dict) or not _name_ok(r.get("name")) or \
                not _name_ok(r.get("run_name", r.get("name"))):
            raise ValueError(f"a benchmark entry without a printable name: {str(r)[:80]!r}")
        if r.get("run_type") == "aggregate" or r.get("error_occurred"):
            continue
        name = r.get("run_name", r["name"])
        slot = raw.setdefault(name, {"unit": r.get("time_unit", "ns"), "reps": [],
                                     "threads": bench_threads(name, r)})
        slot["reps"].append((r.get("repetition_index", len(slot["reps"])), r))
    out = {}
    for name, slot in raw.items():
        reps = [r for _, r in sorted(slot["reps"], key=lambda x: x[0])]
        times = [_gb_time(r, slot["unit"]) for r in reps]
        e = {"unit": slot["unit"], "times": times, "median": median(times),
             "min": min(times), "max": max(times), "repetitions": len(times),
             "threads": slot["threads"]}
        for k in RATE_COUNTERS:
            vals = [r[k] for r in reps if k in r]
            if vals:
                e["rate"] = {k: median(vals)}
                break
        out[name] = e
    if not out:
        raise ValueError("no benchmark runs in it (only aggregates or errors, or none)")
    return out


def _record(benches, ctx, cpu, commit, dirty, note):
    """A history line from its benchmarks and the run's context."""
    check_benchmarks(benches)
    rec = {"schema": SCHEMA, "commit": commit, "dirty": dirty, "date": ctx.get("date"),
           "cpu": cpu.get("model_name", "unknown"), "cpu_slug": cpu_slug(cpu),
           "threads": sorted({e["threads"] for e in benches.values()}),
           "repetitions": max((e["repetitions"] for e in benches.values()), default=0),
           "load_avg": ctx.get("load_avg"), "benchmarks": benches}
    if note:
        rec["note"] = note
    return rec


def run_record(doc, cpu=None, commit="unknown", dirty=None, note=None):
    """One history line (a dict) from bench_peak's JSON document."""
    cpu = cpu if cpu is not None else cpu_info()
    ctx = doc.get("context", {})
    benches = benchmarks_from_gb(doc)
    return _record(benches, ctx, cpu, commit, dirty, note)


def record_from_report(doc, commit="unknown", note=None):
    """A history line from a report's bench/results/<cpu>.json, which keeps
    per benchmark the wall-clock median, min and max ("real", in s) but not
    the per-repetition times: "times" is empty there (compare.py then says
    "too few repetitions").  bench_peak's entries only (not torch's; the
    memcpy/FMA limits are not kept per benchmark).  Times are stored in ns."""
    ctx = doc.get("context", {})
    cpu = doc.get("cpu", {})
    benches = {}
    for family, shapes in doc.get("results", {}).items():
        for shape, variants in shapes.items():
            for variant, e in variants.items():
                if e.get("source") != "bench_peak" or "real" not in e:
                    continue
                name = "/".join(x for x in (family, variant, shape) if x) + "/real_time"
                r = e["real"]
                benches[name] = {"unit": "ns", "times": [], "median": r["median_s"] * 1e9,
                                 "min": r["min_s"] * 1e9, "max": r["max_s"] * 1e9,
                                 "repetitions": r["repetitions"],
                                 "threads": int(shape_args(shape).get("threads", 1))}
    return _record(benches, ctx, cpu, commit, None, note)


def history_line(rec):
    """The record as one line: sorted keys, no spaces, so equal runs give
    equal lines."""
    return json.dumps(rec, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"


def append_history(path, rec):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(history_line(rec))


def read_history(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def history_run(spec):
    """'FILE.jsonl@N' -> (the N-th record, N counted from 0, negative from
    the end); None when spec has no @N."""
    m = re.fullmatch(r"(.*)@(-?\d+)", spec)
    if not m:
        return None
    runs = read_history(m.group(1))
    n = int(m.group(2))
    if not -len(runs) <= n < len(runs):
        raise IndexError(f"{m.group(1)} has {len(runs)} runs; no run {n}")
    return runs[n]


def main(argv):
    p = argparse.ArgumentParser(description="append a bench_peak run to the history")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--bench", help="bench_peak's JSON (--benchmark_out)")
    src.add_argument("--from-report", help="a report's bench/results/<cpu>.json (no "
                     "per-repetition times; commit \"unknown\" unless --commit)")
    p.add_argument("--history", help="default: bench/results/history/<cpu-slug>.jsonl")
    p.add_argument("--note", action="append", default=[])
    p.add_argument("--commit", help="default: git rev-parse HEAD")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--dirty", action="store_const", const=True, dest="dirty")
    g.add_argument("--clean", action="store_const", const=False, dest="dirty")
    args = p.parse_args(argv)
    note = "; ".join(args.note) or None
    try:
        with open(args.bench or args.from_report, encoding="utf-8") as f:
            doc = json.load(f)
        if args.from_report:
            rec = record_from_report(doc, args.commit or "unknown", note)
            commit, dirty = rec["commit"], None
        else:
            commit, dirty = git_commit()
            if args.commit:
                commit, dirty = args.commit, None
            if args.dirty is not None:
                dirty = args.dirty
            rec = run_record(doc, cpu_info(), commit, dirty, note)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError,
            RecursionError) as e:
        p.error(f"{args.bench or args.from_report}: {type(e).__name__}: {e}")
    path = args.history or history_path(rec["cpu_slug"])
    append_history(path, rec)
    print(f"report: appended {len(rec['benchmarks'])} benchmarks of {commit[:12]}"
          f"{' (dirty tree)' if dirty else ''} to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
