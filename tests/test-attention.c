/*
 * test-attention.c - peak_attention on one tier against a double-precision
 * oracle written here (plain loops, independent of kernels/mask.h).
 *
 * Q is filled everywhere; K and V only at the keys some query may see.
 * Every other float (masked keys, row gaps) keeps the canary, a NaN, so a
 * kernel that reads a masked key or value poisons its output and fails.
 * Gaps of O and lse must still hold the canary afterwards.
 */
#include "test-util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* |O - ref| <= ATTENTION_TOL * max|V|: a float kernel's error is a few ULP of
   the weighted mean of V, which is bounded by the largest |V|. */
#define ATTENTION_TOL 1e-5
/* |lse - ref| <= LSE_TOL * (1 + |ref|). */
#define LSE_TOL 1e-5

/* ---- problem set-up ------------------------------------------------------ */

typedef struct attention_shape {
    size_t B, H, KVH, Lq, Lk, D, Dv;
    int bhld;        /* [B, H, L, D] instead of [B, L, H, D] */
    size_t pad;      /* floats of gap after each (b, l, h) row */
    size_t misalign; /* floats off a 64-byte boundary */
    int with_lse;
} attention_shape;

typedef struct attention_problem {
    attention_shape s;
    peak_attention_desc d;
    float *q, *k, *v, *o, *lse;
    float *q0, *k0, *v0;
    size_t nq, nk, nv, no, nl;
    uint8_t *keep;
    float *bias;
    int32_t *key_len;
    uint64_t rng;
    int own_workspace; /* pass a caller workspace instead of NULL */
} attention_problem;

static void operand_strides(const attention_shape *s, size_t L, size_t heads, size_t width,
                            ptrdiff_t st[3])
{
    const size_t row = width + s->pad;
    if (s->bhld) {
        st[0] = (ptrdiff_t)(heads * L * row);
        st[1] = (ptrdiff_t)row;
        st[2] = (ptrdiff_t)(L * row);
    } else {
        st[0] = (ptrdiff_t)(L * heads * row);
        st[1] = (ptrdiff_t)(heads * row);
        st[2] = (ptrdiff_t)row;
    }
}

/* Floats spanned by an operand indexed [b < n0, . < n1, . < n2] + width. */
static size_t span3(size_t n0, size_t n1, size_t n2, const ptrdiff_t st[3], size_t width)
{
    return (n0 - 1) * (size_t)st[0] + (n1 - 1) * (size_t)st[1] + (n2 - 1) * (size_t)st[2] +
           width;
}

static float *operand(const attention_shape *s, size_t L, size_t heads, size_t width,
                      ptrdiff_t st[3], size_t *n, size_t misalign)
{
    operand_strides(s, L, heads, width, st);
    *n = span3(s->B, L, heads, st, width);
    return peak_test_alloc(*n, misalign);
}

static void attention_init(attention_problem *p, const attention_shape *s, uint64_t seed)
{
    peak_attention_desc d0 = PEAK_ATTENTION_DESC_DEFAULT;
    memset(p, 0, sizeof *p);
    p->s = *s;
    p->d = d0;
    p->rng = seed;
    p->d.batch = s->B;
    p->d.heads = s->H;
    p->d.kv_heads = s->KVH == s->H && (seed & 1) ? 0 : s->KVH; /* 0 means heads */
    p->d.q_len = s->Lq;
    p->d.kv_len = s->Lk;
    p->d.head_dim = s->D;
    p->d.v_head_dim = s->Dv == s->D && (seed & 2) ? 0 : s->Dv; /* 0 means head_dim */
    p->q = operand(s, s->Lq, s->H, s->D, p->d.q_stride, &p->nq, s->misalign);
    p->k = operand(s, s->Lk, s->KVH, s->D, p->d.k_stride, &p->nk, (s->misalign + 1) % 16);
    p->v = operand(s, s->Lk, s->KVH, s->Dv, p->d.v_stride, &p->nv, (s->misalign + 2) % 16);
    p->o = operand(s, s->Lq, s->H, s->Dv, p->d.o_stride, &p->no, (s->misalign + 3) % 16);
    if (s->with_lse) {
        const size_t step = s->pad ? 2 : 1; /* a gap between entries */
        p->d.lse_stride[2] = (ptrdiff_t)step;
        p->d.lse_stride[1] = (ptrdiff_t)(s->Lq * step);
        p->d.lse_stride[0] = (ptrdiff_t)(s->H * s->Lq * step);
        p->nl = span3(s->B, s->H, s->Lq, p->d.lse_stride, 1);
        p->lse = p->d.lse = peak_test_alloc(p->nl, s->misalign);
    }
}

static void attention_free(attention_problem *p)
{
    peak_test_free(p->q);
    peak_test_free(p->k);
    peak_test_free(p->v);
    peak_test_free(p->o);
    peak_test_free(p->lse);
    peak_test_free(p->bias);
    free(p->q0);
    free(p->k0);
    free(p->v0);
    free(p->keep);
    free(p->key_len);
}

/* Random masks over [B, H, Lq, Lk] (test-util.c). */
static peak_test_dims attention_dims(const attention_problem *p)
{
    return (peak_test_dims){p->s.B, p->s.H, p->s.Lq, p->s.Lk};
}

static void attention_add_keep(attention_problem *p, unsigned broadcast, double density)
{
    p->keep = peak_test_add_keep(&p->d.mask, attention_dims(p), broadcast, density, &p->rng);
}

static void attention_add_bias(attention_problem *p, unsigned broadcast, float lo, float hi,
                               double masked)
{
    p->bias =
        peak_test_add_bias(&p->d.mask, attention_dims(p), broadcast, lo, hi, masked, 2, &p->rng);
}

static void attention_add_key_len(attention_problem *p)
{
    p->key_len = peak_test_add_key_len(&p->d.mask, attention_dims(p), &p->rng);
}

/* ---- the oracle ---------------------------------------------------------- */

static float *at(float *base, const ptrdiff_t st[3], size_t i0, size_t i1, size_t i2)
{
    return base + (ptrdiff_t)i0 * st[0] + (ptrdiff_t)i1 * st[1] + (ptrdiff_t)i2 * st[2];
}

static const float *cat(const float *base, const ptrdiff_t st[3], size_t i0, size_t i1,
                        size_t i2)
{
    return base + (ptrdiff_t)i0 * st[0] + (ptrdiff_t)i1 * st[1] + (ptrdiff_t)i2 * st[2];
}

static size_t kv_head(const peak_attention_desc *d, size_t h)
{
    size_t kvh = d->kv_heads ? d->kv_heads : d->heads;
    return h / (d->heads / kvh);
}

static float resolved_scale(const peak_attention_desc *d)
{
    return d->scale != 0.0f ? d->scale : (float)(1.0 / sqrt((double)d->head_dim));
}

static size_t value_dim(const peak_attention_desc *d)
{
    return d->v_head_dim ? d->v_head_dim : d->head_dim;
}

