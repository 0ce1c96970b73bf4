/*
 * test-softmax.c - peak_softmax on one tier against a double-precision
 * oracle written here (plain loops, independent of kernels/mask.h).
 *
 * x is filled only where the oracle says a key is visible; every other
 * float of x (masked keys and row gaps) keeps the canary, which is a NaN, so
 * a kernel that reads a masked score poisons its row and fails.  y gaps must
 * still hold the canary afterwards.  Buffers have their exact size, so that
 * AddressSanitizer sees any read past a row (tests/meson.build runs the
 * suite on every tier; CI runs it under ASan too).
 *
 * Every finished row is also checked to sum to 1 within SM_SUM_TOL, and the
 * largest errors seen are reported by accuracy_report (meson test -v).
 * wide_range_relative_ulp holds the rows whose probabilities reach down to
 * FLT_MIN, where the bound is hardest to keep.
 */
#include "test-util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A visible probability in float's normal range passes if it is within
   SM_ULP_TOL units in the last place of the oracle's, rounded to float:
   relative, however small the probability (peak.h).  Below FLT_MIN a
   probability may be flushed to 0 (peak.h): it passes within FLT_MIN. */
#define SM_ULP_TOL 4
/* Each row with any visible finite score sums to 1 within this. */
#define SM_SUM_TOL 1e-6

/* The largest errors seen in this process (each Check test runs in its own
   fork, so accuracy_report and wide_range_relative_ulp gather their own). */
typedef struct sm_stats {
    int64_t max_ulp;     /* over probabilities >= FLT_MIN */
    int64_t max_ulp_top; /* over probabilities >= 1/4 */
    double max_real_ulp; /* |y - oracle| / ulp(oracle), probabilities >= FLT_MIN */
    double min_p;        /* the smallest probability >= FLT_MIN checked */
    double max_sum_err;  /* |row sum - 1| */
    size_t rows, probs;  /* rows, and probabilities >= FLT_MIN, checked */
} sm_stats;
static sm_stats sm_seen = {0, 0, 0.0, 1.0, 0.0, 0, 0};

/* ---- problem set-up ------------------------------------------------------ */

typedef struct sm_shape {
    size_t B, H, Lq, Lk;
    size_t x_pad, y_pad; /* floats of gap after each row */
    size_t misalign;     /* floats off a 64-byte boundary */
    int in_place;
    int bl_layout; /* rows ordered [b, i, h] instead of [b, h, i] */
} sm_shape;

typedef struct sm_problem {
    sm_shape s;
    peak_softmax_desc d;
    float *x, *y, *x0; /* y == x in place; x0 = x before the call */
    size_t nx, ny;
    uint8_t *keep;
    float *bias;
    int32_t *key_len;
    uint64_t rng;
} sm_problem;

/* Elements spanned by a [B, H, Lq, Lk] operand with these strides. */
static size_t span(const sm_shape *s, const ptrdiff_t st[3])
{
    return (s->B - 1) * (size_t)st[0] + (s->H - 1) * (size_t)st[1] +
           (s->Lq - 1) * (size_t)st[2] + s->Lk;
}

static void layout_strides(const sm_shape *s, size_t row, ptrdiff_t st[3])
{
    if (s->bl_layout) {
        st[0] = (ptrdiff_t)(s->Lq * s->H * row);
        st[1] = (ptrdiff_t)row;
        st[2] = (ptrdiff_t)(s->H * row);
    } else {
        st[0] = (ptrdiff_t)(s->H * s->Lq * row);
        st[1] = (ptrdiff_t)(s->Lq * row);
        st[2] = (ptrdiff_t)row;
    }
}

static void sm_init(sm_problem *p, const sm_shape *s, uint64_t seed)
{
    peak_softmax_desc d0 = PEAK_SOFTMAX_DESC_DEFAULT;
    memset(p, 0, sizeof *p);
    p->s = *s;
    p->d = d0;
    p->d.batch = s->B;
    p->d.heads = s->H;
    p->d.q_len = s->Lq;
    p->d.k_len = s->Lk;
    p->rng = seed;
    layout_strides(s, s->Lk + s->x_pad, p->d.x_stride);
    p->nx = span(s, p->d.x_stride);
    p->x = peak_test_alloc(p->nx, s->misalign);
    if (s->in_place) {
        memcpy(p->d.y_stride, p->d.x_stride, sizeof p->d.y_stride);
        p->y = p->x;
        p->ny = p->nx;
    } else {
        layout_strides(s, s->Lk + s->y_pad, p->d.y_stride);
        p->ny = span(s, p->d.y_stride);
        p->y = peak_test_alloc(p->ny, (s->misalign + 3) % 16);
    }
}

static void sm_free(sm_problem *p)
{
    if (p->y != p->x)
        peak_test_free(p->y);
    peak_test_free(p->x);
    peak_test_free(p->bias);
    free(p->x0);
    free(p->keep);
    free(p->key_len);
}

/* Random masks over [B, H, Lq, Lk] (test-util.c). */
static peak_test_dims sm_dims(const sm_problem *p)
{
    return (peak_test_dims){p->s.B, p->s.H, p->s.Lq, p->s.Lk};
}

static void sm_add_keep(sm_problem *p, unsigned broadcast, double density)
{
    p->keep = peak_test_add_keep(&p->d.mask, sm_dims(p), broadcast, density, &p->rng);
}

static void sm_add_bias(sm_problem *p, unsigned broadcast, float lo, float hi, double masked)
{
    p->bias = peak_test_add_bias(&p->d.mask, sm_dims(p), broadcast, lo, hi, masked, 1, &p->rng);
}

static void sm_add_key_len(sm_problem *p)
{
    p->key_len = peak_test_add_key_len(&p->d.mask, sm_dims(p), &p->rng);
}

/* ---- the oracle ---------------------------------------------------------- */

static const float *row_of(const float *base, const ptrdiff_t st[3], size_t b, size_t h, size_t i)
{
    return base + (ptrdiff_t)b * st[0] + (ptrdiff_t)h * st[1] + (ptrdiff_t)i * st[2];
}

static int oracle_visible(const peak_softmax_desc *d, size_t b, size_t h, size_t i, size_t j)
{
    return peak_test_mask_visible(&d->mask, d->q_len, d->k_len, b, h, i, j);
}

/* The score as peak.h defines it: float x*scale, then float + bias. */
static float oracle_score(const peak_softmax_desc *d, const float *x, size_t b, size_t h,
                          size_t i, size_t j)
{
    const peak_mask *m = &d->mask;
    float scale = d->scale == 0.0f ? 1.0f : d->scale;
    float s = row_of(x, d->x_stride, b, h, i)[j] * scale;
    if (m->bias)
        s += m->bias[b * m->bias_stride[0] + h * m->bias_stride[1] + i * m->bias_stride[2] + j];
    return s;
}

