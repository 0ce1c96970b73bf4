/*
 * test-pe-table.c - peak_pe_table on one tier (argv[1]).
 *
 *   - EXACT mode against an oracle written here in long double (powl for the
 *     frequency, sinl/cosl of p * w): within 2^-23 for p < 2^20, d <= 8192;
 *     TORCH_F32 against sin/cos of PyTorch's float angle;
 *   - every tier bit-identical to the scalar kernel, and a row the same bits
 *     whatever pos0/n_pos produced it (and the plain-C row/column helpers the
 *     on-the-fly PE uses, and the tier's rows kernel);
 *   - TORCH_F32 mode against rows PyTorch 1.13 computed
 *     (scripts/make-torch-pe-ref.py -> tests/data/torch-pe-*.bin);
 *   - bfloat16 and float16 tables: EXACT within half an ULP of the type
 *     plus 2^-24 of the long double oracle, and in every mode the bits of
 *     peak_convert() of the float32 table (odd widths, every layout, item
 *     and column-part boundaries, rows wider than the staging block);
 *   - argument validation leaves the output untouched (a type outside
 *     peak_dtype included).
 * The sweeps over widths, position counts of 3, row gaps and misalignment
 * are tests/tester.c's; the cases here run through it as well.
 */
#include "tester.h"

#include "common/pe-ref.h" /* peak_pe_row, peak_pe_cols, peak_pe_freqs, peak_pe_table_ref */
#include "pe-table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIER peak_isa_name(peak_test_isa)

static const char *const layout_names[3] = {"interleaved", "split", "split_paper"};
static const char *const mode_names[2] = {"exact", "torch_f32"};

static peak_pe_params make_params(int layout, int mode, double base)
{
    peak_pe_params p = PEAK_PE_PARAMS_DEFAULT;
    p.layout = (peak_pe_layout)layout;
    p.mode = (peak_pe_mode)mode;
    p.base = base;
    return p;
}

/* ---- the long double oracle -------------------------------------------------- */

/* Frequencies w_i of the layout, straight from peak.h's definitions. */
static long double *oracle_freqs(size_t d, peak_pe_layout layout, double base)
{
    size_t half = d / 2;
    size_t n = layout == PEAK_PE_INTERLEAVED ? (d + 1) / 2 : half;
    long double *w = malloc((n ? n : 1) * sizeof *w);
    for (size_t i = 0; i < n; i++) {
        long double e = layout == PEAK_PE_SPLIT
                            ? (long double)i / (long double)(half > 1 ? half - 1 : 1)
                            : 2.0L * (long double)i / (long double)d;
        w[i] = powl((long double)base, -e);
    }
    return w;
}

static long double oracle(const long double *w, size_t p, size_t col, size_t d,
                          peak_pe_layout layout)
{
    size_t half = d / 2, i;
    int is_cos;
    if (layout == PEAK_PE_INTERLEAVED) {
        i = col / 2;
        is_cos = (int)(col & 1);
    } else if (col >= 2 * half) {
        return 0.0L;
    } else {
        is_cos = col >= half;
        i = is_cos ? col - half : col;
    }
    long double a = (long double)p * w[i];
    return is_cos ? cosl(a) : sinl(a);
}

/* Max |row - oracle| over one row. */
static double row_error(const float *row, const long double *w, size_t p, size_t d,
                        peak_pe_layout layout)
{
    double worst = 0.0;
    for (size_t c = 0; c < d; c++) {
        double e = (double)fabsl((long double)row[c] - oracle(w, p, c, d, layout));
        CHECK(!isnan(row[c]), "%s: NaN at p=%zu col %zu d=%zu", TIER, p, c, d);
        if (e > worst)
            worst = e;
    }
    return worst;
}

/* ---- EXACT mode accuracy ----------------------------------------------------- */

/* Largest error seen (x86-64, every tier, all layouts, bases 10000, 5e5 and
   2.5): 2.98e-8 = 2^-25.0, i.e. the float rounding of values near 1.  The
   double-precision part is far smaller: on 3.5 million entries (d 512 and
   8192, p < 2^20) 99.97% were the correctly rounded float of the exact
   value, and the others cost at most 2.5e-10 more.  The bound tested is the
   promised 2^-23. */
#define EXACT_BOUND 0x1p-23

static const size_t exact_dims[] = {1,  2,  3,  7,   8,   15,  16,   17,
                                    63, 64, 65, 511, 512, 768, 1024, 8192};

static double exact_worst[3];

static void check_exact_rows(peak_pe_layout layout, double base, size_t d, const size_t *pos,
                             size_t n_single, size_t block0, size_t block_n)
{
    peak_pe_params prm = make_params(layout, PEAK_PE_EXACT, base);
    long double *w = oracle_freqs(d, layout, base);
    float *row = peak_test_alloc(d, 0);
    for (size_t k = 0; k < n_single; k++) {
        ck_assert_int_eq(peak_pe_table(row, PEAK_F32, 1, d, pos[k], &prm, NULL), PEAK_OK);
        double e = row_error(row, w, pos[k], d, layout);
        CHECK(e <= EXACT_BOUND, "%s %s base %g d=%zu p=%zu: error %.3g > 2^-23", TIER,
              layout_names[layout], base, d, pos[k], e);
        if (e > exact_worst[layout])
            exact_worst[layout] = e;
    }
    peak_test_free(row);
    if (block_n) {
        float *t = peak_test_alloc(block_n * d, 0);
        ck_assert_int_eq(peak_pe_table(t, PEAK_F32, block_n, d, block0, &prm, NULL), PEAK_OK);
        for (size_t r = 0; r < block_n; r++) {
            double e = row_error(t + r * d, w, block0 + r, d, layout);
            CHECK(e <= EXACT_BOUND, "%s %s base %g d=%zu p=%zu (block): error %.3g", TIER,
                  layout_names[layout], base, d, block0 + r, e);
            if (e > exact_worst[layout])
                exact_worst[layout] = e;
        }
        peak_test_free(t);
    }
    free(w);
}

