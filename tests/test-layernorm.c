/*
 * test-layernorm.c - peak_add_layernorm on one tier against a long double
 * oracle written here (two plain passes over the row).
 *
 * Row gaps of every operand hold the canary (a NaN): a kernel that reads
 * past d_model poisons its row, one that writes there fails the gap check.
 */
#include "test-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ck_assert_msg without its cost: Check records the location of every
   passing assertion (a write to its pipe), which dominates element-wise
   comparisons, under AddressSanitizer most of all. */
#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond))                                                             \
            ck_abort_msg(__VA_ARGS__);                                           \
    } while (0)

/* |y - ref| <= LAYERNORM_TOL * max(1, |ref|): normalised values are O(1), so this
   is a relative bound for them and an absolute one near zero. */
#define LAYERNORM_TOL 2e-6

/* ---- problem set-up ------------------------------------------------------ */

enum { USE_R = 1, USE_GAMMA = 2, USE_BETA = 4, USE_SUM = 8 };
enum { ALIAS_NONE, ALIAS_Y_X, ALIAS_SUM_X, ALIAS_SUM_R, ALIAS_Y_X_SUM_R };

typedef struct layernorm_shape {
    size_t rows, d;
    size_t pad;      /* floats of gap after each row */
    size_t misalign; /* floats off a 64-byte boundary */
    unsigned use;    /* USE_* */
    int alias;       /* ALIAS_* */
    float eps;
} layernorm_shape;

typedef struct layernorm_problem {
    layernorm_shape s;
    ptrdiff_t ld;
    size_t n; /* floats in each 2-D buffer */
    float *x, *r, *gamma, *beta, *y, *sum;
    float *x0, *r0; /* inputs before the call (aliases may overwrite them) */
    uint64_t rng;
} layernorm_problem;

static void layernorm_init(layernorm_problem *p, const layernorm_shape *s, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->s = *s;
    p->rng = seed;
    p->ld = (ptrdiff_t)(s->d + s->pad);
    p->n = (s->rows - 1) * (size_t)p->ld + s->d;
    p->x = peak_test_alloc(p->n, s->misalign);
    peak_test_fill_uniform(p->x, p->n, &p->rng, -2.0f, 3.0f);
    if (s->use & USE_R) {
        p->r = peak_test_alloc(p->n, (s->misalign + 1) % 16);
        peak_test_fill_uniform(p->r, p->n, &p->rng, -1.0f, 1.0f);
    }
    if (s->use & USE_GAMMA) {
        p->gamma = peak_test_alloc(s->d, 2);
        peak_test_fill_uniform(p->gamma, s->d, &p->rng, 0.5f, 1.5f);
    }
    if (s->use & USE_BETA) {
        p->beta = peak_test_alloc(s->d, 3);
        peak_test_fill_uniform(p->beta, s->d, &p->rng, -1.0f, 1.0f);
    }
    p->y = s->alias == ALIAS_Y_X || s->alias == ALIAS_Y_X_SUM_R
               ? p->x
               : peak_test_alloc(p->n, (s->misalign + 5) % 16);
    if (s->use & USE_SUM)
        p->sum = s->alias == ALIAS_SUM_X ? p->x
                 : s->alias == ALIAS_SUM_R || s->alias == ALIAS_Y_X_SUM_R
                     ? p->r
                     : peak_test_alloc(p->n, (s->misalign + 7) % 16);
}

/* Restores the canary in the row gaps of a filled 2-D buffer. */
static void canary_gaps(const layernorm_problem *p, float *buf)
{
    for (size_t t = 0; t + 1 < p->s.rows; t++)
        peak_test_fill_canary(buf + t * (size_t)p->ld + p->s.d, p->s.pad);
}

static int owned(const layernorm_problem *p, const float *b)
{
    return b && b != p->x && b != p->r;
}

static void layernorm_free(layernorm_problem *p)
{
    if (owned(p, p->y))
        peak_test_free(p->y);
    if (owned(p, p->sum))
        peak_test_free(p->sum);
    peak_test_free(p->x);
    peak_test_free(p->r);
    peak_test_free(p->gamma);
    peak_test_free(p->beta);
    free(p->x0);
    free(p->r0);
}

/* ---- the oracle ---------------------------------------------------------- */

static float input_at(const layernorm_problem *p, size_t t, size_t j)
{
    const size_t e = t * (size_t)p->ld + j;
    return p->r0 ? p->x0[e] + p->r0[e] : p->x0[e];
}

