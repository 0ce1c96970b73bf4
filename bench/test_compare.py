#!/usr/bin/python3
"""Tests of bench/compare.py and bench/report_history.py (unittest; meson
test bench-compare):  /usr/bin/python3 bench/test_compare.py

The fallback U test (compare.mann_whitney_u) is checked against
scipy.stats.mannwhitneyu when scipy imports (Debian: python3-scipy); those
checks are skipped without it."""

import json
import os
import random
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare  # noqa: E402
import report_history  # noqa: E402

try:
    from scipy.stats import mannwhitneyu
except ImportError:
    mannwhitneyu = None


def entry(times, unit="ns"):
    return {"unit": unit, "times": list(times), "median": report_history.median(times),
            "min": min(times), "max": max(times), "repetitions": len(times), "threads": 1}


def gb_doc(samples):
    """A Google Benchmark JSON document: {name: [real_time per repetition]}."""
    bs = []
    for name, times in samples.items():
        for i, t in enumerate(times):
            bs.append({"name": name, "run_name": name, "run_type": "iteration",
                       "repetitions": len(times), "repetition_index": i, "threads": 1,
                       "iterations": 10, "real_time": t, "cpu_time": t, "time_unit": "us",
                       "items_per_second": 1e6 / t})
        bs.append({"name": name + "_median", "run_name": name, "run_type": "aggregate",
                   "aggregate_name": "median", "real_time": 0.0, "cpu_time": 0.0,
                   "time_unit": "us"})
    return {"context": {"date": "2026-12-03T00:00:00+00:00", "load_avg": [1.0, 1.0, 1.0]},
            "benchmarks": bs}


class Verdicts(unittest.TestCase):
    def test_identical_not_significant(self):
        xs = [10.0, 10.5, 9.8, 10.2, 10.1, 9.9, 10.3]
        r = compare.compare_entry(entry(xs), entry(xs), 0.05)
        self.assertEqual(r["verdict"], "no significant change")
        self.assertGreater(r["p"], 0.5)
        self.assertAlmostEqual(r["ratio"], 1.0)

    def test_shift_slower_and_faster(self):
        a = [10.0, 10.5, 9.8, 10.2, 10.1, 9.9, 10.3, 10.4, 9.7]
        b = [x * 1.3 for x in a]
        r = compare.compare_entry(entry(a), entry(b), 0.05)
        self.assertEqual(r["verdict"], "slower")
        self.assertLess(r["p"], 0.05)
        self.assertAlmostEqual(r["change_pct"], 30.0, places=6)
        r = compare.compare_entry(entry(b), entry(a), 0.05)
        self.assertEqual(r["verdict"], "faster")
        self.assertLess(r["ratio"], 1)

    def test_units_are_converted(self):
        a = entry([1.0, 1.1, 0.9, 1.05, 0.95], "ms")
        b = entry([1000.0, 1100.0, 900.0, 1050.0, 950.0], "us")
        r = compare.compare_entry(a, b, 0.05)
        self.assertAlmostEqual(r["ratio"], 1.0)
        self.assertEqual(r["verdict"], "no significant change")

    def test_too_few_repetitions(self):
        r = compare.compare_entry(entry([1.0, 1.1, 0.9]), entry([5.0, 5.1, 4.9]), 0.05)
        self.assertEqual(r["verdict"], "too few repetitions")
        self.assertIsNone(r["p"])
        self.assertGreater(r["ratio"], 4)  # the median change is still reported
        seeded = {"unit": "ns", "times": [], "median": 1.0, "min": 1.0, "max": 1.0,
                  "repetitions": 5, "threads": 1}
        r = compare.compare_entry(seeded, entry([1.0] * 9), 0.05)
        self.assertEqual(r["verdict"], "too few repetitions")


