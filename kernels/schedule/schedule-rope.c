/* schedule-rope.c - peak_rope_cache and peak_rope_apply as work items.
   The frequencies are computed once here (rope.h, peak_rope_freqs) and
   read by every item.  A cache row and a rotated head depend only on their
   position and operands, never on the item (rope.h), so any cut gives the
   same bytes; the cuts below keep the sincos reuse of the rows driver. */
#include "convert.h"
#include "items.h"
#include "rope.h"
#include "schedule.h"

#include <stdint.h>
#include <string.h>

/* Cache rows an item: a multiple of PEAK_PE_BLOCK, so that an item's
   block bases are whole; 256 rows of 64 frequencies are ~50 us. */
#define ROPE_CACHE_ITEM_ROWS ((size_t)256)
/* Rotated floats an item: about 64 KiB of x (~10-20 us out of cache). */
#define ROPE_ITEM_FLOATS ((size_t)16384)

/* The cost model, on one core (AVX2, Zen 3): a cache entry (a cos and a
   sin) ROPE_CACHE_NS; a rotated float ROPE_NS; a token's on-the-fly row
   ROPE_ROW_NS per frequency. */
#define ROPE_CACHE_NS 1.5
#define ROPE_NS 0.25
#define ROPE_ROW_NS 2.0

/* A 16-bit cache's rows are computed in float32 into a block on the stack
   and rounded from there (schedule-stage.c), a chunk of frequencies at a
   time when the item's rows do not fit whole: the kernel gets the chunk's
   frequencies as a call of their own (rope_freqs_window), so a block row
   is the chunk's cosines then its sines, and a call takes 128 rows.  Each
   call evaluates the 32 offsets' sincos again: per row and frequency chunk
   about 36/128 = 0.28 sincos chunks, against 40/256 in the float32 items
   and 0.53 for whole rows of rotary_dim 128 (64 a call).  32 KiB. */
#define ROPE_STAGE_FLOATS ((size_t)8192)

typedef struct rope_cache_work {
    void *cache;
    peak_dtype type;
    size_t n_pos, pos0, r;
    const peak_rope_freqs *f;
    peak_rope_cache_fn kernel;
} rope_cache_work;

/* The frequencies [i0, i0 + m) of f as a call's own (m <= a chunk): the
   kernel's values depend only on each frequency, the attention factor and
   the position (rope.h), so they are the bits of f's columns. */
static void rope_freqs_window(peak_rope_freqs *w, const peak_rope_freqs *f, size_t i0, size_t m)
{
    w->n = m;
    w->mode = f->mode;
    w->af = f->af;
    w->af_f32 = f->af_f32;
    for (size_t j = 0; j < PEAK_PE_CHUNK; j++) {
        w->w[j] = j < m ? f->w[i0 + j] : 0.0;
        w->w_f32[j] = j < m ? f->w_f32[i0 + j] : 0.0f;
    }
}

/* Rows [t, t + n) of a 16-bit cache (rotary_dim r): whole rows when they
   fit the block, else a chunk of frequencies at a time. */
static void rope_cache_staged(const rope_cache_work *w, size_t t, size_t n)
{
    PEAK_PE_ALIGN float block[ROPE_STAGE_FLOATS];
    const size_t nf = w->f->n, es = peak_dtype_bytes(w->type);
    char *const cache = w->cache;
    if (n * w->r <= ROPE_STAGE_FLOATS) {
        /* The block's rows are the cache's: one rounding call for all. */
        w->kernel(block, (ptrdiff_t)w->r, n, w->pos0 + t, NULL, w->f);
        peak_stage_rows_out(cache + t * w->r * es, w->type, 0, block, 0, 1, n * w->r);
        return;
    }
    peak_rope_freqs win;
    const size_t rows = ROPE_STAGE_FLOATS / (2 * PEAK_PE_CHUNK);
    for (size_t i0 = 0; i0 < nf; i0 += PEAK_PE_CHUNK) {
        const size_t m = peak_item_len(nf, i0, PEAK_PE_CHUNK);
        rope_freqs_window(&win, w->f, i0, m);
        for (size_t t0 = t; t0 < t + n; t0 += rows) {
            const size_t c = peak_item_len(t + n, t0, rows);
            w->kernel(block, (ptrdiff_t)(2 * m), c, w->pos0 + t0, NULL, &win);
            char *row = cache + (t0 * w->r + i0) * es;
            peak_stage_rows_out(row, w->type, (ptrdiff_t)w->r, block, 2 * m, c, m);
            peak_stage_rows_out(row + nf * es, w->type, (ptrdiff_t)w->r, block + m, 2 * m, c, m);
        }
    }
}

