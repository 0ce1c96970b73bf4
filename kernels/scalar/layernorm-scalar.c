/*
 * layernorm-scalar.c - the scalar tier's residual add + LayerNorm: the
 * plain-C reference of common/layernorm-ref.c (numerics there), which the
 * SIMD tiers also call for the rows they leave to the reference; this file
 * gives it the tier's kernel name.
 */
#include "common/layernorm-ref.h"
#include "internal.h"

void peak_f32_add_layernorm__scalar(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                                    const float *x, ptrdiff_t ld_x, const float *r,
                                    ptrdiff_t ld_r, const float *gamma, const float *beta,
                                    size_t rows, size_t d_model, float eps)
{
    peak_layernorm_rows_ref(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model,
                            eps);
}