/* Row t's mean and 1/sqrt(var + eps), two-pass in long double. */
static void oracle_stats(const layernorm_problem *p, size_t t, long double *mean, long double *rstd)
{
    long double acc = 0.0L;
    for (size_t j = 0; j < p->s.d; j++)
        acc += input_at(p, t, j);
    *mean = acc / (long double)p->s.d;
    long double var = 0.0L;
    for (size_t j = 0; j < p->s.d; j++) {
        long double dev = input_at(p, t, j) - *mean;
        var += dev * dev;
    }
    var /= (long double)p->s.d;
    *rstd = 1.0L / sqrtl(var + (long double)p->s.eps);
}

static double oracle_y(const layernorm_problem *p, size_t t, size_t j, long double mean,
                       long double rstd)
{
    long double v = (input_at(p, t, j) - mean) * rstd;
    if (p->gamma)
        v *= p->gamma[j];
    if (p->beta)
        v += p->beta[j];
    return (double)v;
}

/* ---- checking ------------------------------------------------------------ */

static void expect_close(const layernorm_problem *p, size_t t, size_t j, double ref, float got)
{
    CHECK(isnan(ref) ? isnan(got) : fabs((double)got - ref) <= LAYERNORM_TOL * fmax(1.0, fabs(ref)),
          "%s rows%zu d%zu use%u alias%d at [%zu,%zu]: expected %.9g, got %.9g",
          peak_isa_name(peak_test_isa), p->s.rows, p->s.d, p->s.use, p->s.alias, t, j, ref,
          (double)got);
}

static void expect_row(const layernorm_problem *p, size_t t)
{
    long double mean, rstd;
    oracle_stats(p, t, &mean, &rstd);
    const size_t base = t * (size_t)p->ld;
    for (size_t j = 0; j < p->s.d; j++) {
        expect_close(p, t, j, oracle_y(p, t, j, mean, rstd), p->y[base + j]);
        if (p->sum) {
            const float want = input_at(p, t, j);
            CHECK(peak_test_bytes_equal(&want, &p->sum[base + j], sizeof want),
                          "sum[%zu,%zu] = %.9g, want x + r = %.9g", t, j,
                          (double)p->sum[base + j], (double)want);
        }
    }
}

static void expect_gaps(const layernorm_problem *p, const float *buf, const char *name)
{
    for (size_t t = 0; t + 1 < p->s.rows; t++)
        for (size_t g = 0; g < p->s.pad; g++)
            CHECK(peak_test_is_canary(buf[t * (size_t)p->ld + p->s.d + g]),
                          "gap of %s row %zu written", name, t);
}

static float *dup(const float *src, size_t n)
{
    if (!src)
        return NULL;
    float *c = malloc(n * sizeof *c);
    memcpy(c, src, n * sizeof *c);
    return c;
}

/* The long double oracle is emulated in software on AArch64 (binary128),
   so the large streaming calls compare a sample of rows: the first and
   last 256 (the pipeline's start and end) and every 7th (every residue of
   a row's alignment modulo 16). */
static int checked_row(const layernorm_problem *p, size_t t)
{
    return p->s.rows <= 2048 || t < 256 || t + 256 >= p->s.rows || t % 7 == 0;
}

static void layernorm_run(layernorm_problem *p)
{
    canary_gaps(p, p->x);
    if (p->r)
        canary_gaps(p, p->r);
    p->x0 = dup(p->x, p->n);
    p->r0 = dup(p->r, p->n);
    const ptrdiff_t ld = p->ld;
    ck_assert_int_eq(peak_add_layernorm(p->y, ld, p->sum, p->sum ? ld : 0, p->x, ld, p->r,
                                        p->r ? ld : 0, p->gamma, p->beta, p->s.rows, p->s.d,
                                        p->s.eps),
                     PEAK_OK);
    for (size_t t = 0; t < p->s.rows; t++)
        if (checked_row(p, t))
            expect_row(p, t);
    expect_gaps(p, p->y, "y");
    if (p->sum)
        expect_gaps(p, p->sum, "sum");
    if (p->y != p->x && p->sum != p->x)
        CHECK(peak_test_bytes_equal(p->x, p->x0, p->n * sizeof(float)), "x modified");
}

static void layernorm_simple(const layernorm_shape *s, uint64_t seed)
{
    layernorm_problem p;
    layernorm_init(&p, s, seed);
    layernorm_run(&p);
    layernorm_free(&p);
}

