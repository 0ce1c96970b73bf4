/* schedule-pe.c - peak_pe_table and peak_pe_add as work items. */
#include "schedule.h"

void peak_schedule_pe_table(float *out, size_t n_pos, size_t d_model, size_t pos0,
                            const peak_pe_params *params, const peak_threadpool *pool)
{
    (void)pool;
    peak_active_kernels()->pe_table(out, (ptrdiff_t)d_model, n_pos, d_model, pos0, params);
}

void peak_schedule_pe_add(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                          size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                          const peak_pe_params *params, const peak_threadpool *pool)
{
    (void)pool;
    peak_active_kernels()->pe_add(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe,
                                  params);
}
