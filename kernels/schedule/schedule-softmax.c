/* schedule-softmax.c - peak_softmax as work items: runs of rows in memory
   order of [b, h, i], each one kernel call.  Whether the stores stream is
   decided here for the whole call (peak_softmax_streams), and an item is a
   whole number of the kernels' row groups (softmax.h).  The kernels take
   float32 rows; a call with a 16-bit tensor stages them (schedule-stage.c):
   a 16-bit x with a float32 y is widened into y and run in place there; a
   16-bit y's rows run in float32 scratch and are rounded from it once. */
#include "items.h"
#include "convert.h"
#include "mask.h"
#include "schedule.h"
#include "softmax.h"

#include <stdlib.h>

/* Floats of the stack buffer a 16-bit y's rows go through: 32 KiB, which
   with the kernel's 16 KiB of streaming scratch keeps a call well inside
   peak.h's 80 KiB of stack.  Longer rows take a heap slot a worker. */
#define SOFTMAX_STAGE_FLOATS ((size_t)8192)

/* Output floats an item aims at: 128 KiB, ~100 us on one core, and rows
   of 4096 keys still cut a 32 x 4096 x 4096 call into 16384 items.  At
   most SOFTMAX_ITEM_ROWS rows (short rows: a few us an item). */
#define SOFTMAX_ITEM_FLOATS ((size_t)32768)
#define SOFTMAX_ITEM_ROWS ((size_t)256)

/* The cost model, on one core: a row costs SM_ROW_NS, SM_KEY_NS a key
   (the zeros written at masked keys, the row's walk) and SM_VIS_NS a
   visible key (max, exponential, sum, scaling), SM_MASK_NS more under an
   element mask (keep or bias: one more pass).  AVX2, Zen 3, rows in cache:
   36 ns a row of 16 keys, 400 of 512 measured.  The logit options: a cap
   or ALiBi forms the scores in that pass too (ALiBi alone: 0.13 ns more a
   visible key), and a cap adds a tanh, SM_CAP_NS (AVX2 on Sapphire
   Rapids, rows of 128 keys: 1.1 ns more a visible key); a sink costs a
   row next to nothing. */
#define SM_ROW_NS 25.0
#define SM_KEY_NS 0.1
#define SM_VIS_NS 0.65
#define SM_MASK_NS 0.3
#define SM_CAP_NS 1.1

typedef struct softmax_work {
    void *y;
    const void *x;
    const peak_softmax_desc *d;
    size_t rows, per_item;
    bool stream;
    peak_softmax_fn kernel;
    /* d for rows staged in y (x's strides are y's) and in scratch (rows
       packed, k_len floats apart). */
    peak_softmax_desc in_y, packed;
} softmax_work;

static void *softmax_y_row(const softmax_work *s, size_t row)
{
    const size_t size = peak_dtype_bytes(s->d->y_type);
    return (char *)s->y + peak_softmax_row_offset(s->d, s->d->y_stride, row) * (ptrdiff_t)size;
}

static const void *softmax_x_row(const softmax_work *s, size_t row)
{
    const size_t size = peak_dtype_bytes(s->d->x_type);
    return (const char *)s->x + peak_softmax_row_offset(s->d, s->d->x_stride, row) * (ptrdiff_t)size;
}

/* A 16-bit x, a float32 y: each x row widened into its y row, then the
   kernel in place on y. */
static void softmax_rows_in_y(const softmax_work *s, size_t row0, size_t n)
{
    const size_t k_len = s->d->k_len;
    for (size_t row = row0; row < row0 + n; row++)
        peak_stage_rows_in(softmax_y_row(s, row), k_len, softmax_x_row(s, row), s->d->x_type, 0, 1,
                           k_len);
    float *y = softmax_y_row(s, row0);
    s->kernel(y, y, &s->in_y, row0, n, s->stream);
}

/* A 16-bit y: chunks of rows widened (or copied) into S, the kernel in
   place there, each row rounded once into y.  In place (y == x) is safe:
   a chunk is read whole before any of it is written. */
