#!/bin/sh
# peak.h promises that no kernel allocates memory: the only allocations in
# the library are api.c's convenience workspace for peak_attention(...,
# NULL, 0, pool) and, outside the kernels, the pool that
# peak_threadpool_create() makes (kernels/schedule/).  Checked on the
# objects: no kernel library may reference an allocator.
# Usage: kernels-allocate-nothing.sh NM LIB...
set -eu
nm=$1
shift
bad=0
for lib in "$@"; do
    refs=$("$nm" -u "$lib" | awk '{print $NF}' |
        grep -E '^(malloc|calloc|realloc|free|aligned_alloc|posix_memalign|memalign|valloc|mmap|sbrk)$' |
        sort -u | tr '\n' ' ') || true
    if [ -n "$refs" ]; then
        echo "FAIL: $(basename "$lib") references $refs"
        bad=1
    else
        echo "ok: $(basename "$lib") references no allocator"
    fi
done
exit $bad
