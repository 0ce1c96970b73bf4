/*
 * test-attention.c - peak_attention on one tier against a double-precision
 * oracle written here (plain loops, independent of kernels/mask.h).  The
 * sweeps (head dims and key lengths with their tails, row gaps,
 * misalignment, canaries) are tests/tester.c's; this file gives the
 * problem, the oracle and the special cases (layouts, GQA, cross
 * attention, masks, non-finite inputs, decoding, workspaces).
 *
 * Q is filled everywhere; K and V only at the keys some query may see.
 * Every other float (masked keys, row gaps) keeps the canary, a NaN, so a
 * kernel that reads a masked key or value poisons its output and fails.
 */
#include "tester.h"

#include "schedule/schedule.h"

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

/* ---- the problem ------------------------------------------------------------ */

/* A mask as a case describes it; the set-up makes its arrays (test-util.c)
   in this order (key_len, keep, bias) before K and V are filled. */
typedef peak_test_mask_spec att_mask_spec;

/* Where the call's workspace comes from. */
enum { ATT_WS_LIBRARY, ATT_WS_CALLER, ATT_WS_BY_SEED /* the caller's if seed bit 2 */ };

typedef struct att_problem {
    peak_attention_desc d;
    size_t kvh; /* kv heads as allocated (d.kv_heads may say 0) */
    int bhld;   /* [B, H, L, D] instead of [B, L, H, D] */
    float *q, *k, *v, *o, *lse;
    uint8_t *keep;
    float *bias;
    int32_t *key_len;
    int own_workspace;
    double *sc, *out; /* the oracle's scratch: Lk scores, Dv outputs */
} att_problem;

/* case.opts.  case.n is the head dim D, case.n2 the key length Lk,
   case.rows the query length Lq, case.gap the floats after each (b, l, h)
   row, case.variant 1 for [B, H, L, D]. */
typedef struct att_opts {
    size_t B, H, KVH;
    size_t Dv; /* 0: D */
    int with_lse;
    int workspace; /* ATT_WS_* */
    float scale;  /* desc.scale (0: 1/sqrt(D)) */
    float kq, vr; /* Q and K in [-kq, kq), V in [-vr, vr) (0: 1) */
    att_mask_spec mask;
    /* Changes the mask's arrays once made, before K and V are filled. */
    void (*edit_mask)(att_problem *a, int arg);
    /* Changes the inputs once filled (p's buffers, before the call). */
    void (*edit_data)(peak_tester_problem *p, att_problem *a, int arg);
    int arg;
    double o_tol; /* 0: ATTENTION_TOL */
    peak_logits logits; /* soft-capping, ALiBi, sinks (zeros: none) */
    double lse_tol;     /* 0: LSE_TOL */
} att_opts;

/* The sweeps' problems: over head dims, 2 heads on their own kv heads, 3
   queries, 5 keys; over key lengths, one head, 2 queries, D = 8.  Half of
   the calls (seed bit 2) take a caller's workspace. */
static const att_opts att_sweep_d_opts = {
    .B = 1, .H = 2, .KVH = 2, .with_lse = 1, .workspace = ATT_WS_BY_SEED};
static const att_opts att_sweep_k_opts = {
    .B = 1, .H = 1, .KVH = 1, .with_lse = 1, .workspace = ATT_WS_BY_SEED};

static float or_one(float x)
{
    return x != 0.0f ? x : 1.0f;
}

static size_t value_dim(const peak_attention_desc *d)
{
    return d->v_head_dim ? d->v_head_dim : d->head_dim;
}

static size_t kv_head(const peak_attention_desc *d, size_t h)
{
    const size_t kvh = d->kv_heads ? d->kv_heads : d->heads;
    return h / (d->heads / kvh);
}

/* Strides of an operand of L rows of `heads` heads whose (b, l, h) rows are
   `ld` apart, in memory order [b, l, h] or [b, h, l]. */
static void operand_strides(int bhld, size_t L, size_t heads, size_t ld, ptrdiff_t st[3])
{
    st[0] = (ptrdiff_t)(L * heads * ld);
    st[1] = (ptrdiff_t)(bhld ? ld : heads * ld);
    st[2] = (ptrdiff_t)(bhld ? L * ld : ld);
}

static float *operand(peak_tester_problem *p, const char *name, const att_problem *a, size_t L,
                      size_t heads, size_t width, ptrdiff_t st[3], size_t skew, int output,
                      double tol)
{
    const size_t ld = width + p->c.gap, rows = a->d.batch * L * heads;
    operand_strides(a->bhld, L, heads, ld, st);
    if (output)
        return peak_tester_output(p, name, rows, width, (ptrdiff_t)ld, skew, PEAK_TESTER_ABS, tol);
    return peak_tester_input(p, name, rows, width, (ptrdiff_t)ld, skew);
}

/* lse as [B, H, Lq] entries, a float of gap between them when rows have
   gaps. */
static void add_lse(peak_tester_problem *p, att_problem *a, double tol)
{
    const peak_attention_desc *d = &a->d;
    const size_t step = p->c.gap ? 2 : 1;
    a->d.lse_stride[2] = (ptrdiff_t)step;
    a->d.lse_stride[1] = (ptrdiff_t)(d->q_len * step);
    a->d.lse_stride[0] = (ptrdiff_t)(d->heads * d->q_len * step);
    a->lse = a->d.lse = peak_tester_output(p, "lse", d->batch * d->heads * d->q_len, 1,
                                           (ptrdiff_t)step, 0, PEAK_TESTER_ABS_REL, tol);
}

static peak_test_dims att_dims(const att_problem *a)
{
    return (peak_test_dims){a->d.batch, a->d.heads, a->d.q_len, a->d.kv_len};
}

static void make_mask(att_problem *a, const att_mask_spec *m, uint64_t *rng)
{
    const peak_test_mask_arrays arr = peak_test_make_mask(&a->d.mask, m, att_dims(a), 2, rng);
    a->key_len = arr.key_len;
    a->keep = arr.keep;
    a->bias = arr.bias;
}

static float *at(float *base, const ptrdiff_t st[3], size_t i0, size_t i1, size_t i2)
{
    return base + (ptrdiff_t)i0 * st[0] + (ptrdiff_t)i1 * st[1] + (ptrdiff_t)i2 * st[2];
}

static const float *cat(const float *base, const ptrdiff_t st[3], size_t i0, size_t i1,
                        size_t i2)
{
    return base + (ptrdiff_t)i0 * st[0] + (ptrdiff_t)i1 * st[1] + (ptrdiff_t)i2 * st[2];
}

static int visible(const peak_attention_desc *d, size_t b, size_t h, size_t i, size_t j)
{
    return peak_test_mask_visible(&d->mask, d->q_len, d->kv_len, b, h, i, j);
}

/* 1 if some query row of some head in kv head g's group sees key j. */
static int key_needed(const peak_attention_desc *d, size_t b, size_t g, size_t j)
{
    for (size_t h = 0; h < d->heads; h++)
        if (kv_head(d, h) == g)
            for (size_t i = 0; i < d->q_len; i++)
                if (visible(d, b, h, i, j))
                    return 1;
    return 0;
}

static void fill_row(float *row, size_t n, uint64_t *rng, float lo, float hi)
{
    for (size_t c = 0; c < n; c++)
        row[c] = peak_test_uniform(rng, lo, hi);
}

/* Q everywhere; K in [-kq, kq) and V in [-vr, vr) only at needed keys. */
static void fill_inputs(att_problem *a, uint64_t *rng, float kq, float vr)
{
    const peak_attention_desc *d = &a->d;
    for (size_t b = 0; b < d->batch; b++) {
        for (size_t i = 0; i < d->q_len; i++)
            for (size_t h = 0; h < d->heads; h++)
                fill_row(at(a->q, d->q_stride, b, i, h), d->head_dim, rng, -kq, kq);
        for (size_t j = 0; j < d->kv_len; j++)
            for (size_t g = 0; g < a->kvh; g++)
                if (key_needed(d, b, g, j)) {
                    fill_row(at(a->k, d->k_stride, b, j, g), d->head_dim, rng, -kq, kq);
                    fill_row(at(a->v, d->v_stride, b, j, g), value_dim(d), rng, -vr, vr);
                }
    }
}

/* The desc of the case: kv_heads and v_head_dim given as 0 ("the same")
   when they may be, for odd seeds and seeds with bit 1. */
static void make_desc(att_problem *a, const peak_tester_case *c, const att_opts *o)
{
    const peak_attention_desc d0 = PEAK_ATTENTION_DESC_DEFAULT;
    const size_t dv = o->Dv ? o->Dv : c->n;
    a->d = d0;
    a->d.batch = o->B;
    a->d.heads = o->H;
    a->d.kv_heads = o->KVH == o->H && (c->seed & 1) ? 0 : o->KVH;
    a->d.q_len = c->rows;
    a->d.kv_len = c->n2;
    a->d.head_dim = c->n;
    a->d.v_head_dim = dv == c->n && (c->seed & 2) ? 0 : dv;
    a->d.scale = o->scale;
    a->d.logits = o->logits;
    a->kvh = o->KVH;
    a->bhld = (int)(c->variant & 1);
    a->own_workspace = o->workspace == ATT_WS_BY_SEED ? (int)(c->seed >> 2 & 1)
                                                      : o->workspace == ATT_WS_CALLER;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        abort();
    return p;
}

static int att_setup(peak_tester_problem *p)
{
    const peak_tester_case *c = &p->c;
    const att_opts *o = c->opts ? c->opts : &att_sweep_d_opts;
    att_problem *a = xcalloc(1, sizeof *a);
    p->user = a;
    make_desc(a, c, o);
    peak_attention_desc *d = &a->d;
    const size_t dv = value_dim(d);
    const double o_tol = o->o_tol != 0.0 ? o->o_tol : ATTENTION_TOL;
    a->q = operand(p, "Q", a, d->q_len, d->heads, d->head_dim, d->q_stride, 0, 0, 0.0);
    a->k = operand(p, "K", a, d->kv_len, a->kvh, d->head_dim, d->k_stride, 1, 0, 0.0);
    a->v = operand(p, "V", a, d->kv_len, a->kvh, dv, d->v_stride, 2, 0, 0.0);
    a->o = operand(p, "O", a, d->q_len, d->heads, dv, d->o_stride, 3, 1, o_tol);
    if (o->with_lse)
        add_lse(p, a, o->lse_tol != 0.0 ? o->lse_tol : LSE_TOL);
    a->sc = xcalloc(d->kv_len, sizeof *a->sc);
    a->out = xcalloc(dv, sizeof *a->out);
    make_mask(a, &o->mask, &p->rng);
    if (o->edit_mask)
        o->edit_mask(a, o->arg);
    fill_inputs(a, &p->rng, or_one(o->kq), or_one(o->vr));
    if (o->edit_data)
        o->edit_data(p, a, o->arg);
    if (a->d.logits.softcap != 0.0f || a->d.logits.alibi != PEAK_ALIBI_NONE || a->d.logits.sinks)
        peak_test_describe_logits(p->note, sizeof p->note, o->B, o->H, &a->d.mask, &a->d.logits);
    return 1;
}

static peak_status att_call(peak_tester_problem *p)
{
    const att_problem *a = p->user;
    if (!a->own_workspace)
        return peak_attention(a->o, a->q, a->k, a->v, &a->d, NULL, 0, NULL);
    size_t bytes = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&a->d, NULL, &bytes), PEAK_OK);
    void *ws = bytes ? aligned_alloc(64, (bytes + 63) & ~(size_t)63) : NULL;
    const peak_status s = peak_attention(a->o, a->q, a->k, a->v, &a->d, ws, bytes, NULL);
    free(ws);
    return s;
}

static void att_teardown(peak_tester_problem *p)
{
    att_problem *a = p->user;
    peak_test_free(a->bias);
    free(a->keep);
    free(a->key_len);
    free(a->sc);
    free(a->out);
    free(a);
}

/* ---- the oracle ---------------------------------------------------------------- */

/* The inputs the oracle reads: as they were before the call. */
typedef struct att_inputs {
    const peak_attention_desc *d;
    const float *q, *k, *v;
} att_inputs;

static att_inputs inputs_before(const peak_tester_problem *p)
{
    const att_problem *a = p->user;
    return (att_inputs){&a->d, peak_tester_before(p, a->q), peak_tester_before(p, a->k),
                        peak_tester_before(p, a->v)};
}

static double resolved_scale(const peak_attention_desc *d)
{
    return d->scale != 0.0f ? (double)d->scale : (double)(float)(1.0 / sqrt((double)d->head_dim));
}

/* The score in double, as peak.h orders it: q . k * scale, the cap
   (cap tanh(s / cap)), the ALiBi term (-slope * distance), the bias. */
static double oracle_score(const att_inputs *in, size_t b, size_t h, size_t i, size_t j)
{
    const peak_attention_desc *d = in->d;
    const float *q = cat(in->q, d->q_stride, b, i, h);
    const float *k = cat(in->k, d->k_stride, b, j, kv_head(d, h));
    double s = 0.0;
    for (size_t c = 0; c < d->head_dim; c++)
        s += (double)q[c] * (double)k[c];
    s *= resolved_scale(d);
    s = peak_test_softcap(&d->logits, s);
    if (d->logits.alibi != PEAK_ALIBI_NONE)
        s -= (double)peak_test_slope(&d->logits, h, d->heads) *
             (double)peak_test_alibi_distance(&d->logits, &d->mask, d->q_len, d->kv_len, i, j);
    if (d->mask.bias)
        s += d->mask.bias[b * d->mask.bias_stride[0] + h * d->mask.bias_stride[1] +
                          i * d->mask.bias_stride[2] + j];
    return s;
}

/* out[Dv] and *lse of row (b, h, i), with sc[Lk] as scratch; returns the
   row's kind (a visible NaN or +inf score: NaN; no finite one: zero, whose
   lse is the sink's, or -inf).  A sink joins the maximum and the sum. */