START_TEST(exact_mode_within_2_pow_minus_23)
{
    const peak_pe_layout layout = (peak_pe_layout)_i;
    size_t pos[24] = {0, 1, 2, 31, 32, 33, 4999, 5000, 96079, (1u << 20) - 1, 65535, 524288};
    size_t n_pos = 12;
    uint64_t rng = 0x5eed0000u + (uint64_t)_i;
    const size_t n_rand = peak_test_quick() ? 14 : 24, block = peak_test_quick() ? 6 : 24;
    while (n_pos < n_rand)
        pos[n_pos++] = (size_t)(peak_test_next(&rng) % (1u << 20));

    for (size_t k = 0; k < sizeof exact_dims / sizeof exact_dims[0]; k += block == 24 ? 1 : 3) {
        size_t d = exact_dims[k];
        if (d == 8192) /* sampled rows */
            check_exact_rows(layout, 10000.0, d, pos + 6, 6, (1u << 20) - 3, 3);
        else
            check_exact_rows(layout, 10000.0, d, pos, n_pos, (1u << 20) - block, block);
    }
    /* RoPE-style and tiny bases: other frequency ranges, same bound. */
    const double bases[] = {500000.0, 2.5};
    const size_t dims[] = {7, 64, 65, 512};
    for (size_t b = 0; b < 2; b++)
        for (size_t k = 0; k < 4; k++)
            check_exact_rows(layout, bases[b], dims[k], pos, n_pos, 4990, 20);
    printf("%s %s: max |EXACT - oracle| = %.3g (2^%.2f)\n", TIER, layout_names[layout],
           exact_worst[layout], log2(exact_worst[layout]));
}
END_TEST

/* ---- the double-precision sincos ----------------------------------------------- */

typedef void (*sincos_chunk_fn)(const double *x, double *s, double *c);

static sincos_chunk_fn tier_sincos(void)
{
    switch (peak_test_isa) {
#if PEAK_HAVE_AVX2
    case PEAK_ISA_AVX2:
        return peak_pe_sincos_chunk__avx2;
#endif
#if PEAK_HAVE_AVX512
    case PEAK_ISA_AVX512:
        return peak_pe_sincos_chunk__avx512;
#endif
#if PEAK_HAVE_NEON
    case PEAK_ISA_NEON:
        return peak_pe_sincos_chunk__neon;
#endif
    default:
        return peak_pe_sincos_chunk__scalar;
    }
}

/* Largest error seen against sinl/cosl: 1.4e-16 (x < 2^33). */
#define SINCOS_BOUND 2.5e-16

/* The tier's sincos against the scalar one in double (every bit, including
   the rare slow-path lanes), and both against long double. */
