/*
 * test-types.c - 16-bit tensors (peak_dtype): each family's calls with
 * bfloat16 and float16 operands, on the tier given as argv[1].
 *
 * Two promises, checked separately:
 *   - the same bits as float32: widening a 16-bit value is exact, so a call
 *     on 16-bit inputs must give, bit for bit, the float32 call on the
 *     widened inputs, its float32 outputs rounded once into the output's
 *     type (peak_convert, whose bits tests/test-convert.c checks against an
 *     oracle of its own); this covers every path (row path, tile path,
 *     split-KV, the tile cache, masks) with no tolerance;
 *   - accuracy: against a double-precision attention of the widened
 *     inputs, within the float32 bound plus half an ULP of the output type.
 * Also: a decode step by step over a bfloat16 cache against the one-shot
 * causal call, NaN and overflow through 16-bit outputs, masked 16-bit keys
 * holding NaN never read, and PEAK_ERR_UNSUPPORTED for a bad type with
 * nothing written.
 */
#include "test-util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t dtype_bytes(peak_dtype t)
{
    return peak_dtype_size(t);
}

/* 64-byte aligned, so that large calls take their streamed stores (which
   need aligned rows) */
static void *xmalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* n floats of x rounded into a new array of type t. */
static void *narrowed(const float *x, size_t n, peak_dtype t)
{
    void *y = xmalloc(n * dtype_bytes(t));
    ck_assert_int_eq(peak_convert(y, t, x, PEAK_F32, n, NULL), PEAK_OK);
    return y;
}

/* n elements of type t at x widened into a new float array (exact). */
static float *widened(const void *x, size_t n, peak_dtype t)
{
    float *y = xmalloc(n * sizeof(float));
    ck_assert_int_eq(peak_convert(y, PEAK_F32, x, t, n, NULL), PEAK_OK);
    return y;
}

/* ---- attention ------------------------------------------------------------- */

typedef struct att_shape {
    size_t B, H, KVH, Lq, Lk, Dh, Dv;
    int causal;     /* 1: causal, bottom-right aligned (decode) */
    int bhld;       /* 1: [B, H, L, D] strides, else [B, L, H, D] */
    int key_len;    /* 1: key padding, batch entry b sees Lk - 7 (b + 1) keys */
} att_shape;

static const att_shape att_shapes[] = {
    {1, 8, 2, 1, 300, 64, 64, 0, 0, 0},    /* decode, GQA: the row path */
    {1, 8, 8, 1, 4096, 64, 64, 1, 1, 0},   /* decode split over its keys */
    {2, 4, 2, 70, 200, 64, 64, 1, 0, 1},   /* prefill: blocks, tail rows, padding */
    {1, 8, 8, 50, 512, 64, 64, 0, 0, 0},   /* cross-attention */
    {1, 2, 1, 130, 150, 72, 40, 0, 1, 0},  /* head_dim 72, Dv 40: vector tails */
    {1, 4, 4, 300, 300, 128, 128, 1, 0, 0}, /* causal, the tile cache */
    {1, 3, 3, 5, 77, 20, 12, 0, 0, 1},     /* head_dim below a vector */
};

static const peak_dtype att_types[][4] = {
    /* q, k, v, o */
    {PEAK_BF16, PEAK_BF16, PEAK_BF16, PEAK_BF16},
    {PEAK_F16, PEAK_F16, PEAK_F16, PEAK_F16},
    {PEAK_F32, PEAK_BF16, PEAK_BF16, PEAK_F32},
    {PEAK_F32, PEAK_F16, PEAK_F16, PEAK_F32},
    {PEAK_BF16, PEAK_F16, PEAK_F32, PEAK_F16},
    {PEAK_F16, PEAK_F32, PEAK_BF16, PEAK_BF16},
};
#define N_ATT_SHAPES (sizeof att_shapes / sizeof *att_shapes)
#define N_ATT_TYPES (sizeof att_types / sizeof *att_types)

static const char *type_name(peak_dtype t)
{
    return t == PEAK_F32 ? "f32" : t == PEAK_BF16 ? "bf16" : "f16";
}

static void strides(const att_shape *s, size_t L, size_t heads, size_t D, ptrdiff_t st[3])
{
    if (s->bhld) { /* [B, H, L, D]: (b, l, h) */
        st[0] = (ptrdiff_t)(heads * L * D);
        st[1] = (ptrdiff_t)D;
        st[2] = (ptrdiff_t)(L * D);
    } else {
        st[0] = (ptrdiff_t)(L * heads * D);
        st[1] = (ptrdiff_t)(heads * D);
        st[2] = (ptrdiff_t)D;
    }
}

typedef struct att_case {
    att_shape s;
    peak_attention_desc d;
    int32_t key_len[4];
    size_t nq, nk, nv, no, nl;
    float *q, *k, *v; /* float32 values, each representable in its type */
} att_case;

static void att_case_make(att_case *c, const att_shape *s, const peak_dtype types[4],
                          uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->s = *s;
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = s->B;
    d.heads = s->H;
    d.kv_heads = s->KVH;
    d.q_len = s->Lq;
    d.kv_len = s->Lk;
    d.head_dim = s->Dh;
    d.v_head_dim = s->Dv;
    strides(s, s->Lq, s->H, s->Dh, d.q_stride);
    strides(s, s->Lk, s->KVH, s->Dh, d.k_stride);
    strides(s, s->Lk, s->KVH, s->Dv, d.v_stride);
    strides(s, s->Lq, s->H, s->Dv, d.o_stride);
    if (s->causal) {
        d.mask.causal = 1;
        d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    }
    if (s->key_len) {
        for (size_t b = 0; b < s->B; b++)
            c->key_len[b] = (int32_t)(s->Lk - 7 * (b + 1));
        d.mask.key_len = c->key_len;
    }
    d.q_type = types[0];
    d.k_type = types[1];
    d.v_type = types[2];
    d.o_type = types[3];
    c->d = d;
    c->nq = s->B * s->Lq * s->H * s->Dh;
    c->nk = s->B * s->Lk * s->KVH * s->Dh;
    c->nv = s->B * s->Lk * s->KVH * s->Dv;
    c->no = s->B * s->Lq * s->H * s->Dv;
    c->nl = s->B * s->H * s->Lq;
    uint64_t rng = seed;
    float *x[3] = {xmalloc(c->nq * 4), xmalloc(c->nk * 4), xmalloc(c->nv * 4)};
    const size_t n[3] = {c->nq, c->nk, c->nv};
    for (int i = 0; i < 3; i++) {
        peak_test_fill_uniform(x[i], n[i], &rng, -1.0f, 1.0f);
        /* the values the 16-bit tensor holds */
        void *h = narrowed(x[i], n[i], types[i]);
        free(x[i]);
        x[i] = widened(h, n[i], types[i]);
        free(h);
    }
    c->q = x[0];
    c->k = x[1];
    c->v = x[2];
}

static void att_case_free(att_case *c)
{
    free(c->q);
    free(c->k);
    free(c->v);
}

