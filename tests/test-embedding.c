/*
 * test-embedding.c - peak_pe_add and peak_embed_pe on one tier, bit for
 * bit: each element is one float operation (x + pe; e * scale then + pe), so
 * the expected value is that operation done here.  The PE row of the
 * on-the-fly paths is peak_pe_table's row for the same position and params
 * (peak.h promises the same bits), taken from the scalar tier's table kernel
 * whatever tier is under test, so a SIMD tier's on-the-fly rows are checked
 * against the reference table and never against its own code.
 *
 * Output gaps hold the canary and must keep it.  Buffers are exact-size:
 * under AddressSanitizer a read past a row's extent fails the test.
 */
#include "test-util.h"

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

/* Sizes 1..70 run as 7 Check tests of 10 sizes each: a fork per size
   costs more than the size itself under AddressSanitizer. */
#define SIZE_GROUP 10
#define SIZE_GROUPS 7

static int same_bits(float a, float b)
{
    return peak_test_bytes_equal(&a, &b, sizeof a);
}

/* Row `pos` of the scalar reference table: the ground truth for
   on-the-fly PE. */
static float *pe_row(size_t pos, size_t d, const peak_pe_params *params)
{
    float *row = malloc(d * sizeof *row);
    peak_kernels_for(PEAK_ISA_SCALAR)->pe_table(row, (ptrdiff_t)d, 1, d, pos, params);
    return row;
}

/* ======================================================================= */
/* peak_pe_add                                                              */
/* ======================================================================= */

typedef struct pa_shape {
    size_t batch, seq, d, pos0;
    size_t pad;      /* floats of gap after each row */
    size_t misalign; /* floats off a 64-byte boundary */
    int seq_major;   /* [S, B, D] instead of [B, S, D] */
} pa_shape;

typedef struct pa_problem {
    pa_shape s;
    ptrdiff_t batch_stride, ld;
    size_t n;
    float *x, *x0;
} pa_problem;

static void pa_init(pa_problem *p, const pa_shape *s, uint64_t seed)
{
    uint64_t rng = seed;
    const size_t row = s->d + s->pad;
    p->s = *s;
    p->batch_stride = (ptrdiff_t)(s->seq_major ? row : s->seq * row);
    p->ld = (ptrdiff_t)(s->seq_major ? s->batch * row : row);
    p->n = (s->batch - 1) * (size_t)p->batch_stride + (s->seq - 1) * (size_t)p->ld + s->d;
    p->x = peak_test_alloc(p->n, s->misalign);
    for (size_t b = 0; b < s->batch; b++)
        for (size_t q = 0; q < s->seq; q++)
            peak_test_fill_uniform(p->x + b * (size_t)p->batch_stride + q * (size_t)p->ld, s->d,
                                   &rng, -3.0f, 3.0f);
    p->x0 = malloc(p->n * sizeof *p->x0);
    memcpy(p->x0, p->x, p->n * sizeof *p->x0);
}

static void pa_free(pa_problem *p)
{
    peak_test_free(p->x);
    free(p->x0);
}

/* x against x0 + PE row pos0 + s, where get_row(s) yields that row. */
static void pa_check(const pa_problem *p, const float *const *rows)
{
    unsigned char *covered = calloc(p->n, 1);
    for (size_t b = 0; b < p->s.batch; b++)
        for (size_t q = 0; q < p->s.seq; q++) {
            const size_t base = b * (size_t)p->batch_stride + q * (size_t)p->ld;
            for (size_t j = 0; j < p->s.d; j++) {
                const float want = p->x0[base + j] + rows[q][j];
                CHECK(same_bits(p->x[base + j], want),
                              "%s B%zu S%zu D%zu pos0 %zu at [%zu,%zu,%zu]: %.9g, want %.9g",
                              peak_isa_name(peak_test_isa), p->s.batch, p->s.seq, p->s.d,
                              p->s.pos0, b, q, j, (double)p->x[base + j], (double)want);
                covered[base + j] = 1;
            }
        }
    for (size_t e = 0; e < p->n; e++)
        CHECK(covered[e] || peak_test_is_canary(p->x[e]), "gap float %zu written", e);
    free(covered);
}

