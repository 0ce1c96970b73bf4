#include "demo-layers.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { D = DEMO_D_MODEL, F = DEMO_D_FF };

double demo_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void demo_check_status(peak_status status, const char *what)
{
    if (status == PEAK_OK)
        return;
    fprintf(stderr, "peak-demo: %s failed: %s\n", what, peak_status_string(status));
    exit(2);
}

/* ---- parameters ------------------------------------------------------- */

static demo_mha bind_mha(const demo_weights *w, const char *prefix)
{
    char name[64];
    demo_mha m;
    snprintf(name, sizeof name, "%s.in_proj_weight", prefix);
    m.in_w = demo_weights_get(w, name);
    snprintf(name, sizeof name, "%s.in_proj_bias", prefix);
    m.in_b = demo_weights_get(w, name);
    snprintf(name, sizeof name, "%s.out_proj.weight", prefix);
    m.out_w = demo_weights_get(w, name);
    snprintf(name, sizeof name, "%s.out_proj.bias", prefix);
    m.out_b = demo_weights_get(w, name);
    return m;
}

static demo_ffn bind_ffn(const demo_weights *w, const char *prefix)
{
    char name[64];
    demo_ffn f;
    snprintf(name, sizeof name, "%slinear1.weight", prefix);
    f.w1 = demo_weights_get(w, name);
    snprintf(name, sizeof name, "%slinear1.bias", prefix);
    f.b1 = demo_weights_get(w, name);
    snprintf(name, sizeof name, "%slinear2.weight", prefix);
    f.w2 = demo_weights_get(w, name);
    snprintf(name, sizeof name, "%slinear2.bias", prefix);
    f.b2 = demo_weights_get(w, name);
    return f;
}

static demo_norm bind_norm(const demo_weights *w, const char *prefix)
{
    char name[64];
    demo_norm n;
    snprintf(name, sizeof name, "%s.weight", prefix);
    n.gamma = demo_weights_get(w, name);
    snprintf(name, sizeof name, "%s.bias", prefix);
    n.beta = demo_weights_get(w, name);
    return n;
}

void demo_encoder_bind(demo_encoder_layer *l, const demo_weights *w)
{
    l->self_attention = bind_mha(w, "enc.self_attn");
    l->ffn = bind_ffn(w, "enc.");
    l->norm1 = bind_norm(w, "enc.norm1");
    l->norm2 = bind_norm(w, "enc.norm2");
}

void demo_decoder_bind(demo_decoder_layer *l, const demo_weights *w)
{
    l->self_attention = bind_mha(w, "dec.self_attn");
    l->cross_attention = bind_mha(w, "dec.multihead_attn");
    l->ffn = bind_ffn(w, "dec.");
    l->norm1 = bind_norm(w, "dec.norm1");
    l->norm2 = bind_norm(w, "dec.norm2");
    l->norm3 = bind_norm(w, "dec.norm3");
}

/* ---- scratch ---------------------------------------------------------- */

int demo_scratch_init(demo_scratch *s, size_t max_rows)
{
    memset(s, 0, sizeof *s);
    s->max_rows = max_rows;
    s->qkv = malloc(max_rows * 3 * D * sizeof(float));
    s->q = malloc(max_rows * D * sizeof(float));
    s->attention = malloc(max_rows * D * sizeof(float));
    s->proj = malloc(max_rows * D * sizeof(float));
    s->hidden = malloc(max_rows * F * sizeof(float));
    if (!s->qkv || !s->q || !s->attention || !s->proj || !s->hidden) {
        demo_scratch_free(s);
        return -1;
    }
    return 0;
}

void demo_scratch_free(demo_scratch *s)
{
    free(s->qkv);
    free(s->q);
    free(s->attention);
    free(s->proj);
    free(s->hidden);
    free(s->workspace);
    memset(s, 0, sizeof *s);
}

/* peak_attention wants 64-byte aligned scratch; keeping the largest block
   seen keeps allocation out of the timed calls after the first run. */
