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

/* out holds elements of out_type (float32 or 16-bit: the float32 table's
   entries rounded once, through float32 rows on the stack). */
PEAK_INTERNAL void peak_schedule_pe_table(void *out, peak_dtype out_type, size_t n_pos,
                                          size_t d_model, size_t pos0,
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

/* RoPE (schedule-rope.c): params / desc validated; the cache holds
   elements of cache_type (16-bit: the float32 values rounded once). */
PEAK_INTERNAL void peak_schedule_rope_cache(void *cache, peak_dtype cache_type, size_t n_pos,
                                            size_t pos0, const peak_rope_params *params,
                                            const peak_threadpool *pool);
PEAK_INTERNAL void peak_schedule_rope_apply(float *y, const float *x, const peak_rope_desc *desc,
                                            const peak_threadpool *pool);

/* Attention's staging (schedule-attention-stage.c), for a resolved,
   validated d: the bytes at the front of the workspace for the float32
   copies of Q (16-bit or rotated), K (rotated) and O (16-bit) (0 for
   none; SIZE_MAX & ~63 when they do not fit in a size_t); the descriptor
   the kernels then run with (the copies' packed strides and PEAK_F32,
   rope NULL); the first phase, which points *q and *k at the copies it
   made in ws; where the kernels write O (o itself, or its copy in ws);
   and the last phase, which rounds that copy into o. */
PEAK_INTERNAL size_t peak_schedule_attention_stage_bytes(const peak_attention_desc *d);
PEAK_INTERNAL void peak_schedule_attention_stage_desc(const peak_attention_desc *d,
                                                      peak_attention_desc *staged);
PEAK_INTERNAL void peak_schedule_attention_stage_in(const peak_attention_desc *d, const void **q,
                                                    const void **k, void *ws,
                                                    const peak_threadpool *pool);
PEAK_INTERNAL float *peak_schedule_attention_stage_o(const peak_attention_desc *d, void *o,
                                                     void *ws);
PEAK_INTERNAL void peak_schedule_attention_stage_out(const peak_attention_desc *d, void *o,
                                                     const float *staged_o,
                                                     const peak_threadpool *pool);

/* The kernels of a call with 16-bit tensors: the active tier's, or the
   scalar tier's where float16 needs F16C that the CPU lacks (the AVX2
   tier does not require it). */
PEAK_INTERNAL peak_convert_fn peak_schedule_convert_kernel(peak_dtype y_type, peak_dtype x_type);
/* The active tier's kernels, unless a call with a float16 tensor (f16)
   needs F16C that the CPU lacks: then the scalar tier's. */
PEAK_INTERNAL const peak_kernels *peak_schedule_typed_kernels(bool f16);
/* The same choice for tier k on a CPU with these peak_cpu_feature flags. */
PEAK_INTERNAL const peak_kernels *peak_typed_kernels_for(const peak_kernels *k, unsigned features,
                                                         bool f16);
PEAK_INTERNAL const peak_kernels *peak_schedule_attention_kernels(const peak_attention_desc *d);

/* PEAK_ERR_NO_MEMORY when a 16-bit y's long rows find no scratch. */
PEAK_INTERNAL peak_status peak_schedule_softmax(void *y, const void *x,
                                                const peak_softmax_desc *desc,
                                                const peak_threadpool *pool);

PEAK_INTERNAL void peak_schedule_exp(float *y, const float *x, size_t n,
                                     const peak_threadpool *pool);

PEAK_INTERNAL void peak_schedule_convert(void *y, peak_dtype y_type, const void *x,
                                         peak_dtype x_type, size_t n, const peak_threadpool *pool);

/* peak_add_layernorm, validated; types not NULL. */
PEAK_INTERNAL void peak_schedule_add_layernorm(void *y, ptrdiff_t ld_y, void *sum,
                                               ptrdiff_t ld_sum, const void *x, ptrdiff_t ld_x,
                                               const void *r, ptrdiff_t ld_r, const float *gamma,
                                               const float *beta, size_t rows, size_t d_model,
                                               float eps, const peak_layernorm_types *types,
                                               const peak_threadpool *pool);

/* Rows of a 16-bit tensor staged through float32 (schedule-stage.c):
   rows [t, t + n) of x (type xt, ld_x elements apart) widened into y
   (float32, ld_y apart), or, for the output direction, rounded from y
   into x.  The kernel is peak_schedule_convert_kernel()'s. */
PEAK_INTERNAL void peak_stage_rows_in(float *y, size_t ld_y, const void *x, peak_dtype xt,
                                      ptrdiff_t ld_x, size_t n, size_t len);
PEAK_INTERNAL void peak_stage_rows_out(void *x, peak_dtype xt, ptrdiff_t ld_x, const float *y,
                                       size_t ld_y, size_t n, size_t len);

/* A peak_attention call cut into parts (schedule-attention.c): its
   kernels, geometry and cost, how it is cut and what workspace it needs.
   The fields are schedule-attention.c's; api.c reads bytes. */
typedef struct peak_attention_plan {
    const peak_kernels *kern;
    peak_attention_geometry g;
    const peak_attention_desc *d; /* the call's, resolved; outlives the plan */
    size_t workers;               /* slots in the workspace */
    size_t bytes;                 /* the workspace: shared region, then the slots */
    double total_ns;              /* the cost model's whole call */
    size_t group, group_rows;
    bool rows_only;               /* every kv head by the rows kernel */
    size_t bundle;                /* kv heads per part (rows_only) */
    size_t units;                 /* parts per batch and chunk */
    size_t blocks;                /* per kv head (not rows_only), the tail's included */
    size_t tail;                  /* a kv head's last rows that go to the rows
                                     kernel instead of a vector of their own */
    bool reverse;                 /* a kv head's blocks last first */
    size_t chunks, chunk_keys;    /* split-KV: chunks per unit (1: not split) */
    size_t items;
    /* the run's operands, and split-KV's partials in the workspace:
       [B, Lq, H, chunks, Dv] and [B, H, Lq, chunks] */
    float *o;
    const float *q;
    const void *k, *v; /* d->k_type, d->v_type */
    float *po, *plse;
    peak_attention_desc pd;
} peak_attention_plan;

/* Plans a call: d resolved, `workers` the pool's count (a slot each). */
PEAK_INTERNAL void peak_schedule_attention_plan(peak_attention_plan *plan,
                                                const peak_kernels *kern,
                                                const peak_attention_desc *d, size_t workers);

/* Runs a plan on plan->bytes of workspace (64-byte aligned). */
PEAK_INTERNAL void peak_schedule_attention_run(peak_attention_plan *plan, float *o,
                                               const float *q, const void *k, const void *v,
                                               void *workspace, const peak_threadpool *pool);

/* The two in one, for the tests and benchmarks that name a tier's
   kernels: the workspace bytes, and a call on it (the same workers). */
PEAK_INTERNAL size_t peak_schedule_attention_workspace(const peak_kernels *kern,
                                                       const peak_attention_desc *d,
                                                       size_t workers);
PEAK_INTERNAL void peak_schedule_attention(const peak_kernels *kern, float *o, const float *q,
                                           const void *k, const void *v,
                                           const peak_attention_desc *d, void *workspace,
                                           size_t workers, const peak_threadpool *pool);

/* peak_attention_merge, validated (schedule-merge.c); also split-KV's
   second phase. */
PEAK_INTERNAL void peak_schedule_attention_merge(float *o, float *lse, const float *const *o_parts,
                                                 const float *const *lse_parts, size_t n_parts,
                                                 const peak_attention_merge_desc *desc,
                                                 const peak_threadpool *pool);
/* Split-KV's merge (call: the split attention call, its chunks' parts):
   the chunks' lse leave out each row's ALiBi shift and sink
   (attention-logits.h), which the merge adds; the sink as one more part
   after the chunks, with O = 0.  call NULL: peak_schedule_attention_merge. */
PEAK_INTERNAL void peak_schedule_attention_merge_split(float *o, float *lse,
                                                       const float *const *o_parts,
                                                       const float *const *lse_parts,
                                                       size_t n_parts,
                                                       const peak_attention_merge_desc *desc,
                                                       const peak_attention_desc *call,
                                                       const peak_threadpool *pool);

#endif /* PEAK_SCHEDULE_H */