/* ref[j] = probability (vis[j] = 1) or 0 (masked); returns the row kind. */
static int oracle_row(const peak_softmax_desc *d, const float *x, size_t b, size_t h, size_t i,
                      double *ref, int *vis)
{
    for (size_t j = 0; j < d->k_len; j++) {
        vis[j] = oracle_visible(d, b, h, i, j);
        ref[j] = vis[j] ? oracle_score(d, x, b, h, i, j) : -INFINITY;
    }
    return peak_test_softmax_row(ref, vis, d->k_len);
}

/* ---- checking ------------------------------------------------------------ */

/* Whether a probability is within the bound of peak.h: SM_ULP_TOL ulp of
   the oracle for ref >= FLT_MIN, FLT_MIN absolutely below. */
static int prob_ok(double ref, float got)
{
    if (ref < (double)FLT_MIN)
        return fabs((double)got - ref) <= (double)FLT_MIN;
    return peak_test_ulp_diff(got, (float)ref) <= SM_ULP_TOL;
}

static int entry_ok(int kind, int vis, double ref, float got)
{
    if (!vis || kind == ROW_ZERO)
        return got == 0.0f && !signbit(got);
    if (kind == ROW_NAN)
        return isnan(got);
    return prob_ok(ref, got);
}

static void expect_entry(const sm_problem *p, int kind, int vis, double ref, float got,
                         size_t b, size_t h, size_t i, size_t j)
{
    if (entry_ok(kind, vis, ref, got))
        return;
    const char *want = !vis || kind == ROW_ZERO ? "+0" : kind == ROW_NAN ? "NaN" : "value";
    ck_abort_msg("%s B%zu H%zu Lq%zu Lk%zu at [%zu,%zu,%zu,%zu]: expected %s %.9g, got %.9g "
                 "(%lld ulp)",
                 peak_isa_name(peak_test_isa), p->s.B, p->s.H, p->s.Lq, p->s.Lk, b, h, i, j, want,
                 vis ? ref : 0.0, (double)got, (long long)peak_test_ulp_diff(got, (float)ref));
}

/* The unit in the last place of floats of ref's binade (ref >= FLT_MIN). */
static double ulp_of(double ref)
{
    int e;
    frexp(ref, &e);
    return ldexp(1.0, e - 24 > -149 ? e - 24 : -149);
}

static void note_entry(double ref, float got)
{
    if (ref < (double)FLT_MIN)
        return;
    const int64_t ulp = peak_test_ulp_diff(got, (float)ref);
    if (ulp > sm_seen.max_ulp)
        sm_seen.max_ulp = ulp;
    if (ref >= 0.25 && ulp > sm_seen.max_ulp_top)
        sm_seen.max_ulp_top = ulp;
    const double real = fabs((double)got - ref) / ulp_of(ref);
    if (real > sm_seen.max_real_ulp)
        sm_seen.max_real_ulp = real;
    if (ref < sm_seen.min_p)
        sm_seen.min_p = ref;
    sm_seen.probs++;
}

/* The largest errors seen, on stdout (meson test -v). */
static void print_stats(const char *what)
{
    printf("softmax %s, %s: %zu rows, %zu probabilities in [%.3g, 1]: max error %lld ulp "
           "(%.2f ulp from the exact value), %lld ulp for probabilities >= 1/4 (tolerance "
           "%d ulp); max |row sum - 1| %.3g\n",
           peak_isa_name(peak_test_isa), what, sm_seen.rows, sm_seen.probs, sm_seen.min_p,
           (long long)sm_seen.max_ulp, sm_seen.max_real_ulp, (long long)sm_seen.max_ulp_top,
           SM_ULP_TOL, sm_seen.max_sum_err);
    fflush(stdout);
}

/* A normal row's probabilities add up to 1. */
static void expect_sum_one(const sm_problem *p, const float *y, size_t b, size_t h, size_t i)
{
    double sum = 0.0;
    for (size_t j = 0; j < p->d.k_len; j++)
        sum += y[j];
    const double err = fabs(sum - 1.0);
    if (err > sm_seen.max_sum_err)
        sm_seen.max_sum_err = err;
    sm_seen.rows++;
    CHECK(err <= SM_SUM_TOL, "%s B%zu H%zu Lq%zu Lk%zu row [%zu,%zu,%zu] sums to 1 %+.3g",
          peak_isa_name(peak_test_isa), p->s.B, p->s.H, p->s.Lq, p->s.Lk, b, h, i, sum - 1.0);
}

/* Every row against the oracle, every float of y outside a row untouched. */
static void sm_check(const sm_problem *p)
{
    const peak_softmax_desc *d = &p->d;
    double *ref = malloc(d->k_len * sizeof *ref);
    int *vis = malloc(d->k_len * sizeof *vis);
    unsigned char *covered = calloc(p->ny, 1);
    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < d->heads; h++)
            for (size_t i = 0; i < d->q_len; i++) {
                int kind = oracle_row(d, p->x0, b, h, i, ref, vis);
                const float *y = row_of(p->y, d->y_stride, b, h, i);
                for (size_t j = 0; j < d->k_len; j++) {
                    expect_entry(p, kind, vis[j], ref[j], y[j], b, h, i, j);
                    if (kind == ROW_NORMAL && vis[j])
                        note_entry(ref[j], y[j]);
                    covered[(size_t)(y + j - p->y)] = 1;
                }
                if (kind == ROW_NORMAL)
                    expect_sum_one(p, y, b, h, i);
            }
    for (size_t e = 0; e < p->ny; e++)
        CHECK(covered[e] || peak_test_is_canary(p->y[e]),
                      "%s: gap float %zu of y was written", peak_isa_name(peak_test_isa), e);
    free(covered);
    free(vis);
    free(ref);
}

/* Scores in [lo, hi) at visible keys; masked keys and gaps keep the canary. */
static void sm_fill_visible(sm_problem *p, float lo, float hi)
{
    const peak_softmax_desc *d = &p->d;
    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < d->heads; h++)
            for (size_t i = 0; i < d->q_len; i++) {
                float *x = (float *)row_of(p->x, d->x_stride, b, h, i);
                for (size_t j = 0; j < d->k_len; j++)
                    if (oracle_visible(d, b, h, i, j))
                        x[j] = peak_test_uniform(&p->rng, lo, hi);
            }
}

static void sm_run(sm_problem *p)
{
    p->x0 = malloc(p->nx * sizeof *p->x0);
    memcpy(p->x0, p->x, p->nx * sizeof *p->x0);
    ck_assert_int_eq(peak_softmax(p->y, p->x, &p->d), PEAK_OK);
    if (!p->s.in_place)
        CHECK(peak_test_bytes_equal(p->x, p->x0, p->nx * sizeof(float)),
                      "input x was modified");
    sm_check(p);
}

