#!/bin/sh
# check-pip-install.sh - `pip install` this checkout into a fresh virtual
# environment and import peak from there with no PEAK_* variable set: the
# package must load the libpeak it carries (README, "Python", "pip").
#
#   sh scripts/check-pip-install.sh      by hand, from anywhere
#   meson test -C build --suite pip      the test "pip-install" (the plain
#                                        `meson test` leaves suite pip out:
#                                        tests/install/meson.build)
#
# 1 copies the work tree, uncommitted files included (not .git, build*/,
#   .venv*/, .mesonpy-*/), to a temporary folder;
# 2 makes a venv there from $PEAK_PYTHON (Debian's python3 needs
#   python3-venv: scripts/install-deps.sh --pip);
# 3 pip installs the copy: pip's build isolation fetches meson-python and
#   meson from PyPI (numpy too, the package's one dependency), meson-python
#   builds the library (pyproject.toml, -Dwheel=true);
# 4 from a folder outside the copy, with every PEAK_* variable,
#   LD_LIBRARY_PATH and PYTHONPATH unset, runs
#       python -c 'import peak; print(peak.isa_active())'
#   and checks that the library loaded is the one inside the venv's
#   package and that peak.__version__, peak.version() (the C library's) and
#   the installed distribution's version are all meson.build's.
#
# Environment (all optional; read before step 4 unsets them):
#   PEAK_SOURCE_DIR  the checkout (default: this script's)
#   PEAK_PYTHON      the interpreter the venv is made from (default
#                    /usr/bin/python3, as -Dpython=)
#   PEAK_VERSION     the version expected (default: meson.build's)
#   PEAK_SKIP        non-empty: print it and exit 77 (meson's SKIP)
#   PEAK_PIP_KEEP=1  keep the temporary folder (its path is printed)
#   PIP_*            pip's own settings (index, cache, ...) are honoured
# Exit status: 0 pass, 1 fail, 77 skip: no venv with pip for PEAK_PYTHON,
# or pip cannot fetch meson-python (no network, no index).
set -eu

if [ -n "${PEAK_SKIP:-}" ]; then
    echo "SKIP: $PEAK_SKIP"
    exit 77
fi

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
skip() {
    echo "SKIP: $*"
    exit 77
}
step() { echo "-- $*"; }

src=${PEAK_SOURCE_DIR:-$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)}
py=${PEAK_PYTHON:-/usr/bin/python3}
want=${PEAK_VERSION:-$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$src/meson.build" | head -n 1)}
keep=${PEAK_PIP_KEEP:-}
[ -f "$src/pyproject.toml" ] || fail "$src has no pyproject.toml"
[ -n "$want" ] || fail "cannot read the project version from $src/meson.build"

# What a user's shell would not have: the variables meson test and the
# developer flow set.  Unset here, so for pip and the venv's Python alike.
for v in $(env | sed -n 's/^\(PEAK_[A-Za-z0-9_]*\)=.*/\1/p'); do
    unset "$v"
done
unset LD_LIBRARY_PATH PYTHONPATH PYTHONHOME

command -v "$py" >/dev/null 2>&1 || skip "no Python interpreter $py"
"$py" -c 'import venv, ensurepip' 2>/dev/null ||
    skip "$py cannot make a venv with pip (Debian: python3-venv; scripts/install-deps.sh --pip)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/peak-pip.XXXXXX")
if [ "$keep" = 1 ]; then
    trap 'echo "kept: $tmp"' EXIT
else
    trap 'rm -rf "$tmp"' EXIT
fi
trap 'exit 1' INT TERM

step "copy of $src (no .git, build*, .venv*, .mesonpy-*) -> $tmp/src"
mkdir "$tmp/src"
(cd "$src" && tar -cf - --anchored --exclude=./.git --exclude='./build*' --exclude='./.venv*' \
    --exclude='./.mesonpy-*' .) | tar -xf - -C "$tmp/src" || fail "cannot copy $src"

step "$py -m venv $tmp/venv"
"$py" -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1 || { cat "$tmp/venv.log" >&2; fail "python -m venv"; }
vpy=$tmp/venv/bin/python
pip() { "$vpy" -m pip --disable-pip-version-check "$@"; }

step "pip can fetch meson-python"
pip download --quiet --no-deps --timeout 20 --retries 1 --dest "$tmp/probe" meson-python \
    >"$tmp/probe.log" 2>&1 ||
    { tail -n 3 "$tmp/probe.log"; skip "pip cannot fetch meson-python (no network or no package index)"; }

step "pip install $tmp/src"
t0=$(date +%s)
pip install "$tmp/src" >"$tmp/pip.log" 2>&1 || { tail -n 60 "$tmp/pip.log" >&2; fail "pip install"; }
echo "   $(grep '^Successfully installed' "$tmp/pip.log" || true) in $(($(date +%s) - t0)) s"

mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
step "python -c 'import peak; print(peak.isa_active())'  (in $PWD, no PEAK_* set)"
isa=$("$vpy" -c 'import peak; print(peak.isa_active())') || fail "import peak in the venv"
echo "   $isa"

step "the venv's own libpeak, and one version everywhere ($want)"
"$vpy" - "$want" "$tmp/venv" <<'EOF' || fail "the installed package"
import importlib.metadata, os, sys
import peak

want, venv = sys.argv[1], os.path.realpath(sys.argv[2])
pkg = os.path.dirname(os.path.realpath(peak.__file__))
lib = os.path.realpath(peak.library_path())
assert pkg.startswith(venv + os.sep), f"peak imported from {pkg}, not from {venv}"
assert os.path.dirname(lib) == pkg, f"libpeak loaded from {lib}, not from {pkg}"
assert peak.isa_active() in peak.isa_names(), peak.isa_active()
versions = {"peak.__version__": peak.__version__, "peak.version()": peak.version(),
            "metadata": importlib.metadata.version("peak"), "meson.build": want}
assert len(set(versions.values())) == 1, versions
print(f"   peak {peak.version()} from {pkg}, on {os.path.basename(lib)}")
EOF

echo "pip-install: ok"
