/*
 * test-embedding.c - peak_pe_add and peak_embed_pe on one tier, bit for
 * bit: each element is one float operation (x + pe; e * scale then + pe), so
 * the expected value is that operation done here.  The PE row of the
 * on-the-fly paths is peak_pe_table's row for the same position and params
 * (peak.h promises the same bits), taken from the scalar tier's table kernel
 * whatever tier is under test, so a SIMD tier's on-the-fly rows are checked
 * against the reference table and never against its own code.
 *
 * The sweeps (sizes with every PE source, row gaps, misalignment) are
 * tests/tester.c's; this file gives the two problems, their oracles and
 * the special cases.
 */
#include "tester.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const peak_pe_params pe_variants[] = {
    {PEAK_PE_INTERLEAVED, PEAK_PE_EXACT, 10000.0}, {PEAK_PE_SPLIT, PEAK_PE_EXACT, 10000.0},
    {PEAK_PE_SPLIT_PAPER, PEAK_PE_EXACT, 500.0},   {PEAK_PE_INTERLEAVED, PEAK_PE_TORCH_F32, 10000.0},
    {PEAK_PE_SPLIT, PEAK_PE_TORCH_F32, 10000.0},
};
#define N_PE_VARIANTS (sizeof pe_variants / sizeof pe_variants[0])

/* case.variant of both problems: where PE comes from.  PE_TABLE: a random
   table; PE_FLY + k: on the fly with pe_variants[k]. */
enum { PE_TABLE = 0, PE_FLY = 1 };

static const peak_pe_params *fly_params(unsigned variant)
{
    return &pe_variants[variant - PE_FLY];
}

/* Row `pos` of the scalar reference table: the ground truth for
   on-the-fly PE. */
static float *pe_row(size_t pos, size_t d, const peak_pe_params *params)
{
    float *row = malloc(d * sizeof *row);
    if (!row)
        abort();
    peak_kernels_for(PEAK_ISA_SCALAR)->pe_table(row, (ptrdiff_t)d, 1, d, pos, params, 0,
                                                PEAK_PE_FREQ_END, false);
    return row;
}

static void free_user(peak_tester_problem *p)
{
    free(p->user);
}

/* ======================================================================= */
/* peak_pe_add                                                              */
/* ======================================================================= */

/* case.rows: seq_len; case.gap: floats after each row of x. */
typedef struct pe_add_opts {
    size_t batch, pos0;
    size_t pe_rows; /* 0: pos0 + seq_len, the last row used */
    int seq_major;  /* x is [S, B, D] instead of [B, S, D] */
} pe_add_opts;

static const pe_add_opts pe_add_defaults = {2, 11, 0, 0};

typedef struct pe_add_problem {
    pe_add_opts o;
    float *x, *pe;
    ptrdiff_t batch_stride, ld;
    size_t row, pe_rows;
} pe_add_problem;

static int pe_add_setup(peak_tester_problem *p)
{
    const peak_tester_case *c = &p->c;
    pe_add_problem *a = calloc(1, sizeof *a);
    if (!a)
        abort();
    p->user = a;
    a->o = c->opts ? *(const pe_add_opts *)c->opts : pe_add_defaults;
    a->row = c->n + c->gap;
    a->batch_stride = (ptrdiff_t)(a->o.seq_major ? a->row : c->rows * a->row);
    a->ld = (ptrdiff_t)(a->o.seq_major ? a->o.batch * a->row : a->row);
    /* x in either layout is a.o.batch * seq rows of a->row floats */
    a->x = peak_tester_input(p, "x", a->o.batch * c->rows, c->n, (ptrdiff_t)a->row, 0);
    peak_tester_fill(p, a->x, -3.0f, 3.0f);
    peak_tester_alias(p, "x + PE", a->x, PEAK_TESTER_EXACT, 0);
    if (c->variant == PE_TABLE) {
        a->pe_rows = a->o.pe_rows ? a->o.pe_rows : a->o.pos0 + c->rows;
        a->pe = peak_tester_input(p, "pe", a->pe_rows, c->n, (ptrdiff_t)c->n, 3);
        peak_tester_fill(p, a->pe, -1.0f, 1.0f);
    }
    return 1;
}

