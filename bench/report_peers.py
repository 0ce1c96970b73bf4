"""report_peers - the report's framework peers and thread scaling (part of
bench/report.py, the entry point): peers-bench.py's JSON (peak against
PyTorch 2.x's scaled_dot_product_attention and ONNX Runtime's
MultiHeadAttention / GroupQueryAttention at 1 and 2 threads, softmax against
torch.softmax, RoPE against Hugging Face transformers) as tables and goals,
and the scaling table: peak's measured 2-thread over 1-thread speed-up
beside the curve bench_replay simulates for N = 2 ... 192 workers.  Both
inputs are optional; a section whose input is missing says so.
"""

import json
import os

from report_data import shape_args
from report_model import fmt_time

# Speed-up goals against the peers, per family: peer median / peak median.
PEER_GOALS = {"attention": 1.3, "softmax": 1.5, "logits": 2.0, "bf16": 1.3}


def load_json(path):
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError:
            return None


def load_peers(path):
    doc = load_json(path)
    return doc if doc and (doc.get("results") or doc.get("rope")) else None


def load_replay(path):
    doc = load_json(path)
    return doc if doc and doc.get("program") == "bench_replay" and doc.get("shapes") else None


# ---- matching shapes between bench_peak, peers-bench.py and bench_replay ---------------

SCALING_FAMILIES = ["attention", "softmax", "layernorm", "pe_table", "embedding", "pe_add",
                    "exp"]


def canon(family, args):
    """One key for a shape whatever program named it: the family and its
    sizes, without the thread count; attention B 1 and Hkv = H unless given,
    the embedding's and pe_add's PE from a table (fly 0) unless given."""
    a = {k: int(v) for k, v in args.items() if k not in ("threads", "cold")}
    if family == "attention":
        a.setdefault("B", 1)
        a.setdefault("Hkv", a.get("H"))
        a["causal"] = int(bool(a.get("causal", 0)))
    if family in ("embedding", "pe_add"):
        a.setdefault("fly", 0)
    return (family, tuple(sorted(a.items())))


def key_label(key):
    family, items = key
    a = dict(items)
    if family == "attention":
        gqa = f"/{a['Hkv']}" if a.get("Hkv") != a.get("H") else ""
        b = f"B {a['B']} " if a.get("B", 1) != 1 else ""
        if a.get("Lq") == 1:
            return f"attention decode {b}H {a['H']}{gqa} Lk {a['Lk']}"
        ln = f"L {a['Lq']}" if a.get("Lq") == a.get("Lk") else f"Lq {a['Lq']} Lk {a['Lk']}"
        return f"attention {b}H {a['H']}{gqa} {ln}{', causal' if a.get('causal') else ''}"
    if family == "softmax":
        return f"softmax H {a['heads']} L {a['L']}{', causal' if a.get('causal') else ''}"
    return family + " " + " ".join(f"{k} {v}" for k, v in items)


def peers_key(e):
    s = e.get("shape", {})
    if e["family"] == "attention":
        return canon("attention", {k: s[k] for k in ("B", "H", "Hkv", "Lq", "Lk", "causal")})
    if e["family"] == "logits":  # no bench_peak twin: a key of its own
        return ("logits " + s["option"], ())
    if e["family"] == "bf16":  # likewise (bench_peak's attention/types: no peer)
        return ("bf16 " + e["name"], ())
    return canon("softmax", {"heads": s["H"], "L": s["L"], "causal": 0})


def replay_key(s):
    return canon(s.get("family", "?"), s.get("args", {}))


# ---- peers tables ------------------------------------------------------------------------

