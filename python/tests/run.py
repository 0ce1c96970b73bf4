"""Runs the binding's tests with unittest:
`python3 run.py numpy|torch|distributed`.

Exit status for meson: 0 pass, 1 fail, 77 skip (no numpy, or no torch for
the torch and distributed suites, or $PEAK_SKIP set, or every test of the
suite skipped: the distributed one without torch 2.x, torch.distributed
and gloo).  In a sanitized build the library needs the ASan runtime loaded
first: this script re-executes itself with it in LD_PRELOAD (leak checking
off: the interpreter itself "leaks" at exit).
"""
import os
import platform
import subprocess
import sys
import unittest


def skip(reason):
    print("SKIP:", reason)
    sys.exit(77)


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "numpy"
    if os.environ.get("PEAK_SKIP"):
        skip(os.environ["PEAK_SKIP"])
    try:
        import numpy  # noqa: F401
    except ImportError:
        skip(f"{sys.executable} cannot import numpy (Debian: apt-get install python3-numpy)")
    if which in ("torch", "distributed"):
        try:
            import torch  # noqa: F401
        except ImportError:
            skip(f"{sys.executable} cannot import torch (Debian: python3-torch); "
                 "the numpy suite still runs")
    san = os.environ.get("PEAK_SANITIZE", "none")
    if san not in ("", "none") and "PEAK_RUN_PRELOADED" not in os.environ:
        cc = os.environ.get("PEAK_CC", "cc").split()
        libs = []
        names = [n for n in ("libasan.so", "libubsan.so")
                 if n == "libasan.so" and "address" in san or n == "libubsan.so" and "undefined" in san]
        if "clang" in subprocess.run(cc + ["--version"], capture_output=True, text=True).stdout:
            # clang's runtimes: ASan's carries UBSan's handlers too
            arch = platform.machine()
            names = [f"libclang_rt.asan-{arch}.so" if "address" in san
                     else f"libclang_rt.ubsan_standalone-{arch}.so"]
        for name in names:
            path = subprocess.run(cc + ["-print-file-name=" + name], capture_output=True,
                                  text=True).stdout.strip()
            if not os.path.isabs(path):
                skip(f"sanitized build ({san}) and {name} not found to preload")
            libs.append(os.path.realpath(path))
        env = dict(os.environ, PEAK_RUN_PRELOADED="1",
                   LD_PRELOAD=" ".join(libs + [os.environ.get("LD_PRELOAD", "")]).strip(),
                   ASAN_OPTIONS="detect_leaks=0:" + os.environ.get("ASAN_OPTIONS", ""))
        sys.exit(subprocess.run([sys.executable] + sys.argv, env=env).returncode)
    here = os.path.dirname(os.path.abspath(__file__))
    suite = unittest.defaultTestLoader.discover(here, pattern=f"test_{which}.py")
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if result.testsRun == 0:
        print("no test ran")
        sys.exit(99)
    if result.wasSuccessful() and len(result.skipped) == result.testsRun:
        skip("every test was skipped: " + "; ".join(sorted({why for _, why in result.skipped})))
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
