/*
 * schedule-merge.c - peak_attention_merge as work items, and the second
 * phase of a split-KV peak_attention (schedule-attention.c), which merges
 * its key chunks' partial results with the same code.
 *
 * Each output element is the weighted mean of the parts' elements, in
 * double, the parts taken in their order p = 0 .. n-1 whatever the items:
 *   M = max_p lse_p,  w_p = e^(lse_p - M),  s = sum_p w_p,
 *   o = (float)(sum_p w_p o_p / s),  lse = (float)(M + log s).
 * So an element's bytes depend on the parts alone, not on which item (or
 * worker) computes it, nor on how the rows and columns were cut.
 *
 * Split-KV with logit options (peak_logits): a chunk's lse leaves out the
 * row's ALiBi shift and its sink (attention-logits.h); the merge works in
 * that frame, takes the sink as one more part after the chunks (O = 0,
 * lse = sink - shift: M takes it, s its weight) and adds the shift to lse.
 *
 * ISA-free: a merge is cheap next to the attention it merges (n
 * exponentials and n multiply-adds per element, against Lk / n keys of
 * Dh + Dv per part).
 */
#include "schedule.h"

#include "attention-logits.h"

#include <math.h>

/* Rows (b, i, h) of the output, h fastest: the order of O in [B, L, H, D].
   An item is rows_per consecutive rows, all their columns, so that a
   row's lse is read and written by one item (lse may be lse_parts[0]). */
typedef struct merge_ctx {
    float *o, *lse;
    const float *const *o_parts;
    const float *const *lse_parts;
    size_t n;
    const peak_attention_merge_desc *d;
    size_t rows, rows_per;
    const peak_attention_desc *ad; /* split-KV: the call, for its logits */
} merge_ctx;

/* Columns merged per pass over the parts, in double on the stack; a
   wider row takes several passes (its weights again: n exponentials per
   pass). */
#define MERGE_COLS 64

/* The cost model: ns per part and row (its lse, the exponential, the
   pointers), and per part and element (a multiply-add in double and its
   load); measured on Zen 3 with 256 parts of Dv = 64: ~16 ns a part-row. */
#define MERGE_PART_NS 12.0
#define MERGE_ELEM_NS 0.1

/* Elements (rows x columns x parts) per item: a few microseconds of
   merging, well above the runner's cost per item, and still one row per
   item for a decode step of 256 chunks. */
#define MERGE_ITEM_ELEMS 8192

static float *out_row(float *base, const ptrdiff_t *st, size_t b, size_t i, size_t h)
{
    return base + (ptrdiff_t)b * st[0] + (ptrdiff_t)i * st[1] + (ptrdiff_t)h * st[2];
}

static float *out_lse(float *base, const ptrdiff_t *st, size_t b, size_t h, size_t i)
{
    return base + (ptrdiff_t)b * st[0] + (ptrdiff_t)h * st[1] + (ptrdiff_t)i * st[2];
}

static const float *part_row(const float *base, const ptrdiff_t *st, size_t b, size_t i, size_t h)
{
    return base + (ptrdiff_t)b * st[0] + (ptrdiff_t)i * st[1] + (ptrdiff_t)h * st[2];
}

static const float *part_lse(const float *base, const ptrdiff_t *st, size_t b, size_t h, size_t i)
{
    return base + (ptrdiff_t)b * st[0] + (ptrdiff_t)h * st[1] + (ptrdiff_t)i * st[2];
}

/* M over the parts and the row's extra part (sink, -inf: none); *bad for
   a NaN or +inf lse (a part whose row was poisoned, as peak_attention
   gives for a visible +inf or NaN score). */
static double merge_max(const merge_ctx *m, size_t b, size_t h, size_t i, double sink, bool *bad)
{
    double mx = -INFINITY;
    *bad = false;
    for (size_t p = 0; p < m->n; p++) {
        const float l = *part_lse(m->lse_parts[p], m->d->part_lse_stride, b, h, i);
        if (isnan(l) || l == INFINITY)
            *bad = true;
        else if (l > mx)
            mx = l;
    }
    return sink > mx ? sink : mx;
}

/* Columns [c0, c1) (at most MERGE_COLS) of one row, and the row's s.  A
   part with lse = -inf (it saw nothing) is skipped, its O unread; any
   other is weighted even where w underflows to 0, so that a NaN in its O
   reaches the row, as a visible key's NaN V does in peak_attention. */