/* Fills, runs, checks and frees a problem whose mask is already set. */
static void sm_finish(sm_problem *p, float lo, float hi)
{
    sm_fill_visible(p, lo, hi);
    sm_run(p);
    sm_free(p);
}

static void sm_simple(const sm_shape *s, float scale, uint64_t seed)
{
    sm_problem p;
    sm_init(&p, s, seed);
    p.d.scale = scale;
    sm_finish(&p, -8.0f, 8.0f);
}

/* ---- sizes, strides, layouts --------------------------------------------- */

/* Sizes 1..70 run as 7 Check tests of 10 sizes each: a fork per size
   costs more than the size itself under AddressSanitizer. */
#define SIZE_GROUP 10
#define SIZE_GROUPS 7

static const size_t model_sizes[] = {512, 768};

START_TEST(sizes_1_to_70)
{
    for (size_t n = 1 + (size_t)_i * SIZE_GROUP; n <= ((size_t)_i + 1) * SIZE_GROUP; n++) {
        sm_shape s = {1, 1, 2, n, 0, 0, 0, 0, 0};
        sm_simple(&s, 1.0f, 100 + n);
        s.in_place = 1;
        sm_simple(&s, 0.125f, 200 + n);
    }
}
END_TEST

START_TEST(model_sizes_with_batch_and_heads)
{
    sm_shape s = {2, 3, 2, model_sizes[_i], 0, 0, 0, 0, 0};
    sm_simple(&s, 0.0f, 300 + (uint64_t)_i); /* scale 0 means 1 */
}
END_TEST

START_TEST(strided_rows_keep_gaps)
{
    static const size_t pads[] = {1, 3, 16, 37};
    for (size_t k = 0; k < 4; k++) {
        sm_shape s = {2, 2, 3, 1 + (size_t)_i * 9, pads[k], pads[(k + 1) % 4], 0, 0, (int)(k & 1)};
        sm_simple(&s, 0.5f, 400 + k);
    }
}
END_TEST

START_TEST(misaligned_pointers)
{
    for (size_t mis = 1; mis < 16; mis += 3) {
        sm_shape s = {1, 2, 2, 5 + (size_t)_i * 13, 1, 2, mis, 0, 0};
        sm_simple(&s, -0.75f, 500 + mis);
    }
}
END_TEST

START_TEST(in_place_strided)
{
    for (int layout = 0; layout < 2; layout++) {
        sm_shape s = {2, 3, 4, 3 + (size_t)_i * 11, 5, 0, 2, 1, layout};
        sm_simple(&s, 2.0f, 600 + (uint64_t)layout);
    }
}
END_TEST

/* ---- masks ----------------------------------------------------------------- */

START_TEST(causal_both_alignments_with_q_offset)
{
    static const size_t lq[] = {1, 3, 7, 16}, lk[] = {1, 5, 16, 33}, off[] = {0, 1, 5};
    for (size_t a = 0; a < 4; a++)
        for (size_t c = 0; c < 4; c++)
            for (size_t o = 0; o < 3; o++) {
                sm_shape s = {1, 2, lq[a], lk[c], 1, 0, 0, 0, 0};
                sm_problem p;
                sm_init(&p, &s, 700 + a * 16 + c * 4 + o);
                p.d.mask.causal = 1;
                p.d.mask.align = (peak_align)_i;
                p.d.mask.q_offset = off[o];
                sm_finish(&p, -4.0f, 4.0f);
            }
}
END_TEST

START_TEST(sliding_window_with_and_without_causal)
{
    static const size_t win[] = {1, 2, 5, 100};
    for (size_t w = 0; w < 4; w++)
        for (int align = 0; align < 2; align++) {
            sm_shape s = {1, 1, 9, 13, 0, 2, 1, 0, 0};
            sm_problem p;
            sm_init(&p, &s, 800 + w * 2 + (uint64_t)align);
            p.d.mask.causal = _i;
            p.d.mask.window = win[w];
            p.d.mask.align = (peak_align)align;
            p.d.mask.q_offset = w;
            sm_finish(&p, -4.0f, 4.0f);
        }
}
END_TEST

START_TEST(key_padding_lengths)
{
    sm_shape s = {4, 2, 3, 1 + (size_t)_i * 7, 2, 1, 0, (int)(_i & 1), 0};
    sm_problem p;
    sm_init(&p, &s, 900 + (uint64_t)_i);
    sm_add_key_len(&p);
    sm_finish(&p, -4.0f, 4.0f);
}
END_TEST

START_TEST(keep_mask_every_broadcast)
{
    sm_shape s = {2, 3, 4, 19, 1, 3, 0, 0, 0};
    sm_problem p;
    sm_init(&p, &s, 1000 + (uint64_t)_i);
    sm_add_keep(&p, (unsigned)_i, 0.6);
    sm_finish(&p, -4.0f, 4.0f);
}
END_TEST

START_TEST(bias_mask_every_broadcast)
{
    sm_shape s = {2, 3, 4, 21, 0, 1, 1, (int)(_i & 1), 0};
    sm_problem p;
    sm_init(&p, &s, 1100 + (uint64_t)_i);
    p.d.scale = 0.25f;
    sm_add_bias(&p, (unsigned)_i, -3.0f, 3.0f, 0.3);
    sm_finish(&p, -4.0f, 4.0f);
}
END_TEST

/* A finite bias, however negative, is added, not treated as a mask: a row
   whose visible biases are all -1e30 is the uniform distribution over the
   keys (x is absorbed by the rounding of x + -1e30). */
START_TEST(huge_finite_bias_is_added)
{
    sm_shape s = {1, 1, 3, 17, 0, 0, 0, 0, 0};
    sm_problem p;
    sm_init(&p, &s, 1200);
    sm_add_bias(&p, 0, -1.0f, 1.0f, 0.2);
    for (size_t j = 0; j < 17; j++)
        if (p.bias[j] != -INFINITY)
            p.bias[j] = -1e30f; /* row 0 */
    p.bias[17 + 3] = -1e30f;    /* one key of row 1 nearly impossible */
    sm_finish(&p, -4.0f, 4.0f);
}
END_TEST

/* Offsets and windows far beyond the row (api.c accepts up to 2^40): the
   kernel's signed range arithmetic must neither overflow nor wrap. */
START_TEST(large_offsets_and_windows)
{
    static const size_t big[] = {(size_t)1 << 40, ((size_t)1 << 40) - 3, 1000000};
    sm_shape s = {1, 1, 5, 9, 0, 0, 0, 0, 0};
    for (size_t a = 0; a < 3; a++)
        for (size_t w = 0; w < 3; w++) {
            sm_problem p;
            sm_init(&p, &s, 1250 + a * 3 + w);
            p.d.mask.causal = 1;
            p.d.mask.align = (peak_align)_i;
            p.d.mask.q_offset = big[a];
            p.d.mask.window = big[w];
            sm_finish(&p, -4.0f, 4.0f);
        }
}
END_TEST

