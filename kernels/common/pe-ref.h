/*
 * pe-ref.h - the sinusoid table's ISA-free code: what every tier's table
 * driver calls (the frequencies, PyTorch's expf, the slow sincos), and the
 * table in plain C with the row and column-window functions built on it
 * (common/pe-ref.c), and the on-the-fly x += PE (common/pe-add-ref.c).
 *
 * Compiled once, with no ISA flags, outside every tier folder: the scalar
 * tier's kernels wrap these, and a SIMD tier's fallback calls them, without
 * any tier linking another tier's file.  The algorithm and the constants
 * that decide each bit are pe-table.h's.
 */
#ifndef PEAK_COMMON_PE_REF_H
#define PEAK_COMMON_PE_REF_H

#include "internal.h"

#include <stddef.h>

/* ---- what every tier's driver calls ------------------------------------- */

/* Fills w[0 .. PEAK_PE_CHUNK) with the frequencies of columns i0 .. i0+nc-1
   (zeros past nc, so SIMD tiers may evaluate whole vectors).  i0 is a
   multiple of PEAK_PE_CHUNK and the first call of a table has i0 == 0:
   it fills lo[0 .. nc), which later chunks reuse.
   EXACT: w = base^(-e_i) as pow(base, -e_i0) * lo[i - i0], lo[j] =
   pow(base, -e_j): one pow per chunk instead of one per column, with a
   relative error of ~2^-49 (dominated by rounding e_i to double), i.e.
   < 2^-29 in the angle for p < 2^20.
   TORCH_F32: the float value PyTorch computes (see peak_pe_torch_expf). */
PEAK_INTERNAL void peak_pe_freqs(double *w, double *lo, size_t i0, size_t nc, size_t d_model,
                                 const peak_pe_params *params);

/* expf exactly as PyTorch 1.13 on an AVX2 CPU computes it (bit for bit). */
PEAK_INTERNAL float peak_pe_torch_expf(float x);

/* sincos for the angles the fast path does not cover (x >= 2^50, only
   reachable with base < 1): libm sin/cos; and sin 0, cos 1 for an angle
   that overflowed to inf (base < ~2^-990), so that no table holds NaN. */
PEAK_INTERNAL void peak_pe_sincos_slow(double x, double *s, double *c);

/* ---- the table in plain C ----------------------------------------------- */

/* sin/cos of x[0 .. PEAK_PE_CHUNK) by pe-table.h's peak_pe_sincos, the
   operation sequence the SIMD tiers replicate (x and outputs 64-byte
   aligned). */
PEAK_INTERNAL void peak_pe_sincos_chunk_ref(const double *x, double *s, double *c);

/* The table in plain C: rows pos0 .. pos0+n_pos-1 into out, row stride
   ld_out; the part of the columns of frequencies [f0, f1) (internal.h,
   PEAK_PE_FREQ_END) is the scalar tier's peak_f32_pe_table__scalar. */
PEAK_INTERNAL void peak_pe_table_ref(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                                     size_t pos0, const peak_pe_params *params);
PEAK_INTERNAL void peak_pe_table_part_ref(float *out, ptrdiff_t ld_out, size_t n_pos,
                                          size_t d_model, size_t pos0,
                                          const peak_pe_params *params, size_t f0, size_t f1);

/* The rows driver in plain C (pe-table-driver.h's peak_pe_rows_run, the
   table's bits): the scalar tier's peak_f32_pe_rows__scalar. */
PEAK_INTERNAL void peak_pe_rows_ref(float *scratch, size_t scratch_rows, size_t ld_scratch,
                                    size_t n_rows, const int64_t *pos, size_t pos0,
                                    size_t d_model, const peak_pe_params *params, size_t f0,
                                    size_t f1, peak_pe_sink_fn sink, void *ctx);

/* Writes exactly the bits of row `pos` of peak_pe_table(..., params) into
   row[0 .. d_model): for the on-the-fly PE of peak_pe_add/peak_embed_pe.
   Same contract as the kernels (pos < 2^32, params valid). */
PEAK_INTERNAL void peak_pe_row(float *row, size_t pos, size_t d_model,
                               const peak_pe_params *params);

/* Columns c0 .. c0+n-1 of that row into dst[0 .. n) (c0 + n <= d_model), so
   that a caller can stream a long row through a small stack buffer.  Costs
   about one pow and two sincos per frequency the window touches: to fill
   many rows, a block of table rows (peak_f32_pe_table__<isa>, which shares
   its sincos tables across rows) is far cheaper. */
PEAK_INTERNAL void peak_pe_cols(float *dst, size_t pos, size_t c0, size_t n, size_t d_model,
                                const peak_pe_params *params);

/* x[b, s, :] += PE(pos0 + s, :) in the columns of frequencies [f0, f1)
   (internal.h), PE computed on the fly a column window at a time into the
   stack (no heap buffer, any d_model): the scalar tier's peak_pe_add
   without a table, and the SIMD tiers' fallback for rows wider than their
   scratch block.  One float add per element, so the bits are those of any
   tier's x + PE. */
PEAK_INTERNAL void peak_pe_add_ref(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x,
                                   size_t batch, size_t seq_len, size_t d_model, size_t pos0,
                                   const peak_pe_params *params, size_t f0, size_t f1);

#endif /* PEAK_COMMON_PE_REF_H */
