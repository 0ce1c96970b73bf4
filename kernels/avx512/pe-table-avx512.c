/*
 * pe-table-avx512.c - the sinusoid table with AVX-512 F/DQ/VL:
 * pe-table-body.h over simd/f32-avx512.h, 8 frequencies per vector of
 * doubles.
 */
#include "simd/f32-avx512.h"

#include "pe-table-body.h"

void peak_pe_sincos_chunk__avx512(const double *x, double *s, double *c)
{
    pe_sincos_chunk(x, s, c);
}

void peak_pe_rows__avx512(float *scratch, size_t scratch_rows, size_t ld_scratch,
                          size_t n_rows, const int64_t *pos, size_t pos0, size_t d_model,
                          const peak_pe_params *params, peak_pe_sink_fn sink, void *ctx)
{
    peak_pe_rows_run(scratch, scratch_rows, ld_scratch, n_rows, pos, pos0, d_model, params, sink,
                     ctx);
}

void peak_f32_pe_table__avx512(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                               size_t pos0, const peak_pe_params *params)
{
    pe_table(out, ld_out, n_pos, d_model, pos0, params);
}
