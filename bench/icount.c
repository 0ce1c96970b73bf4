/*
 * icount.c - peak_icount: a fixed set of kernel calls, each one a named
 * region whose instructions callgrind counts (scripts/icount.sh, which
 * compares the counts with bench/icount-baseline.txt).
 *
 * Wall-clock timings on CI's shared 2-core machines are noise; the number
 * of instructions a call executes is not: the same binary on the same
 * inputs executes the same instructions.  So every call below has fixed
 * shapes and deterministic inputs (an LCG, no clock, no address-dependent
 * data: every buffer is 64-byte aligned), and runs on one thread (pool
 * NULL) on the tier named on the command line (peak_isa_force).
 *
 * Usage: peak_icount scalar|avx2|avx512|neon [NAME-PREFIX...]
 *        peak_icount --list
 * With prefixes, only the regions whose name starts with one of them run.
 *
 * Under callgrind (valgrind --tool=callgrind --instr-atstart=no), each
 * region is
 *     call once uncounted   (warm-up: dispatch init, lazy symbol binding,
 *                            first-touch page faults of its buffers)
 *     CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION
 *     call                  (counted)
 *     CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(name)
 * so each dump holds exactly one call (plus the few instructions of the
 * client requests around it, the same every time), and the setup (input
 * generation, tables made with peak itself, workspace sizing) is never
 * counted.  Natively the client requests are a few no-op instructions: the
 * program then just runs every region twice and prints a checksum of its
 * output, a smoke test that each call succeeds.
 *
 * Regions (name: what), every one on the given tier:
 *   pe_table/...          the PyTorch tutorial module's table, 5000 x 512
 *   softmax/...           BERT-base attention probabilities: batch 1,
 *                         12 heads, 128 x 128, scale 1/8
 *   attention/prefill/... L 512, H 8, Dh 64, [B, L, H, D], causal and not
 *   attention/decode/...  Lq 1, Lk 2048, GQA 32 query / 8 kv heads, Dh 128
 *   layernorm/...         residual + LayerNorm, 512 x 768 (BERT-base width)
 *   embed_pe/...          2 x 50 tokens of 512: gather + scale + PE, from a
 *                         PE table and on the fly
 *   pe_add/...            x += PE of the same batch (the module's forward)
 *   rope_cache/...        cos/sin cache, 2048 positions x 128
 *   rope_apply/...        128 tokens x 32 heads x 128, from the cache and
 *                         on the fly
 *   exp/..., convert/...  65536 elements; convert float32 -> bfloat16
 * A region may be added; renaming or changing one changes its count, so
 * bench/icount-baseline.txt must be remade with it (scripts/icount.sh
 * --update).
 */
#include "peak.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <valgrind/callgrind.h>

/* ---- deterministic inputs ------------------------------------------------ */

static uint64_t lcg_state;

static uint32_t lcg_next(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg_state >> 32);
}

/* n floats uniform in [lo, hi), from its own seed. */
static void fill(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    lcg_state = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t k = 0; k < n; k++)
        x[k] = lo + (hi - lo) * ((float)(lcg_next() >> 8) * 0x1p-24f);
}

static void *alloc_bytes(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "peak_icount: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes); /* first touch here, not in a region */
    return p;
}

static float *alloc_f(size_t n)
{
    return alloc_bytes(n * sizeof(float));
}

/* ---- shapes ---------------------------------------------------------------- */

enum {
    PE_POS = 5000, PE_D = 512,                           /* the tutorial's table */
    SM_H = 12, SM_L = 128,                               /* BERT-base */
    AT_H = 8, AT_L = 512, AT_D = 64,                     /* prefill */
    DE_H = 32, DE_KVH = 8, DE_LK = 2048, DE_D = 128,     /* decode */
    LN_ROWS = 512, LN_D = 768,                           /* LayerNorm */
    EM_B = 2, EM_S = 50, EM_D = 512, EM_VOCAB = 1000,    /* embedding */
    RC_POS = 2048, RC_DIM = 128,                         /* RoPE cache */
    RA_L = 128, RA_H = 32, RA_D = 128,                   /* RoPE apply */
    EX_N = 65536                                         /* exp, convert */
};