class FallbackUTest(unittest.TestCase):
    def test_extremes_by_hand(self):
        # 4 vs 4, fully separated: P(U = 16) = 1 / C(8, 4) = 1/70, two-sided 2/70
        _, p = compare.mann_whitney_u([1, 2, 3, 4], [5, 6, 7, 8])
        self.assertAlmostEqual(p, 2 / 70)
        _, p = compare.mann_whitney_u([1, 2, 3, 4], [1, 2, 3, 4])  # ties: normal approx.
        self.assertAlmostEqual(p, 1.0)

    @unittest.skipIf(mannwhitneyu is None, "no scipy (Debian: python3-scipy)")
    def test_against_scipy(self):
        rng = random.Random(7)
        cases = []
        for n1, n2 in ((4, 4), (5, 5), (5, 9), (9, 9), (12, 15), (30, 25)):
            for shift in (0.0, 0.3, 1.0):
                a = [rng.gauss(0, 1) for _ in range(n1)]
                b = [rng.gauss(shift, 1) for _ in range(n2)]
                cases.append((a, b))
                # with ties (rounded): the normal approximation's tie correction
                cases.append(([round(x, 1) for x in a], [round(x, 1) for x in b]))
        for a, b in cases:
            want = mannwhitneyu(a, b, alternative="two-sided")
            u, p = compare.mann_whitney_u(a, b)
            self.assertAlmostEqual(u, float(want.statistic), places=9)
            self.assertAlmostEqual(p, float(want.pvalue), places=9, msg=(a, b))


