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
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