/* ---- tests --------------------------------------------------------------- */

/* Sizes 1..70 run as 7 Check tests of 10 sizes each: a fork per size
   costs more than the size itself under AddressSanitizer. */
#define SIZE_GROUP 10
#define SIZE_GROUPS 7

START_TEST(sizes_1_to_70)
{
    for (size_t n = 1 + (size_t)_i * SIZE_GROUP; n <= ((size_t)_i + 1) * SIZE_GROUP; n++) {
        layernorm_shape s = {3, n, 0, 0, USE_R | USE_GAMMA | USE_BETA | USE_SUM, ALIAS_NONE, 1e-5f};
        layernorm_simple(&s, 100 + n);
    }
}
END_TEST

START_TEST(model_sizes)
{
    static const size_t d[] = {512, 768, 1024};
    layernorm_shape s = {4, d[_i], 0, 0, USE_R | USE_GAMMA | USE_BETA, ALIAS_NONE, 1e-5f};
    layernorm_simple(&s, 200 + (uint64_t)_i);
    s.use = USE_SUM | USE_R;
    s.eps = 1e-12f;
    layernorm_simple(&s, 210 + (uint64_t)_i);
}
END_TEST

/* Every combination of optional residual, gamma, beta and sum output. */
START_TEST(optional_operands)
{
    layernorm_shape s = {3, 37, 0, 0, (unsigned)_i, ALIAS_NONE, 1e-5f};
    layernorm_simple(&s, 300 + (uint64_t)_i);
}
END_TEST

START_TEST(strided_misaligned_rows)
{
    static const size_t pads[] = {1, 3, 16, 37};
    for (size_t k = 0; k < 4; k++) {
        layernorm_shape s = {4,
                             5 + (size_t)_i * 17,
                             pads[k],
                             1 + k * 4,
                             USE_R | USE_GAMMA | USE_BETA | USE_SUM,
                             ALIAS_NONE,
                             1e-5f};
        layernorm_simple(&s, 400 + k);
    }
}
END_TEST

START_TEST(in_place_aliases)
{
    for (size_t d = 1; d < 70; d += 17) {
        layernorm_shape s = {3, d, 2, 1, USE_R | USE_GAMMA | USE_BETA | USE_SUM, _i, 1e-5f};
        if (_i == ALIAS_Y_X)
            s.use &= ~(unsigned)USE_SUM;
        layernorm_simple(&s, 500 + d);
    }
}
END_TEST

/* A large common offset: two-pass statistics keep the small deviations. */
START_TEST(large_offset_plus_noise)
{
    static const float offset[] = {1e4f, -1e4f, 1e6f, 3e4f};
    layernorm_shape s = {3, 768, 0, 0, USE_GAMMA | USE_BETA, ALIAS_NONE, 1e-5f};
    layernorm_problem p;
    if (_i == 3)
        s.use |= USE_R; /* the offset arrives through the residual */
    layernorm_init(&p, &s, 600 + (uint64_t)_i);
    for (size_t e = 0; e < p.n; e++) {
        float noise = peak_test_uniform(&p.rng, -1.0f, 1.0f);
        if (_i == 3)
            p.r[e] = offset[_i];
        p.x[e] = _i == 3 ? noise : offset[_i] + noise;
    }
    layernorm_run(&p);
    layernorm_free(&p);
}
END_TEST

/* 1e4 + small noise, the case two-pass statistics exist for: noise from
   1e-2 down to a few float ULPs of 1e4 (a float sum of the row would lose
   it entirely), with and without the offset arriving through r. */
START_TEST(offset_small_noise)
{
    static const float noise[] = {1e-2f, 3e-3f, 5e-2f};
    layernorm_shape s = {
        4, 512 + (size_t)_i * 131, 1, 3, USE_GAMMA | USE_BETA | USE_SUM, ALIAS_NONE, 1e-12f};
    if (_i & 1)
        s.use |= USE_R;
    layernorm_problem p;
    layernorm_init(&p, &s, 650 + (uint64_t)_i);
    for (size_t e = 0; e < p.n; e++) {
        const float v = 1e4f + peak_test_uniform(&p.rng, -noise[_i], noise[_i]);
        if (_i & 1) {
            p.r[e] = 1e4f;
            p.x[e] = v - 1e4f;
        } else {
            p.x[e] = v;
        }
    }
    layernorm_run(&p);
    layernorm_free(&p);
}
END_TEST

