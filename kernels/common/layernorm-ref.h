/*
 * layernorm-ref.h - residual add + LayerNorm in plain C, in double
 * (common/layernorm-ref.c): the scalar tier's kernel, and the reference the
 * SIMD tiers hand the rows their float statistics cannot handle
 * (layernorm.h, peak_layernorm_stats_of).  Compiled once, with no ISA
 * flags, outside every tier folder, so that no tier links another tier's
 * file.
 */
#ifndef PEAK_COMMON_LAYERNORM_REF_H
#define PEAK_COMMON_LAYERNORM_REF_H

#include "convert.h"
#include "internal.h"

#include <stddef.h>

/* One row's operands: r, gamma, beta and sum may be NULL.  pf_x and pf_r
   are a later row's x and r (or NULL) for the SIMD tiers' pass 1 to
   prefetch; the reference leaves them NULL.  y, sum, x and r are of type
   t (the SIMD tiers' kernels take 16-bit rows; the reference float32
   ones). */
typedef struct peak_layernorm_row {
    void *y;
    void *sum;
    const void *x;
    const void *r;
    const float *gamma;
    const float *beta;
    size_t n;
    const void *pf_x;
    const void *pf_r;
    peak_dtype t;
    float *s; /* the SIMD tiers' 16-bit rows: n floats, x + r as pass 1
                 found it, for pass 2; or NULL */
} peak_layernorm_row;

/* Element j of a row of type t, exactly as a float. */
static inline float peak_layernorm_at(const void *p, peak_dtype t, size_t j)
{
    return peak_f32_of_bits(peak_convert_load(p, t, j));
}

/* s[j] = x[j] + r[j] (r NULL: x[j]), rounded to float: the value `sum`
   receives and every tier normalises. */
static inline float peak_layernorm_input(const peak_layernorm_row *w, size_t j)
{
    const float x = peak_layernorm_at(w->x, w->t, j);
    return w->r ? x + peak_layernorm_at(w->r, w->t, j) : x;
}

/* peak_add_layernorm's contract (peak.h), arguments already validated:
   rows rows of d_model floats; r, sum, gamma and beta may be NULL. */
PEAK_INTERNAL void peak_layernorm_rows_ref(float *y, ptrdiff_t ld_y, float *sum,
                                           ptrdiff_t ld_sum, const float *x, ptrdiff_t ld_x,
                                           const float *r, ptrdiff_t ld_r, const float *gamma,
                                           const float *beta, size_t rows, size_t d_model,
                                           float eps);

#endif /* PEAK_COMMON_LAYERNORM_REF_H */