/* Random combinations of every mask kind against the oracle. */
START_TEST(mask_combinations_fuzz)
{
    uint64_t rng = 1300 + (uint64_t)_i;
    for (int n = 0; n < 150; n++) {
        sm_shape s = {1 + peak_test_next(&rng) % 3, 1 + peak_test_next(&rng) % 3,
                      1 + peak_test_next(&rng) % 9, 1 + peak_test_next(&rng) % 40,
                      peak_test_next(&rng) % 3, peak_test_next(&rng) % 3,
                      peak_test_next(&rng) % 4, (int)(peak_test_next(&rng) % 2),
                      (int)(peak_test_next(&rng) % 2)};
        sm_problem p;
        sm_init(&p, &s, peak_test_next(&rng));
        unsigned pick = (unsigned)peak_test_next(&rng);
        p.d.scale = (pick & 1) ? 0.3f : 0.0f;
        p.d.mask.causal = (pick >> 1) & 1;
        p.d.mask.align = (peak_align)((pick >> 2) & 1);
        p.d.mask.q_offset = (pick >> 3) & 3;
        p.d.mask.window = (pick >> 5) & 1 ? 1 + (pick >> 6) % 8 : 0;
        if ((pick >> 9) & 1)
            sm_add_key_len(&p);
        if ((pick >> 10) & 1)
            sm_add_keep(&p, (pick >> 11) & 7, 0.7);
        if ((pick >> 14) & 1)
            sm_add_bias(&p, (pick >> 15) & 7, -2.0f, 2.0f, 0.2);
        sm_finish(&p, -6.0f, 6.0f);
    }
}
END_TEST

/* ---- special rows ---------------------------------------------------------- */

START_TEST(fully_masked_rows_are_zero)
{
    /* Lk = 2 < Lq for the alignment cases, so early rows see no key. */
    sm_shape s = {3, 2, 4, _i >= 3 ? 2 : 11, 1, 1, 0, (int)(_i & 1), 0};
    sm_problem p;
    sm_init(&p, &s, 1400 + (uint64_t)_i);
    switch (_i) {
    case 0: /* key_len[2] == 0 */
        sm_add_key_len(&p);
        break;
    case 1: /* keep all zero */
        sm_add_keep(&p, 0, 0.0);
        break;
    case 2: /* bias all -inf */
        sm_add_bias(&p, 7, 0.0f, 1.0f, 1.0);
        break;
    case 3: /* bottom-right with Lq > Lk */
        p.d.mask.causal = 1;
        p.d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        break;
    default: /* a window that ends before key 0 for early rows of a short row */
        p.d.mask.causal = 1;
        p.d.mask.window = 2;
        p.d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        break;
    }
    sm_finish(&p, -4.0f, 4.0f);
}
END_TEST

/* Visible NaN/+inf poison the row; NaN/inf at masked keys are never read. */
START_TEST(nonfinite_scores)
{
    static const float bad[] = {NAN, INFINITY};
    sm_shape s = {1, 1, 4, 9, 0, 0, 0, 0, 0};
    sm_problem p;
    sm_init(&p, &s, 1500 + (uint64_t)_i);
    sm_add_key_len(&p);
    p.key_len[0] = 6;
    sm_fill_visible(&p, -3.0f, 3.0f);
    p.x[0 * 9 + 2] = bad[_i];     /* visible: row 0 is NaN at keys < 6 */
    p.x[1 * 9 + 7] = bad[_i];     /* masked by key_len: row 1 normal */
    p.x[2 * 9 + 8] = -bad[_i];    /* masked: NaN or -inf, row 2 normal */
    p.x[3 * 9 + 1] = -INFINITY;   /* visible -inf: probability 0 */
    sm_run(&p);
    sm_free(&p);
}
END_TEST

/* Every visible score -inf: no probability mass, the row is zeros. */
START_TEST(all_visible_minus_inf_is_zero_row)
{
    sm_shape s = {1, 1, 2, 6, 0, 0, 0, 0, 0};
    sm_problem p;
    sm_init(&p, &s, 1600);
    for (size_t e = 0; e < 12; e++)
        p.x[e] = e < 6 ? -INFINITY : (float)e;
    sm_run(&p);
    sm_free(&p);
}
END_TEST

/* Max subtraction: scores of +-1e30 and [90, 100] must not overflow. */
START_TEST(huge_magnitudes)
{
    static const float lo[] = {90.0f, -100.0f, 1e30f, -1e30f, -1e30f};
    static const float hi[] = {100.0f, -90.0f, 3e30f, -3e29f, 1e30f};
    sm_shape s = {1, 2, 3, 1 + (size_t)_i * 15, 0, 0, 0, 0, 0};
    for (size_t r = 0; r < 5; r++) {
        sm_problem p;
        sm_init(&p, &s, 1700 + r);
        sm_finish(&p, lo[r], hi[r]);
    }
}
END_TEST

/* ---- every length with every mask kind ------------------------------------- */

/* The lengths: 1..70 cover every tail of both vector widths, 127,
   128 and 129 straddle a multiple of 8 and 16, 4096 is a long row (and
   several SUM_BLOCKs of float accumulation). */
static size_t length_at(size_t k)
{
    static const size_t extra[] = {127, 128, 129, 4096};
    return k < 70 ? k + 1 : extra[k - 70];
}
#define N_LENGTHS 74

enum {
    KIND_NONE, KIND_CAUSAL_TL, KIND_CAUSAL_BR, KIND_WINDOW, KIND_KEY_LEN, KIND_KEEP, KIND_BIAS,
    KIND_ALL, N_KINDS
};

static void set_mask_kind(sm_problem *p, int kind)
{
    peak_mask *m = &p->d.mask;
    const size_t lk = p->s.Lk;
    if (kind == KIND_CAUSAL_TL || kind == KIND_ALL) {
        m->causal = 1;
        m->q_offset = lk / 2; /* rows end mid-row, at every offset mod 16 */
    }
    if (kind == KIND_CAUSAL_BR) {
        m->causal = 1;
        m->align = PEAK_ALIGN_BOTTOM_RIGHT;
    }
    if (kind == KIND_WINDOW || kind == KIND_ALL)
        m->window = lk / 3 + 1;
    if (kind == KIND_WINDOW)
        m->align = PEAK_ALIGN_BOTTOM_RIGHT; /* window alone, no causal */
    if (kind == KIND_KEY_LEN || kind == KIND_ALL)
        sm_add_key_len(p);
    if (kind == KIND_KEEP || kind == KIND_ALL)
        sm_add_keep(p, kind == KIND_ALL ? 1 : 0, 0.55);
    if (kind == KIND_BIAS || kind == KIND_ALL)
        sm_add_bias(p, kind == KIND_ALL ? 2 : 0, -2.0f, 2.0f, 0.25);
}

