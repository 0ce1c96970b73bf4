/* schedule-stage.c - rows of a 16-bit tensor through float32 scratch, for
   the schedulers of the families whose kernels take float32 rows (LayerNorm,
   softmax, the embedding, the PE table): an item widens its 16-bit input
   rows into its worker's scratch (a few rows, cache-resident), runs the
   float32 kernel there and rounds its outputs once into the 16-bit tensor.
   Widening is exact, so the float32 kernel sees the values the tensor
   holds, and every output element is its float32 result rounded once. */
#include "schedule.h"

#include "convert.h"

void peak_stage_rows_in(float *y, size_t ld_y, const void *x, peak_dtype xt, ptrdiff_t ld_x,
                        size_t n, size_t len)
{
    const peak_convert_fn kernel = peak_schedule_convert_kernel(PEAK_F32, xt);
    const ptrdiff_t row = ld_x * (ptrdiff_t)peak_dtype_bytes(xt);
    for (size_t t = 0; t < n; t++)
        kernel(y + t * ld_y, PEAK_F32, (const char *)x + (ptrdiff_t)t * row, xt, len, false);
}

void peak_stage_rows_out(void *x, peak_dtype xt, ptrdiff_t ld_x, const float *y, size_t ld_y,
                         size_t n, size_t len)
{
    const peak_convert_fn kernel = peak_schedule_convert_kernel(xt, PEAK_F32);
    const ptrdiff_t row = ld_x * (ptrdiff_t)peak_dtype_bytes(xt);
    for (size_t t = 0; t < n; t++)
        kernel((char *)x + (ptrdiff_t)t * row, xt, y + t * ld_y, PEAK_F32, len, false);
}
