/*
 * test-api.c - validation the family suites do not reach: arithmetic that
 * could wrap, strided outputs whose rows coincide, mask strides whose
 * extent overflows, and the exact limits documented in peak.h.  Each
 * rejected call must also leave its output untouched.  Found by a hostile
 * review of the first release; kept as regressions.
 */
#include "test-util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { D = 8 };

START_TEST(embed_padding_positions_cannot_wrap)
{
    float table[4 * D], out[4 * D], before[4 * D];
    int32_t ids[4] = {1, 2, 3, 2};
    uint64_t rng = 1;
    peak_test_fill_uniform(table, 4 * D, &rng, -1, 1);
    peak_test_fill_canary(out, 4 * D);
    memcpy(before, out, sizeof out);
    size_t bad_pos0[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 2, PEAK_MAX_POSITION,
                         PEAK_MAX_POSITION + 5};
    for (int with_pad = 0; with_pad < 2; with_pad++) {
        for (size_t k = 0; k < sizeof bad_pos0 / sizeof bad_pos0[0]; k++) {
            peak_embed_desc d = PEAK_EMBED_DESC_DEFAULT;
            d.table = table, d.vocab = 4, d.ld_table = D, d.d_model = D;
            d.pos0 = bad_pos0[k];
            d.padding_idx = with_pad ? 1 : -1;
            ck_assert_int_eq(peak_embed_pe(out, D, ids, 4, &d, NULL), PEAK_ERR_OUT_OF_RANGE);
            ck_assert(peak_test_bytes_equal(out, before, sizeof out));
        }
    }
}
END_TEST

/* Found by tests/fuzz (fuzz-attention): under DAZ a subnormal scale
   compared equal to 0 and became the default 1/sqrt(head_dim); DAZ reads
   it as 0, so both keys score 0 and O is the mean of V. */
START_TEST(attention_subnormal_scale_under_daz)
{
    float q[1] = {1e30f}, k[2] = {1.0f, -1.0f}, v[2] = {0.0f, 1.0f}, o[1];
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = d.heads = d.q_len = d.head_dim = 1, d.kv_len = 2;
    ptrdiff_t st[3] = {2, 1, 1}, qs[3] = {1, 1, 1};
    memcpy(d.q_stride, qs, sizeof qs);
    memcpy(d.o_stride, qs, sizeof qs);
    memcpy(d.k_stride, st, sizeof st);
    memcpy(d.v_stride, st, sizeof st);
    d.scale = 1e-40f;
    unsigned csr;
    if (!peak_test_ftz_on(&csr))
        return;
    peak_status s = peak_attention(o, q, k, v, &d, NULL, 0, NULL);
    peak_test_ftz_restore(csr);
    ck_assert_int_eq(s, PEAK_OK);
    ck_assert_msg(o[0] == 0.5f, "O = %a, want 0.5", (double)o[0]);
}
END_TEST

/* The deprecated aliases at the end of peak.h, kept for one release: the
   old names still compile, name the same type and give the same
   initialiser.  The only use of them in the repository. */
START_TEST(deprecated_attention_aliases_still_compile)
{
    _Static_assert(_Generic((peak_attn_desc *)0, peak_attention_desc *: 1, default: 0),
                   "peak_attn_desc is peak_attention_desc");
    static const peak_attn_desc old_default = PEAK_ATTN_DESC_DEFAULT;
    static const peak_attention_desc new_default = PEAK_ATTENTION_DESC_DEFAULT;
    ck_assert(memcmp(&old_default, &new_default, sizeof new_default) == 0);
}
END_TEST

START_TEST(softmax_rejects_coinciding_rows)
{
    float x[64], y[64], before[64];
    uint64_t rng = 2;
    peak_test_fill_uniform(x, 64, &rng, -1, 1);
    peak_test_fill_canary(y, 64);
    memcpy(before, y, sizeof y);
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = 1, d.heads = 2, d.q_len = 2, d.k_len = 4;
    ptrdiff_t xs[3] = {16, 8, 4};
    memcpy(d.x_stride, xs, sizeof xs);
    /* (h=1, i=0) and (h=0, i=1) would share a row. */
    ptrdiff_t ys[3] = {16, 4, 4};
    memcpy(d.y_stride, ys, sizeof ys);
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_bytes_equal(y, before, sizeof y));
    /* Head-major and query-major packings are both fine. */
    ptrdiff_t ok1[3] = {16, 8, 4}, ok2[3] = {16, 4, 8};
    memcpy(d.y_stride, ok1, sizeof ok1);
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_OK);
    memcpy(d.y_stride, ok2, sizeof ok2);
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_OK);
}
END_TEST

