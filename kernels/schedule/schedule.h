/*
 * schedule.h - the scheduling layer: how a validated call becomes work
 * items (parallel.h) and which tier kernels run them, one file per family
 * (schedule-<family>.c).  ISA-free, compiled once.  api.c validates, then
 * calls exactly one function of this header; the per-call decisions that
 * need the whole call's size (streaming stores, the embedding's position
 * blocking, split-KV) are made here, never in a kernel.
 */
#ifndef PEAK_SCHEDULE_H
#define PEAK_SCHEDULE_H

#include "internal.h"
#include "parallel.h"

PEAK_INTERNAL void peak_schedule_pe_table(float *out, size_t n_pos, size_t d_model, size_t pos0,
                                          const peak_pe_params *params,
                                          const peak_threadpool *pool);

PEAK_INTERNAL void peak_schedule_pe_add(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x,
                                        size_t batch, size_t seq_len, size_t d_model, size_t pos0,
                                        const float *pe, const peak_pe_params *params,
                                        const peak_threadpool *pool);

/* The cost model of n_pos consecutive rows of the sinusoid table's columns
   of n_freq frequencies, in nanoseconds on one core (schedule-pe.c): for
   the schedulers that compute PE rows themselves (the embedding's). */
PEAK_INTERNAL double peak_schedule_pe_rows_ns(size_t n_pos, size_t n_freq,
                                              const peak_pe_params *params);

PEAK_INTERNAL void peak_schedule_softmax(float *y, const float *x, const peak_softmax_desc *desc,
                                         const peak_threadpool *pool);

PEAK_INTERNAL void peak_schedule_exp(float *y, const float *x, size_t n,
                                     const peak_threadpool *pool);

PEAK_INTERNAL void peak_schedule_add_layernorm(float *y, ptrdiff_t ld_y, float *sum,
                                               ptrdiff_t ld_sum, const float *x, ptrdiff_t ld_x,
                                               const float *r, ptrdiff_t ld_r, const float *gamma,
                                               const float *beta, size_t rows, size_t d_model,
                                               float eps, const peak_threadpool *pool);

/* Bytes of workspace peak_attention needs for d (resolved) with `workers`
   workers on the active tier. */
PEAK_INTERNAL size_t peak_schedule_attention_workspace(const peak_attention_desc *d,
                                                       size_t workers);

PEAK_INTERNAL void peak_schedule_attention(float *o, const float *q, const float *k,
                                           const float *v, const peak_attention_desc *d,
                                           void *workspace, const peak_threadpool *pool);

#endif /* PEAK_SCHEDULE_H */