/* Every buffer, made once before the first region. */
static struct {
    float *pe_out;
    float *sm_x, *sm_y;
    float *at_q, *at_k, *at_v, *at_o;
    peak_attention_desc at_desc[2];
    void *at_ws[2];
    size_t at_ws_bytes[2];
    float *de_q, *de_k, *de_v, *de_o;
    peak_attention_desc de_desc;
    void *de_ws;
    size_t de_ws_bytes;
    float *ln_x, *ln_r, *ln_gamma, *ln_beta, *ln_y, *ln_sum;
    float *em_table, *em_pe, *em_out;
    int32_t *em_ids;
    float *pa_x;
    float *rc_cache;
    float *ra_x, *ra_y;
    float *ex_x, *ex_y;
    uint16_t *cv_y;
} g;

static void setup(void)
{
    g.pe_out = alloc_f((size_t)PE_POS * PE_D);

    const size_t sm_n = (size_t)SM_H * SM_L * SM_L;
    g.sm_x = alloc_f(sm_n);
    g.sm_y = alloc_f(sm_n);
    fill(g.sm_x, sm_n, 1, -4.0f, 4.0f);

    const size_t at_n = (size_t)AT_L * AT_H * AT_D;
    g.at_q = alloc_f(at_n);
    g.at_k = alloc_f(at_n);
    g.at_v = alloc_f(at_n);
    g.at_o = alloc_f(at_n);
    fill(g.at_q, at_n, 2, -1.0f, 1.0f);
    fill(g.at_k, at_n, 3, -1.0f, 1.0f);
    fill(g.at_v, at_n, 4, -1.0f, 1.0f);
    for (int c = 0; c < 2; c++) {
        peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
        d.batch = 1;
        d.heads = AT_H;
        d.q_len = d.kv_len = AT_L;
        d.head_dim = AT_D;
        const ptrdiff_t s[3] = {(ptrdiff_t)at_n, AT_H * AT_D, AT_D}; /* [B, L, H, D] */
        memcpy(d.q_stride, s, sizeof s);
        memcpy(d.k_stride, s, sizeof s);
        memcpy(d.v_stride, s, sizeof s);
        memcpy(d.o_stride, s, sizeof s);
        d.mask.causal = c;
        g.at_desc[c] = d;
    }

    const size_t de_q = (size_t)DE_H * DE_D, de_kv = (size_t)DE_LK * DE_KVH * DE_D;
    g.de_q = alloc_f(de_q);
    g.de_o = alloc_f(de_q);
    g.de_k = alloc_f(de_kv);
    g.de_v = alloc_f(de_kv);
    fill(g.de_q, de_q, 5, -1.0f, 1.0f);
    fill(g.de_k, de_kv, 6, -1.0f, 1.0f);
    fill(g.de_v, de_kv, 7, -1.0f, 1.0f);
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1;
    d.heads = DE_H;
    d.kv_heads = DE_KVH;
    d.q_len = 1;
    d.kv_len = DE_LK;
    d.head_dim = DE_D;
    const ptrdiff_t qs[3] = {(ptrdiff_t)de_q, (ptrdiff_t)de_q, DE_D};
    const ptrdiff_t ks[3] = {(ptrdiff_t)de_kv, DE_KVH * DE_D, DE_D};
    memcpy(d.q_stride, qs, sizeof qs);
    memcpy(d.o_stride, qs, sizeof qs);
    memcpy(d.k_stride, ks, sizeof ks);
    memcpy(d.v_stride, ks, sizeof ks);
    d.mask.causal = 1; /* one query row at the end of the cache */
    d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    g.de_desc = d;

    const size_t ln_n = (size_t)LN_ROWS * LN_D;
    g.ln_x = alloc_f(ln_n);
    g.ln_r = alloc_f(ln_n);
    g.ln_y = alloc_f(ln_n);
    g.ln_sum = alloc_f(ln_n);
    g.ln_gamma = alloc_f(LN_D);
    g.ln_beta = alloc_f(LN_D);
    fill(g.ln_x, ln_n, 8, -2.0f, 3.0f);
    fill(g.ln_r, ln_n, 9, -1.0f, 1.0f);
    fill(g.ln_gamma, LN_D, 10, 0.5f, 1.5f);
    fill(g.ln_beta, LN_D, 11, -0.5f, 0.5f);

    g.em_table = alloc_f((size_t)EM_VOCAB * EM_D);
    fill(g.em_table, (size_t)EM_VOCAB * EM_D, 12, -0.1f, 0.1f);
    g.em_pe = alloc_f((size_t)EM_S * EM_D);
    g.em_out = alloc_f((size_t)EM_B * EM_S * EM_D);
    g.em_ids = alloc_bytes((size_t)EM_B * EM_S * sizeof(int32_t));
    lcg_state = 13;
    for (size_t t = 0; t < (size_t)EM_B * EM_S; t++)
        g.em_ids[t] = (int32_t)(lcg_next() % EM_VOCAB);
    g.pa_x = alloc_f((size_t)EM_B * EM_S * EM_D);
    fill(g.pa_x, (size_t)EM_B * EM_S * EM_D, 14, -0.1f, 0.1f);

    g.rc_cache = alloc_f((size_t)RC_POS * RC_DIM);
    const size_t ra_n = (size_t)RA_L * RA_H * RA_D;
    g.ra_x = alloc_f(ra_n);
    g.ra_y = alloc_f(ra_n);
    fill(g.ra_x, ra_n, 15, -1.0f, 1.0f);

    g.ex_x = alloc_f(EX_N);
    g.ex_y = alloc_f(EX_N);
    fill(g.ex_x, EX_N, 16, -87.0f, 88.0f);
    g.cv_y = alloc_bytes(EX_N * sizeof(uint16_t));
}

