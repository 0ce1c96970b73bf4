#!/bin/sh
# Installs the Debian 12 packages peak needs to build, test and run its demo,
# build its API reference (doxygen) and test its Python binding
# (python3-numpy; the PyTorch comparisons, meson's python-torch test, run
# when python3-torch is there too: --torch, which CI uses, installs it).
# Every package used is named here: apt runs with --no-install-recommends
# (as on a minimal machine), so what Debian only recommends is not pulled
# in, e.g. libc6-dev by gcc, libc6-dev-arm64-cross by gcc-aarch64-linux-gnu,
# libclang-rt-14-dev (libFuzzer, the sanitizer runtimes) by clang.
# Idempotent: packages already present are not touched, and apt is not even
# called when nothing is missing.
#   scripts/install-deps.sh            native build, tests, benchmarks, demo
#   scripts/install-deps.sh --torch    also PyTorch for /usr/bin/python3
#                                      (python3-torch: the python-torch
#                                      test suite; large, ~570 MB installed)
#   scripts/install-deps.sh --arm64    also the AArch64 cross toolchain (C and
#                                      C++, with the cross libc), qemu-user
#                                      and the arm64 multiarch libraries
#   scripts/install-deps.sh --bench    also what bench/report.sh uses: PyTorch
#                                      (the framework baseline) and matplotlib
#                                      (the plots), both for /usr/bin/python3
#   scripts/install-deps.sh --peers    also python3-venv and python3-pip, which
#                                      scripts/peers-venv.sh makes the peers
#                                      benchmark's venv with (PyTorch 2.x and
#                                      ONNX Runtime from pip; never the tests)
#   scripts/install-deps.sh --pip      also python3-venv: a venv to
#                                      `pip install .` into (README, Python,
#                                      pip; `meson test --suite pip`, which
#                                      skips without it).  The wheel build
#                                      itself needs only the packages above.
#   scripts/install-deps.sh --reliability
#                                      also what CI's reliability steps use:
#                                      valgrind (with libc6-dbg), qemu-x86_64,
#                                      clang with libFuzzer, its sanitizer
#                                      runtimes and llvm-symbolizer, gcc's
#                                      TSan runtime, cppcheck, clang-tidy,
#                                      and the AArch64 C headers that
#                                      clang-tidy reads the NEON kernels with
#                                      (libc6-dev-arm64-cross)
# Any other argument is taken as one more package name.
# qemu-user-binfmt (recommended by qemu-user) is left out on purpose: every
# emulated run goes through meson's exe_wrapper, and installing it would
# register binfmt handlers in the host kernel from a chroot.
set -eu

# binutils: nm, readelf (tests/install, kernels-allocate-nothing); python3:
# meson, doc/build-docs.py and the binding's tests (/usr/bin/python3);
# dpkg-dev (recommended by meson): its dpkg-architecture gives meson the
# Debian libdir lib/<triplet>, without it `meson install` puts the library
# in lib64, where neither ld.so nor pkg-config looks.
pkgs="gcc g++ libc6-dev binutils dpkg-dev meson ninja-build pkg-config python3 libsleef-dev check \
libsubunit-dev libbenchmark-dev libopenblas-dev libdnnl-dev doxygen python3-numpy libsimde-dev \
libpthreadpool-dev"
torch_pkgs="python3-torch"
arm64_pkgs="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
libsleef-dev:arm64 check:arm64"
bench_pkgs="python3-torch python3-matplotlib python3-scipy"
peers_pkgs="python3-venv python3-pip"
pip_pkgs="python3-venv"
# llvm: llvm-symbolizer, which clang's sanitizer runtimes (the fuzzers) need
# to print a failure's stack with function names and lines.
reliability_pkgs="valgrind libc6-dbg qemu-user clang libclang-rt-14-dev llvm libtsan2 cppcheck \
clang-tidy libc6-dev-arm64-cross"

want="$pkgs"
arm64=no
for a in "$@"; do
    case "$a" in
    --arm64) arm64=yes; want="$want $arm64_pkgs" ;;
    --torch) want="$want $torch_pkgs" ;;
    --bench) want="$want $bench_pkgs" ;;
    --peers) want="$want $peers_pkgs" ;;
    --pip) want="$want $pip_pkgs" ;;
    --reliability) want="$want $reliability_pkgs" ;;
    *) want="$want $a" ;;
    esac
done

missing=""
for p in $want; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages:$missing (run as root, or install them)" >&2
    exit 1
fi
echo "install-deps: installing$missing" >&2
t0=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
if [ "$arm64" = yes ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
fi
apt-get update -o DPkg::Lock::Timeout=600 -qq
# shellcheck disable=SC2086
apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $missing >/dev/null
echo "install-deps: installed in $(($(date +%s) - t0)) s" >&2