def peers_context(doc):
    c = doc["context"]
    la = c.get("load_avg_before")
    lb = c.get("load_avg_after")
    load = (f"load average {', '.join(f'{x:.2f}' for x in la)} before, "
            f"{', '.join(f'{x:.2f}' for x in lb)} after" if la and lb else "load average ?")
    ort = (f"ONNX Runtime {c['onnxruntime_version']} (onnx {c.get('onnx_version')})"
           if c.get("onnxruntime_version") else
           f"ONNX Runtime: {c.get('onnxruntime_missing') or 'not measured'}")
    cuda = f", a CUDA {c['torch_cuda_build']} build run on the CPU" if c.get(
        "torch_cuda_build") else ", CPU build"
    return [
        f"- peers run: {c.get('date', '?')} on {c.get('cpu_model', '?')} "
        f"({c.get('nproc', '?')} CPUs), {load}",
        f"- PyTorch {c.get('torch_version', '?')} from pip{cuda}, ATen CPU capability "
        f"{c.get('torch_cpu_capability', '?')}; {ort}; NumPy {c.get('numpy_version', '?')}; "
        f"Python {c.get('python', '?')}",
        f"- peak {c.get('peak_version', '?')} ({c.get('peak_isa', '?')}) through its Python "
        f"binding; medians of {c.get('repetitions', '?')} samples of >= "
        f"{c.get('min_time_s', '?')} s per implementation, the implementations' samples "
        "interleaved in one process; wall-clock seconds per call"
        + ("; quick run (--quick), not for publishing" if c.get("quick") else ""),
    ]


def _x(r):
    return f"{r:.2f}x" if r is not None else "-"


def md_peers(doc):
    """The PyTorch 2.x and ONNX Runtime table: one row per shape and thread count."""
    out = ["| shape | threads | peak [B,H,L,D] | PyTorch 2.x SDPA | torch / peak | "
           "peak [B,L,H,D] | ONNX Runtime | ORT / peak | max abs diff vs torch "
           "(peak; ORT) / bound |",
           "|---|---|---|---|---|---|---|---|---|"]
    for e in doc["results"]:
        m = e["median_s"]
        d = e.get("max_abs_diff_vs_torch", {})
        dp = d.get("peak")
        do = d.get("ort")
        diff = (f"{dp:.1e}" if dp is not None else "-") + "; " + (
            f"{do:.1e}" if do is not None else "-") + f" / {e.get('bound', 0):.1e}"
        if not e.get("agree", True):
            diff += " **disagree**"
        pb = m.get("peak_ort_layout")
        what = e.get("what", e["name"])
        out.append(
            f"| {what} | {e['threads']} | {fmt_time(m['peak'])} | {fmt_time(m['torch'])} | "
            f"{_x(e.get('speedup_vs_torch'))} | {fmt_time(pb) if pb else '-'} | "
            f"{fmt_time(m['ort']) if 'ort' in m else '-'} | {_x(e.get('speedup_vs_ort'))} | "
            f"{diff} |")
    return out


def md_peer_notes(doc):
    notes = []
    for e in doc["results"]:
        for n in e.get("notes", []):
            line = f"- {e.get('what', e['name'])}: {n}"
            if line not in notes:
                notes.append(line)
    return notes


def peer_goal_rows(doc):
    rows = []
    for e in doc["results"] if doc else []:
        goal = PEER_GOALS.get(e["family"])
        if goal is None:
            continue
        r = e.get("speedup_vs_torch")
        rows.append({"family": e["family"], "shape": e.get("what", e["name"]),
                     "threads": e["threads"], "ratio": r, "goal": goal,
                     "met": r is not None and r >= goal})
    return rows


def md_peer_goals(rows):
    out = ["| family | shape | threads | torch / peak | goal | |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['family']} | {r['shape']} | {r['threads']} | {_x(r['ratio'])} | "
                   f">= {r['goal']:g}x | {'met' if r['met'] else 'missed'} |")
    met = sum(r["met"] for r in rows)
    out += ["", f"{met} of {len(rows)} met."]
    return out


# ---- RoPE against transformers ----------------------------------------------------------

