/*
 * pe-embedding.c - the PyTorch PositionalEncoding example, two ways:
 * embedding lookup, then the positional encoding added in place (what the
 * PyTorch module does), and the same thing fused into one pass with
 * peak_embed_pe.
 *
 * The example builds PositionalEncoding(d_model=512, max_len=5000) and feeds
 * it a [2, 50, 512] batch of word embeddings.  Here the embeddings come from a
 * small vocabulary table E (in a real model: nn.Embedding's weight), scaled
 * by sqrt(d_model) as in "Attention Is All You Need", sec. 3.4.
 *
 * Build: cc pe-embedding.c $(pkg-config --cflags --libs peak) -lm
 */
#include <math.h>
#include <peak.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VOCAB = 1000, D = 512, MAX_LEN = 5000, BATCH = 2, SEQ = 50 };

/* max(worst, |d|), written out: GCC 12's AArch64 vectoriser crashes on an
   fmax() reduction in these loops at -O3. */
static double max_abs(double worst, double d)
{
    d = d < 0 ? -d : d;
    return d > worst ? d : worst;
}

static int check(peak_status s, const char *what)
{
    if (s != PEAK_OK)
        fprintf(stderr, "%s: %s\n", what, peak_status_string(s));
    return s == PEAK_OK;
}

int main(void)
{
    float *emb = malloc(sizeof(float) * VOCAB * D);         /* E: [vocab, d_model] */
    float *pe = malloc(sizeof(float) * MAX_LEN * D);        /* PE: [max_len, d_model] */
    float *x = malloc(sizeof(float) * BATCH * SEQ * D);     /* way 1: [batch, seq, d_model] */
    float *fused = malloc(sizeof(float) * BATCH * SEQ * D); /* way 2: same shape */
    int32_t ids[BATCH * SEQ];                               /* token ids, [batch, seq] */
    if (!emb || !pe || !x || !fused)
        return 1;
    for (size_t k = 0; k < (size_t)VOCAB * D; k++) /* any weights will do */
        emb[k] = (float)sin(0.001 * (double)k) * 0.05f;
    for (int t = 0; t < BATCH * SEQ; t++)
        ids[t] = (t * 37 + 11) % VOCAB;
    const float scale = sqrtf((float)D);

    /* The table, once, as the module's __init__ does.  NULL params: the
       paper's interleaved layout (sin in even columns, cos in odd), base
       10000, computed accurately (PEAK_PE_TORCH_F32 would reproduce
       PyTorch's float32 rounding instead). */
    if (!check(peak_pe_table(pe, PEAK_F32, MAX_LEN, D, 0, NULL, NULL), "peak_pe_table"))
        return 1;

    /* Way 1: gather + scale (the model's job), then forward()'s x += PE. */
    for (int t = 0; t < BATCH * SEQ; t++)
        for (int c = 0; c < D; c++)
            x[(size_t)t * D + c] = emb[(size_t)ids[t] * D + c] * scale;
    if (!check(peak_pe_add(x, /*batch_stride=*/SEQ * D, /*ld_x=*/D, BATCH, SEQ, D,
                           /*pos0=*/0, pe, MAX_LEN, NULL, NULL),
               "peak_pe_add"))
        return 1;

    /* Way 2: one call reads each embedding row once and writes the output
       once.  seq_len makes token t sit at position t % SEQ, so both
       sentences start at position 0. */
    peak_embed_desc desc = PEAK_EMBED_DESC_DEFAULT; /* always start from the default */
    desc.table = emb;
    desc.vocab = VOCAB;
    desc.ld_table = D;
    desc.d_model = D;
    desc.scale = scale;
    desc.pe = pe; /* or NULL: compute PE on the fly, no table in memory */
    desc.pe_rows = MAX_LEN;
    desc.seq_len = SEQ;
    if (!check(peak_embed_pe(fused, /*ld_out=*/D, ids, BATCH * SEQ, &desc, NULL), "peak_embed_pe"))
        return 1;

    /* Both ways round the same operations (one multiply, one add) and
       agree to the bit; the PE part matches the formula in double. */
    int same = memcmp(x, fused, sizeof(float) * BATCH * SEQ * D) == 0;
    double worst = 0;
    for (int pos = 0; pos < SEQ; pos++)
        for (int i = 0; i < D / 2; i++) {
            double angle = pos * pow(10000.0, -2.0 * i / D);
            worst = max_abs(worst, pe[pos * D + 2 * i] - sin(angle));
            worst = max_abs(worst, pe[pos * D + 2 * i + 1] - cos(angle));
        }
    printf("embedding + PE for [%d, %d, %d] on %s: fused == separate: %s; "
           "max |PE - formula| = %.2e\n",
           BATCH, SEQ, D, peak_isa_name(peak_isa_active()), same ? "yes" : "NO", worst);
    free(emb);
    free(pe);
    free(x);
    free(fused);
    return same && worst <= 0x1p-23 ? 0 : 1;
}