static peak_status pe_add_call(peak_tester_problem *p)
{
    const pe_add_problem *a = p->user;
    return peak_pe_add(a->x, a->batch_stride, a->ld, a->o.batch, p->c.rows, p->c.n, a->o.pos0,
                       a->pe, a->pe_rows, a->pe ? NULL : fly_params(p->c.variant), NULL);
}

/* Row r of x is sequence position r % seq ([B, S, D]) or r / batch. */
static void pe_add_oracle_row(const peak_tester_problem *p, size_t buf, size_t r, double *ref)
{
    (void)buf;
    const pe_add_problem *a = p->user;
    const size_t d = p->c.n, q = a->o.seq_major ? r / a->o.batch : r % p->c.rows;
    const float *x0 = peak_tester_before(p, a->x) + r * a->row;
    float *fly = a->pe ? NULL : pe_row(a->o.pos0 + q, d, fly_params(p->c.variant));
    const float *pe = fly ? fly : peak_tester_before(p, a->pe) + (a->o.pos0 + q) * d;
    for (size_t j = 0; j < d; j++) {
        const float want = x0[j] + pe[j];
        ref[j] = want;
    }
    free(fly);
}

/* Base: 2 sequences of 3 positions from 11; every PE source at every size. */
static const peak_tester_family pe_add = {
    .name = "pe_add",
    .setup = pe_add_setup,
    .call = pe_add_call,
    .oracle_row = pe_add_oracle_row,
    .teardown = free_user,
    .same_bits = 0, /* the oracle is bit-exact already */
    .n_variants = PE_FLY + N_PE_VARIANTS,
    .sizes_every_variant = 1,
    .base = {.rows = 3, .variant = PE_TABLE},
};

static void pe_add_case(size_t batch, size_t seq, size_t d, size_t pos0, size_t gap,
                        size_t misalign, int seq_major, unsigned variant, uint64_t seed)
{
    const pe_add_opts o = {batch, pos0, 0, seq_major};
    peak_tester_case c = pe_add.base;
    c.rows = seq;
    c.n = d;
    c.gap = gap;
    c.misalign = misalign;
    c.variant = variant;
    c.seed = seed;
    c.opts = &o;
    peak_tester_check(&pe_add, &c);
}

START_TEST(pe_add_model_sizes_every_variant)
{
    static const size_t d[] = {512, 768, 1024};
    for (unsigned v = 0; v < N_PE_VARIANTS; v++)
        pe_add_case(2, 5, d[_i], 1000, 0, 0, 0, PE_FLY + v, 300 + v);
    pe_add_case(3, 4, d[_i], 60, 0, 0, 0, PE_TABLE, 310);
}
END_TEST

/* Both layouts ([B, S, D] and [S, B, D]) with row gaps, misaligned. */
START_TEST(pe_add_strided_misaligned_layouts)
{
    static const size_t pads[] = {1, 3, 16, 37};
    for (size_t k = 0; k < 4; k++) {
        const size_t d = 5 + (size_t)_i * 13;
        pe_add_case(3, 4, d, k, pads[k], 1 + k * 3, (int)(k & 1), PE_TABLE, 400 + k);
        pe_add_case(3, 4, d, k, pads[k], 1 + k * 3, (int)(k & 1), PE_FLY + (unsigned)k, 410 + k);
    }
}
END_TEST

/* The largest positions allowed: the last rows before PEAK_MAX_POSITION. */
START_TEST(pe_add_last_positions)
{
    pe_add_case(1, 3, 64, (size_t)(PEAK_MAX_POSITION - 3), 0, 0, 0, PE_FLY + (unsigned)_i,
                500 + (uint64_t)_i);
}
END_TEST

/* More positions than one pass of the rows driver (PEAK_PE_ROWS_MAX), and
   rows wider than its scratch block (they take the scalar kernel). */