START_TEST(sincos_double_bits_and_accuracy)
{
    PEAK_PE_ALIGN double x[PEAK_PE_CHUNK], s0[PEAK_PE_CHUNK], c0[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double s1[PEAK_PE_CHUNK], c1[PEAK_PE_CHUNK];
    const sincos_chunk_fn tier = tier_sincos();
    uint64_t rng = 0x51c05;
    double worst = 0.0;
    for (int round = 0; round < 4000; round++) {
        for (size_t j = 0; j < PEAK_PE_CHUNK; j++) {
            uint64_t u = peak_test_next(&rng);
            double v;
            switch ((u >> 60) & 7) {
            case 0: /* near a multiple of pi/4: quadrant edges */
                v = (double)((u >> 8) % 100000) * 0x1.921fb54442d18p-1 +
                    (double)(int)(u & 0xff) * 0x1p-40;
                break;
            case 1: /* small */
                v = ldexp((double)(u & 0xfffff), -(int)((u >> 20) % 60));
                break;
            case 2: /* integers times a frequency, as the driver forms them */
                v = (double)((u >> 10) % ((uint64_t)1 << 32)) *
                    pow(10000.0, -(double)(u & 1023) / 1024.0);
                break;
            default: /* uniform up to 2^33 */
                v = (double)(u >> 11) * 0x1p-20;
                break;
            }
            x[j] = fabs(v);
        }
        if (round == 0) { /* the slow path: beyond 2^50, overflowed */
            x[1] = 0x1p50;
            x[2] = 0x1.8p60;
            x[3] = 1e300;
            x[4] = INFINITY;
            x[5] = NAN;
            x[6] = 0x1.fffffffffffffp49;
            x[7] = 0.0;
        }
        peak_pe_sincos_chunk__scalar(x, s0, c0);
        tier(x, s1, c1);
        for (size_t j = 0; j < PEAK_PE_CHUNK; j++) {
            CHECK(peak_test_bytes_equal(&s0[j], &s1[j], sizeof(double)) &&
                      peak_test_bytes_equal(&c0[j], &c1[j], sizeof(double)),
                  "%s: sincos(%a) = (%a, %a), scalar (%a, %a)", TIER, x[j], s1[j], c1[j], s0[j],
                  c0[j]);
            CHECK(!isnan(s0[j]) && !isnan(c0[j]), "sincos(%a) is NaN", x[j]);
            if (x[j] < 0x1p33) {
                double e = (double)fmaxl(fabsl((long double)s0[j] - sinl((long double)x[j])),
                                         fabsl((long double)c0[j] - cosl((long double)x[j])));
                CHECK(e <= SINCOS_BOUND, "sincos(%a): error %.3g", x[j], e);
                if (e > worst)
                    worst = e;
            }
        }
    }
    printf("%s: sincos max error %.3g against long double\n", TIER, worst);
}
END_TEST

/* ---- the tester's problem: a table of c.rows positions, d_model c.n -------------- */

/* variant = layout * 2 + mode: every layout in both modes. */
#define PE_VARIANTS 6

typedef struct pe_opts {
    size_t pos0;
    double base;
    int bits_only; /* oracle: the plain-C table's bits (peak_pe_table_ref), not sinl */
} pe_opts;

/* Position 29: angles past 2*pi in the first columns from the first row. */
static const pe_opts pe_defaults = {29, 10000.0, 0};

typedef struct pe_problem {
    pe_opts o;
    peak_pe_params prm;
    float *out;
    long double *w; /* EXACT: the oracle's frequencies */
    float *wf;      /* TORCH_F32: the float frequencies PyTorch uses */
    float *table;   /* bits_only: the plain-C table, packed */
} pe_problem;

/* The float frequencies of TORCH_F32 (pe-ref.h's peak_pe_freqs, whose bits
   torch_f32_matches_pytorch checks against PyTorch's), a chunk at a time. */
static float *torch_freqs(size_t d, const peak_pe_params *prm)
{
    const size_t n = prm->layout == PEAK_PE_INTERLEAVED ? (d + 1) / 2 : d / 2;
    float *wf = malloc((n ? n : 1) * sizeof *wf);
    PEAK_PE_ALIGN double w[PEAK_PE_CHUNK], lo[PEAK_PE_CHUNK];
    if (!wf)
        abort();
    for (size_t i0 = 0; i0 < n; i0 += PEAK_PE_CHUNK) {
        const size_t nc = n - i0 < PEAK_PE_CHUNK ? n - i0 : PEAK_PE_CHUNK;
        peak_pe_freqs(w, lo, i0, nc, d, prm);
        for (size_t j = 0; j < nc; j++)
            wf[i0 + j] = (float)w[j];
    }
    return wf;
}

static int pe_setup(peak_tester_problem *p)
{
    const peak_tester_case *c = &p->c;
    pe_problem *e = calloc(1, sizeof *e);
    if (!e)
        abort();
    p->user = e;
    e->o = c->opts ? *(const pe_opts *)c->opts : pe_defaults;
    e->prm = make_params((int)c->variant / 2, (int)c->variant % 2, e->o.base);
    /* EXACT's angle p * w is a double: its rounding, up to p * 2^-53, exceeds
       2^-23 past p = 2^30; allow 8 times that beyond p = 2^20. */
    const double p_max = (double)(e->o.pos0 + c->rows);
    double tol = EXACT_BOUND;
    if (e->prm.mode == PEAK_PE_EXACT && p_max > 0x1p20)
        tol += p_max * 0x1p-50;
    e->out = peak_tester_output(p, "pe", c->rows, c->n, (ptrdiff_t)(c->n + c->gap), 0,
                                e->o.bits_only ? PEAK_TESTER_EXACT : PEAK_TESTER_REL, tol);
    if (e->o.bits_only) {
        if (!(e->table = malloc(c->rows * c->n * sizeof *e->table)))
            abort();
        peak_pe_table_ref(e->table, (ptrdiff_t)c->n, c->rows, c->n, e->o.pos0, &e->prm);
        return 1;
    }
    if (e->prm.mode == PEAK_PE_EXACT)
        e->w = oracle_freqs(c->n, e->prm.layout, e->o.base);
    else
        e->wf = torch_freqs(c->n, &e->prm);
    return 1;
}

/* Packed rows through the API (dispatch, validation); rows with gaps through
   the active tier's kernel, the only entry point with a row stride. */
static peak_status pe_call(peak_tester_problem *p)
{
    const pe_problem *e = p->user;
    const peak_tester_case *c = &p->c;
    if (!c->gap)
        return peak_pe_table(e->out, PEAK_F32, c->rows, c->n, e->o.pos0, &e->prm, NULL);
    peak_kernels_for(peak_isa_active())
        ->pe_table(e->out, (ptrdiff_t)(c->n + c->gap), c->rows, c->n, e->o.pos0, &e->prm, 0,
                   PEAK_PE_FREQ_END, peak_pe_streams(c->rows, c->n, &e->prm));
    return PEAK_OK;
}

/* EXACT: sinl/cosl of p * w in long double; TORCH_F32: sin/cos in double of
   PyTorch's float angle (float)p * w_f, which the tiers evaluate exactly. */
static void pe_oracle_row(const peak_tester_problem *p, size_t buf, size_t t, double *ref)
{
    (void)buf;
    const pe_problem *e = p->user;
    const size_t d = p->c.n, pos = e->o.pos0 + t;
    if (e->table) {
        for (size_t j = 0; j < d; j++)
            ref[j] = e->table[t * d + j];
        return;
    }
    if (e->w) {
        for (size_t j = 0; j < d; j++)
            ref[j] = (double)oracle(e->w, pos, j, d, e->prm.layout);
        return;
    }
    const size_t half = d / 2;
    for (size_t j = 0; j < d; j++) {
        size_t i;
        int is_cos;
        if (e->prm.layout == PEAK_PE_INTERLEAVED) {
            i = j / 2;
            is_cos = (int)(j & 1);
        } else if (j >= 2 * half) {
            ref[j] = 0.0;
            continue;
        } else {
            is_cos = j >= half;
            i = is_cos ? j - half : j;
        }
        const float angle = (float)pos * e->wf[i];
        ref[j] = is_cos ? cos((double)angle) : sin((double)angle);
    }
}

static void pe_teardown(peak_tester_problem *p)
{
    pe_problem *e = p->user;
    if (!e)
        return;
    free(e->w);
    free(e->wf);
    free(e->table);
    free(e);
}

/* Every tier gives the scalar tier's bits (peak.h).  Base: 3 positions from
   29; every layout and mode at every size. */
static const peak_tester_family pe_family = {
    .name = "pe_table",
    .setup = pe_setup,
    .call = pe_call,
    .oracle_row = pe_oracle_row,
    .teardown = pe_teardown,
    .same_bits = 1,
    .n_variants = PE_VARIANTS,
    .sizes_every_variant = 1,
    .base = {.rows = 3, .variant = 0},
};

/* The same problem for bits_only cases: their oracle is the scalar tier's
   kernel already (peak_f32_pe_table__scalar is peak_pe_table_ref), so the
   same_bits rerun would compute each table a second time. */
static const peak_tester_family pe_bits_family = {
    .name = "pe_table bits",
    .setup = pe_setup,
    .call = pe_call,
    .oracle_row = pe_oracle_row,
    .teardown = pe_teardown,
    .same_bits = 0,
    .n_variants = PE_VARIANTS,
    .base = {.rows = 3, .variant = 0},
};

static void pe_case(size_t n_pos, size_t d, size_t pos0, double base, unsigned variant,
                    size_t gap, size_t misalign, int bits_only)
{
    const pe_opts o = {pos0, base, bits_only};
    peak_tester_case c = pe_family.base;
    c.n = d;
    c.rows = n_pos;
    c.gap = gap;
    c.misalign = misalign;
    c.variant = variant;
    c.opts = &o;
    peak_tester_check(bits_only ? &pe_bits_family : &pe_family, &c);
}

/* Every position count 1..70 and a few at every width 1..70 (the sweeps
   hold 3 positions, against sinl): where a tier vectorises across
   positions, each tail.  The oracle is the scalar tier's bits: sinl here
   took this test from 0.34 to 1.07 s on avx2.  _i is the variant. */
START_TEST(position_counts)
{
    const size_t rows[] = {1, 2, 31, 32, 33, 70};
    const size_t every = peak_test_quick() ? 5 : 1; /* quick: a sample of the pairs */
    for (size_t d = 1; d <= 70; d++)
        for (size_t r = 0; r < 6; r++)
            if ((d + r) % every == 0)
                pe_case(rows[r], d, (d & 1) ? 29 : 0, 10000.0, (unsigned)_i, 0, d % 4, 1);
    const size_t dims[] = {1, 2, 3, 8, 17, 64, 65, 70};
    for (size_t n = 1; n <= 70; n++)
        for (size_t k = 0; k < 8; k++)
            if ((n + k) % every == 0)
                pe_case(n, dims[k], 1000003, 10000.0, (unsigned)_i, 0, 0, 1);
}
END_TEST

/* Model widths at positions near 5000 and at the last 37 below 2^32, and
   small widths at the last 1..70: the latter against the oracle (its
   tolerance in pe_setup), the 190 thousand floats of the former against
   the scalar tier's bits, as before the tester (exact_mode_within_2_pow_
   minus_23 holds their accuracy; sinl here took this test from 0.06 to
   0.28 s on avx2). */
START_TEST(model_sizes_and_far_positions)
{
    const unsigned v = (unsigned)_i;
    const size_t dims[] = {512, 768, 1024, 129};
    const size_t top = (size_t)1 << 32;
    for (size_t k = 0; k < 4; k++) {
        pe_case(1, dims[k], 4999, 10000.0, v, 0, 0, 1);
        pe_case(40, dims[k], 4971, 10000.0, v, 0, 1, 1);
        pe_case(37, dims[k], top - 37, 10000.0, v, 0, 0, 1);
    }
    const size_t small[] = {1, 7, 64, 65};
    const size_t rows[] = {1, 33, 70};
    for (size_t k = 0; k < 4; k++)
        for (size_t r = 0; r < 3; r++)
            pe_case(rows[r], small[k], top - rows[r], 10000.0, v, 0, 0, 0);
}
END_TEST

/* Bases far from 10000 reach the slow sincos path (angles >= 2^50 or
   overflowed), lane by lane in the SIMD tiers.  The oracle is the plain-C
   table's bits: powl overflows to inf there and sinl(inf) is NaN. */
START_TEST(extreme_bases)
{
    const double bases[] = {1e-300, 5e-324, 0.5, 1e300, 1.0};
    for (unsigned v = 0; v < PE_VARIANTS; v++)
        for (size_t b = 0; b < 5; b++) {
            pe_case(35, 64, 0, bases[b], v, 0, 0, 1);
            pe_case(3, 21, 4294967293u, bases[b], v, 0, 0, 1);
        }
}
END_TEST

/* Tables big enough for the SIMD tiers' streaming stores (>= 2 MiB), with
   aligned, misaligned and alternating row alignments; EXACT, _i the layout.
   The oracle is the plain-C table's bits: 1.6 million sinl would dominate
   the emulated AArch64 run (binary128 in software). */
START_TEST(large_tables)
{
    const unsigned v = (unsigned)_i * 2 + PEAK_PE_EXACT;
    pe_case(1100, 512, 0, 10000.0, v, 0, 0, 1);
    pe_case(1030, 520, 77, 10000.0, v, 0, 3, 1);
    pe_case(1040, 516, 5, 10000.0, v, 0, 0, 1);
}
END_TEST

/* 37 rows with a gap of 5 floats: the sweeps' gaps hold 3 rows. */
START_TEST(strided_rows_keep_gaps)
{
    const size_t dims[] = {1, 7, 16, 33, 64, 130};
    for (unsigned v = 0; v < PE_VARIANTS; v++)
        for (size_t k = 0; k < 6; k++)
            pe_case(37, dims[k], 61, 10000.0, v, 5, 0, 0);
}
END_TEST

/* ---- a row does not depend on how it was asked for ----------------------------- */

START_TEST(rows_independent_of_pos0_and_n_pos)
{
    peak_pe_params prm = make_params(_i / 2, _i % 2, 10000.0);
    const size_t dims[] = {1, 7, 64, 65, 130};
    const size_t starts[] = {27, 4960, ((size_t)1 << 32) - 70};
    for (size_t k = 0; k < 5; k++) {
        size_t d = dims[k], n = 70;
        float *table = peak_test_alloc(n * d, 0);
        float *row = peak_test_alloc(d, 0);
        float *cols = peak_test_alloc(d, 0);
        for (size_t s = 0; s < 3; s++) {
            ck_assert_int_eq(peak_pe_table(table, PEAK_F32, n, d, starts[s], &prm, NULL), PEAK_OK);
            for (size_t r = 0; r < n; r++) {
                size_t p = starts[s] + r;
                ck_assert_int_eq(peak_pe_table(row, PEAK_F32, 1, d, p, &prm, NULL), PEAK_OK);
                CHECK(peak_test_bytes_equal(row, table + r * d, d * sizeof(float)),
                      "%s %s %s d %zu: row %zu alone differs from the table starting at %zu",
                      TIER, layout_names[_i / 2], mode_names[_i % 2], d, p, starts[s]);
                /* The plain-C helpers the on-the-fly PE is built on (common/pe-ref.c). */
                peak_pe_row(row, p, d, &prm);
                CHECK(peak_test_bytes_equal(row, table + r * d, d * sizeof(float)),
                      "%s d %zu p %zu: peak_pe_row differs", TIER, d, p);
                if (r % 8 == 0) {
                    for (size_t c0 = 0; c0 < d; c0 += 5) {
                        size_t w = d - c0 < 11 ? d - c0 : 11;
                        peak_pe_cols(cols, p, c0, w, d, &prm);
                        CHECK(peak_test_bytes_equal(cols, table + r * d + c0, w * sizeof(float)),
                              "%s %s %s d %zu p %zu: peak_pe_cols(%zu, %zu) differs",
                              TIER, layout_names[_i / 2], mode_names[_i % 2], d, p, c0, w);
                    }
                }
            }
        }
        peak_test_free(table);
        peak_test_free(row);
        peak_test_free(cols);
    }
}
END_TEST

/* ---- structure: odd widths, no NaN ------------------------------------------------- */

START_TEST(no_nan_and_odd_widths_d_1_to_70)
{
    const size_t pos[] = {0, 1, 12345, ((size_t)1 << 32) - 1};
    for (int lm = 0; lm < 6; lm++) {
        peak_pe_params prm = make_params(lm / 2, lm % 2, 10000.0);
        for (size_t d = 1; d <= 70; d++) {
            float *row = peak_test_alloc(d, 0);
            for (size_t k = 0; k < 4; k++) {
                ck_assert_int_eq(peak_pe_table(row, PEAK_F32, 1, d, pos[k], &prm, NULL), PEAK_OK);
                for (size_t c = 0; c < d; c++)
                    CHECK(!isnan(row[c]) && fabsf(row[c]) <= 1.0f,
                          "%s %s %s d %zu p %zu col %zu: %g", TIER, layout_names[lm / 2],
                          mode_names[lm % 2], d, pos[k], c, (double)row[c]);
                if (prm.layout != PEAK_PE_INTERLEAVED && (d & 1)) {
                    uint32_t bits;
                    memcpy(&bits, &row[d - 1], sizeof bits);
                    CHECK(bits == 0, "%s split d %zu: last column %g, want +0", TIER, d,
                          (double)row[d - 1]);
                }
                if (pos[k] == 0 && prm.layout == PEAK_PE_INTERLEAVED)
                    for (size_t c = 0; c < d; c++)
                        CHECK(row[c] == (float)(c & 1), "%s d %zu: PE(0, %zu) = %g", TIER, d,
                              c, (double)row[c]);
            }
            peak_test_free(row);
        }
    }
}
END_TEST

/* ---- TORCH_F32 against PyTorch -------------------------------------------------- */

/* Keep in step with scripts/make-torch-pe-ref.py. */
static const size_t torch_positions[] = {0, 1, 2,   3,    4,    5,     6,    7,
                                        8, 9, 100, 4999, 5000, 96079, 99999};
static const size_t torch_far_positions[] = {1048575, 16777216, 123456789, 4294967295u};

typedef struct torch_file {
    const char *name;
    peak_pe_layout layout;
    size_t d;
    int far;
} torch_file;

static const torch_file torch_files[] = {
    {"torch-pe-interleaved-d512.bin", PEAK_PE_INTERLEAVED, 512, 0},
    {"torch-pe-interleaved-d7.bin", PEAK_PE_INTERLEAVED, 7, 0},
    {"torch-pe-split-d512.bin", PEAK_PE_SPLIT, 512, 0},
    {"torch-pe-split-d7.bin", PEAK_PE_SPLIT, 7, 0},
    {"torch-pe-split_paper-d512.bin", PEAK_PE_SPLIT_PAPER, 512, 0},
    {"torch-pe-split_paper-d7.bin", PEAK_PE_SPLIT_PAPER, 7, 0},
    {"torch-pe-far-interleaved-d64.bin", PEAK_PE_INTERLEAVED, 64, 1},
};
#define N_TORCH_FILES (sizeof torch_files / sizeof torch_files[0])

/* PEAK_TEST_DATA_DIR (environment) or tests/data next to this source:
   meson compiles it by a path relative to the build root and runs tests
   from there. */
static float *read_reference(const char *name, size_t n)
{
    char path[4096];
    const char *dir = getenv("PEAK_TEST_DATA_DIR");
    if (dir) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
    } else {
        const char *src = __FILE__;
        const char *slash = strrchr(src, '/');
        int len = slash ? (int)(slash - src) : 1;
        snprintf(path, sizeof path, "%.*s/data/%s", len, slash ? src : ".", name);
    }
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s (set PEAK_TEST_DATA_DIR to tests/data)", path);
    float *v = malloc(n * sizeof *v);
    unsigned char *raw = malloc(n * 4);
    size_t got = fread(raw, 4, n, f);
    int extra = fgetc(f);
    fclose(f);
    CHECK(got == n && extra == EOF, "%s: %zu floats, want exactly %zu", path, got, n);
    for (size_t i = 0; i < n; i++) { /* little-endian on every host */
        uint32_t b = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                     (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
        memcpy(&v[i], &b, sizeof b);
    }
    free(raw);
    return v;
}

/* Largest difference seen: 1 ULP (SLEEF's u10 sin/cos vs our nearly
   correctly rounded ones); div_term itself matches bit for bit. */
#define TORCH_ULP_BOUND 2

START_TEST(torch_f32_matches_pytorch)
{
    const torch_file *tf = &torch_files[_i];
    const size_t *pos = tf->far ? torch_far_positions : torch_positions;
    size_t n_rows = tf->far ? sizeof torch_far_positions / sizeof torch_far_positions[0]
                            : sizeof torch_positions / sizeof torch_positions[0];
    size_t d = tf->d;
    float *ref = read_reference(tf->name, n_rows * d);
    peak_pe_params prm = make_params(tf->layout, PEAK_PE_TORCH_F32, 10000.0);
    float *row = peak_test_alloc(d, 0);
    int64_t worst = 0;
    for (size_t r = 0; r < n_rows; r++) {
        ck_assert_int_eq(peak_pe_table(row, PEAK_F32, 1, d, pos[r], &prm, NULL), PEAK_OK);
        for (size_t c = 0; c < d; c++) {
            int64_t u = peak_test_ulp_diff(row[c], ref[r * d + c]);
            CHECK(u <= TORCH_ULP_BOUND, "%s %s p %zu col %zu: %.9g, torch %.9g (%lld ULP)", TIER,
                  tf->name, pos[r], c, (double)row[c], (double)ref[r * d + c], (long long)u);
            if (u > worst)
                worst = u;
        }
    }
    /* Rows 0..9 once more as one block. */
    if (!tf->far) {
        float *block = peak_test_alloc(10 * d, 0);
        ck_assert_int_eq(peak_pe_table(block, PEAK_F32, 10, d, 0, &prm, NULL), PEAK_OK);
        for (size_t e = 0; e < 10 * d; e++)
            CHECK(peak_test_ulp_diff(block[e], ref[e]) <= TORCH_ULP_BOUND,
                  "%s %s block row %zu col %zu", TIER, tf->name, e / d, e % d);
        peak_test_free(block);
    }
    printf("%s %s: max %lld ULP from PyTorch\n", TIER, tf->name, (long long)worst);
    peak_test_free(row);
    free(ref);
}
END_TEST

/* The point of EXACT: the float32 angle of PyTorch's PositionalEncoding
   formula (what TORCH_F32 reproduces) is off by ~1e-4 at p = 5000. */
START_TEST(exact_beats_torch_f32_at_5000)
{
    const size_t d = 512;
    const size_t ps[] = {5000, 96079};
    long double *w = oracle_freqs(d, PEAK_PE_INTERLEAVED, 10000.0);
    float *row = peak_test_alloc(d, 0);
    for (size_t k = 0; k < 2; k++) {
        peak_pe_params prm = make_params(PEAK_PE_INTERLEAVED, PEAK_PE_EXACT, 10000.0);
        ck_assert_int_eq(peak_pe_table(row, PEAK_F32, 1, d, ps[k], &prm, NULL), PEAK_OK);
        double exact_err = row_error(row, w, ps[k], d, PEAK_PE_INTERLEAVED);
        prm.mode = PEAK_PE_TORCH_F32;
        ck_assert_int_eq(peak_pe_table(row, PEAK_F32, 1, d, ps[k], &prm, NULL), PEAK_OK);
        double torch_err = row_error(row, w, ps[k], d, PEAK_PE_INTERLEAVED);
        printf("%s p=%zu: max error EXACT %.3g, TORCH_F32 %.3g\n", TIER, ps[k], exact_err,
               torch_err);
        CHECK(exact_err <= EXACT_BOUND && torch_err > 1e-5 && exact_err < torch_err / 100,
              "%s p=%zu: EXACT %.3g vs TORCH_F32 %.3g", TIER, ps[k], exact_err, torch_err);
    }
    peak_test_free(row);
    free(w);
}
END_TEST

/* ---- 16-bit tables -------------------------------------------------------------- */

static const peak_dtype half_types[2] = {PEAK_BF16, PEAK_F16};


/* Largest |16-bit - exact| beyond half an ULP of the type, per type. */
static double half_excess[2];

/* A 16-bit EXACT table of rows pos0 .. pos0 + n - 1 against the long double
   oracle: each entry within half an ULP of its type (at the exact value)
   plus 2^-24 (peak.h). */
static void check_half_exact(peak_dtype t, peak_pe_layout layout, double base, size_t d,
                             size_t pos0, size_t n)
{
    const peak_pe_params prm = make_params(layout, PEAK_PE_EXACT, base);
    long double *w = oracle_freqs(d, layout, base);
    uint16_t *h = peak_test_half_alloc(n * d);
    ck_assert_int_eq(peak_pe_table(h, t, n, d, pos0, &prm, NULL), PEAK_OK);
    CHECK(peak_test_half_guards_intact(h, n * d), "%s %s %s d %zu: wrote outside the table", TIER,
          peak_test_type_name(t), layout_names[layout], d);
    double *excess = &half_excess[t == PEAK_F16];
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < d; c++) {
            const long double exact = oracle(w, pos0 + r, c, d, layout);
            const double got = peak_test_half_value(t, h[r * d + c]);
            const double e = (double)fabsl((long double)got - exact);
            const double half = 0.5 * peak_test_half_ulp(t, (double)exact);
            CHECK(e <= half + 0x1p-24, "%s %s %s base %g d %zu p %zu col %zu: %a, exact %La, "
                  "error %.3g > half ULP %.3g + 2^-24", TIER, peak_test_type_name(t),
                  layout_names[layout], base, d, pos0 + r, c, got, exact, e, half);
            if (e - half > *excess)
                *excess = e - half;
        }
    peak_test_half_free(h);
    free(w);
}

