/* schedule-pe.c - peak_pe_table and peak_pe_add as work items: parts of
   the columns (runs of the table driver's column chunks of PEAK_PE_CHUNK
   frequencies, pe-table.h) and runs of positions, or, for peak_pe_add with
   a table, runs of positions and groups of batch entries.  A table
   element's bits depend only on its position and column (pe-table.h), and
   x + PE is one add an element, so no byte depends on the item.

   Why columns: the table driver computes, for each column chunk, the
   sincos of the PEAK_PE_BLOCK offsets once per call, and of a block base
   every PEAK_PE_BLOCK rows.  An item of a few hundred rows would compute
   the offsets again, about the time of 90 rows of output (as separate
   calls of 256 rows, 8192 x 512 took 2.2x as long as one call, though
   part of that was their lost streaming stores).  A column chunk is
   already a pass of its own, so cutting there costs little (below), and
   positions are cut only into long runs. */
#include "convert.h"
#include "items.h"
#include "pe-table.h"
#include "schedule.h"

#include <math.h>

/* Positions a table item (EXACT or TORCH_F32) at most: the offsets' sincos
   is then ~2% of an item (32 per frequency against 4096 rows). */
#define PE_ITEM_POS ((size_t)4096)
/* peak_pe_add on the fly: positions a kernel call of the rows driver takes
   anyway, so items of these many rows compute what one call does. */
#define PE_ADD_FLY_POS ((size_t)PEAK_PE_ROWS_MAX)
/* peak_pe_add with a table: floats of x an item, 64 KiB (~10 us). */
#define PE_ADD_ITEM_FLOATS ((size_t)16384)
/* An item that starts past the first column chunk first computes that
   chunk's frequencies (peak_pe_freqs: 32 pow, ~0.5 us), so an item takes
   as many chunks as make PE_ITEM_NS of the cost model: under 1% then.  A
   table of 8 x 512 in one item per chunk took 8.5 us instead of 5.2. */
#define PE_ITEM_NS 48000.0

/* The cost model, on one core (AVX2, Zen 3): a double sincos 1.5 ns (a
   vector's share), an EXACT element from its sincos tables 0.27 ns, a
   TORCH_F32 element (its own sincos) 1.1 ns, x += PE 0.15 ns an element.
   Measured: 8 x 512 table rows 5.2 us, 32 rows 17.6 us, 1024 rows 141 us,
   TORCH_F32 1024 x 512 0.58 ms, peak_pe_add of 8 x 1024 x 512 from a table
   0.6 ms. */
#define PE_SINCOS_NS 1.5
#define PE_EXACT_NS 0.27
#define PE_TORCH_NS 1.1
#define PE_ADD_NS 0.15

double peak_schedule_pe_rows_ns(size_t n_pos, size_t n_freq, const peak_pe_params *params)
{
    const double elements = 2.0 * (double)n_freq * (double)n_pos;
    if (params->mode == PEAK_PE_TORCH_F32)
        return PE_TORCH_NS * elements;
    const size_t offsets = n_pos < PEAK_PE_BLOCK ? n_pos : PEAK_PE_BLOCK;
    /* one sincos pair per block of positions (whole blocks: integer division) */
    const size_t blocks = n_pos / PEAK_PE_BLOCK;
    const double sincos = (double)(offsets + blocks + 1) * (double)n_freq;
    return PE_SINCOS_NS * sincos + PE_EXACT_NS * elements;
}

/* An item's columns: the frequencies of `chunks` column chunks from
   chunk part * chunks on. */
typedef struct pe_cols {
    size_t f0, f1; /* [f0, f1), f1 possibly past the row's end */
    size_t n;      /* of them in the row (0: only the padding column) */
} pe_cols;

static pe_cols pe_cols_of(size_t part, size_t chunks, size_t n_freq)
{
    pe_cols c = {part * chunks * PEAK_PE_CHUNK, (part + 1) * chunks * PEAK_PE_CHUNK, 0};
    c.n = c.f0 < n_freq ? peak_item_len(n_freq, c.f0, c.f1 - c.f0) : 0;
    return c;
}