/* The typed call: O (of o_type) and lse.  Returns the status. */
static peak_status att_typed(const att_case *c, void *o, float *lse)
{
    peak_attention_desc d = c->d;
    void *q = narrowed(c->q, c->nq, d.q_type), *k = narrowed(c->k, c->nk, d.k_type),
         *v = narrowed(c->v, c->nv, d.v_type);
    d.lse = lse;
    d.lse_stride[0] = (ptrdiff_t)(c->s.H * c->s.Lq);
    d.lse_stride[1] = (ptrdiff_t)c->s.Lq;
    d.lse_stride[2] = 1;
    const peak_status st = peak_attention(o, q, k, v, &d, NULL, 0, NULL);
    free(q);
    free(k);
    free(v);
    return st;
}

/* The float32 call on the same (widened) values. */
static void att_f32(const att_case *c, float *o, float *lse)
{
    peak_attention_desc d = c->d;
    d.q_type = d.k_type = d.v_type = d.o_type = PEAK_F32;
    d.lse = lse;
    d.lse_stride[0] = (ptrdiff_t)(c->s.H * c->s.Lq);
    d.lse_stride[1] = (ptrdiff_t)c->s.Lq;
    d.lse_stride[2] = 1;
    ck_assert_int_eq(peak_attention(o, c->q, c->k, c->v, &d, NULL, 0, NULL), PEAK_OK);
}

START_TEST(attention_types_as_widened_float32)
{
    const att_shape *s = &att_shapes[_i % N_ATT_SHAPES];
    const peak_dtype *types = att_types[_i / N_ATT_SHAPES];
    att_case c;
    att_case_make(&c, s, types, 0x5eed0000u + (uint64_t)_i);
    float *o32 = xmalloc(c.no * 4), *lse32 = xmalloc(c.nl * 4), *lse = xmalloc(c.nl * 4);
    void *o = xmalloc(c.no * dtype_bytes(types[3]));
    att_f32(&c, o32, lse32);
    ck_assert_int_eq(att_typed(&c, o, lse), PEAK_OK);
    void *want = narrowed(o32, c.no, types[3]);
    CHECK(peak_test_bytes_equal(o, want, c.no * dtype_bytes(types[3])),
          "%s: shape %d, types q %s k %s v %s o %s: O is not the float32 call's, rounded",
          peak_isa_name(peak_test_isa), _i % (int)N_ATT_SHAPES, type_name(types[0]),
          type_name(types[1]), type_name(types[2]), type_name(types[3]));
    CHECK(peak_test_bytes_equal(lse, lse32, c.nl * 4),
          "%s: shape %d, types %d: lse is not the float32 call's", peak_isa_name(peak_test_isa),
          _i % (int)N_ATT_SHAPES, _i / (int)N_ATT_SHAPES);
    free(want);
    free(o);
    free(o32);
    free(lse32);
    free(lse);
    att_case_free(&c);
}
END_TEST

/* Double-precision attention of row (b, h, i) of the widened inputs. */
static void att_exact_row(const att_case *c, size_t b, size_t h, size_t i, double *out)
{
    const att_shape *s = &c->s;
    const peak_attention_desc *d = &c->d;
    const size_t kvh = h / (s->H / s->KVH);
    size_t hi = s->Lk;
    if (s->key_len)
        hi = (size_t)c->key_len[b];
    if (s->causal && s->Lk - s->Lq + i + 1 < hi)
        hi = s->Lk - s->Lq + i + 1;
    const float *q = c->q + (ptrdiff_t)b * d->q_stride[0] + (ptrdiff_t)i * d->q_stride[1] +
                     (ptrdiff_t)h * d->q_stride[2];
    double *sc = xmalloc(hi * sizeof(double) + 1), m = -INFINITY, l = 0.0;
    for (size_t j = 0; j < hi; j++) {
        const float *k = c->k + (ptrdiff_t)b * d->k_stride[0] + (ptrdiff_t)j * d->k_stride[1] +
                         (ptrdiff_t)kvh * d->k_stride[2];
        double dot = 0.0;
        for (size_t e = 0; e < s->Dh; e++)
            dot += (double)q[e] * (double)k[e];
        sc[j] = dot / sqrt((double)s->Dh);
        m = sc[j] > m ? sc[j] : m;
    }
    for (size_t e = 0; e < s->Dv; e++)
        out[e] = 0.0;
    for (size_t j = 0; j < hi; j++) {
        const float *v = c->v + (ptrdiff_t)b * d->v_stride[0] + (ptrdiff_t)j * d->v_stride[1] +
                         (ptrdiff_t)kvh * d->v_stride[2];
        const double p = exp(sc[j] - m);
        l += p;
        for (size_t e = 0; e < s->Dv; e++)
            out[e] += p * (double)v[e];
    }
    for (size_t e = 0; e < s->Dv; e++)
        out[e] /= l;
    free(sc);
}

/* Half an ULP of type t at x (relative: 2^-8 bfloat16, 2^-11 float16),
   float16's subnormal spacing below its least normal. */
static double half_ulp(peak_dtype t, double x)
{
    if (t == PEAK_F32)
        return 0.0;
    const double ax = fabs(x) > 0x1p-14 || t == PEAK_BF16 ? fabs(x) : 0x1p-14;
    return ax * (t == PEAK_BF16 ? 0x1p-8 : 0x1p-11);
}

START_TEST(attention_types_against_double)
{
    const att_shape *s = &att_shapes[_i % N_ATT_SHAPES];
    const peak_dtype *types = att_types[_i / N_ATT_SHAPES];
    att_case c;
    att_case_make(&c, s, types, 0xacc0000u + (uint64_t)_i);
    void *o = xmalloc(c.no * dtype_bytes(types[3]));
    float *lse = xmalloc(c.nl * 4);
    ck_assert_int_eq(att_typed(&c, o, lse), PEAK_OK);
    float *of = widened(o, c.no, types[3]);
    double *ref = xmalloc(s->Dv * sizeof(double)), worst = 0.0;
    /* V in [-1, 1]: the float32 bound 1e-5 * max|V| (peak.h) */
    const double bound32 = 1e-5;
    for (size_t b = 0; b < s->B; b++)
        for (size_t h = 0; h < s->H; h++)
            for (size_t i = 0; i < s->Lq; i++) {
                att_exact_row(&c, b, h, i, ref);
                const float *row = of + (ptrdiff_t)b * c.d.o_stride[0] +
                                   (ptrdiff_t)i * c.d.o_stride[1] + (ptrdiff_t)h * c.d.o_stride[2];
                for (size_t e = 0; e < s->Dv; e++) {
                    const double err = fabs((double)row[e] - ref[e]);
                    const double excess = err - bound32 - half_ulp(types[3], ref[e]);
                    worst = excess > worst ? excess : worst;
                    if (excess > 0)
                        ck_abort_msg("%s: shape %d types %d: O[%zu,%zu,%zu,%zu] = %.9g, exact "
                                     "%.9g (error %.3g)",
                                     peak_isa_name(peak_test_isa), _i % (int)N_ATT_SHAPES,
                                     _i / (int)N_ATT_SHAPES, b, i, h, e, (double)row[e], ref[e],
                                     err);
                }
            }
    free(ref);
    free(of);
    free(o);
    free(lse);
    att_case_free(&c);
}
END_TEST

