#!/usr/bin/python3
"""Merge bench_peak's JSON, peak_accuracy's JSON and torch-bench.py's JSON
into the comparison report: bench/results/<cpu>.md and .json, and PNG plots.

Usage (bench/report.sh runs it; it can also be re-run on kept raw files):
  /usr/bin/python3 bench/report.py --bench BENCH.json [--accuracy ACC.json]
      [--torch TORCH.json] [--peers PEERS.json] [--replay REPLAY.json]
      [--out-dir bench/results] [--readme README.md]
      [--command "sh bench/report.sh"] [--note TEXT] [--history HISTORY.jsonl]

--peers: bench/peers-bench.py's JSON (PyTorch 2.x and ONNX Runtime at 1 and
2 threads); --replay: bench_replay --format=json (the simulated thread
scaling).  Either may be missing: its section then says so.

Medians over the repetitions, with min-max; every ratio is taken between
medians of the same run.  Throughputs come from one model per family (the
bytes an algorithm must move and a nominal FLOP count, FAMILIES below), the
same for every implementation, so a ratio of throughputs is a ratio of
times.  The plots need matplotlib (python3-matplotlib); without it the
tables are still written.

This file is the entry point; the work is in the modules beside it:
  report_data.py    loading and merging the JSON, benchmark names, the CPU
  report_model.py   derived figures: throughputs, roofline, goals, units
  report_tables.py  the markdown: bench/results/<cpu>.md, the README block
  report_plots.py   the PNG plots (matplotlib)
  report_peers.py   the PyTorch 2.x / ONNX Runtime tables and the thread scaling
  report_history.py the per-CPU run history, bench/results/history/<cpu>.jsonl
                    (report.sh appends each run before this script runs; the
                    report plots the headline shapes over its runs, and
                    bench/compare.py compares two of them)
"""

import argparse
import json
import os
import sys

from report_data import (cpu_info, cpu_slug, load_accuracy, load_bench, load_torch, merge,
                         split_threads)
from report_model import TRANSCENDENTAL_FLOPS, add_throughputs, annotate_limits, goal_rows
from report_peers import load_peers, load_replay, md_sections, peer_goal_rows, plot_scaling
from report_history import history_path, read_history
from report_plots import plot_history, write_plots
from report_tables import (context_lines, md_report, md_summary, readme_block, summary_rows,
                           update_readme)


def main(argv):
    p = argparse.ArgumentParser(description="peak's comparison report")
    p.add_argument("--bench", required=True)
    p.add_argument("--accuracy")
    p.add_argument("--torch")
    p.add_argument("--peers", help="bench/peers-bench.py's JSON")
    p.add_argument("--replay", help="bench_replay --format=json's output")
    p.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "results"))
    p.add_argument("--readme")
    p.add_argument("--command", default="sh bench/report.sh")
    p.add_argument("--note", action="append", default=[])
    p.add_argument("--history", help="the run history (default: "
                   "bench/results/history/<cpu>.jsonl, report_history.py): a plot of "
                   "the headline shapes over its runs when it has two or more")
    p.add_argument("--clock", choices=("cpu", "real"), default="cpu",
                   help="which time the medians use (default cpu: see report_tables.CLOCK_NOTE)")
    args = p.parse_args(argv)

    ctx, runs = load_bench(args.bench)
    acc = load_accuracy(args.accuracy)
    torch_doc = load_torch(args.torch)
    results, limits = merge(runs, torch_doc, args.clock)
    bench_threads = split_threads(results)  # the /threads:<n> variants: the scaling table
    add_throughputs(results)
    annotate_limits(results, limits)
    cpu = cpu_info()
    slug = cpu_slug(cpu)
    os.makedirs(args.out_dir, exist_ok=True)
    rows = summary_rows(results)
    goals = goal_rows(results)
    pngs = write_plots(results, limits, args.out_dir, slug, cpu.get("model_name", slug))
    ctx_lines = context_lines(ctx, cpu, results, torch_doc, args.note, args.clock)

    md = md_report(ctx_lines, cpu, slug, args.command, rows, limits, results, goals, acc,
                   torch_doc, pngs)
    peers_doc, replay_doc = load_peers(args.peers), load_replay(args.replay)
    peers_md, scaling, workers = md_sections(peers_doc, args.peers, replay_doc, args.replay,
                                             bench_threads)
    pngs.update(plot_scaling(scaling, workers, args.out_dir, slug))
    if "scaling" in pngs:
        peers_md += [f"![scaling]({pngs['scaling']})", ""]
    history = args.history or history_path(slug)
    runs_hist = read_history(history) if os.path.exists(history) else []
    hist_png = plot_history(runs_hist, args.out_dir, slug, cpu.get("model_name", slug))
    pngs.update(hist_png)
    if hist_png:
        peers_md += ["## History", "",
                     f"The headline shapes over the {len(runs_hist)} runs of "
                     f"`{os.path.relpath(history, args.out_dir)}` (one JSON line per run: "
                     "commit, date, per-repetition times; `bench/compare.py A B` compares "
                     "two runs with a Mann-Whitney U test):", "",
                     f"![history]({hist_png['history']})", ""]
    at = md.index("## Accuracy") if "## Accuracy" in md else len(md)
    md[at:at] = peers_md
    md_path = os.path.join(args.out_dir, f"{slug}.md")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write("\n".join(md))

    doc = {"cpu": cpu, "context": ctx, "torch_context": torch_doc["context"] if torch_doc
           else None, "command": args.command, "limits": limits, "summary": rows,
           "results": results, "accuracy": (acc or {}).get("entries", []) +
           ((torch_doc or {}).get("accuracy", [])), "plots": pngs, "goals": goals,
           "model": {"transcendental_flops": TRANSCENDENTAL_FLOPS},
           "peers": peers_doc, "peer_goals": peer_goal_rows(peers_doc),
           "replay": replay_doc, "scaling": {"workers": workers, "rows": scaling},
           "bench_threads": bench_threads}
    json_path = os.path.join(args.out_dir, f"{slug}.json")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)

    if args.readme:
        update_readme(args.readme, readme_block(args.readme, args.out_dir, slug, args.command,
                                                ctx_lines, rows, pngs))

    print("\n".join(md_summary(rows)))
    print(f"\nreport: wrote {md_path}, {json_path} and {len(pngs)} plots", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
