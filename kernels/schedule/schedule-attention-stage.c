/*
 * schedule-attention-stage.c - what peak_attention does around its
 * kernels: the phases that give them float32 Q and O whatever the call's
 * types, and the rotary embedding of peak_attention_rope.
 *
 * The kernels read K and V where they are, in their own types (the tile
 * path widens them while packing a tile, the row path as it loads them:
 * a decode step reads a 16-bit cache's bytes once).  Q and O are staged
 * through the front of the workspace instead, packed [B, L, H, D]:
 *   - Q, when it is 16-bit or RoPE rotates it: widened (peak_convert's
 *     kernel), then rotated in place; one pass over Lq rows, which the
 *     block kernel would otherwise widen once per tile of keys;
 *   - K, when RoPE rotates it: likewise (widened first if 16-bit);
 *   - O, when it is 16-bit: the kernels write float32 there and a last
 *     phase rounds each row once into O (round to nearest even).
 * Every phase is elementwise per row (a row's bits never depend on its
 * item), on the pool.
 */
#include "items.h"
#include "schedule.h"

#include "convert.h"
#include "rope.h"

#include <string.h>

/* Elements an item of a staging phase: as peak_convert's. */
#define STAGE_ITEM_ELEMS ((size_t)16384)
/* ns an element: a convert's (schedule-convert.c). */
#define STAGE_NS 0.1

/* d->n (n[0] n[1] n[2] rows of len elements) * 4 bytes, rounded up to
   64; SIZE_MAX when that overflows. */
static size_t floats_bytes(const size_t n[3], size_t len)
{
    size_t b = sizeof(float) * len;
    for (int i = 0; i < 3; i++) {
        if (n[i] && b > (SIZE_MAX - 63) / n[i])
            return SIZE_MAX;
        b *= n[i];
    }
    return (b + 63) & ~(size_t)63;
}

/* Which of Q (0), K (1) and O (2) the call stages. */
static bool staged(const peak_attention_desc *d, int which)
{
    switch (which) {
    case 0: return d->q_type != PEAK_F32 || peak_attention_rope_rotates(d, false);
    case 1: return peak_attention_rope_rotates(d, true);
    default: return d->o_type != PEAK_F32;
    }
}

static void stage_dims(const peak_attention_desc *d, int which, size_t n[3], size_t *len)
{
    n[0] = d->batch;
    n[1] = which == 1 ? d->kv_len : d->q_len;
    n[2] = which == 1 ? d->kv_heads : d->heads;
    *len = which == 2 ? d->v_head_dim : d->head_dim;
}

static size_t stage_bytes(const peak_attention_desc *d, int which)
{
    if (!staged(d, which))
        return 0;
    size_t n[3], len;
    stage_dims(d, which, n, &len);
    return floats_bytes(n, len);
}

size_t peak_schedule_attention_stage_bytes(const peak_attention_desc *d)
{
    size_t total = 0;
    for (int which = 0; which < 3; which++) {
        const size_t b = stage_bytes(d, which);
        if (b > SIZE_MAX - 63 - total)
            return SIZE_MAX & ~(size_t)63;
        total += b;
    }
    return total;
}

/* The packed strides of a staged copy, [B, L, H, D]. */
static void packed_strides(const size_t n[3], size_t len, ptrdiff_t s[3])
{
    s[2] = (ptrdiff_t)len;
    s[1] = s[2] * (ptrdiff_t)n[2];
    s[0] = s[1] * (ptrdiff_t)n[1];
}

void peak_schedule_attention_stage_desc(const peak_attention_desc *d, peak_attention_desc *staged_d)
{
    *staged_d = *d;
    staged_d->rope = NULL;
    ptrdiff_t *strides[3] = {staged_d->q_stride, staged_d->k_stride, staged_d->o_stride};
    peak_dtype *types[3] = {&staged_d->q_type, &staged_d->k_type, &staged_d->o_type};
    for (int which = 0; which < 3; which++) {
        /* a copy whose bytes overflow makes the workspace the sentinel,
           which no call gets: its strides are never used (nor computed) */
        if (!staged(d, which) || stage_bytes(d, which) == SIZE_MAX)
            continue;
        size_t n[3], len;
        stage_dims(d, which, n, &len);
        packed_strides(n, len, strides[which]);
        *types[which] = PEAK_F32;
    }
}

/* One staging conversion: rows (i0, i1, i2) < n of len elements, from x
   (type xt, strides xs) to y (yt, ys). */
