/*
 * embedding-neon.c - x += PE and out = E[id] * scale + PE on AArch64
 * AdvSIMD: 4 floats a vector, 16 an iteration.
 *
 * Bit-identical to embedding-scalar.c: an element is x + pe, or e * scale
 * rounded and then + pe rounded (FMUL, FADD: never an FMLA), exactly the
 * scalar's operations; on-the-fly PE comes from this tier's rows driver
 * (pe-table-neon.c), which evaluates peak_pe_table's own expressions.  The
 * loops are in embedding.h; this file holds what the vector width decides.
 * The last n % 4 floats of a row are done one at a time with the same two
 * operations (AdvSIMD has no masked loads): nothing outside a row's d_model
 * floats is read or written.
 *
 * The drivers' `stream` flag is ignored: ACLE has no non-temporal store
 * intrinsic, and Neoverse cores switch a stream of full-line writes to
 * no-allocate by themselves (write streaming mode), which is what the x86
 * tiers' streaming stores buy.
 *
 * Expected on a Neoverse V1/V2: memory-bound like the x86 tiers.  Per 16
 * floats the table path issues 8 loads, 4 FMUL, 4 FADD and 4 stores, which
 * the 3 load and 2 store pipes retire in ~3 cycles (~64 bytes a cycle from
 * L1), far above what L2 or DRAM feed one core, so the random E rows
 * (prefetched a few tokens ahead, as on x86) set the pace.  Not measured: no AArch64 hardware
 * here, only qemu.
 */
#include "common/pe-ref.h"
#include "embedding.h"

#include <arm_neon.h>

static inline float32x4_t scale_add4(const float *e, float32x4_t vscale, const float *pe)
{
    const float32x4_t v = vmulq_f32(vld1q_f32(e), vscale);
    return pe ? vaddq_f32(v, vld1q_f32(pe)) : v;
}

/* Four independent vectors an iteration: two loads, a multiply, an add
   and a store each, so that the loop overhead is a small share.  Each
   out[j] is read (as pe[j]) before it is written, so out == pe works. */
static inline __attribute__((always_inline)) void
embedding_row(float *out, const float *e, float scale, const float *pe, size_t n)
{
    const float32x4_t vscale = vdupq_n_f32(scale);
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const float32x4_t v0 = scale_add4(e + j, vscale, pe ? pe + j : NULL);
        const float32x4_t v1 = scale_add4(e + j + 4, vscale, pe ? pe + j + 4 : NULL);
        const float32x4_t v2 = scale_add4(e + j + 8, vscale, pe ? pe + j + 8 : NULL);
        const float32x4_t v3 = scale_add4(e + j + 12, vscale, pe ? pe + j + 12 : NULL);
        vst1q_f32(out + j, v0);
        vst1q_f32(out + j + 4, v1);
        vst1q_f32(out + j + 8, v2);
        vst1q_f32(out + j + 12, v3);
    }
    for (; j + 4 <= n; j += 4)
        vst1q_f32(out + j, scale_add4(e + j, vscale, pe ? pe + j : NULL));
    for (; j < n; j++) {
        const float se = e[j] * scale;
        out[j] = pe ? se + pe[j] : se;
    }
}

/* pe == NULL (a fairseq pad token) is rare: one predictable branch. */
static inline __attribute__((always_inline)) void embedding_row_neon(float *out, const float *e,
                                                                     float scale, const float *pe,
                                                                     size_t n, bool stream,
                                                                     const float *next)
{
    (void)stream;
    peak_embedding_prefetch_rest(next, 0, n);
    if (pe)
        embedding_row(out, e, scale, pe, n);
    else
        embedding_row(out, e, scale, NULL, n);
}

static inline __attribute__((always_inline)) void
add_row_neon(float *x, const float *pe, size_t n)
{
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const float32x4_t v0 = vaddq_f32(vld1q_f32(x + j), vld1q_f32(pe + j));
        const float32x4_t v1 = vaddq_f32(vld1q_f32(x + j + 4), vld1q_f32(pe + j + 4));
        vst1q_f32(x + j, v0);
        vst1q_f32(x + j + 4, v1);
    }
    for (; j + 4 <= n; j += 4)
        vst1q_f32(x + j, vaddq_f32(vld1q_f32(x + j), vld1q_f32(pe + j)));
    for (; j < n; j++)
        x[j] += pe[j];
}

static void embed_sink(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1)
{
    peak_embed_fly_block(ctx, t0, t1, c0, c1, embedding_row_neon, false);
}

static void pe_add_sink(void *ctx, size_t s0, size_t s1, size_t c0, size_t c1)
{
    peak_pe_add_fly_block(ctx, s0, s1, c0, c1, add_row_neon);
}

void peak_f32_embed_pe__neon(float *out, ptrdiff_t ld_out, const int32_t *ids,
                             const int64_t *pos, size_t n_tokens, size_t batch, size_t seq_stride,
                             const peak_embed_desc *desc, bool stream)
{
    assert(out && ids && pos && desc && desc->table && batch > 0);
    if (desc->pe)
        peak_embed_table_run(out, ld_out, ids, pos, n_tokens, batch, seq_stride, desc,
                             embedding_row_neon, stream);
    else
        peak_embed_fly_run(out, ld_out, ids, pos, n_tokens, batch, seq_stride, desc,
                           embedding_row_neon, peak_pe_rows__neon, embed_sink, embed_sink,
                           peak_f32_pe_table__neon, stream);
}

void peak_f32_pe_add__neon(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                           size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                           const peak_pe_params *params)
{
    assert(x && batch > 0 && seq_len > 0 && d_model > 0 && (size_t)ld_x >= d_model);
    if (pe)
        peak_pe_add_table_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe,
                              add_row_neon);
    else if (!peak_pe_add_fly_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params,
                                  peak_pe_rows__neon, pe_add_sink))
        peak_pe_add_ref(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params);
}