/* Tables the regions read, made with peak itself (uncounted) once the tier
   is set, and workspaces, whose size depends on the tier. */
static int setup_tier(void)
{
    if (peak_pe_table(g.em_pe, PEAK_F32, EM_S, EM_D, 0, NULL, NULL) != PEAK_OK)
        return 0;
    peak_rope_params rp = PEAK_ROPE_PARAMS_DEFAULT;
    rp.rotary_dim = RC_DIM;
    if (peak_rope_cache(g.rc_cache, PEAK_F32, RC_POS, 0, &rp, NULL) != PEAK_OK)
        return 0;
    for (int c = 0; c < 2; c++) {
        if (peak_attention_workspace_size(&g.at_desc[c], NULL, &g.at_ws_bytes[c]) != PEAK_OK)
            return 0;
        g.at_ws[c] = alloc_bytes(g.at_ws_bytes[c] ? g.at_ws_bytes[c] : 64);
    }
    if (peak_attention_workspace_size(&g.de_desc, NULL, &g.de_ws_bytes) != PEAK_OK)
        return 0;
    g.de_ws = alloc_bytes(g.de_ws_bytes ? g.de_ws_bytes : 64);
    return 1;
}

/* ---- regions ----------------------------------------------------------------- */

static peak_status r_pe_table(void)
{
    return peak_pe_table(g.pe_out, PEAK_F32, PE_POS, PE_D, 0, NULL, NULL);
}

static peak_status r_softmax(void)
{
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = 1;
    d.heads = SM_H;
    d.q_len = d.k_len = SM_L;
    d.x_stride[0] = d.y_stride[0] = (ptrdiff_t)SM_H * SM_L * SM_L;
    d.x_stride[1] = d.y_stride[1] = (ptrdiff_t)SM_L * SM_L;
    d.x_stride[2] = d.y_stride[2] = SM_L;
    d.scale = 0.125f; /* 1/sqrt(64) */
    return peak_softmax(g.sm_y, g.sm_x, &d, NULL);
}

static peak_status r_attention(int causal)
{
    return peak_attention(g.at_o, g.at_q, g.at_k, g.at_v, &g.at_desc[causal], g.at_ws[causal],
                          g.at_ws_bytes[causal], NULL);
}
static peak_status r_attention_full(void) { return r_attention(0); }
static peak_status r_attention_causal(void) { return r_attention(1); }