/* x += table rows pos0 .. pos0+seq-1 of a random [pe_rows, d] table. */
static void pa_table_case(const pa_shape *s, size_t pe_rows, uint64_t seed)
{
    pa_problem p;
    pa_init(&p, s, seed);
    uint64_t rng = seed * 7 + 1;
    float *pe = peak_test_alloc(pe_rows * s->d, 0);
    peak_test_fill_uniform(pe, pe_rows * s->d, &rng, -1.0f, 1.0f);
    ck_assert_int_eq(peak_pe_add(p.x, p.batch_stride, p.ld, s->batch, s->seq, s->d, s->pos0, pe,
                                 pe_rows, NULL),
                     PEAK_OK);
    const float **rows = malloc(s->seq * sizeof *rows);
    for (size_t q = 0; q < s->seq; q++)
        rows[q] = pe + (s->pos0 + q) * s->d;
    pa_check(&p, rows);
    free(rows);
    peak_test_free(pe);
    pa_free(&p);
}

/* x += PE computed on the fly, against peak_pe_table's rows. */
static void pa_fly_case(const pa_shape *s, const peak_pe_params *params, uint64_t seed)
{
    pa_problem p;
    pa_init(&p, s, seed);
    ck_assert_int_eq(peak_pe_add(p.x, p.batch_stride, p.ld, s->batch, s->seq, s->d, s->pos0, NULL,
                                 0, params),
                     PEAK_OK);
    float **rows = malloc(s->seq * sizeof *rows);
    for (size_t q = 0; q < s->seq; q++)
        rows[q] = pe_row(s->pos0 + q, s->d, params);
    pa_check(&p, (const float *const *)rows);
    for (size_t q = 0; q < s->seq; q++)
        free(rows[q]);
    free(rows);
    pa_free(&p);
}

START_TEST(pe_add_table_sizes_1_to_70)
{
    for (size_t n = 1 + (size_t)_i * SIZE_GROUP; n <= ((size_t)_i + 1) * SIZE_GROUP; n++) {
        pa_shape s = {2, 3, n, 4, 0, 0, 0};
        pa_table_case(&s, 7, 100 + n); /* pos0 + seq == pe_rows: the last row */
    }
}
END_TEST

START_TEST(pe_add_on_the_fly_sizes_1_to_70)
{
    for (size_t n = 1 + (size_t)_i * SIZE_GROUP; n <= ((size_t)_i + 1) * SIZE_GROUP; n++) {
        pa_shape s = {2, 3, n, 11, 0, 0, 0};
        pa_fly_case(&s, &pe_variants[n % N_PE_VARIANTS], 200 + n);
    }
}
END_TEST

START_TEST(pe_add_model_sizes_every_variant)
{
    static const size_t d[] = {512, 768, 1024};
    for (size_t v = 0; v < N_PE_VARIANTS; v++) {
        pa_shape s = {2, 5, d[_i], 1000, 0, 0, 0};
        pa_fly_case(&s, &pe_variants[v], 300 + v);
    }
    pa_shape s = {3, 4, d[_i], 60, 0, 0, 0};
    pa_table_case(&s, 64, 310);
}
END_TEST

START_TEST(pe_add_strided_misaligned_layouts)
{
    static const size_t pads[] = {1, 3, 16, 37};
    for (size_t k = 0; k < 4; k++) {
        pa_shape s = {3, 4, 5 + (size_t)_i * 13, k, pads[k], 1 + k * 3, (int)(k & 1)};
        pa_table_case(&s, 9, 400 + k);
        pa_fly_case(&s, &pe_variants[k], 410 + k);
    }
}
END_TEST

/* The largest positions allowed: the last rows before PEAK_MAX_POSITION. */
START_TEST(pe_add_last_positions)
{
    pa_shape s = {1, 3, 64, (size_t)(PEAK_MAX_POSITION - 3), 0, 0, 0};
    pa_fly_case(&s, &pe_variants[(size_t)_i], 500 + (uint64_t)_i);
}
END_TEST

/* More positions than one pass of the rows driver (PEAK_PE_ROWS_MAX), and
   rows wider than its scratch block (they take the scalar kernel). */
