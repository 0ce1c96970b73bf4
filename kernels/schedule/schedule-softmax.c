/* schedule-softmax.c - peak_softmax as work items: runs of rows in memory
   order of [b, h, i], each one kernel call.  Whether the stores stream is
   decided here for the whole call (peak_softmax_streams), and an item is a
   whole number of the kernels' row groups (softmax.h). */
#include "items.h"
#include "mask.h"
#include "schedule.h"
#include "softmax.h"

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
    float *y;
    const float *x;
    const peak_softmax_desc *d;
    size_t rows, per_item;
    bool stream;
    peak_softmax_fn kernel;
} softmax_work;

static void softmax_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const softmax_work *s = ctx;
    const size_t row0 = item * s->per_item;
    s->kernel(s->y, s->x, s->d, row0, peak_item_len(s->rows, row0, s->per_item), s->stream);
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

void peak_schedule_softmax(float *y, const float *x, const peak_softmax_desc *desc,
                           const peak_threadpool *pool)
{
    const bool stream = peak_softmax_streams(desc);
    softmax_work s = {.y = y,
                      .x = x,
                      .d = desc,
                      .rows = desc->batch * desc->heads * desc->q_len,
                      .per_item = softmax_item_rows(desc, stream),
                      .stream = stream,
                      .kernel = peak_active_kernels()->softmax};
    const peak_work w = {.items = peak_items(s.rows, s.per_item),
                         .run = softmax_item,
                         .cost = softmax_cost,
                         .ctx = &s,
                         .total_ns = softmax_total_ns(desc)};
    peak_work_run(&w, pool);
}