static peak_status r_decode(void)
{
    return peak_attention(g.de_o, g.de_q, g.de_k, g.de_v, &g.de_desc, g.de_ws, g.de_ws_bytes,
                          NULL);
}

static peak_status r_layernorm(void)
{
    return peak_add_layernorm(g.ln_y, LN_D, g.ln_sum, LN_D, g.ln_x, LN_D, g.ln_r, LN_D,
                              g.ln_gamma, g.ln_beta, LN_ROWS, LN_D, 1e-5f, NULL, NULL);
}

static peak_status r_embed(int fly)
{
    peak_embed_desc d = PEAK_EMBED_DESC_DEFAULT;
    d.table = g.em_table;
    d.vocab = EM_VOCAB;
    d.ld_table = EM_D;
    d.d_model = EM_D;
    d.scale = sqrtf((float)EM_D);
    d.pe = fly ? NULL : g.em_pe;
    d.pe_rows = fly ? 0 : EM_S;
    d.seq_len = EM_S;
    return peak_embed_pe(g.em_out, EM_D, g.em_ids, (size_t)EM_B * EM_S, &d, NULL);
}
static peak_status r_embed_table(void) { return r_embed(0); }
static peak_status r_embed_fly(void) { return r_embed(1); }

static peak_status r_pe_add(void)
{
    return peak_pe_add(g.pa_x, (ptrdiff_t)EM_S * EM_D, EM_D, EM_B, EM_S, EM_D, 0, g.em_pe, EM_S,
                       NULL, NULL);
}

static peak_status r_rope_cache(void)
{
    peak_rope_params rp = PEAK_ROPE_PARAMS_DEFAULT;
    rp.rotary_dim = RC_DIM;
    return peak_rope_cache(g.rc_cache, PEAK_F32, RC_POS, 0, &rp, NULL);
}

static peak_status r_rope_apply(int fly)
{
    peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
    d.batch = 1;
    d.seq_len = RA_L;
    d.heads = RA_H;
    d.head_dim = RA_D;
    const ptrdiff_t s[3] = {(ptrdiff_t)RA_L * RA_H * RA_D, RA_H * RA_D, RA_D};
    memcpy(d.x_stride, s, sizeof s);
    memcpy(d.y_stride, s, sizeof s);
    d.params.rotary_dim = RA_D;
    d.cache = fly ? NULL : g.rc_cache;
    d.cache_rows = fly ? 0 : RC_POS;
    return peak_rope_apply(g.ra_y, g.ra_x, &d, NULL);
}
static peak_status r_rope_apply_cache(void) { return r_rope_apply(0); }
static peak_status r_rope_apply_fly(void) { return r_rope_apply(1); }

static peak_status r_exp(void)
{
    return peak_exp(g.ex_y, g.ex_x, EX_N, NULL);
}

static peak_status r_convert(void)
{
    return peak_convert(g.cv_y, PEAK_BF16, g.ex_x, PEAK_F32, EX_N, NULL);
}

static const struct region {
    const char *name;
    peak_status (*call)(void);
} regions[] = {
    {"pe_table/f32/5000x512", r_pe_table},
    {"softmax/bert-base/12x128x128", r_softmax},
    {"attention/prefill/H8/L512/Dh64/causal:0", r_attention_full},
    {"attention/prefill/H8/L512/Dh64/causal:1", r_attention_causal},
    {"attention/decode/H32:8/Lk2048/Dh128", r_decode},
    {"layernorm/residual/512x768", r_layernorm},
    {"embed_pe/table/2x50x512", r_embed_table},
    {"embed_pe/fly/2x50x512", r_embed_fly},
    {"pe_add/table/2x50x512", r_pe_add},
    {"rope_cache/f32/2048x128", r_rope_cache},
    {"rope_apply/cache/128x32x128", r_rope_apply_cache},
    {"rope_apply/fly/128x32x128", r_rope_apply_fly},
    {"exp/65536", r_exp},
    {"convert/f32-bf16/65536", r_convert},
};