static int oracle_visible(const peak_attention_desc *d, size_t b, size_t h, size_t i, size_t j)
{
    return peak_test_mask_visible(&d->mask, d->q_len, d->kv_len, b, h, i, j);
}

static double oracle_score(const attention_problem *p, size_t b, size_t h, size_t i, size_t j)
{
    const peak_attention_desc *d = &p->d;
    const float *q = cat(p->q0, d->q_stride, b, i, h);
    const float *k = cat(p->k0, d->k_stride, b, j, kv_head(d, h));
    double s = 0.0;
    for (size_t c = 0; c < d->head_dim; c++)
        s += (double)q[c] * (double)k[c];
    s *= (double)resolved_scale(d);
    if (d->mask.bias)
        s += d->mask.bias[b * d->mask.bias_stride[0] + h * d->mask.bias_stride[1] +
                          i * d->mask.bias_stride[2] + j];
    return s;
}

/* out[Dv] and *lse for row (b, h, i); returns the row kind. */
static int oracle_row(const attention_problem *p, size_t b, size_t h, size_t i, double *sc,
                      double *out, double *lse)
{
    const peak_attention_desc *d = &p->d;
    double m = -INFINITY;
    int poisoned = 0;
    for (size_t j = 0; j < d->kv_len; j++) {
        if (!oracle_visible(d, b, h, i, j))
            continue;
        sc[j] = oracle_score(p, b, h, i, j);
        if (isnan(sc[j]) || sc[j] == INFINITY)
            poisoned = 1;
        else if (sc[j] > m)
            m = sc[j];
    }
    if (poisoned || m == -INFINITY)
        return poisoned ? ROW_NAN : ROW_ZERO;
    double sum = 0.0;
    for (size_t c = 0; c < value_dim(d); c++)
        out[c] = 0.0;
    for (size_t j = 0; j < d->kv_len; j++) {
        if (!oracle_visible(d, b, h, i, j))
            continue;
        const double w = exp(sc[j] - m);
        const float *v = cat(p->v0, d->v_stride, b, j, kv_head(d, h));
        sum += w;
        for (size_t c = 0; c < value_dim(d); c++)
            out[c] += w * v[c];
    }
    for (size_t c = 0; c < value_dim(d); c++)
        out[c] /= sum;
    *lse = m + log(sum);
    return ROW_NORMAL;
}

/* ---- checking ------------------------------------------------------------ */

/* The largest finite |V| the call may read (canaries are NaN: skipped). */
static double v_max(const attention_problem *p)
{
    double m = 0.0;
    for (size_t e = 0; e < p->nv; e++)
        if (isfinite(p->v0[e]) && fabs(p->v0[e]) > m)
            m = fabs(p->v0[e]);
    return m;
}

static int value_ok(int kind, double ref, float got, double tol)
{
    if (kind == ROW_NAN)
        return isnan(got);
    if (kind == ROW_ZERO)
        return got == 0.0f && !signbit(got);
    return fabs((double)got - ref) <= tol;
}

static void expect_value(const char *where, int kind, double ref, float got, double tol)
{
    if (!value_ok(kind, ref, got, tol))
        ck_abort_msg("%s: expected %s %.9g, got %.9g (tol %.3g)", where,
                     kind == ROW_NAN ? "NaN" : kind == ROW_ZERO ? "+0" : "value", ref,
                     (double)got, tol);
}

static void expect_lse(const char *where, int kind, double ref, float got)
{
    if (kind == ROW_ZERO)
        CHECK(got == -INFINITY, "%s: lse expected -inf, got %.9g", where, (double)got);
    else
        expect_value(where, kind, ref, got, LSE_TOL * (1.0 + fabs(ref)));
}

static void mark(unsigned char *covered, const float *base, const float *p, size_t n)
{
    memset(covered + (p - base), 1, n);
}

static void expect_gaps(const char *name, const float *buf, const unsigned char *covered,
                        size_t n)
{
    for (size_t e = 0; e < n; e++)
        CHECK(covered[e] || peak_test_is_canary(buf[e]), "%s: gap float %zu of %s written",
                      peak_isa_name(peak_test_isa), e, name);
}

/* "tier shape at b h i c", for failure messages. */
static void describe(const attention_problem *p, size_t b, size_t h, size_t i, size_t c, char *buf,
                     size_t n)
{
    const peak_attention_desc *d = &p->d;
    snprintf(buf, n, "%s B%zu H%zu/%zu Lq%zu Lk%zu D%zu Dv%zu at b%zu h%zu i%zu c%zu",
             peak_isa_name(peak_test_isa), d->batch, d->heads, p->s.KVH, d->q_len, d->kv_len,
             d->head_dim, value_dim(d), b, h, i, c);
}

static void check_row(const attention_problem *p, size_t b, size_t h, size_t i, double *sc,
                      double *ref, double tol, unsigned char *cov_o, unsigned char *cov_l)
{
    const peak_attention_desc *d = &p->d;
    double lse = 0.0;
    int kind = oracle_row(p, b, h, i, sc, ref, &lse);
    char where[200];
    const float *o = cat(p->o, d->o_stride, b, i, h);
    for (size_t c = 0; c < value_dim(d); c++) {
        if (value_ok(kind, ref[c], o[c], tol))
            continue;
        describe(p, b, h, i, c, where, sizeof where);
        expect_value(where, kind, ref[c], o[c], tol);
    }
    mark(cov_o, p->o, o, value_dim(d));
    if (p->lse) {
        const float *l = cat(p->lse, d->lse_stride, b, h, i);
        describe(p, b, h, i, 0, where, sizeof where);
        expect_lse(where, kind, lse, *l);
        mark(cov_l, p->lse, l, 1);
    }
}

static void attention_check(const attention_problem *p)
{
    const peak_attention_desc *d = &p->d;
    double *sc = malloc(d->kv_len * sizeof *sc);
    double *ref = malloc(value_dim(d) * sizeof *ref);
    unsigned char *cov_o = calloc(p->no, 1), *cov_l = calloc(p->nl + 1, 1);
    const double tol = ATTENTION_TOL * v_max(p);
    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < d->heads; h++)
            for (size_t i = 0; i < d->q_len; i++)
                check_row(p, b, h, i, sc, ref, tol, cov_o, cov_l);
    expect_gaps("O", p->o, cov_o, p->no);
    if (p->lse)
        expect_gaps("lse", p->lse, cov_l, p->nl);
    free(cov_l);
    free(cov_o);
    free(ref);
    free(sc);
}

/* ---- filling and running --------------------------------------------------- */

/* 1 if some query row of some head in kv head kvh's group sees key j. */
static int key_needed(const attention_problem *p, size_t b, size_t kvh, size_t j)
{
    const peak_attention_desc *d = &p->d;
    for (size_t h = 0; h < d->heads; h++)
        if (kv_head(d, h) == kvh)
            for (size_t i = 0; i < d->q_len; i++)
                if (oracle_visible(d, b, h, i, j))
                    return 1;
    return 0;
}

