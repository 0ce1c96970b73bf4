/*
 * embedding-avx2.c - x += PE and out = E[id] * scale + PE with AVX2: 8
 * floats a vector; a row's partial head and tail vectors load with
 * vmaskmovps and store with peak_avx2_store_first (simd/f32-avx2.h: a
 * masked store is slow on Zen 3), so nothing outside a row's d_model floats
 * is read or written.
 *
 * Bit-identical to embedding-scalar.c: an element is x + pe, or e * scale
 * rounded and then + pe rounded (vmulps, vaddps: never an FMA), exactly the
 * scalar's operations; on-the-fly PE comes from this tier's rows driver,
 * which evaluates peak_pe_table's own expressions.  The loops are in
 * embedding.h; this file holds what the vector width decides.
 */
#include "common/pe-ref.h"
#include "embedding.h"
#include "simd/f32-avx2.h"

#include <immintrin.h>

static inline __m256 scale_add8(const float *e, __m256 vscale, const float *pe)
{
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(e), vscale);
    return pe ? _mm256_add_ps(v, _mm256_loadu_ps(pe)) : v;
}

/* out[0 .. n) for n < 8: a row's head or tail. */
static inline void embedding_part(float *out, const float *e, __m256 vscale, const float *pe,
                                  size_t n)
{
    const __m256i m = peak_avx2_first_lanes(n);
    __m256 v = _mm256_mul_ps(_mm256_maskload_ps(e, m), vscale);
    if (pe)
        v = _mm256_add_ps(v, _mm256_maskload_ps(pe, m));
    peak_avx2_store_first(out, v, n);
}

/* Two cache lines, in address order (peak_store_in_order: GCC would
   otherwise store the first vector last, which measured up to 2x slower). */
static inline void store4(float *out, __m256 v0, __m256 v1, __m256 v2, __m256 v3)
{
    _mm256_storeu_ps(out, v0);
    peak_store_in_order();
    _mm256_storeu_ps(out + 8, v1);
    peak_store_in_order();
    _mm256_storeu_ps(out + 16, v2);
    peak_store_in_order();
    _mm256_storeu_ps(out + 24, v3);
}

/* Four vectors an iteration: two loads, a multiply, an add and a store per
   vector leave the loop overhead a small share.  Streaming stores need
   32-byte aligned addresses: the floats before the first boundary go
   through embedding_part.  Each iteration also prefetches the
   matching lines of next (embedding.h); pf is where that stopped. */
static inline __attribute__((always_inline)) void embedding_row(float *out, const float *e,
                                                                float scale, const float *pe,
                                                                size_t n, bool stream,
                                                                const float *next)
{
    const __m256 vscale = _mm256_set1_ps(scale);
    size_t j = 0, pf = 0;
    if (stream) {
        j = (32 - ((uintptr_t)out & 31)) / sizeof(float) & 7;
        j = j < n ? j : n;
        if (j)
            embedding_part(out, e, vscale, pe, j);
        for (; j + 16 <= n; j += 16, pf = j) {
            peak_embedding_prefetch_part(next, j, 16);
            _mm256_stream_ps(out + j, scale_add8(e + j, vscale, pe ? pe + j : NULL));
            _mm256_stream_ps(out + j + 8, scale_add8(e + j + 8, vscale, pe ? pe + j + 8 : NULL));
        }
        for (; j + 8 <= n; j += 8)
            _mm256_stream_ps(out + j, scale_add8(e + j, vscale, pe ? pe + j : NULL));
    }
    for (; j + 32 <= n; j += 32, pf = j) {
        peak_embedding_prefetch_part(next, j, 32);
        const __m256 v0 = scale_add8(e + j, vscale, pe ? pe + j : NULL);
        const __m256 v1 = scale_add8(e + j + 8, vscale, pe ? pe + j + 8 : NULL);
        const __m256 v2 = scale_add8(e + j + 16, vscale, pe ? pe + j + 16 : NULL);
        const __m256 v3 = scale_add8(e + j + 24, vscale, pe ? pe + j + 24 : NULL);
        store4(out + j, v0, v1, v2, v3);
    }
    peak_embedding_prefetch_rest(next, pf, n);
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(out + j, scale_add8(e + j, vscale, pe ? pe + j : NULL));
    if (j < n)
        embedding_part(out + j, e + j, vscale, pe ? pe + j : NULL, n - j);
}

/* pe == NULL (a fairseq pad token) is rare: one predictable branch. */
static inline __attribute__((always_inline)) void embedding_row_avx2(float *out, const float *e,
                                                                     float scale, const float *pe,
                                                                     size_t n, bool stream,
                                                                     const float *next)
{
    if (pe)
        embedding_row(out, e, scale, pe, n, stream, next);
    else
        embedding_row(out, e, scale, NULL, n, stream, next);
}

static inline __attribute__((always_inline)) void
add_row_avx2(float *x, const float *pe, size_t n)
{
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(pe + j));
        const __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(x + j + 8), _mm256_loadu_ps(pe + j + 8));
        _mm256_storeu_ps(x + j, v0);
        _mm256_storeu_ps(x + j + 8, v1);
    }
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(x + j, _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(pe + j)));
    if (j < n) {
        const __m256i m = peak_avx2_first_lanes(n - j);
        const __m256 v = _mm256_add_ps(_mm256_maskload_ps(x + j, m), _mm256_maskload_ps(pe + j, m));
        peak_avx2_store_first(x + j, v, n - j);
    }
}

static void embed_sink(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1)
{
    peak_embed_fly_block(ctx, t0, t1, c0, c1, embedding_row_avx2, false);
}

static void embed_sink_stream(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1)
{
    peak_embed_fly_block(ctx, t0, t1, c0, c1, embedding_row_avx2, true);
}

static void pe_add_sink(void *ctx, size_t s0, size_t s1, size_t c0, size_t c1)
{
    peak_pe_add_fly_block(ctx, s0, s1, c0, c1, add_row_avx2);
}

void peak_f32_embed_pe__avx2(float *out, ptrdiff_t ld_out, const int32_t *ids,
                             const int64_t *pos, size_t n_tokens, size_t batch, size_t seq_stride,
                             const peak_embed_desc *desc, bool stream)
{
    assert(out && ids && pos && desc && desc->table && batch > 0);
    if (desc->pe)
        peak_embed_table_run(out, ld_out, ids, pos, n_tokens, batch, seq_stride, desc,
                             embedding_row_avx2, stream);
    else
        peak_embed_fly_run(out, ld_out, ids, pos, n_tokens, batch, seq_stride, desc,
                           embedding_row_avx2, peak_pe_rows__avx2, embed_sink, embed_sink_stream,
                           peak_f32_pe_table__avx2, stream);
    /* Streaming stores (large calls) are weakly ordered: fence them. */
    _mm_sfence();
}

void peak_f32_pe_add__avx2(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                           size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                           const peak_pe_params *params)
{
    assert(x && batch > 0 && seq_len > 0 && d_model > 0 && (size_t)ld_x >= d_model);
    if (pe)
        peak_pe_add_table_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe,
                              add_row_avx2);
    else if (!peak_pe_add_fly_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params,
                                  peak_pe_rows__avx2, pe_add_sink))
        peak_pe_add_ref(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params);
}