START_TEST(pe_add_long_and_wide)
{
    pe_add_case(2, 300, 40, 17, 3, 1, 0, PE_FLY, 520);
    pe_add_case(2, 2, 8195, 5, 0, 2, 1, PE_FLY + (unsigned)_i % N_PE_VARIANTS,
                530 + (uint64_t)_i);
}
END_TEST

/* ---- invalid arguments ---------------------------------------------------- */

typedef struct pa_call {
    float *x;
    ptrdiff_t batch_stride, ld;
    size_t batch, seq, d, pos0;
    const float *pe;
    size_t pe_rows;
    const peak_pe_params *params;
} pa_call;

static void pa_reject(peak_tester_problem *p, const char *what, peak_status want, pa_call c)
{
    peak_tester_snapshot(p);
    const peak_status got = peak_pe_add(c.x, c.batch_stride, c.ld, c.batch, c.seq, c.d, c.pos0,
                                        c.pe, c.pe_rows, c.params, NULL);
    peak_tester_expect_rejected(p, what, got, want);
}

START_TEST(pe_add_invalid_arguments)
{
    const pe_add_opts o = {2, 0, 5, 0};
    peak_tester_case cs = pe_add.base;
    cs.n = 8;
    cs.seed = 600;
    cs.opts = &o;
    peak_tester_problem p;
    peak_tester_setup(&pe_add, &cs, &p);
    const pe_add_problem *a = p.user;
    const pa_call ok = {a->x, a->batch_stride, a->ld, 2, 3, 8, 0, a->pe, 5, NULL};
    const peak_status inval = PEAK_ERR_INVALID_ARG, range = PEAK_ERR_OUT_OF_RANGE;
    pa_call c = ok;
    c.x = NULL;
    pa_reject(&p, "NULL x", inval, c);
    size_t *sizes[3] = {&c.batch, &c.seq, &c.d};
    for (int k = 0; k < 3; k++) {
        c = ok;
        *sizes[k] = 0;
        pa_reject(&p, "zero size", inval, c);
    }
    c = ok;
    c.ld = 7;
    pa_reject(&p, "ld_x < d_model", inval, c);
    c = ok;
    c.batch_stride = 7;
    pa_reject(&p, "batch > 1, batch_stride < d_model", inval, c);
    static const peak_pe_params bad[] = {{(peak_pe_layout)3, PEAK_PE_EXACT, 10000.0},
                                         {PEAK_PE_SPLIT, (peak_pe_mode)2, 10000.0},
                                         {PEAK_PE_SPLIT, PEAK_PE_EXACT, 0.0},
                                         {PEAK_PE_SPLIT, PEAK_PE_EXACT, -2.0},
                                         {PEAK_PE_SPLIT, PEAK_PE_EXACT, NAN},
                                         {PEAK_PE_SPLIT, PEAK_PE_EXACT, INFINITY}};
    for (int k = 0; k < 6; k++) {
        c = ok;
        c.pe = NULL;
        c.params = &bad[k];
        pa_reject(&p, "bad params", inval, c);
    }
    c = ok;
    c.pos0 = 3; /* 3 + 3 > 5 rows */
    pa_reject(&p, "beyond the table", range, c);
    c.pe_rows = 0;
    c.pos0 = 0;
    pa_reject(&p, "empty table", range, c);
    c = ok;
    c.pe = NULL;
    c.pos0 = (size_t)(PEAK_MAX_POSITION - 2);
    pa_reject(&p, "beyond PEAK_MAX_POSITION", range, c);
    c.pos0 = SIZE_MAX;
    pa_reject(&p, "pos0 = SIZE_MAX", range, c);
    peak_tester_free(&pe_add, &p);
}
END_TEST

/* ======================================================================= */
/* peak_embed_pe                                                            */
/* ======================================================================= */

