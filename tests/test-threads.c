/*
 * test-threads.c - many threads make their first library call at the same
 * moment, then run kernels of every family concurrently, each on its own
 * buffers; every result must equal, byte for byte, the one the main thread
 * computes alone afterwards.
 *
 * Built in every configuration; CI also runs it under ThreadSanitizer
 * (-Db_sanitize=thread), which reports any data race: on the dispatch
 * state while it is initialised, or on any other global state a kernel
 * might keep (peak.h promises none besides the dispatch table).
 *
 * Each thread's first call is a different entry point (the families and
 * the dispatch queries in turn), released together by a barrier, so the
 * one-time initialisation is raced from every path into the library.  Then
 * each thread runs every family through the public API (the automatic
 * tier) and, through the internal table, on every tier this CPU supports,
 * which makes every tier's kernels run concurrently with themselves.
 *
 * No test here forces a tier and main() calls nothing of the library
 * before the threads start, so the first calls really are the first.
 */
#include "test-util.h"
#include "rope.h"
#include "schedule/schedule.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    N_THREADS = 24,
    ROUNDS = 2,
    N_TIERS = 4,
    /* sizes: modest, the test also runs under valgrind and qemu */
    PE_POS = 12, D = 40,                      /* pe_table, pe_add, embed  */
    PA_B = 2, PA_S = 7,                       /* pe_add x: [2, 7, D]      */
    EM_V = 9, EM_T = 11,                      /* embedding: vocab, tokens */
    SM_B = 2, SM_H = 2, SM_Q = 5, SM_K = 37,  /* softmax scores           */
    EX_N = 101,                               /* exp                      */
    AT_H = 2, AT_Q = 9, AT_K = 70, AT_D = 16, /* attention, one batch     */
    LN_R = 5, LN_D = 67,                      /* LayerNorm                */
    RO_L = 6, RO_H = 3, RO_D = 20, RO_R = 16  /* RoPE: x [1, 6, 3, 20]    */
};

/* Every output of one run of every family; in/out operands (pe_add's x)
   start from the inputs below. */
typedef struct outputs {
    float pe[PE_POS * D];
    float pe_add[PA_B * PA_S * D];
    float embed[EM_T * D];
    float softmax[SM_B * SM_H * SM_Q * SM_K];
    float exp[EX_N];
    float attention[AT_Q * AT_H * AT_D];
    float lse[AT_H * AT_Q];
    float layernorm_y[LN_R * LN_D];
    float layernorm_sum[LN_R * LN_D];
    float rope_cache[RO_L * RO_R];
    float rope[RO_L * RO_H * RO_D];
} outputs;

/* One thread's inputs, made before the barrier without calling peak. */
typedef struct inputs {
    size_t pos0;
    peak_pe_params prm;
    float x_pe_add[PA_B * PA_S * D];
    float table[EM_V * D];
    int32_t ids[EM_T];
    float scores[SM_B * SM_H * SM_Q * SM_K];
    int32_t key_len[SM_B];
    float ex[EX_N];
    float q[AT_Q * AT_H * AT_D], k[AT_K * AT_D], v[AT_K * AT_D];
    float layernorm_x[LN_R * LN_D], layernorm_r[LN_R * LN_D], gamma[LN_D], beta[LN_D];
    float rope_x[RO_L * RO_H * RO_D];
} inputs;

typedef struct job {
    size_t id;
    inputs in;
    outputs api[ROUNDS];   /* public API, automatic tier        */
    outputs tier[N_TIERS]; /* internal table, each usable tier  */
    int tier_ok[N_TIERS];
    int failed;            /* a call that returned an error      */
} job;

