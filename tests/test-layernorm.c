/*
 * test-layernorm.c - peak_add_layernorm on one tier against a long double
 * oracle written here (two plain passes over the row).  The sweeps (sizes,
 * optional operands, row gaps, misalignment, in place) are tests/tester.c's;
 * this file gives the problem, the oracle and the special cases.
 */
#include "tester.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* |y - ref| <= LAYERNORM_TOL * max(1, |ref|): normalised values are O(1), so this
   is a relative bound for them and an absolute one near zero. */
#define LAYERNORM_TOL 2e-6

/* ---- the problem ----------------------------------------------------------- */

/* case.variant: which optional operands are passed; case.alias: ALIAS_*. */
enum { USE_R = 1, USE_GAMMA = 2, USE_BETA = 4, USE_SUM = 8, USE_ALL = 15 };
enum { ALIAS_NONE, ALIAS_Y_X, ALIAS_SUM_X, ALIAS_SUM_R, ALIAS_Y_X_SUM_R, N_ALIASES = 4 };
/* case.data: DATA_SUM_AS_Y puts sum at y's misalignment (both streamed). */
enum { DATA_PLAIN, DATA_SUM_AS_Y };

typedef struct layernorm_problem {
    float *x, *r, *gamma, *beta, *y, *sum;
    ptrdiff_t ld;
} layernorm_problem;

static int layernorm_setup(peak_tester_problem *p)
{
    const peak_tester_case *c = &p->c;
    unsigned use = c->variant;
    if (c->alias == ALIAS_Y_X)
        use &= ~(unsigned)USE_SUM;
    if (c->alias >= ALIAS_SUM_X && !(use & USE_SUM))
        return 0;
    if ((c->alias == ALIAS_SUM_R || c->alias == ALIAS_Y_X_SUM_R) && !(use & USE_R))
        return 0;
    layernorm_problem *l = calloc(1, sizeof *l);
    if (!l)
        abort();
    p->user = l;
    l->ld = (ptrdiff_t)(c->n + c->gap);
    l->x = peak_tester_input(p, "x", c->rows, c->n, l->ld, 0);
    peak_tester_fill(p, l->x, -2.0f, 3.0f);
    if (use & USE_R) {
        l->r = peak_tester_input(p, "r", c->rows, c->n, l->ld, 1);
        peak_tester_fill(p, l->r, -1.0f, 1.0f);
    }
    if (use & USE_GAMMA) {
        l->gamma = peak_tester_input(p, "gamma", 1, c->n, (ptrdiff_t)c->n, 2);
        peak_tester_fill(p, l->gamma, 0.5f, 1.5f);
    }
    if (use & USE_BETA) {
        l->beta = peak_tester_input(p, "beta", 1, c->n, (ptrdiff_t)c->n, 3);
        peak_tester_fill(p, l->beta, -1.0f, 1.0f);
    }
    l->y = c->alias == ALIAS_Y_X || c->alias == ALIAS_Y_X_SUM_R
               ? peak_tester_alias(p, "y", l->x, PEAK_TESTER_REL, LAYERNORM_TOL)
               : peak_tester_output(p, "y", c->rows, c->n, l->ld, 5, PEAK_TESTER_REL,
                                    LAYERNORM_TOL);
    if (use & USE_SUM) /* sum = x + r in float: exact */
        l->sum = c->alias == ALIAS_SUM_X ? peak_tester_alias(p, "sum", l->x, PEAK_TESTER_EXACT, 0)
                 : c->alias == ALIAS_SUM_R || c->alias == ALIAS_Y_X_SUM_R
                     ? peak_tester_alias(p, "sum", l->r, PEAK_TESTER_EXACT, 0)
                     : peak_tester_output(p, "sum", c->rows, c->n, l->ld,
                                          c->data == DATA_SUM_AS_Y ? 5 : 7, PEAK_TESTER_EXACT, 0);
    return 1;
}

static peak_status layernorm_call(peak_tester_problem *p)
{
    const layernorm_problem *l = p->user;
    return peak_add_layernorm(l->y, l->ld, l->sum, l->sum ? l->ld : 0, l->x, l->ld, l->r,
                              l->r ? l->ld : 0, l->gamma, l->beta, p->c.rows, p->c.n, p->c.param, NULL,
                              NULL);
}

