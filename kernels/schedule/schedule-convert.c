/* schedule-convert.c - peak_convert as work items: runs of
   CONVERT_ITEM_ELEMS elements, each one kernel call on its part of x and y
   (elementwise, so an element's bits do not depend on its item), and the
   kernels of a call with 16-bit tensors (this one's and attention's): the
   active tier's, or the scalar ones for float16 on an AVX2 tier whose CPU
   lacks F16C (the tier itself does not require it). */
#include "items.h"
#include "schedule.h"

#include "convert.h"

/* Elements an item: 32 KiB of float16 out of 64 KiB of float32, a few
   microseconds on one core.  A multiple of every tier's vector. */
#define CONVERT_ITEM_ELEMS ((size_t)16384)

/* The cost model: nanoseconds an element on one core, a memory-bound
   copy's (0.1 ns: 6 bytes at ~60 GB/s in cache, less out of it). */
#define CONVERT_NS 0.1

typedef struct convert_work {
    void *y;
    const void *x;
    peak_dtype yt, xt;
    size_t n;
    bool stream;
    peak_convert_fn kernel;
} convert_work;

static void convert_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const convert_work *c = ctx;
    const size_t j = item * CONVERT_ITEM_ELEMS;
    c->kernel((char *)c->y + j * peak_dtype_bytes(c->yt), c->yt,
              (const char *)c->x + j * peak_dtype_bytes(c->xt), c->xt,
              peak_item_len(c->n, j, CONVERT_ITEM_ELEMS), c->stream);
}

static double convert_cost(const void *ctx, size_t item)
{
    const convert_work *c = ctx;
    return CONVERT_NS *
           (double)peak_item_len(c->n, item * CONVERT_ITEM_ELEMS, CONVERT_ITEM_ELEMS);
}

const peak_kernels *peak_typed_kernels_for(const peak_kernels *k, unsigned features, bool f16)
{
    if (f16 && k->isa == PEAK_ISA_AVX2 && !(features & PEAK_CPU_F16C))
        return &peak_kernels_scalar;
    return k;
}

const peak_kernels *peak_schedule_typed_kernels(bool f16)
{
    return peak_typed_kernels_for(peak_active_kernels(), peak_cpu_features(), f16);
}

peak_convert_fn peak_schedule_convert_kernel(peak_dtype yt, peak_dtype xt)
{
    return peak_schedule_typed_kernels(yt == PEAK_F16 || xt == PEAK_F16)->convert;
}

const peak_kernels *peak_schedule_attention_kernels(const peak_attention_desc *d)
{
    return peak_schedule_typed_kernels(d->k_type == PEAK_F16 || d->v_type == PEAK_F16);
}

void peak_schedule_convert(void *y, peak_dtype yt, const void *x, peak_dtype xt, size_t n,
                           const peak_threadpool *pool)
{
    convert_work c = {y, x, yt, xt, n, peak_convert_streams(yt, xt, n),
                     peak_schedule_convert_kernel(yt, xt)};
    const peak_work w = {.items = peak_items(n, CONVERT_ITEM_ELEMS),
                         .run = convert_item,
                         .cost = convert_cost,
                         .ctx = &c,
                         .total_ns = CONVERT_NS * (double)n};
    peak_work_run(&w, pool);
}
