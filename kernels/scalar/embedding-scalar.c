/*
 * embedding-scalar.c - positional add and fused embedding + PE, the
 * reference every SIMD tier must match bit for bit (peak_pe_add and
 * peak_embed_pe in peak.h).
 *
 * Both are one float operation per element (x + pe, or e * scale then + pe,
 * never fused; the build has -ffp-contract=off), so the only way a tier can
 * differ is by using a different PE value: the on-the-fly rows therefore
 * come from the same row function as the scalar table (common/pe-ref.h).
 */
#include "internal.h"
#include "common/pe-ref.h"
#include "convert.h"
#include "pe-table.h" /* peak_pe_part_cols */

#include <assert.h>

/* ---- x += PE ----------------------------------------------------------- */

static void add_row(float *x, const float *pe, size_t n)
{
    for (size_t j = 0; j < n; j++)
        x[j] += pe[j];
}

/* Adds PE(pos) to every batch entry of sequence slot s: one PE row serves
   the whole batch. */
static void add_to_batch(float *x_s, ptrdiff_t batch_stride, size_t batch, const float *pe,
                         size_t n)
{
    for (size_t b = 0; b < batch; b++)
        add_row(x_s + (ptrdiff_t)b * batch_stride, pe, n);
}

void peak_f32_pe_add__scalar(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                             size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                             const peak_pe_params *params, size_t f0, size_t f1)
{
    assert(x && batch > 0 && seq_len > 0 && d_model > 0 && (size_t)ld_x >= d_model && params);
    if (!pe) {
        peak_pe_add_ref(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params, f0, f1);
        return;
    }
    size_t cols[2][2];
    const size_t parts = peak_pe_part_cols(f0, f1, d_model, params->layout, cols);
    for (size_t s = 0; s < seq_len; s++)
        for (size_t k = 0; k < parts; k++)
            add_to_batch(x + (ptrdiff_t)s * ld_x + cols[k][0], batch_stride, batch,
                         pe + (pos0 + s) * d_model + cols[k][0], cols[k][1] - cols[k][0]);
}

/* ---- out = E[id] * scale + PE ----------------------------------------------- */

/* E's element j (of type te), widened exactly. */
static float e_at(const void *e, peak_dtype te, size_t j)
{
    return peak_f32_of_bits(peak_convert_load(e, te, j));
}

static void scale_row(float *out, const void *e, peak_dtype te, float scale, size_t n)
{
    for (size_t j = 0; j < n; j++)
        out[j] = e_at(e, te, j) * scale;
}

/* out may already hold the PE row (the on-the-fly path writes it there
   first): each out[j] is read before it is written. */
static void scale_add_row(float *out, const void *e, peak_dtype te, float scale, const float *pe,
                          size_t n)
{
    for (size_t j = 0; j < n; j++) {
        const float se = e_at(e, te, j) * scale;
        out[j] = se + pe[j];
    }
}

static void embed_token(float *o, const void *e, int64_t pos, const peak_embed_desc *desc)
{
    const size_t n = desc->d_model;
    const peak_dtype te = desc->table_type;
    if (pos < 0) {
        scale_row(o, e, te, desc->scale, n); /* fairseq pad token: no PE */
    } else if (desc->pe) {
        assert((uint64_t)pos < desc->pe_rows);
        scale_add_row(o, e, te, desc->scale, desc->pe + (size_t)pos * n, n);
    } else {
        /* The output row is the scratch for the PE row: no buffer. */
        peak_pe_row(o, (size_t)pos, n, &desc->pe_params);
        scale_add_row(o, e, te, desc->scale, o, n);
    }
}

/* stream is ignored: the reference has no non-temporal stores.  Any
   table type, a float32 out (embedding.h: peak_embedding_kernel_takes). */
void peak_f32_embed_pe__scalar(void *out, ptrdiff_t ld_out, const int32_t *ids,
                               const int64_t *pos, size_t n_tokens, size_t batch,
                               size_t seq_stride, const peak_embed_desc *desc, bool stream)
{
    (void)stream;
    assert(out && ids && pos && desc && desc->table && batch > 0);
    assert(desc->out_type == PEAK_F32);
    const size_t se = peak_dtype_bytes(desc->table_type);
    for (size_t b = 0; b < batch; b++)
        for (size_t t = 0; t < n_tokens; t++) {
            const size_t i = b * seq_stride + t;
            assert(ids[i] >= 0 && (size_t)ids[i] < desc->vocab && pos[t] >= -1);
            embed_token((float *)out + (ptrdiff_t)i * ld_out,
                        (const char *)desc->table + (ptrdiff_t)ids[i] * desc->ld_table * (ptrdiff_t)se,
                        pos[t], desc);
        }
}