static void fill_row(attention_problem *p, float *row, size_t n, float lo, float hi)
{
    for (size_t c = 0; c < n; c++)
        row[c] = peak_test_uniform(&p->rng, lo, hi);
}

/* Q everywhere; K in [-kq, kq] and V in [-vr, vr] only at needed keys. */
static void attention_fill(attention_problem *p, float kq, float vr)
{
    const peak_attention_desc *d = &p->d;
    const size_t kvh_n = p->s.KVH;
    for (size_t b = 0; b < d->batch; b++) {
        for (size_t i = 0; i < d->q_len; i++)
            for (size_t h = 0; h < d->heads; h++)
                fill_row(p, at(p->q, d->q_stride, b, i, h), d->head_dim, -kq, kq);
        for (size_t j = 0; j < d->kv_len; j++)
            for (size_t g = 0; g < kvh_n; g++)
                if (key_needed(p, b, g, j)) {
                    fill_row(p, at(p->k, d->k_stride, b, j, g), d->head_dim, -kq, kq);
                    fill_row(p, at(p->v, d->v_stride, b, j, g), value_dim(d), -vr, vr);
                }
    }
}

static float *dup(const float *src, size_t n)
{
    float *c = malloc(n * sizeof *c);
    memcpy(c, src, n * sizeof *c);
    return c;
}

static peak_status attention_call(attention_problem *p)
{
    if (!p->own_workspace)
        return peak_attention(p->o, p->q, p->k, p->v, &p->d, NULL, 0);
    size_t bytes = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&p->d, &bytes), PEAK_OK);
    void *ws = bytes ? aligned_alloc(64, (bytes + 63) & ~(size_t)63) : NULL;
    peak_status s = peak_attention(p->o, p->q, p->k, p->v, &p->d, ws, bytes);
    free(ws);
    return s;
}

static void attention_run(attention_problem *p)
{
    p->q0 = dup(p->q, p->nq);
    p->k0 = dup(p->k, p->nk);
    p->v0 = dup(p->v, p->nv);
    ck_assert_int_eq(attention_call(p), PEAK_OK);
    CHECK(peak_test_bytes_equal(p->q, p->q0, p->nq * sizeof(float)) &&
                      peak_test_bytes_equal(p->k, p->k0, p->nk * sizeof(float)) &&
                      peak_test_bytes_equal(p->v, p->v0, p->nv * sizeof(float)),
                  "an input was modified");
    attention_check(p);
}

static void attention_finish(attention_problem *p, float kq, float vr)
{
    attention_fill(p, kq, vr);
    attention_run(p);
    attention_free(p);
}

static void attention_simple(const attention_shape *s, uint64_t seed)
{
    attention_problem p;
    attention_init(&p, s, seed);
    p.own_workspace = (int)(seed & 4);
    attention_finish(&p, 1.0f, 1.0f);
}

/* ---- sizes, layouts, heads ----------------------------------------------- */

/* Sizes 1..70 run as 7 Check tests of 10 sizes each: a fork per size
   costs more than the size itself under AddressSanitizer. */
#define SIZE_GROUP 10
#define SIZE_GROUPS 7

START_TEST(head_dims_1_to_70)
{
    for (size_t n = 1 + (size_t)_i * SIZE_GROUP; n <= ((size_t)_i + 1) * SIZE_GROUP; n++) {
        attention_shape s = {1, 2, 2, 3, 5, n, n, (int)(n & 1), 0, 0, 1};
        attention_simple(&s, 100 + n);
    }
}
END_TEST

START_TEST(key_lengths_1_to_70)
{
    for (size_t n = 1 + (size_t)_i * SIZE_GROUP; n <= ((size_t)_i + 1) * SIZE_GROUP; n++) {
        attention_shape s = {1, 1, 1, 2, n, 8, 8, (int)(n & 1), 1, 1, 1};
        attention_simple(&s, 200 + n);
    }
}
END_TEST

/* d_model 512 (8 heads of 64) and 768 (12 heads of 64), both layouts. */
START_TEST(model_sizes)
{
    attention_shape s = {1, _i < 2 ? 8 : 12, _i < 2 ? 8 : 12, 9, 16, 64, 64, _i & 1, 0, 0, 1};
    attention_simple(&s, 300 + (uint64_t)_i);
}
END_TEST

START_TEST(strided_misaligned_layouts)
{
    static const size_t pads[] = {1, 3, 16, 37};
    for (size_t mis = 0; mis < 4; mis++) {
        attention_shape s = {2,         2,           1, 3, 7, 5 + (size_t)_i, 3, (int)(mis & 1),
                             pads[mis], 1 + mis * 3, 1};
        attention_simple(&s, 400 + mis);
    }
}
END_TEST

START_TEST(cross_attention_lq_ne_lk)
{
    static const size_t lq[] = {1, 3, 20, 7}, lk[] = {9, 17, 4, 70};
    attention_shape s = {2, 3, 3, lq[_i], lk[_i], 16, 12, _i & 1, 2, 0, 1};
    attention_simple(&s, 500 + (uint64_t)_i);
}
END_TEST

START_TEST(grouped_and_multi_query)
{
    static const size_t kvh[] = {1, 2, 4, 8};
    attention_shape s = {2, 8, kvh[_i], 5, 11, 8, 8, _i & 1, 1, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 600 + (uint64_t)_i);
    attention_add_keep(&p, 0, 0.7); /* per-head masks: groups see different keys */
    attention_finish(&p, 1.0f, 1.0f);
}
END_TEST

/* ---- masks ----------------------------------------------------------------- */

START_TEST(causal_both_alignments_with_q_offset)
{
    static const size_t lq[] = {1, 3, 7, 16}, lk[] = {1, 5, 16, 33}, off[] = {0, 1, 5};
    for (size_t a = 0; a < 4; a++)
        for (size_t c = 0; c < 4; c++)
            for (size_t o = 0; o < 3; o++) {
                attention_shape s = {1, 2, 1, lq[a], lk[c], 4, 4, (int)(o & 1), 1, 0, 1};
                attention_problem p;
                attention_init(&p, &s, 700 + a * 16 + c * 4 + o);
                p.d.mask.causal = 1;
                p.d.mask.align = (peak_align)_i;
                p.d.mask.q_offset = off[o];
                attention_finish(&p, 1.0f, 1.0f);
            }
}
END_TEST

START_TEST(sliding_window_with_and_without_causal)
{
    static const size_t win[] = {1, 2, 5, 100};
    for (size_t w = 0; w < 4; w++)
        for (int align = 0; align < 2; align++) {
            attention_shape s = {1, 2, 2, 9, 13, 4, 4, 0, 1, 0, 1};
            attention_problem p;
            attention_init(&p, &s, 800 + w * 2 + (uint64_t)align);
            p.d.mask.causal = _i;
            p.d.mask.window = win[w];
            p.d.mask.align = (peak_align)align;
            p.d.mask.q_offset = w;
            attention_finish(&p, 1.0f, 1.0f);
        }
}
END_TEST