/* _i: type * 3 + layout.  Odd and even widths, single rows at positions up
   to 2^20 - 1 and blocks that cross PEAK_PE_BLOCK boundaries. */
START_TEST(half_exact_within_half_ulp)
{
    const peak_dtype t = half_types[_i / 3];
    const peak_pe_layout layout = (peak_pe_layout)(_i % 3);
    const int quick = peak_test_quick();
    const size_t dims[] = {1, 2, 7, 64, 65, 511, 512, 768};
    size_t pos[16] = {0, 1, 31, 32, 33, 4999, 5000, 96079, 524288, (1u << 20) - 1};
    size_t n_pos = 10;
    uint64_t rng = 0x16b17000u + (uint64_t)_i;
    while (n_pos < (quick ? 12u : 16u))
        pos[n_pos++] = (size_t)(peak_test_next(&rng) % (1u << 20));
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        if (quick && k % 2)
            continue;
        for (size_t j = 0; j < n_pos; j++)
            check_half_exact(t, layout, 10000.0, dims[k], pos[j], 1);
        check_half_exact(t, layout, 10000.0, dims[k], 4990, quick ? 8 : 40);
        check_half_exact(t, layout, 10000.0, dims[k], (1u << 20) - 37, quick ? 5 : 37);
    }
    /* another frequency range */
    check_half_exact(t, layout, 500000.0, 65, 4071, 33);
    printf("%s %s %s: max |16-bit - oracle| - half ULP = %.3g (2^%.2f)\n", TIER,
           peak_test_type_name(t), layout_names[layout], half_excess[t == PEAK_F16],
           log2(half_excess[t == PEAK_F16]));
}
END_TEST