static double merge_cols(const merge_ctx *m, float *orow, size_t b, size_t h, size_t i, double mx,
                         double sink, size_t c0, size_t c1)
{
    double acc[MERGE_COLS] = {0.0}, s = 0.0;
    for (size_t p = 0; p < m->n; p++) {
        const float l = *part_lse(m->lse_parts[p], m->d->part_lse_stride, b, h, i);
        if (l == -INFINITY)
            continue;
        const double w = exp((double)l - mx);
        const float *op = part_row(m->o_parts[p], m->d->part_o_stride, b, i, h);
        s += w;
        for (size_t c = c0; c < c1; c++)
            acc[c - c0] += w * (double)op[c];
    }
    if (sink != -INFINITY) /* the last part: O = 0 */
        s += exp(sink - mx);
    for (size_t c = c0; c < c1; c++)
        orow[c] = (float)(acc[c - c0] / s);
    return s;
}

/* Row (b, i, h): its O and lse.  In place (o_parts[0] is o), each pass
   reads its columns of every part before it writes them. */
static void merge_row(const merge_ctx *m, size_t b, size_t i, size_t h)
{
    const peak_attention_merge_desc *d = m->d;
    const size_t dv = d->v_head_dim;
    float *orow = out_row(m->o, d->o_stride, b, i, h);
    /* Split-KV: the chunks' lse are in the row's ALiBi frame (without its
       shift) and without the sink, which joins them in that frame. */
    double shift = 0.0, sink = -INFINITY;
    if (m->ad) {
        shift = attention_row_frame(m->ad, b, h, i);
        if (m->ad->logits.sinks)
            sink = (double)m->ad->logits.sinks[(ptrdiff_t)h * m->ad->logits.sinks_stride] - shift;
    }
    bool bad;
    const double mx = merge_max(m, b, h, i, sink, &bad);
    float lse;
    if (bad || mx == -INFINITY) {
        /* Poisoned: NaN.  Every part saw nothing: O = 0, lse = -inf, as
           peak_attention writes a fully masked row. */
        for (size_t c = 0; c < dv; c++)
            orow[c] = bad ? NAN : 0.0f;
        lse = bad ? NAN : -INFINITY;
    } else {
        /* dv > 0: the first pass always runs, and its sum includes the
           maximum's own weight, 1. */
        double s = merge_cols(m, orow, b, h, i, mx, sink, 0, dv < MERGE_COLS ? dv : MERGE_COLS);
        for (size_t c = MERGE_COLS; c < dv; c += MERGE_COLS)
            s = merge_cols(m, orow, b, h, i, mx, sink, c,
                           dv - c < MERGE_COLS ? dv : c + MERGE_COLS);
        lse = (float)(mx + log(s) + shift);
    }
    if (m->lse)
        *out_lse(m->lse, d->lse_stride, b, h, i) = lse;
}

static size_t item_rows(const merge_ctx *m, size_t item, size_t *r0)
{
    *r0 = item * m->rows_per;
    return m->rows - *r0 < m->rows_per ? m->rows - *r0 : m->rows_per;
}

static void merge_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const merge_ctx *m = ctx;
    const peak_attention_merge_desc *d = m->d;
    size_t r0;
    const size_t nr = item_rows(m, item, &r0);
    for (size_t r = r0; r < r0 + nr; r++)
        merge_row(m, r / (d->q_len * d->heads), r / d->heads % d->q_len, r % d->heads);
}

static double row_ns(const merge_ctx *m)
{
    const size_t passes = (m->d->v_head_dim + MERGE_COLS - 1) / MERGE_COLS;
    return (double)m->n *
           (MERGE_PART_NS * (double)passes + (double)m->d->v_head_dim * MERGE_ELEM_NS);
}

static double merge_cost(const void *ctx, size_t item)
{
    const merge_ctx *m = ctx;
    size_t r0;
    return (double)item_rows(m, item, &r0) * row_ns(m);
}

void peak_schedule_attention_merge(float *o, float *lse, const float *const *o_parts,
                                   const float *const *lse_parts, size_t n_parts,
                                   const peak_attention_merge_desc *desc,
                                   const peak_threadpool *pool)
{
    peak_schedule_attention_merge_split(o, lse, o_parts, lse_parts, n_parts, desc, NULL, pool);
}

void peak_schedule_attention_merge_split(float *o, float *lse, const float *const *o_parts,
                                         const float *const *lse_parts, size_t n_parts,
                                         const peak_attention_merge_desc *desc,
                                         const peak_attention_desc *call,
                                         const peak_threadpool *pool)
{
    merge_ctx m = {o, lse, o_parts, lse_parts, n_parts, desc, 0, 1, call};
    m.rows = desc->batch * desc->q_len * desc->heads;
    const size_t per_row = desc->v_head_dim * n_parts;
    m.rows_per = per_row >= MERGE_ITEM_ELEMS ? 1 : MERGE_ITEM_ELEMS / per_row;
    peak_work w = {0};
    w.items = (m.rows + m.rows_per - 1) / m.rows_per;
    w.run = merge_item;
    w.cost = merge_cost;
    w.ctx = &m;
    w.total_ns = (double)m.rows * row_ns(&m);
    peak_work_run(&w, pool);
}
