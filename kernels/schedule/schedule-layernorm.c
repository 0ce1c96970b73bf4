/* schedule-layernorm.c - peak_add_layernorm as work items: runs of rows,
   each one kernel call on its rows.  A row's bits do not depend on its
   item (layernorm.h, "Pipelining"); whether the stores stream is decided
   here, for the whole call.  16-bit tensors of one type go to the tier's
   kernel as they are (ln_kernel_takes); other calls with a 16-bit tensor
   (mixed types, the scalar tier) go through float32 rows on the stack
   (schedule-stage.c): x + r formed there, the float32 kernel on them. */
#include "items.h"
#include "convert.h"
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
   whole call's, t the type the kernel takes them in), their types, and how
   the call is cut. */
typedef struct ln_work {
    peak_layernorm_args a;
    peak_layernorm_types t;
    bool staged; /* through float32 rows (ln_item_staged) */
    size_t per_item;
    float eps;
    bool stream;
    peak_add_layernorm_fn kernel;
} ln_work;

/* Floats of the stack buffer a 16-bit call's rows go through: a row of
   the longest d_model such a call takes, or as many rows as fit. */
#define LN_STAGE_FLOATS PEAK_LAYERNORM_MAX_STAGED
/* Floats of r widened at a time while it is added. */
#define LN_STAGE_PIECE ((size_t)256)

static const void *ln_row(const void *p, peak_dtype t, ptrdiff_t ld, size_t row)
{
    return peak_layernorm_row_of(p, ld, row, t);
}

/* s += r for rows [t, t + c) into S (d floats a row), r widened a piece at
   a time: the float32 sum the kernel would form, one add an element. */
static void ln_add_r(float *S, const ln_work *w, size_t t, size_t c)
{
    const size_t d = w->a.d_model;
    float piece[LN_STAGE_PIECE];
    for (size_t i = 0; i < c; i++)
        for (size_t j0 = 0; j0 < d; j0 += LN_STAGE_PIECE) {
            const size_t m = d - j0 < LN_STAGE_PIECE ? d - j0 : LN_STAGE_PIECE;
            const char *row = ln_row(w->a.r, w->t.r, w->a.ld_r, t + i);
            peak_stage_rows_in(piece, m, row + j0 * peak_dtype_bytes(w->t.r), w->t.r, 0, 1, m);
            float *srow = S + i * d + j0;
            for (size_t j = 0; j < m; j++)
                srow[j] += piece[j];
        }
}

/* Rows [t, t + n) of a call with a 16-bit tensor, a chunk of rows at a
   time through S: s = x + r widened, sum rounded from it, then the float32
   kernel on S (in place when y is 16-bit, rounded from it after). */
static void ln_item_staged(const ln_work *w, size_t t, size_t n)
{
    const peak_layernorm_args *a = &w->a;
    const size_t d = a->d_model, per = (LN_STAGE_FLOATS / d) ? (LN_STAGE_FLOATS / d) : 1;
    float S[LN_STAGE_FLOATS];
    for (size_t t0 = t; t0 < t + n; t0 += per) {
        const size_t c = t + n - t0 < per ? t + n - t0 : per;
        peak_stage_rows_in(S, d, ln_row(a->x, w->t.x, a->ld_x, t0), w->t.x, a->ld_x, c, d);
        if (a->r)
            ln_add_r(S, w, t0, c);
        if (a->sum)
            peak_stage_rows_out((void *)(uintptr_t)ln_row(a->sum, w->t.sum, a->ld_sum, t0),
                                w->t.sum, a->ld_sum, S, d, c, d);
        const bool y16 = w->t.y != PEAK_F32;
        void *y = y16 ? S : (void *)(uintptr_t)ln_row(a->y, PEAK_F32, a->ld_y, t0);
        w->kernel(y, y16 ? (ptrdiff_t)d : a->ld_y, NULL, 0, S, (ptrdiff_t)d, NULL, 0, a->gamma,
                  a->beta, c, d, w->eps, PEAK_F32, 0, w->stream && !y16);
        if (y16)
            peak_stage_rows_out((void *)(uintptr_t)ln_row(a->y, w->t.y, a->ld_y, t0), w->t.y,
                                a->ld_y, S, d, c, d);
    }
}

static void ln_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const ln_work *w = ctx;
    const peak_layernorm_args *a = &w->a;
    const size_t t = item * w->per_item;
    const size_t n = peak_item_len(a->rows, t, w->per_item);
    if (w->staged) {
        ln_item_staged(w, t, n);
        return;
    }
    w->kernel((void *)(uintptr_t)ln_row(a->y, a->t, a->ld_y, t), a->ld_y,
              (void *)(uintptr_t)ln_row(a->sum, a->t, a->ld_sum, t), a->ld_sum,
              ln_row(a->x, a->t, a->ld_x, t), a->ld_x, ln_row(a->r, a->t, a->ld_r, t), a->ld_r,
              a->gamma, a->beta, n, a->d_model, w->eps, a->t, a->rows - t - n, w->stream);
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

/* Whether the tier's kernel takes rows of type t itself (all of the call's
   tensors of that type): float32 on every tier; 16-bit on the SIMD tiers,
   float16 where its conversions are vector instructions the kernel's
   loops inline (not AVX2, whose F16C is optional). */
static bool ln_kernel_takes(const peak_kernels *k, peak_dtype t)
{
    return t == PEAK_F32 || (k->isa != PEAK_ISA_SCALAR && (t == PEAK_BF16 || k->isa != PEAK_ISA_AVX2));
}

void peak_schedule_add_layernorm(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum,
                                 const void *x, ptrdiff_t ld_x, const void *r, ptrdiff_t ld_r,
                                 const float *gamma, const float *beta, size_t rows,
                                 size_t d_model, float eps, const peak_layernorm_types *types,
                                 const peak_threadpool *pool)
{
    const peak_kernels *k = peak_active_kernels();
    const size_t short_rows = LN_ITEM_FLOATS / d_model;
    const peak_dtype t = types->x;
    const bool one_type = types->y == t && (!r || types->r == t) && (!sum || types->sum == t);
    ln_work a = {.a = {.y = y, .ld_y = ld_y, .sum = sum, .ld_sum = ld_sum, .x = x, .ld_x = ld_x,
                       .r = r, .ld_r = ld_r, .gamma = gamma, .beta = beta, .rows = rows,
                       .d_model = d_model, .t = t},
                 .t = *types,
                 .staged = !one_type || !ln_kernel_takes(k, t),
                 .per_item = short_rows > LN_ITEM_ROWS ? short_rows : LN_ITEM_ROWS,
                 .eps = eps,
                 .stream = peak_layernorm_streams(rows, d_model),
                 .kernel = k->add_layernorm};
    const peak_work w = {.items = peak_items(rows, a.per_item),
                         .run = ln_item,
                         .cost = ln_cost,
                         .ctx = &a,
                         .total_ns = ln_rows_ns(rows, d_model)};
    peak_work_run(&w, pool);
}