static int oracle_attention(const att_inputs *in, size_t b, size_t h, size_t i, double *sc,
                            double *out, double *lse)
{
    const peak_attention_desc *d = in->d;
    const float *sink = peak_test_sink(&d->logits, h);
    double m = -INFINITY;
    int poisoned = 0;
    for (size_t j = 0; j < d->kv_len; j++) {
        if (!visible(d, b, h, i, j))
            continue;
        sc[j] = oracle_score(in, b, h, i, j);
        if (isnan(sc[j]) || sc[j] == INFINITY)
            poisoned = 1;
        else if (sc[j] > m)
            m = sc[j];
    }
    if (poisoned)
        return ROW_NAN;
    if (m == -INFINITY) {
        *lse = sink ? (double)*sink : -INFINITY;
        return ROW_ZERO;
    }
    if (sink)
        m = fmax(m, (double)*sink);
    double sum = sink ? exp((double)*sink - m) : 0.0;
    for (size_t c = 0; c < value_dim(d); c++)
        out[c] = 0.0;
    for (size_t j = 0; j < d->kv_len; j++) {
        if (!visible(d, b, h, i, j))
            continue;
        const double w = exp(sc[j] - m);
        const float *v = cat(in->v, d->v_stride, b, j, kv_head(d, h));
        sum += w;
        for (size_t c = 0; c < value_dim(d); c++)
            out[c] += w * v[c];
    }
    for (size_t c = 0; c < value_dim(d); c++)
        out[c] /= sum;
    *lse = m + log(sum);
    return ROW_NORMAL;
}

/* The (b, h, i) of row t of O (memory order [b, l, h] or [b, h, l]) or of
   lse ([b, h, l]). */
static void row_index(const att_problem *a, int bhld, size_t t, size_t *b, size_t *h, size_t *i)
{
    const size_t H = a->d.heads, Lq = a->d.q_len, r = t % (H * Lq);
    *b = t / (H * Lq);
    *h = bhld ? r / Lq : r % H;
    *i = bhld ? r % Lq : r / H;
}

/* O of a zero row is exactly +0 and its lse -inf; a NaN row is NaN.  In a
   normal row an infinite value (from an infinite V a row sees) may come
   out as inf or NaN: only its being non-finite is checked. */
static void att_oracle_row(const peak_tester_problem *p, size_t buf, size_t t, double *ref)
{
    att_problem *a = p->user;
    const att_inputs in = inputs_before(p);
    const int is_lse = a->lse && buf == peak_tester_index(p, a->lse);
    size_t b, h, i;
    row_index(a, is_lse || a->bhld, t, &b, &h, &i); /* lse's order is [b, h, l] */
    double lse = 0.0;
    double *out = is_lse ? a->out : ref;
    const int kind = oracle_attention(&in, b, h, i, a->sc, out, &lse);
    const size_t n = is_lse ? 1 : value_dim(&a->d);
    for (size_t c = 0; c < n; c++) {
        if (kind == ROW_NAN) {
            ref[c] = NAN;
        } else if (kind == ROW_ZERO) {
            ref[c] = is_lse ? lse : 0.0; /* the sink, or -inf */
            p->exact[c] = PEAK_TESTER_ENTRY_EXACT;
        } else {
            ref[c] = is_lse ? lse : out[c];
            if (isinf(ref[c]))
                p->exact[c] = PEAK_TESTER_ENTRY_NONFINITE;
        }
    }
}

/* The largest finite |V| the call may read (canaries are NaN: skipped). */
static double v_max(const peak_tester_problem *p)
{
    const att_problem *a = p->user;
    const size_t k = peak_tester_index(p, a->v);
    const float *v = p->buf[k].before;
    double m = 0.0;
    for (size_t e = 0; e < p->buf[k].n; e++)
        if (isfinite(v[e]) && fabs(v[e]) > m)
            m = fabs(v[e]);
    return m;
}

/* O's bound scales with the largest |V|; lse's is relative (ABS_REL). */
static double att_abs_scale(const peak_tester_problem *p, size_t buf)
{
    const att_problem *a = p->user;
    return buf == peak_tester_index(p, a->o) ? v_max(p) : 1.0;
}

/* Rows of one call run to 64 heads x 70 queries: every one is checked. */
static const peak_tester_family attention = {
    .name = "attention",
    .setup = att_setup,
    .call = att_call,
    .oracle_row = att_oracle_row,
    .teardown = att_teardown,
    .abs_scale = att_abs_scale,
    .same_bits = 0,
    .n_variants = 2,
    .sizes_every_variant = 1,
    .n_aliases = 0,
    .every_row = 1,
    .base = {.n2 = 5, .rows = 3, .opts = &att_sweep_d_opts},
    .sweeps_n2 = 1,
    .base_n2 = {.n = 8, .rows = 2, .gap = 1, .misalign = 1, .opts = &att_sweep_k_opts},
};

/* ---- special cases: shapes ---------------------------------------------------- */

/* A special case's shape, as a [B, L, H, D] (or [B, H, L, D]) call. */
typedef struct att_shape {
    size_t B, H, KVH, Lq, Lk, D, Dv;
    int bhld;        /* [B, H, L, D] instead of [B, L, H, D] */
    size_t pad;      /* floats of gap after each (b, l, h) row */
    size_t misalign; /* floats off a 64-byte boundary */
    int with_lse;
} att_shape;

/* The case of shape s with options o (its sizes set here). */
static peak_tester_case shape_case(const att_shape *s, uint64_t seed, att_opts *o)
{
    o->B = s->B;
    o->H = s->H;
    o->KVH = s->KVH;
    o->Dv = s->Dv;
    o->with_lse = s->with_lse;
    peak_tester_case c = {0};
    c.n = s->D;
    c.n2 = s->Lk;
    c.rows = s->Lq;
    c.gap = s->pad;
    c.misalign = s->misalign;
    c.variant = (unsigned)s->bhld;
    c.seed = seed;
    c.opts = o;
    return c;
}

static void check_shape(const att_shape *s, uint64_t seed, att_opts *o)
{
    const peak_tester_case c = shape_case(s, seed, o);
    peak_tester_check(&attention, &c);
}

/* Unmasked inputs in [-1, 1), the workspace by the seed. */
static void check_plain(const att_shape *s, uint64_t seed)
{
    att_opts o = {0};
    o.workspace = ATT_WS_BY_SEED;
    check_shape(s, seed, &o);
}

static att_problem *att_begin(peak_tester_problem *p, const att_shape *s, uint64_t seed,
                              att_opts *o)
{
    const peak_tester_case c = shape_case(s, seed, o);
    CHECK(peak_tester_setup(&attention, &c, p), "attention: case not set up");
    return p->user;
}

/* d_model 512 (8 heads of 64) and 768 (12 heads of 64), both layouts. */
START_TEST(model_sizes)
{
    att_shape s = {1, _i < 2 ? 8 : 12, _i < 2 ? 8 : 12, 9, 16, 64, 64, _i & 1, 0, 0, 1};
    check_plain(&s, 300 + (uint64_t)_i);
}
END_TEST

START_TEST(strided_misaligned_layouts)
{
    static const size_t pads[] = {1, 3, 16, 37};
    for (size_t mis = 0; mis < 4; mis++) {
        att_shape s = {2,         2,           1, 3, 7, 5 + (size_t)_i, 3, (int)(mis & 1),
                       pads[mis], 1 + mis * 3, 1};
        check_plain(&s, 400 + mis);
    }
}
END_TEST

START_TEST(cross_attention_lq_ne_lk)
{
    static const size_t lq[] = {1, 3, 20, 7}, lk[] = {9, 17, 4, 70};
    att_shape s = {2, 3, 3, lq[_i], lk[_i], 16, 12, _i & 1, 2, 0, 1};
    check_plain(&s, 500 + (uint64_t)_i);
}
END_TEST

START_TEST(grouped_and_multi_query)
{
    static const size_t kvh[] = {1, 2, 4, 8};
    att_shape s = {2, 8, kvh[_i], 5, 11, 8, 8, _i & 1, 1, 0, 1};
    att_opts o = {0};
    o.mask.keep = 1; /* per-head masks: groups see different keys */
    o.mask.keep_density = 0.7;
    check_shape(&s, 600 + (uint64_t)_i, &o);
}
END_TEST

/* ---- masks ----------------------------------------------------------------- */

START_TEST(causal_both_alignments_with_q_offset)
{
    static const size_t lq[] = {1, 3, 7, 16}, lk[] = {1, 5, 16, 33}, off[] = {0, 1, 5};
    for (size_t a = 0; a < 4; a++)
        for (size_t c = 0; c < 4; c++)
            for (size_t o = 0; o < 3; o++) {
                att_shape s = {1, 2, 1, lq[a], lk[c], 4, 4, (int)(o & 1), 1, 0, 1};
                att_opts opts = {0};
                opts.mask.causal = 1;
                opts.mask.align = (peak_align)_i;
                opts.mask.q_offset = off[o];
                check_shape(&s, 700 + a * 16 + c * 4 + o, &opts);
            }
}
END_TEST

START_TEST(sliding_window_with_and_without_causal)
{
    static const size_t win[] = {1, 2, 5, 100};
    for (size_t w = 0; w < 4; w++)
        for (int align = 0; align < 2; align++) {
            att_shape s = {1, 2, 2, 9, 13, 4, 4, 0, 1, 0, 1};
            att_opts o = {0};
            o.mask.causal = _i;
            o.mask.window = win[w];
            o.mask.align = (peak_align)align;
            o.mask.q_offset = w;
            check_shape(&s, 800 + w * 2 + (uint64_t)align, &o);
        }
}
END_TEST

START_TEST(key_padding_lengths)
{
    att_shape s = {4, 2, 1, 3, 1 + (size_t)_i * 7, 8, 8, _i & 1, 2, 1, 1};
    att_opts o = {0};
    o.mask.key_len = 1;
    check_shape(&s, 900 + (uint64_t)_i, &o);
}
END_TEST

START_TEST(keep_mask_every_broadcast)
{
    att_shape s = {2, 3, 3, 4, 19, 8, 8, 0, 1, 0, 1};
    att_opts o = {0};
    o.mask.keep = 1;
    o.mask.keep_bcast = (unsigned)_i;
    o.mask.keep_density = 0.6;
    check_shape(&s, 1000 + (uint64_t)_i, &o);
}
END_TEST

static void bias_spec(att_mask_spec *m, unsigned bcast, float lo, float hi, double masked)
{
    m->bias = 1;
    m->bias_bcast = bcast;
    m->bias_lo = lo;
    m->bias_hi = hi;
    m->bias_masked = masked;
}

START_TEST(bias_mask_every_broadcast)
{
    att_shape s = {2, 3, 1, 4, 21, 8, 5, 1, 0, 1, 1};
    att_opts o = {0};
    bias_spec(&o.mask, (unsigned)_i, -3.0f, 3.0f, 0.3);
    check_shape(&s, 1100 + (uint64_t)_i, &o);
}
END_TEST