START_TEST(key_padding_lengths)
{
    attention_shape s = {4, 2, 1, 3, 1 + (size_t)_i * 7, 8, 8, _i & 1, 2, 1, 1};
    attention_problem p;
    attention_init(&p, &s, 900 + (uint64_t)_i);
    attention_add_key_len(&p);
    attention_finish(&p, 1.0f, 1.0f);
}
END_TEST

START_TEST(keep_mask_every_broadcast)
{
    attention_shape s = {2, 3, 3, 4, 19, 8, 8, 0, 1, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 1000 + (uint64_t)_i);
    attention_add_keep(&p, (unsigned)_i, 0.6);
    attention_finish(&p, 1.0f, 1.0f);
}
END_TEST

START_TEST(bias_mask_every_broadcast)
{
    attention_shape s = {2, 3, 1, 4, 21, 8, 5, 1, 0, 1, 1};
    attention_problem p;
    attention_init(&p, &s, 1100 + (uint64_t)_i);
    attention_add_bias(&p, (unsigned)_i, -3.0f, 3.0f, 0.3);
    attention_finish(&p, 1.0f, 1.0f);
}
END_TEST

START_TEST(mask_combinations_fuzz)
{
    uint64_t rng = 1200 + (uint64_t)_i;
    for (int n = 0; n < 100; n++) {
        size_t kvh = 1 + peak_test_next(&rng) % 2, grp = 1 + peak_test_next(&rng) % 2;
        attention_shape s = {1 + peak_test_next(&rng) % 3,
                             kvh * grp,
                             kvh,
                             1 + peak_test_next(&rng) % 9,
                             1 + peak_test_next(&rng) % 30,
                             1 + peak_test_next(&rng) % 20,
                             1 + peak_test_next(&rng) % 20,
                             (int)(peak_test_next(&rng) % 2),
                             peak_test_next(&rng) % 3,
                             peak_test_next(&rng) % 4,
                             1};
        attention_problem p;
        attention_init(&p, &s, peak_test_next(&rng));
        unsigned pick = (unsigned)peak_test_next(&rng);
        p.d.scale = (pick & 1) ? 0.3f : 0.0f;
        p.d.mask.causal = (pick >> 1) & 1;
        p.d.mask.align = (peak_align)((pick >> 2) & 1);
        p.d.mask.q_offset = (pick >> 3) & 3;
        p.d.mask.window = (pick >> 5) & 1 ? 1 + (pick >> 6) % 8 : 0;
        if ((pick >> 9) & 1)
            attention_add_key_len(&p);
        if ((pick >> 10) & 1)
            attention_add_keep(&p, (pick >> 11) & 7, 0.7);
        if ((pick >> 14) & 1)
            attention_add_bias(&p, (pick >> 15) & 7, -2.0f, 2.0f, 0.2);
        p.own_workspace = (pick >> 18) & 1;
        attention_finish(&p, 2.0f, 3.0f);
    }
}
END_TEST

/* ---- special rows ---------------------------------------------------------- */

START_TEST(fully_masked_rows_zero_and_lse_minus_inf)
{
    attention_shape s = {3, 2, 1, 4, _i >= 3 ? 2 : 11, 8, 6, _i & 1, 1, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 1300 + (uint64_t)_i);
    switch (_i) {
    case 0:
        attention_add_key_len(&p); /* key_len[2] == 0 */
        break;
    case 1:
        attention_add_keep(&p, 0, 0.0);
        break;
    case 2:
        attention_add_bias(&p, 7, 0.0f, 1.0f, 1.0);
        break;
    case 3: /* bottom-right, Lq = 4 > Lk = 2: rows 0 and 1 see nothing */
        p.d.mask.causal = 1;
        p.d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        break;
    default:
        p.d.mask.causal = 1;
        p.d.mask.window = 2;
        p.d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        break;
    }
    attention_finish(&p, 1.0f, 1.0f);
}
END_TEST

/* K and V hold NaN and inf at every key the mask hides (the future and the
   padding), instead of the canary: none of it may reach O or lse. */
START_TEST(masked_nonfinite_kv_never_read)
{
    static const float poison[] = {NAN, INFINITY, -INFINITY};
    attention_shape s = {2, 2, 1, 6, 10, 8, 8, _i & 1, 0, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 1400 + (uint64_t)_i);
    attention_add_key_len(&p);
    p.key_len[0] = 7;
    p.d.mask.causal = 1;
    p.d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    attention_fill(&p, 1.0f, 1.0f);
    for (size_t e = 0; e < p.nk; e++)
        if (peak_test_is_canary(p.k[e]))
            p.k[e] = poison[(size_t)_i % 3];
    for (size_t e = 0; e < p.nv; e++)
        if (peak_test_is_canary(p.v[e]))
            p.v[e] = poison[((size_t)_i + 1) % 3];
    attention_run(&p);
    attention_free(&p);
}
END_TEST

/* A visible NaN or +inf score makes its row NaN (O and lse). */
START_TEST(nonfinite_visible_score_poisons_row)
{
    attention_shape s = {1, 2, 2, 3, 6, 4, 4, 0, 0, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 1500 + (uint64_t)_i);
    attention_fill(&p, 1.0f, 1.0f);
    if (_i == 0) {
        at(p.k, p.d.k_stride, 0, 4, 1)[2] = NAN; /* key 4 of kv head 1: heads 1 */
    } else {
        float *q = at(p.q, p.d.q_stride, 0, 2, 0);
        for (size_t c = 0; c < 4; c++)
            q[c] = INFINITY;
        for (size_t j = 0; j < 6; j++)
            for (size_t c = 0; c < 4; c++)
                at(p.k, p.d.k_stride, 0, j, 0)[c] = 0.5f; /* q.k = +inf */
    }
    attention_run(&p);
    attention_free(&p);
}
END_TEST

/* Scores of magnitude ~1e30 and values of ~1e30: no overflow anywhere. */
START_TEST(huge_magnitudes)
{
    static const float kq[] = {3e14f, 1e15f, 1.0f}, vr[] = {1.0f, 1e30f, 1e30f};
    attention_shape s = {1, 2, 1, 3, 1 + (size_t)_i * 9, 4, 4, 0, 0, 0, 1};
    for (size_t r = 0; r < 3; r++) {
        attention_problem p;
        attention_init(&p, &s, 1600 + r);
        attention_finish(&p, kq[r], vr[r]);
    }
}
END_TEST

/* ---- decoding -------------------------------------------------------------- */

/* One query at step t over a KV cache of capacity L (entries > t never
   written, so still NaN canaries) equals row t of the full causal call:
   top-left with q_offset t over the whole cache, and bottom-right over the
   first t+1 keys.  Also a chunked prefill of 3 queries at offset t. */
