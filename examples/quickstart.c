/* quickstart.c - the README's C example: PositionalEncoding(512, max_len=5000).
   Build: cc quickstart.c $(pkg-config --cflags --libs peak) */
#include <peak.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    enum { MAX_LEN = 5000, D = 512, BATCH = 2, SEQ = 50 };
    float *pe = malloc(sizeof(float) * MAX_LEN * D);           /* PE table [5000, 512] */
    float *x = calloc((size_t)BATCH * SEQ * D, sizeof(float)); /* embeddings [2, 50, 512] */
    if (!pe || !x)
        return 1;
    /* the paper's formula; the last NULL: no thread pool, this thread only */
    peak_status s = peak_pe_table(pe, PEAK_F32, MAX_LEN, D, /*pos0=*/0, NULL, NULL);
    if (s == PEAK_OK) /* x[b, t, :] += PE[t, :]: the PyTorch module's forward() */
        s = peak_pe_add(x, /*batch_stride=*/SEQ * D, /*ld_x=*/D, BATCH, SEQ, D, 0, pe, MAX_LEN,
                        NULL, NULL);
    if (s != PEAK_OK) {
        fprintf(stderr, "peak: %s\n", peak_status_string(s));
        return 1;
    }
    float sin49 = x[(SEQ + 49) * D], cos49 = x[(SEQ + 49) * D + 1]; /* batch 1, position 49 */
    printf("peak %s on %s: PE[49, 0:2] = %.7f %.7f\n", peak_version(),
           peak_isa_name(peak_isa_active()), sin49, cos49);
    free(pe);
    free(x);
    return sin49 > -0.9537527f && sin49 < -0.9537526f ? 0 : 1; /* sin(49) = -0.95375265 */
}