/* Column chunks an item takes, given the cost of one chunk's item. */
static size_t pe_chunks_per_item(double chunk_ns, size_t n_freq)
{
    const size_t chunks = peak_items(n_freq, PEAK_PE_CHUNK);
    const double want = chunk_ns > 0.0 ? ceil(PE_ITEM_NS / chunk_ns) : (double)chunks;
    return want >= (double)chunks ? chunks : peak_clamp_size((size_t)want, 1, chunks);
}

/* ---- peak_pe_table ---------------------------------------------------------- */

/* A 16-bit table's rows are computed in float32 into a block on the stack
   and rounded from there (schedule-stage.c) by the tier's rows driver
   (peak_pe_rows_fn), which keeps a column chunk's sincos tables across the
   blocks: an item costs what the float32 table's does plus the rounding.
   The table kernel would take a call per block, each recomputing the
   chunk's frequencies and offset sincos: 4.3x the float32 table's
   instructions in blocks of 16 rows of 512 (doc/perf-notes.md).  The block holds a row of the widest documented
   d_model, 8192, with its padding (32 KiB), or as many rows as fit. */
#define PE_STAGE_FLOATS ((size_t)8192 + 16)
/* Wider rows go a window of this many columns at a time (peak_pe_cols). */
#define PE_WIDE_COLS ((size_t)1024)

/* The block's row stride: a row and a cache line more, so that the rows'
   segments of one column pass spread over the L1 sets instead of sharing
   the few that a power-of-two stride would give them. */
static size_t pe_stage_ld(size_t d_model)
{
    return (d_model + 15) / 16 * 16 + 16;
}

/* Items chunk by chunk, each chunk's runs of positions in order: the
   order of the table driver's own loops. */
typedef struct pe_table_work {
    void *out;
    peak_dtype type;
    size_t n_pos, d_model, pos0, n_freq, runs, chunks;
    const peak_pe_params *params;
    bool stream;
    peak_pe_table_fn kernel;
    peak_pe_rows_fn rows; /* 16-bit tables */
} pe_table_work;

/* The rows driver's sink of a 16-bit item: its rows' finished columns
   rounded from the block into the table (row t of the call is row t of
   `out`). */
typedef struct pe_stage {
    const float *block;
    size_t ld_block;
    void *out;
    peak_dtype type;
    size_t d_model;
} pe_stage;

static void pe_stage_sink(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1)
{
    const pe_stage *g = ctx;
    char *at = (char *)g->out + (t0 * g->d_model + c0) * peak_dtype_bytes(g->type);
    peak_stage_rows_out(at, g->type, (ptrdiff_t)g->d_model, g->block + c0, g->ld_block, t1 - t0,
                        c1 - c0);
}

/* Rows [s, s + n) of a 16-bit table wider than the block: each row's
   columns of the item's frequencies a window at a time, computed by
   peak_pe_cols (the table's bits, without its shared sincos). */
static void pe_table_wide(const pe_table_work *t, size_t s, size_t n, size_t f0, size_t f1)
{
    float window[PE_WIDE_COLS];
    size_t cols[2][2];
    const size_t parts = peak_pe_part_cols(f0, f1, t->d_model, t->params->layout, cols);
    const size_t es = peak_dtype_bytes(t->type);
    for (size_t r = s; r < s + n; r++)
        for (size_t k = 0; k < parts; k++)
            for (size_t c0 = cols[k][0]; c0 < cols[k][1]; c0 += PE_WIDE_COLS) {
                const size_t m = peak_item_len(cols[k][1], c0, PE_WIDE_COLS);
                peak_pe_cols(window, t->pos0 + r, c0, m, t->d_model, t->params);
                peak_stage_rows_out((char *)t->out + (r * t->d_model + c0) * es, t->type, 0,
                                    window, m, 1, m);
            }
}