/* ---- the oracle ------------------------------------------------------------ */

/* x + r of row t before the call, in float as the kernels add them. */
static void input_row(const peak_tester_problem *p, size_t t, float *s)
{
    const layernorm_problem *l = p->user;
    const size_t base = t * (size_t)l->ld;
    const float *x0 = peak_tester_before(p, l->x) + base;
    const float *r0 = l->r ? peak_tester_before(p, l->r) + base : NULL;
    for (size_t j = 0; j < p->c.n; j++)
        s[j] = r0 ? x0[j] + r0[j] : x0[j];
}

/* y: two-pass mean and variance in long double; sum: x + r. */
static void layernorm_oracle_row(const peak_tester_problem *p, size_t buf, size_t t, double *ref)
{
    const layernorm_problem *l = p->user;
    const size_t d = p->c.n;
    float *s = malloc(d * sizeof *s);
    if (!s)
        abort();
    input_row(p, t, s);
    if (strcmp(p->buf[buf].name, "sum") == 0) {
        for (size_t j = 0; j < d; j++)
            ref[j] = s[j];
        free(s);
        return;
    }
    long double acc = 0.0L;
    for (size_t j = 0; j < d; j++)
        acc += s[j];
    const long double mean = acc / (long double)d;
    long double var = 0.0L;
    for (size_t j = 0; j < d; j++) {
        const long double dev = s[j] - mean;
        var += dev * dev;
    }
    var /= (long double)d;
    const long double rstd = 1.0L / sqrtl(var + (long double)p->c.param);
    for (size_t j = 0; j < d; j++) {
        long double v = (s[j] - mean) * rstd;
        if (l->gamma)
            v *= l->gamma[j];
        if (l->beta)
            v += l->beta[j];
        ref[j] = (double)v;
    }
    free(s);
}

static void layernorm_teardown(peak_tester_problem *p)
{
    free(p->user);
}

/* Base case of every sweep: 3 rows, every operand, eps 1e-5. */
static const peak_tester_family layernorm = {
    .name = "layernorm",
    .setup = layernorm_setup,
    .call = layernorm_call,
    .oracle_row = layernorm_oracle_row,
    .teardown = layernorm_teardown,
    .same_bits = 0, /* peak.h: each tier within 2e-6 of the exact LayerNorm */
    .n_variants = 16,
    .n_aliases = N_ALIASES,
    .base = {.rows = 3, .variant = USE_ALL, .param = 1e-5f},
};

static peak_tester_case with(size_t rows, size_t d, unsigned use, float eps, uint64_t seed)
{
    peak_tester_case c = layernorm.base;
    c.rows = rows;
    c.n = d;
    c.variant = use;
    c.param = eps;
    c.seed = seed;
    return c;
}

/* x (and r) of a set-up problem, element (t, j) of the rows' extents. */
#define AT(buf, t, j) ((buf)[(t) * (size_t)l->ld + (j)])

/* ---- special cases ------------------------------------------------------------- */

START_TEST(model_sizes)
{
    static const size_t d[] = {512, 768, 1024};
    peak_tester_case c = with(4, d[_i], USE_R | USE_GAMMA | USE_BETA, 1e-5f, 200 + (uint64_t)_i);
    peak_tester_check(&layernorm, &c);
    c = with(4, d[_i], USE_SUM | USE_R, 1e-12f, 210 + (uint64_t)_i);
    peak_tester_check(&layernorm, &c);
}
END_TEST

/* A large common offset: two-pass statistics keep the small deviations. */
START_TEST(large_offset_plus_noise)
{
    static const float offset[] = {1e4f, -1e4f, 1e6f, 3e4f};
    peak_tester_case c = with(3, 768, USE_GAMMA | USE_BETA, 1e-5f, 600 + (uint64_t)_i);
    if (_i == 3)
        c.variant |= USE_R; /* the offset arrives through the residual */
    peak_tester_problem p;
    peak_tester_setup(&layernorm, &c, &p);
    const layernorm_problem *l = p.user;
    for (size_t t = 0; t < c.rows; t++)
        for (size_t j = 0; j < c.n; j++) {
            const float noise = peak_test_uniform(&p.rng, -1.0f, 1.0f);
            if (_i == 3)
                AT(l->r, t, j) = offset[_i];
            AT(l->x, t, j) = _i == 3 ? noise : offset[_i] + noise;
        }
    peak_tester_run(&layernorm, &p);
    peak_tester_free(&layernorm, &p);
}
END_TEST