/* A decode over a bfloat16 cache, one query row a call (Lq 1, the cache's
   first t + 1 keys), against the one-shot causal call's row t. */
START_TEST(attention_decode_bf16_cache_step_by_step)
{
    const size_t L = _i ? 300 : 70, H = 8, KVH = 2, D = 64;
    const att_shape s = {1, H, KVH, L, L, D, D, 1, 0, 0};
    const peak_dtype types[4] = {PEAK_F32, PEAK_BF16, PEAK_BF16, PEAK_F32};
    att_case c;
    att_case_make(&c, &s, types, 0xdec0de00u + (uint64_t)_i);
    float *full = xmalloc(c.no * 4), *lse = xmalloc(c.nl * 4);
    ck_assert_int_eq(att_typed(&c, full, lse), PEAK_OK);
    void *k16 = narrowed(c.k, c.nk, PEAK_BF16), *v16 = narrowed(c.v, c.nv, PEAK_BF16);
    float *step = xmalloc(H * D * 4);
    for (size_t t = 0; t < L; t++) {
        peak_attention_desc d = c.d;
        d.q_len = 1;
        d.kv_len = t + 1;
        d.mask = (peak_mask)PEAK_MASK_DEFAULT;
        d.o_stride[0] = (ptrdiff_t)(H * D);
        const float *q = c.q + (ptrdiff_t)t * c.d.q_stride[1];
        ck_assert_int_eq(peak_attention(step, q, k16, v16, &d, NULL, 0, NULL), PEAK_OK);
        for (size_t h = 0; h < H; h++)
            for (size_t e = 0; e < D; e++) {
                const float a = step[h * D + e], b = full[(t * H + h) * D + e];
                if (!(fabsf(a - b) <= 2e-5f))
                    ck_abort_msg("%s: decode step %zu head %zu [%zu]: %.9g, one-shot %.9g",
                                 peak_isa_name(peak_test_isa), t, h, e, (double)a, (double)b);
            }
    }
    free(step);
    free(k16);
    free(v16);
    free(full);
    free(lse);
    att_case_free(&c);
}
END_TEST

/* NaN stays NaN through a 16-bit O; float16 overflow gives inf; a NaN in a
   masked 16-bit key or value is never read. */
START_TEST(attention_types_special_values)
{
    const att_shape s = {1, 2, 2, 3, 40, 16, 16, 0, 0, 0};
    const peak_dtype t = _i ? PEAK_F16 : PEAK_BF16;
    const peak_dtype types[4] = {t, t, t, t};
    att_case c;
    att_case_make(&c, &s, types, 77);
    /* head 0 sees a NaN V at key 3; head 1's V is 1e5 everywhere (f16:
       inf already in V; bf16: 1e5 is finite, O = 1e5 rounded) */
    c.v[(3 * 2 + 0) * 16 + 5] = NAN;
    for (size_t j = 0; j < 40; j++)
        for (size_t e = 0; e < 16; e++)
            c.v[(j * 2 + 1) * 16 + e] = 1e5f;
    const size_t ob = dtype_bytes(t);
    void *o = xmalloc(c.no * ob);
    float *lse = xmalloc(c.nl * 4);
    ck_assert_int_eq(att_typed(&c, o, lse), PEAK_OK);
    float *of = widened(o, c.no, t);
    for (size_t i = 0; i < 3; i++) {
        CHECK(isnan(of[(i * 2 + 0) * 16 + 5]), "%s %s: NaN V did not reach O",
              peak_isa_name(peak_test_isa), type_name(t));
        const float big = of[(i * 2 + 1) * 16];
        if (t == PEAK_F16)
            CHECK(isinf(big) && big > 0, "%s f16: O of 1e5 is %g, not inf",
                  peak_isa_name(peak_test_isa), (double)big);
        else
            CHECK(big == 99840.0f, "%s bf16: O of 1e5 is %.9g, not 99840",
                  peak_isa_name(peak_test_isa), (double)big);
    }
    free(of);
    /* key padding: 20 keys visible, NaN K and V past them never read */
    int32_t key_len[1] = {20};
    for (size_t j = 20; j < 40; j++)
        for (size_t e = 0; e < 16; e++) {
            c.k[(j * 2 + 0) * 16 + e] = NAN;
            c.v[(j * 2 + 0) * 16 + e] = NAN;
        }
    c.v[(3 * 2 + 0) * 16 + 5] = 0.5f;
    c.d.mask.key_len = key_len;
    ck_assert_int_eq(att_typed(&c, o, lse), PEAK_OK);
    of = widened(o, c.no, t);
    for (size_t i = 0; i < 3; i++)
        for (size_t e = 0; e < 16; e++)
            CHECK(isfinite(of[(i * 2 + 0) * 16 + e]), "%s %s: a masked NaN was read",
                  peak_isa_name(peak_test_isa), type_name(t));
    free(of);
    free(o);
    free(lse);
    att_case_free(&c);
}
END_TEST

/* The row path walks the query heads of a kv head together when nothing
   tells their keys apart (attention_group_tile), and row by row when an
   element mask does: an all-ones keep mask must give the same bits. */
START_TEST(attention_grouped_rows_as_single_rows)
{
    static const att_shape shapes[] = {
        {1, 8, 2, 1, 300, 64, 64, 0, 0, 0},  /* 4 rows a kv head */
        {2, 14, 2, 1, 700, 72, 40, 1, 0, 1}, /* 7, tails, key padding */
        {1, 6, 2, 1, 2500, 64, 64, 0, 0, 0}, /* 3, split-KV */
        {1, 4, 2, 1, 100, 20, 12, 0, 1, 0},  /* 2, short rows */
    };
    const att_shape *s = &shapes[_i % 4];
    const peak_dtype t = _i / 4 == 0 ? PEAK_F32 : _i / 4 == 1 ? PEAK_BF16 : PEAK_F16;
    const peak_dtype types[4] = {PEAK_F32, t, t, PEAK_F32};
    att_case c;
    att_case_make(&c, s, types, 0x9900u + (uint64_t)_i);
    float *o1 = xmalloc(c.no * 4), *o2 = xmalloc(c.no * 4), *l1 = xmalloc(c.nl * 4),
          *l2 = xmalloc(c.nl * 4);
    ck_assert_int_eq(att_typed(&c, o1, l1), PEAK_OK);
    uint8_t *keep = xmalloc(s->Lk);
    memset(keep, 1, s->Lk);
    c.d.mask.keep = keep; /* strides 0: one row for every (b, h, i) */
    ck_assert_int_eq(att_typed(&c, o2, l2), PEAK_OK);
    CHECK(peak_test_bytes_equal(o1, o2, c.no * 4) && peak_test_bytes_equal(l1, l2, c.nl * 4),
          "%s: case %d: rows walked together differ from rows walked alone",
          peak_isa_name(peak_test_isa), _i);
    free(keep);
    free(o1);
    free(o2);
    free(l1);
    free(l2);
    att_case_free(&c);
}
END_TEST