static void expect_rows_match(const attention_problem *full, const float *o,
                              const ptrdiff_t o_st[3], size_t i0, size_t n_rows, size_t t,
                              int align)
{
    const peak_attention_desc *d = &full->d;
    const double tol = ATTENTION_TOL * v_max(full);
    for (size_t h = 0; h < d->heads; h++)
        for (size_t r = 0; r < n_rows; r++) {
            const float *want = cat(full->o, d->o_stride, 0, i0 + r, h);
            const float *got = cat(o, o_st, 0, r, h);
            for (size_t c = 0; c < d->head_dim; c++)
                CHECK(fabs((double)got[c] - want[c]) <= tol,
                              "%s t%zu align %d h%zu row %zu c%zu: step %.9g full %.9g",
                              peak_isa_name(peak_test_isa), t, align, h, i0 + r, c,
                              (double)got[c], (double)want[c]);
        }
}

static void decode_step(const attention_problem *full, size_t t, size_t n_rows, int align)
{
    const size_t L = full->d.kv_len;
    peak_attention_desc d = full->d;
    d.q_len = n_rows;
    d.kv_len = align ? t + n_rows : L;
    d.mask.align = (peak_align)align;
    d.mask.q_offset = align ? 0 : t;
    d.lse = NULL;
    /* A cache that holds only the keys 0 .. t+n_rows-1, the rest canary. */
    float *k = peak_test_alloc(full->nk, 0), *v = peak_test_alloc(full->nv, 0);
    const size_t used = (t + n_rows) * (size_t)d.k_stride[1];
    memcpy(k, full->k0, used * sizeof *k);
    memcpy(v, full->v0, used * sizeof *v);
    float *o = peak_test_alloc(n_rows * d.heads * d.head_dim, 0);
    d.o_stride[0] = (ptrdiff_t)(n_rows * d.heads * d.head_dim);
    const float *q = cat(full->q0, d.q_stride, 0, t, 0);
    ck_assert_int_eq(peak_attention(o, q, k, v, &d, NULL, 0), PEAK_OK);
    expect_rows_match(full, o, d.o_stride, t, n_rows, t, align);
    peak_test_free(o);
    peak_test_free(v);
    peak_test_free(k);
}

START_TEST(decode_matches_full_causal)
{
    const size_t L = 2 + (size_t)_i * 5;
    attention_shape s = {1, 4, 2, L, L, 8, 8, 0, 0, 0, 0}; /* [B, L, H, D] packed: a cache */
    attention_problem full;
    attention_init(&full, &s, 1700 + (uint64_t)_i);
    full.d.mask.causal = 1;
    attention_fill(&full, 1.0f, 1.0f);
    attention_run(&full);
    for (size_t t = 0; t < L; t++)
        for (int align = 0; align < 2; align++) {
            decode_step(&full, t, 1, align);
            if (t + 3 <= L)
                decode_step(&full, t, 3, align);
        }
    attention_free(&full);
}
END_TEST

/* ---- the tiled SIMD kernels: blocks, tiles and their edges ------------------ */

/* Head sizes 1 to 256 across block (64 rows) and tile (64 keys) edges,
   with 3 query heads per kv head (a block mixes heads), both layouts. */
START_TEST(head_dims_across_tiles)
{
    static const size_t dh[] = {1, 7, 8, 16, 63, 64, 65, 128, 256};
    const size_t D = dh[_i];
    for (int causal = 0; causal < 2; causal++) {
        attention_shape s = {1,
                             6,
                             2,
                             23 + (size_t)causal * 48,
                             131 - (size_t)causal * 60,
                             D,
                             causal ? D : (D % 5) + 3,
                             causal,
                             causal ? 0 : 3,
                             (size_t)_i % 4,
                             1};
        if (peak_test_quick()) /* 2 heads sharing 1 KV head instead of 6 and 2 */
            s.H = 2, s.KVH = 1;
        attention_problem p;
        attention_init(&p, &s, 2000 + (uint64_t)_i * 2 + (uint64_t)causal);
        p.d.mask.causal = causal;
        p.d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        p.own_workspace = causal;
        attention_finish(&p, 1.0f, 2.0f);
    }
}
END_TEST

/* Lq and Lk from 1 to 300, primes and the multiples of 64 +-1 included,
   sampled in pairs with a random mask each. */
START_TEST(lengths_to_300_sampled)
{
    static const size_t len[] = {1, 2, 13, 63, 64, 65, 97, 127, 128, 129, 199, 211, 256, 257, 300};
    const size_t nl = sizeof len / sizeof len[0];
    uint64_t rng = 2100 + (uint64_t)_i;
    for (int n = 0; n < (peak_test_quick() ? 2 : 6); n++) {
        const size_t lq = len[peak_test_next(&rng) % nl], lk = len[peak_test_next(&rng) % nl];
        const unsigned pick = (unsigned)peak_test_next(&rng);
        attention_shape s = {1 + (pick & 1),
                             2,
                             1 + ((pick >> 1) & 1),
                             lq,
                             lk,
                             16,
                             8,
                             (int)((pick >> 2) & 1),
                             (pick >> 3) % 3,
                             (pick >> 5) % 4,
                             1};
        attention_problem p;
        attention_init(&p, &s, peak_test_next(&rng));
        p.d.mask.causal = (pick >> 7) & 1;
        p.d.mask.align = (peak_align)((pick >> 8) & 1);
        p.d.mask.q_offset = (pick >> 9) & 1 ? (pick >> 10) % 70 : 0;
        p.d.mask.window = (pick >> 17) & 1 ? 1 + (pick >> 18) % 90 : 0;
        if ((pick >> 25) & 1)
            attention_add_key_len(&p);
        if ((pick >> 26) & 1)
            attention_add_keep(&p, (pick >> 27) & 7, 0.8);
        if ((pick >> 30) & 1)
            attention_add_bias(&p, 0, -2.0f, 2.0f, 0.1);
        attention_finish(&p, 1.0f, 1.0f);
    }
}
END_TEST

/* Whole tiles masked inside rows that see other tiles: keys 64..191 hidden
   by the keep mask (case 0), the bias (1) or a window (2); the hidden K and
   V keep their NaN canaries, and no NaN may come out. */
START_TEST(fully_masked_tiles_inside_visible_rows)
{
    attention_shape s = {1, 2, 1, 70, 260, 16, 16, 0, 0, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 2200 + (uint64_t)_i);
    if (_i == 0) {
        attention_add_keep(&p, 0, 1.0);
        for (size_t e = 0; e < 2 * 70; e++)
            memset(p.keep + e * 260 + 64, 0, 128);
    } else if (_i == 1) {
        attention_add_bias(&p, 0, -1.0f, 1.0f, 0.0);
        for (size_t e = 0; e < 2 * 70; e++)
            for (size_t j = 64; j < 192; j++)
                p.bias[e * 260 + j] = -INFINITY;
    } else {
        p.d.mask.window = 20;
        p.d.mask.causal = 1;
        p.d.mask.q_offset = 150;
    }
    attention_finish(&p, 1.0f, 1.0f);
}
END_TEST

/* A V row holding inf at a key only query row 0 sees: the other rows of
   the block must not pick up 0 * inf.  Row 0 itself is inf or NaN there. */
