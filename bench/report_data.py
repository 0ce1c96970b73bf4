"""report_data - the report's inputs (part of bench/report.py, the entry
point): bench_peak's and torch-bench.py's JSON loaded and merged into one
results tree, results[family][shape][variant], with the machine limits
bench_peak measured beside them; benchmark names mapped to (family,
variant, shape), old family names to today's; and the CPU the report
describes.  The figures derived from the merged times are report_model's.
"""

import json
import os
import platform
import re


def shape_args(shape):
    return {k: int(v) for k, v in (p.split(":", 1) for p in shape.split("/") if ":" in p)}


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


def load_accuracy(path):
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def stats_from_times(times):
    return {"median_s": median(times), "min_s": min(times), "max_s": max(times),
            "repetitions": len(times)}


def clock_times(slot, clock):
    return slot["cpu"] if clock == "cpu" else slot["times"]


def merge(runs, torch_doc, clock):
    """results[family][shape][variant] = entry; limits = measured ceilings.
    clock: which time the medians use, "cpu" or "real".  bench_peak's thread
    variants (shapes ending /threads:<n>) always use wall-clock time (CPU
    time is the calling thread's alone); split_threads() takes them out of
    results, and their memcpy floors go to limits["bandwidth_threads"]."""
    results = {}
    limits = {"bandwidth": {}, "fma_peak": {}, "bandwidth_threads": {}}
    for name, slot in runs.items():
        family, variant, shape = split_name(name)
        threads = shape_args(shape).get("threads")
        if family in ("memcpy", "read", "write"):
            if slot["times"]:
                n = shape_args(shape)["bytes"]
                moved = n * (2 if family == "memcpy" else 1)
                bw = [moved / t for t in clock_times(slot, "real" if threads else clock)]
                stats = {"median_Bps": median(bw), "min_Bps": min(bw), "max_Bps": max(bw)}
                if threads:
                    limits["bandwidth_threads"].setdefault(family, {}).setdefault(
                        str(n), {})[str(threads)] = stats
                else:
                    limits["bandwidth"].setdefault(family, {})[str(n)] = stats
            continue
        if family == "fma_peak":
            if slot["counters"].get("GFLOPs"):
                # the counter is a rate over real time; over CPU time:
                g = [x * t / c if clock == "cpu" else x for x, t, c in
                     zip(slot["counters"]["GFLOPs"], slot["times"], slot["cpu"])]
                limits["fma_peak"][variant] = {"median": median(g), "min": min(g),
                                               "max": max(g)}
            continue
        e = {"source": "bench_peak"}
        if "error" in slot and not slot["times"]:
            e["skipped"] = slot["error"]
        else:
            e.update(stats_from_times(clock_times(slot, "real" if threads else clock)))
            if threads:
                e["clock"] = "real"
            e["real"] = stats_from_times(slot["times"])
            e["cpu_over_real"] = median([c / t for c, t in zip(slot["cpu"], slot["times"])])
            if slot["label"]:
                e["label"] = slot["label"]
        results.setdefault(family, {}).setdefault(shape, {})[variant] = e
    if torch_doc:
        for r in torch_doc.get("benchmarks", []):
            family, variant, shape = split_name(r["name"])
            e = {"source": "torch", "repetitions": r["repetitions"], "real": r["real"]}
            e.update(r[clock])
            e["cpu_over_real"] = r["cpu"]["median_s"] / r["real"]["median_s"]
            results.setdefault(family, {}).setdefault(shape, {})[variant] = e
    return results, limits


def split_threads(results):
    """Takes bench_peak's thread variants out of results (their shapes end
    /threads:<n>): returns {family: {shape without threads: {n: entry}}}
    for the dispatch variant, which is what they run."""
    threads = {}
    for family, shapes in results.items():
        for shape in [s for s in shapes if "threads" in shape_args(s)]:
            variants = shapes.pop(shape)
            n = shape_args(shape)["threads"]
            base = "/".join(p for p in shape.split("/") if not p.startswith("threads:"))
            e = variants.get("dispatch")
            if e is not None:
                threads.setdefault(family, {}).setdefault(base, {})[n] = e
    for family in [f for f, s in results.items() if not s]:
        del results[family]
    return threads



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