START_TEST(mask_combinations_fuzz)
{
    uint64_t rng = 1200 + (uint64_t)_i;
    for (int n = 0; n < 100; n++) {
        size_t kvh = 1 + peak_test_next(&rng) % 2, grp = 1 + peak_test_next(&rng) % 2;
        att_shape s = {1 + peak_test_next(&rng) % 3,
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
        const uint64_t seed = peak_test_next(&rng);
        const unsigned pick = (unsigned)peak_test_next(&rng);
        att_opts o = {0};
        o.scale = (pick & 1) ? 0.3f : 0.0f;
        o.mask.causal = (pick >> 1) & 1;
        o.mask.align = (peak_align)((pick >> 2) & 1);
        o.mask.q_offset = (pick >> 3) & 3;
        o.mask.window = (pick >> 5) & 1 ? 1 + (pick >> 6) % 8 : 0;
        o.mask.key_len = (pick >> 9) & 1;
        o.mask.keep = (pick >> 10) & 1;
        o.mask.keep_bcast = (pick >> 11) & 7;
        o.mask.keep_density = 0.7;
        if ((pick >> 14) & 1)
            bias_spec(&o.mask, (pick >> 15) & 7, -2.0f, 2.0f, 0.2);
        o.workspace = (pick >> 18) & 1 ? ATT_WS_CALLER : ATT_WS_LIBRARY;
        o.kq = 2.0f;
        o.vr = 3.0f;
        check_shape(&s, seed, &o);
    }
}
END_TEST

/* ---- special rows ---------------------------------------------------------- */

START_TEST(fully_masked_rows_zero_and_lse_minus_inf)
{
    att_shape s = {3, 2, 1, 4, _i >= 3 ? 2 : 11, 8, 6, _i & 1, 1, 0, 1};
    att_opts o = {0};
    switch (_i) {
    case 0:
        o.mask.key_len = 1; /* key_len[2] == 0 */
        break;
    case 1:
        o.mask.keep = 1; /* density 0 */
        break;
    case 2:
        bias_spec(&o.mask, 7, 0.0f, 1.0f, 1.0);
        break;
    case 3: /* bottom-right, Lq = 4 > Lk = 2: rows 0 and 1 see nothing */
        o.mask.causal = 1;
        o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        break;
    default:
        o.mask.causal = 1;
        o.mask.window = 2;
        o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        break;
    }
    check_shape(&s, 1300 + (uint64_t)_i, &o);
}
END_TEST

/* Every float of buffer `buf` still holding the canary becomes x. */
static void replace_canaries(peak_tester_problem *p, float *buf, float x)
{
    const peak_tester_buf *b = &p->buf[peak_tester_index(p, buf)];
    for (size_t e = 0; e < b->n; e++)
        if (peak_test_is_canary(b->p[e]))
            b->p[e] = x;
}

/* What masked_nonfinite_kv_never_read puts at the keys the mask hides. */
static const float poison[] = {NAN, INFINITY, -INFINITY};

static void key_len_7_at_b0(att_problem *a, int arg)
{
    (void)arg;
    a->key_len[0] = 7;
}

static void poison_masked_kv(peak_tester_problem *p, att_problem *a, int arg)
{
    replace_canaries(p, a->k, poison[(size_t)arg % 3]);
    replace_canaries(p, a->v, poison[((size_t)arg + 1) % 3]);
}

/* The case of K and V holding NaN and inf at every key the mask hides (the
   future and the padding), instead of the canary, variant i. */
static att_shape masked_nonfinite_kv_case(att_opts *o, int i)
{
    const att_shape s = {2, 2, 1, 6, 10, 8, 8, i & 1, 0, 0, 1};
    *o = (att_opts){0};
    o->mask.key_len = 1;
    o->mask.causal = 1;
    o->mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    o->edit_mask = key_len_7_at_b0;
    o->edit_data = poison_masked_kv;
    o->arg = i;
    return s;
}

/* None of the masked keys' NaN and inf may reach O or lse. */
START_TEST(masked_nonfinite_kv_never_read)
{
    att_opts o;
    att_shape s = masked_nonfinite_kv_case(&o, _i);
    check_shape(&s, 1400 + (uint64_t)_i, &o);
}
END_TEST

/* Case 0: a NaN in key 4 of kv head 1 (head 1's rows see it).  Case 1:
   query row 2 of head 0 all +inf against keys of 0.5: q.k = +inf. */
static void nonfinite_score(peak_tester_problem *p, att_problem *a, int arg)
{
    (void)p;
    const peak_attention_desc *d = &a->d;
    if (arg == 0) {
        at(a->k, d->k_stride, 0, 4, 1)[2] = NAN;
        return;
    }
    float *q = at(a->q, d->q_stride, 0, 2, 0);
    for (size_t c = 0; c < 4; c++)
        q[c] = INFINITY;
    for (size_t j = 0; j < 6; j++)
        for (size_t c = 0; c < 4; c++)
            at(a->k, d->k_stride, 0, j, 0)[c] = 0.5f;
}

/* A visible NaN or +inf score makes its row NaN (O and lse). */
START_TEST(nonfinite_visible_score_poisons_row)
{
    att_shape s = {1, 2, 2, 3, 6, 4, 4, 0, 0, 0, 1};
    att_opts o = {0};
    o.edit_data = nonfinite_score;
    o.arg = _i;
    check_shape(&s, 1500 + (uint64_t)_i, &o);
}
END_TEST

/* Scores of magnitude ~1e30 and values of ~1e30: no overflow anywhere. */
START_TEST(huge_magnitudes)
{
    static const float kq[] = {3e14f, 1e15f, 1.0f}, vr[] = {1.0f, 1e30f, 1e30f};
    att_shape s = {1, 2, 1, 3, 1 + (size_t)_i * 9, 4, 4, 0, 0, 0, 1};
    for (size_t r = 0; r < 3; r++) {
        att_opts o = {0};
        o.kq = kq[r];
        o.vr = vr[r];
        check_shape(&s, 1600 + r, &o);
    }
}
END_TEST

/* ---- decoding -------------------------------------------------------------- */

/* One query at step t over a KV cache of capacity L (entries > t never
   written, so still NaN canaries) equals row t of the full causal call:
   top-left with q_offset t over the whole cache, and bottom-right over the
   first t+1 keys.  Also a chunked prefill of 3 queries at offset t. */
static void expect_rows_match(const peak_tester_problem *full, const float *o,
                              const ptrdiff_t o_st[3], size_t i0, size_t n_rows, size_t t,
                              int align)
{
    const att_problem *a = full->user;
    const peak_attention_desc *d = &a->d;
    const double tol = ATTENTION_TOL * v_max(full);
    for (size_t h = 0; h < d->heads; h++)
        for (size_t r = 0; r < n_rows; r++) {
            const float *want = cat(a->o, d->o_stride, 0, i0 + r, h);
            const float *got = cat(o, o_st, 0, r, h);
            for (size_t c = 0; c < d->head_dim; c++)
                CHECK(fabs((double)got[c] - want[c]) <= tol,
                      "%s t%zu align %d h%zu row %zu c%zu: step %.9g full %.9g",
                      peak_isa_name(peak_test_isa), t, align, h, i0 + r, c, (double)got[c],
                      (double)want[c]);
        }
}

static void decode_step(const peak_tester_problem *full, size_t t, size_t n_rows, int align)
{
    const att_problem *a = full->user;
    const att_inputs in = inputs_before(full);
    const size_t L = a->d.kv_len;
    const size_t nk = full->buf[peak_tester_index(full, a->k)].n;
    const size_t nv = full->buf[peak_tester_index(full, a->v)].n;
    peak_attention_desc d = a->d;
    d.q_len = n_rows;
    d.kv_len = align ? t + n_rows : L;
    d.mask.align = (peak_align)align;
    d.mask.q_offset = align ? 0 : t;
    d.lse = NULL;
    /* A cache that holds only the keys 0 .. t+n_rows-1, the rest canary. */
    float *k = peak_test_alloc(nk, 0), *v = peak_test_alloc(nv, 0);
    const size_t used = (t + n_rows) * (size_t)d.k_stride[1];
    memcpy(k, in.k, used * sizeof *k);
    memcpy(v, in.v, used * sizeof *v);
    float *o = peak_test_alloc(n_rows * d.heads * d.head_dim, 0);
    d.o_stride[0] = (ptrdiff_t)(n_rows * d.heads * d.head_dim);
    const float *q = cat(in.q, d.q_stride, 0, t, 0);
    ck_assert_int_eq(peak_attention(o, q, k, v, &d, NULL, 0, NULL), PEAK_OK);
    expect_rows_match(full, o, d.o_stride, t, n_rows, t, align);
    peak_test_free(o);
    peak_test_free(v);
    peak_test_free(k);
}

/* The full causal call of shape s, checked against the oracle, then the
   decoding steps of every `step`-th position against its rows (and the
   3-query prefills where `chunks`). */
static void check_decoding(const att_shape *s, uint64_t seed, size_t step, int chunks)
{
    att_opts o = {0};
    o.mask.causal = 1;
    peak_tester_problem full;
    att_begin(&full, s, seed, &o);
    peak_tester_run(&attention, &full);
    for (size_t t = 0; t < s->Lq; t += step)
        for (int align = 0; align < 2; align++) {
            decode_step(&full, t, 1, align);
            if (chunks && t + 3 <= s->Lq)
                decode_step(&full, t, 3, align);
        }
    peak_tester_free(&attention, &full);
}

START_TEST(decode_matches_full_causal)
{
    const size_t L = 2 + (size_t)_i * 5;
    att_shape s = {1, 4, 2, L, L, 8, 8, 0, 0, 0, 0}; /* [B, L, H, D] packed: a cache */
    check_decoding(&s, 1700 + (uint64_t)_i, 1, 1);
}
END_TEST

/* Decoding over caches longer than a tile, every offset, GQA 4:1. */
START_TEST(decode_long_cache)
{
    const size_t L = _i ? 133 : 70;
    att_shape s = {1, 8, 2, L, L, _i ? 16 : 64, _i ? 16 : 64, 0, 0, 0, 0};
    check_decoding(&s, 2500 + (uint64_t)_i, peak_test_quick() ? 7 : 1, 0);
}
END_TEST

/* ---- split-KV: decode cut over its keys -------------------------------------- */

/* The chunks the scheduler cuts a call's keys into on this tier
   (kernels/schedule/schedule-attention.c; 1: not split). */
/* The scheduler's plan of a call on the active tier, for one worker. */
static peak_attention_plan plan_of(const peak_attention_desc *desc)
{
    peak_attention_desc d = *desc;
    d.kv_heads = d.kv_heads ? d.kv_heads : d.heads;
    d.v_head_dim = d.v_head_dim ? d.v_head_dim : d.head_dim;
    d.scale = d.scale != 0.0f ? d.scale : (float)(1.0 / sqrt((double)d.head_dim));
    peak_attention_plan plan;
    peak_schedule_attention_plan(&plan, peak_active_kernels(), &d, 1);
    return plan;
}

static size_t split_chunks(const peak_attention_desc *desc)
{
    return plan_of(desc).chunks;
}

/* The plan's tail: a kv head's last rows that go to the rows kernel. */
static size_t plan_tail_rows(const peak_attention_desc *desc)
{
    return plan_of(desc).tail;
}

/* Query rows past whole vectors, at most a quarter vector, go to the rows
   kernel (schedule-attention.c, plan_tail): cross-attention over 50
   queries, a causal call of 66 rows (64 + 2), GQA 2:1 over 9 positions (18
   rows a kv head), and 17 rows (one past a 16-lane vector) with key
   padding; against the oracle, and the tail the plan takes on each tier
   (AVX-512: up to 4 of 16 lanes; AVX2: up to 2 of 8; NEON: 1 of 4; the
   scalar tier has no vectors). */
START_TEST(tail_rows_on_the_rows_kernel)
{
    static const att_shape shapes[] = {
        {1, 8, 8, 50, 512, 64, 64, 1, 0, 0, 1},
        {2, 2, 2, 66, 80, 32, 32, 0, 1, 3, 1},
        {1, 4, 2, 9, 130, 16, 24, 0, 0, 0, 0},
        {2, 3, 3, 17, 200, 8, 8, 1, 2, 5, 1},
    };
    const att_shape *sh = &shapes[_i];
    att_opts o = {0};
    o.workspace = ATT_WS_BY_SEED;
    if (_i == 1) {
        o.mask.causal = 1;
    } else if (_i == 3) {
        o.mask.key_len = 1;
    }
    peak_tester_problem p;
    att_problem *a = att_begin(&p, sh, 2700 + (uint64_t)_i, &o);
    const size_t rows = sh->Lq * (sh->H / sh->KVH);
    const size_t lanes = peak_test_isa == PEAK_ISA_AVX512 ? 16
                         : peak_test_isa == PEAK_ISA_AVX2 ? 8
                         : peak_test_isa == PEAK_ISA_NEON ? 4 : 0;
    const size_t t = lanes ? rows % lanes : 0, want = t > 0 && 4 * t <= lanes ? t : 0;
    CHECK(peak_test_isa == PEAK_ISA_SCALAR || plan_tail_rows(&a->d) == want,
          "%s: %zu rows a kv head: tail %zu, want %zu", peak_isa_name(peak_test_isa), rows,
          plan_tail_rows(&a->d), want);
    peak_tester_run(&attention, &p);
    peak_tester_free(&attention, &p);
}
END_TEST

/* A decode step of a batch-1 model over a long cache: on the SIMD tiers
   its keys are cut into chunks merged through their lse (the scalar tier
   rounds once and never cuts them); against the oracle as any call:
   8 heads over 2048 and 8192 keys (the row path, the kv heads walking in
   step), and 32 heads over 8 kv heads, 8192 keys (4 rows a kv head: the
   tile path on AVX2 and NEON, the row path on AVX-512). */
START_TEST(split_kv_decode)
{
    static const att_shape shapes[] = {
        {1, 8, 8, 1, 2048, 64, 64, 0, 0, 0, 1},
        {1, 8, 8, 1, 8192, 64, 64, 0, 0, 0, 1},
        {1, 32, 8, 1, 8192, 64, 64, 0, 0, 0, 1},
    };
    att_shape sh_ = shapes[_i];
    if (peak_test_quick() && _i == 2) /* GQA 4:1 over 2 KV heads: still split */
        sh_.H = 8, sh_.KVH = 2;
    const att_shape *sh = &sh_;
    att_opts o = {0};
    o.workspace = ATT_WS_CALLER;
    peak_tester_problem p;
    att_problem *a = att_begin(&p, sh, 2600 + (uint64_t)_i, &o);
    const size_t chunks = split_chunks(&a->d);
    CHECK(peak_test_isa == PEAK_ISA_SCALAR ? chunks == 1 : chunks >= 16,
          "%s: decode B 1 H %zu Lk %zu cut into %zu key chunks", peak_isa_name(peak_test_isa),
          sh->H, sh->Lk, chunks);
    peak_tester_run(&attention, &p);
    peak_tester_free(&attention, &p);
}
END_TEST

/* Split-KV with masks that cut chunks: per-batch key lengths (some
   chunks of a batch see nothing), a bottom-right causal query of 3 rows
   (its rows end in different chunks), GQA 4:1 with Dv != Dh. */
START_TEST(split_kv_masked)
{
    att_shape s = {2, 8, 2, 3, 3000 + (size_t)_i * 1001, 32, 48, _i & 1, 0, 0, 1};
    att_opts o = {0};
    o.mask.key_len = 1;
    o.mask.causal = 1;
    o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    peak_tester_problem p;
    att_problem *a = att_begin(&p, &s, 2700 + (uint64_t)_i, &o);
    CHECK(peak_test_isa == PEAK_ISA_SCALAR || split_chunks(&a->d) > 1,
          "%s: the masked decode was not split", peak_isa_name(peak_test_isa));
    peak_tester_run(&attention, &p);
    peak_tester_free(&attention, &p);
}
END_TEST

/* ---- merging partial results (peak_attention_merge) ------------------------- */

/* Partial results of one problem: part p's O [B, Lq, H, Dv] and lse
   [B, H, Lq], packed, from peak_attention over the keys of its keep mask
   ([Lk], broadcast over b, h and i) together with the case's own mask. */
typedef struct merge_parts {
    size_t n, rows, dv;
    float *o[4], *lse[4];
    uint8_t *keep[4];
    peak_attention_merge_desc md;
} merge_parts;

/* Part p of n sees keys [cut[p], cut[p + 1]) (cut[n] = Lk). */
static void merge_parts_make(merge_parts *m, const att_problem *a, size_t n, const size_t *cut)
{
    const peak_attention_desc *d = &a->d;
    memset(m, 0, sizeof *m);
    m->n = n;
    m->dv = value_dim(d);
    m->rows = d->batch * d->q_len * d->heads;
    peak_attention_merge_desc md = PEAK_ATTENTION_MERGE_DESC_DEFAULT;
    md.batch = d->batch;
    md.heads = d->heads;
    md.q_len = d->q_len;
    md.v_head_dim = m->dv;
    operand_strides(0, d->q_len, d->heads, m->dv, md.o_stride);
    memcpy(md.part_o_stride, md.o_stride, sizeof md.o_stride);
    md.lse_stride[2] = 1;
    md.lse_stride[1] = (ptrdiff_t)d->q_len;
    md.lse_stride[0] = (ptrdiff_t)(d->heads * d->q_len);
    memcpy(md.part_lse_stride, md.lse_stride, sizeof md.lse_stride);
    m->md = md;
    for (size_t p = 0; p < n; p++) {
        m->o[p] = peak_test_alloc(m->rows * m->dv, p);
        m->lse[p] = peak_test_alloc(m->rows, 0);
        m->keep[p] = xcalloc(d->kv_len, 1);
        for (size_t j = cut[p]; j < (p + 1 < n ? cut[p + 1] : d->kv_len); j++)
            m->keep[p][j] = 1;
        peak_attention_desc dp = *d;
        dp.mask.keep = m->keep[p];
        memset(dp.mask.keep_stride, 0, sizeof dp.mask.keep_stride);
        memcpy(dp.o_stride, md.o_stride, sizeof dp.o_stride);
        dp.lse = m->lse[p];
        memcpy(dp.lse_stride, md.lse_stride, sizeof dp.lse_stride);
        CHECK(peak_attention(m->o[p], a->q, a->k, a->v, &dp, NULL, 0, NULL) == PEAK_OK,
              "%s: part %zu of the merge not computed", peak_isa_name(peak_test_isa), p);
    }
}

static void merge_parts_free(merge_parts *m)
{
    for (size_t p = 0; p < m->n; p++) {
        peak_test_free(m->o[p]);
        peak_test_free(m->lse[p]);
        free(m->keep[p]);
    }
}

/* Merged O (md.o_stride) and lse against the oracle of the whole call:
   peak_attention's bounds (the merged O is a convex combination of the
   parts, each within them), zero rows exactly +0 and -inf.  After
   peak_tester_run (the inputs as they were before it). */
static void expect_merged(const peak_tester_problem *p, const merge_parts *m, const float *o,
                          const float *lse, const char *what)
{
    const att_problem *a = p->user;
    const att_inputs in = inputs_before(p);
    const peak_attention_desc *d = &a->d;
    const double tol = ATTENTION_TOL * v_max(p);
    for (size_t b = 0; b < d->batch; b++)
        for (size_t i = 0; i < d->q_len; i++)
            for (size_t h = 0; h < d->heads; h++) {
                double ref_lse = 0.0;
                const int kind = oracle_attention(&in, b, h, i, a->sc, a->out, &ref_lse);
                const float *row = cat(o, m->md.o_stride, b, i, h);
                const float got_lse = *cat(lse, m->md.lse_stride, b, h, i);
                for (size_t c = 0; c < m->dv; c++) {
                    const double want = kind == ROW_NORMAL ? a->out[c] : 0.0;
                    CHECK(kind == ROW_ZERO ? peak_test_bytes_equal(&row[c], &(float){0.0f}, 4)
                                           : fabs((double)row[c] - want) <= tol,
                          "%s, %s: b%zu i%zu h%zu c%zu: merged %.9g, oracle %.9g",
                          peak_isa_name(peak_test_isa), what, b, i, h, c, (double)row[c], want);
                }
                CHECK(kind == ROW_ZERO ? got_lse == -INFINITY
                                       : fabs((double)got_lse - ref_lse) <=
                                             LSE_TOL * (1.0 + fabs(ref_lse)),
                      "%s, %s: b%zu i%zu h%zu: merged lse %.9g, oracle %.9g",
                      peak_isa_name(peak_test_isa), what, b, i, h, (double)got_lse,
                      kind == ROW_ZERO ? -INFINITY : ref_lse);
            }
}

/* The one call, then the attention over the key halves [0, Lk/2) and
   [Lk/2, Lk) (and, with `empty`, a third part that sees no key: lse -inf
   everywhere), merged, against the oracle as the one call is; then again
   in place into part 0, which must give the same bytes. */
static void check_merge(const att_shape *s, att_opts *o, uint64_t seed, int empty)
{
    peak_tester_problem p;
    att_problem *a = att_begin(&p, s, seed, o);
    peak_tester_run(&attention, &p); /* the one call, against the oracle */
    const size_t cut[3] = {0, s->Lk / 2, s->Lk};
    merge_parts m;
    merge_parts_make(&m, a, empty ? 3 : 2, cut);
    float *out = peak_test_alloc(m.rows * m.dv, 3), *lse = peak_test_alloc(m.rows, 1);
    const float *const *op = (const float *const *)m.o, *const *lp = (const float *const *)m.lse;
    CHECK(peak_attention_merge(out, lse, op, lp, m.n, &m.md, NULL) == PEAK_OK,
          "%s: merge rejected", peak_isa_name(peak_test_isa));
    expect_merged(&p, &m, out, lse, "merged halves");
    /* in place: the running result is part 0 */
    CHECK(peak_attention_merge(m.o[0], m.lse[0], op, lp, m.n, &m.md, NULL) == PEAK_OK,
          "%s: in-place merge rejected", peak_isa_name(peak_test_isa));
    CHECK(peak_test_bytes_equal(m.o[0], out, m.rows * m.dv * sizeof(float)) &&
              peak_test_bytes_equal(m.lse[0], lse, m.rows * sizeof(float)),
          "%s: the in-place merge differs from the out-of-place one",
          peak_isa_name(peak_test_isa));
    peak_test_free(out);
    peak_test_free(lse);
    merge_parts_free(&m);
    peak_tester_free(&attention, &p);
}

/* GQA 4:1 over 2 batches; causal bottom-right with fewer queries than
   keys (the first rows see little of the second half); Dv 80 != Dh in the
   [B, H, L, D] layout (the merge takes 64 columns a pass: two); a
   row-path decode over a long cache; and, in each, a third part that sees
   nothing (contributes nothing). */
START_TEST(merge_key_halves)
{
    static const att_shape shapes[] = {
        {2, 8, 2, 5, 37, 16, 16, 0, 0, 0, 1},
        {1, 4, 2, 7, 40, 8, 8, 0, 1, 0, 1},
        {1, 3, 3, 6, 70, 16, 80, 1, 0, 0, 1},
        {1, 8, 8, 1, 1500, 64, 64, 0, 0, 0, 1},
    };
    att_opts o = {0};
    if (_i % 4 == 1) {
        o.mask.causal = 1;
        o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    }
    check_merge(&shapes[_i % 4], &o, 2800 + (uint64_t)_i, _i >= 4);
}
END_TEST

/* Causal top-left with Lq < Lk/2: no row sees the second half, so every
   row merges one part with a fully masked one (lse -inf): the first
   part's result exactly. */
START_TEST(merge_fully_masked_part)
{
    att_shape s = {1, 2, 1, 4, 30, 8, 8, 0, 0, 0, 1};
    att_opts o = {0};
    o.mask.causal = 1;
    peak_tester_problem p;
    att_problem *a = att_begin(&p, &s, 2900, &o);
    peak_tester_run(&attention, &p);
    const size_t cut[2] = {0, 15};
    merge_parts m;
    merge_parts_make(&m, a, 2, cut);
    for (size_t r = 0; r < m.rows; r++)
        CHECK(m.lse[1][r] == -INFINITY, "%s: row %zu saw the second half",
              peak_isa_name(peak_test_isa), r);
    float *out = peak_test_alloc(m.rows * m.dv, 0), *lse = peak_test_alloc(m.rows, 0);
    CHECK(peak_attention_merge(out, lse, (const float *const *)m.o, (const float *const *)m.lse,
                               2, &m.md, NULL) == PEAK_OK,
          "%s: merge rejected", peak_isa_name(peak_test_isa));
    CHECK(peak_test_bytes_equal(out, m.o[0], m.rows * m.dv * sizeof(float)) &&
              peak_test_bytes_equal(lse, m.lse[0], m.rows * sizeof(float)),
          "%s: a fully masked part changed the result", peak_isa_name(peak_test_isa));
    /* Every part fully masked: O = +0 and lse = -inf, as a masked row. */
    const float *none[2] = {m.o[1], m.o[1]}, *none_lse[2] = {m.lse[1], m.lse[1]};
    CHECK(peak_attention_merge(out, lse, none, none_lse, 2, &m.md, NULL) == PEAK_OK,
          "%s: merge rejected", peak_isa_name(peak_test_isa));
    for (size_t r = 0; r < m.rows; r++) {
        CHECK(lse[r] == -INFINITY, "%s: lse %zu", peak_isa_name(peak_test_isa), r);
        for (size_t c = 0; c < m.dv; c++)
            CHECK(peak_test_bytes_equal(&out[r * m.dv + c], &(float){0.0f}, 4),
                  "%s: O %zu %zu not +0", peak_isa_name(peak_test_isa), r, c);
    }
    peak_test_free(out);
    peak_test_free(lse);
    merge_parts_free(&m);
    peak_tester_free(&attention, &p);
}
END_TEST

/* A poisoned part (lse NaN, as peak_attention writes a row with a visible
   NaN score) makes the row NaN; +inf likewise. */
START_TEST(merge_poisoned_part)
{
    peak_attention_merge_desc md = PEAK_ATTENTION_MERGE_DESC_DEFAULT;
    md.batch = md.heads = md.q_len = 1;
    md.v_head_dim = 3;
    const ptrdiff_t os[3] = {3, 3, 3}, ls[3] = {1, 1, 1};
    memcpy(md.o_stride, os, sizeof os);
    memcpy(md.part_o_stride, os, sizeof os);
    memcpy(md.lse_stride, ls, sizeof ls);
    memcpy(md.part_lse_stride, ls, sizeof ls);
    const float o0[3] = {1, 2, 3}, o1[3] = {4, 5, 6};
    const float l0 = 0.5f, l1 = _i ? INFINITY : NAN;
    const float *op[2] = {o0, o1}, *lp[2] = {&l0, &l1};
    float out[3], lse;
    CHECK(peak_attention_merge(out, &lse, op, lp, 2, &md, NULL) == PEAK_OK, "merge rejected");
    CHECK(isnan(out[0]) && isnan(out[1]) && isnan(out[2]) && isnan(lse),
          "a part of lse %g: O %g %g %g, lse %g", (double)l1, (double)out[0], (double)out[1],
          (double)out[2], (double)lse);
}
END_TEST

/* Rejected merges write nothing: NULL pointers, zero parts or sizes,
   negative strides, outputs that meet a part other than in place, or each
   other, overlapping output rows. */
static void expect_merge_rejected(const char *what, peak_status want, float *o, float *lse,
                                  const float *const *op, const float *const *lp, size_t n,
                                  const peak_attention_merge_desc *md, float *all, size_t n_all)
{
    float *before = malloc(n_all * sizeof *before);
    ck_assert_ptr_nonnull(before);
    memcpy(before, all, n_all * sizeof *before);
    const peak_status got = peak_attention_merge(o, lse, op, lp, n, md, NULL);
    CHECK(got == want, "%s: %s: status %s, want %s", peak_isa_name(peak_test_isa), what,
          peak_status_string(got), peak_status_string(want));
    CHECK(peak_test_bytes_equal(before, all, n_all * sizeof *before),
          "%s: %s: a rejected merge wrote", peak_isa_name(peak_test_isa), what);
    free(before);
}

START_TEST(merge_invalid_arguments)
{
    /* One arena: O (2 x 4 x 8 floats, [B 1, Lq 2, H 4, Dv 8]), lse (8),
       two parts and their lse, then spare room. */
    enum { NO = 64, NL = 8, N_ALL = 3 * NO + 3 * NL + 64 };
    float *all = peak_test_alloc(N_ALL, 0);
    uint64_t rng = 3000;
    peak_test_fill_uniform(all, N_ALL, &rng, -1.0f, 1.0f);
    float *o = all, *lse = all + NO, *p0 = lse + NL, *p1 = p0 + NO, *l0 = p1 + NO, *l1 = l0 + NL;
    peak_attention_merge_desc md = PEAK_ATTENTION_MERGE_DESC_DEFAULT;
    md.batch = 1, md.q_len = 2, md.heads = 4, md.v_head_dim = 8;
    const ptrdiff_t os[3] = {64, 32, 8}, ls[3] = {8, 2, 1};
    memcpy(md.o_stride, os, sizeof os);
    memcpy(md.part_o_stride, os, sizeof os);
    memcpy(md.lse_stride, ls, sizeof ls);
    memcpy(md.part_lse_stride, ls, sizeof ls);
    const float *op[2] = {p0, p1}, *lp[2] = {l0, l1};
    const peak_status inval = PEAK_ERR_INVALID_ARG;
#define REJECT(what, want, o_, lse_, op_, lp_, n_, md_)                                            \
    expect_merge_rejected(what, want, o_, lse_, op_, lp_, n_, md_, all, N_ALL)
    REJECT("NULL o", inval, NULL, lse, op, lp, 2, &md);
    REJECT("NULL o_parts", inval, o, lse, NULL, lp, 2, &md);
    REJECT("NULL lse_parts", inval, o, lse, op, NULL, 2, &md);
    REJECT("NULL desc", inval, o, lse, op, lp, 2, NULL);
    REJECT("zero parts", inval, o, lse, op, lp, 0, &md);
    const float *op_null[2] = {p0, NULL}, *lp_null[2] = {NULL, l1};
    REJECT("a NULL part", inval, o, lse, op_null, lp, 2, &md);
    REJECT("a NULL part lse", inval, o, lse, op, lp_null, 2, &md);
    peak_attention_merge_desc bad = md;
    bad.v_head_dim = 0;
    REJECT("zero Dv", inval, o, lse, op, lp, 2, &bad);
    bad = md;
    bad.part_o_stride[1] = -32;
    REJECT("negative stride", inval, o, lse, op, lp, 2, &bad);
    bad = md;
    bad.o_stride[2] = 4;
    REJECT("O rows overlap", inval, o, lse, op, lp, 2, &bad);
    bad = md;
    bad.o_stride[1] = PTRDIFF_MAX / 2;
    REJECT("O's extent overflows", PEAK_ERR_OUT_OF_RANGE, o, lse, op, lp, 2, &bad);
    REJECT("O is part 1 (in place only as part 0)", inval, p1, lse, op, lp, 2, &md);
    REJECT("O overlaps part 0 shifted", inval, p0 + 8, lse, op, lp, 2, &md);
    REJECT("O meets a part's lse", inval, l0 - 4, lse, op, lp, 2, &md);
    REJECT("lse meets O", inval, o, o + 60, op, lp, 2, &md);
    REJECT("lse is part 1's lse", inval, o, l1, op, lp, 2, &md);
    REJECT("lse meets a part", inval, o, p1 + 3, op, lp, 2, &md);
    bad = md;
    bad.o_stride[1] = 40; /* o == p0, other strides: not in place */
    bad.o_stride[0] = 80;
    REJECT("O is part 0 with other strides", inval, p0, lse, op, lp, 2, &bad);
#undef REJECT
    /* and the same call, valid, goes through */
    CHECK(peak_attention_merge(o, lse, op, lp, 2, &md, NULL) == PEAK_OK,
          "%s: the valid merge was rejected", peak_isa_name(peak_test_isa));
    peak_test_free(all);
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
        att_shape s = {1,
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
        att_opts o = {0};
        o.mask.causal = causal;
        o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        o.workspace = causal ? ATT_WS_CALLER : ATT_WS_LIBRARY;
        o.vr = 2.0f;
        check_shape(&s, 2000 + (uint64_t)_i * 2 + (uint64_t)causal, &o);
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
        att_shape s = {1 + (pick & 1),
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
        att_opts o = {0};
        o.mask.causal = (pick >> 7) & 1;
        o.mask.align = (peak_align)((pick >> 8) & 1);
        o.mask.q_offset = (pick >> 9) & 1 ? (pick >> 10) % 70 : 0;
        o.mask.window = (pick >> 17) & 1 ? 1 + (pick >> 18) % 90 : 0;
        o.mask.key_len = (pick >> 25) & 1;
        o.mask.keep = (pick >> 26) & 1;
        o.mask.keep_bcast = (pick >> 27) & 7;
        o.mask.keep_density = 0.8;
        if ((pick >> 30) & 1)
            bias_spec(&o.mask, 0, -2.0f, 2.0f, 0.1);
        check_shape(&s, peak_test_next(&rng), &o);
    }
}
END_TEST

/* Keys 64..191 of every row (2 heads x 70 queries x 260 keys) hidden:
   by the keep mask (arg 0) or by a bias of -inf (arg 1). */
static void hide_tiles_64_to_191(att_problem *a, int arg)
{
    for (size_t e = 0; e < 2 * 70; e++)
        for (size_t j = 64; j < 192; j++) {
            if (arg == 0)
                a->keep[e * 260 + j] = 0;
            else
                a->bias[e * 260 + j] = -INFINITY;
        }
}

/* Whole tiles masked inside rows that see other tiles: keys 64..191 hidden
   by the keep mask (case 0), the bias (1) or a window (2); the hidden K and
   V keep their NaN canaries, and no NaN may come out. */
START_TEST(fully_masked_tiles_inside_visible_rows)
{
    att_shape s = {1, 2, 1, 70, 260, 16, 16, 0, 0, 0, 1};
    att_opts o = {0};
    if (_i == 0) {
        o.mask.keep = 1;
        o.mask.keep_density = 1.0;
        o.edit_mask = hide_tiles_64_to_191;
    } else if (_i == 1) {
        bias_spec(&o.mask, 0, -1.0f, 1.0f, 0.0);
        o.edit_mask = hide_tiles_64_to_191;
    } else {
        o.mask.window = 20;
        o.mask.causal = 1;
        o.mask.q_offset = 150;
    }
    o.arg = _i;
    check_shape(&s, 2200 + (uint64_t)_i, &o);
}
END_TEST

/* Key 10 + 70 * arg visible to query row 0 only (of 40 rows, 100 keys). */
static void key_for_row_0(att_problem *a, int arg)
{
    const size_t j = 10 + (size_t)arg * 70;
    for (size_t i = 1; i < 40; i++)
        a->keep[i * 100 + j] = 0;
}

/* V[key, col] = x for kv head 0 of batch 0. */
static void set_value(att_problem *a, size_t key, size_t col, float x)
{
    at(a->v, a->d.v_stride, 0, key, 0)[col] = x;
}

static void value_for_row_0(peak_tester_problem *p, att_problem *a, int arg)
{
    (void)p;
    set_value(a, 10 + (size_t)arg * 70, 3, arg ? NAN : INFINITY);
}

/* A V row holding inf (case 0) or NaN (case 1) at a key only query row 0
   sees: the other rows of the block must not pick up 0 * inf.  Row 0
   itself is inf or NaN in that column, the oracle's elsewhere. */
START_TEST(nonfinite_value_seen_by_one_row)
{
    att_shape s = {1, 1, 1, 40, 100, 8, 8, 0, 0, 0, 1};
    att_opts o = {0};
    o.mask.keep = 1;
    o.mask.keep_density = 1.0;
    o.edit_mask = key_for_row_0;
    o.edit_data = value_for_row_0;
    o.arg = _i;
    check_shape(&s, 2300 + (uint64_t)_i, &o);
}
END_TEST

static void inf_value_key_40(peak_tester_problem *p, att_problem *a, int arg)
{
    (void)p;
    (void)arg;
    set_value(a, 40, 5, INFINITY);
}

/* The packed K/V tiles a kv head's query blocks share (kernels/attention-tile.h):
   case 0, 64 query heads on one kv head, causal, so each block is one
   position and the cached tile grows by a key per block; case 2, Dh = Dv =
   256 and 1100 keys, more than the cache holds (1024 of them), so the
   blocks take their first tiles from it and pack the last two; case 1, an inf in
   a V row every row sees, in a tile cached by the first block and reused
   by the next three: each row's output is non-finite in that column and
   the oracle's in the others. */
START_TEST(kv_tile_cache_across_blocks)
{
    static const att_shape shapes[] = {{1, 64, 1, 70, 70, 8, 8, 0, 0, 0, 1},
                                       {1, 2, 1, 130, 150, 16, 16, 0, 0, 0, 0},
                                       {1, 1, 1, 70, 1100, 256, 256, 1, 0, 0, 1}};
    att_opts o = {0};
    o.mask.causal = _i == 0;
    o.edit_data = _i == 1 ? inf_value_key_40 : NULL;
    check_shape(&shapes[_i], 2450 + (uint64_t)_i, &o);
}
END_TEST

/* Query entries made > 0; key 37 of every kv head given weight 0 -- K = -inf
   in its first entry (arg bit 1 clear) or the bias -FLT_MAX (set) -- and a
   NaN V in column 3. */
static void zero_weight_nan_value(peak_tester_problem *p, att_problem *a, int arg)
{
    (void)p;
    const peak_attention_desc *d = &a->d;
    const size_t j = 37;
    for (size_t i = 0; i < d->q_len; i++)
        for (size_t h = 0; h < 2; h++)
            for (size_t c = 0; c < 8; c++) { /* q > 0: q . k = -inf below */
                float *qv = at(a->q, d->q_stride, 0, i, h) + c;
                *qv = fabsf(*qv) + 0.01f;
            }
    for (size_t g = 0; g < 2; g++) {
        if (arg >> 1)
            a->bias[j] = -FLT_MAX;
        else
            at(a->k, d->k_stride, 0, j, g)[0] = -INFINITY;
        at(a->v, d->v_stride, 0, j, g)[3] = NAN;
    }
}

/* A key every row sees whose weight is 0 -- its score is -inf (K holds -inf,
   q > 0) in cases 0 and 1, or it carries the finite bias -FLT_MAX in cases
   2 and 3 -- with a NaN in one column of its V: as in the scalar tier (and
   PyTorch), 0 * NaN reaches every row in that column (the oracle's 0 * NaN
   is NaN too), while the other columns are the oracle's (the key adds 0 to
   them).  Cases 0 and 2 run the tiled path (whole and masked tiles), 1 and
   3 the row path. */
START_TEST(zero_weight_nan_value_like_scalar)
{
    const int decode = _i & 1, biased = _i >> 1;
    att_shape s = {1, 2, 2, decode ? 1 : 70, 100, 8, 8, 0, 0, 0, 1};
    att_opts o = {0};
    if (biased)
        bias_spec(&o.mask, 7, -1.0f, 1.0f, 0.0);
    o.edit_data = zero_weight_nan_value;
    o.arg = _i;
    check_shape(&s, 2460 + (uint64_t)_i, &o);
}
END_TEST

static void values_near_1(peak_tester_problem *p, att_problem *a, int arg)
{
    (void)arg;
    const peak_tester_buf *b = &p->buf[peak_tester_index(p, a->v)];
    for (size_t e = 0; e < b->n; e++)
        a->v[e] = 1.0f + 0.01f * peak_test_uniform(&p->rng, -1.0f, 1.0f);
}

/* Long rows: V = 1 +- 0.01, whose weighted mean sits on a large constant,
   is where float running sums over many keys lose most.  Within 3e-6 *
   max|V| of the oracle at 65536 keys (tiled) and 131072 (decode): without
   the folded second-level sums (kernels/attention-tile.h, PEAK_ATTENTION_FOLD_TILES) the
   SIMD tiers measured 1.1e-5 and 1.9e-5 here. */
START_TEST(long_rows_stay_accurate)
{
    const int decode = _i;
    att_shape s = {1,
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
    if (peak_test_quick()) /* a quarter of the keys, still 1000 tiles long */
        s.Lk /= 4;
    att_opts o = {0};
    o.edit_data = values_near_1;
    o.o_tol = 3e-6;
    check_shape(&s, 2470 + (uint64_t)_i, &o);
}
END_TEST

/* Scores of magnitude 1e4 (q, k in [-25, 25], scale 1, Dh 16), in rows
   longer than one tile. */
START_TEST(scores_of_1e4)
{
    att_shape s = {1, 2, 2, 9, 150, 16, 16, _i & 1, 0, 0, 1};
    att_opts o = {0};
    o.scale = 1.0f;
    o.mask.causal = _i >> 1;
    o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    o.kq = 25.0f;
    check_shape(&s, 2400 + (uint64_t)_i, &o);
}
END_TEST

/* ---- workspace ------------------------------------------------------------- */

START_TEST(workspace_caller_or_library)
{
    att_shape s = {2, 2, 1, 5, 33, 16, 8, 1, 1, 0, 1};
    att_opts o = {0};
    peak_tester_problem p;
    att_problem *a = att_begin(&p, &s, 1800, &o);
    peak_tester_run(&attention, &p); /* library-allocated workspace */
    a->own_workspace = 1;
    /* the same call on the same tier with a caller's workspace: the same bits */
    peak_tester_same_bits(&attention, &p, peak_test_isa);
    size_t bytes = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&a->d, NULL, &bytes), PEAK_OK);
    if (bytes > 0) {
        void *ws = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        peak_tester_snapshot(&p);
        peak_tester_expect_rejected(
            &p, "workspace 1 byte short",
            peak_attention(a->o, a->q, a->k, a->v, &a->d, ws, bytes - 1, NULL), PEAK_ERR_WORKSPACE);
        free(ws);
    }
    peak_tester_free(&attention, &p);
}
END_TEST

/* A malloc'd copy of n floats. */
static float *copy_of(const float *src, size_t n)
{
    float *c = malloc(n * sizeof *c);
    if (!c)
        abort();
    memcpy(c, src, n * sizeof *c);
    return c;
}

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
    ck_assert_int_eq(peak_attention_workspace_size(&d, NULL, &need), PEAK_OK);
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

    ck_assert_int_eq(peak_attention(o, q, k, v, &d, NULL, 0, NULL), PEAK_OK);
    float *o_ref = copy_of(o, nq), *lse_ref = copy_of(d.lse, nl);
    ck_assert_int_eq(peak_attention(o, q, k, v, &d, arena + at[NT], need, NULL), PEAK_OK);
    CHECK(peak_test_bytes_equal(o, o_ref, nq * 4) && peak_test_bytes_equal(d.lse, lse_ref, nl * 4),
          "%s: a workspace after the tensors changed the result", peak_isa_name(peak_test_isa));

    unsigned char *before = malloc(total);
    for (int t = 0; t < NT; t++)
        for (int tail = 0; tail < 2; tail++) {
            const size_t start = tail ? (at[t] + 1 - need + 63) & ~(size_t)63 : at[t];
            peak_test_fill_canary(o, nq);
            peak_test_fill_canary(d.lse, nl);
            memcpy(before, arena, total);
            const peak_status got = peak_attention(o, q, k, v, &d, arena + start, need, NULL);
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

static void expect_rejected(peak_tester_problem *p, const char *what, peak_status want, float *o,
                            const float *q, const float *k, const float *v,
                            const peak_attention_desc *d)
{
    peak_tester_snapshot(p);
    peak_tester_expect_rejected(p, what, peak_attention(o, q, k, v, d, NULL, 0, NULL), want);
}

static void reject_desc(peak_tester_problem *p, const char *what, peak_status want,
                        const peak_attention_desc *d)
{
    const att_problem *a = p->user;
    expect_rejected(p, what, want, a->o, a->q, a->k, a->v, d);
}

START_TEST(invalid_arguments)
{
    att_shape s = {3, 4, 2, 3, 8, 8, 8, 0, 0, 0, 1};
    att_opts o = {0};
    peak_tester_problem p;
    att_problem *a = att_begin(&p, &s, 1900, &o);
    /* random key lengths, made after the inputs (rejected calls read none) */
    a->key_len = peak_test_add_key_len(&a->d.mask, att_dims(a), &p.rng);
    const peak_status inval = PEAK_ERR_INVALID_ARG;
    expect_rejected(&p, "NULL o", inval, NULL, a->q, a->k, a->v, &a->d);
    expect_rejected(&p, "NULL q", inval, a->o, NULL, a->k, a->v, &a->d);
    expect_rejected(&p, "NULL k", inval, a->o, a->q, NULL, a->v, &a->d);
    expect_rejected(&p, "NULL v", inval, a->o, a->q, a->k, NULL, &a->d);
    expect_rejected(&p, "NULL desc", inval, a->o, a->q, a->k, a->v, NULL);

    peak_attention_desc d;
    size_t *sizes[5] = {&d.batch, &d.heads, &d.q_len, &d.kv_len, &d.head_dim};
    for (int n = 0; n < 5; n++) {
        d = a->d;
        *sizes[n] = 0;
        reject_desc(&p, "zero size", inval, &d);
    }
    d = a->d;
    d.kv_heads = 3;
    reject_desc(&p, "kv_heads does not divide heads", inval, &d);
    d.kv_heads = 8;
    reject_desc(&p, "kv_heads > heads", inval, &d);
    d = a->d;
    d.o_stride[2] = 7;
    reject_desc(&p, "O rows overlap", inval, &d);
    d = a->d;
    d.q_stride[1] = -1;
    reject_desc(&p, "negative stride", inval, &d);
    d = a->d;
    d.scale = NAN;
    reject_desc(&p, "NaN scale", inval, &d);
    d.scale = -INFINITY;
    reject_desc(&p, "infinite scale", inval, &d);
    d = a->d;
    d.mask.align = (peak_align)5;
    reject_desc(&p, "bad align", inval, &d);
    a->key_len[0] = 9;
    reject_desc(&p, "key_len > Lk", PEAK_ERR_OUT_OF_RANGE, &a->d);
    a->key_len[0] = -1;
    reject_desc(&p, "key_len < 0", PEAK_ERR_OUT_OF_RANGE, &a->d);
    peak_tester_free(&attention, &p);
}
END_TEST

/* ---- RoPE inside the call (peak_attention_rope) ------------------------------ */

/* A fused-RoPE case: the shape, the layout, what rotates and where the
   positions come from. */
typedef struct rope_case {
    size_t B, H, KVH, Lq, Lk, D, r;
    int bhld, rotate_k, causal, interleaved, per_token, from_cache, lse;
} rope_case;

static const rope_case rope_cases[] = {
    /* self, causal, GQA 4:2, partial rotary, [B, L, H, D] */
    {2, 4, 2, 37, 37, 80, 64, 0, 1, 1, 0, 0, 0, 1},
    /* the same in [B, H, L, D], interleaved, from a cache */
    {2, 4, 2, 37, 37, 80, 64, 1, 1, 1, 1, 0, 1, 1},
    /* cross attention Lq != Lk, full rotary, per-token positions */
    {2, 8, 8, 50, 301, 64, 64, 0, 1, 0, 0, 1, 0, 1},
    /* a 130-row prefill against a cache of 301 keys, K stored rotated */
    {1, 4, 1, 130, 301, 64, 64, 0, 0, 1, 0, 0, 0, 1},
    /* decode over 8192 keys stored rotated: split-KV on the SIMD tiers */
    {1, 32, 8, 1, 8192, 64, 64, 0, 0, 1, 0, 1, 0, 1},
    /* decode rotating K too (batched positions), GQA 32:8 */
    {3, 32, 8, 1, 2048, 128, 128, 1, 1, 1, 0, 1, 1, 0},
};

static void rope_fill(float *p, size_t n, uint64_t *rng)
{
    peak_test_fill_uniform(p, n, rng, -1.0f, 1.0f);
}

/* Packed strides of [B, L, h, D] (bhld 0) or [B, h, L, D] (bhld 1). */
static void rope_strides(ptrdiff_t st[3], size_t L, size_t h, size_t D, int bhld)
{
    st[0] = (ptrdiff_t)(L * h * D);
    st[1] = (ptrdiff_t)(bhld ? D : h * D);
    st[2] = (ptrdiff_t)(bhld ? L * D : D);
}

/* Rotates n_tokens tokens of a [B, L, h, D] tensor as the fused call does,
   through the public rotation. */
static void rope_unfused(float *y, const float *x, const ptrdiff_t st[3], size_t B, size_t L,
                         size_t h, size_t D, const peak_attention_rope *ar, int keys)
{
    peak_rope_desc rd = PEAK_ROPE_DESC_DEFAULT;
    rd.batch = B;
    rd.seq_len = L;
    rd.heads = h;
    rd.head_dim = D;
    memcpy(rd.x_stride, st, 3 * sizeof *st);
    memcpy(rd.y_stride, st, 3 * sizeof *st);
    rd.pairing = ar->pairing;
    rd.params = ar->params;
    rd.cache = ar->cache;
    rd.cache_rows = ar->cache_rows;
    rd.pos0 = keys ? ar->k_pos0 : ar->q_pos0;
    rd.positions = keys ? ar->k_positions : ar->q_positions;
    rd.positions_stride = keys ? ar->k_positions_stride : ar->q_positions_stride;
    const peak_status s = peak_rope_apply(y, x, &rd, NULL);
    CHECK(s == PEAK_OK, "peak_rope_apply: %s", peak_status_string(s));
}

/* O and lse of the fused call equal, byte for byte, those of the rotation
   followed by the call without rope (with no pool and with a pool of 3
   when the build has one); the inputs are left untouched. */
static void check_rope_fused(int which, const peak_logits *logits)
{
    const rope_case *c = &rope_cases[which];
    uint64_t rng = 4100 + (uint64_t)which;
    const size_t nq = c->B * c->Lq * c->H * c->D, nk = c->B * c->Lk * c->KVH * c->D;
    float *q = peak_test_alloc(nq, 0), *k = peak_test_alloc(nk, 0), *v = peak_test_alloc(nk, 0);
    float *qr = peak_test_alloc(nq, 0), *kr = peak_test_alloc(nk, 0);
    float *q0 = peak_test_alloc(nq, 0), *k0 = peak_test_alloc(nk, 0);
    float *o1 = peak_test_alloc(nq, 0), *o2 = peak_test_alloc(nq, 0);
    float *lse1 = peak_test_alloc(c->B * c->H * c->Lq, 0);
    float *lse2 = peak_test_alloc(c->B * c->H * c->Lq, 0);
    rope_fill(q, nq, &rng);
    rope_fill(k, nk, &rng);
    rope_fill(v, nk, &rng);
    memcpy(q0, q, nq * sizeof *q);
    memcpy(k0, k, nk * sizeof *k);

    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = c->B;
    d.heads = c->H;
    d.kv_heads = c->KVH;
    d.q_len = c->Lq;
    d.kv_len = c->Lk;
    d.head_dim = c->D;
    d.logits = *logits;
    rope_strides(d.q_stride, c->Lq, c->H, c->D, c->bhld);
    rope_strides(d.k_stride, c->Lk, c->KVH, c->D, c->bhld);
    memcpy(d.v_stride, d.k_stride, sizeof d.k_stride);
    memcpy(d.o_stride, d.q_stride, sizeof d.q_stride);
    if (c->causal) {
        d.mask.causal = 1;
        d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    }
    if (c->lse) {
        d.lse = lse1;
        d.lse_stride[0] = (ptrdiff_t)(c->H * c->Lq);
        d.lse_stride[1] = (ptrdiff_t)c->Lq;
        d.lse_stride[2] = 1;
    }

    peak_attention_rope ar = PEAK_ATTENTION_ROPE_DEFAULT;
    ar.pairing = c->interleaved ? PEAK_ROPE_INTERLEAVED : PEAK_ROPE_HALF_SPLIT;
    ar.params.rotary_dim = c->r;
    ar.params.base = 500000.0;
    ar.params.scaling = PEAK_ROPE_YARN;
    ar.params.factor = 4.0;
    ar.params.original_max_position = 1024;
    ar.rotate_k = c->rotate_k;
    ar.q_pos0 = c->Lk - c->Lq; /* bottom-right: the queries are the last positions */
    int64_t *qpos = NULL, *kpos = NULL;
    if (c->per_token) {
        /* each batch entry its own past length: left padding of 3 b */
        qpos = malloc(c->B * c->Lq * sizeof *qpos);
        kpos = malloc(c->B * c->Lk * sizeof *kpos);
        for (size_t b = 0; b < c->B; b++) {
            for (size_t i = 0; i < c->Lq; i++)
                qpos[b * c->Lq + i] = (int64_t)(c->Lk - c->Lq + i + 3 * b);
            for (size_t j = 0; j < c->Lk; j++)
                kpos[b * c->Lk + j] = (int64_t)(j + 3 * b);
        }
        ar.q_positions = qpos;
        ar.q_positions_stride = (ptrdiff_t)c->Lq;
        ar.k_positions = kpos;
        ar.k_positions_stride = (ptrdiff_t)c->Lk;
    }
    float *cache = NULL;
    if (c->from_cache) {
        const size_t rows = c->Lk + 3 * c->B;
        cache = peak_test_alloc(rows * c->r, 0);
        CHECK(peak_rope_cache(cache, PEAK_F32, rows, 0, &ar.params, NULL) == PEAK_OK, "cache");
        ar.cache = cache;
        ar.cache_rows = rows;
    }

    peak_threadpool *pool = NULL;
    const int pools = peak_threadpool_create(3, &pool) == PEAK_OK ? 2 : 1;
    for (int use_pool = 0; use_pool < pools; use_pool++) {
        const peak_threadpool *pl = use_pool ? pool : NULL;
        d.rope = &ar;
        d.lse = c->lse ? lse1 : NULL;
        peak_status s = peak_attention(o1, q, k, v, &d, NULL, 0, pl);
        CHECK(s == PEAK_OK, "fused: %s", peak_status_string(s));
        CHECK(peak_test_bytes_equal(q, q0, nq * sizeof *q) &&
                  peak_test_bytes_equal(k, k0, nk * sizeof *k),
              "case %d: the fused call changed Q or K", which);

        memcpy(qr, q, nq * sizeof *q);
        memcpy(kr, k, nk * sizeof *k);
        rope_unfused(qr, qr, d.q_stride, c->B, c->Lq, c->H, c->D, &ar, 0);
        if (c->rotate_k)
            rope_unfused(kr, kr, d.k_stride, c->B, c->Lk, c->KVH, c->D, &ar, 1);
        d.rope = NULL;
        d.lse = c->lse ? lse2 : NULL;
        s = peak_attention(o2, qr, kr, v, &d, NULL, 0, pl);
        CHECK(s == PEAK_OK, "unfused: %s", peak_status_string(s));
        CHECK(peak_test_bytes_equal(o1, o2, nq * sizeof *o1),
              "%s case %d (pool %d): fused O differs from rotation + attention",
              peak_isa_name(peak_test_isa), which, use_pool);
        CHECK(!c->lse || peak_test_bytes_equal(lse1, lse2, c->B * c->H * c->Lq * sizeof *lse1),
              "%s case %d: fused lse differs", peak_isa_name(peak_test_isa), which);
    }
    peak_threadpool_destroy(pool);
    free(qpos);
    free(kpos);
    peak_test_free(cache);
    peak_test_free(q);
    peak_test_free(k);
    peak_test_free(v);
    peak_test_free(qr);
    peak_test_free(kr);
    peak_test_free(q0);
    peak_test_free(k0);
    peak_test_free(o1);
    peak_test_free(o2);
    peak_test_free(lse1);
    peak_test_free(lse2);
}

START_TEST(rope_fused_matches_rotation_then_attention)
{
    const peak_logits none = PEAK_LOGITS_DEFAULT;
    check_rope_fused(_i, &none);
}
END_TEST

/* The workspace the size query reports holds the rotated copies: a call
   with exactly that many bytes succeeds, one byte less is refused. */
START_TEST(rope_workspace_counts_the_copies)
{
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1;
    d.heads = 4;
    d.q_len = 70;
    d.kv_len = 70;
    d.head_dim = 64;
    rope_strides(d.q_stride, 70, 4, 64, 0);
    memcpy(d.k_stride, d.q_stride, sizeof d.q_stride);
    memcpy(d.v_stride, d.q_stride, sizeof d.q_stride);
    memcpy(d.o_stride, d.q_stride, sizeof d.q_stride);
    size_t plain = 0, with_rope = 0;
    CHECK(peak_attention_workspace_size(&d, NULL, &plain) == PEAK_OK, "size");
    peak_attention_rope ar = PEAK_ATTENTION_ROPE_DEFAULT;
    ar.params.rotary_dim = 64;
    d.rope = &ar;
    CHECK(peak_attention_workspace_size(&d, NULL, &with_rope) == PEAK_OK, "size with rope");
    CHECK(with_rope == plain + 2 * 70 * 4 * 64 * sizeof(float),
          "workspace with rope %zu = %zu + the two copies", with_rope, plain);
    uint64_t rng = 4200;
    const size_t n = 70 * 4 * 64;
    float *q = peak_test_alloc(n, 0), *o = peak_test_alloc(n, 0);
    rope_fill(q, n, &rng);
    void *ws = aligned_alloc(64, with_rope);
    CHECK(peak_attention(o, q, q, q, &d, ws, with_rope, NULL) == PEAK_OK, "exact workspace");
    CHECK(peak_attention(o, q, q, q, &d, ws, with_rope - 1, NULL) == PEAK_ERR_WORKSPACE,
          "one byte short");
    free(ws);
    peak_test_free(q);
    peak_test_free(o);
}
END_TEST

/* Bad rope arguments: the documented status, and O untouched. */
START_TEST(rope_invalid_arguments)
{
    const size_t L = 9, H = 2, D = 16, n = L * H * D;
    uint64_t rng = 4300;
    float *q = peak_test_alloc(n, 0), *o = peak_test_alloc(n, 0);
    float *cache = peak_test_alloc(8 * 16, 0), *before = peak_test_alloc(n, 0);
    rope_fill(q, n, &rng);
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1;
    d.heads = H;
    d.q_len = L;
    d.kv_len = L;
    d.head_dim = D;
    rope_strides(d.q_stride, L, H, D, 0);
    memcpy(d.k_stride, d.q_stride, sizeof d.q_stride);
    memcpy(d.v_stride, d.q_stride, sizeof d.q_stride);
    memcpy(d.o_stride, d.q_stride, sizeof d.q_stride);
    int64_t pos[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    struct {
        const char *what;
        peak_status want;
        int edit;
    } bad[] = {
        {"rotary_dim above head_dim", PEAK_ERR_INVALID_ARG, 0},
        {"odd rotary_dim", PEAK_ERR_INVALID_ARG, 1},
        {"NaN base", PEAK_ERR_INVALID_ARG, 2},
        {"negative query position", PEAK_ERR_OUT_OF_RANGE, 3},
        {"key position at cache_rows", PEAK_ERR_OUT_OF_RANGE, 4},
        {"query positions inside O", PEAK_ERR_INVALID_ARG, 5},
        {"unknown pairing", PEAK_ERR_INVALID_ARG, 6},
        {"pos0 beyond PEAK_MAX_POSITION", PEAK_ERR_OUT_OF_RANGE, 7},
    };
    for (size_t t = 0; t < sizeof bad / sizeof *bad; t++) {
        peak_attention_rope ar = PEAK_ATTENTION_ROPE_DEFAULT;
        ar.params.rotary_dim = D;
        switch (bad[t].edit) {
        case 0: ar.params.rotary_dim = 2 * D; break;
        case 1: ar.params.rotary_dim = 7; break;
        case 2: ar.params.base = NAN; break;
        case 3: pos[4] = -1; ar.q_positions = pos; break;
        case 4: ar.cache = cache; ar.cache_rows = 8; ar.k_positions = pos; break;
        case 5: ar.q_positions = (const int64_t *)(const void *)o; break;
        case 6: ar.pairing = (peak_rope_pairing)2; break;
        default: ar.k_pos0 = PEAK_MAX_POSITION; break;
        }
        d.rope = &ar;
        peak_test_fill_canary(o, n);
        if (bad[t].edit == 5) /* valid positions, only their place is wrong */
            memcpy(o, pos, sizeof pos);
        memcpy(before, o, n * sizeof *o);
        const peak_status s = peak_attention(o, q, q, q, &d, NULL, 0, NULL);
        const int untouched = peak_test_bytes_equal(o, before, n * sizeof *o);
        CHECK(s == bad[t].want && untouched, "%s: got %s, O %s", bad[t].what,
              peak_status_string(s), untouched ? "untouched" : "written");
        pos[4] = 4;
    }
    peak_test_free(q);
    peak_test_free(o);
    peak_test_free(cache);
    peak_test_free(before);
}
END_TEST

/* ---- logit options (peak_logits) ------------------------------------------ */

/* lse within 4e-6 (1 + |lse|) for the logit cases (peak.h's bound). */
#define LOGIT_LSE_TOL 4e-6

/* A logit case and its arrays (test-util.h). */
typedef peak_test_logit_spec att_logit_spec;
typedef peak_test_logit_arrays att_logit_arrays;

/* Sets o's logit options from ls (arr receives the arrays). */
static void logit_opts(att_opts *o, const att_logit_spec *ls, size_t H, uint64_t seed,
                       att_logit_arrays *arr)
{
    uint64_t rng = seed ^ 0x10917ull;
    o->logits = peak_test_make_logits(ls, H, &rng, arr);
    o->lse_tol = LOGIT_LSE_TOL;
}

/* The largest errors of this process's logit cases against the oracle,
   over rows with some visible key: |O - exact| / max|V| and |lse - exact|
   / (1 + |exact|) (each Check test runs in a fork of its own). */
static double logit_o_err, logit_lse_err;

static void note_errors(const peak_tester_problem *p)
{
    const att_problem *a = p->user;
    const att_inputs in = inputs_before(p);
    const peak_attention_desc *d = &a->d;
    const double vmax = v_max(p);
    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < d->heads; h++)
            for (size_t i = 0; i < d->q_len; i++) {
                double lse = 0.0;
                if (oracle_attention(&in, b, h, i, a->sc, a->out, &lse) != ROW_NORMAL)
                    continue;
                const float *row = cat(a->o, d->o_stride, b, i, h);
                for (size_t c = 0; c < value_dim(d) && vmax > 0.0; c++)
                    if (isfinite(a->out[c]))
                        logit_o_err = fmax(logit_o_err, fabs((double)row[c] - a->out[c]) / vmax);
                if (!a->lse)
                    continue;
                const double got = *cat(a->lse, d->lse_stride, b, h, i);
                logit_lse_err = fmax(logit_lse_err, fabs(got - lse) / (1.0 + fabs(lse)));
            }
}

/* The largest errors seen, on stdout (meson test -v). */
static void print_logit_errors(const char *what, int i)
{
    printf("attention %s, %s %d: max |O - exact| %.3g max|V|, |lse - exact| %.3g (1 + |lse|)\n",
           peak_isa_name(peak_test_isa), what, i, logit_o_err, logit_lse_err);
    fflush(stdout);
}

static void check_logits(const att_shape *s, uint64_t seed, att_opts *o,
                         const att_logit_spec *ls)
{
    att_logit_arrays arr;
    logit_opts(o, ls, s->H, seed, &arr);
    peak_tester_problem p;
    att_begin(&p, s, seed, o);
    peak_tester_run(&attention, &p);
    note_errors(&p);
    peak_tester_free(&attention, &p);
    peak_test_free_logits(&arr);
}

/* The option sets of logits_each_and_combined. */
enum { N_LOGIT_SETS = 7 };
static att_logit_spec logit_set(int k)
{
    switch (k) {
    case 0: return (att_logit_spec){.cap = 30.0f};
    case 1: return (att_logit_spec){.cap = 50.0f};
    case 2: return (att_logit_spec){.alibi = PEAK_ALIBI_CAUSAL};
    case 3: return (att_logit_spec){.alibi = PEAK_ALIBI_SYMMETRIC, .slopes = 2};
    case 4: return (att_logit_spec){.sinks = 1, .sink_lo = -2.0f, .sink_hi = 2.0f};
    case 5: return (att_logit_spec){.sinks = 2, .sink_lo = 3.0f, .sink_hi = 8.0f};
    default:
        return (att_logit_spec){.cap = 30.0f, .alibi = PEAK_ALIBI_CAUSAL, .slopes = 1,
                                .sinks = 2, .sink_lo = -1.0f, .sink_hi = 4.0f};
    }
}

/* Each option alone and all together on MHA, GQA 4:1, cross attention
   (Lq 5, Lk 300), a decode step over 2048 keys, and a 70-row prefill
   (more than a block of query rows per kv head); the capped sets with
   q, k in [-4, 4) and scale 1 (scores of tens, across tanh's range); the
   last set under a bottom-right causal mask with a bias. */
START_TEST(logits_each_and_combined)
{
    static const att_shape shapes[] = {
        {2, 4, 4, 9, 33, 16, 16, 0, 1, 0, 1},     {1, 8, 2, 7, 70, 16, 12, 1, 0, 1, 1},
        {2, 3, 3, 5, 300, 32, 24, 0, 0, 2, 1},    {1, 8, 8, 1, 2048, 64, 64, 0, 0, 0, 1},
        {1, 2, 1, 70, 150, 16, 16, 0, 0, 0, 1},
    };
    const att_shape *sh = &shapes[_i / N_LOGIT_SETS];
    const int set = _i % N_LOGIT_SETS;
    const att_logit_spec ls = logit_set(set);
    att_opts o = {0};
    o.workspace = ATT_WS_BY_SEED;
    if (ls.cap != 0.0f) {
        o.kq = 4.0f;
        o.scale = 1.0f;
    }
    if (set == N_LOGIT_SETS - 1) {
        o.mask.causal = 1;
        o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        bias_spec(&o.mask, 0, -2.0f, 2.0f, 0.1);
    }
    check_logits(sh, 8000 + (uint64_t)_i, &o, &ls);
    print_logit_errors("logits_each_and_combined", _i);
}
END_TEST

/* Every mask kind under all three options (cap 50; ALiBi alternating its
   form, the caller's slopes at stride 2; a sink per head), both causal
   alignments: a causal mask at q_offset 0 and 5, a window, key lengths,
   a keep mask per head, a bias, all of them. */
START_TEST(logits_under_masks)
{
    const peak_align align = (peak_align)(_i & 1);
    const int kind = _i / 2;
    const att_shape s = {2, 4, 2, 7, 37, 8, 8, kind & 1, (size_t)kind % 2, (size_t)kind % 3, 1};
    att_opts o = {0};
    o.mask.align = align;
    switch (kind) {
    case 0: o.mask.causal = 1; break;
    case 1: o.mask.causal = 1, o.mask.q_offset = 5; break;
    case 2: o.mask.window = 6, o.mask.q_offset = 3; break;
    case 3: o.mask.key_len = 1; break;
    case 4: o.mask.keep = 1, o.mask.keep_bcast = 1, o.mask.keep_density = 0.6; break;
    case 5: bias_spec(&o.mask, 4, -3.0f, 3.0f, 0.3); break;
    default:
        o.mask.causal = 1, o.mask.window = 9, o.mask.key_len = 1, o.mask.keep = 1;
        o.mask.keep_density = 0.8;
        bias_spec(&o.mask, 0, -1.0f, 1.0f, 0.1);
        break;
    }
    o.kq = 3.0f;
    const att_logit_spec ls = {.cap = 50.0f,
                               .alibi = (kind & 1) ? PEAK_ALIBI_SYMMETRIC : PEAK_ALIBI_CAUSAL,
                               .slopes = 2, .sinks = 2, .sink_lo = -2.0f, .sink_hi = 2.0f};
    check_logits(&s, 8100 + (uint64_t)_i, &o, &ls);
}
END_TEST

/* ALiBi at q_offset 1e6 (causal, both alignments, 12 heads over 4 kv
   heads, BLOOM's slopes for 12), with peak.h's slopes (terms up to 5e5,
   the same for every key of a row but for slope * (j - j')) and the
   caller's below 1e-5 (stride 0 or 2); sinks in the second half.  O is
   held to 1e-5 max|V| like any call: peak.h counts |ALiBi| with |bias| in
   its bound, which would allow 2^-24 (a few) 5e5 = 0.03 max|V| here, but
   the kernels keep the plain bound (measured 1e-7). */
START_TEST(alibi_far_positions)
{
    const att_shape s = {1, 12, 4, 5, 70, 16, 16, _i & 1, 0, 0, 1};
    att_opts o = {0};
    o.mask.causal = 1;
    o.mask.align = (peak_align)(_i & 1);
    o.mask.q_offset = 1000000;
    att_logit_spec ls = {.alibi = (_i & 2) ? PEAK_ALIBI_SYMMETRIC : PEAK_ALIBI_CAUSAL};
    if (_i & 4)
        ls.slopes = 1 + ((_i >> 1) & 1), ls.slope_hi = 1e-5f;
    if (_i & 8)
        ls.sinks = 2, ls.sink_lo = -3.0f, ls.sink_hi = 3.0f;
    check_logits(&s, 8200 + (uint64_t)_i, &o, &ls);
    print_logit_errors("alibi_far_positions", _i);
}
END_TEST

/* The causal form without a causal mask: keys after qpos get a bonus of
   slope * (j - qpos), up to 4096 for head 0 (slope 1/2) over 8192 keys,
   and those keys carry the row's weight.  A decode row at position 0 and
   4 rows at q_offset 4000, 8 heads: O within 1e-5 max|V| as any call.
   (peak.h's wording, |ALiBi| counted with |bias|, would allow
   2^-24 (a few) 4096 = 2.4e-4 (a few) max|V|.) */
START_TEST(alibi_bonus_after_qpos)
{
    att_shape s = {1, 8, 8, _i ? 4 : 1, 8192, 64, 64, 0, 0, 0, 1};
    if (peak_test_quick()) /* 2 heads' slopes instead of 8: the same distances */
        s.H = s.KVH = 2;
    att_opts o = {0};
    o.mask.q_offset = _i ? 4000 : 0;
    const att_logit_spec ls = {.alibi = PEAK_ALIBI_CAUSAL};
    check_logits(&s, 8350 + (uint64_t)_i, &o, &ls);
    print_logit_errors("alibi_bonus_after_qpos", _i);
}
END_TEST

/* Scores of magnitude 1e4 (q, k in [-25, 25), scale 1, Dh 16) capped at
   30 and 50: every score near +-cap; rows longer than a tile (70 x 150,
   causal bottom-right) and a decode row. */
START_TEST(softcap_scores_of_1e4)
{
    const int decode = _i >> 1;
    const att_shape s = {1, 2, 2, decode ? 1 : 70, 150, 16, 16, 0, 0, 0, 1};
    att_opts o = {0};
    o.scale = 1.0f;
    o.kq = 25.0f;
    o.mask.causal = !decode;
    o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    const att_logit_spec ls = {.cap = (_i & 1) ? 50.0f : 30.0f};
    check_logits(&s, 8300 + (uint64_t)_i, &o, &ls);
    print_logit_errors("softcap_scores_of_1e4", _i);
}
END_TEST

/* Rows that see no key stay O = 0, and their lse is the sink (peak.h):
   key_len 0, keep all zero, bias all -inf, bottom-right causal with
   Lq > Lk, a window ending before key 0; one sink for all or per head. */
START_TEST(sinks_fully_masked_rows)
{
    const int kind = _i / 2;
    att_shape s = {3, 2, 1, 4, kind >= 3 ? 2 : 11, 8, 6, kind & 1, 1, 0, 1};
    att_opts o = {0};
    switch (kind) {
    case 0: o.mask.key_len = 1; break;
    case 1: o.mask.keep = 1; break; /* density 0 */
    case 2: bias_spec(&o.mask, 7, 0.0f, 1.0f, 1.0); break;
    case 3: o.mask.causal = 1, o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT; break;
    default:
        o.mask.causal = 1, o.mask.window = 2, o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
        break;
    }
    const att_logit_spec ls = {.sinks = 1 + (_i & 1), .sink_lo = -2.0f, .sink_hi = 2.0f,
                               .cap = kind == 4 ? 30.0f : 0.0f,
                               .alibi = kind == 3 ? PEAK_ALIBI_CAUSAL : PEAK_ALIBI_NONE};
    check_logits(&s, 8400 + (uint64_t)_i, &o, &ls);
}
END_TEST

/* NaN and inf in K and V at every key the mask hides, with every option:
   none of it may reach O or lse (the cap must not turn a masked +-inf
   score into a visible +-cap). */
START_TEST(logits_masked_nonfinite_kv_never_read)
{
    att_opts o;
    att_shape s = masked_nonfinite_kv_case(&o, _i);
    const att_logit_spec ls = {.cap = 30.0f, .alibi = PEAK_ALIBI_SYMMETRIC, .sinks = 2,
                               .sink_lo = -1.0f, .sink_hi = 1.0f};
    check_logits(&s, 8500 + (uint64_t)_i, &o, &ls);
}
END_TEST

/* A visible NaN score still makes its row NaN, sink or not; a visible
   +inf score (q all +inf against keys of 0.5) is NaN without the cap and
   +cap with it: that row is then a normal row, O the mean of its V. */
START_TEST(logits_nonfinite_visible_scores)
{
    att_shape s = {1, 2, 2, 3, 6, 4, 4, 0, 0, 0, 1};
    att_opts o = {0};
    o.edit_data = nonfinite_score;
    o.arg = _i & 1;
    const att_logit_spec ls = {.cap = (_i & 2) ? 30.0f : 0.0f, .sinks = 2, .sink_lo = -1.0f,
                               .sink_hi = 1.0f};
    check_logits(&s, 8600 + (uint64_t)_i, &o, &ls);
}
END_TEST

/* Decode over long caches with every option, cut into key chunks on the
   SIMD tiers (the sink and the ALiBi terms must count once per row, not
   once per chunk): 8 heads over 2048 keys; 32 heads over 8 kv heads and
   8192 keys, causal bottom-right; and 3 queries of 2 batches over 3001
   keys with key lengths (chunks that see nothing). */
START_TEST(logits_split_kv)
{
    static const att_shape shapes[] = {
        {1, 8, 8, 1, 2048, 64, 64, 0, 0, 0, 1},
        {1, 32, 8, 1, 8192, 64, 64, 0, 0, 0, 1},
        {2, 8, 2, 3, 3001, 32, 48, 1, 0, 0, 1},
    };
    att_shape sh_ = shapes[_i];
    if (peak_test_quick() && _i == 1) /* GQA 4:1 over 2 KV heads: still split */
        sh_.H = 8, sh_.KVH = 2;
    const att_shape *sh = &sh_;
    att_opts o = {0};
    o.workspace = ATT_WS_CALLER;
    o.mask.causal = _i > 0;
    o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    o.mask.key_len = _i == 2;
    const att_logit_spec ls = {.cap = 30.0f,
                               .alibi = _i == 1 ? PEAK_ALIBI_SYMMETRIC : PEAK_ALIBI_CAUSAL,
                               .slopes = _i == 2 ? 2 : 0, .sinks = 2, .sink_lo = -2.0f,
                               .sink_hi = 6.0f};
    att_logit_arrays arr;
    logit_opts(&o, &ls, sh->H, 8700 + (uint64_t)_i, &arr);
    peak_tester_problem p;
    att_problem *a = att_begin(&p, sh, 8700 + (uint64_t)_i, &o);
    CHECK(peak_test_isa == PEAK_ISA_SCALAR || split_chunks(&a->d) > 1,
          "%s: the decode with logit options was not split", peak_isa_name(peak_test_isa));
    peak_tester_run(&attention, &p);
    note_errors(&p);
    peak_tester_free(&attention, &p);
    peak_test_free_logits(&arr);
    print_logit_errors("logits_split_kv", _i);
}
END_TEST

/* With every option, a pool of 3 workers gives the bytes of no pool
   (peak.h), O and lse: a causal prefill of 130 rows over GQA 4:1, a
   split decode (32 heads, 8192 keys), cross attention. */
START_TEST(logits_same_bytes_with_pool)
{
    static const att_shape shapes[] = {
        {2, 8, 2, 130, 130, 64, 64, 0, 0, 0, 1},
        {1, 32, 8, 1, 8192, 64, 64, 0, 0, 0, 1},
        {1, 4, 4, 5, 300, 32, 32, 1, 0, 0, 1},
    };
    peak_threadpool *pool = NULL;
    if (peak_threadpool_create(3, &pool) != PEAK_OK)
        return; /* a build without threads */
    att_shape sh_ = shapes[_i];
    if (peak_test_quick() && _i == 1) /* still split, a quarter of the keys */
        sh_.Lk = 2048;
    const att_shape *sh = &sh_;
    att_opts o = {0};
    o.mask.causal = _i != 2;
    o.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    const att_logit_spec ls = {.cap = 30.0f, .alibi = PEAK_ALIBI_CAUSAL, .sinks = 2,
                               .sink_lo = -2.0f, .sink_hi = 2.0f};
    att_logit_arrays arr;
    logit_opts(&o, &ls, sh->H, 8800 + (uint64_t)_i, &arr);
    peak_tester_problem p;
    att_problem *a = att_begin(&p, sh, 8800 + (uint64_t)_i, &o);
    peak_tester_run(&attention, &p); /* no pool, against the oracle */
    const peak_tester_buf *bo = &p.buf[peak_tester_index(&p, a->o)];
    const peak_tester_buf *bl = &p.buf[peak_tester_index(&p, a->lse)];
    float *o1 = malloc(bo->n * sizeof *o1), *l1 = malloc(bl->n * sizeof *l1);
    ck_assert(o1 && l1);
    memcpy(o1, bo->p, bo->n * sizeof *o1);
    memcpy(l1, bl->p, bl->n * sizeof *l1);
    peak_test_fill_canary(bo->p, bo->n);
    peak_test_fill_canary(bl->p, bl->n);
    ck_assert_int_eq(peak_attention(a->o, a->q, a->k, a->v, &a->d, NULL, 0, pool), PEAK_OK);
    CHECK(peak_test_bytes_equal(o1, bo->p, bo->n * sizeof *o1) &&
              peak_test_bytes_equal(l1, bl->p, bl->n * sizeof *l1),
          "%s shape %d: a pool of 3 changed O or lse", peak_isa_name(peak_test_isa), _i);
    free(o1);
    free(l1);
    peak_threadpool_destroy(pool);
    peak_tester_free(&attention, &p);
    peak_test_free_logits(&arr);
}
END_TEST

/* RoPE inside the call with every option: the bytes of the rotation
   followed by the call without rope (no pool and a pool of 3): self
   attention GQA, cross attention with per-token positions, a split
   decode over 8192 keys. */
START_TEST(logits_with_rope)
{
    static const int which[] = {0, 2, 4};
    if (peak_test_quick() && which[_i] == 4) /* 8192 keys: the split decode of the others */
        return;
    const size_t H = rope_cases[which[_i]].H;
    att_logit_arrays arr;
    const att_logit_spec ls = {.cap = 30.0f, .alibi = PEAK_ALIBI_CAUSAL, .slopes = 2,
                               .sinks = 2, .sink_lo = -2.0f, .sink_hi = 2.0f};
    uint64_t rng = 8900 + (uint64_t)_i;
    const peak_logits l = peak_test_make_logits(&ls, H, &rng, &arr);
    check_rope_fused(which[_i], &l);
    peak_test_free_logits(&arr);
}
END_TEST

/* Invalid logit options are rejected, nothing written (as for softmax);
   a cap of -0 is off. */
START_TEST(invalid_logit_options)
{
    att_shape s = {1, 4, 2, 3, 8, 8, 8, 0, 0, 0, 1};
    att_opts o = {0};
    peak_tester_problem p;
    att_problem *a = att_begin(&p, &s, 8950, &o);
    const peak_status inval = PEAK_ERR_INVALID_ARG;
    float bad[4] = {0.5f, 0.25f, 0.125f, 1.0f};
    peak_attention_desc d;
    static const float caps[] = {NAN, -1.0f, INFINITY, -INFINITY, -FLT_MIN};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        d = a->d;
        d.logits.softcap = caps[k];
        reject_desc(&p, "bad cap", inval, &d);
    }
    d = a->d;
    d.logits.alibi = (peak_alibi)3;
    reject_desc(&p, "alibi 3", inval, &d);
    static const float bad_slope[] = {-0.25f, NAN, INFINITY, -FLT_MIN};
    for (size_t k = 0; k < sizeof bad_slope / sizeof bad_slope[0]; k++) {
        d = a->d;
        d.logits.alibi = PEAK_ALIBI_CAUSAL;
        bad[3] = bad_slope[k];
        d.logits.alibi_slopes = bad;
        d.logits.alibi_slopes_stride = 1;
        reject_desc(&p, "bad slope", inval, &d);
        d.logits.alibi_slopes = &bad[3];
        d.logits.alibi_slopes_stride = 0;
        reject_desc(&p, "bad slope, stride 0", inval, &d);
    }
    bad[3] = 1.0f;
    d = a->d;
    d.logits.alibi = PEAK_ALIBI_CAUSAL;
    d.logits.alibi_slopes = &bad[3];
    d.logits.alibi_slopes_stride = -1;
    reject_desc(&p, "negative slopes stride", inval, &d);
    static const float bad_sink[] = {NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < 3; k++) {
        d = a->d;
        bad[3] = bad_sink[k];
        d.logits.sinks = bad;
        d.logits.sinks_stride = 1;
        reject_desc(&p, "bad sink", inval, &d);
        d.logits.sinks = &bad[3];
        d.logits.sinks_stride = 0;
        reject_desc(&p, "bad sink, stride 0", inval, &d);
    }
    bad[3] = 1.0f;
    d = a->d;
    d.logits.sinks = &bad[3];
    d.logits.sinks_stride = -1;
    reject_desc(&p, "negative sinks stride", inval, &d);
    /* the size query validates the options too */
    size_t bytes = 0;
    d = a->d;
    d.logits.softcap = NAN;
    CHECK(peak_attention_workspace_size(&d, NULL, &bytes) == inval, "%s: size query of a NaN cap",
          peak_isa_name(peak_test_isa));
    /* a cap of -0 is off: the bits of no cap */
    const peak_tester_buf *bo = &p.buf[peak_tester_index(&p, a->o)];
    float *o0 = malloc(bo->n * sizeof *o0);
    ck_assert_ptr_nonnull(o0);
    d = a->d;
    d.logits.softcap = -0.0f;
    ck_assert_int_eq(peak_attention(a->o, a->q, a->k, a->v, &d, NULL, 0, NULL), PEAK_OK);
    memcpy(o0, a->o, bo->n * sizeof *o0);
    ck_assert_int_eq(peak_attention(a->o, a->q, a->k, a->v, &a->d, NULL, 0, NULL), PEAK_OK);
    CHECK(peak_test_bytes_equal(o0, a->o, bo->n * sizeof *o0), "%s: a cap of -0 is not off",
          peak_isa_name(peak_test_isa));
    free(o0);
    peak_tester_free(&attention, &p);
}
END_TEST

/* ---- suite ------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create(peak_isa_name(isa));
    peak_tester_add_sweeps(tc, &attention);
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
    tcase_add_loop_test(tc, split_kv_decode, 0, 3);
    tcase_add_loop_test(tc, tail_rows_on_the_rows_kernel, 0, 4);
    tcase_add_loop_test(tc, split_kv_masked, 0, 2);
    tcase_add_loop_test(tc, merge_key_halves, 0, 8);
    tcase_add_test(tc, merge_fully_masked_part);
    tcase_add_loop_test(tc, merge_poisoned_part, 0, 2);
    tcase_add_test(tc, merge_invalid_arguments);
    tcase_add_test(tc, workspace_caller_or_library);
    tcase_add_test(tc, workspace_must_not_overlap);
    tcase_add_test(tc, invalid_arguments);
    tcase_add_loop_test(tc, rope_fused_matches_rotation_then_attention, 0,
                        (int)(sizeof rope_cases / sizeof *rope_cases));
    tcase_add_test(tc, rope_workspace_counts_the_copies);
    tcase_add_test(tc, rope_invalid_arguments);
    tcase_add_loop_test(tc, logits_each_and_combined, 0, 5 * N_LOGIT_SETS);
    tcase_add_loop_test(tc, logits_under_masks, 0, 14);
    tcase_add_loop_test(tc, alibi_far_positions, 0, 16);
    tcase_add_loop_test(tc, alibi_bonus_after_qpos, 0, 2);
    tcase_add_loop_test(tc, softcap_scores_of_1e4, 0, 4);
    tcase_add_loop_test(tc, sinks_fully_masked_rows, 0, 10);
    tcase_add_loop_test(tc, logits_masked_nonfinite_kv_never_read, 0, 3);
    tcase_add_loop_test(tc, logits_nonfinite_visible_scores, 0, 4);
    tcase_add_loop_test(tc, logits_split_kv, 0, 3);
    tcase_add_loop_test(tc, logits_same_bytes_with_pool, 0, 3);
    tcase_add_loop_test(tc, logits_with_rope, 0, 3);
    tcase_add_test(tc, invalid_logit_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