START_TEST(attention_unsupported_type_writes_nothing)
{
    const att_shape s = {1, 2, 2, 4, 8, 16, 16, 0, 0, 0};
    const peak_dtype types[4] = {PEAK_F32, PEAK_F32, PEAK_F32, PEAK_F32};
    att_case c;
    att_case_make(&c, &s, types, 5);
    float *o = xmalloc(c.no * 4);
    peak_test_fill_canary(o, c.no);
    peak_dtype *field[4] = {&c.d.q_type, &c.d.k_type, &c.d.v_type, &c.d.o_type};
    for (int f = 0; f < 4; f++) {
        *field[f] = (peak_dtype)3;
        size_t bytes = 0;
        CHECK(peak_attention(o, c.q, c.k, c.v, &c.d, NULL, 0, NULL) == PEAK_ERR_UNSUPPORTED,
              "%s: type 3 in field %d accepted", peak_isa_name(peak_test_isa), f);
        CHECK(peak_attention_workspace_size(&c.d, NULL, &bytes) == PEAK_ERR_UNSUPPORTED,
              "%s: the size query took type 3", peak_isa_name(peak_test_isa));
        *field[f] = (peak_dtype)-1;
        CHECK(peak_attention(o, c.q, c.k, c.v, &c.d, NULL, 0, NULL) == PEAK_ERR_UNSUPPORTED,
              "%s: type -1 in field %d accepted", peak_isa_name(peak_test_isa), f);
        *field[f] = PEAK_F32;
    }
    CHECK(peak_test_canaries_intact(o, c.no), "%s: a refused call wrote O",
          peak_isa_name(peak_test_isa));
    free(o);
    att_case_free(&c);
}
END_TEST

/* The workspace counts the float32 copies: 16-bit Q and O take 4 Dh and
   4 Dv bytes a row more than float32 ones, 16-bit K and V nothing. */
START_TEST(attention_types_workspace)
{
    const att_shape s = {1, 8, 2, 100, 300, 64, 64, 0, 0, 0};
    const peak_dtype f32[4] = {PEAK_F32, PEAK_F32, PEAK_F32, PEAK_F32};
    att_case c;
    att_case_make(&c, &s, f32, 9);
    size_t base = 0, kv = 0, qo = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&c.d, NULL, &base), PEAK_OK);
    c.d.k_type = c.d.v_type = PEAK_BF16;
    ck_assert_int_eq(peak_attention_workspace_size(&c.d, NULL, &kv), PEAK_OK);
    c.d.q_type = PEAK_F16;
    c.d.o_type = PEAK_BF16;
    ck_assert_int_eq(peak_attention_workspace_size(&c.d, NULL, &qo), PEAK_OK);
    ck_assert_uint_eq(kv, base);
    ck_assert_uint_eq(qo, base + 2 * 100 * 8 * 64 * 4);
    att_case_free(&c);
    /* a float32 copy of Q whose bytes overflow: the sentinel (and, under
       UBSan, no overflow on the way) */
    peak_attention_desc h = PEAK_ATTENTION_DESC_DEFAULT;
    h.batch = h.heads = h.kv_len = 1;
    h.q_len = (size_t)1 << 24;
    h.head_dim = (size_t)1 << 40; /* Q, K, V at strides 0: 2^66 bytes to copy */
    h.v_head_dim = 1;
    h.o_stride[1] = 1; /* O [B, Lq, 1, 1] packed */
    h.q_type = PEAK_BF16;
    size_t huge = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&h, NULL, &huge), PEAK_OK);
    ck_assert_uint_eq(huge, SIZE_MAX & ~(size_t)63);
}
END_TEST

/* ---- LayerNorm ------------------------------------------------------------- */

typedef struct ln_shape {
    size_t rows, d, ld; /* ld >= d for every tensor */
    int residual, sum, in_place; /* in_place: y == x (same type) */
} ln_shape;

/* 8192 x 1024 reaches PEAK_LAYERNORM_STREAM_BYTES: streamed stores. */
static const ln_shape ln_shapes[] = {
    {37, 768, 768, 1, 1, 0},    {100, 64, 80, 1, 0, 0}, {5, 4100, 4100, 0, 1, 0},
    {3, 16384, 16390, 1, 1, 0}, {64, 33, 40, 1, 1, 1},  {1, 1, 1, 0, 0, 0},
    {8192, 1024, 1024, 1, 1, 0},
};
static const peak_dtype ln_types[][4] = {
    /* y, sum, x, r */
    {PEAK_BF16, PEAK_BF16, PEAK_BF16, PEAK_BF16},
    {PEAK_F16, PEAK_F16, PEAK_F16, PEAK_F16},
    {PEAK_BF16, PEAK_F32, PEAK_F32, PEAK_BF16},
    {PEAK_F32, PEAK_F16, PEAK_BF16, PEAK_F32},
};
#define N_LN_SHAPES (sizeof ln_shapes / sizeof *ln_shapes)
#define N_LN_TYPES (sizeof ln_types / sizeof *ln_types)

/* A 16-bit call gives the float32 call on the widened x and r, its y and
   sum rounded once, bit for bit; in place too. */