typedef struct stage_work {
    void *y;
    const void *x;
    peak_dtype yt, xt;
    const ptrdiff_t *ys, *xs;
    size_t n[3], len, rows_per_item, rows;
    peak_convert_fn kernel;
} stage_work;

/* Bytes from a tensor's start to row r (i0, i1, i2) < n. */
static ptrdiff_t row_offset(const ptrdiff_t s[3], peak_dtype t, size_t r, const size_t n[3])
{
    const size_t i2 = r % n[2], i1 = r / n[2] % n[1], i0 = r / n[2] / n[1];
    return ((ptrdiff_t)i0 * s[0] + (ptrdiff_t)i1 * s[1] + (ptrdiff_t)i2 * s[2]) *
           (ptrdiff_t)peak_dtype_bytes(t);
}

static void stage_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const stage_work *s = ctx;
    const size_t r0 = item * s->rows_per_item;
    for (size_t r = r0; r < r0 + peak_item_len(s->rows, r0, s->rows_per_item); r++)
        s->kernel((char *)s->y + row_offset(s->ys, s->yt, r, s->n), s->yt,
                  (const char *)s->x + row_offset(s->xs, s->xt, r, s->n), s->xt, s->len, false);
}

static double stage_cost(const void *ctx, size_t item)
{
    const stage_work *s = ctx;
    return STAGE_NS * (double)(peak_item_len(s->rows, item * s->rows_per_item,
                                             s->rows_per_item) * s->len);
}

static void stage_rows(void *y, peak_dtype yt, const ptrdiff_t ys[3], const void *x,
                       peak_dtype xt, const ptrdiff_t xs[3], const size_t n[3], size_t len,
                       const peak_threadpool *pool)
{
    stage_work s = {y, x, yt, xt, ys, xs, {n[0], n[1], n[2]}, len, 0, n[0] * n[1] * n[2],
                    peak_schedule_convert_kernel(yt, xt)};
    s.rows_per_item = peak_clamp_size(STAGE_ITEM_ELEMS / len, 1, s.rows);
    const peak_work w = {.items = peak_items(s.rows, s.rows_per_item),
                         .run = stage_item,
                         .cost = stage_cost,
                         .ctx = &s,
                         .total_ns = STAGE_NS * (double)(s.rows * len)};
    peak_work_run(&w, pool);
}

void peak_schedule_attention_stage_in(const peak_attention_desc *d, const void **q,
                                      const void **k, void *ws, const peak_threadpool *pool)
{
    char *at = ws;
    for (int which = 0; which < 2; which++) {
        if (!staged(d, which))
            continue;
        const bool keys = which == 1;
        float *copy = (float *)(void *)at;
        const void **x = keys ? k : q;
        size_t n[3], len;
        ptrdiff_t ps[3];
        stage_dims(d, which, n, &len);
        packed_strides(n, len, ps);
        const peak_dtype t = keys ? d->k_type : d->q_type;
        const ptrdiff_t *xs = keys ? d->k_stride : d->q_stride;
        if (peak_attention_rope_rotates(d, keys)) {
            peak_rope_desc r;
            peak_attention_rope_desc(d, keys, &r);
            if (t != PEAK_F32) { /* widened, then rotated in place */
                stage_rows(copy, PEAK_F32, ps, *x, t, xs, n, len, pool);
                memcpy(r.x_stride, ps, sizeof ps);
                peak_schedule_rope_apply(copy, copy, &r, pool);
            } else {
                peak_schedule_rope_apply(copy, *x, &r, pool);
            }
        } else {
            stage_rows(copy, PEAK_F32, ps, *x, t, xs, n, len, pool);
        }
        *x = copy;
        at += stage_bytes(d, which);
    }
}

float *peak_schedule_attention_stage_o(const peak_attention_desc *d, void *o, void *ws)
{
    if (!staged(d, 2))
        return o;
    return (float *)(void *)((char *)ws + stage_bytes(d, 0) + stage_bytes(d, 1));
}

void peak_schedule_attention_stage_out(const peak_attention_desc *d, void *o, const float *staged_o,
                                       const peak_threadpool *pool)
{
    if (!staged(d, 2))
        return;
    size_t n[3], len;
    ptrdiff_t ps[3];
    stage_dims(d, 2, n, &len);
    packed_strides(n, len, ps);
    stage_rows(o, d->o_type, d->o_stride, staged_o, PEAK_F32, ps, n, len, pool);
}