# The speed-ups peers-bench.py reports for each RoPE family, and what they
# compare: HF's median over peak's.
ROPE_RATIOS = {
    "rope_apply": [("peak_cache_vs_hf", "peak from a cache vs apply_rotary_pos_emb"),
                   ("peak_fly_vs_hf", "peak on the fly vs apply_rotary_pos_emb"),
                   ("peak_fly_vs_hf_emb", "peak on the fly vs LlamaRotaryEmbedding + apply")],
    "rope_cache": [("peak_hf_f32_vs_hf", "peak HF_F32 vs LlamaRotaryEmbedding.forward"),
                   ("peak_exact_vs_hf", "peak EXACT vs LlamaRotaryEmbedding.forward")],
}


def md_rope(doc):
    """peers-bench.py's "rope" entries: medians, speed-ups against
    transformers and the goals (>= 4x the rotation, >= 10x the table)."""
    entries = doc.get("rope") or []
    if not entries:
        return []
    out = ["### RoPE against Hugging Face transformers", "",
           "peak_rope_apply on q [1, 32, 4096, 128] and k [1, 8, 4096, 128] (HF's [B, H, L, D], "
           "out of place) against transformers' Llama apply_rotary_pos_emb with the same "
           "cos/sin, and peak_rope_cache's 131072 x 128 table against LlamaRotaryEmbedding."
           "forward for positions 0 .. 131071 (float32), at equal thread counts.  "
           "Ratios: HF median / peak median.", "",
           "| case | threads | medians | comparison | HF / peak | goal | |",
           "|---|---|---|---|---|---|---|"]
    met = total = 0
    for e in entries:
        times = ", ".join(f"{k} {fmt_time(v)}" for k, v in e["median_s"].items())
        case, thr = e.get("what", e["name"]), e["threads"]
        for key, what in ROPE_RATIOS.get(e["family"], []):
            r = e.get("speedup_vs_hf", {}).get(key)
            ok = r is not None and r >= e.get("goal", 0)
            met += ok
            total += 1
            out.append(f"| {case} | {thr} | {times} | {what} | "
                       f"{_x(r)} | >= {e.get('goal', 0):g}x | {'met' if ok else 'missed'} |")
            case = thr = times = ""  # the entry's further ratios: one cell each
    diffs = "; ".join(f"{e['name']} ({e['threads']} thr): " + ", ".join(
        f"{k} {v:.2g}" for k, v in e.get("diffs", {}).items()) +
        ("" if e.get("agree", True) else " **disagree**") for e in entries)
    out += ["", f"{met} of {total} met.  Checks (max abs difference, or ulps): {diffs}."]
    return out


# ---- scaling -----------------------------------------------------------------------------

def _pair(t):
    """(t1, t2, t1 / t2) from {threads: seconds}."""
    t1, t2 = t.get(1), t.get(2)
    return t1, t2, (t1 / t2 if t1 and t2 else None)


def measured_peers(doc):
    """{key: (label, {threads: seconds})} from peers-bench.py's peak timings:
    the [B, L, H, D] call (bench_replay's layout) where it ran, else the
    [B, H, L, D] one."""
    out = {}
    for e in doc["results"] if doc else []:
        lab = "peak_ort_layout" if "peak_ort_layout" in e["median_s"] else "peak"
        slot = out.setdefault(peers_key(e), (e.get("what", e["name"]), {}))
        slot[1][e["threads"]] = e["median_s"][lab]
    return out


def measured_bench(threads):
    """{key: {threads: seconds}} from bench_peak's thread variants
    (report_data.split_threads), wall clock."""
    out = {}
    for family, shapes in (threads or {}).items():
        for shape, by_n in shapes.items():
            a = shape_args(shape)
            if a.get("cold"):
                continue
            out[canon(family, a)] = {n: e["median_s"] for n, e in by_n.items()
                                     if "median_s" in e}
    return out


