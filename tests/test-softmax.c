/*
 * test-softmax.c - peak_softmax on one tier against a double-precision
 * oracle written here (plain loops, independent of kernels/mask.h).  The
 * sweeps (sizes and tails, row gaps, misalignment, in place, canaries) are
 * tests/tester.c's; this file gives the problem, the oracle and the special
 * cases (masks, edge scores, decoding, the SIMD tiers' shared bits).
 *
 * x is filled only where the oracle says a key is visible; every other
 * float of x (masked keys and row gaps) keeps the canary, which is a NaN, so
 * a kernel that reads a masked score poisons its row and fails.
 *
 * Every finished row is also checked to sum to 1 within SM_SUM_TOL, and the
 * largest errors seen are reported by accuracy_report (meson test -v).
 * wide_range_relative_ulp holds the rows whose probabilities reach down to
 * FLT_MIN, where the bound is hardest to keep.
 */
#include "tester.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A visible probability in float's normal range passes if it is within
   SM_ULP_TOL units in the last place of the oracle's, rounded to float:
   relative, however small the probability (peak.h).  Below FLT_MIN a
   probability may be flushed to 0 (peak.h): it passes within FLT_MIN
   (PEAK_TESTER_ULP_NORMAL).  A masked key, and every key of a row without
   a visible finite score, is exactly +0. */
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

/* ---- the problem ----------------------------------------------------------- */

/* A mask as a case describes it; the set-up makes its arrays (test-util.c)
   before x is filled. */
typedef peak_test_mask_spec sm_mask_spec;

struct sm_problem;

/* case.opts.  case.n is Lk, case.rows is Lq, case.gap x's row gap,
   case.param the scale (0 means 1), case.alias 1: y is x. */
typedef struct sm_opts {
    size_t B, H;
    size_t y_gap;   /* y's row gap (out of place) */
    float lo, hi;   /* scores at visible keys: uniform in [lo, hi) */
    sm_mask_spec mask;
    /* Changes the mask's arrays once made, before x is filled (NULL: none). */
    void (*edit_mask)(struct sm_problem *s, int arg);
    int arg;
    peak_logits logits; /* soft-capping, ALiBi, sinks (zeros: none) */
} sm_opts;

/* The sweeps' problem: 2 batches of 2 heads, unmasked scores in [-8, 8);
   y's gap one more than x's, so that x and y rows are not in step. */
static const sm_opts sm_sweep_opts = {2, 2, 0, -8.0f, 8.0f, {0}, NULL, 0, PEAK_LOGITS_DEFAULT};

/* case.variant: bit 0 orders the rows [b, i, h] instead of [b, h, i] (the
   layout of a [B, L, H, Lk] tensor); variant / 2 picks the scale: the
   case's, 1/8 or -0.75 (a negative scale flips which score is the
   largest). */
enum { SM_BIH = 1, SM_N_VARIANTS = 6 };

static float case_scale(const peak_tester_case *c)
{
    static const float other[] = {0.125f, -0.75f};
    return c->variant / 2 ? other[c->variant / 2 - 1] : c->param;
}

typedef struct sm_problem {
    peak_softmax_desc d;
    float *x, *y;
    size_t ld_x, ld_y;
    int bih;
    uint8_t *keep;
    float *bias;
    int32_t *key_len;
    /* The row sums' relative bound: SM_SUM_TOL, wider with a cap, as the
       y buffer's ULP bound (set_cap_bounds). */
    double sum_tol;
} sm_problem;

/* Strides of a [B, H, Lq, Lk] operand whose rows are `ld` apart. */
static void layout_strides(const sm_problem *s, size_t ld, ptrdiff_t st[3])
{
    const size_t H = s->d.heads, Lq = s->d.q_len;
    st[0] = (ptrdiff_t)(H * Lq * ld);
    st[1] = (ptrdiff_t)(s->bih ? ld : Lq * ld);
    st[2] = (ptrdiff_t)(s->bih ? H * ld : ld);
}

/* The (b, h, i) of row t of x and y in memory. */
static void row_index(const sm_problem *s, size_t t, size_t *b, size_t *h, size_t *i)
{
    const size_t H = s->d.heads, Lq = s->d.q_len, r = t % (H * Lq);
    *b = t / (H * Lq);
    *h = s->bih ? r % H : r / Lq;
    *i = s->bih ? r / H : r % Lq;
}

static size_t n_rows(const sm_problem *s)
{
    return s->d.batch * s->d.heads * s->d.q_len;
}

static peak_test_dims sm_dims(const sm_problem *s)
{
    return (peak_test_dims){s->d.batch, s->d.heads, s->d.q_len, s->d.k_len};
}

static void make_mask(sm_problem *s, const sm_mask_spec *m, uint64_t *rng)
{
    const peak_test_mask_arrays a = peak_test_make_mask(&s->d.mask, m, sm_dims(s), 1, rng);
    s->key_len = a.key_len;
    s->keep = a.keep;
    s->bias = a.bias;
}

static int visible(const sm_problem *s, size_t b, size_t h, size_t i, size_t j)
{
    return peak_test_mask_visible(&s->d.mask, s->d.q_len, s->d.k_len, b, h, i, j);
}

/* Scores in [lo, hi) at visible keys; masked keys and gaps keep the canary. */
static void fill_visible(sm_problem *s, uint64_t *rng, float lo, float hi)
{
    for (size_t t = 0; t < n_rows(s); t++) {
        size_t b, h, i;
        row_index(s, t, &b, &h, &i);
        float *x = s->x + t * s->ld_x;
        for (size_t j = 0; j < s->d.k_len; j++)
            if (visible(s, b, h, i, j))
                x[j] = peak_test_uniform(rng, lo, hi);
    }
}

static int sm_setup(peak_tester_problem *p)
{
    const peak_tester_case *c = &p->c;
    const sm_opts *o = c->opts ? c->opts : &sm_sweep_opts;
    sm_problem *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    p->user = s;
    const peak_softmax_desc d0 = PEAK_SOFTMAX_DESC_DEFAULT;
    s->d = d0;
    s->d.batch = o->B;
    s->d.heads = o->H;
    s->d.q_len = c->rows;
    s->d.k_len = c->n;
    s->d.scale = case_scale(c);
    s->d.logits = o->logits;
    s->sum_tol = SM_SUM_TOL;
    s->bih = (int)(c->variant & SM_BIH);
    s->ld_x = c->n + c->gap;
    layout_strides(s, s->ld_x, s->d.x_stride);
    s->x = peak_tester_input(p, "x", n_rows(s), c->n, (ptrdiff_t)s->ld_x, 0);
    if (c->alias) {
        s->ld_y = s->ld_x;
        s->y = peak_tester_alias(p, "y", s->x, PEAK_TESTER_ULP_NORMAL, SM_ULP_TOL);
    } else {
        s->ld_y = c->n + (c->opts ? o->y_gap : c->gap ? c->gap + 1 : 0);
        s->y = peak_tester_output(p, "y", n_rows(s), c->n, (ptrdiff_t)s->ld_y, 3,
                                  PEAK_TESTER_ULP_NORMAL, SM_ULP_TOL);
    }
    layout_strides(s, s->ld_y, s->d.y_stride);
    make_mask(s, &o->mask, &p->rng);
    if (o->edit_mask)
        o->edit_mask(s, o->arg);
    fill_visible(s, &p->rng, o->lo, o->hi);
    if (s->d.logits.softcap != 0.0f || s->d.logits.alibi != PEAK_ALIBI_NONE || s->d.logits.sinks)
        peak_test_describe_logits(p->note, sizeof p->note, o->B, o->H, &s->d.mask, &s->d.logits);
    return 1;
}

static void set_cap_bounds(peak_tester_problem *p);

static peak_status sm_call(peak_tester_problem *p)
{
    const sm_problem *s = p->user;
    set_cap_bounds(p); /* from x as the call reads it, edits included */
    return peak_softmax(s->y, s->x, &s->d, NULL);
}

static void sm_teardown(peak_tester_problem *p)
{
    sm_problem *s = p->user;
    peak_test_free(s->bias);
    free(s->keep);
    free(s->key_len);
    free(s);
}

/* ---- the oracle ---------------------------------------------------------------- */

/* The oracle's scores are peak_test_softmax_score's (test-util.h): the
   kernels' bits without a cap, within a slack of them with one
   (PEAK_TEST_TANH_ULP).  A capped call's probabilities are held to
   SM_ULP_TOL + 1 + 2^24 (e^(2 delta) - 1) ulp (peak_test_slack_rel),
   delta the largest slack of its scores (set_cap_bounds): 240 ulp at
   worst for cap 30 (delta = 2 * 2^-23 * 30).  On the SIMD tiers
   near_scalar then holds every probability within SM_ULP_TOL + 1 ulp of
   the scalar tier's, which a capped score one ulp off near 30 would miss
   by 16 ulp or more (2^-19 relative): the vector cap must give the scalar
   cap's bits. */

/* The harness's record of y (in place, the alias of x, not x). */
static peak_tester_buf *y_buf(peak_tester_problem *p)
{
    const sm_problem *s = p->user;
    for (size_t k = 0; k < p->nbufs; k++)
        if (p->buf[k].output && p->buf[k].p == s->y)
            return &p->buf[k];
    ck_abort_msg("softmax: no y");
    return NULL;
}

/* With a cap, the y buffer's ULP bound and the row sums' from the largest
   slack of any visible score of the call (PEAK_TEST_TANH_ULP). */