class History(unittest.TestCase):
    def test_round_trip(self):
        doc = gb_doc({"softmax/dispatch/heads:12/L:512/causal:0/real_time": [5, 3, 4, 6, 2],
                      "softmax/dispatch/heads:12/L:512/causal:0/threads:2/real_time": [9, 8]})
        cpu = {"model_name": "Test CPU 1234", "family": "6", "model": "1"}
        rec = report_history.run_record(doc, cpu, "abc123", True, "loaded machine")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "sub", "h.jsonl")
            report_history.append_history(path, rec)
            report_history.append_history(path, rec)
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
            self.assertEqual(len(lines), 2)
            self.assertEqual(lines[0], lines[1])
            self.assertEqual(lines[0], report_history.history_line(json.loads(lines[0])))
            keys = list(json.loads(lines[0]))
            self.assertEqual(keys, sorted(keys))
            back = report_history.history_run(path + "@-1")
            self.assertEqual(back, rec)
            self.assertEqual(report_history.history_run(path + "@0"), rec)
            with self.assertRaises(IndexError):
                report_history.history_run(path + "@2")
            runs, _ = compare.load_run(path + "@-1")
        e = back["benchmarks"]["softmax/dispatch/heads:12/L:512/causal:0/real_time"]
        self.assertEqual(e["times"], [5, 3, 4, 6, 2])  # repetition order
        self.assertEqual((e["median"], e["min"], e["max"], e["unit"]), (4, 2, 6, "us"))
        self.assertEqual(e["rate"], {"items_per_second": 1e6 / 4})
        self.assertEqual(back["threads"], [1, 2])
        self.assertEqual((back["commit"], back["dirty"], back["note"]),
                         ("abc123", True, "loaded machine"))
        self.assertEqual(back["cpu_slug"], "test-1234")
        self.assertEqual(set(runs), set(rec["benchmarks"]))

    def test_plot_series_units(self):
        from report_plots import history_series
        name = "layernorm/dispatch/rows:65536/d_model:768/real_time"
        with_rate = dict(entry([2.0, 2.0, 2.0, 2.0], "ms"), rate={"items_per_second": 7.0})
        runs = [{"benchmarks": {name: entry([1.0, 1.0, 1.0, 1.0], "ms")}},
                {"benchmarks": {name: with_rate}}, {"benchmarks": {}}]
        (label, unit, ys), = history_series(runs)
        self.assertEqual(unit, "calls/s")  # one run has no counter: 1 / time throughout
        self.assertEqual(len(ys), 3)
        self.assertAlmostEqual(ys[0], 1000.0)
        self.assertAlmostEqual(ys[1], 500.0)
        self.assertIsNone(ys[2])
        (label, unit, ys), = history_series(runs[1:])
        self.assertEqual((unit, ys), ("items/s", [7.0, None]))

    def test_compare_cli_exit_status(self):
        doc = gb_doc({"a/dispatch/n:1/real_time": [1, 2, 3, 4, 5]})
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "b.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            sys.stdout, out = open(os.devnull, "w"), sys.stdout
            try:
                self.assertEqual(compare.main([path, path]), 0)
                with self.assertRaises(SystemExit) as cm:
                    compare.main([path, os.path.join(d, "missing.json")])
                self.assertEqual(cm.exception.code, 2)
                # documents that are not runs: a clear error (2), never a traceback
                good = doc["benchmarks"][0]
                bad_docs = {"list": [good], "empty": {"benchmarks": []},
                            "nan": {"benchmarks": [dict(good, real_time=float("nan"))]},
                            "string": {"benchmarks": [dict(good, real_time="5")]},
                            "unit": {"benchmarks": [dict(good, time_unit="fortnights")]},
                            "no_time": {"benchmarks": [{k: v for k, v in good.items()
                                                         if k != "real_time"}]},
                            "huge": {"benchmarks": [dict(good, real_time=10 ** 400)]},
                            "tiny": {"benchmarks": [dict(good, real_time=5e-324)]},
                            "name": {"benchmarks": [dict(good, name=5, run_name=5)]},
                            "surrogate": {"benchmarks": [dict(good, name="a/\ud800",
                                                              run_name="a/\ud800")]},
                            "control": {"benchmarks": [dict(good, name="a\nb", run_name="a\nb")]},
                            "units": {"benchmarks": [good, dict(good, time_unit="ms",
                                                                 repetition_index=1)]}}
                sys.stderr, err = open(os.devnull, "w"), sys.stderr
                try:
                    for what, bad in bad_docs.items():
                        bpath = os.path.join(d, what + ".json")
                        with open(bpath, "w", encoding="utf-8") as f:
                            json.dump(bad, f)
                        for main, argv in ((compare.main, [path, bpath]),
                                           (report_history.main,
                                            ["--bench", bpath, "--commit", "x",
                                             "--history", os.path.join(d, "h.jsonl")])):
                            with self.assertRaises(SystemExit, msg=what) as cm:
                                main(argv)
                            self.assertEqual(cm.exception.code, 2, what)
                    self.assertFalse(os.path.exists(os.path.join(d, "h.jsonl")))
                    # history lines that are not runs, and a report with none
                    hist = os.path.join(d, "bad.jsonl")
                    with open(hist, "w", encoding="utf-8") as f:
                        for line in ([1], "x", {"benchmarks": []},
                                     {"benchmarks": {"a": {"unit": "ns", "times": []}}},
                                     {"benchmarks": {"a": {"unit": "xs", "median": 1}}}):
                            f.write(json.dumps(line) + "\n")
                    for n in range(5):
                        with self.assertRaises(SystemExit, msg=str(n)) as cm:
                            compare.main([path, f"{hist}@{n}"])
                        self.assertEqual(cm.exception.code, 2, n)
                    rpath = os.path.join(d, "report.json")
                    with open(rpath, "w", encoding="utf-8") as f:
                        json.dump({"results": {}}, f)
                    with self.assertRaises(SystemExit) as cm:
                        report_history.main(["--from-report", rpath, "--history",
                                             os.path.join(d, "h.jsonl")])
                    self.assertEqual(cm.exception.code, 2)
                    self.assertFalse(os.path.exists(os.path.join(d, "h.jsonl")))
                finally:
                    sys.stderr.close()
                    sys.stderr = err
            finally:
                sys.stdout.close()
                sys.stdout = out


if __name__ == "__main__":
    unittest.main()
