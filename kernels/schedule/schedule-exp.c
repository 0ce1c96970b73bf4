/* schedule-exp.c - peak_exp as work items: runs of EXP_ITEM_FLOATS
   elements, each one kernel call on its part of x and y (elementwise, so
   an element's bits do not depend on its item). */
#include "items.h"
#include "schedule.h"

/* Elements an item: 64 KiB of y, ~6 us on one core, so that taking an
   item (one atomic add) costs nothing beside it and a call of 1M elements
   still has 64 items.  A multiple of every tier's unrolled step. */
#define EXP_ITEM_FLOATS ((size_t)16384)

/* The cost model: nanoseconds an element on one core; 0.38 measured
   (AVX2, Zen 3, 1M and 16K elements alike). */
#define EXP_NS 0.38

typedef struct exp_work {
    float *y;
    const float *x;
    size_t n;
    peak_exp_fn kernel;
} exp_work;

static void exp_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const exp_work *e = ctx;
    const size_t j = item * EXP_ITEM_FLOATS;
    e->kernel(e->y + j, e->x + j, peak_item_len(e->n, j, EXP_ITEM_FLOATS));
}

static double exp_cost(const void *ctx, size_t item)
{
    const exp_work *e = ctx;
    return EXP_NS * (double)peak_item_len(e->n, item * EXP_ITEM_FLOATS, EXP_ITEM_FLOATS);
}

void peak_schedule_exp(float *y, const float *x, size_t n, const peak_threadpool *pool)
{
    exp_work e = {y, x, n, peak_active_kernels()->exp};
    const peak_work w = {.items = peak_items(n, EXP_ITEM_FLOATS),
                         .run = exp_item,
                         .cost = exp_cost,
                         .ctx = &e,
                         .total_ns = EXP_NS * (double)n};
    peak_work_run(&w, pool);
}
