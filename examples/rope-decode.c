/*
 * rope-decode.c - a LLaMA-style decoder's attention with rotary position
 * embeddings (RoPE) and a KV cache that stores keys already rotated.
 *
 *   1. peak_rope_cache: the cos/sin table for the model's context, once
 *      (Llama 3.1's frequency scaling, as its config.json states it);
 *   2. each step rotates the new tokens' keys with peak_rope_apply straight
 *      into their KV-cache slots (x and y are different buffers: the
 *      projection's output and the cache);
 *   3. peak_attention rotates the queries itself (peak_attention_rope with
 *      rotate_k = 0: the cached keys are rotated already), causal,
 *      bottom-right aligned, GQA 4:2.
 * A prompt of 6 tokens, then 4 single-token steps.  At the end every
 * step's output is compared with one causal attention over all 10
 * positions whose Q and K were rotated beforehand: they must agree.
 *
 * Build: cc rope-decode.c $(pkg-config --cflags --libs peak) -lm
 */
#include <math.h>
#include <peak.h>
#include <stdio.h>
#include <string.h>

enum { HEADS = 4, KV_HEADS = 2, DH = 32, MAX_LEN = 128, PROMPT = 6, TOTAL = 10 };

/* Stand-in for the model's Q/K/V projections: numbers in [-1, 1]. */
static float feature(int which, int pos, int head, int d)
{
    return (float)sin(1.3 * which + 0.41 * pos + 0.9 * head + 0.57 * d + 0.011 * pos * d);
}

static float cos_sin[MAX_LEN][DH];           /* rotary_dim = head_dim */
static float q_new[TOTAL][HEADS][DH];        /* unrotated queries, as projected */
static float k_new[TOTAL][KV_HEADS][DH];     /* unrotated keys, as projected */
static float k_cache[MAX_LEN][KV_HEADS][DH]; /* rotated keys */
static float v_cache[MAX_LEN][KV_HEADS][DH];
static float out_steps[TOTAL][HEADS][DH];
static float q_rot[TOTAL][HEADS][DH], out_full[TOTAL][HEADS][DH];

static peak_rope_params llama3_rope(void)
{
    peak_rope_params p = PEAK_ROPE_PARAMS_DEFAULT;
    p.rotary_dim = DH;
    p.base = 500000.0;
    p.scaling = PEAK_ROPE_LLAMA3;
    p.factor = 8.0;
    p.low_freq_factor = 1.0;
    p.high_freq_factor = 4.0;
    p.original_max_position = 8192;
    return p;
}

/* peak_rope_apply for n tokens of h heads from positions pos..: x and y
   [n, h, DH] packed. */
static peak_status rotate(float *y, const float *x, int pos, int n, int h)
{
    peak_rope_desc r = PEAK_ROPE_DESC_DEFAULT;
    r.batch = 1;
    r.seq_len = (size_t)n;
    r.heads = (size_t)h;
    r.head_dim = DH;
    const ptrdiff_t st[3] = {n * h * DH, h * DH, DH};
    memcpy(r.x_stride, st, sizeof st);
    memcpy(r.y_stride, st, sizeof st);
    r.params = llama3_rope();
    r.cache = &cos_sin[0][0];
    r.cache_rows = MAX_LEN;
    r.pos0 = (size_t)pos;
    return peak_rope_apply(y, x, &r, NULL);
}

/* Queries [pos, pos + n) against cache rows [0, pos + n). */
static peak_status attend(float *o, const float *q, int pos, int n, const peak_attention_rope *rope)
{
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1;
    d.heads = HEADS;
    d.kv_heads = KV_HEADS;
    d.q_len = (size_t)n;
    d.kv_len = (size_t)(pos + n);
    d.head_dim = DH;
    const ptrdiff_t qs[3] = {n * HEADS * DH, HEADS * DH, DH};
    const ptrdiff_t ks[3] = {MAX_LEN * KV_HEADS * DH, KV_HEADS * DH, DH};
    memcpy(d.q_stride, qs, sizeof qs);
    memcpy(d.o_stride, qs, sizeof qs);
    memcpy(d.k_stride, ks, sizeof ks);
    memcpy(d.v_stride, ks, sizeof ks);
    d.mask.causal = 1;
    d.mask.align = PEAK_ALIGN_BOTTOM_RIGHT;
    d.rope = rope;
    return peak_attention(o, q, &k_cache[0][0][0], &v_cache[0][0][0], &d, NULL, 0, NULL);
}

/* A plain loop, not an fmax reduction: gcc 12's AArch64 vectoriser fails
   on the latter at -O2 (an internal compiler error). */
static double max_difference(const float *a, const float *b, int n)
{
    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - b[i]);
        if (e > worst)
            worst = e;
    }
    return worst;
}

int main(void)
{
    const peak_rope_params rp = llama3_rope();
    peak_status s = peak_rope_cache(&cos_sin[0][0], PEAK_F32, MAX_LEN, 0, &rp, NULL);
    for (int t = 0; t < TOTAL; t++)
        for (int d = 0; d < DH; d++) {
            for (int h = 0; h < HEADS; h++)
                q_new[t][h][d] = feature(0, t, h, d);
            for (int h = 0; h < KV_HEADS; h++) {
                k_new[t][h][d] = feature(1, t, h, d);
                v_cache[t][h][d] = feature(2, t, h, d);
            }
        }

    /* The queries are rotated by the attention call; the keys on their way
       into the cache. */
    peak_attention_rope rope = PEAK_ATTENTION_ROPE_DEFAULT;
    rope.params = rp;
    rope.cache = &cos_sin[0][0];
    rope.cache_rows = MAX_LEN;
    rope.rotate_k = 0;
    for (int pos = 0; pos < TOTAL && s == PEAK_OK; pos += pos ? 1 : PROMPT) {
        const int n = pos ? 1 : PROMPT;
        s = rotate(&k_cache[pos][0][0], &k_new[pos][0][0], pos, n, KV_HEADS);
        rope.q_pos0 = (size_t)pos;
        if (s == PEAK_OK)
            s = attend(&out_steps[pos][0][0], &q_new[pos][0][0], pos, n, &rope);
        printf("positions %d..%d: %s\n", pos, pos + n - 1, peak_status_string(s));
    }
    /* The reference: all 10 queries rotated first, one causal call. */
    if (s == PEAK_OK)
        s = rotate(&q_rot[0][0][0], &q_new[0][0][0], 0, TOTAL, HEADS);
    if (s == PEAK_OK)
        s = attend(&out_full[0][0][0], &q_rot[0][0][0], 0, TOTAL, NULL);
    if (s != PEAK_OK) {
        fprintf(stderr, "rope-decode: %s\n", peak_status_string(s));
        return 1;
    }
    const double worst = max_difference(&out_steps[0][0][0], &out_full[0][0][0], TOTAL * HEADS * DH);
    printf("steps against one causal call: max |difference| %.3g\n", worst);
    return worst <= 1e-5 ? 0 : 1;
}
