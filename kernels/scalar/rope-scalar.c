/*
 * rope-scalar.c - the reference rotary embedding in plain C: rope.h's
 * driver with the double sincos of pe-table.h (peak_pe_sincos_chunk_ref)
 * and one element at a time.  Every SIMD tier must match it bit for bit.
 * fma() is the C99 function (a libm call in this tier, built without
 * -mfma), correctly rounded like the tiers' vector FMA.
 */
#include "common/pe-ref.h"
#include "rope.h"

#include <math.h>
#include <string.h>

static void emit_exact(float *row, const peak_rope_freqs *f, size_t i0, size_t nc,
                       const double *sb, const double *cb, const double *sk, const double *ck)
{
    for (size_t j = 0; j < nc; j++) {
        const double c = fma(cb[j], ck[j], -(sb[j] * sk[j]));
        const double s = fma(sb[j], ck[j], cb[j] * sk[j]);
        row[i0 + j] = (float)(c * f->af);
        row[f->n + i0 + j] = (float)(s * f->af);
    }
}

static void emit_hf(float *row, const peak_rope_freqs *f, size_t i0, size_t nc, const double *s,
                    const double *c)
{
    for (size_t j = 0; j < nc; j++) {
        row[i0 + j] = (float)c[j] * f->af_f32;
        row[f->n + i0 + j] = (float)s[j] * f->af_f32;
    }
}

void peak_f32_rope_cache__scalar(float *out, ptrdiff_t ld_out, size_t n_rows, size_t pos0,
                                 const int64_t *pos, const peak_rope_freqs *f)
{
    peak_rope_rows_run(out, ld_out, n_rows, pos0, pos, f, peak_pe_sincos_chunk_ref, emit_exact,
                       emit_hf);
}

/* Both elements of a pair are read before either is written: y may be x. */
static void rotate_head(float *y, const float *x, const float *cs, size_t r,
                        const peak_rope_desc *d, bool copy_tail, bool stream)
{
    (void)stream; /* the reference writes plainly */
    const size_t n = r / 2;
    if (d->pairing == PEAK_ROPE_HALF_SPLIT) {
        for (size_t i = 0; i < n; i++) { /* cs: the row, c then s */
            const float a = x[i], b = x[n + i], c = cs[i], s = cs[n + i];
            y[i] = a * c - b * s;
            y[n + i] = b * c + a * s;
        }
    } else {
        const float *c2 = cs, *s2 = cs + r; /* cs: the expansion */
        for (size_t i = 0; i < n; i++) {
            const float a = x[2 * i], b = x[2 * i + 1];
            y[2 * i] = a * c2[2 * i] + b * s2[2 * i];
            y[2 * i + 1] = b * c2[2 * i + 1] + a * s2[2 * i + 1];
        }
    }
    if (copy_tail && d->head_dim > r)
        memcpy(y + r, x + r, (d->head_dim - r) * sizeof *y);
}

void peak_f32_rope_apply__scalar(float *y, const float *x, const peak_rope_desc *desc,
                                 const peak_rope_freqs *f, size_t b, size_t l0, size_t l1,
                                 bool stream)
{
    peak_rope_apply_run(y, x, desc, f, b, l0, l1, stream, peak_f32_rope_cache__scalar,
                        rotate_head);
}