static void set_cap_bounds(peak_tester_problem *p)
{
    sm_problem *s = p->user;
    if (s->d.logits.softcap == 0.0f)
        return;
    double delta = 0.0;
    for (size_t t = 0; t < n_rows(s); t++) {
        size_t b, h, i;
        row_index(s, t, &b, &h, &i);
        const float *x = s->x + t * s->ld_x;
        for (size_t j = 0; j < s->d.k_len; j++) {
            double sl = 0.0;
            if (visible(s, b, h, i, j))
                (void)peak_test_softmax_score(&s->d, x[j], b, h, i, j, &sl);
            delta = fmax(delta, sl);
        }
    }
    const double rel = peak_test_slack_rel(delta);
    y_buf(p)->tol = SM_ULP_TOL + 1 + ldexp(rel, 24);
    s->sum_tol = SM_SUM_TOL + rel;
}

/* Row t: the probabilities of a normal row, NaN at the visible keys of a
   NaN row, and exactly +0 at masked keys and in a row of no visible finite
   score. */
static void sm_oracle_row(const peak_tester_problem *p, size_t buf, size_t t, double *ref)
{
    (void)buf;
    const sm_problem *s = p->user;
    const size_t lk = s->d.k_len;
    const float *x = peak_tester_before(p, s->x) + t * s->ld_x;
    int *vis = malloc(lk * sizeof *vis);
    if (!vis)
        abort();
    size_t b, h, i;
    row_index(s, t, &b, &h, &i);
    for (size_t j = 0; j < lk; j++) {
        vis[j] = visible(s, b, h, i, j);
        ref[j] = vis[j] ? peak_test_softmax_score(&s->d, x[j], b, h, i, j, NULL) : -INFINITY;
    }
    const int kind = peak_test_softmax_row(ref, vis, lk, peak_test_sink(&s->d.logits, h));
    for (size_t j = 0; j < lk; j++) {
        if (!vis[j] || kind == ROW_ZERO) {
            ref[j] = 0.0;
            p->exact[j] = 1;
        } else if (kind == ROW_NAN) {
            ref[j] = NAN;
        }
    }
    free(vis);
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

/* A normal row (no NaN, some probability) sums to what its oracle sums to:
   1, or less with a sink, within sum_tol of it (relative), plus FLT_MIN
   for each probability a tier may flush; its errors go into sm_seen. */
static void sm_check_row(const peak_tester_problem *p, size_t buf, size_t t, const double *ref,
                         const float *got)
{
    (void)buf;
    const sm_problem *s = p->user;
    double mass = 0.0, sum = 0.0;
    for (size_t j = 0; j < s->d.k_len; j++) {
        if (isnan(ref[j]))
            return;
        mass += ref[j];
    }
    if (mass == 0.0)
        return;
    for (size_t j = 0; j < s->d.k_len; j++) {
        note_entry(ref[j], got[j]);
        sum += got[j];
    }
    const double err = fabs(sum - mass);
    if (err > sm_seen.max_sum_err)
        sm_seen.max_sum_err = err;
    sm_seen.rows++;
    CHECK(err <= s->sum_tol * mass + (double)s->d.k_len * FLT_MIN,
          "%s: row %zu sums to %.9g %+.3g", peak_tester_describe(p), t, mass, sum - mass);
}

/* The largest errors seen, on stdout (meson test -v). */
static void print_stats(const char *what)
{
    printf("softmax %s, %s: %zu rows, %zu probabilities in [%.3g, 1]: max error %lld ulp "
           "(%.2f ulp from the exact value), %lld ulp for probabilities >= 1/4 (tolerance "
           "%d ulp); max |row sum - exact sum| %.3g\n",
           peak_isa_name(peak_test_isa), what, sm_seen.rows, sm_seen.probs, sm_seen.min_p,
           (long long)sm_seen.max_ulp, sm_seen.max_real_ulp, (long long)sm_seen.max_ulp_top,
           SM_ULP_TOL, sm_seen.max_sum_err);
    fflush(stdout);
}

/* The SIMD tiers agree with each other, not with the scalar tier (peak.h):
   simd_tiers_same_bits. */
static const peak_tester_family softmax = {
    .name = "softmax",
    .setup = sm_setup,
    .call = sm_call,
    .oracle_row = sm_oracle_row,
    .check_row = sm_check_row,
    .teardown = sm_teardown,
    .same_bits = 0,
    .n_variants = SM_N_VARIANTS,
    .sizes_every_variant = 1,
    .n_aliases = 1,
    .base = {.rows = 2, .param = 1.0f},
};

/* Sets up a case for a test that changes x before the call. */
static sm_problem *sm_begin(peak_tester_problem *p, const peak_tester_case *c)
{
    CHECK(peak_tester_setup(&softmax, c, p), "softmax: case not set up");
    return p->user;
}

static void sm_end(peak_tester_problem *p)
{
    peak_tester_run(&softmax, p);
    peak_tester_free(&softmax, p);
}

/* Element (t, j) of x or y, by row in memory. */
#define X_AT(s, t, j) ((s)->x[(t) * (s)->ld_x + (j)])
#define Y_AT(s, t, j) ((s)->y[(t) * (s)->ld_y + (j)])

/* The shape of a special case, as a [B, H, Lq, Lk] call. */
typedef struct sm_shape {
    size_t B, H, Lq, Lk;
    size_t x_gap, y_gap; /* floats of gap after each row */
    size_t misalign;     /* floats off a 64-byte boundary */
    int in_place;
    int bih; /* rows ordered [b, i, h] instead of [b, h, i] */
} sm_shape;

/* The case of shape `sh` with options o (its B, H and y_gap set here). */
static peak_tester_case shape_case(const sm_shape *sh, float scale, uint64_t seed, sm_opts *o)
{
    o->B = sh->B;
    o->H = sh->H;
    o->y_gap = sh->y_gap;
    peak_tester_case c = softmax.base;
    c.rows = sh->Lq;
    c.n = sh->Lk;
    c.gap = sh->x_gap;
    c.misalign = sh->misalign;
    c.alias = sh->in_place;
    c.variant = sh->bih ? SM_BIH : 0;
    c.param = scale;
    c.seed = seed;
    c.opts = o;
    return c;
}

/* Scores in [lo, hi) under mask m, through the tester. */
static void check_masked(const sm_shape *sh, float scale, uint64_t seed, float lo, float hi,
                         sm_mask_spec m)
{
    sm_opts o = {0};
    o.lo = lo;
    o.hi = hi;
    o.mask = m;
    const peak_tester_case c = shape_case(sh, scale, seed, &o);
    peak_tester_check(&softmax, &c);
}

/* ---- sizes, strides, layouts beyond the sweeps ------------------------------ */

/* Sizes 1..70 run as 7 Check tests of 10 sizes each: a fork per size
   costs more than the size itself under AddressSanitizer. */
#define SIZE_GROUP 10
#define SIZE_GROUPS 7

/* The sweeps run size n at misalignment n % 16; here every size with x on
   a 64-byte boundary (y 3 floats off it), out of place and in place. */
START_TEST(aligned_sizes_1_to_70)
{
    for (size_t n = 1 + (size_t)_i * SIZE_GROUP; n <= ((size_t)_i + 1) * SIZE_GROUP; n++) {
        sm_shape s = {1, 1, 2, n, 0, 0, 0, 0, 0};
        check_masked(&s, 1.0f, 100 + n, -8.0f, 8.0f, (sm_mask_spec){0});
        s.in_place = 1;
        check_masked(&s, 0.125f, 200 + n, -8.0f, 8.0f, (sm_mask_spec){0});
    }
}
END_TEST

/* Row gaps of x and y that differ by more than the sweeps' one float
   (1/3, 3/16, 16/37, 37/1), both layouts, 3 rows per head. */
START_TEST(strided_rows_keep_gaps)
{
    static const size_t pads[] = {1, 3, 16, 37};
    for (size_t k = 0; k < 4; k++) {
        const sm_shape s = {2, 2, 3, 1 + (size_t)_i * 9, pads[k], pads[(k + 1) % 4], 0, 0,
                            (int)(k & 1)};
        check_masked(&s, 0.5f, 400 + k, -8.0f, 8.0f, (sm_mask_spec){0});
    }
}
END_TEST

/* Misaligned x and y (3 floats apart) with row gaps and a negative scale. */
START_TEST(misaligned_pointers)
{
    for (size_t mis = 1; mis < 16; mis += 3) {
        const sm_shape s = {1, 2, 2, 5 + (size_t)_i * 13, 1, 2, mis, 0, 0};
        check_masked(&s, -0.75f, 500 + mis, -8.0f, 8.0f, (sm_mask_spec){0});
    }
}
END_TEST

static const size_t model_sizes[] = {512, 768};

START_TEST(model_sizes_with_batch_and_heads)
{
    const sm_shape s = {2, 3, 2, model_sizes[_i], 0, 0, 0, 0, 0};
    check_masked(&s, 0.0f, 300 + (uint64_t)_i, -8.0f, 8.0f, (sm_mask_spec){0}); /* scale 0 means 1 */
}
END_TEST

/* Several batches and heads in place, rows strided, both layouts. */
START_TEST(in_place_strided)
{
    for (int layout = 0; layout < 2; layout++) {
        const sm_shape s = {2, 3, 4, 3 + (size_t)_i * 11, 5, 0, 2, 1, layout};
        check_masked(&s, 2.0f, 600 + (uint64_t)layout, -8.0f, 8.0f, (sm_mask_spec){0});
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
                const sm_shape s = {1, 2, lq[a], lk[c], 1, 0, 0, 0, 0};
                const sm_mask_spec m = {.causal = 1, .align = (peak_align)_i, .q_offset = off[o]};
                check_masked(&s, 1.0f, 700 + a * 16 + c * 4 + o, -4.0f, 4.0f, m);
            }
}
END_TEST

START_TEST(sliding_window_with_and_without_causal)
{
    static const size_t win[] = {1, 2, 5, 100};
    for (size_t w = 0; w < 4; w++)
        for (int align = 0; align < 2; align++) {
            const sm_shape s = {1, 1, 9, 13, 0, 2, 1, 0, 0};
            const sm_mask_spec m = {
                .causal = _i, .window = win[w], .align = (peak_align)align, .q_offset = w};
            check_masked(&s, 1.0f, 800 + w * 2 + (uint64_t)align, -4.0f, 4.0f, m);
        }
}
END_TEST

START_TEST(key_padding_lengths)
{
    const sm_shape s = {4, 2, 3, 1 + (size_t)_i * 7, 2, 1, 0, (int)(_i & 1), 0};
    check_masked(&s, 1.0f, 900 + (uint64_t)_i, -4.0f, 4.0f, (sm_mask_spec){.key_len = 1});
}
END_TEST

START_TEST(keep_mask_every_broadcast)
{
    const sm_shape s = {2, 3, 4, 19, 1, 3, 0, 0, 0};
    const sm_mask_spec m = {.keep = 1, .keep_bcast = (unsigned)_i, .keep_density = 0.6};
    check_masked(&s, 1.0f, 1000 + (uint64_t)_i, -4.0f, 4.0f, m);
}
END_TEST

START_TEST(bias_mask_every_broadcast)
{
    const sm_shape s = {2, 3, 4, 21, 0, 1, 1, (int)(_i & 1), 0};
    const sm_mask_spec m = {.bias = 1, .bias_bcast = (unsigned)_i, .bias_lo = -3.0f,
                            .bias_hi = 3.0f, .bias_masked = 0.3};
    check_masked(&s, 0.25f, 1100 + (uint64_t)_i, -4.0f, 4.0f, m);
}
END_TEST

/* Checks shape sh with mask m, its arrays changed by edit(s, arg) before x
   is filled. */
static void check_edited(const sm_shape *sh, float scale, uint64_t seed, float lo, float hi,
                         sm_mask_spec m, void (*edit)(sm_problem *, int), int arg)
{
    sm_opts o = {0};
    o.lo = lo;
    o.hi = hi;
    o.mask = m;
    o.edit_mask = edit;
    o.arg = arg;
    const peak_tester_case c = shape_case(sh, scale, seed, &o);
    peak_tester_check(&softmax, &c);
}

/* Row 0's visible biases all -1e30; one key of row 1 -1e30. */
static void huge_biases(sm_problem *s, int arg)
{
    (void)arg;
    for (size_t j = 0; j < 17; j++)
        if (s->bias[j] != -INFINITY)
            s->bias[j] = -1e30f;
    s->bias[17 + 3] = -1e30f;
}

/* A finite bias, however negative, is added, not treated as a mask: a row
   whose visible biases are all -1e30 is the uniform distribution over the
   keys (x is absorbed by the rounding of x + -1e30). */
START_TEST(huge_finite_bias_is_added)
{
    const sm_shape s = {1, 1, 3, 17, 0, 0, 0, 0, 0};
    const sm_mask_spec m = {.bias = 1, .bias_lo = -1.0f, .bias_hi = 1.0f, .bias_masked = 0.2};
    check_edited(&s, 1.0f, 1200, -4.0f, 4.0f, m, huge_biases, 0);
}
END_TEST

/* Offsets and windows far beyond the row (api.c accepts up to 2^40): the
   kernel's signed range arithmetic must neither overflow nor wrap. */
START_TEST(large_offsets_and_windows)
{
    static const size_t big[] = {(size_t)1 << 40, ((size_t)1 << 40) - 3, 1000000};
    const sm_shape s = {1, 1, 5, 9, 0, 0, 0, 0, 0};
    for (size_t a = 0; a < 3; a++)
        for (size_t w = 0; w < 3; w++) {
            const sm_mask_spec m = {
                .causal = 1, .align = (peak_align)_i, .q_offset = big[a], .window = big[w]};
            check_masked(&s, 1.0f, 1250 + a * 3 + w, -4.0f, 4.0f, m);
        }
}
END_TEST

/* A random shape of up to 3 batches, `heads` heads, 9 query rows and
   `keys` keys, with random padding, broadcast and in-place choices. */
static sm_shape random_shape(uint64_t *rng, uint64_t heads, uint64_t keys)
{
    const sm_shape s = {1 + peak_test_next(rng) % 3, 1 + peak_test_next(rng) % heads,
                        1 + peak_test_next(rng) % 9, 1 + peak_test_next(rng) % keys,
                        peak_test_next(rng) % 3, peak_test_next(rng) % 3,
                        peak_test_next(rng) % 4, (int)(peak_test_next(rng) % 2),
                        (int)(peak_test_next(rng) % 2)};
    return s;
}

/* Every mask kind on or off by the bits of pick (bits 1-16), the causal
   offset from offs[4]. */
static sm_mask_spec random_mask(uint64_t pick, const size_t offs[4])
{
    const sm_mask_spec m = {
        .causal = (pick >> 1) & 1,
        .align = (peak_align)((pick >> 2) & 1),
        .q_offset = offs[(pick >> 3) & 3],
        .window = (pick >> 5) & 1 ? 1 + (pick >> 6) % 8 : 0,
        .key_len = (pick >> 9) & 1,
        .keep = (pick >> 10) & 1,
        .keep_bcast = (pick >> 11) & 7,
        .keep_density = 0.7,
        .bias = (pick >> 14) & 1,
        .bias_bcast = (pick >> 15) & 7,
        .bias_lo = -2.0f,
        .bias_hi = 2.0f,
        .bias_masked = 0.2,
    };
    return m;
}

/* Random combinations of every mask kind against the oracle. */
START_TEST(mask_combinations_fuzz)
{
    static const size_t offs[] = {0, 1, 2, 3};
    uint64_t rng = 1300 + (uint64_t)_i;
    for (int n = 0; n < 150; n++) {
        const sm_shape s = random_shape(&rng, 3, 40);
        const uint64_t seed = peak_test_next(&rng);
        const uint64_t pick = peak_test_next(&rng);
        const sm_mask_spec m = random_mask(pick, offs);
        check_masked(&s, (pick & 1) ? 0.3f : 0.0f, seed, -6.0f, 6.0f, m);
    }
}
END_TEST

/* ---- special rows ---------------------------------------------------------- */

START_TEST(fully_masked_rows_are_zero)
{
    /* Lk = 2 < Lq for the alignment cases, so early rows see no key. */
    const sm_shape s = {3, 2, 4, _i >= 3 ? 2 : 11, 1, 1, 0, (int)(_i & 1), 0};
    static const sm_mask_spec masks[] = {
        {.key_len = 1},                                     /* key_len[2] == 0 */
        {.keep = 1, .keep_density = 0.0},                   /* keep all zero */
        {.bias = 1, .bias_bcast = 7, .bias_hi = 1.0f, .bias_masked = 1.0}, /* bias all -inf */
        {.causal = 1, .align = PEAK_ALIGN_BOTTOM_RIGHT},    /* bottom-right with Lq > Lk */
        /* a window that ends before key 0 for early rows of a short row */
        {.causal = 1, .window = 2, .align = PEAK_ALIGN_BOTTOM_RIGHT},
    };
    check_masked(&s, 1.0f, 1400 + (uint64_t)_i, -4.0f, 4.0f, masks[_i]);
}
END_TEST

/* Row 0 sees keys < 6 only. */
static void key_len_6(sm_problem *s, int arg)
{
    (void)arg;
    s->key_len[0] = 6;
}

/* Visible NaN/+inf poison the row; NaN/inf at masked keys are never read. */
START_TEST(nonfinite_scores)
{
    static const float bad[] = {NAN, INFINITY};
    const sm_shape sh = {1, 1, 4, 9, 0, 0, 0, 0, 0};
    sm_opts o = {.lo = -3.0f, .hi = 3.0f, .mask = {.key_len = 1}, .edit_mask = key_len_6};
    const peak_tester_case c = shape_case(&sh, 1.0f, 1500 + (uint64_t)_i, &o);
    peak_tester_problem p;
    sm_problem *s = sm_begin(&p, &c);
    X_AT(s, 0, 2) = bad[_i];   /* visible: row 0 is NaN at keys < 6 */
    X_AT(s, 1, 7) = bad[_i];   /* masked by key_len: row 1 normal */
    X_AT(s, 2, 8) = -bad[_i];  /* masked: NaN or -inf, row 2 normal */
    X_AT(s, 3, 1) = -INFINITY; /* visible -inf: probability 0 */
    sm_end(&p);
}
END_TEST

/* Every visible score -inf: no probability mass, the row is zeros. */
START_TEST(all_visible_minus_inf_is_zero_row)
{
    const sm_shape sh = {1, 1, 2, 6, 0, 0, 0, 0, 0};
    sm_opts o = {.lo = -1.0f, .hi = 1.0f};
    const peak_tester_case c = shape_case(&sh, 1.0f, 1600, &o);
    peak_tester_problem p;
    sm_problem *s = sm_begin(&p, &c);
    for (size_t e = 0; e < 12; e++)
        X_AT(s, e / 6, e % 6) = e < 6 ? -INFINITY : (float)e;
    sm_end(&p);
}
END_TEST

/* Max subtraction: scores of +-1e30 and [90, 100] must not overflow. */
START_TEST(huge_magnitudes)
{
    static const float lo[] = {90.0f, -100.0f, 1e30f, -1e30f, -1e30f};
    static const float hi[] = {100.0f, -90.0f, 3e30f, -3e29f, 1e30f};
    const sm_shape s = {1, 2, 3, 1 + (size_t)_i * 15, 0, 0, 0, 0, 0};
    for (size_t r = 0; r < 5; r++)
        check_masked(&s, 1.0f, 1700 + r, lo[r], hi[r], (sm_mask_spec){0});
}
END_TEST

/* ---- every length with every mask kind ------------------------------------- */

/* Lengths: 1..70 cover every tail of both vector widths, 127,
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

/* The mask of each kind for rows of lk keys. */
static sm_mask_spec kind_mask(int kind, size_t lk)
{
    sm_mask_spec m = {0};
    if (kind == KIND_CAUSAL_TL || kind == KIND_ALL) {
        m.causal = 1;
        m.q_offset = lk / 2; /* rows end mid-row, at every offset mod 16 */
    }
    if (kind == KIND_CAUSAL_BR) {
        m.causal = 1;
        m.align = PEAK_ALIGN_BOTTOM_RIGHT;
    }
    if (kind == KIND_WINDOW || kind == KIND_ALL)
        m.window = lk / 3 + 1;
    if (kind == KIND_WINDOW)
        m.align = PEAK_ALIGN_BOTTOM_RIGHT; /* window alone, no causal */
    m.key_len = kind == KIND_KEY_LEN || kind == KIND_ALL;
    if (kind == KIND_KEEP || kind == KIND_ALL) {
        m.keep = 1;
        m.keep_bcast = kind == KIND_ALL ? 1 : 0;
        m.keep_density = 0.55;
    }
    if (kind == KIND_BIAS || kind == KIND_ALL) {
        m.bias = 1;
        m.bias_bcast = kind == KIND_ALL ? 2 : 0;
        m.bias_lo = -2.0f;
        m.bias_hi = 2.0f;
        m.bias_masked = 0.25;
    }
    return m;
}

START_TEST(every_length_every_mask_kind)
{
    for (size_t k = 0; k < N_LENGTHS; k++) {
        const size_t lk = length_at(k);
        /* Lq = 3 rows per head; in place for odd k; scale != 1 for even. */
        const sm_shape s = {2, 1, 3, lk, k % 3, (k + 1) % 3, k % 5, (int)(k & 1), 0};
        check_masked(&s, (k & 1) ? 0.0f : 0.37f, 2000 + (uint64_t)_i * 100 + k, -9.0f, 9.0f,
                     kind_mask(_i, lk));
    }
}
END_TEST

/* The (start, length) runs of masked_runs_on_lane_boundaries. */
static const size_t run_starts[] = {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 48, 80};
static const size_t run_lens[] = {1, 7, 8, 9, 15, 16, 17, 32, 48, 64, 96};
#define N_RUN_STARTS (sizeof run_starts / sizeof run_starts[0])
#define N_RUN_LENS (sizeof run_lens / sizeof run_lens[0])

/* Row a * N_RUN_LENS + l of the keep mask drops keys [start a, + len l). */
static void masked_runs(sm_problem *s, int arg)
{
    (void)arg;
    for (size_t a = 0; a < N_RUN_STARTS; a++)
        for (size_t l = 0; l < N_RUN_LENS; l++) {
            uint8_t *row = s->keep + (a * N_RUN_LENS + l) * 96;
            for (size_t j = run_starts[a]; j < run_starts[a] + run_lens[l] && j < 96; j++)
                row[j] = 0;
        }
}

/* Masked runs that cover whole vectors and straddle lane boundaries of both
   widths (8 and 16): row r of the keep mask drops keys [a, a + len) for
   one (a, len) pair, over a row of 96 keys (6 and 12 vectors). */
START_TEST(masked_runs_on_lane_boundaries)
{
    const sm_shape s = {1, 1, N_RUN_STARTS * N_RUN_LENS, 96, 0, 0, 0, _i, 0};
    const sm_mask_spec m = {.keep = 1, .keep_density = 1.0};
    check_edited(&s, 1.0f, 2100 + (uint64_t)_i, -6.0f, 6.0f, m, masked_runs, 0);
}
END_TEST

static void key_len_0_is(sm_problem *s, int cut)
{
    s->key_len[0] = cut;
}

/* The same runs made by the structural masks: key_len and windows that end
   on and next to lane boundaries (no element mask: the unmasked path). */
START_TEST(structural_edges_on_lane_boundaries)
{
    static const size_t cut[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65};
    for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++) {
        const sm_shape s = {3, 2, 5, 80, 1, 0, 0, (int)(c & 1), 0};
        const uint64_t seed = 2200 + c * 4 + (uint64_t)_i;
        if (_i == 0) {
            check_edited(&s, 1.0f, seed, -6.0f, 6.0f, (sm_mask_spec){.key_len = 1}, key_len_0_is,
                         (int)cut[c]);
        } else {
            const sm_mask_spec m = {.window = cut[c], .causal = _i == 2, .q_offset = 70};
            check_masked(&s, 1.0f, seed, -6.0f, 6.0f, m);
        }
    }
}
END_TEST

