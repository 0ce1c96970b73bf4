/*
 * layernorm-scalar.c - the scalar tier's residual add + LayerNorm: the
 * plain-C reference of common/layernorm-ref.c (numerics there), which the
 * SIMD tiers also call for the rows they leave to the reference; this file
 * gives it the tier's kernel name.
 */
#include "common/layernorm-ref.h"
#include "internal.h"

/* rows_after and stream are ignored: the reference neither prefetches nor
   streams. */
void peak_f32_add_layernorm__scalar(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                                    const float *x, ptrdiff_t ld_x, const float *r,
                                    ptrdiff_t ld_r, const float *gamma, const float *beta,
                                    size_t rows, size_t d_model, float eps, size_t rows_after,
                                    bool stream)
{
    (void)rows_after;
    (void)stream;
    peak_layernorm_rows_ref(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model,
                            eps);
}