START_TEST(layernorm_types_as_widened_float32)
{
    const ln_shape *s = &ln_shapes[_i % N_LN_SHAPES];
    const peak_dtype *t = ln_types[_i / N_LN_SHAPES];
    if (peak_test_quick() && s->rows * s->d > 1000000)
        return; /* the streamed call: minutes under valgrind */
    peak_layernorm_types types = {t[0], t[1], t[2], t[3]};
    if (s->in_place)
        types.y = types.x;
    const size_t n = s->rows * s->ld;
    uint64_t rng = 0x1a7e0000u + (uint64_t)_i;
    float *x = xmalloc(n * 4), *r = xmalloc(n * 4), *g = xmalloc(s->d * 4), *b = xmalloc(s->d * 4);
    peak_test_fill_uniform(x, n, &rng, -3.0f, 5.0f);
    peak_test_fill_uniform(r, n, &rng, -1.0f, 1.0f);
    peak_test_fill_uniform(g, s->d, &rng, 0.5f, 1.5f);
    peak_test_fill_uniform(b, s->d, &rng, -0.5f, 0.5f);
    void *xh = narrowed(x, n, types.x), *rh = narrowed(r, n, types.r);
    float *xw = widened(xh, n, types.x), *rw = widened(rh, n, types.r);
    float *y32 = xmalloc(n * 4), *s32 = xmalloc(n * 4);
    memset(y32, 0, n * 4);
    memset(s32, 0, n * 4);
    ck_assert_int_eq(peak_add_layernorm(y32, (ptrdiff_t)s->ld, s->sum ? s32 : NULL,
                                        (ptrdiff_t)s->ld, xw, (ptrdiff_t)s->ld,
                                        s->residual ? rw : NULL, (ptrdiff_t)s->ld, g, b, s->rows,
                                        s->d, 1e-5f, NULL, NULL),
                     PEAK_OK);
    void *y = s->in_place ? xh : xmalloc(n * dtype_bytes(types.y));
    void *sum = xmalloc(n * dtype_bytes(types.sum));
    memset(sum, 0, n * dtype_bytes(types.sum));
    if (!s->in_place)
        memset(y, 0, n * dtype_bytes(types.y));
    ck_assert_int_eq(peak_add_layernorm(y, (ptrdiff_t)s->ld, s->sum ? sum : NULL,
                                        (ptrdiff_t)s->ld, xh, (ptrdiff_t)s->ld,
                                        s->residual ? rh : NULL, (ptrdiff_t)s->ld, g, b, s->rows,
                                        s->d, 1e-5f, &types, NULL),
                     PEAK_OK);
    void *want_y = narrowed(y32, n, types.y), *want_s = narrowed(s32, n, types.sum);
    for (size_t i = 0; i < s->rows; i++) {
        const size_t off = i * s->ld;
        CHECK(peak_test_bytes_equal((char *)y + off * dtype_bytes(types.y),
                                    (char *)want_y + off * dtype_bytes(types.y),
                                    s->d * dtype_bytes(types.y)),
              "%s: LayerNorm case %d row %zu: y is not the float32 call's, rounded",
              peak_isa_name(peak_test_isa), _i, i);
        if (s->sum)
            CHECK(peak_test_bytes_equal((char *)sum + off * dtype_bytes(types.sum),
                                        (char *)want_s + off * dtype_bytes(types.sum),
                                        s->d * dtype_bytes(types.sum)),
                  "%s: LayerNorm case %d row %zu: sum is not x + r rounded",
                  peak_isa_name(peak_test_isa), _i, i);
    }
    if (!s->in_place)
        free(y);
    free(sum);
    free(want_y);
    free(want_s);
    free(xh);
    free(rh);
    free(xw);
    free(rw);
    free(y32);
    free(s32);
    free(x);
    free(r);
    free(g);
    free(b);
}
END_TEST

/* Rows the SIMD tiers leave to the reference (a constant row, deviations
   near 1e20 whose float squares overflow), 16-bit: the float32 call's
   bits, rounded. */
START_TEST(layernorm_types_reference_rows)
{
    const size_t d = 100, rows = 3;
    const peak_dtype t = _i ? PEAK_F16 : PEAK_BF16;
    float x[300];
    for (size_t j = 0; j < d; j++) {
        x[j] = 2.5f;                                           /* constant */
        x[d + j] = t == PEAK_BF16 ? (j % 2 ? 1e20f : -3e19f)   /* squares overflow */
                                  : (j % 2 ? 6e4f : -6e4f);    /* float16's range */
        x[2 * d + j] = (float)j * 0.25f;                       /* an ordinary row */
    }
    const peak_layernorm_types types = {t, t, t, t};
    void *xh = narrowed(x, rows * d, t), *y = xmalloc(rows * d * 2);
    float *xw = widened(xh, rows * d, t), *y32 = xmalloc(rows * d * 4);
    ck_assert_int_eq(peak_add_layernorm(y32, (ptrdiff_t)d, NULL, 0, xw, (ptrdiff_t)d, NULL, 0,
                                        NULL, NULL, rows, d, 1e-5f, NULL, NULL),
                     PEAK_OK);
    ck_assert_int_eq(peak_add_layernorm(y, (ptrdiff_t)d, NULL, 0, xh, (ptrdiff_t)d, NULL, 0, NULL,
                                        NULL, rows, d, 1e-5f, &types, NULL),
                     PEAK_OK);
    void *want = narrowed(y32, rows * d, t);
    CHECK(peak_test_bytes_equal(y, want, rows * d * 2),
          "%s %s: reference rows differ from the float32 call's, rounded",
          peak_isa_name(peak_test_isa), type_name(t));
    free(xh);
    free(y);
    free(xw);
    free(y32);
    free(want);
}
END_TEST

START_TEST(layernorm_types_refused)
{
    const size_t d = 16385;
    float *x = xmalloc(d * 4), *y = xmalloc(d * 4);
    peak_test_fill_canary(y, d);
    memset(x, 0, d * 4);
    peak_layernorm_types t = {PEAK_BF16, PEAK_F32, PEAK_F32, PEAK_F32};
    CHECK(peak_add_layernorm(y, (ptrdiff_t)d, NULL, 0, x, (ptrdiff_t)d, NULL, 0, NULL, NULL, 1, d,
                             1e-5f, &t, NULL) == PEAK_ERR_UNSUPPORTED,
          "%s: a 16-bit row of 16385 accepted", peak_isa_name(peak_test_isa));
    t.y = (peak_dtype)7;
    CHECK(peak_add_layernorm(y, 64, NULL, 0, x, 64, NULL, 0, NULL, NULL, 1, 64, 1e-5f, &t,
                             NULL) == PEAK_ERR_UNSUPPORTED,
          "%s: type 7 accepted", peak_isa_name(peak_test_isa));
    t.y = PEAK_F32;
    t.x = PEAK_BF16; /* y == x of another type: not in place, overlapping */
    CHECK(peak_add_layernorm(x, 64, NULL, 0, x, 64, NULL, 0, NULL, NULL, 1, 64, 1e-5f, &t,
                             NULL) == PEAK_ERR_INVALID_ARG,
          "%s: y over a bfloat16 x accepted", peak_isa_name(peak_test_isa));
    t.y = PEAK_F16; /* the same size, another type */
    CHECK(peak_add_layernorm(x, 64, NULL, 0, x, 64, NULL, 0, NULL, NULL, 1, 64, 1e-5f, &t,
                             NULL) == PEAK_ERR_INVALID_ARG,
          "%s: a float16 y over a bfloat16 x accepted", peak_isa_name(peak_test_isa));
    t.y = PEAK_BF16;
    t.sum = PEAK_F16;
    t.r = PEAK_BF16;
    CHECK(peak_add_layernorm(y, 64, x, 64, x + 64, 64, x, 64, NULL, NULL, 1, 64, 1e-5f, &t,
                             NULL) == PEAK_ERR_INVALID_ARG,
          "%s: a float16 sum over a bfloat16 r accepted", peak_isa_name(peak_test_isa));
    CHECK(peak_test_canaries_intact(y, d), "%s: a refused call wrote y",
          peak_isa_name(peak_test_isa));
    free(x);
    free(y);
}
END_TEST

/* ---- softmax --------------------------------------------------------------- */

typedef struct sm_shape {
    size_t B, H, Lq, Lk;
    int causal;    /* 1: causal, bottom-right aligned */
    int key_len;   /* 1: entry b sees Lk - 3 (b + 1) keys */
    int logits;    /* 1: a soft cap and a sink per head */
    int in_place;  /* 1: y == x (same type) */
    int broadcast; /* 1: x's head stride 0 (one score row for every head) */
} sm_shape;

/* Rows past 8192 keys take the heap scratch; 2 x 4 x 520 x 1031 keys
   (4.3M floats) stream a float32 y. */