START_TEST(every_length_every_mask_kind)
{
    for (size_t k = 0; k < N_LENGTHS; k++) {
        const size_t lk = length_at(k);
        /* Lq = 3 rows per head; in place for odd k; scale != 1 for even. */
        sm_shape s = {2, 1, 3, lk, k % 3, (k + 1) % 3, k % 5, (int)(k & 1), 0};
        sm_problem p;
        sm_init(&p, &s, 2000 + (uint64_t)_i * 100 + k);
        p.d.scale = (k & 1) ? 0.0f : 0.37f;
        set_mask_kind(&p, _i);
        sm_finish(&p, -9.0f, 9.0f);
    }
}
END_TEST

/* Masked runs that cover whole vectors and straddle lane boundaries of both
   widths (8 and 16): row r of the keep mask drops keys [a, a + len) for
   one (a, len) pair, over a row of 96 keys (6 and 12 vectors). */
START_TEST(masked_runs_on_lane_boundaries)
{
    static const size_t starts[] = {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 48, 80};
    static const size_t lens[] = {1, 7, 8, 9, 15, 16, 17, 32, 48, 64, 96};
    const size_t ns = sizeof starts / sizeof starts[0], nl = sizeof lens / sizeof lens[0];
    sm_shape s = {1, 1, ns * nl, 96, 0, 0, 0, _i, 0};
    sm_problem p;
    sm_init(&p, &s, 2100 + (uint64_t)_i);
    sm_add_keep(&p, 0, 1.0);
    for (size_t a = 0; a < ns; a++)
        for (size_t l = 0; l < nl; l++) {
            uint8_t *row = p.keep + (a * nl + l) * 96;
            for (size_t j = starts[a]; j < starts[a] + lens[l] && j < 96; j++)
                row[j] = 0;
        }
    sm_finish(&p, -6.0f, 6.0f);
}
END_TEST

/* The same runs made by the structural masks: key_len and windows that end
   on and next to lane boundaries (no element mask: the unmasked path). */
START_TEST(structural_edges_on_lane_boundaries)
{
    static const size_t cut[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65};
    for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++) {
        sm_shape s = {3, 2, 5, 80, 1, 0, 0, (int)(c & 1), 0};
        sm_problem p;
        sm_init(&p, &s, 2200 + c * 4 + (uint64_t)_i);
        if (_i == 0) {
            sm_add_key_len(&p);
            p.key_len[0] = (int32_t)cut[c];
        } else {
            p.d.mask.window = cut[c];
            p.d.mask.causal = _i == 2;
            p.d.mask.q_offset = 70;
        }
        sm_finish(&p, -6.0f, 6.0f);
    }
}
END_TEST

/* One visible key: e^0 / e^0, exactly 1 on every tier, at keys on and next
   to lane boundaries; and every other key exactly +0. */
START_TEST(single_visible_key_is_exactly_one)
{
    static const size_t lks[] = {1, 5, 16, 17, 33, 64, 100};
    const size_t lk = lks[_i];
    sm_shape s = {1, 1, lk, lk, 0, 0, 0, 0, 0};
    sm_problem p;
    sm_init(&p, &s, 2300 + (uint64_t)_i);
    sm_add_keep(&p, 0, 0.0);
    for (size_t r = 0; r < lk; r++)
        p.keep[r * lk + (r * 7) % lk] = 1;
    sm_fill_visible(&p, -50.0f, 50.0f);
    sm_run(&p);
    for (size_t r = 0; r < lk; r++)
        for (size_t j = 0; j < lk; j++) {
            const float want = j == (r * 7) % lk ? 1.0f : 0.0f;
            CHECK(p.y[r * lk + j] == want && !signbit(p.y[r * lk + j]),
                  "%s Lk%zu row %zu key %zu: %.9g, want %g", peak_isa_name(peak_test_isa), lk, r,
                  j, (double)p.y[r * lk + j], (double)want);
        }
    sm_free(&p);
}
END_TEST

/* Rows of equal huge scores are uniform (max subtraction makes them all
   e^0); +-1e30 mixed gives the uniform distribution over the +1e30 keys. */
START_TEST(rows_of_huge_equal_scores)
{
    static const float vals[] = {1e30f, -1e30f, FLT_MAX, -FLT_MAX};
    const size_t lk = 1 + (size_t)_i * 13;
    sm_shape s = {1, 1, 5, lk, 0, 0, 0, 0, 0};
    sm_problem p;
    sm_init(&p, &s, 2400 + (uint64_t)_i);
    for (size_t r = 0; r < 5; r++)
        for (size_t j = 0; j < lk; j++)
            p.x[r * lk + j] = r < 4 ? vals[r] : (j % 3 ? -1e30f : 1e30f);
    sm_run(&p);
    for (size_t r = 0; r < 5; r++) {
        const size_t n = r < 4 ? lk : (lk + 2) / 3;
        for (size_t j = 0; j < lk; j++) {
            const double want = (r < 4 || j % 3 == 0) ? 1.0 / (double)n : 0.0;
            CHECK(fabs(p.y[r * lk + j] - want) <= 1e-7 + 4 * FLT_EPSILON * want,
                  "%s Lk%zu row %zu key %zu: %.9g, want %.9g", peak_isa_name(peak_test_isa), lk,
                  r, j, (double)p.y[r * lk + j], want);
        }
    }
    sm_free(&p);
}
END_TEST

/* A NaN or +inf at every lane position of interest poisons exactly its own
   row; a -inf score is probability 0; a negative scale turns -inf into
   +inf (a NaN row) and +inf into -inf (probability 0). */
START_TEST(nonfinite_at_lane_boundaries)
{
    static const size_t pos[] = {0, 1, 7, 8, 15, 16, 17, 31, 32, 47};
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    const size_t np = sizeof pos / sizeof pos[0];
    for (int neg = 0; neg < 2; neg++) {
        sm_shape s = {1, 1, np, 48, 0, 0, 0, neg, 0};
        sm_problem p;
        sm_init(&p, &s, 2500 + (uint64_t)_i * 2 + (uint64_t)neg);
        p.d.scale = neg ? -0.5f : 1.0f;
        sm_fill_visible(&p, -5.0f, 5.0f);
        for (size_t r = 0; r < np; r++)
            p.x[r * 48 + pos[r]] = bad[_i];
        sm_run(&p);
        sm_free(&p);
    }
}
END_TEST

