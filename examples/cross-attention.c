/*
 * cross-attention.c - the decoder attending to the encoder's output.
 *
 * In an encoder-decoder Transformer ("Attention Is All You Need", sec. 3.2.3)
 * each decoder layer's second attention takes its queries from the decoder
 * (T target positions) and its keys and values from the encoder output
 * (S source positions): q_len != kv_len, and no causal mask.  Source
 * sentences of different lengths are padded to S; mask.key_len tells peak
 * how many keys of each batch entry are real, so padding gets probability 0.
 *
 * Layouts are given by strides, so no transpose is needed: here Q and O are
 * [B, T, H, D] (the model's natural layout) and K, V are [B, H, S, D] (what
 * PyTorch code holds after .transpose(1, 2)).  The result is checked
 * against a plain double-precision loop.
 *
 * Build: cc cross-attention.c $(pkg-config --cflags --libs peak) -lm
 */
#include <math.h>
#include <peak.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, T = 3, S = 7, H = 4, D = 8 };

static float q[B][T][H][D], o[B][T][H][D]; /* decoder side: [B, T, H, D] */
static float k[B][H][S][D], v[B][H][S][D]; /* encoder side: [B, H, S, D] */
static float lse[B][H][T];                 /* optional: log-sum-exp per query row */

/* max(worst, |d|), written out: GCC 12's AArch64 vectoriser crashes on an
   fmax() reduction in these loops at -O3. */
static double max_abs(double worst, double d)
{
    d = d < 0 ? -d : d;
    return d > worst ? d : worst;
}

int main(void)
{
    const int32_t src_len[B] = {7, 4}; /* sentence 1 has 3 padding positions */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) {
                for (int t = 0; t < T; t++)
                    q[b][t][h][d] = (float)sin(0.3 * b + 0.7 * t + 1.1 * h + 0.5 * d);
                for (int s = 0; s < S; s++) {
                    k[b][h][s][d] = (float)cos(0.2 * b + 0.9 * s + 0.4 * h + 0.6 * d);
                    /* padding rows hold garbage: peak never reads them */
                    v[b][h][s][d] = s < src_len[b] ? (float)sin(1.3 * s - 0.8 * d + h) : NAN;
                }
            }

    peak_attention_desc a = PEAK_ATTENTION_DESC_DEFAULT; /* always start from the default */
    a.batch = B;
    a.heads = H;
    a.q_len = T;   /* decoder positions */
    a.kv_len = S;  /* encoder positions (padded) */
    a.head_dim = D;
    /* strides for the [b, l, h] indices, in elements */
    const ptrdiff_t qo[3] = {T * H * D, H * D, D};  /* [B, T, H, D] */
    const ptrdiff_t kv[3] = {H * S * D, D, S * D};  /* [B, H, S, D] */
    memcpy(a.q_stride, qo, sizeof qo);
    memcpy(a.o_stride, qo, sizeof qo);
    memcpy(a.k_stride, kv, sizeof kv);
    memcpy(a.v_stride, kv, sizeof kv);
    a.mask.key_len = src_len; /* key padding */
    a.lse = &lse[0][0][0];    /* [B, H, T] */
    const ptrdiff_t ls[3] = {H * T, T, 1};
    memcpy(a.lse_stride, ls, sizeof ls);

    /* workspace NULL: peak allocates scratch inside the call (simple; pass
       your own buffer from peak_attention_workspace_size() in a loop). */
    peak_status st = peak_attention(&o[0][0][0][0], &q[0][0][0][0], &k[0][0][0][0],
                                    &v[0][0][0][0], &a, NULL, 0, NULL);
    if (st != PEAK_OK) {
        fprintf(stderr, "peak_attention: %s\n", peak_status_string(st));
        return 1;
    }

    /* Reference: softmax(q . k / sqrt(D)) v over the real keys, in double. */
    double worst = 0, worst_lse = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double score[S], m = -INFINITY, sum = 0;
                for (int s = 0; s < src_len[b]; s++) {
                    score[s] = 0;
                    for (int d = 0; d < D; d++)
                        score[s] += (double)q[b][t][h][d] * k[b][h][s][d];
                    score[s] /= sqrt((double)D);
                    m = score[s] > m ? score[s] : m;
                }
                for (int s = 0; s < src_len[b]; s++)
                    sum += exp(score[s] - m);
                for (int d = 0; d < D; d++) {
                    double acc = 0;
                    for (int s = 0; s < src_len[b]; s++)
                        acc += exp(score[s] - m) / sum * v[b][h][s][d];
                    worst = max_abs(worst, acc - o[b][t][h][d]);
                }
                worst_lse = max_abs(worst_lse, m + log(sum) - lse[b][h][t]);
            }
    printf("cross-attention [B %d, T %d] x [S %d, key_len %d/%d], %d heads on %s: "
           "max |O - exact| = %.2e, max |lse - exact| = %.2e\n",
           B, T, S, src_len[0], src_len[1], H, peak_isa_name(peak_isa_active()), worst, worst_lse);
    return worst <= 1e-5 && worst_lse <= 1e-5 ? 0 : 1;
}
