#!/usr/bin/env python3
"""Builds peak's API reference with Doxygen and checks it is complete.

    build-docs.py --source DIR --output DIR [--doxygen PATH] [--version V]

1. Runs Doxygen on include/peak.h and doc/mainpage.md (doc/Doxyfile.in).
   Every Doxygen warning is an error: an undocumented function, parameter,
   return value, enumerator, struct field or macro fails the build.
2. Reads Doxygen's XML and checks what Doxygen cannot: every function
   declared PEAK_API in the header is in the reference, says who may call
   it from which thread (@threadsafety), lists its errors when it returns
   peak_status (@errors), and every kernel (a function taking float
   arrays) names the source of its formula (@source) and documents each
   array parameter's shape.
Exit status: 0 complete, 1 incomplete (each gap printed), 2 tool failure,
77 no doxygen (skip, for meson test).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET


def text(node):
    return "".join(node.itertext()) if node is not None else ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--doxygen", default="doxygen")
    ap.add_argument("--version", default="")
    a = ap.parse_args()

    doxygen = shutil.which(a.doxygen)
    if not doxygen:
        print(f"SKIP: {a.doxygen} not found (Debian: apt-get install doxygen; "
              "sh scripts/install-deps.sh installs it)")
        return 77
    src = os.path.abspath(a.source)
    out = os.path.abspath(a.output)
    header = os.path.join(src, "include", "peak.h")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src, "doc", "Doxyfile.in")) as f:
        conf = f.read()
    conf = conf.replace("@VERSION@", a.version).replace("@OUTPUT@", out)
    conf = conf.replace("@SOURCE@", src)
    doxyfile = os.path.join(out, "Doxyfile")
    with open(doxyfile, "w") as f:
        f.write(conf)
    for sub in ("html", "xml"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)

    run = subprocess.run([doxygen, doxyfile], cwd=out, capture_output=True, text=True)
    log = os.path.join(out, "warnings.log")
    warnings = open(log).read().strip() if os.path.exists(log) else ""
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    gaps = []
    if warnings or run.returncode != 0:
        print(warnings)
        gaps.append(f"doxygen reported {len(warnings.splitlines())} warning line(s) "
                    f"(exit {run.returncode}); every public symbol must be documented")
    xml_file = os.path.join(out, "xml", "peak_8h.xml")
    if not os.path.exists(xml_file):
        print("FAIL: doxygen wrote no XML for peak.h")
        return 2

    # ---- completeness beyond Doxygen's own checks ----
    with open(header) as f:
        declared = sorted(set(re.findall(r"^PEAK_API[^(]*?\b(peak_\w+)\(", f.read(), re.M)))
    root = ET.parse(xml_file).getroot()

    def undocumented(node):
        return not (text(node.find("briefdescription")).strip()
                    or text(node.find("detaileddescription")).strip())

    documented = {}
    for m in root.iter("memberdef"):
        kind, name = m.get("kind"), text(m.find("name"))
        if kind == "function":
            documented[name] = m
        if kind in ("define", "enum", "typedef") and undocumented(m):
            gaps.append(f"{kind} {name}: not documented")
        for ev in m.findall("enumvalue"):  # Doxygen does not warn for these
            if undocumented(ev):
                gaps.append(f"enum value {text(ev.find('name'))} of {name}: not documented")
    for inner in root.findall("innerclass"):  # struct fields
        sroot = ET.parse(os.path.join(out, "xml", inner.get("refid") + ".xml")).getroot()
        for m in sroot.iter("memberdef"):
            if m.get("kind") == "variable" and undocumented(m):
                gaps.append(f"field {text(inner)}.{text(m.find('name'))}: not documented")
    for name in declared:
        m = documented.get(name)
        if m is None:
            gaps.append(f"{name}: declared PEAK_API but not in the reference")
            continue
        detail = m.find("detaileddescription")
        titles = [text(t).strip().rstrip(":") for t in detail.iter("title")]
        brief = text(m.find("briefdescription")).strip()
        if not brief:
            gaps.append(f"{name}: no @brief")
        if "Thread safety" not in titles:
            gaps.append(f"{name}: no @threadsafety section")
        rtype = text(m.find("type"))
        if "peak_status" in rtype and "Errors" not in titles:
            gaps.append(f"{name}: returns peak_status but has no @errors section")
        params = [(text(p.find("type")), text(p.find("declname"))) for p in m.findall("param")]
        arrays = [n for t, n in params if re.search(r"\bfloat\s*\*", t)]
        if arrays:
            if "Source" not in titles:
                gaps.append(f"{name}: a kernel without a @source section")
            docs = {}
            for item in detail.iter("parameteritem"):
                for pn in item.iter("parametername"):
                    docs[text(pn).strip()] = text(item.find("parameterdescription"))
            for n in arrays:
                d = docs.get(n, "")
                if "[" not in d and "row" not in d and "contiguous" not in d:
                    gaps.append(f"{name}: parameter {n} documents no shape ([..] or rows)")
    for g in gaps:
        print("FAIL:", g)
    if gaps:
        return 1
    print(f"api-docs: {len(declared)} public functions documented "
          f"(brief, parameters, return, errors, thread safety, shapes and sources); "
          f"HTML in {os.path.join(out, 'html', 'index.html')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