def scaling_rows(peers_doc, replay_doc, bench_threads=None):
    mp = measured_peers(peers_doc)
    mb = measured_bench(bench_threads)
    workers = [w for w in (replay_doc or {}).get("workers", []) if w >= 2]
    sims = {replay_key(s): s for s in (replay_doc or {}).get("shapes", []) if "predicted" in s}
    keys = set(mp) | set(mb) | set(sims)

    def order(k):
        fam = SCALING_FAMILIES.index(k[0]) if k[0] in SCALING_FAMILIES else 99
        return (fam, k[1])
    rows = []
    for k in sorted(keys, key=order):
        s = sims.get(k)
        curve = {}
        for p in (s or {}).get("predicted", []):
            if p["workers"] >= 2:
                curve[p["workers"]] = {"speedup": p.get("speedup"),
                                       "speedup_bw": p.get("speedup_bw")}
        p1, p2, psp = _pair(mp[k][1]) if k in mp else (None, None, None)
        b1, b2, bsp = _pair(mb.get(k, {}))
        rows.append({"shape": mp[k][0] if k in mp else key_label(k), "key": key_label(k),
                     "bench_1_s": b1, "bench_2_s": b2, "bench_2_over_1": bsp,
                     "peers_1_s": p1, "peers_2_s": p2, "peers_2_over_1": psp,
                     "measured_2": bsp if bsp is not None else psp,
                     "replay_name": s.get("name") if s else None,
                     "simulated": curve, "check": s.get("check") if s else None})
    return rows, workers


def md_scaling(rows, workers, replay_doc, replay_path):
    if not rows:
        return ["No scaling figures: neither bench_peak's thread variants, peers-bench.py's "
                "JSON nor bench_replay's JSON was there."]
    cols = ["shape", "bench_peak 1 thread", "2 / 1", "peers-bench 1 thread", "2 / 1"] + [
        f"sim. N={w}" for w in workers]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [r["shape"], fmt_time(r["bench_1_s"]) if r["bench_1_s"] else "-",
                 _x(r["bench_2_over_1"]),
                 fmt_time(r["peers_1_s"]) if r["peers_1_s"] else "-",
                 _x(r["peers_2_over_1"])]
        for w in workers:
            c = r["simulated"].get(w)
            if not c or c["speedup"] is None:
                cells.append("-")
                continue
            txt = f"{c['speedup']:.2f}"
            if c.get("speedup_bw") is not None and abs(c["speedup_bw"] - c["speedup"]) > 0.005:
                txt += f" ({c['speedup_bw']:.2f} bw)"
            cells.append(txt)
        out.append("| " + " | ".join(cells) + " |")
    if replay_doc is None:
        out += ["", "Simulated curve: no bench_replay JSON " +
                (f"at {replay_path}" if replay_path else "given") +
                " (bench/report.sh runs bench_replay --format=json when the build has it, "
                "or give --replay FILE); its columns appear when it is there."]
    else:
        extra = ""
        if replay_doc.get("clock"):
            extra += f", {replay_doc['clock']} clock"
        if replay_doc.get("loadavg") is not None:
            extra += f", load average {replay_doc['loadavg']:.2f}"
        if replay_doc.get("bandwidth_busy"):
            extra += "; a copy on several threads ran slower than on one (busy CPUs): the bw " \
                     "caps are unreliable"
        out += ["", f"Simulated by bench_replay (peak {replay_doc.get('peak_version', '?')}, "
                f"{replay_doc.get('isa', '?')}, {replay_doc.get('cpus', '?')} CPUs here, items "
                f"timed {replay_doc.get('timing', '?')} of {replay_doc.get('repeat', '?')}"
                f"{extra}): "
                "T(1) / T(N) of peak's scheduling replayed from every work item timed alone "
                "on one core; \"bw\": capped by the memcpy bandwidth measured on N threads "
                "where it differs.  Its assumptions:", ""]
        out += [f"- {a}" for a in replay_doc.get("assumptions", [])]
    return out


