/* schedule-attention.c - peak_attention as work items. */
#include "schedule.h"

size_t peak_schedule_attention_workspace(const peak_attention_desc *d, size_t workers)
{
    (void)workers;
    return peak_active_kernels()->attention_workspace(d);
}

void peak_schedule_attention(float *o, const float *q, const float *k, const float *v,
                             const peak_attention_desc *d, void *workspace,
                             const peak_threadpool *pool)
{
    (void)pool;
    peak_active_kernels()->attention(o, q, k, v, d, workspace);
}