/* Rows [s, s + n) of a 16-bit table, the columns of frequencies [f0, f1).
   The driver takes the whole run in one call: its only operand is the
   table, whose lines each column pass writes once, so the run need not
   stay in cache between passes (PEAK_PE_ROWS_MAX), and the chunk's offset
   sincos is shared by all of its rows, as in the float32 table. */
static void pe_table_staged(const pe_table_work *t, size_t s, size_t n, size_t f0, size_t f1)
{
    const size_t ld = pe_stage_ld(t->d_model);
    if (ld > PE_STAGE_FLOATS) {
        pe_table_wide(t, s, n, f0, f1);
        return;
    }
    PEAK_PE_ALIGN float block[PE_STAGE_FLOATS];
    pe_stage g = {block, ld, (char *)t->out + s * t->d_model * peak_dtype_bytes(t->type),
                  t->type, t->d_model};
    t->rows(block, PE_STAGE_FLOATS / ld, ld, n, NULL, t->pos0 + s, t->d_model, t->params, f0, f1,
            pe_stage_sink, &g);
}

static void pe_table_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const pe_table_work *t = ctx;
    const size_t s = item % t->runs * PE_ITEM_POS;
    const size_t n = peak_item_len(t->n_pos, s, PE_ITEM_POS);
    const pe_cols c = pe_cols_of(item / t->runs, t->chunks, t->n_freq);
    if (t->type != PEAK_F32) {
        pe_table_staged(t, s, n, c.f0, c.f1);
        return;
    }
    t->kernel((float *)t->out + s * t->d_model, (ptrdiff_t)t->d_model, n, t->d_model,
              t->pos0 + s, t->params, c.f0, c.f1, t->stream);
}

static double pe_table_cost(const void *ctx, size_t item)
{
    const pe_table_work *t = ctx;
    const size_t n = peak_item_len(t->n_pos, item % t->runs * PE_ITEM_POS, PE_ITEM_POS);
    return peak_schedule_pe_rows_ns(n, pe_cols_of(item / t->runs, t->chunks, t->n_freq).n,
                                    t->params);
}

void peak_schedule_pe_table(void *out, peak_dtype out_type, size_t n_pos, size_t d_model,
                            size_t pos0, const peak_pe_params *params,
                            const peak_threadpool *pool)
{
    const peak_kernels *k = peak_active_kernels();
    pe_table_work t = {.out = out,
                       .type = out_type,
                       .n_pos = n_pos,
                       .d_model = d_model,
                       .pos0 = pos0,
                       .n_freq = peak_pe_n_freq(d_model, params->layout),
                       .runs = peak_items(n_pos, PE_ITEM_POS),
                       .params = params,
                       .stream = peak_pe_streams(n_pos, d_model, params),
                       .kernel = k->pe_table,
                       .rows = k->pe_rows};
    const size_t run = n_pos < PE_ITEM_POS ? n_pos : PE_ITEM_POS;
    t.chunks = pe_chunks_per_item(peak_schedule_pe_rows_ns(run, PEAK_PE_CHUNK, params), t.n_freq);
    peak_work w = {.items = t.runs * peak_items(peak_items(t.n_freq, PEAK_PE_CHUNK), t.chunks),
                   .run = pe_table_item,
                   .cost = pe_table_cost,
                   .ctx = &t};
    w.total_ns = peak_work_sum_ns(&w);
    peak_work_run(&w, pool);
}

/* ---- peak_pe_add -------------------------------------------------------------- */

/* Items position run by position run, and within one, its groups of batch
   entries (with a table) or its column chunks (on the fly: each batch
   entry adds the same PE rows, computed once an item for all of them), in
   the order of the kernels' loops. */
typedef struct pe_add_work {
    float *x;
    ptrdiff_t batch_stride, ld_x;
    size_t batch, seq_len, d_model, pos0, n_freq;
    const float *pe;
    const peak_pe_params *params;
    size_t run;    /* positions an item */
    size_t group;  /* batch entries an item (with a table) */
    size_t chunks; /* column chunks an item (on the fly) */
    size_t inner;  /* items a run: batch groups or column parts */
    peak_pe_add_fn kernel;
} pe_add_work;

