/*
 * pool-pthreadpool.c - peak on a pthreadpool_t the caller already has.
 *
 * XNNPACK, PyTorch's mobile builds and others keep their threads in a
 * pthreadpool (github.com/Maratyszcza/pthreadpool).  A program that has
 * one hands it to peak through peak_threadpool_from_pthreadpool(): no
 * second set of threads, and the program keeps owning its pool (destroy it
 * after the last peak call that uses it).
 *
 * Each call is made twice, with the pool and with none (NULL: this thread
 * only), and the outputs compared with memcmp: peak cuts a call into the
 * same pieces whatever the pool, so they must be the same bytes.
 *
 *   1. a causal self-attention, [1, L, H, D] tensors;
 *   2. the residual add + LayerNorm that follows it in a Transformer layer.
 *
 * Build: cc pool-pthreadpool.c $(pkg-config --cflags --libs peak) -lpthreadpool -lm
 */
#include <math.h>
#include <peak.h>
#include <pthreadpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    L = 256,   /* tokens */
    HEADS = 8, /* heads (no grouping: kv_heads = heads) */
    DH = 64,   /* head_dim */
    D = HEADS * DH /* d_model: the width LayerNorm normalises */
};

/* Any deterministic numbers in [-1, 1]. */
static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)cos(0.29 * (double)i + 2.3 * seed);
}

static int same(const char *what, const float *a, const float *b, size_t n)
{
    const int eq = memcmp(a, b, n * sizeof *a) == 0;
    printf("%s: %s with the pool and without\n", what, eq ? "the same bytes" : "DIFFERENT");
    return eq;
}

int main(void)
{
    /* The program's pool: 2 threads (the caller counts as one of them). */
    pthreadpool_t pp = pthreadpool_create(2);
    if (!pp)
        return 1;
    const peak_threadpool pool = peak_threadpool_from_pthreadpool(pp); /* a plain struct */

    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1;
    d.heads = HEADS;
    d.q_len = d.kv_len = L;
    d.head_dim = DH;
    const ptrdiff_t st[3] = {L * D, D, DH}; /* [b, l, h] strides of [1, L, H, DH] */
    memcpy(d.q_stride, st, sizeof st);
    memcpy(d.k_stride, st, sizeof st);
    memcpy(d.v_stride, st, sizeof st);
    memcpy(d.o_stride, st, sizeof st);
    d.mask.causal = 1;

    const size_t n = (size_t)L * D;
    float *q = malloc(n * sizeof *q), *k = malloc(n * sizeof *q), *v = malloc(n * sizeof *q);
    float *x = malloc(n * sizeof *q), *gamma = malloc(D * sizeof *q), *beta = malloc(D * sizeof *q);
    float *attn[2] = {malloc(n * sizeof *q), malloc(n * sizeof *q)}; /* [0] pool, [1] none */
    float *y[2] = {malloc(n * sizeof *q), malloc(n * sizeof *q)};
    int ok = q && k && v && x && gamma && beta && attn[0] && attn[1] && y[0] && y[1];
    if (ok) {
        fill(q, n, 1);
        fill(k, n, 2);
        fill(v, n, 3);
        fill(x, n, 4); /* the layer's input: the residual */
        for (int j = 0; j < D; j++) {
            gamma[j] = 1.0f + 0.25f * (float)sin(j);
            beta[j] = 0.1f * (float)cos(j);
        }
        const peak_threadpool *pools[2] = {&pool, NULL};
        for (int i = 0; i < 2 && ok; i++) {
            /* y = LayerNorm(x + attention(q, k, v)): post-norm, eps 1e-5 */
            peak_status s = peak_attention(attn[i], q, k, v, &d, NULL, 0, pools[i]);
            if (s == PEAK_OK)
                s = peak_add_layernorm(y[i], D, NULL, 0, attn[i], D, x, D, gamma, beta, L, D,
                                       1e-5f, NULL, pools[i]);
            if (s != PEAK_OK) {
                fprintf(stderr, "peak: %s\n", peak_status_string(s));
                ok = 0;
            }
        }
    }
    if (ok) {
        printf("peak %s on %s, a pthreadpool of %zu threads\n", peak_version(),
               peak_isa_name(peak_isa_active()), pthreadpool_get_threads_count(pp));
        ok = same("attention", attn[0], attn[1], n);
        ok = same("residual + LayerNorm", y[0], y[1], n) && ok;
    }
    pthreadpool_destroy(pp); /* after the last call that used it */
    free(q);
    free(k);
    free(v);
    free(x);
    free(gamma);
    free(beta);
    free(attn[0]);
    free(attn[1]);
    free(y[0]);
    free(y[1]);
    return ok ? 0 : 1;
}
