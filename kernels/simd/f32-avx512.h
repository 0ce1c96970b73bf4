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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* This tier's kernel symbol (kernels.inc): PEAK_TIER_FN(peak_f32_softmax) is
   peak_f32_softmax__avx512.  The family bodies define their kernels with it. */
#define PEAK_TIER_FN(name) name##__avx512

#define PEAK_VF_LANES 16
#define PEAK_VD_LANES 8
/* Bytes a streaming store's address must be a multiple of. */
#define PEAK_VF_ALIGN 64

typedef __m512 peak_vf;
typedef __m512d peak_vd;
/* Half a peak_vf: the PEAK_VD_LANES floats a peak_vd narrows to. */
typedef __m256 peak_vfh;

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
/* p a multiple of PEAK_VF_ALIGN bytes (an aligned load and store). */
static inline peak_vf peak_vf_load(const float *p) { return _mm512_load_ps(p); }
static inline void peak_vf_store(float *p, peak_vf v) { _mm512_store_ps(p, v); }
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
/* a / b, rounded once. */
static inline peak_vf peak_vf_div(peak_vf a, peak_vf b) { return _mm512_div_ps(a, b); }
/* a > b ? a : b, lane by lane: b where either is NaN (VMAXPS). */
static inline peak_vf peak_vf_max(peak_vf a, peak_vf b) { return _mm512_max_ps(a, b); }
/* v, or lo where v < lo; NaN where v is NaN (lo is not). */
static inline peak_vf peak_vf_at_least(peak_vf v, peak_vf lo) { return _mm512_max_ps(lo, v); }
/* v, or hi where v > hi; NaN where v is NaN (hi is not). */
static inline peak_vf peak_vf_at_most(peak_vf v, peak_vf hi) { return _mm512_min_ps(hi, v); }
/* Rounded down to an integer. */
static inline peak_vf peak_vf_floor(peak_vf v)
{
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
/* v with its sign bit cleared: |v|, a NaN kept. */
static inline peak_vf peak_vf_abs(peak_vf v) { return _mm512_andnot_ps(_mm512_set1_ps(-0.0f), v); }
/* v's magnitude with s's sign bit (copysign). */
static inline peak_vf peak_vf_copysign(peak_vf v, peak_vf s)
{
    const __m512 sign = _mm512_set1_ps(-0.0f);
    return _mm512_or_ps(_mm512_andnot_ps(sign, v), _mm512_and_ps(sign, s));
}
/* x where a < b, else y, lane by lane (y where a or b is NaN). */
static inline peak_vf peak_vf_select_lt(peak_vf a, peak_vf b, peak_vf x, peak_vf y)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
}
/* Lanes 0 .. n-1 of v and fill in the others, n <= 16. */
static inline peak_vf peak_vf_first_or(peak_vf v, size_t n, float fill)
{
    return _mm512_mask_mov_ps(_mm512_set1_ps(fill), peak_avx512_first_lanes(n), v);
}
/* a + b, or x where b == x (so that a NaN or inf a cannot leak there). */
static inline peak_vf peak_vf_add_except(peak_vf a, peak_vf b, peak_vf x)
{
    return _mm512_mask_add_ps(x, _mm512_cmp_ps_mask(b, x, _CMP_NEQ_UQ), a, b);
}
/* v, or +0 where v == x. */
static inline peak_vf peak_vf_zero_where_eq(peak_vf v, peak_vf x)
{
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, x, _CMP_EQ_OQ), v, _mm512_setzero_ps());
}
/* True if a lane has a != b, or a NaN in either. */
static inline bool peak_vf_any_ne(peak_vf a, peak_vf b)
{
    return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ) != 0;
}
/* True if a < b in every lane (false where either is NaN). */
static inline bool peak_vf_all_lt(peak_vf a, peak_vf b)
{
    return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) == 0xffff;
}
/* v, hidden from the optimiser: a loop storing a known constant would
   become a call to memset, which costs more than a short row's stores.
   (The emulated tier's vectors have no register class: memory.) */
static inline peak_vf peak_vf_opaque(peak_vf v)
{
#if defined(PEAK_SIMDE_AVX512)
    __asm__("" : "+m"(v));
#else
    __asm__("" : "+v"(v));
#endif
    return v;
}

/* Lanes summed in halves: (i + 8), then (i + 4), (i + 2), (i + 1). */
static inline float peak_vf_reduce_add(peak_vf v) { return _mm512_reduce_add_ps(v); }
/* The largest lane, NaN lanes skipped unless all are NaN. */
static inline float peak_vf_reduce_max(peak_vf v) { return _mm512_reduce_max_ps(v); }