START_TEST(nonfinite_value_seen_by_one_row)
{
    attention_shape s = {1, 1, 1, 40, 100, 8, 8, 0, 0, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 2300 + (uint64_t)_i);
    attention_add_keep(&p, 0, 1.0);
    const size_t j = 10 + (size_t)_i * 70;
    for (size_t i = 1; i < 40; i++)
        p.keep[i * 100 + j] = 0;
    attention_fill(&p, 1.0f, 1.0f);
    at(p.v, p.d.v_stride, 0, j, 0)[3] = _i ? NAN : INFINITY;
    p.q0 = dup(p.q, p.nq);
    p.k0 = dup(p.k, p.nk);
    p.v0 = dup(p.v, p.nv);
    ck_assert_int_eq(attention_call(&p), PEAK_OK);
    CHECK(!isfinite(p.o[3]), "%s: row 0 should see the non-finite value",
          peak_isa_name(peak_test_isa));
    double *sc = malloc(100 * sizeof *sc), ref[8];
    unsigned char *cov_o = calloc(p.no, 1), *cov_l = calloc(p.nl + 1, 1);
    for (size_t i = 1; i < 40; i++)
        check_row(&p, 0, 0, i, sc, ref, ATTENTION_TOL * 1.0, cov_o, cov_l);
    free(cov_l);
    free(cov_o);
    free(sc);
    attention_free(&p);
}
END_TEST

/* The packed K/V tiles a kv head's query blocks share (kernels/attention-tile.h):
   case 0, 64 query heads on one kv head, causal, so each block is one
   position and the cached tile grows by a key per block; case 2, Dh = Dv =
   256 and 1100 keys, more than the cache holds (1024 of them), so the
   blocks take their first tiles from it and pack the last two; case 1, an inf in
   a V row every row sees, in a tile cached by the first block and reused
   by the next three: each row's output is non-finite in that column and
   equals the oracle (computed with the inf replaced by 0) in the others. */
START_TEST(kv_tile_cache_across_blocks)
{
    if (_i == 0 || _i == 2) {
        attention_shape s0 = {1, 64, 1, 70, 70, 8, 8, 0, 0, 0, 1};
        attention_shape s2 = {1, 1, 1, 70, 1100, 256, 256, 1, 0, 0, 1};
        attention_problem p;
        attention_init(&p, _i ? &s2 : &s0, 2450 + (uint64_t)_i);
        p.d.mask.causal = _i == 0;
        attention_finish(&p, 1.0f, 1.0f);
        return;
    }
    attention_shape s = {1, 2, 1, 130, 150, 16, 16, 0, 0, 0, 0};
    attention_problem p;
    attention_init(&p, &s, 2451);
    attention_fill(&p, 1.0f, 1.0f);
    const size_t j = 40, col = 5;
    float *vj = at(p.v, p.d.v_stride, 0, j, 0);
    vj[col] = INFINITY;
    p.q0 = dup(p.q, p.nq);
    p.k0 = dup(p.k, p.nk);
    p.v0 = dup(p.v, p.nv);
    ck_assert_int_eq(attention_call(&p), PEAK_OK);
    at(p.v0, p.d.v_stride, 0, j, 0)[col] = 0.0f;
    double *sc = malloc(150 * sizeof *sc), ref[16], lse;
    const double tol = ATTENTION_TOL * v_max(&p);
    for (size_t h = 0; h < 2; h++)
        for (size_t i = 0; i < 130; i++) {
            ck_assert_int_eq(oracle_row(&p, 0, h, i, sc, ref, &lse), ROW_NORMAL);
            const float *o = cat(p.o, p.d.o_stride, 0, i, h);
            for (size_t c = 0; c < 16; c++) {
                char where[200];
                describe(&p, 0, h, i, c, where, sizeof where);
                if (c == col)
                    CHECK(!isfinite(o[c]), "%s: %.9g, should be non-finite", where, (double)o[c]);
                else
                    expect_value(where, ROW_NORMAL, ref[c], o[c], tol);
            }
        }
    free(sc);
    attention_free(&p);
}
END_TEST

/* A key every row sees whose weight is 0 -- its score is -inf (K holds -inf,
   q > 0) in cases 0 and 1, or it carries the finite bias -FLT_MAX in cases
   2 and 3 -- with a NaN in one column of its V: as in the scalar tier (and
   PyTorch), 0 * NaN reaches every row in that column, while the other
   columns are the oracle's (the key adds 0 to them).  Cases 0 and 2 run
   the tiled path (whole and masked tiles), 1 and 3 the row path. */
START_TEST(zero_weight_nan_value_like_scalar)
{
    const int decode = _i & 1, biased = _i >> 1;
    attention_shape s = {1, 2, 2, decode ? 1 : 70, 100, 8, 8, 0, 0, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 2460 + (uint64_t)_i);
    if (biased)
        attention_add_bias(&p, 7, -1.0f, 1.0f, 0.0);
    attention_fill(&p, 1.0f, 1.0f);
    const size_t j = 37, col = 3;
    for (size_t i = 0; i < s.Lq; i++)
        for (size_t h = 0; h < 2; h++)
            for (size_t c = 0; c < 8; c++) { /* q > 0: q . k = -inf below */
                float *qv = at(p.q, p.d.q_stride, 0, i, h) + c;
                *qv = fabsf(*qv) + 0.01f;
            }
    for (size_t g = 0; g < 2; g++) {
        if (biased)
            p.bias[j] = -FLT_MAX;
        else
            at(p.k, p.d.k_stride, 0, j, g)[0] = -INFINITY;
        at(p.v, p.d.v_stride, 0, j, g)[col] = NAN;
    }
    p.q0 = dup(p.q, p.nq);
    p.k0 = dup(p.k, p.nk);
    p.v0 = dup(p.v, p.nv);
    ck_assert_int_eq(attention_call(&p), PEAK_OK);
    double sc[100], ref[8], lse;
    const double tol = ATTENTION_TOL * v_max(&p);
    for (size_t h = 0; h < 2; h++)
        for (size_t i = 0; i < s.Lq; i++) {
            oracle_row(&p, 0, h, i, sc, ref, &lse);
            const float *o = cat(p.o, p.d.o_stride, 0, i, h);
            for (size_t c = 0; c < 8; c++) {
                char where[200];
                describe(&p, 0, h, i, c, where, sizeof where);
                if (c == col)
                    CHECK(isnan(o[c]), "%s: %.9g, should be NaN (0 * NaN)", where, (double)o[c]);
                else
                    expect_value(where, ROW_NORMAL, ref[c], o[c], tol);
            }
        }
    attention_free(&p);
}
END_TEST

/* Long rows: V = 1 +- 0.01, whose weighted mean sits on a large constant,
   is where float running sums over many keys lose most.  Within 3e-6 *
   max|V| of the oracle at 65536 keys (tiled) and 131072 (decode): without
   the folded second-level sums (kernels/attention-tile.h, PEAK_ATTENTION_FOLD_TILES) the
   SIMD tiers measured 1.1e-5 and 1.9e-5 here. */