static void *workspace_for(demo_scratch *s, const peak_attention_desc *desc)
{
    size_t need = 0;
    demo_check_status(peak_attention_workspace_size(desc, NULL, &need),
                      "peak_attention_workspace_size");
    if (need <= s->workspace_size)
        return s->workspace;
    size_t rounded = (need + 63) / 64 * 64;
    free(s->workspace);
    s->workspace = aligned_alloc(64, rounded);
    if (!s->workspace) {
        fprintf(stderr, "peak-demo: out of memory (attention workspace, %zu bytes)\n", rounded);
        exit(2);
    }
    s->workspace_size = rounded;
    return s->workspace;
}

/* ---- building blocks -------------------------------------------------- */

/* nn.Linear: y[r, :] = x[r, :] W^T + b, W [n, k].  The bias is written first
   and sgemm adds to it (beta = 1), the order torch's addmm uses. */
static void linear(float *y, size_t ldy, const float *x, size_t ldx, const float *w,
                   const float *b, size_t rows, size_t n, size_t k, demo_timing *t)
{
    double t0 = demo_now();
    for (size_t r = 0; r < rows; r++)
        memcpy(y + r * ldy, b, n * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)n, (blasint)k,
                1.0f, x, (blasint)ldx, w, (blasint)k, 1.0f, y, (blasint)ldy);
    t->gemm += demo_now() - t0;
}

static void relu(float *x, size_t n, demo_timing *t)
{
    double t0 = demo_now();
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
    t->relu += demo_now() - t0;
}

/* Strides {b, l, h} of the heads inside a [batch * len, ld] activation
   matrix: head h is the column block [h * head_dim, (h + 1) * head_dim), so
   no transpose to [B, H, L, Dh] is ever made. */
static void head_strides(ptrdiff_t st[3], size_t len, size_t ld)
{
    st[0] = (ptrdiff_t)(len * ld);
    st[1] = (ptrdiff_t)ld;
    st[2] = DEMO_HEAD_DIM;
}

typedef struct attention_operands {
    const float *q, *k, *v;
    size_t ldq, ldkv; /* row strides of Q and of K/V (K and V share a matrix) */
    size_t batch, q_len, kv_len;
    peak_mask mask;
} attention_operands;

/* o: [batch * q_len, D], the heads side by side (what out_proj expects). */
static void attention(float *o, const attention_operands *a, demo_scratch *s, const char *what)
{
    peak_attention_desc desc = PEAK_ATTENTION_DESC_DEFAULT;
    desc.batch = a->batch;
    desc.heads = DEMO_HEADS;
    desc.q_len = a->q_len;
    desc.kv_len = a->kv_len;
    desc.head_dim = DEMO_HEAD_DIM; /* scale 0: 1/sqrt(head_dim), as PyTorch */
    head_strides(desc.q_stride, a->q_len, a->ldq);
    head_strides(desc.k_stride, a->kv_len, a->ldkv);
    head_strides(desc.v_stride, a->kv_len, a->ldkv);
    head_strides(desc.o_stride, a->q_len, D);
    desc.mask = a->mask;
    void *ws = workspace_for(s, &desc);

    double t0 = demo_now();
    peak_status st = peak_attention(o, a->q, a->k, a->v, &desc, ws, s->workspace_size, NULL);
    s->timing.attention += demo_now() - t0;
    demo_check_status(st, what);
}

static void add_norm(float *y, const float *x, const float *r, const demo_norm *n, size_t rows,
                     demo_scratch *s, const char *what)
{
    double t0 = demo_now();
    peak_status st = peak_add_layernorm(y, D, NULL, 0, x, D, r, D, n->gamma, n->beta, rows, D,
                                        DEMO_LN_EPS, NULL, NULL);
    s->timing.add_norm += demo_now() - t0;
    demo_check_status(st, what);
}

/* out = out_proj(Attention(x W_q, x W_k, x W_v)), one GEMM for all of Q/K/V. */
static void self_attention(float *out, const float *x, size_t batch, size_t len, peak_mask mask,
                           const demo_mha *m, demo_scratch *s, const char *what)
{
    size_t rows = batch * len;
    linear(s->qkv, 3 * D, x, D, m->in_w, m->in_b, rows, 3 * D, D, &s->timing);
    attention_operands a = {s->qkv, s->qkv + D, s->qkv + 2 * D, 3 * D, 3 * D, batch, len, len,
                            mask};
    attention(s->attention, &a, s, what);
    linear(out, D, s->attention, D, m->out_w, m->out_b, rows, D, D, &s->timing);
}

