/*
 * layernorm-avx2.c - residual add + LayerNorm with AVX2 + FMA: 8 floats a
 * vector, the code of layernorm-body.h on simd/f32-avx2.h (row ends load
 * with VMASKMOVPS and store with plain stores).  Algorithm, accuracy and
 * memory behaviour: layernorm.h.
 */
#include "simd/f32-avx2.h"

#include "layernorm-body.h"

void peak_f32_add_layernorm__avx2(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                                  const float *x, ptrdiff_t ld_x, const float *r, ptrdiff_t ld_r,
                                  const float *gamma, const float *beta, size_t rows,
                                  size_t d_model, float eps)
{
    layernorm_rows(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model, eps);
}
