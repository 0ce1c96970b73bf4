/*
 * embedding-avx512.c - x += PE and out = E[id] * scale + PE with AVX-512
 * F: 16 floats a vector, masked row tails (nothing outside a row's d_model
 * floats is read or written).
 *
 * Bit-identical to embedding-scalar.c: an element is x + pe, or e * scale
 * rounded and then + pe rounded (vmulps, vaddps: never an FMA), exactly the
 * scalar's operations; on-the-fly PE comes from this tier's rows driver,
 * which evaluates peak_pe_table's own expressions.  The loops are in
 * embedding.h; this file holds what the vector width decides.
 */
#include "common/pe-ref.h"
#include "embedding.h"

#include "avx512/intrin-avx512.h"

static inline __mmask16 tail_mask(size_t n)
{
    return (__mmask16)((1u << n) - 1u);
}

static inline __m512 scale_add16(const float *e, __m512 vscale, const float *pe)
{
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(e), vscale);
    return pe ? _mm512_add_ps(v, _mm512_loadu_ps(pe)) : v;
}

/* out[0 .. n) for n < 16: a row's head or tail. */
static inline void embedding_part(float *out, const float *e, __m512 vscale, const float *pe,
                                  size_t n)
{
    const __mmask16 m = tail_mask(n);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, e), vscale);
    if (pe)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, pe));
    _mm512_mask_storeu_ps(out, m, v);
}

/* Four vectors an iteration: two loads, a multiply, an add and a store per
   vector leave the loop overhead a small share.  Streaming stores need
   64-byte aligned addresses: the floats before the first boundary go
   through an ordinary masked store.  Each iteration also prefetches the
   matching lines of next (embedding.h); pf is where that stopped. */
static inline __attribute__((always_inline)) void embedding_row(float *out, const float *e,
                                                                float scale, const float *pe,
                                                                size_t n, bool stream,
                                                                const float *next)
{
    const __m512 vscale = _mm512_set1_ps(scale);
    size_t j = 0, pf = 0;
    if (stream) {
        j = (64 - ((uintptr_t)out & 63)) / sizeof(float) & 15;
        j = j < n ? j : n;
        if (j)
            embedding_part(out, e, vscale, pe, j);
        for (; j + 16 <= n; j += 16, pf = j) {
            peak_embedding_prefetch_part(next, j, 16);
            _mm512_stream_ps(out + j, scale_add16(e + j, vscale, pe ? pe + j : NULL));
        }
    }
    for (; j + 64 <= n; j += 64, pf = j) {
        peak_embedding_prefetch_part(next, j, 64);
        const __m512 v0 = scale_add16(e + j, vscale, pe ? pe + j : NULL);
        const __m512 v1 = scale_add16(e + j + 16, vscale, pe ? pe + j + 16 : NULL);
        const __m512 v2 = scale_add16(e + j + 32, vscale, pe ? pe + j + 32 : NULL);
        const __m512 v3 = scale_add16(e + j + 48, vscale, pe ? pe + j + 48 : NULL);
        _mm512_storeu_ps(out + j, v0);
        _mm512_storeu_ps(out + j + 16, v1);
        _mm512_storeu_ps(out + j + 32, v2);
        _mm512_storeu_ps(out + j + 48, v3);
    }
    peak_embedding_prefetch_rest(next, pf, n);
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(out + j, scale_add16(e + j, vscale, pe ? pe + j : NULL));
    if (j < n)
        embedding_part(out + j, e + j, vscale, pe ? pe + j : NULL, n - j);
}

/* pe == NULL (a fairseq pad token) is rare: one predictable branch. */
static inline __attribute__((always_inline)) void embedding_row_avx512(float *out, const float *e,
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
add_row_avx512(float *x, const float *pe, size_t n)
{
    size_t j = 0;
    for (; j + 32 <= n; j += 32) {
        const __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(pe + j));
        const __m512 v1 =
            _mm512_add_ps(_mm512_loadu_ps(x + j + 16), _mm512_loadu_ps(pe + j + 16));
        _mm512_storeu_ps(x + j, v0);
        _mm512_storeu_ps(x + j + 16, v1);
    }
    for (; j < n; j += 16) {
        const __mmask16 m = n - j < 16 ? tail_mask(n - j) : (__mmask16)0xffff;
        const __m512 v =
            _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, pe + j));
        _mm512_mask_storeu_ps(x + j, m, v);
    }
}

static void embed_sink(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1)
{
    peak_embed_fly_block(ctx, t0, t1, c0, c1, embedding_row_avx512, false);
}

static void embed_sink_stream(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1)
{
    peak_embed_fly_block(ctx, t0, t1, c0, c1, embedding_row_avx512, true);
}

static void pe_add_sink(void *ctx, size_t s0, size_t s1, size_t c0, size_t c1)
{
    peak_pe_add_fly_block(ctx, s0, s1, c0, c1, add_row_avx512);
}

void peak_f32_embed_pe__avx512(float *out, ptrdiff_t ld_out, const int32_t *ids,
                               const int64_t *pos, size_t n_tokens, size_t batch,
                               size_t seq_stride, const peak_embed_desc *desc, bool stream)
{
    assert(out && ids && pos && desc && desc->table && batch > 0);
    if (desc->pe)
        peak_embed_table_run(out, ld_out, ids, pos, n_tokens, batch, seq_stride, desc,
                             embedding_row_avx512, stream);
    else
        peak_embed_fly_run(out, ld_out, ids, pos, n_tokens, batch, seq_stride, desc,
                           embedding_row_avx512, peak_pe_rows__avx512, embed_sink,
                           embed_sink_stream, peak_f32_pe_table__avx512, stream);
    /* Streaming stores (large calls) are weakly ordered: fence them. */
    _mm_sfence();
}

void peak_f32_pe_add__avx512(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                             size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                             const peak_pe_params *params)
{
    assert(x && batch > 0 && seq_len > 0 && d_model > 0 && (size_t)ld_x >= d_model);
    if (pe)
        peak_pe_add_table_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe,
                              add_row_avx512);
    else if (!peak_pe_add_fly_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params,
                                  peak_pe_rows__avx512, pe_add_sink))
        peak_pe_add_ref(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params);
}