/* An item's positions [s, s + n), batch entries [b, b + nb) and
   frequencies [f0, f1). */
typedef struct pe_add_part {
    size_t s, n, b, nb, f0, f1;
} pe_add_part;

static pe_add_part pe_add_part_of(const pe_add_work *a, size_t item)
{
    const size_t s = item / a->inner * a->run, k = item % a->inner;
    pe_add_part p = {s, peak_item_len(a->seq_len, s, a->run), 0, a->batch, 0, PEAK_PE_FREQ_END};
    if (a->pe) {
        p.b = k * a->group;
        p.nb = peak_item_len(a->batch, p.b, a->group);
    } else {
        const pe_cols c = pe_cols_of(k, a->chunks, a->n_freq);
        p.f0 = c.f0;
        p.f1 = c.f1;
    }
    return p;
}

static void pe_add_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const pe_add_work *a = ctx;
    const pe_add_part p = pe_add_part_of(a, item);
    float *x = a->x + (ptrdiff_t)p.b * a->batch_stride + (ptrdiff_t)p.s * a->ld_x;
    a->kernel(x, a->batch_stride, a->ld_x, p.nb, p.n, a->d_model, a->pos0 + p.s, a->pe,
              a->params, p.f0, p.f1);
}

/* On the fly: n positions' PE rows in n_freq frequencies' columns, added
   to batch entries. */
static double pe_add_fly_ns(size_t n, size_t n_freq, size_t batch, const peak_pe_params *params)
{
    return peak_schedule_pe_rows_ns(n, n_freq, params) +
           PE_ADD_NS * 2.0 * (double)n_freq * (double)n * (double)batch;
}

static double pe_add_cost(const void *ctx, size_t item)
{
    const pe_add_work *a = ctx;
    const pe_add_part p = pe_add_part_of(a, item);
    if (a->pe)
        return PE_ADD_NS * (double)p.n * (double)p.nb * (double)a->d_model;
    return pe_add_fly_ns(p.n, pe_cols_of(item % a->inner, a->chunks, a->n_freq).n, a->batch,
                         a->params);
}

void peak_schedule_pe_add(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                          size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                          const peak_pe_params *params, const peak_threadpool *pool)
{
    pe_add_work a = {.x = x,
                     .batch_stride = batch_stride,
                     .ld_x = ld_x,
                     .batch = batch,
                     .seq_len = seq_len,
                     .d_model = d_model,
                     .pos0 = pos0,
                     .n_freq = peak_pe_n_freq(d_model, params->layout),
                     .pe = pe,
                     .params = params,
                     .run = PE_ADD_FLY_POS,
                     .group = batch,
                     .kernel = peak_active_kernels()->pe_add};
    if (pe) {
        /* A table's rows cost nothing to share: items of ~PE_ADD_ITEM_FLOATS
           of x, several positions of every entry or one position of a
           group of entries. */
        const size_t entries = PE_ADD_ITEM_FLOATS / d_model;
        a.group = peak_clamp_size(entries, 1, batch);
        a.run = peak_clamp_size(PE_ADD_ITEM_FLOATS / (a.group * d_model), 1, seq_len);
        a.inner = peak_items(batch, a.group);
    } else {
        const size_t run = seq_len < a.run ? seq_len : a.run;
        a.chunks = pe_chunks_per_item(pe_add_fly_ns(run, PEAK_PE_CHUNK, batch, params), a.n_freq);
        a.inner = peak_items(peak_items(a.n_freq, PEAK_PE_CHUNK), a.chunks);
    }
    peak_work w = {.items = peak_items(seq_len, a.run) * a.inner,
                   .run = pe_add_item,
                   .cost = pe_add_cost,
                   .ctx = &a};
    w.total_ns = peak_work_sum_ns(&w);
    peak_work_run(&w, pool);
}
