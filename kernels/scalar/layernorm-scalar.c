/*
 * layernorm-scalar.c - the scalar tier's residual add + LayerNorm: the
 * plain-C reference of common/layernorm-ref.c (numerics there), which the
 * SIMD tiers also call for the rows they leave to the reference; this file
 * gives it the tier's kernel name.
 */
#include "common/layernorm-ref.h"
#include "internal.h"

#include <assert.h>

/* rows_after and stream are ignored: the reference neither prefetches nor
   streams.  Float32 rows only: the scheduler stages 16-bit ones for this
   tier (schedule-layernorm.c). */
void peak_f32_add_layernorm__scalar(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum,
                                    const void *x, ptrdiff_t ld_x, const void *r,
                                    ptrdiff_t ld_r, const float *gamma, const float *beta,
                                    size_t rows, size_t d_model, float eps, peak_dtype type,
                                    size_t rows_after, bool stream)
{
    (void)rows_after;
    (void)stream;
    assert(type == PEAK_F32);
    (void)type;
    peak_layernorm_rows_ref(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model,
                            eps);
}