/* Lane j: peak_vf_reduce_add(v[j]) bit for bit, for 16 vectors at once in
   four levels of shuffles and adds (45 operations where 16 reductions take
   128).  The levels pair lanes (i + 8), (i + 4), (i + 2), (i + 1) and leave
   input slot s's sum in lane 4 (s % 4) + s / 4, so slot s takes v[that]. */
static inline peak_vf peak_vf_sum_lanes(const peak_vf v[16])
{
    peak_vf x[8], y[4], z[2];
    for (int i = 0; i < 8; i++) {
        const peak_vf a = v[4 * ((2 * i) % 4) + (2 * i) / 4];
        const peak_vf b = v[4 * ((2 * i + 1) % 4) + (2 * i + 1) / 4];
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
    }
    for (int i = 0; i < 4; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], 0xdd));
    for (int i = 0; i < 2; i++)
        z[i] = _mm512_add_ps(_mm512_shuffle_ps(y[2 * i], y[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(y[2 * i], y[2 * i + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x88), _mm512_shuffle_ps(z[0], z[1], 0xdd));
}

static inline peak_vfh peak_vfh_set1(float x) { return _mm256_set1_ps(x); }
static inline peak_vfh peak_vfh_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void peak_vfh_storeu(float *p, peak_vfh v) { _mm256_storeu_ps(p, v); }
/* p a multiple of PEAK_VF_ALIGN / 2 bytes; weakly ordered: peak_vf_stream_fence. */
static inline void peak_vfh_stream(float *p, peak_vfh v) { _mm256_stream_ps(p, v); }

/* p[0 .. n) = lanes 0 .. n-1 of v, n <= 8; nothing else is written. */
static inline void peak_vfh_store_first(float *p, peak_vfh v, size_t n)
{
    _mm256_mask_storeu_ps(p, (__mmask8)((1u << n) - 1u), v);
}

static inline peak_vfh peak_vfh_mul(peak_vfh a, peak_vfh b) { return _mm256_mul_ps(a, b); }
/* v's lanes 0 .. 7 and 8 .. 15. */
static inline peak_vfh peak_vf_low(peak_vf v) { return _mm512_castps512_ps256(v); }
static inline peak_vfh peak_vf_high(peak_vf v)
{
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* (v1 v0 v3 v2 ...): each pair of lanes swapped (VSHUFPS of v with itself,
   in-lane; the same as VPERMILPS, which SIMDe 0.7.4 lacks). */
static inline peak_vf peak_vf_swap_pairs(peak_vf v) { return _mm512_shuffle_ps(v, v, 0xb1); }

/* (a0 b0 a1 b1 ...): the lanes of two halves interleaved into one peak_vf. */
static inline peak_vf peak_vf_interleave(peak_vfh a, peak_vfh b)
{
    /* Lanes 0-7 of a with lanes 0-7 of b (index 16+): the upper halves of
       the casts are never selected. */
    const __m512i idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    return _mm512_permutex2var_ps(_mm512_castps256_ps512(a), idx, _mm512_castps256_ps512(b));
}

static inline peak_vd peak_vd_zero(void) { return _mm512_setzero_pd(); }
static inline peak_vd peak_vd_add(peak_vd a, peak_vd b) { return _mm512_add_pd(a, b); }
static inline peak_vd peak_vd_set1(double x) { return _mm512_set1_pd(x); }
/* p a multiple of PEAK_VD_LANES * 8 bytes. */
static inline peak_vd peak_vd_load(const double *p) { return _mm512_load_pd(p); }
static inline void peak_vd_store(double *p, peak_vd v) { _mm512_store_pd(p, v); }
static inline peak_vd peak_vd_sub(peak_vd a, peak_vd b) { return _mm512_sub_pd(a, b); }
static inline peak_vd peak_vd_mul(peak_vd a, peak_vd b) { return _mm512_mul_pd(a, b); }
/* a * b + c, rounded once. */
static inline peak_vd peak_vd_fma(peak_vd a, peak_vd b, peak_vd c) { return _mm512_fmadd_pd(a, b, c); }
/* c - a * b, rounded once. */
static inline peak_vd peak_vd_fnma(peak_vd a, peak_vd b, peak_vd c) { return _mm512_fnmadd_pd(a, b, c); }
/* a * b - c, rounded once. */
static inline peak_vd peak_vd_fms(peak_vd a, peak_vd b, peak_vd c) { return _mm512_fmsub_pd(a, b, c); }
/* Lanes rounded to float (to nearest). */
static inline peak_vfh peak_vd_narrow(peak_vd v) { return _mm512_cvtpd_ps(v); }
/* Lanes widened to double (exact). */
static inline peak_vd peak_vd_widen(peak_vfh v) { return _mm512_cvtps_pd(v); }

/* Bit i set where !(a[i] < b[i]): b[i] <= a[i], or either is NaN. */
static inline unsigned peak_vd_mask_not_lt(peak_vd a, peak_vd b)
{
    return (unsigned)_mm512_cmp_pd_mask(a, b, _CMP_NLT_UQ);
}

/* On a key's bit pattern read as a 64-bit integer (where a shifter's
   add leaves a rounded integer): b where it is odd, else a. */
static inline peak_vd peak_vd_select_odd(peak_vd key, peak_vd a, peak_vd b)
{
    const __mmask8 odd = _mm512_test_epi64_mask(_mm512_castpd_si512(key), _mm512_set1_epi64(1));
    return _mm512_mask_blend_pd(odd, a, b);
}

/* x with its sign flipped (the exact -x) where bit 1 of key's pattern is set. */
static inline peak_vd peak_vd_negate_bit1(peak_vd x, peak_vd key)
{
    const __m512i bit1 = _mm512_and_si512(_mm512_castpd_si512(key), _mm512_set1_epi64(2));
    const __m512i sign = _mm512_slli_epi64(bit1, 62);
    return _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(x), sign));
}

/* key's bit pattern plus 1, as a 64-bit integer. */
static inline peak_vd peak_vd_inc_bits(peak_vd key)
{
    return _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(key), _mm512_set1_epi64(1)));
}

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