START_TEST(pe_add_long_and_wide)
{
    pa_shape s = {2, 300, 40, 17, 3, 1, 0};
    pa_fly_case(&s, &pe_variants[0], 520);
    pa_shape wide = {2, 2, 8195, 5, 0, 2, 1};
    pa_fly_case(&wide, &pe_variants[(size_t)_i % N_PE_VARIANTS], 530 + (uint64_t)_i);
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

static void pa_reject(const pa_problem *p, const char *what, peak_status want, pa_call c)
{
    peak_status got = peak_pe_add(c.x, c.batch_stride, c.ld, c.batch, c.seq, c.d, c.pos0, c.pe,
                                  c.pe_rows, c.params);
    CHECK(got == want, "%s: pe_add %s: status %d, want %d", peak_isa_name(peak_test_isa),
                  what, (int)got, (int)want);
    CHECK(peak_test_bytes_equal(p->x, p->x0, p->n * sizeof(float)), "%s: x changed",
                  what);
}

START_TEST(pe_add_invalid_arguments)
{
    pa_shape s = {2, 3, 8, 0, 0, 0, 0};
    pa_problem p;
    pa_init(&p, &s, 600);
    float *pe = peak_test_alloc(5 * 8, 0);
    peak_test_fill_canary(pe, 5 * 8);
    const pa_call ok = {p.x, p.batch_stride, p.ld, 2, 3, 8, 0, pe, 5, NULL};
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
    peak_test_free(pe);
    pa_free(&p);
}
END_TEST

/* ======================================================================= */
/* peak_embed_pe                                                            */
/* ======================================================================= */

typedef struct embedding_problem {
    peak_embed_desc d;
    float *table, *pe, *out;
    int32_t *ids;
    int64_t *positions;
    size_t n_tokens, n_out;
    ptrdiff_t ld_out;
    uint64_t rng;
} embedding_problem;

/* vocab x d table with row gap `pad`, n random ids (0 and vocab-1 forced,
   repeats likely), output with the same gap. */
static void embedding_init(embedding_problem *p, size_t vocab, size_t d, size_t n, size_t pad,
                           size_t misalign, uint64_t seed)
{
    peak_embed_desc d0 = PEAK_EMBED_DESC_DEFAULT;
    memset(p, 0, sizeof *p);
    p->rng = seed;
    p->d = d0;
    p->d.vocab = vocab;
    p->d.d_model = d;
    p->d.ld_table = (ptrdiff_t)(d + pad);
    p->d.scale = sqrtf((float)d);
    const size_t nt = (vocab - 1) * (d + pad) + d;
    p->table = peak_test_alloc(nt, misalign);
    peak_test_fill_uniform(p->table, nt, &p->rng, -1.0f, 1.0f);
    p->d.table = p->table;
    p->n_tokens = n;
    p->ids = malloc(n * sizeof *p->ids);
    for (size_t t = 0; t < n; t++)
        p->ids[t] = (int32_t)(peak_test_next(&p->rng) % vocab);
    p->ids[0] = 0;
    p->ids[n - 1] = (int32_t)(vocab - 1);
    p->ld_out = (ptrdiff_t)(d + pad + (pad ? 1 : 0));
    p->n_out = (n - 1) * (size_t)p->ld_out + d;
    p->out = peak_test_alloc(p->n_out, (misalign + 5) % 16);
}

static void embedding_add_table(embedding_problem *p, size_t pe_rows)
{
    p->pe = peak_test_alloc(pe_rows * p->d.d_model, 3);
    peak_test_fill_uniform(p->pe, pe_rows * p->d.d_model, &p->rng, -1.0f, 1.0f);
    p->d.pe = p->pe;
    p->d.pe_rows = pe_rows;
}

static void embedding_free(embedding_problem *p)
{
    peak_test_free(p->table);
    peak_test_free(p->pe);
    peak_test_free(p->out);
    free(p->ids);
    free(p->positions);
}

/* peak.h's pos(t), written out; -1 for a fairseq pad token. */
static int64_t expected_position(const embedding_problem *p, size_t t)
{
    const peak_embed_desc *d = &p->d;
    if (d->positions)
        return d->positions[t];
    const size_t seq = d->seq_len ? d->seq_len : p->n_tokens;
    const size_t start = t - t % seq;
    if (d->padding_idx < 0)
        return (int64_t)(d->pos0 + t - start);
    if (p->ids[t] == d->padding_idx)
        return -1;
    int64_t before = 0;
    for (size_t u = start; u < t; u++)
        before += p->ids[u] != d->padding_idx;
    return (int64_t)(d->pos0 + (size_t)d->padding_idx + 1) + before;
}

static float expected_value(const embedding_problem *p, size_t t, size_t j, const float *pe_row_t)
{
    const float *e = p->table + (size_t)p->ids[t] * (size_t)p->d.ld_table;
    const float se = e[j] * p->d.scale;
    if (!pe_row_t)
        return se;
    return se + pe_row_t[j];
}

static void embedding_check_token(const embedding_problem *p, size_t t, unsigned char *covered)
{
    const int64_t pos = expected_position(p, t);
    float *fly = NULL;
    const float *row = NULL;
    if (pos >= 0 && p->d.pe)
        row = p->d.pe + (size_t)pos * p->d.d_model;
    else if (pos >= 0)
        row = fly = pe_row((size_t)pos, p->d.d_model, &p->d.pe_params);
    const size_t base = t * (size_t)p->ld_out;
    for (size_t j = 0; j < p->d.d_model; j++) {
        const float want = expected_value(p, t, j, row);
        CHECK(same_bits(p->out[base + j], want),
                      "%s vocab %zu D%zu token %zu (id %d, pos %lld) col %zu: %.9g, want %.9g",
                      peak_isa_name(peak_test_isa), p->d.vocab, p->d.d_model, t, p->ids[t],
                      (long long)pos, j, (double)p->out[base + j], (double)want);
        covered[base + j] = 1;
    }
    free(fly);
}

static void embedding_run(embedding_problem *p)
{
    ck_assert_int_eq(peak_embed_pe(p->out, p->ld_out, p->ids, p->n_tokens, &p->d), PEAK_OK);
    unsigned char *covered = calloc(p->n_out, 1);
    for (size_t t = 0; t < p->n_tokens; t++)
        embedding_check_token(p, t, covered);
    for (size_t e = 0; e < p->n_out; e++)
        CHECK(covered[e] || peak_test_is_canary(p->out[e]), "gap float %zu written", e);
    free(covered);
}

static void embed_size(size_t d)
{
    embedding_problem p;
    embedding_init(&p, 11, d, 9, d % 3, d % 5, 100 + d);
    embedding_add_table(&p, 12);
    p.d.pos0 = 3; /* tokens 0..8 at rows 3..11: the last row included */
    embedding_run(&p);
    embedding_free(&p);
    embedding_init(&p, 11, d, 9, 0, 1, 150 + d);
    p.d.pe_params = pe_variants[d % N_PE_VARIANTS];
    p.d.pos0 = 40;
    embedding_run(&p);
    embedding_free(&p);
}

START_TEST(embed_sizes_1_to_70)
{
    for (size_t n = 1 + (size_t)_i * SIZE_GROUP; n <= ((size_t)_i + 1) * SIZE_GROUP; n++)
        embed_size(n);
}
END_TEST

START_TEST(embed_model_sizes_every_variant)
{
    static const size_t d[] = {512, 768, 1024};
    for (size_t v = 0; v < N_PE_VARIANTS; v++) {
        embedding_problem p;
        embedding_init(&p, 100, d[_i], 7, 0, 0, 200 + v);
        p.d.pe_params = pe_variants[v];
        p.d.seq_len = 3;
        embedding_run(&p);
        embedding_free(&p);
    }
    embedding_problem p;
    embedding_init(&p, 100, d[_i], 7, 4, 2, 210);
    embedding_add_table(&p, 7);
    embedding_run(&p);
    embedding_free(&p);
}
END_TEST

/* Explicit positions, including the table's last row / the largest
   on-the-fly position. */
START_TEST(embed_explicit_positions)
{
    embedding_problem p;
    embedding_init(&p, 30, 24, 16, 1, 0, 300 + (uint64_t)_i);
    const uint64_t limit = _i ? PEAK_MAX_POSITION : 50;
    if (!_i)
        embedding_add_table(&p, 50);
    p.positions = malloc(16 * sizeof *p.positions);
    for (size_t t = 0; t < 16; t++)
        p.positions[t] = (int64_t)(peak_test_next(&p.rng) % limit);
    p.positions[3] = (int64_t)(limit - 1);
    p.positions[4] = 0;
    p.positions[5] = p.positions[3]; /* repeated */
    p.d.positions = p.positions;
    embedding_run(&p);
    embedding_free(&p);
}
END_TEST

/* pos0 + t % seq_len over several sequences, table and on the fly. */
START_TEST(embed_sequences)
{
    static const size_t seq[] = {1, 4, 10, 0};
    for (int fly = 0; fly < 2; fly++) {
        embedding_problem p;
        embedding_init(&p, 17, 9, 10, 2, 1, 400 + (uint64_t)_i);
        p.d.seq_len = seq[_i];
        p.d.pos0 = 5;
        if (!fly)
            embedding_add_table(&p, 15);
        embedding_run(&p);
        embedding_free(&p);
    }
}
END_TEST

/* fairseq: pad tokens get E[pad] * scale and no PE; the others count from
   padding_idx + 1 over the non-pad tokens of their sequence. */
START_TEST(embed_fairseq_padding)
{
    static const int32_t pad_idx[] = {1, 0, 6};
    for (int fly = 0; fly < 2; fly++) {
        embedding_problem p;
        embedding_init(&p, 7, 16, 12, 1, 0, 500 + (uint64_t)_i);
        p.d.padding_idx = pad_idx[_i];
        p.d.seq_len = 4;
        for (size_t t = 0; t < 12; t += 3)
            p.ids[t] = pad_idx[_i]; /* leading, inner and trailing pads */
        p.ids[11] = pad_idx[_i];
        if (!fly)
            embedding_add_table(&p, 4 + (size_t)pad_idx[_i] + 1);
        embedding_run(&p);
        embedding_free(&p);
    }
}
END_TEST

START_TEST(embed_scales)
{
    static const float scale[] = {1.0f, 0.0f, -2.5f, 3e-5f};
    embedding_problem p;
    embedding_init(&p, 13, 33, 8, 0, 3, 600 + (uint64_t)_i);
    p.d.scale = scale[_i];
    embedding_add_table(&p, 8);
    embedding_run(&p);
    embedding_free(&p);
}
END_TEST

/* Long calls: api.c hands the kernels 256 tokens at a time, and a chunk
   of 256 x 512 floats is written with streaming stores; the output is 1
   float off a 64-byte boundary with an odd row stride, so every row has an
   unaligned head and tail.  Positions are explicit and random (repeats,
   blocks in any order), or the seed's sequences. */
START_TEST(embed_long_streaming_calls)
{
    embedding_problem p;
    embedding_init(&p, 50, 512, 600, 3, 1, 800 + (uint64_t)_i);
    p.ids[7] = p.ids[8] = p.ids[300] = 17; /* repeated ids */
    if (_i & 1) {
        p.positions = malloc(600 * sizeof *p.positions);
        for (size_t t = 0; t < 600; t++)
            p.positions[t] = (int64_t)(peak_test_next(&p.rng) % 700);
        p.positions[9] = p.positions[10] = 699;
        p.d.positions = p.positions;
    } else {
        p.d.seq_len = 290;
        p.d.pos0 = 410;
    }
    if (_i & 2)
        embedding_add_table(&p, 700);
    else
        p.d.pe_params = pe_variants[(size_t)_i % N_PE_VARIANTS];
    embedding_run(&p);
    embedding_free(&p);
}
END_TEST

/* Rows wider than the on-the-fly scratch block (beyond the documented
   d_model range) take a row-at-a-time path. */
START_TEST(embed_wide_rows)
{
    embedding_problem p;
    embedding_init(&p, 3, 8197, 3, 1, 2, 850 + (uint64_t)_i);
    p.d.pe_params = pe_variants[(size_t)_i];
    p.d.pos0 = 31;
    embedding_run(&p);
    embedding_free(&p);
}
END_TEST

/* KV-cache decoding: a one-token call at position p writes exactly row p of
   the one-shot call, for every p, through both PE sources, and with
   fairseq numbering (pos0 = the non-pad tokens already decoded). */
static void decode_case(embedding_problem *p)
{
    const size_t n = p->n_tokens, d = p->d.d_model;
    ck_assert_int_eq(peak_embed_pe(p->out, p->ld_out, p->ids, n, &p->d), PEAK_OK);
    float *one = peak_test_alloc(d, 3);
    size_t non_pad = 0;
    for (size_t t = 0; t < n; t++) {
        peak_embed_desc step = p->d;
        step.pos0 = p->d.padding_idx >= 0 ? non_pad : p->d.pos0 + t;
        ck_assert_int_eq(peak_embed_pe(one, (ptrdiff_t)d, &p->ids[t], 1, &step), PEAK_OK);
        CHECK(peak_test_bytes_equal(one, p->out + t * (size_t)p->ld_out, d * sizeof(float)),
              "%s D%zu: decode step %zu differs from the one-shot row",
              peak_isa_name(peak_test_isa), d, t);
        non_pad += p->ids[t] != p->d.padding_idx;
    }
    peak_test_free(one);
}

START_TEST(embed_kv_cache_decode)
{
    static const size_t dims[] = {512, 37, 768, 64};
    embedding_problem p;
    embedding_init(&p, 40, dims[_i % 4], 70, (size_t)_i, 0, 900 + (uint64_t)_i);
    p.d.pe_params = pe_variants[(size_t)_i % N_PE_VARIANTS];
    if (_i >= 4) {
        p.d.padding_idx = 2;
        for (size_t t = 0; t < 70; t += 5)
            p.ids[t] = 2;
    } else {
        p.d.pos0 = 25;
    }
    if (_i & 1)
        embedding_add_table(&p, 110);
    decode_case(&p);
    embedding_free(&p);
}
END_TEST

/* ---- invalid arguments ---------------------------------------------------- */

static void embedding_reject(embedding_problem *p, const char *what, peak_status want, float *out,
                             ptrdiff_t ld_out, const int32_t *ids, size_t n,
                             const peak_embed_desc *d)
{
    peak_test_fill_canary(p->out, p->n_out);
    peak_status got = peak_embed_pe(out, ld_out, ids, n, d);
    CHECK(got == want, "%s: embed %s: status %d, want %d", peak_isa_name(peak_test_isa),
                  what, (int)got, (int)want);
    for (size_t e = 0; e < p->n_out; e++)
        CHECK(peak_test_is_canary(p->out[e]), "%s: output changed", what);
}

static void embedding_reject_desc(embedding_problem *p, const char *what, peak_status want,
                                  const peak_embed_desc *d)
{
    embedding_reject(p, what, want, p->out, p->ld_out, p->ids, p->n_tokens, d);
}

START_TEST(embed_invalid_arguments)
{
    embedding_problem p;
    embedding_init(&p, 10, 8, 6, 0, 0, 700);
    embedding_add_table(&p, 6);
    const peak_status inval = PEAK_ERR_INVALID_ARG, range = PEAK_ERR_OUT_OF_RANGE;
    embedding_reject(&p, "NULL out", inval, NULL, p.ld_out, p.ids, 6, &p.d);
    embedding_reject(&p, "NULL ids", inval, p.out, p.ld_out, NULL, 6, &p.d);
    embedding_reject(&p, "NULL desc", inval, p.out, p.ld_out, p.ids, 6, NULL);
    embedding_reject(&p, "zero tokens", inval, p.out, p.ld_out, p.ids, 0, &p.d);
    embedding_reject(&p, "ld_out < d_model", inval, p.out, 7, p.ids, 6, &p.d);
    peak_embed_desc d = p.d;
    d.table = NULL;
    embedding_reject_desc(&p, "NULL table", inval, &d);
    d = p.d;
    d.vocab = 0;
    embedding_reject_desc(&p, "zero vocab", inval, &d);
    d = p.d;
    d.d_model = 0;
    embedding_reject_desc(&p, "zero d_model", inval, &d);
    d = p.d;
    d.ld_table = 7;
    embedding_reject_desc(&p, "ld_table < d_model", inval, &d);
    d = p.d;
    d.padding_idx = -2;
    embedding_reject_desc(&p, "padding_idx < -1", inval, &d);
    d.padding_idx = 10;
    embedding_reject_desc(&p, "padding_idx >= vocab", inval, &d);
    int64_t pos[6] = {0, 1, 2, 3, 4, 5};
    d = p.d;
    d.padding_idx = 1;
    d.positions = pos;
    embedding_reject_desc(&p, "padding_idx with positions", inval, &d);
    d = p.d;
    d.table = p.out;
    embedding_reject_desc(&p, "out == table", inval, &d);
    d = p.d;
    d.pe = p.out;
    embedding_reject_desc(&p, "out == pe", inval, &d);
    d = p.d;
    d.pe = NULL;
    d.pe_params.base = 0.0;
    embedding_reject_desc(&p, "bad pe_params", inval, &d);

    p.ids[2] = -1;
    embedding_reject_desc(&p, "id -1", range, &p.d);
    p.ids[2] = 10;
    embedding_reject_desc(&p, "id == vocab", range, &p.d);
    p.ids[2] = 3;
    d = p.d;
    d.positions = pos;
    pos[5] = 6;
    embedding_reject_desc(&p, "position == pe_rows", range, &d);
    pos[5] = -1;
    embedding_reject_desc(&p, "position -1 without padding_idx", range, &d);
    d.pe = NULL;
    pos[5] = (int64_t)PEAK_MAX_POSITION;
    embedding_reject_desc(&p, "position == PEAK_MAX_POSITION", range, &d);
    d = p.d;
    d.pos0 = 1; /* tokens 0..5 at rows 1..6 of a 6-row table */
    embedding_reject_desc(&p, "pos0 + n beyond the table", range, &d);
    d.pos0 = (size_t)PEAK_MAX_POSITION;
    embedding_reject_desc(&p, "pos0 == PEAK_MAX_POSITION, table", range, &d);
    d.pe = NULL;
    embedding_reject_desc(&p, "pos0 == PEAK_MAX_POSITION, on the fly", range, &d);
    embedding_free(&p);
}
END_TEST

/* A call of pad tokens only uses no position: any pos0 below
   PEAK_MAX_POSITION is valid, with a table as on the fly (the reverse was a
   review finding: the table path compared pos0 with pe_rows). */
START_TEST(embed_pads_only)
{
    embedding_problem p;
    embedding_init(&p, 7, 16, 5, 1, 0, 550 + (uint64_t)_i);
    p.d.padding_idx = 3;
    for (size_t t = 0; t < 5; t++)
        p.ids[t] = 3;
    p.d.seq_len = 2;
    p.d.pos0 = _i & 2 ? (size_t)(PEAK_MAX_POSITION - 1) : 100;
    if (_i & 1)
        embedding_add_table(&p, 4);
    embedding_run(&p);
    p.d.pos0 = (size_t)PEAK_MAX_POSITION;
    embedding_reject_desc(&p, "pads only, pos0 == PEAK_MAX_POSITION", PEAK_ERR_OUT_OF_RANGE, &p.d);
    embedding_free(&p);
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("embedding");
    TCase *tc = tcase_create(peak_isa_name(isa));
    tcase_add_loop_test(tc, pe_add_table_sizes_1_to_70, 0, SIZE_GROUPS);
    tcase_add_loop_test(tc, pe_add_on_the_fly_sizes_1_to_70, 0, SIZE_GROUPS);
    tcase_add_loop_test(tc, pe_add_model_sizes_every_variant, 0, 3);
    tcase_add_loop_test(tc, pe_add_strided_misaligned_layouts, 0, 5);
    tcase_add_loop_test(tc, pe_add_last_positions, 0, (int)N_PE_VARIANTS);
    tcase_add_loop_test(tc, pe_add_long_and_wide, 0, 2);
    tcase_add_test(tc, pe_add_invalid_arguments);
    tcase_add_loop_test(tc, embed_sizes_1_to_70, 0, SIZE_GROUPS);
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