static void softmax_rows_in_scratch(const softmax_work *s, size_t row0, size_t n, float *S,
                                    size_t floats)
{
    const peak_softmax_desc *d = s->d;
    const size_t k_len = d->k_len, per = floats / k_len;
    for (size_t r0 = row0; r0 < row0 + n; r0 += per) {
        const size_t c = row0 + n - r0 < per ? row0 + n - r0 : per;
        for (size_t t = 0; t < c; t++)
            peak_stage_rows_in(S + t * k_len, k_len, softmax_x_row(s, r0 + t), d->x_type, 0, 1,
                               k_len);
        s->kernel(S, S, &s->packed, r0, c, false);
        for (size_t t = 0; t < c; t++)
            peak_stage_rows_out(softmax_y_row(s, r0 + t), d->y_type, 0, S + t * k_len, k_len, 1,
                                k_len);
    }
}

/* Its own frame, so that float32 calls never reserve the buffer. */
static __attribute__((noinline)) void softmax_rows_on_stack(const softmax_work *s, size_t row0,
                                                            size_t n)
{
    _Alignas(64) float S[SOFTMAX_STAGE_FLOATS];
    softmax_rows_in_scratch(s, row0, n, S, SOFTMAX_STAGE_FLOATS);
}

static void softmax_item(void *ctx, size_t item, void *scratch)
{
    const softmax_work *s = ctx;
    const size_t row0 = item * s->per_item, n = peak_item_len(s->rows, row0, s->per_item);
    if (s->d->y_type != PEAK_F32 && scratch)
        softmax_rows_in_scratch(s, row0, n, scratch, s->d->k_len);
    else if (s->d->y_type != PEAK_F32)
        softmax_rows_on_stack(s, row0, n);
    else if (s->d->x_type != PEAK_F32)
        softmax_rows_in_y(s, row0, n);
    else
        s->kernel(softmax_y_row(s, row0), softmax_x_row(s, row0), s->d, row0, n, s->stream);
}

/* Rows an item: whole groups, as many as make SOFTMAX_ITEM_FLOATS, one
   group at least and SOFTMAX_ITEM_ROWS at most. */
static size_t softmax_item_rows(const peak_softmax_desc *d, bool stream)
{
    const size_t group = peak_softmax_group_rows(d, stream);
    const size_t most = SOFTMAX_ITEM_ROWS / group;
    return group * peak_clamp_size(SOFTMAX_ITEM_FLOATS / d->k_len / group, 1, most);
}

/* ---- the cost model ------------------------------------------------------ */

/* sum of clamp(i + c, 0, m) over i0 <= i < i1, in closed form: the
   visible keys of a run of rows grow with i by the causal diagonal and the
   window (mask.h), so a run's sum needs no walk over its rows. */
static double sum_clamped(int64_t c, size_t m, size_t i0, size_t i1)
{
    const int64_t lo = (int64_t)i0 + c, hi = (int64_t)i1 + c, top = (int64_t)m;
    double s = 0.0;
    const int64_t full = lo > top ? lo : top; /* values >= m count m */
    if (hi > full)
        s += (double)(hi - full) * (double)m;
    const int64_t a = lo > 1 ? lo : 1, b = hi < top ? hi : top; /* 0 < value < m */
    if (b > a)
        s += ((double)a + (double)(b - 1)) * (double)(b - a) / 2.0;
    return s;
}

/* Visible keys of rows i0 .. i1-1 of batch entry b: peak_mask_keys' range
   is [clamp(i + o - window, 0, cap), clamp(i + o, 0, cap)) with the
   diagonal's offset o and cap the entry's key_len (or k_len); no causal
   mask: the end is cap; no window: the start is 0. */
static double softmax_visible(const peak_softmax_desc *d, size_t b, size_t i0, size_t i1)
{
    const peak_mask *m = &d->mask;
    const size_t cap = m->key_len ? (size_t)m->key_len[b] : d->k_len;
    const int64_t o = peak_mask_row_base(m, 0, d->q_len, d->k_len) + (int64_t)m->q_offset + 1;
    double v = m->causal ? sum_clamped(o, cap, i0, i1) : (double)cap * (double)(i1 - i0);
    if (m->window > 0)
        v -= sum_clamped(o - (int64_t)m->window, cap, i0, i1);
    return v;
}