static const sm_shape sm_shapes[] = {
    {2, 3, 17, 40, 1, 1, 0, 0, 0}, {1, 2, 5, 1, 0, 0, 0, 0, 0},   {2, 2, 9, 130, 0, 1, 1, 1, 0},
    {1, 3, 4, 77, 1, 0, 0, 0, 1},  {1, 1, 3, 9000, 1, 0, 1, 0, 0}, {2, 4, 520, 1031, 0, 0, 0, 0, 0},
};
static const peak_dtype sm_types[][2] = {
    /* x, y */
    {PEAK_BF16, PEAK_BF16}, {PEAK_F16, PEAK_F16}, {PEAK_BF16, PEAK_F32},
    {PEAK_F32, PEAK_F16},   {PEAK_F16, PEAK_F32}, {PEAK_F32, PEAK_BF16},
};
#define N_SM_SHAPES (sizeof sm_shapes / sizeof *sm_shapes)
#define N_SM_TYPES (sizeof sm_types / sizeof *sm_types)

typedef struct sm_case {
    peak_softmax_desc d;
    size_t nx, ny; /* elements of x's and y's extents */
    float *xf;     /* x's values, already representable in x's type */
    void *xh;      /* x in its type */
    int32_t key_len[2];
    float sinks[4];
} sm_case;

static void sm_case_make(sm_case *c, const sm_shape *s, const peak_dtype t[2], uint64_t seed)
{
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = s->B;
    d.heads = s->H;
    d.q_len = s->Lq;
    d.k_len = s->Lk;
    const ptrdiff_t row = (ptrdiff_t)s->Lk, head = (ptrdiff_t)(s->Lq * s->Lk);
    d.y_stride[2] = row;
    d.y_stride[1] = head;
    d.y_stride[0] = head * (ptrdiff_t)s->H;
    d.x_stride[2] = row;
    d.x_stride[1] = s->broadcast ? 0 : head;
    d.x_stride[0] = s->broadcast ? head : head * (ptrdiff_t)s->H;
    d.scale = 0.37f;
    d.x_type = t[0];
    d.y_type = s->in_place ? t[0] : t[1];
    d.mask.causal = s->causal;
    d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    for (size_t b = 0; b < 2; b++)
        c->key_len[b] = (int32_t)(s->Lk > 3 * (b + 1) ? s->Lk - 3 * (b + 1) : 1);
    d.mask.key_len = s->key_len ? c->key_len : NULL;
    for (size_t h = 0; h < 4; h++)
        c->sinks[h] = 0.5f * (float)h - 0.25f;
    if (s->logits) {
        d.logits.softcap = 12.0f;
        d.logits.sinks = c->sinks;
        d.logits.sinks_stride = 1;
    }
    c->d = d;
    c->ny = s->B * s->H * s->Lq * s->Lk;
    c->nx = s->broadcast ? s->B * s->Lq * s->Lk : c->ny;
    uint64_t rng = seed;
    float *x = xmalloc(c->nx * 4);
    peak_test_fill_uniform(x, c->nx, &rng, -30.0f, 30.0f);
    c->xh = narrowed(x, c->nx, t[0]);
    c->xf = widened(c->xh, c->nx, t[0]);
    free(x);
}

static void sm_case_free(sm_case *c)
{
    free(c->xh);
    free(c->xf);
}

/* A 16-bit call gives the float32 call on the widened x, its y rounded
   once, bit for bit; in place, broadcast, masks, the heap scratch and a
   streamed float32 y included. */
START_TEST(softmax_types_as_widened_float32)
{
    const sm_shape *s = &sm_shapes[_i % N_SM_SHAPES];
    if (peak_test_quick() && s->B * s->H * s->Lq * s->Lk > 1000000)
        return; /* the streamed call: seconds under valgrind */
    sm_case c;
    sm_case_make(&c, s, sm_types[_i / N_SM_SHAPES], 0x50f70000u + (uint64_t)_i);
    const peak_dtype yt = c.d.y_type;
    peak_softmax_desc d32 = c.d;
    d32.x_type = d32.y_type = PEAK_F32;
    float *y32 = xmalloc(c.ny * 4);
    ck_assert_int_eq(peak_softmax(y32, c.xf, &d32, NULL), PEAK_OK);
    void *y = s->in_place ? c.xh : xmalloc(c.ny * dtype_bytes(yt));
    if (!s->in_place)
        memset(y, 0xa5, c.ny * dtype_bytes(yt));
    ck_assert_int_eq(peak_softmax(y, c.xh, &c.d, NULL), PEAK_OK);
    void *want = narrowed(y32, c.ny, yt);
    CHECK(peak_test_bytes_equal(y, want, c.ny * dtype_bytes(yt)),
          "%s: softmax case %d (x %s, y %s): not the float32 call's probabilities, rounded",
          peak_isa_name(peak_test_isa), _i, type_name(c.d.x_type), type_name(yt));
    if (!s->in_place)
        free(y);
    free(want);
    free(y32);
    sm_case_free(&c);
}
END_TEST

/* Against softmax in double of the scores the call forms (float x *
   scale, capped as peak_softcap_ref does: shapes without logits only):
   within 4 float32 ULP plus half an ULP of y's type. */
START_TEST(softmax_types_against_double)
{
    const sm_shape *s = &sm_shapes[_i % N_SM_SHAPES];
    if (s->logits || s->B * s->H * s->Lq * s->Lk > 1000000)
        return;
    sm_case c;
    sm_case_make(&c, s, sm_types[_i / N_SM_SHAPES], 0x50f80000u + (uint64_t)_i);
    const peak_dtype yt = c.d.y_type;
    void *y = s->in_place ? c.xh : xmalloc(c.ny * dtype_bytes(yt));
    ck_assert_int_eq(peak_softmax(y, c.xh, &c.d, NULL), PEAK_OK);
    float *yf = widened(y, c.ny, yt);
    double *p = xmalloc(s->Lk * sizeof(double));
    for (size_t b = 0; b < s->B; b++)
        for (size_t h = 0; h < s->H; h++)
            for (size_t i = 0; i < s->Lq; i++) {
                const float *x = c.xf + (ptrdiff_t)b * c.d.x_stride[0] +
                                 (ptrdiff_t)h * c.d.x_stride[1] + (ptrdiff_t)i * c.d.x_stride[2];
                const float *row = yf + (ptrdiff_t)b * c.d.y_stride[0] +
                                   (ptrdiff_t)h * c.d.y_stride[1] + (ptrdiff_t)i * c.d.y_stride[2];
                const size_t end = s->key_len ? (size_t)c.key_len[b] : s->Lk;
                const size_t diag = i + s->Lk - s->Lq + 1;
                const size_t vis = s->causal && diag < end ? diag : end;
                double m = -INFINITY, sum = 0.0;
                for (size_t j = 0; j < vis; j++) { /* not fmax: aarch64 gcc 12 -O3 ICEs */
                    const double v = (double)(x[j] * c.d.scale);
                    m = v > m ? v : m;
                }
                for (size_t j = 0; j < vis; j++)
                    sum += p[j] = exp((double)(x[j] * c.d.scale) - m);
                for (size_t j = 0; j < s->Lk; j++) {
                    const double want = j < vis ? p[j] / sum : 0.0;
                    const double bound = want < 0x1p-126 ? 0x1p-149 * 4 : 4 * 0x1p-23 * want;
                    const double err = fabs((double)row[j] - want);
                    if (err > bound + half_ulp(yt, want))
                        ck_abort_msg("%s: softmax case %d: y[%zu,%zu,%zu,%zu] = %.9g, exact %.9g",
                                     peak_isa_name(peak_test_isa), _i, b, h, i, j,
                                     (double)row[j], want);
                }
            }
    free(p);
    free(yf);
    if (!s->in_place)
        free(y);
    sm_case_free(&c);
}
END_TEST