/* Queries from y, keys and values from memory: W_k and W_v are the last two
   thirds of in_w, adjacent, so K and V come out of one GEMM. */
static void cross_attention(float *out, const float *y, const float *memory, size_t batch,
                            size_t q_len, size_t kv_len, peak_mask mask, const demo_mha *m,
                            demo_scratch *s, const char *what)
{
    linear(s->q, D, y, D, m->in_w, m->in_b, batch * q_len, D, D, &s->timing);
    linear(s->qkv, 2 * D, memory, D, m->in_w + (size_t)D * D, m->in_b + D, batch * kv_len, 2 * D,
           D, &s->timing);
    attention_operands a = {s->q, s->qkv, s->qkv + D, D, 2 * D, batch, q_len, kv_len, mask};
    attention(s->attention, &a, s, what);
    linear(out, D, s->attention, D, m->out_w, m->out_b, batch * q_len, D, D, &s->timing);
}

static void feed_forward(float *out, const float *x, size_t rows, const demo_ffn *f,
                         demo_scratch *s)
{
    linear(s->hidden, F, x, D, f->w1, f->b1, rows, F, D, &s->timing);
    relu(s->hidden, rows * F, &s->timing);
    linear(out, D, s->hidden, F, f->w2, f->b2, rows, D, F, &s->timing);
}

static void check_rows(const demo_scratch *s, size_t rows)
{
    if (rows > s->max_rows) {
        fprintf(stderr, "peak-demo: internal error: %zu rows, scratch holds %zu\n", rows,
                s->max_rows);
        abort();
    }
}

/* ---- layers ----------------------------------------------------------- */

void demo_encoder_forward(float *out, float *mid1, const float *x, size_t batch, size_t len,
                          const int32_t *key_len, const demo_encoder_layer *l, demo_scratch *s)
{
    size_t rows = batch * len;
    check_rows(s, rows);
    peak_mask padding = PEAK_MASK_DEFAULT;
    padding.key_len = key_len;

    self_attention(s->proj, x, batch, len, padding, &l->self_attention, s,
                   "peak_attention (encoder self-attention)");
    add_norm(mid1, x, s->proj, &l->norm1, rows, s, "peak_add_layernorm (encoder norm1)");
    feed_forward(s->proj, mid1, rows, &l->ffn, s);
    add_norm(out, mid1, s->proj, &l->norm2, rows, s, "peak_add_layernorm (encoder norm2)");
}

void demo_decoder_forward(float *out, float *mid1, float *mid2, const float *y,
                          const float *memory, size_t batch, size_t tgt_len, size_t src_len,
                          const int32_t *mem_key_len, const demo_decoder_layer *l,
                          demo_scratch *s)
{
    size_t rows = batch * tgt_len;
    check_rows(s, rows);
    check_rows(s, batch * src_len);
    /* Top-left causal with Lq == Lk: query i sees keys 0..i, the square
       mask torch.triu(ones, 1) forbids the rest. */
    peak_mask causal = PEAK_MASK_DEFAULT;
    causal.causal = 1;
    peak_mask padding = PEAK_MASK_DEFAULT;
    padding.key_len = mem_key_len;

    self_attention(s->proj, y, batch, tgt_len, causal, &l->self_attention, s,
                   "peak_attention (decoder causal self-attention)");
    add_norm(mid1, y, s->proj, &l->norm1, rows, s, "peak_add_layernorm (decoder norm1)");
    cross_attention(s->proj, mid1, memory, batch, tgt_len, src_len, padding, &l->cross_attention, s,
                    "peak_attention (decoder cross-attention)");
    add_norm(mid2, mid1, s->proj, &l->norm2, rows, s, "peak_add_layernorm (decoder norm2)");
    feed_forward(s->proj, mid2, rows, &l->ffn, s);
    add_norm(out, mid2, s->proj, &l->norm3, rows, s, "peak_add_layernorm (decoder norm3)");
}