static void make_inputs(inputs *in, size_t id)
{
    uint64_t rng = 0x7e57ull * (id + 1);
    in->pos0 = 100 * id;
    in->prm = (peak_pe_params){(peak_pe_layout)(id % 3), (peak_pe_mode)(id / 3 % 2), 10000.0};
    peak_test_fill_uniform(in->x_pe_add, PA_B * PA_S * D, &rng, -1.0f, 1.0f);
    peak_test_fill_uniform(in->table, EM_V * D, &rng, -1.0f, 1.0f);
    for (size_t t = 0; t < EM_T; t++)
        in->ids[t] = (int32_t)(peak_test_next(&rng) % EM_V);
    peak_test_fill_uniform(in->scores, SM_B * SM_H * SM_Q * SM_K, &rng, -8.0f, 8.0f);
    in->key_len[0] = (int32_t)(peak_test_next(&rng) % (SM_K + 1));
    in->key_len[1] = SM_K;
    peak_test_fill_uniform(in->ex, EX_N, &rng, -100.0f, 90.0f);
    peak_test_fill_uniform(in->q, AT_Q * AT_H * AT_D, &rng, -1.0f, 1.0f);
    peak_test_fill_uniform(in->k, AT_K * AT_D, &rng, -1.0f, 1.0f);
    peak_test_fill_uniform(in->v, AT_K * AT_D, &rng, -2.0f, 2.0f);
    peak_test_fill_uniform(in->layernorm_x, LN_R * LN_D, &rng, -3.0f, 3.0f);
    peak_test_fill_uniform(in->layernorm_r, LN_R * LN_D, &rng, -1.0f, 1.0f);
    peak_test_fill_uniform(in->gamma, LN_D, &rng, 0.5f, 1.5f);
    peak_test_fill_uniform(in->beta, LN_D, &rng, -0.5f, 0.5f);
    peak_test_fill_uniform(in->rope_x, RO_L * RO_H * RO_D, &rng, -1.0f, 1.0f);
}

/* Descriptors, with the defaults already resolved (the internal kernels
   take them so). */
static peak_embed_desc embed_desc(const inputs *in)
{
    peak_embed_desc d = PEAK_EMBED_DESC_DEFAULT;
    d.table = in->table, d.vocab = EM_V, d.ld_table = D, d.d_model = D;
    d.scale = 6.5f, d.pe_params = in->prm, d.pos0 = in->pos0, d.seq_len = 4;
    return d;
}

static peak_softmax_desc softmax_desc(const inputs *in)
{
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = SM_B, d.heads = SM_H, d.q_len = SM_Q, d.k_len = SM_K;
    const ptrdiff_t st[3] = {SM_H * SM_Q * SM_K, SM_Q * SM_K, SM_K};
    memcpy(d.x_stride, st, sizeof st);
    memcpy(d.y_stride, st, sizeof st);
    d.scale = 0.5f;
    d.mask.causal = 1;
    d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    d.mask.key_len = in->key_len;
    return d;
}

/* [B=1, L, H, D] packed Q and O, one shared KV head (MQA). */
static peak_attention_desc attention_desc(float *lse)
{
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1, d.heads = AT_H, d.kv_heads = 1, d.q_len = AT_Q, d.kv_len = AT_K;
    d.head_dim = AT_D, d.v_head_dim = AT_D, d.scale = 0.25f;
    const ptrdiff_t qs[3] = {AT_Q * AT_H * AT_D, AT_H * AT_D, AT_D};
    const ptrdiff_t ks[3] = {AT_K * AT_D, AT_D, AT_D};
    memcpy(d.q_stride, qs, sizeof qs);
    memcpy(d.o_stride, qs, sizeof qs);
    memcpy(d.k_stride, ks, sizeof ks);
    memcpy(d.v_stride, ks, sizeof ks);
    d.mask.causal = 1;
    d.mask.window = 30;
    d.mask.q_offset = AT_K - AT_Q;
    d.lse = lse;
    const ptrdiff_t ls[3] = {AT_H * AT_Q, AT_Q, 1};
    memcpy(d.lse_stride, ls, sizeof ls);
    return d;
}

/* YaRN RoPE of [1, RO_L, RO_H, RO_D] packed, partial, on the fly, from
   position pos0; each thread's own mode. */
static peak_rope_desc rope_desc(const inputs *in)
{
    peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
    d.batch = 1, d.seq_len = RO_L, d.heads = RO_H, d.head_dim = RO_D;
    const ptrdiff_t st[3] = {RO_L * RO_H * RO_D, RO_H * RO_D, RO_D};
    memcpy(d.x_stride, st, sizeof st);
    memcpy(d.y_stride, st, sizeof st);
    d.pairing = (peak_rope_pairing)(in->pos0 / 100 % 2);
    d.params.rotary_dim = RO_R;
    d.params.mode = (peak_rope_mode)(in->pos0 / 200 % 2);
    d.params.scaling = PEAK_ROPE_YARN;
    d.params.factor = 4.0;
    d.params.original_max_position = 512;
    d.pos0 = in->pos0;
    return d;
}

/* Aligned to 64 bytes for the attention workspace. */
static void *workspace(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        abort();
    return p;
}

/* Every family through the public API.  `first` picks the entry point of
   the very first call (the others follow in a fixed order). */