/* x * scale + bias can overflow to -inf in float: such a visible key has
   probability 0, and a row of them is a zero row, as in the reference. */
/* Exponential terms below FLT_MIN are 0 on every tier (peak.h), so a
   probability never comes out subnormal on one tier and 0 on another. */
START_TEST(underflowing_terms_are_zero_on_every_tier)
{
    const float x[4] = {0.0f, -100.0f, -88.0f, -87.0f};
    float y[4];
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = d.heads = d.q_len = 1, d.k_len = 4;
    d.x_stride[2] = d.y_stride[2] = 4;
    ck_assert_int_eq(peak_softmax(y, x, &d), PEAK_OK);
    ck_assert(y[1] == 0.0f && !signbit(y[1]));
    ck_assert(y[2] == 0.0f && !signbit(y[2]));
    /* e^-87 = 1.65e-38 is a normal float: kept, and as accurate as any
       other probability. */
    const double want = exp(-87.0) / (1.0 + exp(-100.0) + exp(-88.0) + exp(-87.0));
    ck_assert_msg(y[3] >= FLT_MIN && peak_test_ulp_diff(y[3], (float)want) <= SM_ULP_TOL,
                  "y[3] = %a, want %a", (double)y[3], want);
    ck_assert(y[0] == 1.0f);
}
END_TEST

START_TEST(bias_sum_overflowing_to_minus_inf)
{
    sm_shape s = {1, 1, 3, 20, 0, 0, 0, 0, 0};
    sm_problem p;
    sm_init(&p, &s, 2600);
    sm_add_bias(&p, 0, -1.0f, 1.0f, 0.0);
    sm_fill_visible(&p, -1.0f, 1.0f);
    for (size_t j = 0; j < 20; j++) {
        p.bias[j] = -3e38f; /* row 0: all overflow */
        p.x[j] = -1e38f;
        if (j % 4 == 0) { /* row 1: every 4th overflows */
            p.bias[20 + j] = -3e38f;
            p.x[20 + j] = -1e38f;
        }
    }
    p.bias[40 + 5] = -3e38f; /* row 2: finite huge negative, not overflowing */
    sm_run(&p);
    sm_free(&p);
}
END_TEST

/* One row of n keys (row stride ld) with the subnormal scale the fuzzer
   found, 0x1.16c2p-133, under FTZ/DAZ, which reads it as 0; bias may be
   NULL.  false (nothing run) when FTZ/DAZ cannot be set here. */
static bool softmax_row_under_daz(float *y, const float *x, size_t n, size_t ld,
                                  const float *bias)
{
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = d.heads = d.q_len = 1, d.k_len = n, d.x_stride[2] = d.y_stride[2] = (ptrdiff_t)ld;
    d.scale = 0x1.16c2p-133f;
    d.mask.bias = bias;
    unsigned csr;
    if (!peak_test_ftz_on(&csr))
        return false;
    peak_status s = peak_softmax(y, x, &d);
    peak_test_ftz_restore(csr);
    ck_assert_int_eq(s, PEAK_OK);
    return true;
}

/* Found by tests/fuzz (fuzz-softmax): under DAZ a subnormal scale compared
   equal to 0 and was replaced by the default 1, so x = -3.6e38 gave a
   probability of 0 instead of the bias's softmax.  DAZ reads the scale as
   0, so the scores are the bias alone. */
START_TEST(subnormal_scale_under_daz)
{
    float x[2] = {0x1.cf67fep-101f, -0x1.b767c6p+127f};
    float bias[2] = {-0x1.e28eccp+2f, -0x1.2ae8f8p+2f}, y[2];
    if (!softmax_row_under_daz(y, x, 2, 2, bias))
        return;
    const double e = exp((double)bias[0] - (double)bias[1]);
    const double want[2] = {e / (1.0 + e), 1.0 / (1.0 + e)};
    for (int j = 0; j < 2; j++)
        CHECK(peak_test_ulp_diff(y[j], (float)want[j]) <= SM_ULP_TOL, "%s: y[%d] = %a, want %.9g",
              peak_isa_name(peak_test_isa), j, (double)y[j], want[j]);
}
END_TEST

/* Found by tests/fuzz (fuzz-softmax, in CI): the same subnormal scale
   under DAZ makes an infinite x a NaN score (inf * 0), so its row is a NaN
   row; the vector tiers looked for NaN in x instead of in x * scale and
   wrote zeros.  Rows of one and of 19 keys (a vector tail), unmasked, in
   place as the fuzzer had it, and out of place. */
START_TEST(infinite_x_subnormal_scale_under_daz)
{
    for (size_t n = 1; n <= 19; n += 18) {
        for (int in_place = 0; in_place < 2; in_place++) {
            float x[19], out[19];
            for (size_t j = 0; j < n; j++)
                x[j] = j == n / 2 ? -INFINITY : 3e38f;
            float *y = in_place ? x : out;
            if (!softmax_row_under_daz(y, x, n, 19, NULL))
                return;
            for (size_t j = 0; j < n; j++)
                CHECK(isnan(y[j]), "%s: n %zu in_place %d: y[%zu] = %a, want NaN",
                      peak_isa_name(peak_test_isa), n, in_place, j, (double)y[j]);
        }
    }
}
END_TEST

/* An output larger than any cache is written with non-temporal stores
   (kernels/softmax.h, PEAK_SOFTMAX_STREAM_BYTES = 16 MiB): 1100 rows of
   4096 keys, misaligned, causal bottom-right (a different length every
   row); then in place with element masks. */
START_TEST(streamed_output)
{
    sm_shape s = {1, 1, 1100, 4096, _i ? 0 : 3, _i ? 0 : 5, 1 + (size_t)_i, _i, 0};
    if (peak_test_quick()) /* 40 rows: no streaming stores, same masks */
        s.Lq = 40;
    sm_problem p;
    sm_init(&p, &s, 2650 + (uint64_t)_i);
    p.d.mask.causal = 1;
    p.d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    if (_i) {
        p.d.mask.window = 3000;
        sm_add_keep(&p, 4, 0.9); /* one keep row for all */
        sm_add_bias(&p, 4, -1.0f, 1.0f, 0.05);
    }
    sm_finish(&p, -6.0f, 6.0f);
}
END_TEST

/* Rows of many shapes and value ranges; reports the largest errors against
   the double-precision oracle (shown by meson test -v). */