/* ---- int32 lanes (peak_vi): powers of two built in the exponent field --- */

typedef __m512i peak_vi;

static inline peak_vi peak_vi_set1(int32_t x) { return _mm512_set1_epi32(x); }
static inline peak_vi peak_vi_add(peak_vi a, peak_vi b) { return _mm512_add_epi32(a, b); }
static inline peak_vi peak_vi_sub(peak_vi a, peak_vi b) { return _mm512_sub_epi32(a, b); }
/* a >> 1, the sign bit copied: floor(a / 2). */
static inline peak_vi peak_vi_halve(peak_vi a) { return _mm512_srai_epi32(a, 1); }
/* v's bits, unchanged. */
static inline peak_vi peak_vf_as_vi(peak_vf v) { return _mm512_castps_si512(v); }
/* e's low 9 bits shifted into the sign and exponent fields: 2^(e - 127)
   for 1 <= e <= 254, +0 for e = 0. */
static inline peak_vf peak_vf_pow2_biased(peak_vi e) { return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23)); }

/* ---- 16-bit element types (peak_convert; convert.h gives the bits) ---- */

/* NaN lanes with the fraction's top bit set (quiet). */
static inline peak_vf peak_vf_quiet_nan(peak_vf v)
{
    const __m512i u = _mm512_castps_si512(v);
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(u, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), u,
                                                    _mm512_set1_epi32(0x400000)));
}

/* 16 bfloat16 as floats, shifted up: exact, a signalling NaN left as it
   is (for arithmetic, which quiets it: 2 instructions where quieting took
   4). */
static inline peak_vf peak_vf_load_bf16_bits(const uint16_t *p)
{
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

/* 16 bfloat16 as floats: shifted up, exact; NaN quieted. */
static inline peak_vf peak_vf_load_bf16(const uint16_t *p)
{
    return peak_vf_quiet_nan(peak_vf_load_bf16_bits(p));
}

/* 16 floats as bfloat16: + 0x7fff + the kept part's lowest bit, the top
   half (ties to even, overflow to inf); NaN: its top half, quieted.
   Integer operations, not VCVTNEPS2BF16, which flushes subnormals. */
static inline peak_vfh peak_vf_narrow_bf16(peak_vf v)
{
    const __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
    const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i h =
        _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    h = _mm512_mask_or_epi32(h, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x40));
    return _mm256_castsi256_ps(_mm512_cvtepi32_epi16(h));
}

static inline void peak_vf_store_bf16(uint16_t *p, peak_vf v)
{
    _mm256_storeu_ps((float *)(void *)p, peak_vf_narrow_bf16(v));
}

/* AVX-512 F has the 512-bit float16 conversions: no attribute needed. */
#define PEAK_VF_F16_TARGET

/* 16 float16 as floats (VCVTPH2PS: exact, NaN quieted). */
static inline peak_vf peak_vf_load_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
}

/* 16 floats as float16 (VCVTPS2PH, round to nearest even by its
   immediate, not MXCSR). */
static inline peak_vfh peak_vf_narrow_f16(peak_vf v)
{
    return _mm256_castsi256_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

static inline void peak_vf_store_f16(uint16_t *p, peak_vf v)
{
    _mm256_storeu_ps((float *)(void *)p, peak_vf_narrow_f16(v));
}

#endif /* PEAK_F32_AVX512_H */