START_TEST(long_rows_stay_accurate)
{
    const int decode = _i;
    attention_shape s = {1,
                         decode ? 2 : 1,
                         decode ? 2 : 1,
                         decode ? 1 : 64,
                         decode ? 131072 : 65536,
                         16,
                         16,
                         0,
                         0,
                         0,
                         1};
    attention_problem p;
    attention_init(&p, &s, 2470 + (uint64_t)_i);
    attention_fill(&p, 1.0f, 1.0f);
    for (size_t e = 0; e < p.nv; e++)
        p.v[e] = 1.0f + 0.01f * peak_test_uniform(&p.rng, -1.0f, 1.0f);
    p.q0 = dup(p.q, p.nq);
    p.k0 = dup(p.k, p.nk);
    p.v0 = dup(p.v, p.nv);
    ck_assert_int_eq(attention_call(&p), PEAK_OK);
    double *sc = malloc(s.Lk * sizeof *sc), ref[16];
    unsigned char *cov_o = calloc(p.no, 1), *cov_l = calloc(p.nl + 1, 1);
    for (size_t h = 0; h < s.H; h++)
        for (size_t i = 0; i < s.Lq; i++)
            check_row(&p, 0, h, i, sc, ref, 3e-6 * v_max(&p), cov_o, cov_l);
    free(cov_l);
    free(cov_o);
    free(sc);
    attention_free(&p);
}
END_TEST

/* Scores of magnitude 1e4 (q, k in [-25, 25], scale 1, Dh 16), in rows
   longer than one tile. */
START_TEST(scores_of_1e4)
{
    attention_shape s = {1, 2, 2, 9, 150, 16, 16, _i & 1, 0, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 2400 + (uint64_t)_i);
    p.d.scale = 1.0f;
    p.d.mask.causal = _i >> 1;
    p.d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    attention_finish(&p, 25.0f, 1.0f);
}
END_TEST

/* Decoding over caches longer than a tile, every offset, GQA 4:1. */
START_TEST(decode_long_cache)
{
    const size_t L = _i ? 133 : 70;
    attention_shape s = {1, 8, 2, L, L, _i ? 16 : 64, _i ? 16 : 64, 0, 0, 0, 0};
    attention_problem full;
    attention_init(&full, &s, 2500 + (uint64_t)_i);
    full.d.mask.causal = 1;
    attention_fill(&full, 1.0f, 1.0f);
    attention_run(&full);
    for (size_t t = 0; t < L; t += peak_test_quick() ? 7 : 1)
        for (int align = 0; align < 2; align++)
            decode_step(&full, t, 1, align);
    attention_free(&full);
}
END_TEST

/* ---- workspace ------------------------------------------------------------- */

START_TEST(workspace_caller_or_library)
{
    attention_shape s = {2, 2, 1, 5, 33, 16, 8, 1, 1, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 1800);
    attention_fill(&p, 1.0f, 1.0f);
    attention_run(&p); /* library-allocated workspace */
    float *o_lib = dup(p.o, p.no);
    p.own_workspace = 1;
    ck_assert_int_eq(attention_call(&p), PEAK_OK);
    CHECK(peak_test_bytes_equal(o_lib, p.o, p.no * sizeof(float)),
                  "caller and library workspaces differ");
    size_t bytes = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&p.d, &bytes), PEAK_OK);
    if (bytes > 0) {
        void *ws = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        peak_test_fill_canary(p.o, p.no);
        ck_assert_int_eq(peak_attention(p.o, p.q, p.k, p.v, &p.d, ws, bytes - 1),
                         PEAK_ERR_WORKSPACE);
        for (size_t e = 0; e < p.no; e++)
            CHECK(peak_test_is_canary(p.o[e]), "O changed");
        free(ws);
    }
    free(o_lib);
    attention_free(&p);
}
END_TEST

/* A caller workspace that meets Q, K, V, O, lse or the key_len mask is
   rejected and nothing is written: the kernels write the workspace while
   they read the inputs.  One arena holds every tensor, 64-byte aligned;
   the workspace starts at a tensor (it covers the tensor's head) or ends
   one byte into it (its tail covers the tensor's first byte).  A workspace
   just past the last tensor is accepted and gives the bits of a separate
   one. */
START_TEST(workspace_must_not_overlap)
{
    enum { B = 1, H = 2, LQ = 5, LK = 33, D = 16, NT = 6 };
    const size_t nq = B * LQ * H * D, nk = B * LK * H * D, nl = B * H * LQ;
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = B, d.heads = H, d.q_len = LQ, d.kv_len = LK, d.head_dim = D;
    const ptrdiff_t qs[3] = {LQ * H * D, H * D, D}, ks[3] = {LK * H * D, H * D, D},
                    ls[3] = {H * LQ, LQ, 1};
    memcpy(d.q_stride, qs, sizeof qs);
    memcpy(d.o_stride, qs, sizeof qs);
    memcpy(d.k_stride, ks, sizeof ks);
    memcpy(d.v_stride, ks, sizeof ks);
    memcpy(d.lse_stride, ls, sizeof ls);
    size_t need = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&d, &need), PEAK_OK);
    ck_assert(need > 0);
    const size_t up = (need + 63) & ~(size_t)63;
    /* byte offsets in the arena: room for a workspace before the tensors */
    const size_t bytes[NT] = {nq * 4, nk * 4, nk * 4, nq * 4, nl * 4, B * 4};
    size_t at[NT + 1];
    at[0] = up + 64;
    for (int t = 0; t < NT; t++)
        at[t + 1] = at[t] + ((bytes[t] + 63) & ~(size_t)63);
    const size_t total = at[NT] + up;
    unsigned char *arena = aligned_alloc(64, total);
    ck_assert(arena != NULL);
    memset(arena, 0, total);
    float *q = (float *)(arena + at[0]), *k = (float *)(arena + at[1]),
          *v = (float *)(arena + at[2]), *o = (float *)(arena + at[3]);
    uint64_t rng = 2100;
    peak_test_fill_uniform(q, nq, &rng, -1.0f, 1.0f);
    peak_test_fill_uniform(k, nk, &rng, -1.0f, 1.0f);
    peak_test_fill_uniform(v, nk, &rng, -1.0f, 1.0f);
    d.lse = (float *)(arena + at[4]);
    const int32_t key_len = LK - 3;
    memcpy(arena + at[5], &key_len, sizeof key_len);
    d.mask.key_len = (const int32_t *)(arena + at[5]);

    ck_assert_int_eq(peak_attention(o, q, k, v, &d, NULL, 0), PEAK_OK);
    float *o_ref = dup(o, nq), *lse_ref = dup(d.lse, nl);
    ck_assert_int_eq(peak_attention(o, q, k, v, &d, arena + at[NT], need), PEAK_OK);
    CHECK(peak_test_bytes_equal(o, o_ref, nq * 4) && peak_test_bytes_equal(d.lse, lse_ref, nl * 4),
          "%s: a workspace after the tensors changed the result", peak_isa_name(peak_test_isa));

    unsigned char *before = malloc(total);
    for (int t = 0; t < NT; t++)
        for (int tail = 0; tail < 2; tail++) {
            const size_t start = tail ? (at[t] + 1 - need + 63) & ~(size_t)63 : at[t];
            peak_test_fill_canary(o, nq);
            peak_test_fill_canary(d.lse, nl);
            memcpy(before, arena, total);
            const peak_status got = peak_attention(o, q, k, v, &d, arena + start, need);
            CHECK(got == PEAK_ERR_INVALID_ARG, "%s: workspace %s tensor %d: status %d",
                  peak_isa_name(peak_test_isa), tail ? "ending in" : "starting at", t, (int)got);
            CHECK(peak_test_bytes_equal(arena, before, total), "%s: workspace over tensor %d: "
                  "memory written", peak_isa_name(peak_test_isa), t);
        }
    free(before);
    free(o_ref);
    free(lse_ref);
    free(arena);
}
END_TEST