START_TEST(accuracy_report)
{
    static const float lo[] = {-8.0f, -1.0f, 90.0f, -30.0f, -1e4f, -40.0f};
    static const float hi[] = {8.0f, 1.0f, 100.0f, 30.0f, 1e4f, -10.0f};
    for (size_t k = 0; k < N_LENGTHS; k++) {
        for (size_t v = 0; v < 6; v++) {
            sm_shape s = {1, 2, 2, length_at(k), 0, 0, 0, 0, 0};
            sm_problem p;
            sm_init(&p, &s, 2700 + k * 8 + v);
            p.d.scale = v == 4 ? 0.001f : 1.0f;
            sm_fill_visible(&p, lo[v], hi[v]);
            if (v == 5) /* a few keys far above the rest: probabilities near 1/2..1/5 */
                for (size_t e = 0; e < p.nx; e += 1 + peak_test_next(&p.rng) % 40)
                    p.x[e] = peak_test_uniform(&p.rng, 0.0f, 1.5f);
            sm_run(&p);
            sm_free(&p);
        }
    }
    print_stats("accuracy_report");
}
END_TEST

/* ---- probabilities down to FLT_MIN ------------------------------------------ */

/* The row maxima of wide_range_relative_ulp: either side of 256, where the
   SIMD tiers switch from reducing s to reducing s - max
   (kernels/softmax.h), and of 0. */
static const float wide_max[] = {0.0f, 0.75f, -3.5f, 41.0f, -97.0f, 255.5f, -255.9f, 256.0f,
                                 -300.25f, 1e4f};
#define N_WIDE_MAX (sizeof wide_max / sizeof wide_max[0])

/* Scores spread over 88 below a maximum near wide_max[_i], so that the
   probabilities cover float's normal range down to FLT_MIN (e^-87.3):
   unmasked, with a keep mask and with a bias; scale 1, 0.37 and 8 (x is
   the score divided by the scale); every row length 1..70 (each tail of
   both vector widths), 127..129 and 4096.  And rows of one key at the
   maximum and the rest 5.9e-8 (2^-24) below it, in place or not: summed
   in float, a lane of such terms rounds each of them away (the sum was off
   by 7 ulp).  Every probability >= FLT_MIN within SM_ULP_TOL ulp. */
START_TEST(wide_range_relative_ulp)
{
    static const float scales[] = {1.0f, 0.37f, 8.0f};
    const float top = wide_max[_i];
    for (size_t k = 0; k < N_LENGTHS; k++) {
        const size_t lk = length_at(k);
        if (lk == 4096 && peak_test_quick())
            continue;
        for (int kind = 0; kind < 4; kind++) {
            sm_shape s = {1, 1, lk == 4096 ? 2 : 5, lk, 0, 0, k % 7, (int)(k & 1), 0};
            sm_problem p;
            sm_init(&p, &s, 3000 + (uint64_t)_i * 1000 + k * 4 + (uint64_t)kind);
            const float scale = scales[(k + (size_t)kind) % 3];
            p.d.scale = scale;
            if (kind == 1)
                sm_add_keep(&p, 0, 0.7);
            if (kind == 2) /* bias in [-8, 0): the scores spread 8 more */
                sm_add_bias(&p, 0, -8.0f, 0.0f, 0.2);
            if (kind == 3) { /* one key at the top, the rest 2^-24 below it */
                const float t = (float)log(0.99 * 0x1p-24);
                for (size_t i = 0; i < s.Lq; i++)
                    for (size_t j = 0; j < lk; j++)
                        p.x[i * lk + j] = (j == i % lk ? top : top + t) / scale;
            } else {
                sm_fill_visible(&p, (top - 88.0f) / scale, top / scale);
            }
            sm_run(&p);
            sm_free(&p);
        }
    }
    print_stats("wide_range_relative_ulp");
}
END_TEST

/* ---- the SIMD tiers agree bit for bit ---------------------------------------- */

/* Bits equal, or both NaN. */
static int same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || peak_test_bytes_equal(&a, &b, sizeof a);
}

/* The SIMD tiers compute the same exponentials and add them in one order
   (kernels/softmax.h), so they give the same bits (peak.h).  On a SIMD
   tier: every other SIMD tier this CPU runs gives the same y, for every
   row length of length_at() with each mask kind, wide-range scores, scale
   0.37 and 1, and a NaN in some rows.  (A CPU with one SIMD tier has
   nothing to compare it with.) */
START_TEST(simd_tiers_same_bits)
{
    static const peak_isa simd[] = {PEAK_ISA_AVX2, PEAK_ISA_AVX512, PEAK_ISA_NEON};
    const peak_isa other = simd[_i];
    if (peak_test_isa == PEAK_ISA_SCALAR || other == peak_test_isa ||
        !peak_isa_supported(other))
        return;
    for (size_t k = 0; k < N_LENGTHS; k++) {
        const size_t lk = length_at(k);
        for (int kind = 0; kind < N_KINDS; kind++) {
            sm_shape s = {1, 2, 3, lk, 1, 2, k % 5, 0, 0};
            sm_problem p;
            sm_init(&p, &s, 4000 + k * N_KINDS + (uint64_t)kind);
            p.d.scale = (k & 1) ? 0.37f : 1.0f;
            set_mask_kind(&p, kind);
            const float top = wide_max[(k + (size_t)kind) % N_WIDE_MAX];
            sm_fill_visible(&p, top - 88.0f, top);
            if (k % 3 == 0)
                p.x[lk / 2] = NAN; /* row 0: a NaN row, or a masked NaN */
            float *y0 = malloc(p.ny * sizeof *y0);
            ck_assert_int_eq(peak_softmax(p.y, p.x, &p.d), PEAK_OK);
            memcpy(y0, p.y, p.ny * sizeof *y0);
            ck_assert_int_eq(peak_isa_force(other), PEAK_OK);
            ck_assert_int_eq(peak_softmax(p.y, p.x, &p.d), PEAK_OK);
            ck_assert_int_eq(peak_isa_force(peak_test_isa), PEAK_OK);
            for (size_t e = 0; e < p.ny; e++)
                CHECK(same_float(p.y[e], y0[e]), "%s and %s, Lk %zu kind %d: y[%zu] %a and %a",
                      peak_isa_name(peak_test_isa), peak_isa_name(other), lk, kind, e,
                      (double)y0[e], (double)p.y[e]);
            free(y0);
            sm_free(&p);
        }
    }
}
END_TEST

/* ---- decoding -------------------------------------------------------------- */

/* Softmax of one query at offset t over a cache of L keys equals row t of
   the full causal call, with top-left + q_offset and with bottom-right over
   the first t+1 keys. */
