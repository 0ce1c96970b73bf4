/*
 * overlap.c - the layout predicates of overlap.h that loop over a tensor's
 * dimensions or compare two row sets: whether an output's rows are apart
 * from one another, and whether two row sets share a float.
 */
#include "overlap.h"

int rows_apart(const size_t *n, const ptrdiff_t *stride, int dims, size_t row)
{
    int order[3], m = 0;
    for (int k = 0; k < dims; k++) {
        if (n[k] < 2)
            continue;
        int j = m++;
        while (j > 0 && stride[order[j - 1]] > stride[k]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    size_t reach = row; /* what the dimensions so far span, in floats */
    for (int j = 0; j < m; j++) {
        size_t s = (size_t)stride[order[j]];
        if (s < reach)
            return 0;
        reach = s * (n[order[j]] - 1) + reach;
    }
    return 1;
}

int rows_disjoint(row_set a, row_set b, size_t d)
{
    if (!spans_meet(tensor_span(a.p, &a.rows, &a.ld, 1, d, a.elem),
                    tensor_span(b.p, &b.rows, &b.ld, 1, d, b.elem)))
        return 1;
    if ((uintptr_t)a.p > (uintptr_t)b.p) {
        const row_set t = a;
        a = b;
        b = t;
    }
    const uintptr_t pa = (uintptr_t)a.p, pb = (uintptr_t)b.p;
    if (a.rows < 2 || a.elem != b.elem || (b.rows > 1 && a.ld != b.ld) || (pb - pa) % a.elem)
        return 0;
    const size_t off = (size_t)((pb - pa) / a.elem) % (size_t)a.ld;
    return off >= d && (size_t)a.ld - off >= d;
}