/* 1e4 + small noise, the case two-pass statistics exist for: noise from
   1e-2 down to a few float ULPs of 1e4 (a float sum of the row would lose
   it entirely), with and without the offset arriving through r. */
START_TEST(offset_small_noise)
{
    static const float noise[] = {1e-2f, 3e-3f, 5e-2f};
    peak_tester_case c = with(4, 512 + (size_t)_i * 131, USE_GAMMA | USE_BETA | USE_SUM, 1e-12f,
                              650 + (uint64_t)_i);
    c.gap = 1;
    c.misalign = 3;
    if (_i & 1)
        c.variant |= USE_R;
    peak_tester_problem p;
    peak_tester_setup(&layernorm, &c, &p);
    const layernorm_problem *l = p.user;
    for (size_t t = 0; t < c.rows; t++)
        for (size_t j = 0; j < c.n; j++) {
            const float v = 1e4f + peak_test_uniform(&p.rng, -noise[_i], noise[_i]);
            if (_i & 1) {
                AT(l->r, t, j) = 1e4f;
                AT(l->x, t, j) = v - 1e4f;
            } else {
                AT(l->x, t, j) = v;
            }
        }
    peak_tester_run(&layernorm, &p);
    peak_tester_free(&layernorm, &p);
}
END_TEST

/* Rows longer than L1 and than one pass-2 flush block, many of them (the
   prefetch of later rows runs out at the end), strided and misaligned. */
START_TEST(long_rows)
{
    static const size_t d[] = {4099, 1000, 257};
    peak_tester_case c = with(_i == 2 ? 300 : 5, d[_i], USE_ALL, 1e-5f, 680 + (uint64_t)_i);
    c.gap = 7;
    c.misalign = 5;
    peak_tester_check(&layernorm, &c);
}
END_TEST

/* Outputs of 32 MiB and more are written with streaming stores, in the
   rows of y (and sum) that start on a vector boundary: with d_model 515
   every 16th row does; y and sum share a misalignment or do not (sum
   ordinary), or y is x (in place); with 512 and y aligned, every row. */
START_TEST(streaming_outputs)
{
    peak_tester_case c = with(16300, 515, USE_R | USE_BETA | USE_SUM, 1e-5f, 690 + (uint64_t)_i);
    c.misalign = 3;
    if (peak_test_quick()) /* 100 rows: no streaming stores, same aliasing */
        c.rows = 100;
    if (_i == 0)
        c.data = DATA_SUM_AS_Y;
    if (_i == 2)
        c.alias = ALIAS_Y_X;
    if (_i >= 2)
        c.variant &= ~(unsigned)USE_SUM;
    if (_i == 3) { /* y is 5 floats after x's misalignment: aligned */
        c.n = 512;
        c.misalign = 11;
    }
    peak_tester_check(&layernorm, &c);
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
    ck_assert_int_eq(peak_add_layernorm(y, N, NULL, 0, x, N, NULL, 0, NULL, NULL, 1, N, 0.0f, NULL, NULL),
                     PEAK_OK);
    peak_kernels_for(PEAK_ISA_SCALAR)->add_layernorm(want, N, NULL, 0, x, N, NULL, 0, NULL, NULL,
                                                     1, N, 0.0f, PEAK_F32, 0, false);
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
    peak_tester_case c = with(2, _i == 0 ? 1 : 64, USE_GAMMA | USE_BETA, 1e-5f, 700 + (uint64_t)_i);
    peak_tester_problem p;
    peak_tester_setup(&layernorm, &c, &p);
    const layernorm_problem *l = p.user;
    for (size_t t = 0; t < c.rows; t++)
        for (size_t j = 0; j < c.n; j++)
            AT(l->x, t, j) = 42.5f;
    peak_tester_run(&layernorm, &p);
    peak_tester_free(&layernorm, &p);
}
END_TEST