/* Row r of an lk x lk keep mask sees key (r * 7) % lk alone. */
static size_t only_key(size_t r, size_t lk)
{
    return (r * 7) % lk;
}

static void one_key_per_row(sm_problem *s, int arg)
{
    (void)arg;
    const size_t lk = s->d.k_len;
    for (size_t r = 0; r < lk; r++)
        s->keep[r * lk + only_key(r, lk)] = 1;
}

/* One visible key: e^0 / e^0, exactly 1 on every tier, at keys on and next
   to lane boundaries; and every other key exactly +0. */
START_TEST(single_visible_key_is_exactly_one)
{
    static const size_t lks[] = {1, 5, 16, 17, 33, 64, 100};
    const size_t lk = lks[_i];
    const sm_shape sh = {1, 1, lk, lk, 0, 0, 0, 0, 0};
    sm_opts o = {.lo = -50.0f, .hi = 50.0f, .mask = {.keep = 1, .keep_density = 0.0},
                 .edit_mask = one_key_per_row};
    const peak_tester_case c = shape_case(&sh, 1.0f, 2300 + (uint64_t)_i, &o);
    peak_tester_problem p;
    const sm_problem *s = sm_begin(&p, &c);
    peak_tester_run(&softmax, &p);
    for (size_t r = 0; r < lk; r++)
        for (size_t j = 0; j < lk; j++) {
            const float got = Y_AT(s, r, j), want = j == only_key(r, lk) ? 1.0f : 0.0f;
            CHECK(got == want && !signbit(got), "%s Lk%zu row %zu key %zu: %.9g, want %g",
                  peak_isa_name(peak_test_isa), lk, r, j, (double)got, (double)want);
        }
    peak_tester_free(&softmax, &p);
}
END_TEST