/* case.rows: tokens; case.gap: floats after each table row (the output's
   rows have one more, when nonzero).  Ids are random, 0 and vocab - 1
   forced, repeats likely; scale sqrt(d_model).  A test changes the
   descriptor (seq_len, padding_idx, scale, positions) and the ids between
   peak_tester_setup and peak_tester_run. */
typedef struct embed_opts {
    size_t vocab, pos0;
    size_t pe_rows; /* 0: pos0 + tokens, the last row used */
} embed_opts;

static const embed_opts embed_defaults = {11, 3, 0};

typedef struct embed_problem {
    peak_embed_desc d;
    float *table, *pe, *out;
    int32_t *ids;
    int64_t *positions;
    ptrdiff_t ld_out;
} embed_problem;

static int embed_setup(peak_tester_problem *p)
{
    const peak_tester_case *c = &p->c;
    const embed_opts o = c->opts ? *(const embed_opts *)c->opts : embed_defaults;
    const peak_embed_desc d0 = PEAK_EMBED_DESC_DEFAULT;
    embed_problem *e = calloc(1, sizeof *e);
    int32_t *ids = malloc(c->rows * sizeof *ids);
    if (!e || !ids)
        abort();
    p->user = e;
    e->d = d0;
    e->d.vocab = o.vocab;
    e->d.d_model = c->n;
    e->d.ld_table = (ptrdiff_t)(c->n + c->gap);
    e->d.scale = sqrtf((float)c->n);
    e->d.pos0 = o.pos0;
    e->table = peak_tester_input(p, "table", o.vocab, c->n, e->d.ld_table, 0);
    peak_tester_fill(p, e->table, -1.0f, 1.0f);
    e->d.table = e->table;
    for (size_t t = 0; t < c->rows; t++)
        ids[t] = (int32_t)(peak_test_next(&p->rng) % o.vocab);
    ids[0] = 0;
    ids[c->rows - 1] = (int32_t)(o.vocab - 1);
    e->ids = ids;
    e->ld_out = (ptrdiff_t)(c->n + c->gap + (c->gap ? 1 : 0));
    e->out = peak_tester_output(p, "out", c->rows, c->n, e->ld_out, 5, PEAK_TESTER_EXACT, 0);
    if (c->variant == PE_TABLE) {
        e->d.pe_rows = o.pe_rows ? o.pe_rows : o.pos0 + c->rows;
        e->pe = peak_tester_input(p, "pe", e->d.pe_rows, c->n, (ptrdiff_t)c->n, 3);
        peak_tester_fill(p, e->pe, -1.0f, 1.0f);
        e->d.pe = e->pe;
    } else {
        e->d.pe_params = *fly_params(c->variant);
    }
    return 1;
}

static peak_status embed_call(peak_tester_problem *p)
{
    embed_problem *e = p->user;
    return peak_embed_pe(e->out, e->ld_out, e->ids, p->c.rows, &e->d, NULL);
}

/* peak.h's pos(t), written out; -1 for a fairseq pad token. */
static int64_t expected_position(const embed_problem *e, size_t n_tokens, size_t t)
{
    const peak_embed_desc *d = &e->d;
    if (d->positions)
        return d->positions[t];
    const size_t seq = d->seq_len ? d->seq_len : n_tokens;
    const size_t start = t - t % seq;
    if (d->padding_idx < 0)
        return (int64_t)(d->pos0 + t - start);
    if (e->ids[t] == d->padding_idx)
        return -1;
    int64_t before = 0;
    for (size_t u = start; u < t; u++)
        before += e->ids[u] != d->padding_idx;
    return (int64_t)(d->pos0 + (size_t)d->padding_idx + 1) + before;
}

