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

#include "internal.h"

#include <stddef.h>

/* One row's operands: r, gamma, beta and sum may be NULL.  pf_x and pf_r
   are a later row's x and r (or NULL) for the SIMD tiers' pass 1 to
   prefetch; the reference leaves them NULL. */
typedef struct peak_layernorm_row {
    float *y;
    float *sum;
    const float *x;
    const float *r;
    const float *gamma;
    const float *beta;
    size_t n;
    const float *pf_x;
    const float *pf_r;
} peak_layernorm_row;

/* s[j] = x[j] + r[j] (r NULL: x[j]), rounded to float: the value `sum`
   receives and every tier normalises. */
static inline float peak_layernorm_input(const peak_layernorm_row *w, size_t j)
{
    return w->r ? w->x[j] + w->r[j] : w->x[j];
}

/* peak_add_layernorm's contract (peak.h), arguments already validated:
   rows rows of d_model floats; r, sum, gamma and beta may be NULL. */
PEAK_INTERNAL void peak_layernorm_rows_ref(float *y, ptrdiff_t ld_y, float *sum,
                                           ptrdiff_t ld_sum, const float *x, ptrdiff_t ld_x,
                                           const float *r, ptrdiff_t ld_r, const float *gamma,
                                           const float *beta, size_t rows, size_t d_model,
                                           float eps);

#endif /* PEAK_COMMON_LAYERNORM_REF_H */