/* Rows of equal huge scores are uniform (max subtraction makes them all
   e^0); +-1e30 mixed gives the uniform distribution over the +1e30 keys. */
START_TEST(rows_of_huge_equal_scores)
{
    static const float vals[] = {1e30f, -1e30f, FLT_MAX, -FLT_MAX};
    const size_t lk = 1 + (size_t)_i * 13;
    const sm_shape sh = {1, 1, 5, lk, 0, 0, 0, 0, 0};
    sm_opts o = {.lo = -1.0f, .hi = 1.0f};
    const peak_tester_case c = shape_case(&sh, 1.0f, 2400 + (uint64_t)_i, &o);
    peak_tester_problem p;
    sm_problem *s = sm_begin(&p, &c);
    for (size_t r = 0; r < 5; r++)
        for (size_t j = 0; j < lk; j++)
            X_AT(s, r, j) = r < 4 ? vals[r] : (j % 3 ? -1e30f : 1e30f);
    peak_tester_run(&softmax, &p);
    for (size_t r = 0; r < 5; r++) {
        const size_t n = r < 4 ? lk : (lk + 2) / 3;
        for (size_t j = 0; j < lk; j++) {
            const double want = (r < 4 || j % 3 == 0) ? 1.0 / (double)n : 0.0;
            CHECK(fabs(Y_AT(s, r, j) - want) <= 1e-7 + 4 * FLT_EPSILON * want,
                  "%s Lk%zu row %zu key %zu: %.9g, want %.9g", peak_isa_name(peak_test_isa), lk,
                  r, j, (double)Y_AT(s, r, j), want);
        }
    }
    peak_tester_free(&softmax, &p);
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
        const sm_shape sh = {1, 1, np, 48, 0, 0, 0, neg, 0};
        sm_opts o = {.lo = -5.0f, .hi = 5.0f};
        const peak_tester_case c =
            shape_case(&sh, neg ? -0.5f : 1.0f, 2500 + (uint64_t)_i * 2 + (uint64_t)neg, &o);
        peak_tester_problem p;
        sm_problem *s = sm_begin(&p, &c);
        for (size_t r = 0; r < np; r++)
            X_AT(s, r, pos[r]) = bad[_i];
        sm_end(&p);
    }
}
END_TEST