/* The shapes of the bit-for-bit test: odd widths; a call of several column
   parts (a part beginning past column chunk 0, the padding column of an odd
   split row in the last); two runs of positions (an item boundary at row
   4096); the float32 table's streaming size; rows wider than the staging
   block (8192 floats and padding), which take column windows. */
static const struct {
    size_t n, d, pos0;
} half_shapes[] = {
    {3, 1, 0},     {70, 7, 29},      {40, 64, 4971},  {33, 65, 4294967263u}, {100, 2048, 1000},
    {100, 2049, 7}, {4100, 24, 0},   {1100, 512, 0},  {5, 8192, 77},         {2, 8193, 5},
    {3, 8208, 1048573},
};

/* _i: variant (layout * 2 + mode) * 2 + type.  Every 16-bit table is the
   float32 table of the same call rounded once (peak_convert's bits), in
   both modes. */
START_TEST(half_is_converted_f32)
{
    const peak_dtype t = half_types[_i % 2];
    const int variant = _i / 2;
    const peak_pe_params prm = make_params(variant / 2, variant % 2, 10000.0);
    for (size_t k = 0; k < sizeof half_shapes / sizeof half_shapes[0]; k++) {
        const size_t n = half_shapes[k].n, d = half_shapes[k].d, pos0 = half_shapes[k].pos0;
        if (peak_test_quick() && n * d > 300000)
            continue;
        float *f = peak_test_alloc(n * d, 0);
        uint16_t *want = peak_test_half_alloc(n * d), *got = peak_test_half_alloc(n * d);
        ck_assert_int_eq(peak_pe_table(f, PEAK_F32, n, d, pos0, &prm, NULL), PEAK_OK);
        ck_assert_int_eq(peak_convert(want, t, f, PEAK_F32, n * d, NULL), PEAK_OK);
        ck_assert_int_eq(peak_pe_table(got, t, n, d, pos0, &prm, NULL), PEAK_OK);
        CHECK(peak_test_half_guards_intact(got, n * d), "%s %s %s %s %zu x %zu: wrote outside the table",
              TIER, peak_test_type_name(t), layout_names[prm.layout], mode_names[prm.mode], n,
              d);
        for (size_t e = 0; e < n * d; e++)
            CHECK(got[e] == want[e],
                  "%s %s %s %s %zu x %zu from %zu: row %zu col %zu is 0x%04x, the converted "
                  "float32 entry (%a) 0x%04x", TIER, peak_test_type_name(t),
                  layout_names[prm.layout], mode_names[prm.mode], n, d, pos0, e / d, e % d,
                  got[e], (double)f[e], want[e]);
        peak_test_free(f);
        peak_test_half_free(want);
        peak_test_half_free(got);
    }
}
END_TEST