static int run_api(const inputs *in, outputs *out, size_t first)
{
    int bad = 0;
    for (size_t step = 0; step < 9; step++) {
        switch ((first + step) % 9) {
        case 0:
            bad |= peak_pe_table(out->pe, PEAK_F32, PE_POS, D, in->pos0, &in->prm, NULL) != PEAK_OK;
            break;
        case 1:
            memcpy(out->pe_add, in->x_pe_add, sizeof out->pe_add);
            bad |= peak_pe_add(out->pe_add, PA_S * D, D, PA_B, PA_S, D, in->pos0, NULL, 0,
                               &in->prm, NULL) != PEAK_OK;
            break;
        case 2: {
            peak_embed_desc d = embed_desc(in);
            bad |= peak_embed_pe(out->embed, D, in->ids, EM_T, &d, NULL) != PEAK_OK;
            break;
        }
        case 3: {
            peak_softmax_desc d = softmax_desc(in);
            bad |= peak_softmax(out->softmax, in->scores, &d, NULL) != PEAK_OK;
            break;
        }
        case 4:
            bad |= peak_exp(out->exp, in->ex, EX_N, NULL) != PEAK_OK;
            break;
        case 5: {
            /* once with the library's own workspace, once with ours */
            peak_attention_desc d = attention_desc(out->lse);
            size_t bytes = 0;
            bad |= peak_attention(out->attention, in->q, in->k, in->v, &d, NULL, 0, NULL) !=
                   PEAK_OK;
            bad |= peak_attention_workspace_size(&d, NULL, &bytes) != PEAK_OK;
            void *ws = workspace(bytes);
            bad |= peak_attention(out->attention, in->q, in->k, in->v, &d, ws, bytes, NULL) !=
                   PEAK_OK;
            free(ws);
            break;
        }
        case 6:
            bad |= peak_add_layernorm(out->layernorm_y, LN_D, out->layernorm_sum, LN_D,
                                      in->layernorm_x, LN_D, in->layernorm_r, LN_D, in->gamma,
                                      in->beta, LN_R, LN_D, 1e-5f, NULL, NULL) != PEAK_OK;
            break;
        case 8: {
            peak_rope_desc d = rope_desc(in);
            bad |= peak_rope_cache(out->rope_cache, PEAK_F32, RO_L, in->pos0, &d.params, NULL) !=
                   PEAK_OK;
            bad |= peak_rope_apply(out->rope, in->rope_x, &d, NULL) != PEAK_OK;
            break;
        }
        case 7:
            /* the dispatch queries, which also initialise on first use */
            bad |= !peak_isa_supported(peak_isa_active());
            bad |= peak_isa_reason() == NULL;
            break;
        }
    }
    return bad;
}

/* Every family straight through one tier's row of the table. */
static void run_tier(const peak_kernels *kern, const inputs *in, outputs *out)
{
    kern->pe_table(out->pe, D, PE_POS, D, in->pos0, &in->prm, 0, PEAK_PE_FREQ_END, false);
    memcpy(out->pe_add, in->x_pe_add, sizeof out->pe_add);
    kern->pe_add(out->pe_add, PA_S * D, D, PA_B, PA_S, D, in->pos0, NULL, &in->prm, 0,
                 PEAK_PE_FREQ_END);
    peak_embed_desc ed = embed_desc(in);
    int64_t pos[EM_T];
    for (size_t t = 0; t < EM_T; t++)
        pos[t] = (int64_t)(in->pos0 + t % 4);
    kern->embed_pe(out->embed, D, in->ids, pos, EM_T, 1, 0, &ed, false);
    peak_softmax_desc sd = softmax_desc(in);
    kern->softmax(out->softmax, in->scores, &sd, 0, sd.batch * sd.heads * sd.q_len, false);
    kern->exp(out->exp, in->ex, EX_N);
    peak_attention_desc ad = attention_desc(out->lse);
    void *ws = workspace(peak_schedule_attention_workspace(kern, &ad, 1));
    peak_schedule_attention(kern, out->attention, in->q, in->k, in->v, &ad, ws, 1, NULL);
    free(ws);
    kern->add_layernorm(out->layernorm_y, LN_D, out->layernorm_sum, LN_D, in->layernorm_x, LN_D,
                        in->layernorm_r, LN_D, in->gamma, in->beta, LN_R, LN_D, 1e-5f, PEAK_F32, 0,
                        false);
    peak_rope_desc rd = rope_desc(in);
    peak_rope_freqs f;
    peak_rope_freqs_init(&f, &rd.params);
    kern->rope_cache(out->rope_cache, RO_R, RO_L, in->pos0, NULL, &f);
    kern->rope_apply(out->rope, in->rope_x, &rd, &f, 0, 0, RO_L, false);
}