START_TEST(softmax_types_refused)
{
    const size_t n = 64;
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
    memset(x, 0, n * 4);
    peak_test_fill_canary(y, n);
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = d.heads = d.q_len = 1;
    d.k_len = n;
    d.y_type = (peak_dtype)3;
    CHECK(peak_softmax(y, x, &d, NULL) == PEAK_ERR_UNSUPPORTED, "%s: y type 3 accepted",
          peak_isa_name(peak_test_isa));
    d.y_type = PEAK_F32;
    d.x_type = (peak_dtype)-1;
    CHECK(peak_softmax(y, x, &d, NULL) == PEAK_ERR_UNSUPPORTED, "%s: x type -1 accepted",
          peak_isa_name(peak_test_isa));
    CHECK(peak_test_canaries_intact(y, n), "%s: a refused call wrote y",
          peak_isa_name(peak_test_isa));
    d.x_type = PEAK_BF16; /* y == x of another type: not in place, overlapping */
    peak_test_fill_canary(x, n);
    CHECK(peak_softmax(x, x, &d, NULL) == PEAK_ERR_INVALID_ARG,
          "%s: a float32 y over a bfloat16 x accepted", peak_isa_name(peak_test_isa));
    CHECK(peak_test_canaries_intact(x, n), "%s: a refused call wrote x",
          peak_isa_name(peak_test_isa));
    /* The extent limit counts each tensor's own element size: x's last row
       at PTRDIFF_MAX / 4 elements is out of range for float32, not for
       bfloat16, whose call is refused one check later (y overlaps it). */
    d.batch = 2;
    d.x_stride[0] = PTRDIFF_MAX / 4;
    d.x_stride[1] = d.x_stride[2] = (ptrdiff_t)n;
    d.y_stride[0] = d.y_stride[1] = d.y_stride[2] = (ptrdiff_t)n;
    d.x_type = PEAK_F32;
    CHECK(peak_softmax(x + 1, x, &d, NULL) == PEAK_ERR_OUT_OF_RANGE,
          "%s: a float32 x beyond PTRDIFF_MAX bytes accepted", peak_isa_name(peak_test_isa));
    d.x_type = PEAK_BF16;
    CHECK(peak_softmax(x + 1, x, &d, NULL) == PEAK_ERR_INVALID_ARG,
          "%s: a bfloat16 x of PTRDIFF_MAX / 2 bytes judged by float32's size",
          peak_isa_name(peak_test_isa));
    d.x_stride[0] = PTRDIFF_MAX / 2;
    CHECK(peak_softmax(x + 1, x, &d, NULL) == PEAK_ERR_OUT_OF_RANGE,
          "%s: a bfloat16 x beyond PTRDIFF_MAX bytes accepted", peak_isa_name(peak_test_isa));
    CHECK(peak_test_canaries_intact(x, n), "%s: a refused call wrote x",
          peak_isa_name(peak_test_isa));
    free(x);
    free(y);
}
END_TEST

/* ---- embedding ------------------------------------------------------------- */

typedef struct em_shape {
    size_t n_tokens, d, ld_out, vocab;
    int table_pe;  /* 1: PE from a float32 table, else on the fly */
    size_t seq_len;
    int padding;   /* 1: fairseq numbering, padding_idx 1 */
} em_shape;

/* 600 tokens of 512 stream their output (512 KiB and more); ld_out 103
   leaves rows unaligned (the streamed rows' heads); 8192 is the widest
   typed d_model. */
static const em_shape em_shapes[] = {
    {37, 64, 64, 50, 0, 0, 0},     {600, 512, 512, 1000, 1, 100, 0}, {600, 512, 515, 999, 0, 200, 0},
    {40, 100, 103, 30, 1, 0, 1},   {5, 8192, 8192, 7, 0, 0, 0},     {64, 7, 9, 11, 0, 16, 0},
};
static const peak_dtype em_types[][2] = {
    /* table, out */
    {PEAK_BF16, PEAK_BF16}, {PEAK_F16, PEAK_F16}, {PEAK_BF16, PEAK_F32}, {PEAK_F16, PEAK_F32},
    {PEAK_F32, PEAK_BF16},  {PEAK_BF16, PEAK_F16}, {PEAK_F32, PEAK_F16},
};
#define N_EM_SHAPES (sizeof em_shapes / sizeof *em_shapes)
#define N_EM_TYPES (sizeof em_types / sizeof *em_types)

typedef struct em_case {
    peak_embed_desc d;
    int32_t *ids;
    float *tf;  /* the table's values (representable in its type) */
    void *th;   /* the table in its type */
    float *pe;
    size_t pe_rows, n_out;
} em_case;

static void em_case_make(em_case *c, const em_shape *s, const peak_dtype t[2], uint64_t seed)
{
    uint64_t rng = seed;
    peak_embed_desc d = PEAK_EMBED_DESC_DEFAULT;
    d.vocab = s->vocab;
    d.ld_table = (ptrdiff_t)s->d;
    d.d_model = s->d;
    d.scale = sqrtf((float)s->d);
    d.seq_len = s->seq_len;
    d.padding_idx = s->padding ? 1 : -1;
    d.table_type = t[0];
    d.out_type = t[1];
    c->pe_rows = s->n_tokens + 4;
    c->pe = xmalloc(c->pe_rows * s->d * 4);
    peak_test_fill_uniform(c->pe, c->pe_rows * s->d, &rng, -1.0f, 1.0f);
    if (s->table_pe) {
        d.pe = c->pe;
        d.pe_rows = c->pe_rows;
    }
    float *tab = xmalloc(s->vocab * s->d * 4);
    /* float16's range holds e * scale: |e| <= 0.2, scale <= 91 */
    peak_test_fill_uniform(tab, s->vocab * s->d, &rng, -0.2f, 0.2f);
    c->th = narrowed(tab, s->vocab * s->d, t[0]);
    c->tf = widened(c->th, s->vocab * s->d, t[0]);
    free(tab);
    d.table = c->th;
    c->ids = xmalloc(s->n_tokens * sizeof(int32_t));
    for (size_t i = 0; i < s->n_tokens; i++)
        c->ids[i] = (int32_t)((i * 7919u + (size_t)seed) % s->vocab);
    c->d = d;
    c->n_out = s->n_tokens * s->ld_out;
}