/* The tier's rows driver (its pe_rows kernel, which 16-bit tables go
   through) hands its sink the table's float32 bits: each block's columns
   copied out must rebuild the table, for every layout and mode, parts of
   the columns and scratch blocks of a few rows. */
typedef struct rows_copy {
    const float *scratch;
    size_t ld_scratch, d;
    float *out;
    size_t calls;
} rows_copy;

static void rows_copy_sink(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1)
{
    rows_copy *g = ctx;
    for (size_t t = t0; t < t1; t++)
        memcpy(g->out + t * g->d + c0, g->scratch + (t - t0) * g->ld_scratch + c0,
               (c1 - c0) * sizeof(float));
    g->calls++;
}

START_TEST(rows_kernel_is_the_table)
{
    const peak_pe_params prm = make_params(_i / 2, _i % 2, 10000.0);
    const peak_kernels *k = peak_kernels_for(peak_test_isa);
    const size_t dims[] = {1, 7, 64, 65, 129, 512};
    const size_t parts[][2] = {{0, PEAK_PE_FREQ_END}, {0, 32}, {32, PEAK_PE_FREQ_END}};
    for (size_t j = 0; j < sizeof dims / sizeof dims[0]; j++) {
        const size_t d = dims[j], n = 100, pos0 = 4090, ld = d + 3;
        float *want = peak_test_alloc(n * d, 0), *got = peak_test_alloc(n * d, 0);
        float *scratch = peak_test_alloc(5 * ld, 0);
        for (size_t q = 0; q < 3; q++) {
            const size_t f0 = parts[q][0], f1 = parts[q][1];
            if (f0 >= peak_pe_n_freq(d, prm.layout) && f0 > 0)
                continue;
            peak_test_fill_canary(want, n * d);
            peak_test_fill_canary(got, n * d);
            k->pe_table(want, (ptrdiff_t)d, n, d, pos0, &prm, f0, f1, false);
            rows_copy g = {scratch, ld, d, got, 0};
            k->pe_rows(scratch, 5, ld, n, NULL, pos0, d, &prm, f0, f1, rows_copy_sink, &g);
            CHECK(g.calls > 0 && peak_test_bytes_equal(got, want, n * d * sizeof(float)),
                  "%s %s %s d %zu freqs [%zu, %zu) (SIZE_MAX: to the end): the rows "
                  "kernel's sink rows differ from "
                  "the table kernel's", TIER, layout_names[prm.layout], mode_names[prm.mode], d,
                  f0, f1);
        }
        peak_test_free(want);
        peak_test_free(got);
        peak_test_free(scratch);
    }
}
END_TEST

