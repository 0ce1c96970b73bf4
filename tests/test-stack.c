/*
 * test-stack.c - peak.h's stack promise: no call needs more than
 * PEAK_TEST_STACK_LIMIT bytes of its thread's stack.
 *
 * Each call runs on a fresh thread whose stack (256 KiB, ours) is painted
 * with a byte pattern first; the deepest byte the thread changed gives its
 * use, and the same thread making no call gives the baseline (the thread's
 * own start-up) to subtract.  The calls are the deepest of each family: PE
 * on the fly (per token, and for a batch of sequences), the in-place add on
 * the fly, a table (float32, and 16-bit through its float32 block, in
 * rows that fit the block and in rows wider), a softmax large enough to
 * stream through its stack buffer, attention with the library's own
 * workspace, a RoPE cache (float32 and 16-bit) and the RoPE rotation with
 * its cos/sin on the fly (rotary_dim 512), and LayerNorm with 16-bit rows
 * (bfloat16 rows of 768, whose pass 1 keeps s for pass 2; constant rows of
 * the longest d_model, which go to the reference through a float32 row;
 * a float16 y over float32 x, staged through float32 rows), on the tier named by argv[1]
 * (test-util.h).  Not built with sanitizers, which change frames.
 */
#include "test-util.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* peak.h: "at most 80 KiB" (optimised builds). */
#define PEAK_TEST_STACK_LIMIT ((size_t)80 << 10)
/* The emulated AVX-512 tier (tests/avx512-emulated: the AVX-512 sources on
   SIMDe, a test build): its 512-bit values spill, so its kernels' frames
   are larger (layernorm_rows_f32: 10 KiB against 896 bytes natively), and
   a 16-bit LayerNorm of d_model 16384 through float32 rows, 64 KiB of
   them, takes 81 KiB there against 68 KiB natively. */
#define PEAK_TEST_STACK_LIMIT_EMULATED ((size_t)84 << 10)
#define STACK_BYTES ((size_t)256 << 10)
#define PAINT 0x5c

enum { D = 512, N_TOK = 200, SM_ROWS = 1100, SM_KEYS = 4096, AT_L = 64, AT_H = 2, RO_L = 40,
       RO_H = 2 };

static float table[4 * D], pe_rows[64 * D], out[N_TOK * D], x_add[2 * 2 * D];
static float scores[(size_t)SM_ROWS * SM_KEYS];
static float q[AT_H * AT_L * 64], k[AT_H * AT_L * 64], v[AT_H * AT_L * 64], o[AT_H * AT_L * 64];
static float rope_x[RO_L * RO_H * D], rope_y[RO_L * RO_H * D], rope_rows[64 * D];
enum { LN_ROWS = 4, LN_D = 768, LN_WIDE = 16384 };
static uint16_t ln_x[2 * LN_WIDE], ln_r[LN_ROWS * LN_D], ln_y[2 * LN_WIDE];
static float ln_x32[2 * LN_WIDE];

typedef enum call {
    NONE,
    PE_TABLE,
    PE_TABLE_BF16,
    PE_TABLE_WIDE_F16,
    EMBED_PER_TOKEN,
    EMBED_BATCH,
    PE_ADD,
    SOFTMAX,
    ATTENTION,
    ATTENTION_DECODE,
    ROPE_CACHE,
    ROPE_CACHE_F16,
    ROPE_APPLY_FLY,
    LAYERNORM_BF16,
    LAYERNORM_REFERENCE_BF16,
    LAYERNORM_STAGED_F16
} call;
static const char *const call_names[] = {"none",
                                         "peak_pe_table",
                                         "peak_pe_table (bf16)",
                                         "peak_pe_table (f16, d 8200)",
                                         "peak_embed_pe (fly, per token)",
                                         "peak_embed_pe (fly, batch)",
                                         "peak_pe_add (fly)",
                                         "peak_softmax (streamed)",
                                         "peak_attention",
                                         "peak_attention (decode, Lq 1)",
                                         "peak_rope_cache (r 512)",
                                         "peak_rope_cache (f16, r 512)",
                                         "peak_rope_apply (fly, r 512)",
                                         "peak_add_layernorm (bf16)",
                                         "peak_add_layernorm (bf16, reference, d 16384)",
                                         "peak_add_layernorm (f16 y, staged, d 16384)"};

