/* schedule-layernorm.c - peak_add_layernorm as work items: runs of rows,
   each one kernel call on its rows.  A row's bits do not depend on its
   item (layernorm.h, "Pipelining"); whether the stores stream is decided
   here, for the whole call. */
#include "items.h"
#include "layernorm.h"
#include "schedule.h"

/* Rows an item: at least LN_ITEM_ROWS, and at least LN_ITEM_FLOATS floats
   of y.  An item's first row runs pass 1 alone and its last row pass 2
   alone (layernorm.h, "Pipelining"), which a row in 32 hardly shows, but
   smaller items do, on one thread (AVX2, Zen 3, items of 8 rows: 7-9%
   slower on 4096 and 16384 rows of 768; of 2 rows: 15-25%).  32 rows
   keep 65536 x 4096 at 2048 items, a load imbalance of 1.03 at 192
   workers; 4096 x 768 has 128 items, 1.0 at 16 and 64 workers, 1.5 at 192.
   Rows of 512 floats or fewer take 64 KiB of y an item instead, so that
   an item stays ~10 us or more. */
#define LN_ITEM_ROWS ((size_t)32)
#define LN_ITEM_FLOATS ((size_t)16384)

/* The cost model, on one core: a row costs LN_ROW_NS plus LN_NS a float
   (AVX2, Zen 3: 53 ns a row of 64, 240 of 512, 1.6 us of 4096 measured,
   rows in cache). */
#define LN_ROW_NS 20.0
#define LN_NS 0.4

/* The call's operands (layernorm.h's peak_layernorm_args: rows is the
   whole call's), and how it is cut. */
typedef struct ln_work {
    peak_layernorm_args a;
    size_t per_item;
    float eps;
    bool stream;
    peak_add_layernorm_fn kernel;
} ln_work;

static void ln_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const ln_work *w = ctx;
    const peak_layernorm_args *a = &w->a;
    const size_t t = item * w->per_item;
    const ptrdiff_t pt = (ptrdiff_t)t;
    const size_t n = peak_item_len(a->rows, t, w->per_item);
    w->kernel(a->y + pt * a->ld_y, a->ld_y, a->sum ? a->sum + pt * a->ld_sum : NULL, a->ld_sum,
              a->x + pt * a->ld_x, a->ld_x, a->r ? a->r + pt * a->ld_r : NULL, a->ld_r, a->gamma,
              a->beta, n, a->d_model, w->eps, a->rows - t - n, w->stream);
}

static double ln_rows_ns(size_t rows, size_t d_model)
{
    return (double)rows * (LN_ROW_NS + LN_NS * (double)d_model);
}

static double ln_cost(const void *ctx, size_t item)
{
    const ln_work *w = ctx;
    return ln_rows_ns(peak_item_len(w->a.rows, item * w->per_item, w->per_item), w->a.d_model);
}

void peak_schedule_add_layernorm(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                                 const float *x, ptrdiff_t ld_x, const float *r, ptrdiff_t ld_r,
                                 const float *gamma, const float *beta, size_t rows,
                                 size_t d_model, float eps, const peak_threadpool *pool)
{
    const size_t short_rows = LN_ITEM_FLOATS / d_model;
    ln_work a = {.a = {.y = y, .ld_y = ld_y, .sum = sum, .ld_sum = ld_sum, .x = x, .ld_x = ld_x,
                       .r = r, .ld_r = ld_r, .gamma = gamma, .beta = beta, .rows = rows,
                       .d_model = d_model},
                 .per_item = short_rows > LN_ITEM_ROWS ? short_rows : LN_ITEM_ROWS,
                 .eps = eps,
                 .stream = peak_layernorm_streams(rows, d_model),
                 .kernel = peak_active_kernels()->add_layernorm};
    const peak_work w = {.items = peak_items(rows, a.per_item),
                         .run = ln_item,
                         .cost = ln_cost,
                         .ctx = &a,
                         .total_ns = ln_rows_ns(rows, d_model)};
    peak_work_run(&w, pool);
}