/* Rows longer than L1 and than one pass-2 flush block, many of them (the
   prefetch of later rows runs out at the end), strided and misaligned. */
START_TEST(long_rows)
{
    static const size_t d[] = {4099, 1000, 257};
    layernorm_shape s = {_i == 2 ? 300 : 5, d[_i], 7, 5, USE_R | USE_GAMMA | USE_BETA | USE_SUM,
                         ALIAS_NONE,        1e-5f};
    layernorm_simple(&s, 680 + (uint64_t)_i);
}
END_TEST

/* Outputs of 32 MiB and more are written with streaming stores, in the
   rows of y (and sum) that start on a vector boundary: with d_model 515
   every 16th row does; y and sum share a misalignment or do not (sum
   ordinary), or y is x (in place); with 512 and y aligned, every row. */
START_TEST(streaming_outputs)
{
    layernorm_shape s = {16300, 515, 0, 3, USE_R | USE_BETA | USE_SUM, ALIAS_NONE, 1e-5f};
    if (peak_test_quick()) /* 100 rows: no streaming stores, same aliasing */
        s.rows = 100;
    if (_i == 2)
        s.alias = ALIAS_Y_X;
    if (_i >= 2)
        s.use &= ~(unsigned)USE_SUM;
    if (_i == 3) { /* layernorm_init puts y 5 floats after x's misalignment */
        s.d = 512;
        s.misalign = 11;
    }
    layernorm_problem p;
    layernorm_init(&p, &s, 690 + (uint64_t)_i);
    if (_i == 0) { /* layernorm_init offsets sum from y by 2 floats; align them alike */
        peak_test_free(p.sum);
        p.sum = peak_test_alloc(p.n, (s.misalign + 5) % 16);
    }
    layernorm_run(&p);
    layernorm_free(&p);
}
END_TEST

/* Found by tests/fuzz (fuzz-layernorm): the SIMD tiers square deviations
   in float, which overflowed for values near -3e38 (y NaN) and flushed to
   0 under FTZ for values near -1e-20 with eps 0 (y inf), and lost
   precision for such rows without FTZ; such rows now take the reference's
   double-precision path.  _i: huge values, tiny values, tiny under FTZ. */
START_TEST(extreme_rows_as_the_reference)
{
    enum { N = 37 };
    float x[N], y[N], want[N];
    uint64_t rng = 720 + (uint64_t)_i;
    for (size_t j = 0; j < N; j++)
        x[j] = _i == 0 ? -peak_test_uniform(&rng, 1e38f, 3.4e38f)
                       : -peak_test_uniform(&rng, 1e-21f, 1e-20f);
    unsigned csr = 0;
    if (_i == 2 && !peak_test_ftz_on(&csr))
        return;
    ck_assert_int_eq(peak_add_layernorm(y, N, NULL, 0, x, N, NULL, 0, NULL, NULL, 1, N, 0.0f),
                     PEAK_OK);
    peak_kernels_for(PEAK_ISA_SCALAR)->add_layernorm(want, N, NULL, 0, x, N, NULL, 0, NULL, NULL,
                                                     1, N, 0.0f);
    if (_i == 2)
        peak_test_ftz_restore(csr);
    for (size_t j = 0; j < N; j++)
        CHECK(isfinite(y[j]) &&
                  fabsf(y[j] - want[j]) <= LAYERNORM_TOL * fmaxf(1.0f, fabsf(want[j])),
              "%s case %d: y[%zu] = %a, reference %a", peak_isa_name(peak_test_isa), _i, j,
              (double)y[j], (double)want[j]);
}
END_TEST

/* A constant row has variance 0: y = 0 * gamma + beta = beta. */
START_TEST(constant_rows)
{
    layernorm_shape s = {2, _i == 0 ? 1 : 64, 0, 0, USE_GAMMA | USE_BETA, ALIAS_NONE, 1e-5f};
    layernorm_problem p;
    layernorm_init(&p, &s, 700 + (uint64_t)_i);
    for (size_t e = 0; e < p.n; e++)
        p.x[e] = 42.5f;
    layernorm_run(&p);
    layernorm_free(&p);
}
END_TEST

START_TEST(zero_eps)
{
    layernorm_shape s = {3, 33, 1, 0, USE_R | USE_BETA, ALIAS_NONE, 0.0f};
    layernorm_simple(&s, 800);
}
END_TEST