static peak_status embed(size_t seq_len)
{
    static const int32_t ids[N_TOK] = {0};
    peak_embed_desc d = PEAK_EMBED_DESC_DEFAULT;
    d.table = table, d.vocab = 4, d.ld_table = D, d.d_model = D, d.scale = 1.5f;
    d.seq_len = seq_len;
    return peak_embed_pe(out, D, ids, N_TOK, &d, NULL);
}

static peak_status softmax(void)
{
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = d.heads = 1, d.q_len = SM_ROWS, d.k_len = SM_KEYS;
    for (int i = 0; i < 3; i++)
        d.x_stride[i] = d.y_stride[i] = i == 2 ? SM_KEYS : (ptrdiff_t)SM_ROWS * SM_KEYS;
    return peak_softmax(scores, scores, &d, NULL);
}

/* q_len AT_L: the tiled path; 1: the row path (decode). */
static peak_status attention(size_t q_len)
{
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1, d.heads = AT_H, d.q_len = q_len, d.kv_len = AT_L, d.head_dim = 64;
    const ptrdiff_t st[3] = {AT_H * AT_L * 64, AT_H * 64, 64};
    for (int i = 0; i < 3; i++)
        d.q_stride[i] = d.k_stride[i] = d.v_stride[i] = d.o_stride[i] = st[i];
    return peak_attention(o, q, k, v, &d, NULL, 0, NULL);
}

/* YaRN, rotary_dim 512 (PEAK_ROPE_MAX_DIM). */
static peak_rope_params rope_params(void)
{
    peak_rope_params p = PEAK_ROPE_PARAMS_DEFAULT;
    p.rotary_dim = D;
    p.scaling = PEAK_ROPE_YARN, p.factor = 4.0, p.original_max_position = 4096;
    return p;
}

static peak_status rope_apply_fly(void)
{
    peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
    d.batch = 1, d.seq_len = RO_L, d.heads = RO_H, d.head_dim = D;
    const ptrdiff_t st[3] = {RO_L * RO_H * D, RO_H * D, D};
    for (int i = 0; i < 3; i++)
        d.x_stride[i] = d.y_stride[i] = st[i];
    d.params = rope_params();
    d.pos0 = 1000;
    return peak_rope_apply(rope_y, rope_x, &d, NULL);
}

/* x, r and y bfloat16 (rows of LN_D, values 1 to 2); constant rows of
   LN_WIDE (x all +0: rows the SIMD tiers leave to the reference); y
   float16 over float32 x, through float32 rows (LN_WIDE). */
static peak_status layernorm(call c)
{
    for (size_t i = 0; i < LN_ROWS * LN_D; i++)
        ln_x[i] = c == LAYERNORM_BF16 ? (uint16_t)(0x3f80 + i % 101) : 0;
    const peak_dtype y = c == LAYERNORM_STAGED_F16 ? PEAK_F16 : PEAK_BF16;
    const peak_dtype x = c == LAYERNORM_STAGED_F16 ? PEAK_F32 : PEAK_BF16;
    const peak_layernorm_types t = {y, y, x, x};
    const size_t d = c == LAYERNORM_BF16 ? LN_D : LN_WIDE, rows = c == LAYERNORM_BF16 ? LN_ROWS : 2;
    const void *xp = c == LAYERNORM_STAGED_F16 ? (const void *)ln_x32 : (const void *)ln_x;
    return peak_add_layernorm(ln_y, (ptrdiff_t)d, NULL, 0, xp, (ptrdiff_t)d,
                              c == LAYERNORM_BF16 ? ln_r : NULL, (ptrdiff_t)d, NULL, NULL, rows, d,
                              1e-5f, &t, NULL);
}