/* x * scale + bias can overflow to -inf in float: such a visible key has
   probability 0, and a row of them is a zero row, as in the reference. */
START_TEST(bias_sum_overflowing_to_minus_inf)
{
    const sm_shape sh = {1, 1, 3, 20, 0, 0, 0, 0, 0};
    sm_opts o = {.lo = -1.0f, .hi = 1.0f,
                 .mask = {.bias = 1, .bias_lo = -1.0f, .bias_hi = 1.0f, .bias_masked = 0.0}};
    const peak_tester_case c = shape_case(&sh, 1.0f, 2600, &o);
    peak_tester_problem p;
    sm_problem *s = sm_begin(&p, &c);
    for (size_t j = 0; j < 20; j++) {
        s->bias[j] = -3e38f; /* row 0: all overflow */
        X_AT(s, 0, j) = -1e38f;
        if (j % 4 == 0) { /* row 1: every 4th overflows */
            s->bias[20 + j] = -3e38f;
            X_AT(s, 1, j) = -1e38f;
        }
    }
    s->bias[40 + 5] = -3e38f; /* row 2: finite huge negative, not overflowing */
    sm_end(&p);
}
END_TEST

/* Exponential terms below FLT_MIN are 0 on every tier (peak.h), so a
   probability never comes out subnormal on one tier and 0 on another. */
START_TEST(underflowing_terms_are_zero_on_every_tier)
{
    const float x[4] = {0.0f, -100.0f, -88.0f, -87.0f};
    float y[4];
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = d.heads = d.q_len = 1, d.k_len = 4;
    d.x_stride[2] = d.y_stride[2] = 4;
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_OK);
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
    peak_status s = peak_softmax(y, x, &d, NULL);
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
    sm_mask_spec m = {.causal = 1, .align = PEAK_ALIGN_BOTTOM_RIGHT};
    if (_i) {
        m.window = 3000;
        m.keep = 1; /* one keep row for all */
        m.keep_bcast = 4;
        m.keep_density = 0.9;
        m.bias = 1;
        m.bias_bcast = 4;
        m.bias_lo = -1.0f;
        m.bias_hi = 1.0f;
        m.bias_masked = 0.05;
    }
    check_masked(&s, 1.0f, 2650 + (uint64_t)_i, -6.0f, 6.0f, m);
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
            const size_t lk = length_at(k);
            const sm_shape sh = {1, 2, 2, lk, 0, 0, 0, 0, 0};
            sm_opts o = {.lo = lo[v], .hi = hi[v]};
            const peak_tester_case c =
                shape_case(&sh, v == 4 ? 0.001f : 1.0f, 2700 + k * 8 + v, &o);
            peak_tester_problem p;
            sm_problem *s = sm_begin(&p, &c);
            if (v == 5) /* a few keys far above the rest: probabilities near 1/2..1/5 */
                for (size_t e = 0; e < 4 * lk; e += 1 + peak_test_next(&p.rng) % 40)
                    X_AT(s, e / lk, e % lk) = peak_test_uniform(&p.rng, 0.0f, 1.5f);
            sm_end(&p);
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
            const sm_shape sh = {1, 1, lk == 4096 ? 2 : 5, lk, 0, 0, k % 7, (int)(k & 1), 0};
            const float scale = scales[(k + (size_t)kind) % 3];
            sm_opts o = {.lo = (top - 88.0f) / scale, .hi = top / scale};
            if (kind == 1)
                o.mask = (sm_mask_spec){.keep = 1, .keep_density = 0.7};
            if (kind == 2) /* bias in [-8, 0): the scores spread 8 more */
                o.mask = (sm_mask_spec){
                    .bias = 1, .bias_lo = -8.0f, .bias_hi = 0.0f, .bias_masked = 0.2};
            const peak_tester_case c =
                shape_case(&sh, scale, 3000 + (uint64_t)_i * 1000 + k * 4 + (uint64_t)kind, &o);
            peak_tester_problem p;
            sm_problem *s = sm_begin(&p, &c);
            if (kind == 3) { /* one key at the top, the rest 2^-24 below it */
                const float t = (float)log(0.99 * 0x1p-24);
                for (size_t i = 0; i < sh.Lq; i++)
                    for (size_t j = 0; j < lk; j++)
                        X_AT(s, i, j) = (j == i % lk ? top : top + t) / scale;
            }
            sm_end(&p);
        }
    }
    print_stats("wide_range_relative_ulp");
}
END_TEST

/* ---- the SIMD tiers agree bit for bit ---------------------------------------- */

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
            const float top = wide_max[(k + (size_t)kind) % N_WIDE_MAX];
            const sm_shape sh = {1, 2, 3, lk, 1, 2, k % 5, 0, 0};
            sm_opts o = {.lo = top - 88.0f, .hi = top, .mask = kind_mask(kind, lk)};
            const peak_tester_case c =
                shape_case(&sh, (k & 1) ? 0.37f : 1.0f, 4000 + k * N_KINDS + (uint64_t)kind, &o);
            peak_tester_problem p;
            sm_problem *s = sm_begin(&p, &c);
            if (k % 3 == 0)
                X_AT(s, 0, lk / 2) = NAN; /* row 0: a NaN row, or a masked NaN */
            peak_tester_run(&softmax, &p);
            peak_tester_same_bits(&softmax, &p, other);
            peak_tester_free(&softmax, &p);
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
    const sm_shape sh = {1, 1, L, L, 0, 0, 0, 0, 0};
    sm_opts o = {.lo = -5.0f, .hi = 5.0f, .mask = {.causal = 1}};
    const peak_tester_case c = shape_case(&sh, 1.0f, 1800, &o);
    peak_tester_problem full;
    const sm_problem *s = sm_begin(&full, &c);
    peak_tester_run(&softmax, &full); /* x is as before: the tester checked it */
    for (size_t t = 0; t < L; t++) {
        for (int align = 0; align < 2; align++) {
            peak_softmax_desc d = s->d;
            d.q_len = 1;
            d.k_len = align ? t + 1 : L;
            d.mask.align = (peak_align)align;
            d.mask.q_offset = align ? 0 : t;
            float *y = peak_test_alloc(d.k_len, 0);
            ck_assert_int_eq(peak_softmax(y, &X_AT(s, t, 0), &d, NULL), PEAK_OK);
            for (size_t j = 0; j < d.k_len; j++) {
                const float want = Y_AT(s, t, j);
                CHECK(want < FLT_MIN ? fabsf(y[j] - want) <= FLT_MIN
                                     : peak_test_ulp_diff(y[j], want) <= SM_ULP_TOL,
                      "%s L%zu t%zu align %d key %zu: decode %.9g, full %.9g",
                      peak_isa_name(peak_test_isa), L, t, align, j, (double)y[j], (double)want);
            }
            peak_test_free(y);
        }
    }
    peak_tester_free(&softmax, &full);
}
END_TEST

/* ---- invalid arguments ------------------------------------------------------ */

/* peak_softmax on a mutated copy of a valid problem fails with `want` and
   leaves every buffer (x and y) untouched. */
static void expect_rejected(peak_tester_problem *p, const char *what, const peak_softmax_desc *d,
                            float *y, const float *x, peak_status want)
{
    peak_tester_snapshot(p);
    peak_tester_expect_rejected(p, what, peak_softmax(y, x, d, NULL), want);
}

START_TEST(invalid_arguments)
{
    const sm_shape sh = {2, 2, 3, 8, 0, 0, 0, 0, 0};
    sm_opts o = {.lo = -1.0f, .hi = 1.0f, .mask = {.key_len = 1}};
    const peak_tester_case c = shape_case(&sh, 1.0f, 1900, &o);
    peak_tester_problem p;
    sm_problem *s = sm_begin(&p, &c);
    const peak_status inval = PEAK_ERR_INVALID_ARG;
    peak_softmax_desc d;

    expect_rejected(&p, "NULL y", &s->d, NULL, s->x, inval);
    expect_rejected(&p, "NULL x", &s->d, s->y, NULL, inval);
    expect_rejected(&p, "NULL desc", NULL, s->y, s->x, inval);
    size_t *sizes[4] = {&d.batch, &d.heads, &d.q_len, &d.k_len};
    for (int k = 0; k < 4; k++) {
        d = s->d;
        *sizes[k] = 0;
        expect_rejected(&p, "zero size", &d, s->y, s->x, inval);
    }
    d = s->d;
    d.y_stride[2] = 7; /* rows of 8 overlap */
    expect_rejected(&p, "y rows overlap", &d, s->y, s->x, inval);
    d = s->d;
    d.y_stride[0] = -1;
    expect_rejected(&p, "negative stride", &d, s->y, s->x, inval);
    d = s->d;
    d.scale = INFINITY;
    expect_rejected(&p, "infinite scale", &d, s->y, s->x, inval);
    d.scale = NAN;
    expect_rejected(&p, "NaN scale", &d, s->y, s->x, inval);
    d = s->d;
    d.mask.align = (peak_align)2;
    expect_rejected(&p, "bad align", &d, s->y, s->x, inval);
    d = s->d;
    d.y_stride[2] = 9;
    expect_rejected(&p, "in place with different strides", &d, s->y, s->y, inval);

    s->key_len[1] = 9;
    expect_rejected(&p, "key_len > Lk", &s->d, s->y, s->x, PEAK_ERR_OUT_OF_RANGE);
    s->key_len[1] = -1;
    expect_rejected(&p, "key_len < 0", &s->d, s->y, s->x, PEAK_ERR_OUT_OF_RANGE);
    peak_tester_free(&softmax, &p);
}
END_TEST

