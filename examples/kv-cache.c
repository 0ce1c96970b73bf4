/*
 * kv-cache.c - autoregressive decoding with a KV cache, step by step.
 *
 * A decoder generates one token at a time.  Each new token's key and value
 * are appended to a cache, and its query attends to every cached position.
 * peak_attention reads the cache in place through strides: the cache is
 * allocated once for MAX_LEN positions and only kv_len grows.
 *
 *   1. prefill: the 5-token prompt attends to itself, causally;
 *   2. three single-token steps (q_len 1, kv_len 6, 7, 8);
 *   3. one 2-token chunk (speculative or chunked decoding), where the causal
 *      mask matters again: mask.q_offset says how many cached positions
 *      precede the chunk's first query.
 *
 * Grouped-query attention: 4 query heads share 2 K/V heads (kv_heads), which
 * halves the cache.  At the end every step's output is compared with one
 * causal attention over the whole sequence: they must agree.
 *
 * Build: cc kv-cache.c $(pkg-config --cflags --libs peak) -lm
 */
#include <math.h>
#include <peak.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    HEADS = 4,     /* query heads */
    KV_HEADS = 2,  /* K/V heads: each serves HEADS / KV_HEADS query heads */
    DH = 16,       /* head_dim */
    MAX_LEN = 64,  /* cache capacity (positions) */
    PROMPT = 5,
    TOTAL = 10     /* prompt + 3 single steps + one chunk of 2 */
};

/* Stand-in for the model's Q/K/V projections of token `pos`: any
   deterministic numbers in [-1, 1]. */
static float feature(int which, int pos, int head, int d)
{
    return (float)sin(1.7 * which + 0.37 * pos + 1.3 * head + 0.71 * d + 0.013 * pos * d);
}

/* Row-major tensors [L, H, D] (batch 1): position l, head h at (l*H + h)*D. */
static float q_all[TOTAL][HEADS][DH];       /* queries of every position (for the check) */
static float k_cache[MAX_LEN][KV_HEADS][DH]; /* the caches: filled as decoding goes */
static float v_cache[MAX_LEN][KV_HEADS][DH];
static float out_steps[TOTAL][HEADS][DH];   /* what the steps produced, per position */
static float out_full[TOTAL][HEADS][DH];    /* the one-shot reference */

/* The descriptor for queries at positions [pos, pos + n) over cache rows
   [0, pos + n). */
static peak_attention_desc step_desc(size_t pos, size_t n)
{
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT; /* always start from the default */
    d.batch = 1;
    d.heads = HEADS;
    d.kv_heads = KV_HEADS;
    d.q_len = n;
    d.kv_len = pos + n; /* every cached position, including the new ones */
    d.head_dim = DH;    /* v_head_dim 0: the same; scale 0: 1/sqrt(DH) */
    /* Strides for [b, l, h] in elements; d is contiguous.  The caches keep
       their MAX_LEN capacity in the batch stride, so nothing is copied. */
    const ptrdiff_t qo[3] = {TOTAL * HEADS * DH, HEADS * DH, DH};
    const ptrdiff_t kv[3] = {MAX_LEN * KV_HEADS * DH, KV_HEADS * DH, DH};
    memcpy(d.q_stride, qo, sizeof qo);
    memcpy(d.o_stride, qo, sizeof qo);
    memcpy(d.k_stride, kv, sizeof kv);
    memcpy(d.v_stride, kv, sizeof kv);
    d.mask.causal = 1;     /* query i sees keys j <= i + q_offset */
    d.mask.q_offset = pos; /* the new queries come after pos cached positions */
    return d;
}

static int attend(float *out, const float *q, size_t pos, size_t n, void *ws, size_t ws_size)
{
    peak_attention_desc d = step_desc(pos, n);
    peak_status s =
        peak_attention(out, q, &k_cache[0][0][0], &v_cache[0][0][0], &d, ws, ws_size, NULL);
    if (s != PEAK_OK)
        fprintf(stderr, "peak_attention(pos %zu, n %zu): %s\n", pos, n, peak_status_string(s));
    return s == PEAK_OK;
}

int main(void)
{
    /* Scratch memory: sized for the largest call of this run (it grows with
       kv_len, and on the SIMD tiers with the query rows per kv head; query
       it after any peak_isa_force), 64-byte aligned, reused by every step. */
    peak_attention_desc largest = step_desc(0, TOTAL);
    size_t ws_size;
    if (peak_attention_workspace_size(&largest, NULL, &ws_size) != PEAK_OK)
        return 1;
    ws_size = (ws_size + 63) / 64 * 64;
    void *ws = aligned_alloc(64, ws_size);
    if (!ws)
        return 1;

    const size_t steps[][2] = {{0, PROMPT}, {5, 1}, {6, 1}, {7, 1}, {8, 2}}; /* {pos, n} */
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        size_t pos = steps[s][0], n = steps[s][1];
        for (size_t t = pos; t < pos + n; t++) { /* "run the model" on the new tokens */
            for (int h = 0; h < HEADS; h++)
                for (int d = 0; d < DH; d++)
                    q_all[t][h][d] = feature(0, (int)t, h, d);
            for (int h = 0; h < KV_HEADS; h++)
                for (int d = 0; d < DH; d++) { /* append to the cache */
                    k_cache[t][h][d] = feature(1, (int)t, h, d);
                    v_cache[t][h][d] = feature(2, (int)t, h, d);
                }
        }
        if (!attend(&out_steps[pos][0][0], &q_all[pos][0][0], pos, n, ws, ws_size))
            return 1;
        printf("step %zu: %zu quer%s at position %zu.. over %zu cached keys, head 0: %+.5f %+.5f ...\n",
               s, n, n == 1 ? "y" : "ies", pos, pos + n, out_steps[pos][0][0], out_steps[pos][0][1]);
    }

    /* The reference: all TOTAL queries at once, plain causal attention. */
    if (!attend(&out_full[0][0][0], &q_all[0][0][0], 0, TOTAL, ws, ws_size))
        return 1;
    float worst = 0;
    for (int t = 0; t < TOTAL; t++)
        for (int h = 0; h < HEADS; h++)
            for (int d = 0; d < DH; d++) {
                float diff = fabsf(out_steps[t][h][d] - out_full[t][h][d]);
                worst = diff > worst ? diff : worst;
            }
    printf("decoded %d positions on %s; max |step-by-step - one-shot| = %.2e\n", TOTAL,
           peak_isa_name(peak_isa_active()), worst);
    free(ws);
    return worst <= 1e-5 ? 0 : 1; /* |V| <= 1; both are within ~5e-6 of exact */
}