static void embed_oracle_row(const peak_tester_problem *p, size_t buf, size_t t, double *ref)
{
    (void)buf;
    const embed_problem *e = p->user;
    const size_t d = e->d.d_model;
    const int64_t pos = expected_position(e, p->c.rows, t);
    const float *row = peak_tester_before(p, e->table) + (size_t)e->ids[t] * (size_t)e->d.ld_table;
    float *fly = NULL;
    const float *pe = NULL;
    if (pos >= 0 && e->d.pe)
        pe = peak_tester_before(p, e->pe) + (size_t)pos * d;
    else if (pos >= 0)
        pe = fly = pe_row((size_t)pos, d, &e->d.pe_params);
    for (size_t j = 0; j < d; j++) {
        const float se = row[j] * e->d.scale;
        const float want = pe ? se + pe[j] : se;
        ref[j] = want;
    }
    free(fly);
}

static void embed_teardown(peak_tester_problem *p)
{
    embed_problem *e = p->user;
    free(e->ids);
    free(e->positions);
    free(e);
}

/* Base: 9 tokens of a vocabulary of 11 at positions 3..11; every PE source
   at every size. */
static const peak_tester_family embed = {
    .name = "embed_pe",
    .setup = embed_setup,
    .call = embed_call,
    .oracle_row = embed_oracle_row,
    .teardown = embed_teardown,
    .same_bits = 0, /* the oracle is bit-exact already */
    .n_variants = PE_FLY + N_PE_VARIANTS,
    .sizes_every_variant = 1,
    .base = {.rows = 9, .variant = PE_TABLE},
};

/* Sets up tokens x d with the given table gap, misalignment and options. */
static embed_problem *embed_begin(peak_tester_problem *p, const embed_opts *o, size_t tokens,
                                  size_t d, size_t gap, size_t misalign, unsigned variant,
                                  uint64_t seed)
{
    peak_tester_case c = embed.base;
    c.rows = tokens;
    c.n = d;
    c.gap = gap;
    c.misalign = misalign;
    c.variant = variant;
    c.seed = seed;
    c.opts = o;
    peak_tester_setup(&embed, &c, p);
    return p->user;
}

static void embed_finish(peak_tester_problem *p)
{
    peak_tester_run(&embed, p);
    peak_tester_free(&embed, p);
}

START_TEST(embed_model_sizes_every_variant)
{
    static const size_t d[] = {512, 768, 1024};
    const embed_opts o = {100, 0, 7};
    peak_tester_problem p;
    for (unsigned v = 0; v < N_PE_VARIANTS; v++) {
        embed_begin(&p, &o, 7, d[_i], 0, 0, PE_FLY + v, 200 + v)->d.seq_len = 3;
        embed_finish(&p);
    }
    embed_begin(&p, &o, 7, d[_i], 4, 2, PE_TABLE, 210);
    embed_finish(&p);
}
END_TEST

/* Explicit positions, including the table's last row / the largest
   on-the-fly position. */
START_TEST(embed_explicit_positions)
{
    const embed_opts o = {30, 0, 50};
    peak_tester_problem p;
    embed_problem *e = embed_begin(&p, &o, 16, 24, 1, 0, _i ? PE_FLY : PE_TABLE, 300 + (uint64_t)_i);
    const uint64_t limit = _i ? PEAK_MAX_POSITION : 50;
    e->positions = malloc(16 * sizeof *e->positions);
    for (size_t t = 0; t < 16; t++)
        e->positions[t] = (int64_t)(peak_test_next(&p.rng) % limit);
    e->positions[3] = (int64_t)(limit - 1);
    e->positions[4] = 0;
    e->positions[5] = e->positions[3]; /* repeated */
    e->d.positions = e->positions;
    embed_finish(&p);
}
END_TEST

/* pos0 + t % seq_len over several sequences, table and on the fly. */
START_TEST(embed_sequences)
{
    static const size_t seq[] = {1, 4, 10, 0};
    const embed_opts o = {17, 5, 15};
    for (unsigned fly = 0; fly < 2; fly++) {
        peak_tester_problem p;
        embed_begin(&p, &o, 10, 9, 2, 1, fly ? PE_FLY : PE_TABLE, 400 + (uint64_t)_i)->d.seq_len =
            seq[_i];
        embed_finish(&p);
    }
}
END_TEST

/* fairseq: pad tokens get E[pad] * scale and no PE; the others count from
   padding_idx + 1 over the non-pad tokens of their sequence. */