/* ---- logit options (peak_logits) ------------------------------------------ */

/* A logit case and its arrays (test-util.h). */
typedef peak_test_logit_spec sm_logit_spec;
typedef peak_test_logit_arrays sm_logit_arrays;

/* peak_test_make_logits, with a -0 slope on head 2 when the slopes are
   strided (>= 0, so valid: that head has no ALiBi). */
static peak_logits make_logits(const sm_logit_spec *ls, size_t H, uint64_t *rng,
                               sm_logit_arrays *arr)
{
    const peak_logits l = peak_test_make_logits(ls, H, rng, arr);
    if (arr->slopes && l.alibi_slopes_stride && H > 2)
        arr->slopes[2 * l.alibi_slopes_stride] = -0.0f;
    return l;
}

/* The case of shape sh, scores in [lo, hi) under mask m, with the options
   ls (o and arr receive what the case points to). */
static peak_tester_case logit_case(const sm_shape *sh, float scale, uint64_t seed, float lo,
                                   float hi, sm_mask_spec m, const sm_logit_spec *ls, sm_opts *o,
                                   sm_logit_arrays *arr)
{
    *o = (sm_opts){0};
    o->lo = lo;
    o->hi = hi;
    o->mask = m;
    uint64_t rng = seed ^ 0x10917ull;
    o->logits = make_logits(ls, sh->H, &rng, arr);
    return shape_case(sh, scale, seed, o);
}

/* After peak_tester_run, on the scalar tier from the same inputs: every
   probability within SM_ULP_TOL + 1 ulp of the tier under test's (both
   are that close to the exact softmax of the same float scores, peak.h:
   so a SIMD tier's capped or ALiBi scores are the scalar tier's bits), or
   within FLT_MIN below it; NaN where it is NaN. */
static void near_scalar(peak_tester_problem *p)
{
    const sm_problem *s = p->user;
    const peak_tester_buf *by = y_buf(p);
    float *got = malloc(by->n * sizeof *got);
    if (!got)
        abort();
    memcpy(got, by->p, by->n * sizeof *got);
    for (size_t k = 0; k < p->nbufs; k++)
        memcpy(p->buf[k].p, p->buf[k].before, p->buf[k].n * sizeof(float));
    ck_assert_int_eq(peak_isa_force(PEAK_ISA_SCALAR), PEAK_OK);
    const peak_status st = peak_softmax(s->y, s->x, &s->d, NULL);
    ck_assert_int_eq(peak_isa_force(peak_test_isa), PEAK_OK);
    ck_assert_int_eq(st, PEAK_OK);
    for (size_t t = 0; t < n_rows(s); t++)
        for (size_t j = 0; j < s->d.k_len; j++) {
            const float a = got[t * s->ld_y + j], b = Y_AT(s, t, j);
            const int ok = (isnan(a) && isnan(b)) || a == b || fabsf(a - b) <= FLT_MIN ||
                           peak_test_ulp_diff(a, b) <= SM_ULP_TOL + 1;
            CHECK(ok, "%s: y[%zu,%zu] = %a, the scalar tier's %a", peak_tester_describe(p), t, j,
                  (double)a, (double)b);
        }
    free(got);
}

/* After peak_tester_run on a SIMD tier: every other SIMD tier this CPU
   runs gives the same bytes (peak.h), and the scalar tier nearly the same
   probabilities (near_scalar). */
static void logits_across_tiers(peak_tester_problem *p)
{
    static const peak_isa simd[] = {PEAK_ISA_AVX2, PEAK_ISA_AVX512, PEAK_ISA_NEON};
    if (peak_test_isa == PEAK_ISA_SCALAR)
        return;
    for (size_t k = 0; k < 3; k++)
        if (simd[k] != peak_test_isa && peak_isa_supported(simd[k]))
            peak_tester_same_bits(&softmax, p, simd[k]);
    near_scalar(p);
}

/* Runs a logit case set up with sm_begin (its x possibly edited): the
   oracle, then the other tiers. */
static void logit_end(peak_tester_problem *p)
{
    peak_tester_run(&softmax, p);
    logits_across_tiers(p);
    peak_tester_free(&softmax, p);
}

static void check_logits(const sm_shape *sh, float scale, uint64_t seed, float lo, float hi,
                         sm_mask_spec m, const sm_logit_spec *ls)
{
    sm_opts o;
    sm_logit_arrays arr;
    const peak_tester_case c = logit_case(sh, scale, seed, lo, hi, m, ls, &o, &arr);
    peak_tester_problem p;
    sm_begin(&p, &c);
    logit_end(&p);
    peak_test_free_logits(&arr);
}

static const size_t logit_lengths[] = {1, 7, 16, 17, 33, 70, 129};
#define N_LOGIT_LENGTHS (sizeof logit_lengths / sizeof logit_lengths[0])

/* Soft-capping alone and under masks: caps of 30 and 50 (Gemma 2's final
   and attention caps), 1 and 0.25; scores of +-8 (tanh's polynomial
   range and beyond), +-100 and +-1e4 (saturated: every score near +-cap);
   every tail of both vector widths; negative and non-unit scales. */
START_TEST(softcap_alone_and_masked)
{
    static const float caps[] = {30.0f, 50.0f, 1.0f, 0.25f};
    static const float lo[] = {-8.0f, -1e4f, -100.0f}, hi[] = {8.0f, 1e4f, 100.0f};
    static const int kinds[] = {KIND_NONE, KIND_CAUSAL_BR, KIND_BIAS, KIND_KEEP};
    const sm_logit_spec ls = {.cap = caps[_i]};
    for (size_t k = 0; k < N_LOGIT_LENGTHS; k++)
        for (size_t r = 0; r < 3; r++)
            for (size_t mk = 0; mk < 4; mk++) {
                const size_t lk = logit_lengths[k];
                const sm_shape sh = {1, 2, 3, lk, k % 3, (k + 1) % 3, (k + r) % 5,
                                     (int)((k + r + mk) & 1), (int)(mk == 3)};
                const float scale = r == 1 ? 1.0f : (mk & 1) ? 0.37f : -0.75f;
                check_logits(&sh, scale, 5000 + (uint64_t)_i * 1000 + k * 16 + r * 4 + mk, lo[r],
                             hi[r], kind_mask(kinds[mk], lk), &ls);
            }
}
END_TEST

/* peak.h: the cap maps +-inf to +-cap exactly (so +inf no longer poisons a
   row), a NaN still does; masked keys (the canary NaN, or +inf written
   there) are never read.  Only infinite and NaN scores, so the oracle's
   capped scores are exact and the bound is SM_ULP_TOL + 1.  Rows: all
   +inf (uniform), all -inf (uniform: -cap is finite), +inf and -inf
   alternating (the +inf keys share all but e^(-2 cap)), a NaN among
   +inf (a NaN row), and -inf with +inf at the masked keys. */
START_TEST(softcap_maps_infinities_to_cap)
{
    static const float caps[] = {30.0f, 50.0f};
    const float scale = (_i & 2) ? -0.75f : 1.0f; /* -inf * -0.75 = +inf: capped too */
    const sm_shape sh = {1, 1, 5, 19, 0, 0, 0, 0, 0};
    const sm_mask_spec m = {.bias = 1, .bias_lo = -2.0f, .bias_hi = 2.0f, .bias_masked = 0.2};
    const sm_logit_spec ls = {.cap = caps[_i & 1]};
    sm_opts o;
    sm_logit_arrays arr;
    const peak_tester_case c = logit_case(&sh, scale, 5900 + (uint64_t)_i, -1.0f, 1.0f, m, &ls,
                                          &o, &arr);
    peak_tester_problem p;
    sm_problem *s = sm_begin(&p, &c);
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 19; j++) {
            const int vis = visible(s, 0, 0, i, j);
            float v = INFINITY;
            if (i == 1 || (i == 2 && (j & 1)) || (i == 4 && vis))
                v = -INFINITY;
            if (i == 3 && j == 11)
                v = NAN;
            if (vis || i == 4)
                X_AT(s, i, j) = v;
        }
    logit_end(&p);
    peak_test_free_logits(&arr);
}
END_TEST

/* ALiBi of both forms and both alignments at q_offset 0, 1e6, 2^24 + 11
   and 2^40 - 3 (peak.h: distances are rounded once to float beyond 2^24,
   so rows that straddle 2^24 mix exact and rounded distances, and a
   distance formed by stepping a float from the row's first key rounds
   differently; at 2^40 the scores of a row share a few values), with every mask kind (a causal mask, a window, key
   lengths, keep, bias, all of them, none: then keys after qpos get a
   bonus under the causal form), 1, 8 and 12 heads (not a power of two:
   BLOOM's slopes), peak.h's slopes and the caller's with strides 0 and 2.
   No cap: the oracle's scores are the kernels' bits, and every
   probability is within SM_ULP_TOL ulp. */
