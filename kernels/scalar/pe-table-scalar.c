/*
 * pe-table-scalar.c - the scalar tier's sinusoid table: the plain-C table of
 * common/pe-ref.c, the reference every SIMD tier must match bit for bit.
 * The code lives there, compiled once outside every tier folder, because
 * the SIMD tiers call it too (the frequencies, the slow sincos, the x += PE
 * fallback); this file gives it the tier's kernel names.
 */
#include "common/pe-ref.h"
#include "pe-table.h"

void peak_pe_sincos_chunk__scalar(const double *x, double *s, double *c)
{
    peak_pe_sincos_chunk_ref(x, s, c);
}

/* stream is ignored: the reference has no non-temporal stores. */
void peak_f32_pe_table__scalar(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                               size_t pos0, const peak_pe_params *params, size_t f0, size_t f1,
                               bool stream)
{
    (void)stream;
    peak_pe_table_part_ref(out, ld_out, n_pos, d_model, pos0, params, f0, f1);
}

void peak_f32_pe_rows__scalar(float *scratch, size_t scratch_rows, size_t ld_scratch,
                              size_t n_rows, const int64_t *pos, size_t pos0, size_t d_model,
                              const peak_pe_params *params, size_t f0, size_t f1,
                              peak_pe_sink_fn sink, void *ctx)
{
    peak_pe_rows_ref(scratch, scratch_rows, ld_scratch, n_rows, pos, pos0, d_model, params, f0,
                     f1, sink, ctx);
}
