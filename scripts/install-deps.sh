#!/bin/sh
# Installs the Debian 12 packages peak needs to build, test and run its demo,
# build its API reference (doxygen) and test its Python binding
# (python3-numpy; the PyTorch comparisons run when python3-torch is there
# too, which this script does not install: it is large and optional).
# Idempotent: packages already present are not touched, and apt is not even
# called when nothing is missing.
#   scripts/install-deps.sh            native build, tests, benchmarks, demo
#   scripts/install-deps.sh --arm64    also the AArch64 cross toolchain, qemu
#                                      and the arm64 multiarch libraries
#   scripts/install-deps.sh --bench    also what bench/report.sh uses: PyTorch
#                                      (the framework baseline) and matplotlib
#                                      (the plots), both for /usr/bin/python3
#   scripts/install-deps.sh --reliability
#                                      also what CI's reliability steps use:
#                                      valgrind, qemu-x86_64, clang with
#                                      libFuzzer and its sanitizer runtimes
#                                      (libclang-rt-14-dev, only recommended
#                                      by clang on Debian 12), gcc's TSan
#                                      runtime, cppcheck and clang-tidy
set -eu

pkgs="gcc g++ meson ninja-build pkg-config libsleef-dev check libsubunit-dev \
libbenchmark-dev libopenblas-dev libdnnl-dev doxygen python3-numpy"
arm64_pkgs="gcc-aarch64-linux-gnu qemu-user libsleef-dev:arm64 check:arm64"
bench_pkgs="python3 python3-torch python3-matplotlib"
reliability_pkgs="valgrind qemu-user clang libclang-rt-14-dev libtsan2 cppcheck clang-tidy"

want="$pkgs"
arm64=no
for a in "$@"; do
    case "$a" in
    --arm64) arm64=yes; want="$want $arm64_pkgs" ;;
    --bench) want="$want $bench_pkgs" ;;
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
export DEBIAN_FRONTEND=noninteractive
if [ "$arm64" = yes ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
fi
apt-get update -o DPkg::Lock::Timeout=600 -qq
# shellcheck disable=SC2086
apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $missing >/dev/null