START_TEST(alibi_masks_heads_slopes)
{
    static const size_t offs[] = {0, 1000000, ((size_t)1 << 24) + 11, ((size_t)1 << 40) - 3};
    static const size_t heads[] = {1, 8, 12};
    static const int kinds[] = {KIND_NONE,   KIND_CAUSAL_TL, KIND_WINDOW, KIND_KEY_LEN,
                                KIND_KEEP, KIND_BIAS,      KIND_ALL};
    const peak_alibi form = (_i & 1) ? PEAK_ALIBI_SYMMETRIC : PEAK_ALIBI_CAUSAL;
    const peak_align align = (peak_align)((_i >> 1) & 1);
    const size_t off = offs[_i >> 2];
    for (size_t hk = 0; hk < 3; hk++)
        for (int sl = 0; sl < 3; sl++)
            for (size_t mk = 0; mk < 7; mk++) {
                const size_t lk = 5 + mk * 11;
                const sm_shape sh = {2, heads[hk], 3, lk, mk % 3, 1, mk % 4,
                                     (int)((mk + hk) & 1), (int)(sl == 1)};
                sm_mask_spec m = kind_mask(kinds[mk], lk);
                m.causal = m.causal || kinds[mk] == KIND_CAUSAL_TL;
                m.align = align;
                m.q_offset = off + (kinds[mk] == KIND_CAUSAL_TL ? 1 : 0);
                const sm_logit_spec ls = {.alibi = form, .slopes = sl};
                check_logits(&sh, (mk & 1) ? 0.37f : 1.0f,
                             6000 + (uint64_t)_i * 100 + hk * 30 + (uint64_t)sl * 10 + mk, -8.0f,
                             8.0f, m, &ls);
            }
}
END_TEST

/* No slopes given: peak_alibi_slopes() of the call's head count, the same
   bits as passing them (stride 1), for 8 and 12 heads. */
START_TEST(alibi_default_slopes_are_peak_alibi_slopes)
{
    const size_t H = _i ? 12 : 8, lk = 41, n = H * 2 * lk;
    uint64_t rng = 6900 + (uint64_t)_i;
    float *x = peak_test_alloc(n, 0), *y1 = peak_test_alloc(n, 1), *y2 = peak_test_alloc(n, 2);
    float slopes[12];
    peak_test_fill_uniform(x, n, &rng, -4.0f, 4.0f);
    ck_assert_int_eq(peak_alibi_slopes(slopes, H), PEAK_OK);
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = 1, d.heads = H, d.q_len = 2, d.k_len = lk;
    const ptrdiff_t st[3] = {(ptrdiff_t)n, (ptrdiff_t)(2 * lk), (ptrdiff_t)lk};
    memcpy(d.x_stride, st, sizeof st);
    memcpy(d.y_stride, st, sizeof st);
    d.mask.q_offset = 100;
    d.logits.alibi = _i ? PEAK_ALIBI_SYMMETRIC : PEAK_ALIBI_CAUSAL;
    ck_assert_int_eq(peak_softmax(y1, x, &d, NULL), PEAK_OK);
    d.logits.alibi_slopes = slopes;
    d.logits.alibi_slopes_stride = 1;
    ck_assert_int_eq(peak_softmax(y2, x, &d, NULL), PEAK_OK);
    CHECK(peak_test_bytes_equal(y1, y2, n * sizeof *y1),
          "%s: %zu heads: the default slopes differ from peak_alibi_slopes'",
          peak_isa_name(peak_test_isa), H);
    peak_test_free(x);
    peak_test_free(y1);
    peak_test_free(y2);
}
END_TEST

/* Row 0 of every (b, h) sees nothing: its bias row all -inf. */
static void bias_row_0_all_masked(sm_problem *s, int arg)
{
    (void)arg;
    const peak_mask *m = &s->d.mask;
    for (size_t b = 0; b < s->d.batch; b++)
        for (size_t h = 0; h < s->d.heads; h++)
            for (size_t j = 0; j < s->d.k_len; j++)
                s->bias[b * m->bias_stride[0] + h * m->bias_stride[1] + j] = -INFINITY;
}

/* Sinks, one for all heads (stride 0) or one per head (stride 1), of the
   scores' size or far above them (probabilities of e^-60 and less: tiny
   but as accurate, relatively), alone and with the cap and ALiBi, under
   masks that leave rows with no key (key_len 0 at b = 2, a bias row of
   -inf, bottom-right causal with Lq > Lk): those stay zeros. */
START_TEST(sinks_with_masks_and_options)
{
    const int per_head = _i & 1, far = (_i >> 1) & 1;
    const float s_lo = far ? 60.0f : -3.0f, s_hi = far ? 70.0f : 3.0f;
    for (int opt = 0; opt < 3; opt++)
        for (int mk = 0; mk < 5; mk++) {
            const size_t lk = mk == 3 ? 2 : 9 + (size_t)mk * 13;
            const sm_shape sh = {3, 3, 4, lk, (size_t)mk % 2, 1, (size_t)mk, (int)(mk == 1),
                                 (int)(opt == 1)};
            sm_logit_spec ls = {.sinks = 1 + per_head, .sink_lo = s_lo, .sink_hi = s_hi};
            if (opt == 1)
                ls.cap = 30.0f;
            if (opt == 2)
                ls.alibi = PEAK_ALIBI_CAUSAL, ls.slopes = 2;
            sm_mask_spec m = {0};
            if (mk == 1)
                m.key_len = 1;
            if (mk == 2 || mk == 4) {
                m.bias = 1;
                m.bias_lo = -2.0f;
                m.bias_hi = 2.0f;
                m.bias_masked = mk == 4 ? 0.0 : 0.3;
            }
            if (mk == 3)
                m.causal = 1, m.align = PEAK_ALIGN_BOTTOM_RIGHT;
            if (mk == 0)
                m.keep = 1, m.keep_density = 0.5;
            sm_opts o;
            sm_logit_arrays arr;
            const uint64_t seed = 7000 + (uint64_t)_i * 100 + (uint64_t)opt * 10 + (uint64_t)mk;
            peak_tester_case c = logit_case(&sh, 1.0f, seed, -5.0f, 5.0f, m, &ls, &o, &arr);
            if (mk == 4)
                o.edit_mask = bias_row_0_all_masked;
            peak_tester_problem p;
            sm_begin(&p, &c);
            logit_end(&p);
            peak_test_free_logits(&arr);
        }
}
END_TEST

/* Sinks at the ends of float's range: FLT_MAX takes every probability to
   +0 exactly (each term e^(s - FLT_MAX) is below 2^-127.5, which every
   tier counts as 0; the row is not a NaN row); -FLT_MAX changes nothing;
   70 above scores in [-5, 5) leaves probabilities near e^-70 (normal
   floats), each within SM_ULP_TOL ulp; 0 under scores of 1e30. */
START_TEST(sink_extremes)
{
    static const float sink[] = {FLT_MAX, -FLT_MAX, 70.0f, 0.0f};
    static const float lo[] = {-5.0f, -5.0f, -5.0f, 1e30f}, hi[] = {5.0f, 5.0f, 5.0f, 2e30f};
    for (size_t k = 0; k < N_LOGIT_LENGTHS; k++) {
        const size_t lk = logit_lengths[k];
        const sm_shape sh = {1, 2, 3, lk, 0, 1, k % 4, (int)(k & 1), 0};
        const sm_logit_spec ls = {.sinks = 1, .sink_lo = sink[_i], .sink_hi = sink[_i]};
        sm_opts o;
        sm_logit_arrays arr;
        const peak_tester_case c = logit_case(&sh, 1.0f, 7500 + (uint64_t)_i * 16 + k, lo[_i],
                                              hi[_i], (sm_mask_spec){0}, &ls, &o, &arr);
        peak_tester_problem p;
        const sm_problem *s = sm_begin(&p, &c);
        peak_tester_run(&softmax, &p);
        if (_i == 0)
            for (size_t t = 0; t < n_rows(s); t++)
                for (size_t j = 0; j < lk; j++)
                    CHECK(Y_AT(s, t, j) == 0.0f && !signbit(Y_AT(s, t, j)),
                          "%s: sink FLT_MAX: y[%zu,%zu] = %a, want +0", peak_tester_describe(&p),
                          t, j, (double)Y_AT(s, t, j));
        logits_across_tiers(&p);
        peak_tester_free(&softmax, &p);
        peak_test_free_logits(&arr);
    }
}
END_TEST

/* A sink changes neither a NaN row (a visible NaN or +inf) nor a zero row
   (every visible score -inf); with a cap, -inf is -cap and the row is a
   normal one; +inf or NaN at masked keys never leaks. */
START_TEST(sinks_with_nonfinite_scores)
{
    const sm_shape sh = {1, 2, 5, 23, 1, 0, 3, _i & 1, 0};
    const sm_mask_spec m = {.key_len = 1, .keep = 1, .keep_density = 0.7};
    const sm_logit_spec ls = {.cap = (_i & 2) ? 50.0f : 0.0f, .sinks = 2, .sink_lo = -1.0f,
                              .sink_hi = 1.0f};
    sm_opts o;
    sm_logit_arrays arr;
    const peak_tester_case c =
        logit_case(&sh, 1.0f, 7700 + (uint64_t)_i, -3.0f, 3.0f, m, &ls, &o, &arr);
    o.edit_mask = key_len_0_is;
    o.arg = 20;
    peak_tester_problem p;
    sm_problem *s = sm_begin(&p, &c);
    for (size_t t = 0; t < n_rows(s); t++) {
        size_t b, h, i;
        row_index(s, t, &b, &h, &i);
        for (size_t j = 0; j < 23; j++) {
            const int vis = visible(s, b, h, i, j);
            if (!vis)
                X_AT(s, t, j) = (j & 1) ? INFINITY : NAN; /* never read */
            else if (i == 0)
                X_AT(s, t, j) = -INFINITY; /* a zero row (without the cap) */
            else if (i == 1 && j == 17)
                X_AT(s, t, j) = NAN; /* a NaN row */
            else if (i == 2 && j == 19)
                X_AT(s, t, j) = INFINITY; /* a NaN row without the cap */
        }
    }
    logit_end(&p);
    peak_test_free_logits(&arr);
}
END_TEST

