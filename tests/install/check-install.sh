#!/bin/sh
# check-install.sh - install peak into a temporary DESTDIR and use it the
# way a user would: through pkg-config, shared and static, and from Python.
#
# Run by `meson test` (test "install"), which passes everything in the
# environment:
#   PEAK_BUILD_DIR  PEAK_SOURCE_DIR  PEAK_PREFIX  PEAK_LIBDIR  PEAK_INCLUDEDIR
#   PEAK_SOVERSION  PEAK_VERSION     PEAK_CC (the C compiler command)
#   PEAK_SAN_FLAGS  (-fsanitize=... when the build is sanitized, else empty)
#   PEAK_PYTHON     PEAK_PY_PURELIB  (empty: no Python part)
#   PEAK_SKIP       (non-empty: print it and exit 77, meson's SKIP)
# Exit status: 0 pass, 1 fail, 77 skip.
set -eu

if [ -n "${PEAK_SKIP:-}" ]; then
    echo "SKIP: $PEAK_SKIP"
    exit 77
fi

fail() {
    echo "FAIL: $*" >&2
    exit 1
}
step() { echo "-- $*"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/peak-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
dest="$tmp/root"

step "meson install --destdir $dest"
# --no-rebuild: meson test has just built everything, and a second ninja
# must not run under it.
meson install -C "$PEAK_BUILD_DIR" --no-rebuild --quiet --destdir "$dest" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install"; }

lib="$dest$PEAK_LIBDIR"
inc="$dest$PEAK_INCLUDEDIR"
for f in "$inc/peak.h" "$lib/libpeak.a" "$lib/libpeak.so" "$lib/libpeak.so.$PEAK_SOVERSION" \
    "$lib/libpeak.so.$PEAK_VERSION" "$lib/pkgconfig/peak.pc"; do
    [ -e "$f" ] || fail "not installed: ${f#"$dest"}"
    echo "   ${f#"$dest"}"
done

step "SONAME"
soname=$(readelf -d "$lib/libpeak.so.$PEAK_VERSION" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[ "$soname" = "libpeak.so.$PEAK_SOVERSION" ] || fail "SONAME is '$soname', want libpeak.so.$PEAK_SOVERSION"
echo "   $soname"

step "exported symbols = PEAK_API functions of peak.h = peak.map, all at version PEAK_$PEAK_SOVERSION"
# The header's public functions: the identifier before '(' on each PEAK_API line.
sed -n 's/^PEAK_API[^(]*[ *]\(peak_[a-z0-9_]*\)(.*/\1/p' "$PEAK_SOURCE_DIR/include/peak.h" | sort >"$tmp/header.txt"
sed -n 's/^ *\(peak_[a-z0-9_]*\);.*/\1/p' "$PEAK_SOURCE_DIR/peak.map" | sort >"$tmp/map.txt"
nm -D --defined-only "$lib/libpeak.so.$PEAK_VERSION" | awk '$2 != "A" { print $3 }' | sort >"$tmp/nm.txt"
[ -s "$tmp/header.txt" ] || fail "found no PEAK_API function in peak.h"
sed 's/@@.*//' "$tmp/nm.txt" | diff -u "$tmp/header.txt" - || fail "nm -D differs from the header's PEAK_API list"
diff -u "$tmp/header.txt" "$tmp/map.txt" || fail "peak.map differs from the header's PEAK_API list"
if grep -v "@@PEAK_$PEAK_SOVERSION\$" "$tmp/nm.txt"; then
    fail "symbols above are not versioned PEAK_$PEAK_SOVERSION"
fi
echo "   $(wc -l <"$tmp/nm.txt") functions, e.g. $(head -n 1 "$tmp/nm.txt")"

# pkg-config reads the installed peak.pc; its prefix is the real one
# (/usr/local ...), so point it into the DESTDIR copy.
export PKG_CONFIG_PATH="$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pc() { pkg-config --define-variable=prefix="$dest$PEAK_PREFIX" "$@" peak; }
[ "$(pc --modversion)" = "$PEAK_VERSION" ] || fail "pkg-config --modversion peak: $(pc --modversion)"
consumer="$PEAK_SOURCE_DIR/examples/quickstart.c"

step "shared: $PEAK_CC quickstart.c \$(pkg-config --cflags --libs peak)"
echo "   pkg-config: $(pc --cflags --libs)"
# shellcheck disable=SC2046,SC2086
$PEAK_CC $PEAK_SAN_FLAGS -o "$tmp/quickstart-shared" "$consumer" $(pc --cflags --libs) ||
    fail "cannot build the consumer against the installed shared library"
readelf -d "$tmp/quickstart-shared" | grep -q "NEEDED.*\[libpeak.so.$PEAK_SOVERSION\]" ||
    fail "consumer does not need libpeak.so.$PEAK_SOVERSION"
LD_LIBRARY_PATH="$lib" "$tmp/quickstart-shared" || fail "shared consumer failed"
# and it really ran the installed copy
LD_LIBRARY_PATH="$lib" ldd "$tmp/quickstart-shared" | grep -q "libpeak.so.$PEAK_SOVERSION => $lib/" ||
    fail "the shared consumer did not resolve libpeak from the install"

step "static: $PEAK_CC quickstart.c \$(pkg-config --cflags --libs --static peak), -lpeak -> -l:libpeak.a"
# libpeak.so and libpeak.a share a directory and the linker prefers the
# .so, so the archive is named; --static adds peak's private dependencies.
static_libs=$(pc --libs --static | sed 's/-lpeak\( \|$\)/-l:libpeak.a\1/')
echo "   pkg-config --static: $(pc --libs --static)"
# shellcheck disable=SC2046,SC2086
$PEAK_CC $PEAK_SAN_FLAGS -o "$tmp/quickstart-static" "$consumer" $(pc --cflags) $static_libs ||
    fail "cannot build the consumer against the installed static library"
if readelf -d "$tmp/quickstart-static" | grep -q "NEEDED.*libpeak"; then
    fail "static consumer still needs libpeak.so"
fi
"$tmp/quickstart-static" || fail "static consumer failed"

if [ -n "${PEAK_PYTHON:-}" ] && [ -n "${PEAK_PY_PURELIB:-}" ]; then
    step "python: import peak from the install, on the installed libpeak"
    if [ -n "$PEAK_SAN_FLAGS" ]; then
        echo "   skipped: a sanitized libpeak cannot be loaded into an unsanitized Python"
    elif ! "$PEAK_PYTHON" -c "import numpy" 2>/dev/null; then
        echo "   skipped: $PEAK_PYTHON has no numpy (Debian: python3-numpy)"
    else
        PYTHONPATH="$dest$PEAK_PY_PURELIB" PEAK_LIBRARY="$lib/libpeak.so.$PEAK_SOVERSION" \
            "$PEAK_PYTHON" -c "
import sys, peak, numpy as np
assert peak.__file__.startswith('$dest'), peak.__file__
assert peak.library_path().startswith('$dest'), peak.library_path()
pe = peak.pe_table(50, 512)
assert abs(pe[49, 0] - np.sin(49.0)) < 2**-23, pe[49, 0]
print('   peak', peak.version(), 'from', peak.__file__, 'on', peak.isa_active())
" || fail "the installed Python package"
    fi
fi

echo "install: ok"