static void em_case_free(em_case *c)
{
    free(c->ids);
    free(c->tf);
    free(c->th);
    free(c->pe);
}

/* The 16-bit call gives the float32 call on the widened table, its rows
   rounded once, bit for bit (the gaps between rows untouched). */
START_TEST(embedding_types_as_widened_float32)
{
    const em_shape *s = &em_shapes[_i % N_EM_SHAPES];
    em_case c;
    em_case_make(&c, s, em_types[_i / N_EM_SHAPES], 0xe3b0000u + (uint64_t)_i);
    const peak_dtype to = c.d.out_type;
    const size_t so = dtype_bytes(to);
    peak_embed_desc d32 = c.d;
    d32.table = c.tf;
    d32.table_type = d32.out_type = PEAK_F32;
    float *y32 = xmalloc(c.n_out * 4);
    memset(y32, 0, c.n_out * 4);
    ck_assert_int_eq(peak_embed_pe(y32, (ptrdiff_t)s->ld_out, c.ids, s->n_tokens, &d32, NULL),
                     PEAK_OK);
    void *y = xmalloc(c.n_out * so);
    memset(y, 0, c.n_out * so);
    ck_assert_int_eq(peak_embed_pe(y, (ptrdiff_t)s->ld_out, c.ids, s->n_tokens, &c.d, NULL),
                     PEAK_OK);
    void *want = narrowed(y32, c.n_out, to);
    CHECK(peak_test_bytes_equal(y, want, c.n_out * so),
          "%s: embedding case %d (table %s, out %s): not the float32 call's rows, rounded",
          peak_isa_name(peak_test_isa), _i, type_name(c.d.table_type), type_name(to));
    free(want);
    free(y);
    free(y32);
    em_case_free(&c);
}
END_TEST

/* With a PE table: against e * scale + pe in double, within the float32
   call's two roundings (a multiply, an add) and half an ULP of out's
   type. */
START_TEST(embedding_types_against_double)
{
    const em_shape *s = &em_shapes[_i % N_EM_SHAPES];
    if (!s->table_pe || s->padding)
        return;
    em_case c;
    em_case_make(&c, s, em_types[_i / N_EM_SHAPES], 0xe3c0000u + (uint64_t)_i);
    const peak_dtype to = c.d.out_type;
    void *y = xmalloc(c.n_out * dtype_bytes(to));
    ck_assert_int_eq(peak_embed_pe(y, (ptrdiff_t)s->ld_out, c.ids, s->n_tokens, &c.d, NULL),
                     PEAK_OK);
    float *yf = widened(y, c.n_out, to);
    for (size_t t = 0; t < s->n_tokens; t++) {
        const size_t pos = s->seq_len ? t % s->seq_len : t;
        for (size_t j = 0; j < s->d; j++) {
            const double se = (double)c.tf[(size_t)c.ids[t] * s->d + j] * (double)c.d.scale;
            const double want = se + (double)c.pe[pos * s->d + j];
            const double bound = 0x1p-24 * (fabs(se) + fabs(want)) + half_ulp(to, want) +
                                 (to == PEAK_F16 ? 0x1p-25 : 0.0);
            const double got = (double)yf[t * s->ld_out + j];
            if (fabs(got - want) > bound)
                ck_abort_msg("%s: embedding case %d: out[%zu,%zu] = %.9g, exact %.9g",
                             peak_isa_name(peak_test_isa), _i, t, j, got, want);
        }
    }
    free(yf);
    free(y);
    em_case_free(&c);
}
END_TEST

START_TEST(embedding_types_refused)
{
    const size_t d = 8193;
    float *tab = xmalloc(d * 4), *out = xmalloc(d * 4);
    memset(tab, 0, d * 4);
    peak_test_fill_canary(out, d);
    int32_t id = 0;
    peak_embed_desc e = PEAK_EMBED_DESC_DEFAULT;
    e.table = tab;
    e.vocab = 1;
    e.d_model = d;
    e.ld_table = (ptrdiff_t)d;
    e.out_type = PEAK_BF16;
    CHECK(peak_embed_pe(out, (ptrdiff_t)d, &id, 1, &e, NULL) == PEAK_ERR_UNSUPPORTED,
          "%s: a bfloat16 out of d_model 8193 accepted", peak_isa_name(peak_test_isa));
    e.d_model = e.ld_table = 64;
    e.out_type = PEAK_F32;
    e.table_type = (peak_dtype)9;
    CHECK(peak_embed_pe(out, 64, &id, 1, &e, NULL) == PEAK_ERR_UNSUPPORTED,
          "%s: table type 9 accepted", peak_isa_name(peak_test_isa));
    CHECK(peak_test_canaries_intact(out, d), "%s: a refused call wrote out",
          peak_isa_name(peak_test_isa));
    free(tab);
    free(out);
}
END_TEST

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("types");
    TCase *tc = tcase_create(peak_isa_name(isa));
    /* Under valgrind (PEAK_TEST_QUICK) every shape with the first two type
       mixes (all bfloat16, all float16), and the shorter decode. */
    const int quick = peak_test_quick();
    const int att_mixes = quick ? 2 : (int)N_ATT_TYPES, ln_mixes = quick ? 2 : (int)N_LN_TYPES;
    tcase_add_loop_test(tc, attention_types_as_widened_float32, 0,
                        (int)N_ATT_SHAPES * att_mixes);
    tcase_add_loop_test(tc, attention_types_against_double, 0, (int)N_ATT_SHAPES * att_mixes);
    tcase_add_loop_test(tc, attention_decode_bf16_cache_step_by_step, 0, quick ? 1 : 2);
    tcase_add_loop_test(tc, attention_types_special_values, 0, 2);
    tcase_add_loop_test(tc, attention_grouped_rows_as_single_rows, 0, 12);
    tcase_add_test(tc, attention_unsupported_type_writes_nothing);
    tcase_add_test(tc, attention_types_workspace);
    tcase_add_loop_test(tc, layernorm_types_as_widened_float32, 0,
                        (int)N_LN_SHAPES * ln_mixes);
    tcase_add_loop_test(tc, layernorm_types_reference_rows, 0, 2);
    tcase_add_test(tc, layernorm_types_refused);
    const int sm_mixes = quick ? 2 : (int)N_SM_TYPES;
    tcase_add_loop_test(tc, softmax_types_as_widened_float32, 0, (int)N_SM_SHAPES * sm_mixes);
    tcase_add_loop_test(tc, softmax_types_against_double, 0, (int)N_SM_SHAPES * sm_mixes);
    tcase_add_test(tc, softmax_types_refused);
    const int em_mixes = quick ? 2 : (int)N_EM_TYPES;
    tcase_add_loop_test(tc, embedding_types_as_widened_float32, 0, (int)N_EM_SHAPES * em_mixes);
    tcase_add_loop_test(tc, embedding_types_against_double, 0, (int)N_EM_SHAPES * em_mixes);
    tcase_add_test(tc, embedding_types_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