/* eps = 0 on a constant row: var + eps = 0, so y = 0 * inf = NaN in every
   element, as torch.nn.functional.layer_norm gives (peak.h); sum is still
   x + r, and the row's neighbours are unaffected.  Rows 0 and 2 of 4 are
   constant (at width 1 every row is), at widths covering one element, lane
   tails and several vectors. */
START_TEST(zero_eps_constant_rows)
{
    static const size_t widths[] = {1, 7, 8, 13, 16, 33, 64, 100};
    layernorm_shape s = {
        4, widths[_i], 3, (size_t)_i % 4, USE_R | USE_GAMMA | USE_BETA | USE_SUM, ALIAS_NONE, 0.0f};
    layernorm_problem p;
    layernorm_init(&p, &s, 820 + (uint64_t)_i);
    for (size_t t = 0; t < 4; t += 2)
        for (size_t j = 0; j < s.d; j++) {
            p.x[t * (size_t)p.ld + j] = 1.25f;
            p.r[t * (size_t)p.ld + j] = -3.5f;
        }
    layernorm_run(&p); /* the oracle's own 0 * inf is NaN there */
    for (size_t t = 0; t < 4; t++)
        for (size_t j = 0; j < s.d; j++)
            CHECK(!isnan(p.y[t * (size_t)p.ld + j]) == (t % 2 == 1 && s.d > 1),
                  "%s d%zu: y[%zu,%zu] = %a", peak_isa_name(peak_test_isa), s.d, t, j,
                  (double)p.y[t * (size_t)p.ld + j]);
    layernorm_free(&p);
}
END_TEST

/* ---- invalid arguments ------------------------------------------------------ */

typedef struct layernorm_call {
    float *y, *sum;
    ptrdiff_t ld_y, ld_sum, ld_x, ld_r;
    const float *x, *r;
    size_t rows, d;
    float eps;
} layernorm_call;

/* The call must fail and write nothing: not y, not sum, and not x or r
   (the alias cases pass them as outputs). */
static void expect_rejected(const layernorm_problem *p, const char *what, layernorm_call c)
{
    peak_test_fill_canary(p->y, p->n);
    peak_test_fill_canary(p->sum, p->n);
    float *x0 = dup(p->x, p->n), *r0 = dup(p->r, p->n);
    peak_status got = peak_add_layernorm(c.y, c.ld_y, c.sum, c.ld_sum, c.x, c.ld_x, c.r, c.ld_r,
                                         p->gamma, p->beta, c.rows, c.d, c.eps);
    CHECK(got == PEAK_ERR_INVALID_ARG, "%s: %s: status %d",
                  peak_isa_name(peak_test_isa), what, (int)got);
    for (size_t e = 0; e < p->n; e++)
        CHECK(peak_test_is_canary(p->y[e]) && peak_test_is_canary(p->sum[e]),
                      "%s: output changed", what);
    CHECK(peak_test_bytes_equal(x0, p->x, p->n * sizeof(float)) &&
              peak_test_bytes_equal(r0, p->r, p->n * sizeof(float)),
          "%s: x or r changed", what);
    free(x0);
    free(r0);
}

