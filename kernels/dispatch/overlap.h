/*
 * overlap.h - the geometry of strided float arrays that the validation in
 * api.c decides with: how far an array reaches, whether its extent fits in
 * a ptrdiff_t, and whether two arrays share a byte.  No ISA, no kernel.
 *
 * The span arithmetic is static inline, so the compiler can fold it into
 * each check; the two layout predicates that order dimensions or compare
 * row sets are in overlap.c.
 */
#ifndef PEAK_DISPATCH_OVERLAP_H
#define PEAK_DISPATCH_OVERLAP_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

/* The largest element offset a kernel may touch, computed without overflow:
   sum over dims of (n[k]-1)*stride[k], plus `inner` contiguous elements of
   `elem` bytes.  Sizes are >= 1 and strides >= 0 here.  Returns 0 if the
   extent, in bytes, would not fit in a ptrdiff_t. */
static inline int extent_fits_as(const size_t *n, const ptrdiff_t *stride, int dims, size_t inner,
                                 size_t elem)
{
    size_t limit = (size_t)PTRDIFF_MAX / elem;
    size_t total = inner;
    if (inner > limit)
        return 0;
    for (int k = 0; k < dims; k++) {
        size_t span = n[k] - 1, s = (size_t)stride[k];
        if (span && s > (limit - total) / span)
            return 0;
        total += span * s;
    }
    return 1;
}

/* extent_fits_as for float elements. */
static inline int extent_fits(const size_t *n, const ptrdiff_t *stride, int dims, size_t inner)
{
    return extent_fits_as(n, stride, dims, inner, sizeof(float));
}

static inline int strides_nonneg(const ptrdiff_t *stride, int dims)
{
    for (int k = 0; k < dims; k++)
        if (stride[k] < 0)
            return 0;
    return 1;
}

/* The bytes an [n0][n1][n2] tensor of `inner` contiguous elements spans
   (empty for NULL).  Assumes extent_fits(). */
typedef struct span {
    uintptr_t lo, hi;
} span;

static inline span tensor_span(const void *p, const size_t *n, const ptrdiff_t *stride, int dims,
                               size_t inner, size_t elem)
{
    span sp = {0, 0};
    if (!p)
        return sp;
    size_t off = inner;
    for (int k = 0; k < dims; k++)
        off += (n[k] - 1) * (size_t)stride[k];
    sp.lo = (uintptr_t)p;
    sp.hi = sp.lo + off * elem;
    return sp;
}

static inline span array_span(const void *p, size_t n, size_t elem)
{
    const ptrdiff_t one = 1;
    return tensor_span(p, &n, &one, 1, 1, elem);
}

/* Whether two spans share a byte (conservative for strided tensors: two
   that interleave without sharing an element also meet). */
static inline int spans_meet(span a, span b)
{
    return a.lo < b.hi && b.lo < a.hi;
}

/* An output's rows must not overlap one another.  Sufficient test: order
   the dimensions that have more than one entry by stride; each stride must
   step over everything the smaller ones span (a row for the smallest).  It
   accepts every packed or padded layout ([B,L,H,D], [B,H,L,D], gaps) and
   rejects layouts such as {16, 4, 4} where two index tuples share a row.
   dims <= 3.  Assumes extent_fits() holds, so no product overflows. */
PEAK_INTERNAL int rows_apart(const size_t *n, const ptrdiff_t *stride, int dims, size_t row);

/* A strided set of `rows` rows of `d` elements of `elem` bytes (one row:
   any stride). */
typedef struct row_set {
    const void *p;
    ptrdiff_t ld;
    size_t rows;
    size_t elem;
} row_set;

/* Whether two row sets share no byte.  Exact when the element sizes and
   the strides are equal or the set at the higher address is one row (so the rows of one
   interleaved buffer, [x | y] with ld = 2d, and a gamma in y's row padding
   count as apart); otherwise the two extents must not meet, which rejects
   some disjoint interleavings of different strides.  Addresses are
   compared as integers: the sets may lie in different objects.  Assumes
   extent_fits(). */
PEAK_INTERNAL int rows_disjoint(row_set a, row_set b, size_t d);

/* An output row set and an input one: the same rows (in place), or apart. */
static inline int in_place_or_apart(row_set out, row_set in, size_t d)
{
    return (out.p == in.p && out.ld == in.ld && out.elem == in.elem) ||
           rows_disjoint(out, in, d);
}

#endif /* PEAK_DISPATCH_OVERLAP_H */
