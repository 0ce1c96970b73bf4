/*
 * embedding-neon.c - x += PE and out = E[id] * scale + PE on AArch64
 * AdvSIMD: 4 floats a vector.  The code is embedding-body.h's; a row end
 * goes through simd/f32-neon.h's 4-float buffer, and a streamed row
 * through plain stores (Neoverse cores switch a stream of full-line writes
 * to no-allocate by themselves, which is what the x86 tiers' streaming
 * stores buy).
 *
 * Expected on a Neoverse V1/V2: memory-bound like the x86 tiers.  Per 16
 * floats the table path issues 8 loads, 4 FMUL, 4 FADD and 4 stores, which
 * the 3 load and 2 store pipes retire in ~3 cycles (~64 bytes a cycle from
 * L1), far above what L2 or DRAM feed one core, so the random E rows
 * (prefetched a few tokens ahead, as on x86) set the pace.  Not measured: no AArch64 hardware
 * here, only qemu.
 */
#include "simd/f32-neon.h"

#define PEAK_EMBEDDING_PE_ROWS peak_pe_rows__neon
#define PEAK_EMBEDDING_PE_TABLE peak_f32_pe_table__neon
#include "embedding-body.h"

void peak_f32_embed_pe__neon(float *out, ptrdiff_t ld_out, const int32_t *ids,
                             const int64_t *pos, size_t n_tokens, size_t batch, size_t seq_stride,
                             const peak_embed_desc *desc, bool stream)
{
    peak_embed_pe_run(out, ld_out, ids, pos, n_tokens, batch, seq_stride, desc, stream);
}

void peak_f32_pe_add__neon(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                           size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                           const peak_pe_params *params)
{
    peak_pe_add_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe, params);
}