/* ---- argument validation ----------------------------------------------------- */

/* A rejected call through the tester: every buffer byte for byte as before. */
static void expect_rejected_typed(const char *what, peak_status want, peak_dtype type,
                                  size_t n_pos, size_t d, size_t pos0, const peak_pe_params *prm,
                                  int use_buf)
{
    peak_tester_case c = pe_family.base;
    c.n = 4;
    c.rows = 16;
    peak_tester_problem p;
    ck_assert(peak_tester_setup(&pe_family, &c, &p));
    const pe_problem *e = p.user;
    peak_tester_snapshot(&p);
    const peak_status got =
        peak_pe_table(use_buf ? e->out : NULL, type, n_pos, d, pos0, prm, NULL);
    peak_tester_expect_rejected(&p, what, got, want);
    peak_tester_free(&pe_family, &p);
}

static void expect_rejected(const char *what, peak_status want, size_t n_pos, size_t d,
                            size_t pos0, const peak_pe_params *prm, int use_buf)
{
    expect_rejected_typed(what, want, PEAK_F32, n_pos, d, pos0, prm, use_buf);
}

START_TEST(invalid_arguments)
{
    const size_t top = (size_t)1 << 32;
    const peak_pe_params ok = PEAK_PE_PARAMS_DEFAULT;
    peak_pe_params p = ok;
    const peak_status inval = PEAK_ERR_INVALID_ARG, range = PEAK_ERR_OUT_OF_RANGE;

    expect_rejected("NULL out", inval, 2, 4, 0, &ok, 0);
    expect_rejected("n_pos 0", inval, 0, 4, 0, &ok, 1);
    expect_rejected("d_model 0", inval, 2, 0, 0, &ok, 1);
    p.layout = (peak_pe_layout)3;
    expect_rejected("layout 3", inval, 2, 4, 0, &p, 1);
    p.layout = (peak_pe_layout)-1;
    expect_rejected("layout -1", inval, 2, 4, 0, &p, 1);
    p = ok;
    p.mode = (peak_pe_mode)2;
    expect_rejected("mode 2", inval, 2, 4, 0, &p, 1);
    p.mode = (peak_pe_mode)-1;
    expect_rejected("mode -1", inval, 2, 4, 0, &p, 1);
    const double bad_bases[] = {0.0, -0.0, -1.0, NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < 6; k++) {
        p = ok;
        p.base = bad_bases[k];
        expect_rejected("bad base", inval, 2, 4, 0, &p, 1);
    }
    expect_rejected("pos0 = 2^32", range, 1, 4, top, &ok, 1);
    expect_rejected("pos0 + n_pos = 2^32 + 1", range, 2, 4, top - 1, &ok, 1);
    expect_rejected("pos0 = SIZE_MAX", range, 1, 4, SIZE_MAX, &ok, 1);
    expect_rejected("n_pos = 2^32 + 1", range, top + 1, 1, 0, &ok, 1);
    expect_rejected("n_pos * d_model * 4 overflows", range, (size_t)1 << 31, (size_t)1 << 33, 0,
                    &ok, 1);
    expect_rejected("n_pos * d_model overflows", range, 3, SIZE_MAX / 2, 0, &ok, 1);

    /* A type outside peak_dtype: PEAK_ERR_UNSUPPORTED after the invalid
       arguments, before the ranges; the byte size counts the type's
       elements (2^32 x 2^31 of them are 2^64 bytes as 16-bit). */
    const peak_status unsup = PEAK_ERR_UNSUPPORTED;
    const int bad_types[] = {3, -1, 7, 0x7fffffff};
    for (size_t k = 0; k < 4; k++) {
        const peak_dtype bt = (peak_dtype)bad_types[k];
        expect_rejected_typed("type outside peak_dtype", unsup, bt, 2, 4, 0, &ok, 1);
        expect_rejected_typed("bad type and pos0 = 2^32", unsup, bt, 1, 4, top, &ok, 1);
        expect_rejected_typed("bad type and a size that overflows", unsup, bt, top, top, 0, &ok,
                              1);
        expect_rejected_typed("bad type and NULL out", inval, bt, 2, 4, 0, &ok, 0);
        expect_rejected_typed("bad type and n_pos 0", inval, bt, 0, 4, 0, &ok, 1);
        p = ok;
        p.layout = (peak_pe_layout)3;
        expect_rejected_typed("bad type and layout 3", inval, bt, 2, 4, 0, &p, 1);
    }
    for (size_t k = 0; k < 2; k++) {
        expect_rejected_typed("16-bit: n_pos * d_model * 2 overflows", range, half_types[k], top,
                              (size_t)1 << 31, 0, &ok, 1);
        expect_rejected_typed("16-bit: n_pos * d_model * 2 = 2^63", range, half_types[k],
                              (size_t)1 << 31, (size_t)1 << 31, 0, &ok, 1);
        expect_rejected_typed("16-bit: pos0 + n_pos = 2^32 + 1", range, half_types[k], 2, 4,
                              top - 1, &ok, 1);
        expect_rejected_typed("16-bit: NULL out", inval, half_types[k], 2, 4, 0, &ok, 0);
    }
    expect_rejected("n_pos * d_model * 4 = 2^63", range, (size_t)1 << 30, (size_t)1 << 31, 0,
                    &ok, 1);

    /* The edges that are allowed, checked against the oracle. */
    pe_case(1, 4, top - 1, 10000.0, 0, 0, 0, 0);
    pe_case(2, 4, top - 2, 10000.0, 0, 0, 0, 0);
    float *dflt = peak_test_alloc(64, 0), *buf = peak_test_alloc(64, 0);
    ck_assert_int_eq(peak_pe_table(dflt, PEAK_F32, 4, 16, 77, NULL, NULL), PEAK_OK);
    ck_assert_int_eq(peak_pe_table(buf, PEAK_F32, 4, 16, 77, &ok, NULL), PEAK_OK);
    CHECK(peak_test_bytes_equal(buf, dflt, 64 * sizeof(float)),
          "%s: NULL params differ from PEAK_PE_PARAMS_DEFAULT", TIER);
    peak_test_free(dflt);
    peak_test_free(buf);
}
END_TEST