START_TEST(invalid_arguments)
{
    layernorm_shape s = {3, 16, 0, 0, USE_R | USE_GAMMA | USE_BETA | USE_SUM, ALIAS_NONE, 1e-5f};
    layernorm_problem p;
    layernorm_init(&p, &s, 900);
    const ptrdiff_t ld = p.ld;
    const layernorm_call ok = {p.y, p.sum, ld, ld, ld, ld, p.x, p.r, 3, 16, 1e-5f};
    layernorm_call c = ok;
    c.y = NULL;
    expect_rejected(&p, "NULL y", c);
    c = ok;
    c.x = NULL;
    expect_rejected(&p, "NULL x", c);
    c = ok;
    c.rows = 0;
    expect_rejected(&p, "zero rows", c);
    c = ok;
    c.d = 0;
    expect_rejected(&p, "zero d_model", c);
    ptrdiff_t *lds[4] = {&c.ld_y, &c.ld_sum, &c.ld_x, &c.ld_r};
    for (int k = 0; k < 4; k++) {
        c = ok;
        *lds[k] = 15;
        expect_rejected(&p, "row stride < d_model", c);
    }
    static const float bad_eps[] = {-1e-5f, NAN, INFINITY};
    for (int k = 0; k < 3; k++) {
        c = ok;
        c.eps = bad_eps[k];
        expect_rejected(&p, "bad eps", c);
    }
    c = ok;
    c.sum = c.y;
    expect_rejected(&p, "sum == y", c);
    c = ok;
    c.y = (float *)p.x;
    c.ld_y = ld + 1;
    expect_rejected(&p, "y == x with another stride", c);
    c = ok;
    c.sum = (float *)p.x;
    c.ld_sum = ld + 2;
    expect_rejected(&p, "sum == x with another stride", c);
    c = ok;
    c.sum = (float *)p.r;
    c.ld_sum = ld + 2;
    expect_rejected(&p, "sum == r with another stride", c);
    /* Partial overlaps: the SIMD tiers write row t while reading row t+1. */
    c = ok;
    c.y = p.x + ld;
    c.rows = 2;
    expect_rejected(&p, "y one row after x", c);
    c = ok;
    c.sum = p.r + 1;
    c.rows = 2;
    expect_rejected(&p, "sum one float after r", c);
    c = ok;
    c.sum = p.y + 8;
    c.rows = 2;
    expect_rejected(&p, "sum overlapping y", c);
    float *g0 = dup(p.gamma, 16);
    c = ok;
    c.y = p.gamma;
    c.rows = 1;
    expect_rejected(&p, "y == gamma", c);
    c = ok;
    c.sum = p.beta + 3;
    c.d = 13;
    c.rows = 1;
    expect_rejected(&p, "sum overlapping beta", c);
    CHECK(peak_test_bytes_equal(g0, p.gamma, 16 * sizeof(float)), "gamma changed");
    free(g0);
    layernorm_free(&p);
}
END_TEST

/* Rows that interleave without sharing a float are accepted: x and y in
   one [x | y | pad] buffer.  The result equals the same call on separate
   buffers, bit for bit. */
START_TEST(interleaved_buffers)
{
    const size_t rows = 5, d = 37, ld = 2 * d + 3;
    float *buf = peak_test_alloc(rows * ld, 0);
    float *x = peak_test_alloc(rows * d, 1), *y = peak_test_alloc(rows * d, 2);
    uint64_t rng = 950;
    peak_test_fill_uniform(buf, rows * ld, &rng, -2.0f, 3.0f);
    for (size_t t = 0; t < rows; t++)
        memcpy(x + t * d, buf + t * ld, d * sizeof(float));
    float g[37];
    peak_test_fill_uniform(g, d, &rng, 0.5f, 1.5f);
    ck_assert_int_eq(peak_add_layernorm(y, (ptrdiff_t)d, NULL, 0, x, (ptrdiff_t)d, NULL, 0, g,
                                        NULL, rows, d, 1e-5f),
                     PEAK_OK);
    ck_assert_int_eq(peak_add_layernorm(buf + d, (ptrdiff_t)ld, NULL, 0, buf, (ptrdiff_t)ld,
                                        NULL, 0, g, NULL, rows, d, 1e-5f),
                     PEAK_OK);
    for (size_t t = 0; t < rows; t++)
        CHECK(peak_test_bytes_equal(y + t * d, buf + t * ld + d, d * sizeof(float)),
              "%s: interleaved row %zu differs", peak_isa_name(peak_test_isa), t);
    peak_test_free(buf);
    peak_test_free(x);
    peak_test_free(y);
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("layernorm");
    TCase *tc = tcase_create(peak_isa_name(isa));
    tcase_add_loop_test(tc, sizes_1_to_70, 0, SIZE_GROUPS);
    tcase_add_loop_test(tc, model_sizes, 0, 3);
    tcase_add_loop_test(tc, optional_operands, 0, 16);
    tcase_add_loop_test(tc, strided_misaligned_rows, 0, 4);
    tcase_add_loop_test(tc, in_place_aliases, ALIAS_Y_X, ALIAS_Y_X_SUM_R + 1);
    tcase_add_loop_test(tc, large_offset_plus_noise, 0, 4);
    tcase_add_loop_test(tc, offset_small_noise, 0, 3);
    tcase_add_loop_test(tc, long_rows, 0, 3);
    tcase_add_loop_test(tc, streaming_outputs, 0, 4);
    tcase_add_loop_test(tc, constant_rows, 0, 2);
    tcase_add_test(tc, zero_eps);
    tcase_add_loop_test(tc, zero_eps_constant_rows, 0, 8);
    tcase_add_loop_test(tc, extreme_rows_as_the_reference, 0, 3);
    tcase_add_test(tc, invalid_arguments);
    tcase_add_test(tc, interleaved_buffers);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
