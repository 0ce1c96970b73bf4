/* schedule-layernorm.c - peak_add_layernorm as work items. */
#include "schedule.h"

void peak_schedule_add_layernorm(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                                 const float *x, ptrdiff_t ld_x, const float *r, ptrdiff_t ld_r,
                                 const float *gamma, const float *beta, size_t rows,
                                 size_t d_model, float eps, const peak_threadpool *pool)
{
    (void)pool;
    peak_active_kernels()->add_layernorm(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta,
                                         rows, d_model, eps);
}
