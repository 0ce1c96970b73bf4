/*
 * f32-avx512.h - the AVX-512 tier's vector vocabulary: peak_vf (16 floats)
 * and peak_vd (8 doubles), the operations of f32-avx2.h under the same
 * names.  Row ends are one masked load or store: with mask registers they
 * cost what a plain one does.
 *
 * Header-only, static inline: AVX-512 F/DQ files only.  The intrinsics
 * come through avx512/intrin-avx512.h, so that the emulated tier of the
 * tests (SIMDe) compiles the same code.
 */
#ifndef PEAK_F32_AVX512_H
#define PEAK_F32_AVX512_H

#include "avx512/intrin-avx512.h"

#include <stddef.h>

#define PEAK_VF_LANES 16
#define PEAK_VD_LANES 8
/* Bytes a streaming store's address must be a multiple of. */
#define PEAK_VF_ALIGN 64

typedef __m512 peak_vf;
typedef __m512d peak_vd;

/* Lanes 0 .. n-1, n <= 16 (one cast of the whole: ?: would promote
   __mmask16 operands to int). */
static inline __mmask16 peak_avx512_first_lanes(size_t n)
{
    return (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
}

static inline peak_vf peak_vf_zero(void) { return _mm512_setzero_ps(); }
static inline peak_vf peak_vf_set1(float x) { return _mm512_set1_ps(x); }
static inline peak_vf peak_vf_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline void peak_vf_storeu(float *p, peak_vf v) { _mm512_storeu_ps(p, v); }
/* p a multiple of PEAK_VF_ALIGN bytes; weakly ordered: peak_vf_stream_fence. */
static inline void peak_vf_stream(float *p, peak_vf v) { _mm512_stream_ps(p, v); }
static inline void peak_vf_stream_fence(void) { _mm_sfence(); }

/* p[0 .. n) into lanes 0 .. n-1, +0 in the others, n <= 16: nothing past
   p[n - 1] is read (a masked-off lane never faults). */
static inline peak_vf peak_vf_load_first(const float *p, size_t n)
{
    return _mm512_maskz_loadu_ps(peak_avx512_first_lanes(n), p);
}

/* p[0 .. n) = lanes 0 .. n-1 of v, n <= 16; nothing else is written. */
static inline void peak_vf_store_first(float *p, peak_vf v, size_t n)
{
    _mm512_mask_storeu_ps(p, peak_avx512_first_lanes(n), v);
}

static inline peak_vf peak_vf_add(peak_vf a, peak_vf b) { return _mm512_add_ps(a, b); }
static inline peak_vf peak_vf_sub(peak_vf a, peak_vf b) { return _mm512_sub_ps(a, b); }
static inline peak_vf peak_vf_mul(peak_vf a, peak_vf b) { return _mm512_mul_ps(a, b); }
/* a * b + c, rounded once. */
static inline peak_vf peak_vf_fma(peak_vf a, peak_vf b, peak_vf c) { return _mm512_fmadd_ps(a, b, c); }
/* a > b ? a : b, lane by lane: b where either is NaN (VMAXPS). */
static inline peak_vf peak_vf_max(peak_vf a, peak_vf b) { return _mm512_max_ps(a, b); }

/* Lanes summed in halves: (i + 8), then (i + 4), (i + 2), (i + 1). */
static inline float peak_vf_reduce_add(peak_vf v) { return _mm512_reduce_add_ps(v); }
/* The largest lane, NaN lanes skipped unless all are NaN. */
static inline float peak_vf_reduce_max(peak_vf v) { return _mm512_reduce_max_ps(v); }

static inline peak_vd peak_vd_zero(void) { return _mm512_setzero_pd(); }
static inline peak_vd peak_vd_add(peak_vd a, peak_vd b) { return _mm512_add_pd(a, b); }

/* acc + (lo + hi): v's lower and upper halves widened to double, added
   lane by lane (lane i of the result takes v's lanes i and i + 8). */
static inline peak_vd peak_vd_add_widened(peak_vd acc, peak_vf v)
{
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi =
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    return _mm512_add_pd(acc, _mm512_add_pd(lo, hi));
}

/* Lanes summed in halves: (i + 4), then (i + 2), (i + 1). */
static inline double peak_vd_reduce_add(peak_vd v) { return _mm512_reduce_add_pd(v); }

#endif /* PEAK_F32_AVX512_H */