static void rope_cache_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const rope_cache_work *w = ctx;
    const size_t t = item * ROPE_CACHE_ITEM_ROWS;
    const size_t n = peak_item_len(w->n_pos, t, ROPE_CACHE_ITEM_ROWS);
    if (w->type != PEAK_F32) {
        rope_cache_staged(w, t, n);
        return;
    }
    w->kernel((float *)w->cache + t * w->r, (ptrdiff_t)w->r, n, w->pos0 + t, NULL, w->f);
}

static double rope_cache_ns(size_t rows, size_t n_freq)
{
    return (double)rows * (double)n_freq * ROPE_CACHE_NS;
}

static double rope_cache_cost(const void *ctx, size_t item)
{
    const rope_cache_work *w = ctx;
    return rope_cache_ns(peak_item_len(w->n_pos, item * ROPE_CACHE_ITEM_ROWS, ROPE_CACHE_ITEM_ROWS),
                         w->r / 2);
}

void peak_schedule_rope_cache(void *cache, peak_dtype cache_type, size_t n_pos, size_t pos0,
                              const peak_rope_params *params, const peak_threadpool *pool)
{
    peak_rope_freqs f;
    peak_rope_freqs_init(&f, params);
    rope_cache_work a = {cache, cache_type, n_pos, pos0, params->rotary_dim, &f,
                         peak_active_kernels()->rope_cache};
    const peak_work w = {.items = peak_items(n_pos, ROPE_CACHE_ITEM_ROWS),
                         .run = rope_cache_item,
                         .cost = rope_cache_cost,
                         .ctx = &a,
                         .total_ns = rope_cache_ns(n_pos, f.n)};
    peak_work_run(&w, pool);
}

typedef struct rope_apply_work {
    float *y;
    const float *x;
    const peak_rope_desc *d;
    const peak_rope_freqs *f;
    size_t per_item, chunks; /* tokens an item; items per sequence */
    bool stream;             /* peak_rope_streams, for the whole call */
    peak_rope_apply_fn kernel;
} rope_apply_work;

static void rope_apply_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const rope_apply_work *w = ctx;
    const size_t b = item / w->chunks, l0 = item % w->chunks * w->per_item;
    w->kernel(w->y, w->x, w->d, w->f, b, l0, l0 + peak_item_len(w->d->seq_len, l0, w->per_item),
              w->stream);
}

static double rope_apply_ns(const peak_rope_desc *d, size_t tokens)
{
    const double row = d->cache ? 0.0 : ROPE_ROW_NS * 0.5 * (double)d->params.rotary_dim;
    return (double)tokens * (row + ROPE_NS * (double)(d->heads * d->head_dim));
}

static double rope_apply_cost(const void *ctx, size_t item)
{
    const rope_apply_work *w = ctx;
    const size_t l0 = item % w->chunks * w->per_item;
    return rope_apply_ns(w->d, peak_item_len(w->d->seq_len, l0, w->per_item));
}

void peak_schedule_rope_apply(float *y, const float *x, const peak_rope_desc *desc,
                              const peak_threadpool *pool)
{
    peak_rope_freqs f;
    peak_rope_apply_freqs(&f, desc);
    const size_t token_floats = desc->heads * desc->head_dim;
    const size_t per_item = peak_clamp_size(ROPE_ITEM_FLOATS / token_floats, 1, desc->seq_len);
    rope_apply_work a = {y,
                         x,
                         desc,
                         &f,
                         per_item,
                         peak_items(desc->seq_len, per_item),
                         peak_rope_streams(y, x, desc),
                         peak_active_kernels()->rope_apply};
    const peak_work w = {.items = desc->batch * a.chunks,
                         .run = rope_apply_item,
                         .cost = rope_apply_cost,
                         .ctx = &a,
                         .total_ns = (double)desc->batch * rope_apply_ns(desc, desc->seq_len)};
    peak_work_run(&w, pool);
}