def md_sections(peers_doc, peers_path, replay_doc, replay_path, bench_threads=None):
    """The report's lines for the peers and scaling sections: (lines, scaling
    rows, the simulated N)."""
    md = ["## PyTorch 2.x and ONNX Runtime (bench/peers-bench.py)", ""]
    if peers_doc is None:
        md += ["Not measured: no peers venv (make it with `sh scripts/peers-venv.sh`, or "
               "set PEAK_PEERS_PYTHON), or no JSON " +
               (f"at {peers_path}" if peers_path else "given") + ".", ""]
    else:
        md += peers_context(peers_doc) + [""]
        md += ["peak through its Python binding against PyTorch 2.x's "
               "scaled_dot_product_attention on the same [B, H, L, D] arrays, and against "
               "ONNX Runtime's com.microsoft MultiHeadAttention (GroupQueryAttention for the "
               "GQA shapes) on the same [B, L, H*D] arrays (peak's layout \"blhd\"); decode: "
               "all three read one [B, Hkv, Lk, D] K/V cache.  Equal thread counts (torch."
               "set_num_threads, ORT intra_op_num_threads, peak's pool); \"X / peak\": X's "
               "median over peak's (higher: peak is faster).  Outputs are checked against "
               "torch's (bound 1e-4 max|V|).", ""]
        md += md_peers(peers_doc) + [""]
        notes = md_peer_notes(peers_doc)
        if notes:
            md += ["How each peer ran:", ""] + notes + [""]
        md += ["### Goals against PyTorch 2.x", "",
               "peak >= 1.3x torch's scaled_dot_product_attention on every attention shape "
               "and >= 1.5x torch.softmax, at 1 and at 2 threads.", ""]
        md += md_peer_goals(peer_goal_rows(peers_doc)) + [""]
        rope = md_rope(peers_doc)
        md += rope + [""] if rope else []
    rows, workers = scaling_rows(peers_doc, replay_doc, bench_threads)
    md += ["## Thread scaling", "",
           "Measured: peak's median time at 1 thread and the 1-thread over 2-thread ratio "
           "(\"2 / 1\": the speed-up on 2 workers), from bench_peak's thread variants "
           "(/threads:<n>, wall clock, a pool made once) and from peers-bench.py (the Python "
           "binding's ThreadPool; its [B, L, H, D] call where it ran, bench_replay's "
           "layout).  This machine has 2 cores, so N = 2 is all it can measure.  "
           "Simulated: bench_replay's predicted speed-up on N workers (sim. N=...), for the "
           "shapes it has; rows are matched by family and sizes.", ""]
    md += md_scaling(rows, workers, replay_doc, replay_path) + [""]
    return md, rows, workers


def plot_scaling(rows, workers, out_dir, slug):
    """bench/results/<slug>-scaling.png: the simulated curves against N and
    the measured 2-thread points; {} (nothing written) without matplotlib or
    figures."""
    if not workers or not any(r["simulated"] for r in rows):
        return {}
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    fig, ax = plt.subplots(figsize=(9.5, 5.2))
    cmap = plt.get_cmap("tab10")
    xs_all = [1] + list(workers)
    ax.plot(xs_all, xs_all, ":", color="grey", label="ideal (N)")
    # the shapes bench_replay simulated; the measured-only ones are in the table
    for i, r in enumerate([r for r in rows if r["simulated"]]):
        color = cmap(i % 10)
        xs = [1] + sorted(r["simulated"])
        ys = [1.0] + [r["simulated"][w]["speedup"] for w in sorted(r["simulated"])]
        ax.plot(xs, ys, "-o" if i < 10 else "--s", color=color, markersize=3,
                label=r["shape"])
        if r["measured_2"] is not None:
            ax.plot([2], [r["measured_2"]], "*", color=color, markersize=11)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("workers N")
    ax.set_ylabel("speed-up T(1) / T(N)")
    ax.set_title("peak's thread scaling: simulated by bench_replay (lines), measured at "
                 "N = 2 (stars)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    name = f"{slug}-scaling.png"
    fig.savefig(os.path.join(out_dir, name), dpi=90)
    plt.close(fig)
    return {"scaling": name}