static pthread_barrier_t barrier;

static void *worker(void *arg)
{
    job *j = arg;
    pthread_barrier_wait(&barrier);
    for (size_t r = 0; r < ROUNDS; r++)
        j->failed |= run_api(&j->in, &j->api[r], j->id + r);
    for (int t = 0; t < N_TIERS; t++) {
        j->tier_ok[t] = peak_isa_supported((peak_isa)t);
        if (j->tier_ok[t])
            run_tier(peak_kernels_for((peak_isa)t), &j->in, &j->tier[t]);
    }
    return NULL;
}

static void expect_same(const outputs *want, const outputs *got, size_t id, const char *what)
{
    static const struct {
        const char *name;
        size_t off, size;
    } field[] = {
        {"pe_table", offsetof(outputs, pe), sizeof(((outputs *)0)->pe)},
        {"pe_add", offsetof(outputs, pe_add), sizeof(((outputs *)0)->pe_add)},
        {"embed_pe", offsetof(outputs, embed), sizeof(((outputs *)0)->embed)},
        {"softmax", offsetof(outputs, softmax), sizeof(((outputs *)0)->softmax)},
        {"exp", offsetof(outputs, exp), sizeof(((outputs *)0)->exp)},
        {"attention", offsetof(outputs, attention), sizeof(((outputs *)0)->attention)},
        {"attention lse", offsetof(outputs, lse), sizeof(((outputs *)0)->lse)},
        {"add_layernorm y", offsetof(outputs, layernorm_y), sizeof(((outputs *)0)->layernorm_y)},
        {"add_layernorm sum", offsetof(outputs, layernorm_sum),
         sizeof(((outputs *)0)->layernorm_sum)},
        {"rope_cache", offsetof(outputs, rope_cache), sizeof(((outputs *)0)->rope_cache)},
        {"rope_apply", offsetof(outputs, rope), sizeof(((outputs *)0)->rope)},
    };
    for (size_t f = 0; f < sizeof field / sizeof field[0]; f++)
        ck_assert_msg(peak_test_bytes_equal((const char *)want + field[f].off,
                                            (const char *)got + field[f].off, field[f].size),
                      "thread %zu, %s: %s differs from the single-threaded result", id, what,
                      field[f].name);
}

START_TEST(first_calls_race_then_kernels_run_concurrently)
{
    job *jobs = calloc(N_THREADS, sizeof *jobs);
    pthread_t th[N_THREADS];
    ck_assert_ptr_nonnull(jobs);
    for (size_t i = 0; i < N_THREADS; i++) {
        jobs[i].id = i;
        make_inputs(&jobs[i].in, i);
    }
    ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, N_THREADS), 0);
    for (size_t i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker, &jobs[i]), 0);
    for (size_t i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    pthread_barrier_destroy(&barrier);

    /* The same work, alone in the main thread. */
    outputs *want = calloc(1, sizeof *want);
    ck_assert_ptr_nonnull(want);
    size_t tiers_run = 0;
    for (size_t i = 0; i < N_THREADS; i++) {
        const job *j = &jobs[i];
        ck_assert_msg(!j->failed, "thread %zu: a call returned an error", i);
        memset(want, 0, sizeof *want);
        ck_assert_int_eq(run_api(&j->in, want, 0), 0);
        for (size_t r = 0; r < ROUNDS; r++)
            expect_same(want, &j->api[r], i, peak_isa_name(peak_isa_active()));
        for (int t = 0; t < N_TIERS; t++) {
            ck_assert_int_eq(j->tier_ok[t], peak_isa_supported((peak_isa)t));
            if (!j->tier_ok[t])
                continue;
            memset(want, 0, sizeof *want);
            run_tier(peak_kernels_for((peak_isa)t), &j->in, want);
            expect_same(want, &j->tier[t], i, peak_isa_name((peak_isa)t));
            tiers_run += i == 0;
        }
    }
    printf("%d threads, first calls through 9 entry points; every family on the automatic "
           "tier (%s) and on %zu tiers directly: all equal to the single-threaded bytes\n",
           N_THREADS, peak_isa_name(peak_isa_active()), tiers_run);
    free(want);
    free(jobs);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, first_calls_race_then_kernels_run_concurrently);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int run = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return run == 0 ? 99 : failed ? 1 : 0;
}