START_TEST(embed_fairseq_padding)
{
    static const int32_t pad_idx[] = {1, 0, 6};
    const embed_opts o = {7, 0, 4 + (size_t)pad_idx[_i] + 1};
    for (unsigned fly = 0; fly < 2; fly++) {
        peak_tester_problem p;
        embed_problem *e =
            embed_begin(&p, &o, 12, 16, 1, 0, fly ? PE_FLY : PE_TABLE, 500 + (uint64_t)_i);
        e->d.padding_idx = pad_idx[_i];
        e->d.seq_len = 4;
        for (size_t t = 0; t < 12; t += 3)
            e->ids[t] = pad_idx[_i]; /* leading, inner and trailing pads */
        e->ids[11] = pad_idx[_i];
        embed_finish(&p);
    }
}
END_TEST

START_TEST(embed_scales)
{
    static const float scale[] = {1.0f, 0.0f, -2.5f, 3e-5f};
    const embed_opts o = {13, 0, 8};
    peak_tester_problem p;
    embed_begin(&p, &o, 8, 33, 0, 3, PE_TABLE, 600 + (uint64_t)_i)->d.scale = scale[_i];
    embed_finish(&p);
}
END_TEST

/* Long calls: the embedding scheduler (schedule/schedule-embedding.c) hands
   the kernels 256 tokens at a time, and a chunk of 256 x 512 floats is
   written with streaming stores; the output is 1 float off a 64-byte
   boundary with an odd row stride, so every row has an unaligned head and
   tail.  Positions are explicit and random (repeats, blocks in any order),
   or numbered per sequence (seq_len 290, from pos0 410), as
   PositionalEncoding.forward numbers the tokens of each sequence. */
START_TEST(embed_long_streaming_calls)
{
    const embed_opts o = {50, 0, 700};
    const unsigned variant = _i & 2 ? PE_TABLE : PE_FLY + (unsigned)_i % N_PE_VARIANTS;
    peak_tester_problem p;
    embed_problem *e = embed_begin(&p, &o, 600, 512, 3, 1, variant, 800 + (uint64_t)_i);
    e->ids[7] = e->ids[8] = e->ids[300] = 17; /* repeated ids */
    if (_i & 1) {
        e->positions = malloc(600 * sizeof *e->positions);
        for (size_t t = 0; t < 600; t++)
            e->positions[t] = (int64_t)(peak_test_next(&p.rng) % 700);
        e->positions[9] = e->positions[10] = 699;
        e->d.positions = e->positions;
    } else {
        e->d.seq_len = 290;
        e->d.pos0 = 410;
    }
    embed_finish(&p);
}
END_TEST

/* Rows wider than the on-the-fly scratch block (beyond the documented
   d_model range) take a row-at-a-time path. */
START_TEST(embed_wide_rows)
{
    const embed_opts o = {3, 31, 0};
    peak_tester_problem p;
    embed_begin(&p, &o, 3, 8197, 1, 2, PE_FLY + (unsigned)_i, 850 + (uint64_t)_i);
    embed_finish(&p);
}
END_TEST

/* KV-cache decoding: a one-token call at position p writes exactly row p of
   the one-shot call, for every p, through both PE sources, and with
   fairseq numbering (pos0 = the non-pad tokens already decoded). */