START_TEST(decode_rows_match_full_causal)
{
    const size_t L = 1 + (size_t)_i * 5;
    sm_shape s = {1, 1, L, L, 0, 0, 0, 0, 0};
    sm_problem full;
    sm_init(&full, &s, 1800);
    full.d.mask.causal = 1;
    sm_fill_visible(&full, -5.0f, 5.0f);
    sm_run(&full);
    for (size_t t = 0; t < L; t++) {
        for (int align = 0; align < 2; align++) {
            peak_softmax_desc d = full.d;
            d.q_len = 1;
            d.k_len = align ? t + 1 : L;
            d.mask.align = (peak_align)align;
            d.mask.q_offset = align ? 0 : t;
            float *y = peak_test_alloc(d.k_len, 0);
            ck_assert_int_eq(peak_softmax(y, full.x0 + t * L, &d), PEAK_OK);
            for (size_t j = 0; j < d.k_len; j++) {
                float want = full.y[t * L + j];
                CHECK(prob_ok(want, y[j]),
                              "%s L%zu t%zu align %d key %zu: decode %.9g, full %.9g",
                              peak_isa_name(peak_test_isa), L, t, align, j, (double)y[j],
                              (double)want);
            }
            peak_test_free(y);
        }
    }
    sm_free(&full);
}
END_TEST

/* ---- invalid arguments ------------------------------------------------------ */

typedef struct bad_call {
    const char *what;
    peak_status want;
} bad_call;

/* Runs peak_softmax on a mutated copy of a valid problem and checks that
   it fails with `want` and leaves y untouched. */
static void expect_rejected(const sm_problem *p, const peak_softmax_desc *d, float *y,
                            const float *x, bad_call c)
{
    float *before = malloc(p->ny * sizeof *before);
    memcpy(before, p->y, p->ny * sizeof *before);
    peak_status got = peak_softmax(y, x, d);
    CHECK(got == c.want, "%s: %s: status %d, want %d", peak_isa_name(peak_test_isa),
                  c.what, (int)got, (int)c.want);
    CHECK(peak_test_bytes_equal(before, p->y, p->ny * sizeof *before),
                  "%s: output changed", c.what);
    free(before);
}

START_TEST(invalid_arguments)
{
    sm_shape s = {2, 2, 3, 8, 0, 0, 0, 0, 0};
    sm_problem p;
    sm_init(&p, &s, 1900);
    sm_fill_visible(&p, -1.0f, 1.0f);
    sm_add_key_len(&p);
    peak_softmax_desc d;
    const bad_call inval = {"", PEAK_ERR_INVALID_ARG};
    bad_call c = inval;

    c.what = "NULL y";
    expect_rejected(&p, &p.d, NULL, p.x, c);
    c.what = "NULL x";
    expect_rejected(&p, &p.d, p.y, NULL, c);
    c.what = "NULL desc";
    expect_rejected(&p, NULL, p.y, p.x, c);

    size_t *sizes[4] = {&d.batch, &d.heads, &d.q_len, &d.k_len};
    for (int k = 0; k < 4; k++) {
        d = p.d;
        *sizes[k] = 0;
        c.what = "zero size";
        expect_rejected(&p, &d, p.y, p.x, c);
    }
    d = p.d;
    d.y_stride[2] = 7; /* rows of 8 overlap */
    c.what = "y rows overlap";
    expect_rejected(&p, &d, p.y, p.x, c);
    d = p.d;
    d.y_stride[0] = -1;
    c.what = "negative stride";
    expect_rejected(&p, &d, p.y, p.x, c);
    d = p.d;
    d.scale = INFINITY;
    c.what = "infinite scale";
    expect_rejected(&p, &d, p.y, p.x, c);
    d.scale = NAN;
    c.what = "NaN scale";
    expect_rejected(&p, &d, p.y, p.x, c);
    d = p.d;
    d.mask.align = (peak_align)2;
    c.what = "bad align";
    expect_rejected(&p, &d, p.y, p.x, c);
    d = p.d;
    d.y_stride[2] = 9;
    c.what = "in place with different strides";
    expect_rejected(&p, &d, p.y, p.y, c);

    c.want = PEAK_ERR_OUT_OF_RANGE;
    p.key_len[1] = 9;
    c.what = "key_len > Lk";
    expect_rejected(&p, &p.d, p.y, p.x, c);
    p.key_len[1] = -1;
    c.what = "key_len < 0";
    expect_rejected(&p, &p.d, p.y, p.x, c);
    sm_free(&p);
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("softmax");
    TCase *tc = tcase_create(peak_isa_name(isa));
    tcase_add_loop_test(tc, sizes_1_to_70, 0, SIZE_GROUPS);
    tcase_add_loop_test(tc, model_sizes_with_batch_and_heads, 0, 2);
    tcase_add_loop_test(tc, strided_rows_keep_gaps, 0, 5);
    tcase_add_loop_test(tc, misaligned_pointers, 0, 4);
    tcase_add_loop_test(tc, in_place_strided, 0, 4);
    tcase_add_loop_test(tc, causal_both_alignments_with_q_offset, 0, 2);
    tcase_add_loop_test(tc, sliding_window_with_and_without_causal, 0, 2);
    tcase_add_loop_test(tc, key_padding_lengths, 0, 6);
    tcase_add_loop_test(tc, keep_mask_every_broadcast, 0, 8);
    tcase_add_loop_test(tc, bias_mask_every_broadcast, 0, 8);
    tcase_add_test(tc, huge_finite_bias_is_added);
    tcase_add_loop_test(tc, large_offsets_and_windows, 0, 2);
    tcase_add_loop_test(tc, mask_combinations_fuzz, 0, 8);
    tcase_add_loop_test(tc, fully_masked_rows_are_zero, 0, 5);
    tcase_add_loop_test(tc, nonfinite_scores, 0, 2);
    tcase_add_test(tc, all_visible_minus_inf_is_zero_row);
    tcase_add_loop_test(tc, huge_magnitudes, 0, 4);
    tcase_add_loop_test(tc, decode_rows_match_full_causal, 0, 4);
    tcase_add_test(tc, invalid_arguments);
    tcase_add_loop_test(tc, every_length_every_mask_kind, 0, N_KINDS);
    tcase_add_loop_test(tc, masked_runs_on_lane_boundaries, 0, 2);
    tcase_add_loop_test(tc, structural_edges_on_lane_boundaries, 0, 3);
    tcase_add_loop_test(tc, single_visible_key_is_exactly_one, 0, 7);
    tcase_add_loop_test(tc, rows_of_huge_equal_scores, 0, 4);
    tcase_add_loop_test(tc, nonfinite_at_lane_boundaries, 0, 3);
    tcase_add_test(tc, bias_sum_overflowing_to_minus_inf);
    tcase_add_test(tc, underflowing_terms_are_zero_on_every_tier);
    tcase_add_loop_test(tc, streamed_output, 0, 2);
    tcase_add_test(tc, subnormal_scale_under_daz);
    tcase_add_test(tc, infinite_x_subnormal_scale_under_daz);
    tcase_add_test(tc, accuracy_report);
    tcase_add_loop_test(tc, wide_range_relative_ulp, 0, (int)N_WIDE_MAX);
    tcase_add_loop_test(tc, simd_tiers_same_bits, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