START_TEST(zero_eps)
{
    peak_tester_case c = with(3, 33, USE_R | USE_BETA, 0.0f, 800);
    c.gap = 1;
    peak_tester_check(&layernorm, &c);
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
    peak_tester_case c = with(4, widths[_i], USE_ALL, 0.0f, 820 + (uint64_t)_i);
    c.gap = 3;
    c.misalign = (size_t)_i % 4;
    peak_tester_problem p;
    peak_tester_setup(&layernorm, &c, &p);
    const layernorm_problem *l = p.user;
    for (size_t t = 0; t < 4; t += 2)
        for (size_t j = 0; j < c.n; j++) {
            AT(l->x, t, j) = 1.25f;
            AT(l->r, t, j) = -3.5f;
        }
    peak_tester_run(&layernorm, &p); /* the oracle's own 0 * inf is NaN there */
    for (size_t t = 0; t < 4; t++)
        for (size_t j = 0; j < c.n; j++)
            CHECK(!isnan(AT(l->y, t, j)) == (t % 2 == 1 && c.n > 1), "%s d%zu: y[%zu,%zu] = %a",
                  peak_isa_name(peak_test_isa), c.n, t, j, (double)AT(l->y, t, j));
    peak_tester_free(&layernorm, &p);
}
END_TEST

/* ---- invalid arguments ------------------------------------------------------ */

typedef struct layernorm_args {
    float *y, *sum;
    ptrdiff_t ld_y, ld_sum, ld_x, ld_r;
    const float *x, *r;
    size_t rows, d;
    float eps;
} layernorm_args;

/* The call must fail and write nothing: no byte of any buffer changes (the
   alias cases pass x, r, gamma or beta as outputs). */
static void expect_rejected(peak_tester_problem *p, const char *what, layernorm_args a)
{
    const layernorm_problem *l = p->user;
    peak_tester_snapshot(p);
    const peak_status got = peak_add_layernorm(a.y, a.ld_y, a.sum, a.ld_sum, a.x, a.ld_x, a.r,
                                               a.ld_r, l->gamma, l->beta, a.rows, a.d, a.eps, NULL, NULL);
    peak_tester_expect_rejected(p, what, got, PEAK_ERR_INVALID_ARG);
}

START_TEST(invalid_arguments)
{
    const peak_tester_case cs = with(3, 16, USE_ALL, 1e-5f, 900);
    peak_tester_problem p;
    peak_tester_setup(&layernorm, &cs, &p);
    const layernorm_problem *l = p.user;
    const ptrdiff_t ld = l->ld;
    const layernorm_args ok = {l->y, l->sum, ld, ld, ld, ld, l->x, l->r, 3, 16, 1e-5f};
    layernorm_args c = ok;
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
    c.y = l->x;
    c.ld_y = ld + 1;
    expect_rejected(&p, "y == x with another stride", c);
    c = ok;
    c.sum = l->x;
    c.ld_sum = ld + 2;
    expect_rejected(&p, "sum == x with another stride", c);
    c = ok;
    c.sum = l->r;
    c.ld_sum = ld + 2;
    expect_rejected(&p, "sum == r with another stride", c);
    /* Partial overlaps: the SIMD tiers write row t while reading row t+1. */
    c = ok;
    c.y = l->x + ld;
    c.rows = 2;
    expect_rejected(&p, "y one row after x", c);
    c = ok;
    c.sum = l->r + 1;
    c.rows = 2;
    expect_rejected(&p, "sum one float after r", c);
    c = ok;
    c.sum = l->y + 8;
    c.rows = 2;
    expect_rejected(&p, "sum overlapping y", c);
    c = ok;
    c.y = l->gamma;
    c.rows = 1;
    expect_rejected(&p, "y == gamma", c);
    c = ok;
    c.sum = l->beta + 3;
    c.d = 13;
    c.rows = 1;
    expect_rejected(&p, "sum overlapping beta", c);
    peak_tester_free(&layernorm, &p);
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
                                        NULL, rows, d, 1e-5f, NULL, NULL),
                     PEAK_OK);
    ck_assert_int_eq(peak_add_layernorm(buf + d, (ptrdiff_t)ld, NULL, 0, buf, (ptrdiff_t)ld,
                                        NULL, 0, g, NULL, rows, d, 1e-5f, NULL, NULL),
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
    peak_tester_add_sweeps(tc, &layernorm);
    tcase_add_loop_test(tc, model_sizes, 0, 3);
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