/* Rows i0 .. i1-1 of one (b, h). */
static double softmax_run_ns(const peak_softmax_desc *d, size_t b, size_t i0, size_t i1)
{
    const bool formed = d->mask.keep || d->mask.bias || peak_logits_shape(&d->logits);
    const double vis_ns = SM_VIS_NS + (formed ? SM_MASK_NS : 0.0) +
                          (peak_f32_is_zero(d->logits.softcap) ? 0.0 : SM_CAP_NS);
    return (double)(i1 - i0) * (SM_ROW_NS + SM_KEY_NS * (double)d->k_len) +
           vis_ns * softmax_visible(d, b, i0, i1);
}

static double softmax_cost(const void *ctx, size_t item)
{
    const softmax_work *s = ctx;
    const peak_softmax_desc *d = s->d;
    const size_t row0 = item * s->per_item;
    const size_t end = row0 + peak_item_len(s->rows, row0, s->per_item);
    double ns = 0.0;
    for (size_t row = row0; row < end;) {
        const size_t bh = row / d->q_len, i0 = row % d->q_len;
        const size_t i1 = end - row < d->q_len - i0 ? i0 + (end - row) : d->q_len;
        ns += softmax_run_ns(d, bh / d->heads, i0, i1);
        row += i1 - i0;
    }
    return ns;
}

/* The whole call: the mask depends on b and i only, so heads times each
   entry's rows. */
static double softmax_total_ns(const peak_softmax_desc *d)
{
    double ns = 0.0;
    for (size_t b = 0; b < d->batch; b++)
        ns += (double)d->heads * softmax_run_ns(d, b, 0, d->q_len);
    return ns;
}

/* d with the strides of rows packed k_len floats apart (the scratch's). */
static peak_softmax_desc softmax_packed(const peak_softmax_desc *d)
{
    peak_softmax_desc p = *d;
    p.x_stride[2] = p.y_stride[2] = (ptrdiff_t)d->k_len;
    p.x_stride[1] = p.y_stride[1] = (ptrdiff_t)(d->q_len * d->k_len);
    p.x_stride[0] = p.y_stride[0] = (ptrdiff_t)(d->heads * d->q_len * d->k_len);
    return p;
}

peak_status peak_schedule_softmax(void *y, const void *x, const peak_softmax_desc *desc,
                                  const peak_threadpool *pool)
{
    /* Rows staged in scratch are in L1: never streamed. */
    const bool stream = peak_softmax_streams(desc) && desc->y_type == PEAK_F32;
    softmax_work s = {.y = y,
                      .x = x,
                      .d = desc,
                      .rows = desc->batch * desc->heads * desc->q_len,
                      .per_item = softmax_item_rows(desc, stream),
                      .stream = stream,
                      .kernel = peak_active_kernels()->softmax,
                      .in_y = *desc,
                      .packed = softmax_packed(desc)};
    for (int k = 0; k < 3; k++)
        s.in_y.x_stride[k] = desc->y_stride[k];
    peak_work w = {.items = peak_items(s.rows, s.per_item),
                   .run = softmax_item,
                   .cost = softmax_cost,
                   .ctx = &s,
                   .total_ns = softmax_total_ns(desc)};
    /* A 16-bit y whose rows outgrow the stack buffer: a row a worker.  Its
       size fits: y's k_len elements do, in bytes (api.c). */
    void *scratch = NULL;
    if (desc->y_type != PEAK_F32 && desc->k_len > SOFTMAX_STAGE_FLOATS) {
        w.slot_bytes = (desc->k_len * sizeof(float) + 63) & ~(size_t)63;
        w.slots = peak_work_tasks(&w, pool);
        if (w.slots > SIZE_MAX / w.slot_bytes ||
            !(scratch = aligned_alloc(64, w.slots * w.slot_bytes)))
            return PEAK_ERR_NO_MEMORY;
        w.scratch = scratch;
    }
    peak_work_run(&w, pool);
    free(scratch);
    return PEAK_OK;
}
