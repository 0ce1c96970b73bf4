/*
 * pe-table-neon.c - the sinusoid table on AArch64 AdvSIMD: pe-table-body.h
 * over simd/f32-neon.h, 2 frequencies per vector of doubles.
 *
 * SLEEF is not used: its advsimd sincos (Sleef_sincosd2_u10advsimd in
 * Debian's 3.5.1) is a different algorithm, so its bits would differ from
 * the scalar reference's; bit identity is the contract of this family.
 */
#include "simd/f32-neon.h"

/* Four vectors a sincos step: each polynomial is a chain of 8 dependent
   FMAs, and four in flight (eight with sin and cos) cover the FMA latency
   on every FP pipe of a 4-pipe Neoverse core. */
#define PEAK_PE_SINCOS_UNROLL 4

#include "pe-table-body.h"

void peak_pe_sincos_chunk__neon(const double *x, double *s, double *c)
{
    pe_sincos_chunk(x, s, c);
}

void peak_pe_rows__neon(float *scratch, size_t scratch_rows, size_t ld_scratch, size_t n_rows,
                        const int64_t *pos, size_t pos0, size_t d_model,
                        const peak_pe_params *params, peak_pe_sink_fn sink, void *ctx)
{
    peak_pe_rows_run(scratch, scratch_rows, ld_scratch, n_rows, pos, pos0, d_model, params, sink,
                     ctx);
}

void peak_f32_pe_table__neon(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                             size_t pos0, const peak_pe_params *params)
{
    pe_table(out, ld_out, n_pos, d_model, pos0, params);
}