/* Region r's output (checksummed natively) and its size in bytes. */
static const void *region_output(size_t r, size_t *bytes)
{
    const struct {
        const void *p;
        size_t n;
    } o[] = {
        {g.pe_out, (size_t)PE_POS * PE_D * 4},
        {g.sm_y, (size_t)SM_H * SM_L * SM_L * 4},
        {g.at_o, (size_t)AT_L * AT_H * AT_D * 4},
        {g.at_o, (size_t)AT_L * AT_H * AT_D * 4},
        {g.de_o, (size_t)DE_H * DE_D * 4},
        {g.ln_y, (size_t)LN_ROWS * LN_D * 4},
        {g.em_out, (size_t)EM_B * EM_S * EM_D * 4},
        {g.em_out, (size_t)EM_B * EM_S * EM_D * 4},
        {g.pa_x, (size_t)EM_B * EM_S * EM_D * 4},
        {g.rc_cache, (size_t)RC_POS * RC_DIM * 4},
        {g.ra_y, (size_t)RA_L * RA_H * RA_D * 4},
        {g.ra_y, (size_t)RA_L * RA_H * RA_D * 4},
        {g.ex_y, (size_t)EX_N * 4},
        {g.cv_y, (size_t)EX_N * 2},
    };
    _Static_assert(sizeof o / sizeof o[0] == sizeof regions / sizeof regions[0],
                   "one output per region");
    *bytes = o[r].n;
    return o[r].p;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ b[k]) * 0x100000001b3ull;
    return h;
}

static int selected(const char *name, int argc, char **argv)
{
    if (argc <= 2)
        return 1;
    for (int a = 2; a < argc; a++)
        if (strncmp(name, argv[a], strlen(argv[a])) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const size_t n_regions = sizeof regions / sizeof regions[0];
    if (argc >= 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t r = 0; r < n_regions; r++)
            printf("%s\n", regions[r].name);
        return 0;
    }
    static const char *const tiers[] = {"scalar", "avx2", "avx512", "neon"};
    static const peak_isa isas[] = {PEAK_ISA_SCALAR, PEAK_ISA_AVX2, PEAK_ISA_AVX512,
                                    PEAK_ISA_NEON};
    int tier = -1;
    for (int t = 0; argc >= 2 && t < 4; t++)
        if (strcmp(argv[1], tiers[t]) == 0)
            tier = t;
    if (tier < 0) {
        fprintf(stderr, "usage: peak_icount scalar|avx2|avx512|neon [NAME-PREFIX...]\n"
                        "       peak_icount --list\n");
        return 2;
    }
    if (peak_isa_force(isas[tier]) != PEAK_OK) {
        fprintf(stderr, "peak_icount: tier %s is not usable here (%s)\n", tiers[tier],
                peak_isa_reason());
        return 77;
    }
    setup();
    if (!setup_tier()) {
        fprintf(stderr, "peak_icount: setup failed on tier %s\n", tiers[tier]);
        return 1;
    }
    int failed = 0;
    for (size_t r = 0; r < n_regions; r++) {
        const struct region *rg = &regions[r];
        if (!selected(rg->name, argc, argv))
            continue;
        peak_status st = rg->call(); /* warm-up, uncounted */
        if (st == PEAK_OK) {
            CALLGRIND_ZERO_STATS;
            CALLGRIND_START_INSTRUMENTATION;
            st = rg->call();
            CALLGRIND_STOP_INSTRUMENTATION;
            CALLGRIND_DUMP_STATS_AT(rg->name);
        }
        if (st != PEAK_OK) {
            fprintf(stderr, "peak_icount: %s on %s: %s\n", rg->name, tiers[tier],
                    peak_status_string(st));
            failed = 1;
            continue;
        }
        size_t bytes;
        const void *out = region_output(r, &bytes);
        printf("%-44s %-6s %016llx\n", rg->name, tiers[tier],
               (unsigned long long)fnv1a(out, bytes));
    }
    return failed;
}