/* ---- suite -------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("pe-table");
    TCase *tc = tcase_create(peak_isa_name(isa));
    peak_tester_add_sweeps(tc, &pe_family);
    tcase_add_test(tc, sincos_double_bits_and_accuracy);
    tcase_add_loop_test(tc, exact_mode_within_2_pow_minus_23, 0, 3);
    tcase_add_loop_test(tc, position_counts, 0, PE_VARIANTS);
    tcase_add_loop_test(tc, model_sizes_and_far_positions, 0, PE_VARIANTS);
    tcase_add_test(tc, extreme_bases);
    tcase_add_loop_test(tc, large_tables, 0, 3);
    tcase_add_test(tc, strided_rows_keep_gaps);
    tcase_add_loop_test(tc, rows_independent_of_pos0_and_n_pos, 0, 6);
    tcase_add_test(tc, no_nan_and_odd_widths_d_1_to_70);
    tcase_add_loop_test(tc, torch_f32_matches_pytorch, 0, (int)N_TORCH_FILES);
    tcase_add_test(tc, exact_beats_torch_f32_at_5000);
    tcase_add_loop_test(tc, rows_kernel_is_the_table, 0, PE_VARIANTS);
    tcase_add_loop_test(tc, half_exact_within_half_ulp, 0, 6);
    tcase_add_loop_test(tc, half_is_converted_f32, 0, 2 * PE_VARIANTS);
    tcase_add_test(tc, invalid_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