/* ---- invalid arguments ------------------------------------------------------ */

static void expect_rejected(const attention_problem *p, const char *what, peak_status want,
                            float *o, const float *q, const float *k, const float *v,
                            const peak_attention_desc *d)
{
    peak_test_fill_canary(p->o, p->no);
    if (p->lse)
        peak_test_fill_canary(p->lse, p->nl);
    peak_status got = peak_attention(o, q, k, v, d, NULL, 0);
    CHECK(got == want, "%s: %s: status %d, want %d", peak_isa_name(peak_test_isa), what,
                  (int)got, (int)want);
    for (size_t e = 0; e < p->no; e++)
        CHECK(peak_test_is_canary(p->o[e]), "%s: O changed", what);
    for (size_t e = 0; e < p->nl; e++)
        CHECK(peak_test_is_canary(p->lse[e]), "%s: lse changed", what);
}

static void reject_desc(const attention_problem *p, const char *what, peak_status want,
                        const peak_attention_desc *d)
{
    expect_rejected(p, what, want, p->o, p->q, p->k, p->v, d);
}

START_TEST(invalid_arguments)
{
    attention_shape s = {3, 4, 2, 3, 8, 8, 8, 0, 0, 0, 1};
    attention_problem p;
    attention_init(&p, &s, 1900);
    attention_fill(&p, 1.0f, 1.0f);
    attention_add_key_len(&p);
    const peak_status inval = PEAK_ERR_INVALID_ARG;
    expect_rejected(&p, "NULL o", inval, NULL, p.q, p.k, p.v, &p.d);
    expect_rejected(&p, "NULL q", inval, p.o, NULL, p.k, p.v, &p.d);
    expect_rejected(&p, "NULL k", inval, p.o, p.q, NULL, p.v, &p.d);
    expect_rejected(&p, "NULL v", inval, p.o, p.q, p.k, NULL, &p.d);
    expect_rejected(&p, "NULL desc", inval, p.o, p.q, p.k, p.v, NULL);

    peak_attention_desc d;
    size_t *sizes[5] = {&d.batch, &d.heads, &d.q_len, &d.kv_len, &d.head_dim};
    for (int n = 0; n < 5; n++) {
        d = p.d;
        *sizes[n] = 0;
        reject_desc(&p, "zero size", inval, &d);
    }
    d = p.d;
    d.kv_heads = 3;
    reject_desc(&p, "kv_heads does not divide heads", inval, &d);
    d.kv_heads = 8;
    reject_desc(&p, "kv_heads > heads", inval, &d);
    d = p.d;
    d.o_stride[2] = 7;
    reject_desc(&p, "O rows overlap", inval, &d);
    d = p.d;
    d.q_stride[1] = -1;
    reject_desc(&p, "negative stride", inval, &d);
    d = p.d;
    d.scale = NAN;
    reject_desc(&p, "NaN scale", inval, &d);
    d.scale = -INFINITY;
    reject_desc(&p, "infinite scale", inval, &d);
    d = p.d;
    d.mask.align = (peak_align)5;
    reject_desc(&p, "bad align", inval, &d);
    p.key_len[0] = 9;
    reject_desc(&p, "key_len > Lk", PEAK_ERR_OUT_OF_RANGE, &p.d);
    p.key_len[0] = -1;
    reject_desc(&p, "key_len < 0", PEAK_ERR_OUT_OF_RANGE, &p.d);
    attention_free(&p);
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create(peak_isa_name(isa));
    tcase_add_loop_test(tc, head_dims_1_to_70, 0, SIZE_GROUPS);
    tcase_add_loop_test(tc, key_lengths_1_to_70, 0, SIZE_GROUPS);
    tcase_add_loop_test(tc, model_sizes, 0, 4);
    tcase_add_loop_test(tc, strided_misaligned_layouts, 0, 6);
    tcase_add_loop_test(tc, cross_attention_lq_ne_lk, 0, 4);
    tcase_add_loop_test(tc, grouped_and_multi_query, 0, 4);
    tcase_add_loop_test(tc, causal_both_alignments_with_q_offset, 0, 2);
    tcase_add_loop_test(tc, sliding_window_with_and_without_causal, 0, 2);
    tcase_add_loop_test(tc, key_padding_lengths, 0, 6);
    tcase_add_loop_test(tc, keep_mask_every_broadcast, 0, 8);
    tcase_add_loop_test(tc, bias_mask_every_broadcast, 0, 8);
    tcase_add_loop_test(tc, mask_combinations_fuzz, 0, 8);
    tcase_add_loop_test(tc, fully_masked_rows_zero_and_lse_minus_inf, 0, 5);
    tcase_add_loop_test(tc, masked_nonfinite_kv_never_read, 0, 3);
    tcase_add_loop_test(tc, nonfinite_visible_score_poisons_row, 0, 2);
    tcase_add_loop_test(tc, huge_magnitudes, 0, 4);
    tcase_add_loop_test(tc, kv_tile_cache_across_blocks, 0, 3);
    tcase_add_loop_test(tc, zero_weight_nan_value_like_scalar, 0, 4);
    tcase_add_loop_test(tc, long_rows_stay_accurate, 0, 2);
    tcase_add_loop_test(tc, decode_matches_full_causal, 0, 4);
    tcase_add_loop_test(tc, head_dims_across_tiles, 0, 9);
    tcase_add_loop_test(tc, lengths_to_300_sampled, 0, 6);
    tcase_add_loop_test(tc, fully_masked_tiles_inside_visible_rows, 0, 3);
    tcase_add_loop_test(tc, nonfinite_value_seen_by_one_row, 0, 2);
    tcase_add_loop_test(tc, scores_of_1e4, 0, 4);
    tcase_add_loop_test(tc, decode_long_cache, 0, 2);
    tcase_add_test(tc, workspace_caller_or_library);
    tcase_add_test(tc, workspace_must_not_overlap);
    tcase_add_test(tc, invalid_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
