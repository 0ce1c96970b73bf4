/*
 * pe-add-ref.c - x += PE with PE computed on the fly, in plain C, compiled
 * once with no ISA flags (contract: pe-ref.h): the scalar tier's
 * peak_pe_add without a table, and the SIMD tiers' fallback for rows wider
 * than their scratch block.  A file of its own so that peak_pe_cols stays
 * opaque here: clang-analyzer, seeing into the table driver, reports the
 * window as read uninitialised on a path with no frequency, which d_model
 * >= 1 rules out.
 */
#include "common/pe-ref.h"
#include "pe-table.h" /* peak_pe_part_cols */

/* Columns of PE produced per window: 1 KiB of stack, and a window this wide
   keeps the per-call cost of peak_pe_cols (one pow per call) small next to
   its sincos. */
#define PE_ADD_WINDOW 256

/* Adds pe[0 .. n) to the same columns of every batch entry of one sequence
   slot: one PE window serves the whole batch, so it is computed once per
   position. */
static void add_window_to_batch(float *x_s, ptrdiff_t batch_stride, size_t batch,
                                const float *pe, size_t n)
{
    for (size_t b = 0; b < batch; b++) {
        float *xb = x_s + (ptrdiff_t)b * batch_stride;
        for (size_t j = 0; j < n; j++)
            xb[j] += pe[j];
    }
}

void peak_pe_add_ref(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                     size_t seq_len, size_t d_model, size_t pos0, const peak_pe_params *params,
                     size_t f0, size_t f1)
{
    float window[PE_ADD_WINDOW];
    size_t cols[2][2];
    const size_t parts = peak_pe_part_cols(f0, f1, d_model, params->layout, cols);
    for (size_t s = 0; s < seq_len; s++) {
        float *x_s = x + (ptrdiff_t)s * ld_x;
        for (size_t k = 0; k < parts; k++)
            for (size_t c0 = cols[k][0], end = cols[k][1]; c0 < end; c0 += PE_ADD_WINDOW) {
                const size_t n = end - c0 < PE_ADD_WINDOW ? end - c0 : PE_ADD_WINDOW;
                peak_pe_cols(window, pos0 + s, c0, n, d_model, params);
                add_window_to_batch(x_s + c0, batch_stride, batch, window, n);
            }
    }
}
