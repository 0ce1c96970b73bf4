#!/bin/sh
# peers-venv.sh - the virtual environment of the peers benchmark
# (bench/peers-bench.py): PyTorch 2.x (CPU), ONNX Runtime, onnx, NumPy,
# transformers and ml_dtypes from pip, beside Debian's python3 and never
# used by the tests (they run on /usr/bin/python3 with Debian's packages).
#
#   sh scripts/peers-venv.sh [DIR]     DIR defaults to .venv-peers in the
#                                      checkout (ignored by git)
#
# Idempotent: the venv is made once, and pip runs only for packages that
# do not import yet; run it again after deleting a package to reinstall
# it.  Prints the versions at the end.
#
# PyTorch comes from PyTorch's CPU wheel index first (a CPU-only wheel,
# about 200 MB); when that index cannot be reached, from PyPI, whose
# Linux x86-64 wheels carry the CUDA build and pull in the nvidia-*
# runtime wheels (several GB; the CPU path is what gets measured either
# way).  Environment:
#   PEAK_PEERS_BASE_PYTHON  the interpreter the venv is made from
#                           (default /usr/bin/python3: Debian's, with
#                           python3-venv)
#   PEAK_TORCH_INDEX        the CPU wheel index (default PyTorch's);
#                           "none": straight to PyPI
#   PEAK_TORCH_SPEC         the torch requirement (default "torch>=2")
# Installs python3-venv and python3-pip first when missing (as root;
# scripts/install-deps.sh --peers).
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname "$here")
venv=${1:-$root/.venv-peers}
base=${PEAK_PEERS_BASE_PYTHON:-/usr/bin/python3}
index=${PEAK_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
torch_spec=${PEAK_TORCH_SPEC:-torch>=2}

sh "$here/install-deps.sh" --peers

if [ ! -x "$venv/bin/python" ]; then
    echo "peers-venv: making $venv from $base" >&2
    "$base" -m venv "$venv"
fi
py=$venv/bin/python
pip() { "$py" -m pip --disable-pip-version-check "$@"; }

# torch: the CPU wheel index first, PyPI if it cannot be reached
if ! "$py" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
        2>/dev/null; then
    done_torch=no
    if [ "$index" != none ]; then
        echo "peers-venv: $torch_spec from $index" >&2
        if pip install --timeout 30 --retries 1 --index-url "$index" "$torch_spec"; then
            done_torch=yes
        else
            echo "peers-venv: $index failed; $torch_spec from PyPI instead (the CUDA" \
                "build and its nvidia-* wheels: several GB)" >&2
        fi
    fi
    [ "$done_torch" = yes ] || pip install "$torch_spec"
fi

# the rest, each only if it does not import yet (module name:requirement)
missing=
for m in numpy:numpy onnx:onnx onnxruntime:onnxruntime ml_dtypes:ml_dtypes \
    transformers:transformers; do
    if ! "$py" -c "import ${m%%:*}" 2>/dev/null; then
        missing="$missing ${m#*:}"
    fi
done
if [ -n "$missing" ]; then
    echo "peers-venv: installing$missing" >&2
    # shellcheck disable=SC2086
    pip install $missing
fi

"$py" - <<'EOF'
import importlib, platform, sys
print(f"peers-venv: {sys.prefix} (Python {platform.python_version()})")
for name in ("torch", "onnxruntime", "onnx", "numpy", "transformers", "ml_dtypes"):
    try:
        mod = importlib.import_module(name)
        extra = ""
        if name == "torch":
            extra = (f" (CUDA build {mod.version.cuda}, CPU only here)" if mod.version.cuda
                     else " (CPU build)")
            extra += f", ATen CPU capability {mod.backends.cpu.get_cpu_capability()}"
        print(f"  {name} {mod.__version__}{extra}")
    except Exception as e:  # noqa: BLE001 - report whatever broke the import
        print(f"  {name}: not importable ({type(e).__name__}: {e})")
        sys.exit(1)
EOF
echo "peers-venv: run the benchmark with $py bench/peers-bench.py" >&2