/* Random shapes, masks and logit options together: the cap (30, 50, 5
   or none), ALiBi (either form, the slopes peak.h's or the caller's at
   stride 0 or 2, q_offset up to 1e6), sinks (stride 0 or 1, near the
   scores or above them), in place or not, both row orders. */
START_TEST(logits_combinations_fuzz)
{
    static const float caps[] = {0.0f, 30.0f, 50.0f, 5.0f};
    static const size_t offs[] = {0, 1, 3, 1000000};
    uint64_t rng = 7800 + (uint64_t)_i;
    const int n = peak_test_quick() ? 12 : 40;
    for (int t = 0; t < n; t++) {
        const sm_shape sh = random_shape(&rng, 13, 70);
        const uint64_t seed = peak_test_next(&rng);
        const uint64_t pick = peak_test_next(&rng);
        const sm_mask_spec m = random_mask(pick, offs);
        const int far = (pick >> 26) & 1;
        const sm_logit_spec ls = {.cap = caps[(pick >> 18) & 3],
                                  .alibi = (peak_alibi)((pick >> 20) % 3),
                                  .slopes = (int)((pick >> 22) % 3),
                                  .sinks = (int)((pick >> 24) % 3),
                                  .sink_lo = far ? 10.0f : -4.0f,
                                  .sink_hi = far ? 20.0f : 4.0f};
        check_logits(&sh, (pick & 1) ? 0.3f : 0.0f, seed, -6.0f, 6.0f, m, &ls);
    }
}
END_TEST

/* Decoding with the logit options: one query at position t over a cache
   of L keys is row t of the full causal call (ALiBi sees the same qpos:
   top-left with q_offset t, or bottom-right over the first t + 1 keys),
   each probability within SM_ULP_TOL ulp of it. */
START_TEST(logits_decode_rows_match_full_causal)
{
    const size_t L = 1 + (size_t)_i * 9;
    const sm_shape sh = {1, 2, L, L, 0, 0, 0, 0, 0};
    const sm_logit_spec ls = {.alibi = (_i & 1) ? PEAK_ALIBI_SYMMETRIC : PEAK_ALIBI_CAUSAL,
                              .sinks = 2, .sink_lo = -2.0f, .sink_hi = 2.0f};
    sm_opts o;
    sm_logit_arrays arr;
    const peak_tester_case c = logit_case(&sh, 1.0f, 7900 + (uint64_t)_i, -5.0f, 5.0f,
                                          (sm_mask_spec){.causal = 1}, &ls, &o, &arr);
    peak_tester_problem full;
    const sm_problem *s = sm_begin(&full, &c);
    peak_tester_run(&softmax, &full);
    for (size_t h = 0; h < 2; h++)
        for (size_t t = 0; t < L; t++)
            for (int align = 0; align < 2; align++) {
                peak_softmax_desc d = s->d;
                d.heads = 1;
                d.q_len = 1;
                d.k_len = align ? t + 1 : L;
                d.mask.align = (peak_align)align;
                d.mask.q_offset = align ? 0 : t;
                const float slope = peak_test_alibi_slope(h, 2);
                d.logits.alibi_slopes = &slope; /* head h of 2, alone */
                d.logits.sinks = &arr.sinks[h];
                float *y = peak_test_alloc(d.k_len, 0);
                ck_assert_int_eq(peak_softmax(y, &X_AT(s, h * L + t, 0), &d, NULL), PEAK_OK);
                for (size_t j = 0; j < d.k_len; j++) {
                    const float want = Y_AT(s, h * L + t, j);
                    CHECK(want < FLT_MIN ? fabsf(y[j] - want) <= FLT_MIN
                                         : peak_test_ulp_diff(y[j], want) <= SM_ULP_TOL,
                          "%s L%zu h%zu t%zu align %d key %zu: decode %.9g, full %.9g",
                          peak_isa_name(peak_test_isa), L, h, t, align, j, (double)y[j],
                          (double)want);
                }
                peak_test_free(y);
            }
    peak_tester_free(&softmax, &full);
    peak_test_free_logits(&arr);
}
END_TEST

/* Invalid logit options are rejected, nothing written: a cap that is NaN,
   negative or infinite; an ALiBi form outside the enum; a slope that is
   negative, NaN or infinite, a negative slopes stride; a sink that is NaN
   or infinite, a negative sinks stride.  A cap of -0 is 0: off. */
START_TEST(invalid_logit_options)
{
    const sm_shape sh = {2, 2, 3, 8, 0, 0, 0, 0, 0};
    sm_opts o = {.lo = -1.0f, .hi = 1.0f};
    const peak_tester_case c = shape_case(&sh, 1.0f, 7950, &o);
    peak_tester_problem p;
    sm_problem *s = sm_begin(&p, &c);
    const peak_status inval = PEAK_ERR_INVALID_ARG;
    float bad[2] = {0.5f, 0.25f};
    peak_softmax_desc d;
    static const float caps[] = {NAN, -1.0f, INFINITY, -INFINITY, -FLT_MIN};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        d = s->d;
        d.logits.softcap = caps[k];
        expect_rejected(&p, "bad cap", &d, s->y, s->x, inval);
    }
    d = s->d;
    d.logits.alibi = (peak_alibi)3;
    expect_rejected(&p, "alibi 3", &d, s->y, s->x, inval);
    d.logits.alibi = (peak_alibi)-1;
    expect_rejected(&p, "alibi -1", &d, s->y, s->x, inval);
    static const float bad_slope[] = {-0.25f, NAN, INFINITY, -FLT_MIN};
    for (size_t k = 0; k < sizeof bad_slope / sizeof bad_slope[0]; k++) {
        d = s->d;
        d.logits.alibi = PEAK_ALIBI_CAUSAL;
        bad[1] = bad_slope[k];
        d.logits.alibi_slopes = bad;
        d.logits.alibi_slopes_stride = 1;
        expect_rejected(&p, "bad slope", &d, s->y, s->x, inval);
        d.logits.alibi_slopes = &bad[1]; /* stride 0: one for all */
        d.logits.alibi_slopes_stride = 0;
        expect_rejected(&p, "bad slope, stride 0", &d, s->y, s->x, inval);
    }
    bad[1] = 0.25f;
    d = s->d;
    d.logits.alibi = PEAK_ALIBI_SYMMETRIC;
    d.logits.alibi_slopes = &bad[1];
    d.logits.alibi_slopes_stride = -1;
    expect_rejected(&p, "negative slopes stride", &d, s->y, s->x, inval);
    static const float bad_sink[] = {NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < 3; k++) {
        d = s->d;
        bad[1] = bad_sink[k];
        d.logits.sinks = bad;
        d.logits.sinks_stride = 1;
        expect_rejected(&p, "bad sink", &d, s->y, s->x, inval);
        d.logits.sinks = &bad[1];
        d.logits.sinks_stride = 0;
        expect_rejected(&p, "bad sink, stride 0", &d, s->y, s->x, inval);
    }
    bad[1] = 0.25f;
    d = s->d;
    d.logits.sinks = &bad[1];
    d.logits.sinks_stride = -1;
    expect_rejected(&p, "negative sinks stride", &d, s->y, s->x, inval);
    /* a cap of -0 is off: the bits of no cap */
    d = s->d;
    d.logits.softcap = -0.0f;
    const size_t ny = y_buf(&p)->n;
    float *y0 = peak_test_alloc(ny, 0);
    ck_assert_int_eq(peak_softmax(s->y, s->x, &d, NULL), PEAK_OK);
    memcpy(y0, s->y, ny * sizeof *y0);
    ck_assert_int_eq(peak_softmax(s->y, s->x, &s->d, NULL), PEAK_OK);
    CHECK(peak_test_bytes_equal(y0, s->y, ny * sizeof *y0), "%s: a cap of -0 is not off",
          peak_isa_name(peak_test_isa));
    peak_test_free(y0);
    peak_tester_free(&softmax, &p);
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("softmax");
    TCase *tc = tcase_create(peak_isa_name(isa));
    peak_tester_add_sweeps(tc, &softmax);
    tcase_add_loop_test(tc, aligned_sizes_1_to_70, 0, SIZE_GROUPS);
    tcase_add_loop_test(tc, strided_rows_keep_gaps, 0, 5);
    tcase_add_loop_test(tc, misaligned_pointers, 0, 4);
    tcase_add_loop_test(tc, model_sizes_with_batch_and_heads, 0, 2);
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
    tcase_add_loop_test(tc, softcap_alone_and_masked, 0, 4);
    tcase_add_loop_test(tc, softcap_maps_infinities_to_cap, 0, 4);
    tcase_add_loop_test(tc, alibi_masks_heads_slopes, 0, 16);
    tcase_add_loop_test(tc, alibi_default_slopes_are_peak_alibi_slopes, 0, 2);
    tcase_add_loop_test(tc, sinks_with_masks_and_options, 0, 4);
    tcase_add_loop_test(tc, sink_extremes, 0, 4);
    tcase_add_loop_test(tc, sinks_with_nonfinite_scores, 0, 4);
    tcase_add_loop_test(tc, logits_combinations_fuzz, 0, 8);
    tcase_add_loop_test(tc, logits_decode_rows_match_full_causal, 0, 4);
    tcase_add_test(tc, invalid_logit_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