START_TEST(embed_kv_cache_decode)
{
    static const size_t dims[] = {512, 37, 768, 64};
    const embed_opts o = {40, 0, 110};
    const unsigned fly = PE_FLY + (unsigned)_i % N_PE_VARIANTS;
    peak_tester_problem p;
    embed_problem *e = embed_begin(&p, &o, 70, dims[_i % 4], (size_t)_i, 0,
                                   _i & 1 ? PE_TABLE : fly, 900 + (uint64_t)_i);
    e->d.pe_params = *fly_params(fly);
    if (_i >= 4) {
        e->d.padding_idx = 2;
        for (size_t t = 0; t < 70; t += 5)
            e->ids[t] = 2;
    } else {
        e->d.pos0 = 25;
    }
    const size_t n = 70, d = e->d.d_model;
    ck_assert_int_eq(peak_embed_pe(e->out, e->ld_out, e->ids, n, &e->d, NULL), PEAK_OK);
    float *one = peak_test_alloc(d, 3);
    size_t non_pad = 0;
    for (size_t t = 0; t < n; t++) {
        peak_embed_desc step = e->d;
        step.pos0 = e->d.padding_idx >= 0 ? non_pad : e->d.pos0 + t;
        ck_assert_int_eq(peak_embed_pe(one, (ptrdiff_t)d, &e->ids[t], 1, &step, NULL), PEAK_OK);
        CHECK(peak_test_bytes_equal(one, e->out + t * (size_t)e->ld_out, d * sizeof(float)),
              "%s D%zu: decode step %zu differs from the one-shot row",
              peak_isa_name(peak_test_isa), d, t);
        non_pad += e->ids[t] != e->d.padding_idx;
    }
    peak_test_free(one);
    peak_tester_free(&embed, &p);
}
END_TEST

/* ---- invalid arguments ---------------------------------------------------- */

/* The call must fail and change no byte of any buffer. */
static void embed_reject(peak_tester_problem *p, const char *what, peak_status want, float *out,
                         ptrdiff_t ld_out, const int32_t *ids, size_t n, const peak_embed_desc *d)
{
    peak_tester_snapshot(p);
    const peak_status got = peak_embed_pe(out, ld_out, ids, n, d, NULL);
    peak_tester_expect_rejected(p, what, got, want);
}

static void embed_reject_desc(peak_tester_problem *p, const char *what, peak_status want,
                              const peak_embed_desc *d)
{
    const embed_problem *e = p->user;
    embed_reject(p, what, want, e->out, e->ld_out, e->ids, p->c.rows, d);
}

START_TEST(embed_invalid_arguments)
{
    const embed_opts o = {10, 0, 6};
    peak_tester_problem p;
    embed_problem *e = embed_begin(&p, &o, 6, 8, 0, 0, PE_TABLE, 700);
    const peak_status inval = PEAK_ERR_INVALID_ARG, range = PEAK_ERR_OUT_OF_RANGE;
    embed_reject(&p, "NULL out", inval, NULL, e->ld_out, e->ids, 6, &e->d);
    embed_reject(&p, "NULL ids", inval, e->out, e->ld_out, NULL, 6, &e->d);
    embed_reject(&p, "NULL desc", inval, e->out, e->ld_out, e->ids, 6, NULL);
    embed_reject(&p, "zero tokens", inval, e->out, e->ld_out, e->ids, 0, &e->d);
    embed_reject(&p, "ld_out < d_model", inval, e->out, 7, e->ids, 6, &e->d);
    peak_embed_desc d = e->d;
    d.table = NULL;
    embed_reject_desc(&p, "NULL table", inval, &d);
    d = e->d;
    d.vocab = 0;
    embed_reject_desc(&p, "zero vocab", inval, &d);
    d = e->d;
    d.d_model = 0;
    embed_reject_desc(&p, "zero d_model", inval, &d);
    d = e->d;
    d.ld_table = 7;
    embed_reject_desc(&p, "ld_table < d_model", inval, &d);
    d = e->d;
    d.padding_idx = -2;
    embed_reject_desc(&p, "padding_idx < -1", inval, &d);
    d.padding_idx = 10;
    embed_reject_desc(&p, "padding_idx >= vocab", inval, &d);
    int64_t pos[6] = {0, 1, 2, 3, 4, 5};
    d = e->d;
    d.padding_idx = 1;
    d.positions = pos;
    embed_reject_desc(&p, "padding_idx with positions", inval, &d);
    d = e->d;
    d.table = e->out;
    embed_reject_desc(&p, "out == table", inval, &d);
    d = e->d;
    d.pe = e->out;
    embed_reject_desc(&p, "out == pe", inval, &d);
    d = e->d;
    d.pe = NULL;
    d.pe_params.base = 0.0;
    embed_reject_desc(&p, "bad pe_params", inval, &d);

    e->ids[2] = -1;
    embed_reject_desc(&p, "id -1", range, &e->d);
    e->ids[2] = 10;
    embed_reject_desc(&p, "id == vocab", range, &e->d);
    e->ids[2] = 3;
    d = e->d;
    d.positions = pos;
    pos[5] = 6;
    embed_reject_desc(&p, "position == pe_rows", range, &d);
    pos[5] = -1;
    embed_reject_desc(&p, "position -1 without padding_idx", range, &d);
    d.pe = NULL;
    pos[5] = (int64_t)PEAK_MAX_POSITION;
    embed_reject_desc(&p, "position == PEAK_MAX_POSITION", range, &d);
    d = e->d;
    d.pos0 = 1; /* tokens 0..5 at rows 1..6 of a 6-row table */
    embed_reject_desc(&p, "pos0 + n beyond the table", range, &d);
    d.pos0 = (size_t)PEAK_MAX_POSITION;
    embed_reject_desc(&p, "pos0 == PEAK_MAX_POSITION, table", range, &d);
    d.pe = NULL;
    embed_reject_desc(&p, "pos0 == PEAK_MAX_POSITION, on the fly", range, &d);
    peak_tester_free(&embed, &p);
}
END_TEST