static void attention_shape(peak_attention_desc *d, float *o, float *q)
{
    (void)o, (void)q;
    d->batch = 1, d->heads = 2, d->q_len = 2, d->kv_len = 3, d->head_dim = 4;
    ptrdiff_t qs[3] = {16, 8, 4}, ks[3] = {24, 8, 4};
    memcpy(d->q_stride, qs, sizeof qs);
    memcpy(d->k_stride, ks, sizeof ks);
    memcpy(d->v_stride, ks, sizeof ks);
    memcpy(d->o_stride, qs, sizeof qs);
}

START_TEST(attention_rejects_coinciding_rows)
{
    float q[16], k[24], v[24], o[16], before[16];
    uint64_t rng = 3;
    peak_test_fill_uniform(q, 16, &rng, -1, 1);
    peak_test_fill_uniform(k, 24, &rng, -1, 1);
    peak_test_fill_uniform(v, 24, &rng, -1, 1);
    peak_test_fill_canary(o, 16);
    memcpy(before, o, sizeof o);
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    attention_shape(&d, o, q);
    ptrdiff_t bad[3] = {16, 4, 4}; /* (l=1, h=0) == (l=0, h=1) */
    memcpy(d.o_stride, bad, sizeof bad);
    ck_assert_int_eq(peak_attention(o, q, k, v, &d, NULL, 0, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_bytes_equal(o, before, sizeof o));
    ptrdiff_t bhld[3] = {16, 4, 8}; /* [B, H, L, D] */
    memcpy(d.o_stride, bhld, sizeof bhld);
    ck_assert_int_eq(peak_attention(o, q, k, v, &d, NULL, 0, NULL), PEAK_OK);
}
END_TEST

START_TEST(pe_add_rejects_coinciding_rows)
{
    float x[8 * D], before[8 * D];
    uint64_t rng = 4;
    peak_test_fill_uniform(x, 8 * D, &rng, -1, 1);
    memcpy(before, x, sizeof x);
    /* batch 2, seq 4, both strides one row: rows (b=1,s=0) and (b=0,s=1) coincide */
    ck_assert_int_eq(peak_pe_add(x, D, D, 2, 4, D, 0, NULL, 0, NULL, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_bytes_equal(x, before, sizeof x));
    /* [S, B, D]: batch stride one row, sequence stride two rows: fine. */
    ck_assert_int_eq(peak_pe_add(x, D, 2 * D, 2, 4, D, 0, NULL, 0, NULL, NULL), PEAK_OK);
}
END_TEST

/* Outputs that overlap an input the kernel still reads: the ids and
   positions of peak_embed_pe (read a chunk of 256 tokens at a time, after
   earlier chunks are written: this crashed), the mask arrays of softmax and
   attention, lse against O and Q, a partial y/x overlap in softmax, and a
   table under pe_add's x.  All rejected, nothing written. */
START_TEST(outputs_must_not_overlap_inputs)
{
    enum { N = 600 };
    int32_t *ids = calloc(N, sizeof *ids);
    int64_t *pos = calloc(N, sizeof *pos);
    for (int t = 0; t < N; t++)
        ids[t] = t % 4, pos[t] = t % 4;
    float table[4] = {1e9f, 2e9f, 3e9f, 4e9f};
    peak_embed_desc e = PEAK_EMBED_DESC_DEFAULT;
    e.table = table, e.vocab = 4, e.ld_table = 1, e.d_model = 1;
    ck_assert_int_eq(peak_embed_pe((float *)(ids + 256), 1, ids, 300, &e, NULL),
                     PEAK_ERR_INVALID_ARG);
    for (int t = 0; t < N; t++)
        ck_assert_int_eq(ids[t], t % 4);
    e.positions = pos;
    ck_assert_int_eq(peak_embed_pe((float *)(pos + 100), 1, ids, 300, &e, NULL),
                     PEAK_ERR_INVALID_ARG);
    for (int t = 0; t < N; t++)
        ck_assert(pos[t] == t % 4);
    e.positions = NULL;
    ck_assert_int_eq(peak_embed_pe(table + 1, 1, ids, 2, &e, NULL), PEAK_ERR_INVALID_ARG);
    free(pos);

    /* softmax: y over key_len, keep, bias; y half over x */
    float x[64], y[64], before[64];
    uint64_t rng = 7;
    peak_test_fill_uniform(x, 64, &rng, -1, 1);
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = 2, d.heads = 1, d.q_len = 2, d.k_len = 4;
    ptrdiff_t st[3] = {8, 8, 4};
    memcpy(d.x_stride, st, sizeof st);
    memcpy(d.y_stride, st, sizeof st);
    d.mask.key_len = ids; /* {0, 1} */
    ck_assert_int_eq(peak_softmax((float *)ids, x, &d, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert(ids[0] == 0 && ids[1] == 1);
    d.mask.key_len = NULL;
    d.mask.bias = y + 8;
    peak_test_fill_canary(y, 64);
    memcpy(before, y, sizeof y);
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_bytes_equal(y, before, sizeof y));
    d.mask.bias = NULL;
    memcpy(before, x, sizeof x);
    ck_assert_int_eq(peak_softmax(x + 8, x, &d, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_bytes_equal(x, before, sizeof x));

    /* attention: lse one float into O, lse == q, O over key_len */
    float q[16], k[16], v[16], o[16], lse[4];
    peak_test_fill_uniform(q, 16, &rng, -1, 1);
    peak_test_fill_uniform(k, 16, &rng, -1, 1);
    peak_test_fill_uniform(v, 16, &rng, -1, 1);
    peak_attention_desc a = PEAK_ATTENTION_DESC_DEFAULT;
    a.batch = 1, a.heads = 1, a.q_len = 2, a.kv_len = 2, a.head_dim = 4;
    ptrdiff_t as[3] = {8, 4, 4};
    memcpy(a.q_stride, as, sizeof as);
    memcpy(a.k_stride, as, sizeof as);
    memcpy(a.v_stride, as, sizeof as);
    memcpy(a.o_stride, as, sizeof as);
    ptrdiff_t ls[3] = {2, 2, 1};
    memcpy(a.lse_stride, ls, sizeof ls);
    a.lse = lse;
    ck_assert_int_eq(peak_attention(o, q, k, v, &a, NULL, 0, NULL), PEAK_OK);
    peak_test_fill_canary(o, 16);
    memcpy(before, o, sizeof o);
    a.lse = o + 1;
    ck_assert_int_eq(peak_attention(o, q, k, v, &a, NULL, 0, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_bytes_equal(o, before, sizeof o));
    memcpy(before, q, sizeof q);
    a.lse = q;
    ck_assert_int_eq(peak_attention(o, q, k, v, &a, NULL, 0, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_bytes_equal(q, before, sizeof q));
    a.lse = NULL;
    const int32_t one = 1; /* a valid key_len, so only the overlap is wrong */
    memcpy(o + 3, &one, sizeof one);
    a.mask.key_len = (const int32_t *)(o + 3);
    ck_assert_int_eq(peak_attention(o, q, k, v, &a, NULL, 0, NULL), PEAK_ERR_INVALID_ARG);
    a.mask.key_len = NULL;
    ck_assert_int_eq(peak_attention(k + 2, q, k, v, &a, NULL, 0, NULL), PEAK_ERR_INVALID_ARG);

    /* pe_add: x over the second row of its table */
    float pe[4 * D];
    peak_test_fill_uniform(pe, 4 * D, &rng, -1, 1);
    memcpy(before, pe, sizeof pe);
    ck_assert_int_eq(peak_pe_add(pe + D, D, D, 1, 2, D, 0, pe, 4, NULL, NULL),
                     PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_bytes_equal(pe, before, sizeof pe));
    free(ids);
}
END_TEST

START_TEST(mask_strides_must_fit)
{
    float x[32], y[32], before[32], bias[8];
    uint8_t keep[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    uint64_t rng = 5;
    peak_test_fill_uniform(x, 32, &rng, -1, 1);
    peak_test_fill_uniform(bias, 8, &rng, -1, 1);
    peak_test_fill_canary(y, 32);
    memcpy(before, y, sizeof y);
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = 2, d.heads = 1, d.q_len = 2, d.k_len = 8;
    ptrdiff_t st[3] = {16, 16, 8};
    memcpy(d.x_stride, st, sizeof st);
    memcpy(d.y_stride, st, sizeof st);
    d.mask.bias = bias;
    d.mask.bias_stride[0] = PTRDIFF_MAX / 2;
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_ERR_OUT_OF_RANGE);
    d.mask.bias = NULL;
    d.mask.bias_stride[0] = 0;
    d.mask.keep = keep;
    d.mask.keep_stride[0] = PTRDIFF_MAX;
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_ERR_OUT_OF_RANGE);
    ck_assert(peak_test_bytes_equal(y, before, sizeof y));
}
END_TEST

START_TEST(mask_index_limit_is_inclusive)
{
    float x[8], y[8];
    uint64_t rng = 6;
    peak_test_fill_uniform(x, 8, &rng, -1, 1);
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = d.heads = d.q_len = 1, d.k_len = 8;
    d.x_stride[2] = d.y_stride[2] = 8;
    d.mask.causal = 1;
    d.mask.q_offset = (size_t)1 << 40;
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_OK);
    d.mask.q_offset = ((size_t)1 << 40) + 1;
    ck_assert_int_eq(peak_softmax(y, x, &d, NULL), PEAK_ERR_OUT_OF_RANGE);
}
END_TEST

/* ---- logit options (peak_logits) ------------------------------------------ */

/* |got - exact| in units of the last place of floats of exact's binade. */
static long double ulps_off(float got, long double exact)
{
    int e;
    frexpl(exact, &e);
    return fabsl((long double)got - exact) / ldexpl(1.0L, e - 24);
}

/* peak_alibi_slopes for 1..64 heads, and 2^20 - 1 and 2^20 (sampled):
   each the exact value rounded once, so within half a unit in the last
   place of the formula evaluated in long double (test-util.c; the hair
   above 0.5 is that evaluation's own error: one exp2l rounding, 2^-53
   relative where valgrind runs long double as double, 2^-29 ulp). */
START_TEST(alibi_slopes_follow_the_formula)
{
    static const size_t big[] = {((size_t)1 << 20) - 1, (size_t)1 << 20};
    float *slopes = malloc(((size_t)1 << 20) * sizeof *slopes);
    ck_assert_ptr_nonnull(slopes);
    for (size_t k = 0; k < 64 + 2; k++) {
        const size_t n = k < 64 ? k + 1 : big[k - 64];
        peak_test_fill_canary(slopes, n);
        ck_assert_int_eq(peak_alibi_slopes(slopes, n), PEAK_OK);
        for (size_t h = 0; h < n; h += n > 64 ? 997 : 1) {
            const long double exact = peak_test_alibi_slope_exact(h, n);
            const long double off = ulps_off(slopes[h], exact);
            ck_assert_msg(off <= 0.5L + 1e-6L,
                          "heads %zu: slope[%zu] = %a, exact %.12Lg: %.4Lg ulp", n, h,
                          (double)slopes[h], exact, off);
        }
        const size_t last = n - 1; /* the sampling's end, and no write beyond n */
        ck_assert(ulps_off(slopes[last], peak_test_alibi_slope_exact(last, n)) <= 0.5L + 1e-6L);
    }
    free(slopes);
}
END_TEST

/* Head counts whose slopes are powers of two: exact. */
START_TEST(alibi_slopes_exact_values)
{
    static const struct {
        size_t n;
        int log2[8]; /* slope[h] = 2^log2[h] */
    } want[] = {
        {1, {-8}},
        {2, {-4, -8}},
        {3, {-4, -8, -2}},
        {4, {-2, -4, -6, -8}},
        {5, {-2, -4, -6, -8, -1}},
        {6, {-2, -4, -6, -8, -1, -3}},
        {7, {-2, -4, -6, -8, -1, -3, -5}},
        {8, {-1, -2, -3, -4, -5, -6, -7, -8}},
    };
    for (size_t c = 0; c < sizeof want / sizeof want[0]; c++) {
        float s[8];
        peak_test_fill_canary(s, 8);
        ck_assert_int_eq(peak_alibi_slopes(s, want[c].n), PEAK_OK);
        for (size_t h = 0; h < 8; h++) {
            if (h < want[c].n)
                ck_assert_msg(s[h] == ldexpf(1.0f, want[c].log2[h]), "heads %zu: slope[%zu] = %a",
                              want[c].n, h, (double)s[h]);
            else
                ck_assert(peak_test_is_canary(s[h]));
        }
    }
    /* 12 heads (BLOOM-style): 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 */
    float s[12];
    ck_assert_int_eq(peak_alibi_slopes(s, 12), PEAK_OK);
    for (size_t h = 0; h < 12; h++) {
        const double e = h < 8 ? -(double)(h + 1) : -0.5 - (double)(h - 8);
        ck_assert_msg(s[h] == (float)exp2(e), "12 heads: slope[%zu] = %a", h, (double)s[h]);
    }
}
END_TEST

START_TEST(alibi_slopes_rejects)
{
    float s[4];
    peak_test_fill_canary(s, 4);
    ck_assert_int_eq(peak_alibi_slopes(NULL, 8), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_alibi_slopes(s, 0), PEAK_ERR_INVALID_ARG);
    ck_assert(peak_test_canaries_intact(s, 4));
    const size_t n = ((size_t)1 << 20) + 1;
    float *big = malloc(n * sizeof *big);
    ck_assert_ptr_nonnull(big);
    peak_test_fill_canary(big, n);
    ck_assert_int_eq(peak_alibi_slopes(big, n), PEAK_ERR_OUT_OF_RANGE);
    ck_assert_int_eq(peak_alibi_slopes(big, SIZE_MAX), PEAK_ERR_OUT_OF_RANGE);
    ck_assert(peak_test_canaries_intact(big, n));
    free(big);
}
END_TEST

/* A softmax of 2 heads x 2 rows x 4 keys in y[0..16) from x. */
static peak_softmax_desc logit_softmax_desc(void)
{
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = 1, d.heads = 2, d.q_len = 2, d.k_len = 4;
    const ptrdiff_t st[3] = {16, 8, 4};
    memcpy(d.x_stride, st, sizeof st);
    memcpy(d.y_stride, st, sizeof st);
    return d;
}

/* The slopes or sinks inside an output are rejected (the kernels read them
   while writing), nothing written: softmax's y, attention's O, lse and
   workspace.  Strides whose extent overflows are out of range; a call of
   more than 2^20 heads has no default slopes. */
START_TEST(logit_arrays_must_not_overlap_outputs)
{
    float x[16], y[32], before[32];
    uint64_t rng = 11;
    peak_test_fill_uniform(x, 16, &rng, -1, 1);
    peak_softmax_desc d = logit_softmax_desc();
    for (int which = 0; which < 2; which++) {
        peak_test_fill_canary(y, 32);
        y[5] = 0.25f, y[6] = 0.5f; /* valid values: only the place is wrong */
        memcpy(before, y, sizeof y);
        peak_softmax_desc bad = d;
        if (which)
            bad.logits.sinks = y + 5, bad.logits.sinks_stride = 1;
        else
            bad.logits.alibi = PEAK_ALIBI_CAUSAL, bad.logits.alibi_slopes = y + 5,
            bad.logits.alibi_slopes_stride = 1;
        ck_assert_int_eq(peak_softmax(y, x, &bad, NULL), PEAK_ERR_INVALID_ARG);
        ck_assert(peak_test_bytes_equal(y, before, sizeof y));
        /* just past y's extent: fine */
        if (which)
            bad.logits.sinks = y + 16;
        else
            bad.logits.alibi_slopes = y + 16;
        y[16] = y[17] = 0.25f;
        ck_assert_int_eq(peak_softmax(y, x, &bad, NULL), PEAK_OK);
        /* a stride whose extent overflows */
        if (which)
            bad.logits.sinks_stride = PTRDIFF_MAX / 2;
        else
            bad.logits.alibi_slopes_stride = PTRDIFF_MAX / 2;
        memcpy(before, y, sizeof y);
        ck_assert_int_eq(peak_softmax(y, x, &bad, NULL), PEAK_ERR_OUT_OF_RANGE);
        ck_assert(peak_test_bytes_equal(y, before, sizeof y));
    }

    /* attention: 1 batch, 2 heads, 2 queries, 2 keys, D 4 */
    float q[16], k[16], v[16], arena[64 + 32];
    peak_test_fill_uniform(q, 16, &rng, -1, 1);
    peak_test_fill_uniform(k, 16, &rng, -1, 1);
    peak_test_fill_uniform(v, 16, &rng, -1, 1);
    peak_attention_desc a = PEAK_ATTENTION_DESC_DEFAULT;
    a.batch = 1, a.heads = 2, a.q_len = 2, a.kv_len = 2, a.head_dim = 4;
    const ptrdiff_t as[3] = {16, 8, 4}, ls[3] = {4, 2, 1};
    memcpy(a.q_stride, as, sizeof as);
    memcpy(a.k_stride, as, sizeof as);
    memcpy(a.v_stride, as, sizeof as);
    memcpy(a.o_stride, as, sizeof as);
    memcpy(a.lse_stride, ls, sizeof ls);
    float *o = arena, *lse = arena + 16; /* O [0, 16), lse [16, 20) */
    for (int which = 0; which < 4; which++) {
        peak_test_fill_canary(arena, 64 + 32);
        float *at = which < 2 ? o + 9 : lse + 1;
        at[0] = 0.5f, at[1] = 0.125f;
        memcpy(before, arena, sizeof before);
        peak_attention_desc bad = a;
        bad.lse = lse;
        if (which & 1)
            bad.logits.sinks = at, bad.logits.sinks_stride = 1;
        else
            bad.logits.alibi = PEAK_ALIBI_SYMMETRIC, bad.logits.alibi_slopes = at,
            bad.logits.alibi_slopes_stride = 1;
        ck_assert_int_eq(peak_attention(o, q, k, v, &bad, NULL, 0, NULL), PEAK_ERR_INVALID_ARG);
        ck_assert(peak_test_bytes_equal(arena, before, sizeof before));
    }
    /* the workspace over the sinks */
    peak_attention_desc ws_desc = a;
    float sinks[2] = {0.5f, -0.5f};
    ws_desc.logits.sinks = sinks, ws_desc.logits.sinks_stride = 1;
    size_t need = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&ws_desc, NULL, &need), PEAK_OK);
    if (need) {
        const size_t up = (need + 63) & ~(size_t)63;
        unsigned char *ws = aligned_alloc(64, up + 64);
        ck_assert_ptr_nonnull(ws);
        memset(ws, 0, up + 64);
        float *in_ws = (float *)(ws + 64); /* valid sinks inside the workspace */
        in_ws[0] = 0.5f, in_ws[1] = -0.5f;
        ws_desc.logits.sinks = in_ws;
        peak_test_fill_canary(o, 16);
        float o_before[16];
        memcpy(o_before, o, sizeof o_before);
        ck_assert_int_eq(peak_attention(o, q, k, v, &ws_desc, ws, need, NULL),
                         PEAK_ERR_INVALID_ARG);
        ck_assert(peak_test_bytes_equal(o, o_before, sizeof o_before));
        ck_assert(in_ws[0] == 0.5f && in_ws[1] == -0.5f);
        free(ws);
    }

    /* 2^20 + 1 heads of one key: no default slopes (peak_alibi_slopes'
       limit), given slopes are fine */
    const size_t H = ((size_t)1 << 20) + 1;
    float *hx = malloc(H * sizeof *hx), *hy = malloc(H * sizeof *hy);
    ck_assert(hx && hy);
    peak_test_fill_uniform(hx, H, &rng, -1, 1);
    peak_test_fill_canary(hy, H);
    peak_softmax_desc hd = PEAK_SOFTMAX_DESC_DEFAULT;
    hd.batch = hd.q_len = hd.k_len = 1, hd.heads = H;
    hd.x_stride[1] = hd.y_stride[1] = 1;
    hd.x_stride[0] = hd.y_stride[0] = (ptrdiff_t)H;
    hd.x_stride[2] = hd.y_stride[2] = 1;
    hd.logits.alibi = PEAK_ALIBI_CAUSAL;
    ck_assert_int_eq(peak_softmax(hy, hx, &hd, NULL), PEAK_ERR_OUT_OF_RANGE);
    ck_assert(peak_test_canaries_intact(hy, H));
    const float one_slope = 0.25f;
    hd.logits.alibi_slopes = &one_slope; /* stride 0: one slope for every head */
    ck_assert_int_eq(peak_softmax(hy, hx, &hd, NULL), PEAK_OK);
    ck_assert(hy[0] == 1.0f && hy[H - 1] == 1.0f);
    free(hx);
    free(hy);
}
END_TEST

static Suite *make_suite(peak_isa isa)
{
    (void)isa;
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("validation");
    tcase_add_test(tc, embed_padding_positions_cannot_wrap);
    tcase_add_test(tc, softmax_rejects_coinciding_rows);
    tcase_add_test(tc, attention_rejects_coinciding_rows);
    tcase_add_test(tc, pe_add_rejects_coinciding_rows);
    tcase_add_test(tc, mask_strides_must_fit);
    tcase_add_test(tc, mask_index_limit_is_inclusive);
    tcase_add_test(tc, attention_subnormal_scale_under_daz);
    tcase_add_test(tc, outputs_must_not_overlap_inputs);
    tcase_add_test(tc, deprecated_attention_aliases_still_compile);
    tcase_add_test(tc, alibi_slopes_follow_the_formula);
    tcase_add_test(tc, alibi_slopes_exact_values);
    tcase_add_test(tc, alibi_slopes_rejects);
    tcase_add_test(tc, logit_arrays_must_not_overlap_outputs);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
