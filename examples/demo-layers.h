/*
 * demo-layers.h - one post-norm Transformer encoder layer and one decoder
 * layer (Vaswani et al. 2017, sec. 3.1), as torch.nn.TransformerEncoderLayer
 * and TransformerDecoderLayer compute them with dropout 0 and ReLU:
 *
 *   encoder:  x = LN1(x + SelfAttention(x, key padding))
 *             x = LN2(x + FFN(x))
 *   decoder:  y = LN1(y + SelfAttention(y, causal))
 *             y = LN2(y + CrossAttention(y, memory, memory key padding))
 *             y = LN3(y + FFN(y))
 *
 * The projections and the FFN are OpenBLAS sgemm calls; attention, the masks
 * and residual + LayerNorm are peak's.  Activations are [batch * len,
 * d_model] row-major, the layout of a batch_first [batch, len, d_model]
 * tensor.
 */
#ifndef PEAK_DEMO_LAYERS_H
#define PEAK_DEMO_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "demo-gen.h"
#include "peak.h"

/* nn.MultiheadAttention's parameters: in_w [3*d, d] holds W_q, W_k, W_v. */
typedef struct demo_mha {
    const float *in_w, *in_b, *out_w, *out_b;
} demo_mha;

typedef struct demo_ffn {
    const float *w1, *b1, *w2, *b2; /* [d_ff, d], [d_ff], [d, d_ff], [d] */
} demo_ffn;

typedef struct demo_norm {
    const float *gamma, *beta;
} demo_norm;

typedef struct demo_encoder_layer {
    demo_mha self_attention;
    demo_ffn ffn;
    demo_norm norm1, norm2;
} demo_encoder_layer;

typedef struct demo_decoder_layer {
    demo_mha self_attention, cross_attention;
    demo_ffn ffn;
    demo_norm norm1, norm2, norm3;
} demo_decoder_layer;

/* Points the layers at the generated parameters ("enc." / "dec." names). */
void demo_encoder_bind(demo_encoder_layer *l, const demo_weights *w);
void demo_decoder_bind(demo_decoder_layer *l, const demo_weights *w);

/* Seconds spent per kind of work, summed over the calls since reset. */
typedef struct demo_timing {
    double gemm, attention, add_norm, relu;
} demo_timing;

/* Scratch buffers for activations of up to max_rows tokens (batch * len),
   and peak_attention's workspace, grown on demand and reused. */
typedef struct demo_scratch {
    size_t max_rows;
    float *qkv, *q, *attention, *proj, *hidden;
    void *workspace;
    size_t workspace_size;
    demo_timing timing;
} demo_scratch;

/* 0 on success, -1 when out of memory. */
int demo_scratch_init(demo_scratch *s, size_t max_rows);
void demo_scratch_free(demo_scratch *s);

/* out, mid1: [batch * len, d_model]; mid1 receives x after LN1.
   key_len[b]: real tokens of sequence b (peak's key padding mask).
   Aborts with a message if a peak call fails. */
void demo_encoder_forward(float *out, float *mid1, const float *x, size_t batch, size_t len,
                          const int32_t *key_len, const demo_encoder_layer *l, demo_scratch *s);

/* out, mid1, mid2: [batch * tgt_len, d_model]; memory: [batch * src_len,
   d_model], the encoder output; mem_key_len masks its padding. */
void demo_decoder_forward(float *out, float *mid1, float *mid2, const float *y,
                          const float *memory, size_t batch, size_t tgt_len, size_t src_len,
                          const int32_t *mem_key_len, const demo_decoder_layer *l,
                          demo_scratch *s);

/* Seconds since an arbitrary fixed point (monotonic). */
double demo_now(void);

/* Prints "peak-demo: <what> failed: <status>" and exits with status 2. */
void demo_check_status(peak_status status, const char *what);

#endif /* PEAK_DEMO_LAYERS_H */