/* A call of pad tokens only uses no position: any pos0 below
   PEAK_MAX_POSITION is valid, with a table as on the fly (the reverse was a
   review finding: the table path compared pos0 with pe_rows). */
START_TEST(embed_pads_only)
{
    const embed_opts o = {7, 0, 4};
    peak_tester_problem p;
    embed_problem *e = embed_begin(&p, &o, 5, 16, 1, 0, _i & 1 ? PE_TABLE : PE_FLY,
                                   550 + (uint64_t)_i);
    e->d.padding_idx = 3;
    for (size_t t = 0; t < 5; t++)
        e->ids[t] = 3;
    e->d.seq_len = 2;
    e->d.pos0 = _i & 2 ? (size_t)(PEAK_MAX_POSITION - 1) : 100;
    peak_tester_run(&embed, &p);
    e->d.pos0 = (size_t)PEAK_MAX_POSITION;
    embed_reject_desc(&p, "pads only, pos0 == PEAK_MAX_POSITION", PEAK_ERR_OUT_OF_RANGE, &e->d);
    peak_tester_free(&embed, &p);
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("embedding");
    TCase *tc = tcase_create(peak_isa_name(isa));
    peak_tester_add_sweeps(tc, &pe_add);
    tcase_add_loop_test(tc, pe_add_model_sizes_every_variant, 0, 3);
    tcase_add_loop_test(tc, pe_add_strided_misaligned_layouts, 0, 5);
    tcase_add_loop_test(tc, pe_add_last_positions, 0, (int)N_PE_VARIANTS);
    tcase_add_loop_test(tc, pe_add_long_and_wide, 0, 2);
    tcase_add_test(tc, pe_add_invalid_arguments);
    peak_tester_add_sweeps(tc, &embed);
    tcase_add_loop_test(tc, embed_model_sizes_every_variant, 0, 3);
    tcase_add_loop_test(tc, embed_explicit_positions, 0, 2);
    tcase_add_loop_test(tc, embed_sequences, 0, 4);
    tcase_add_loop_test(tc, embed_fairseq_padding, 0, 3);
    tcase_add_loop_test(tc, embed_scales, 0, 4);
    tcase_add_loop_test(tc, embed_long_streaming_calls, 0, 4);
    tcase_add_loop_test(tc, embed_wide_rows, 0, (int)N_PE_VARIANTS);
    tcase_add_loop_test(tc, embed_kv_cache_decode, 0, 8);
    tcase_add_test(tc, embed_invalid_arguments);
    tcase_add_loop_test(tc, embed_pads_only, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