static void *run(void *arg)
{
    peak_status s = PEAK_OK;
    switch (*(const call *)arg) {
    case NONE: break;
    case PE_TABLE: s = peak_pe_table(pe_rows, PEAK_F32, 64, D, 0, NULL, NULL); break;
    case PE_TABLE_BF16: s = peak_pe_table(pe_rows, PEAK_BF16, 64, D, 0, NULL, NULL); break;
    case PE_TABLE_WIDE_F16: s = peak_pe_table(pe_rows, PEAK_F16, 2, 8200, 0, NULL, NULL); break;
    case EMBED_PER_TOKEN: s = embed(0); break;
    case EMBED_BATCH: s = embed(50); break;
    case PE_ADD: s = peak_pe_add(x_add, 2 * D, D, 2, 2, D, 0, NULL, 0, NULL, NULL); break;
    case SOFTMAX: s = softmax(); break;
    case ATTENTION: s = attention(AT_L); break;
    case ATTENTION_DECODE: s = attention(1); break;
    case ROPE_CACHE: {
        const peak_rope_params p = rope_params();
        s = peak_rope_cache(rope_rows, PEAK_F32, 64, 7, &p, NULL);
        break;
    }
    case ROPE_CACHE_F16: {
        const peak_rope_params p = rope_params();
        s = peak_rope_cache(rope_rows, PEAK_F16, 64, 7, &p, NULL);
        break;
    }
    case ROPE_APPLY_FLY: s = rope_apply_fly(); break;
    case LAYERNORM_BF16:
    case LAYERNORM_REFERENCE_BF16:
    case LAYERNORM_STAGED_F16: s = layernorm(*(const call *)arg); break;
    }
    return (void *)(intptr_t)s;
}

/* Bytes of a painted stack that `c` changed (the stack grows down). */
static size_t stack_use(call c)
{
    unsigned char *mem = NULL;
    ck_assert_int_eq(posix_memalign((void **)&mem, 4096, STACK_BYTES), 0);
    memset(mem, PAINT, STACK_BYTES);
    pthread_attr_t attr;
    pthread_t thread;
    void *status;
    ck_assert_int_eq(pthread_attr_init(&attr), 0);
    ck_assert_int_eq(pthread_attr_setstack(&attr, mem, STACK_BYTES), 0);
    ck_assert_int_eq(pthread_create(&thread, &attr, run, &c), 0);
    ck_assert_int_eq(pthread_join(thread, &status), 0);
    pthread_attr_destroy(&attr);
    ck_assert_int_eq((int)(intptr_t)status, PEAK_OK);
    size_t used = 0;
    for (size_t i = 0; i < STACK_BYTES; i++)
        if (mem[i] != PAINT) {
            used = STACK_BYTES - i;
            break;
        }
    free(mem);
    return used;
}

START_TEST(every_call_within_the_documented_stack)
{
    const char *tier = peak_isa_name(peak_test_isa);
    const bool emulated = strstr(peak_isa_reason(), "emulated") != NULL;
    const size_t limit = emulated ? PEAK_TEST_STACK_LIMIT_EMULATED : PEAK_TEST_STACK_LIMIT;
    const size_t base = stack_use(NONE);
    for (call c = PE_TABLE; c <= LAYERNORM_STAGED_F16; c++) {
        const size_t used = stack_use(c), net = used > base ? used - base : 0;
        printf("%-7s %-32s %6zu bytes of stack\n", tier, call_names[c], net);
        ck_assert_msg(net <= limit, "%s%s: %s used %zu bytes of stack (limit %zu)", tier,
                      emulated ? " (emulated)" : "", call_names[c], net, limit);
    }
}
END_TEST

static Suite *make_suite(peak_isa isa)
{
    (void)isa;
    Suite *s = suite_create("stack");
    TCase *tc = tcase_create("stack");
    tcase_add_test(tc, every_call_within_the_documented_stack);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
