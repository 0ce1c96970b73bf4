/*
 * f32-avx2.h - the AVX2 tier's vector vocabulary: peak_vf (8 floats) and
 * peak_vd (4 doubles), with the operations a kernel body written once for
 * every ISA uses (the same names in f32-avx512.h and f32-neon.h; a tier's
 * file includes exactly one of them).  Kernel files may still use the
 * intrinsics directly for what only this ISA does well.
 *
 * Stores: full vectors go through plain (or streaming) stores and a row
 * end through peak_vf_store_first, never VMASKMOVPS.  On AMD Zen 3 a
 * VMASKMOVPS store into L1 costs 3.9-4.8 ns, a plain 32-byte store 0.4-0.6
 * and the 4 + 2 + 1 sequence below 1.3-1.8 (doc/perf-notes.md, "AVX2
 * stores"); on Intel the masked store is cheap.  The sequence writes
 * exactly p[0 .. n), in address order, the bytes a masked store would, so
 * it also suits in-place rows, where an overlapping full store would
 * re-read an already overwritten source.
 *
 * Loads keep VMASKMOVPS (peak_avx2_first_lanes): the masked load is not
 * penalised like the store, and it reads nothing past the row.
 *
 * Header-only, static inline: AVX2 + FMA files only.
 */
#ifndef PEAK_F32_AVX2_H
#define PEAK_F32_AVX2_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* -1 then 0: 8 lanes from peak_avx2_lane_table + 8 - n set the first n. */
static const int32_t peak_avx2_lane_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                 0,  0,  0,  0,  0,  0,  0,  0};

/* A VMASKMOVPS mask with lanes 0 .. n-1 set, n <= 8. */
static inline __m256i peak_avx2_first_lanes(size_t n)
{
    return _mm256_loadu_si256((const __m256i *)(peak_avx2_lane_table + 8 - n));
}

/* p[0 .. n) = lanes 0 .. n-1 of x, n < 4: a 2-lane and a 1-lane store. */
static inline void peak_sse_store_first(float *p, __m128 x, size_t n)
{
    if (n & 2) {
        _mm_storel_pi((__m64 *)p, x);
        x = _mm_movehl_ps(x, x);
        p += 2;
    }
    if (n & 1)
        _mm_store_ss(p, x);
}

/* p[0 .. n) = lanes 0 .. n-1 of v, n < 8; nothing else is written. */
static inline void peak_avx2_store_first(float *p, __m256 v, size_t n)
{
    __m128 x = _mm256_castps256_ps128(v);
    if (n & 4) {
        _mm_storeu_ps(p, x);
        x = _mm256_extractf128_ps(v, 1);
        p += 4;
    }
    peak_sse_store_first(p, x, n & 3);
}

/* ---- the vocabulary ------------------------------------------------------ */

/* This tier's kernel symbol (kernels.inc): PEAK_TIER_FN(peak_f32_softmax) is
   peak_f32_softmax__avx2.  The family bodies define their kernels with it. */
#define PEAK_TIER_FN(name) name##__avx2

#define PEAK_VF_LANES 8
#define PEAK_VD_LANES 4
/* Bytes a streaming store's address must be a multiple of. */
#define PEAK_VF_ALIGN 32

typedef __m256 peak_vf;
typedef __m256d peak_vd;
/* Half a peak_vf: the PEAK_VD_LANES floats a peak_vd narrows to. */
typedef __m128 peak_vfh;

static inline peak_vf peak_vf_zero(void) { return _mm256_setzero_ps(); }
static inline peak_vf peak_vf_set1(float x) { return _mm256_set1_ps(x); }
static inline peak_vf peak_vf_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void peak_vf_storeu(float *p, peak_vf v) { _mm256_storeu_ps(p, v); }
/* p a multiple of PEAK_VF_ALIGN bytes (an aligned load and store). */
static inline peak_vf peak_vf_load(const float *p) { return _mm256_load_ps(p); }
static inline void peak_vf_store(float *p, peak_vf v) { _mm256_store_ps(p, v); }
/* p a multiple of PEAK_VF_ALIGN bytes; weakly ordered: peak_vf_stream_fence. */
static inline void peak_vf_stream(float *p, peak_vf v) { _mm256_stream_ps(p, v); }
static inline void peak_vf_stream_fence(void) { _mm_sfence(); }

/* p[0 .. n) into lanes 0 .. n-1, +0 in the others, n <= 8: nothing past
   p[n - 1] is read. */
static inline peak_vf peak_vf_load_first(const float *p, size_t n)
{
    return _mm256_maskload_ps(p, peak_avx2_first_lanes(n));
}

/* p[0 .. n) = lanes 0 .. n-1 of v, n <= 8; nothing else is written. */
static inline void peak_vf_store_first(float *p, peak_vf v, size_t n)
{
    if (n == PEAK_VF_LANES)
        _mm256_storeu_ps(p, v);
    else
        peak_avx2_store_first(p, v, n);
}

static inline peak_vf peak_vf_add(peak_vf a, peak_vf b) { return _mm256_add_ps(a, b); }
static inline peak_vf peak_vf_sub(peak_vf a, peak_vf b) { return _mm256_sub_ps(a, b); }
static inline peak_vf peak_vf_mul(peak_vf a, peak_vf b) { return _mm256_mul_ps(a, b); }
/* a * b + c, rounded once. */
static inline peak_vf peak_vf_fma(peak_vf a, peak_vf b, peak_vf c) { return _mm256_fmadd_ps(a, b, c); }
/* a / b, rounded once. */
static inline peak_vf peak_vf_div(peak_vf a, peak_vf b) { return _mm256_div_ps(a, b); }
/* a > b ? a : b, lane by lane: b where either is NaN (MAXPS). */
static inline peak_vf peak_vf_max(peak_vf a, peak_vf b) { return _mm256_max_ps(a, b); }
/* v, or lo where v < lo; NaN where v is NaN (lo is not). */
static inline peak_vf peak_vf_at_least(peak_vf v, peak_vf lo) { return _mm256_max_ps(lo, v); }
/* v, or hi where v > hi; NaN where v is NaN (hi is not). */
static inline peak_vf peak_vf_at_most(peak_vf v, peak_vf hi) { return _mm256_min_ps(hi, v); }
/* Rounded down to an integer. */
static inline peak_vf peak_vf_floor(peak_vf v) { return _mm256_floor_ps(v); }
/* v with its sign bit cleared: |v|, a NaN kept. */
static inline peak_vf peak_vf_abs(peak_vf v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
/* v's magnitude with s's sign bit (copysign). */
static inline peak_vf peak_vf_copysign(peak_vf v, peak_vf s)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, v), _mm256_and_ps(sign, s));
}
/* x where a < b, else y, lane by lane (y where a or b is NaN). */
static inline peak_vf peak_vf_select_lt(peak_vf a, peak_vf b, peak_vf x, peak_vf y)
{
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
/* Lanes 0 .. n-1 of v and fill in the others, n <= 8. */
static inline peak_vf peak_vf_first_or(peak_vf v, size_t n, float fill)
{
    return _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(peak_avx2_first_lanes(n)));
}
/* a + b, or x where b == x (so that a NaN or inf a cannot leak there). */
static inline peak_vf peak_vf_add_except(peak_vf a, peak_vf b, peak_vf x)
{
    return _mm256_blendv_ps(_mm256_add_ps(a, b), x, _mm256_cmp_ps(b, x, _CMP_EQ_OQ));
}
/* v, or +0 where v == x. */
static inline peak_vf peak_vf_zero_where_eq(peak_vf v, peak_vf x)
{
    return _mm256_andnot_ps(_mm256_cmp_ps(v, x, _CMP_EQ_OQ), v);
}
/* True if a lane has a != b, or a NaN in either. */
static inline bool peak_vf_any_ne(peak_vf a, peak_vf b)
{
    return _mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_NEQ_UQ)) != 0;
}
/* True if a < b in every lane (false where either is NaN). */
static inline bool peak_vf_all_lt(peak_vf a, peak_vf b)
{
    return _mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ)) == 0xff;
}
/* v, hidden from the optimiser: a loop storing a known constant would
   become a call to memset, which costs more than a short row's stores. */
static inline peak_vf peak_vf_opaque(peak_vf v)
{
    __asm__("" : "+x"(v));
    return v;
}

/* Lanes summed as ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)). */
static inline float peak_vf_reduce_add(peak_vf v)
{
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* Lane j: peak_vf_reduce_add(v[j]) bit for bit, for 8 vectors at once in
   three levels of shuffles and adds (21 operations where 8 reductions take
   48).  The levels pair lanes (i + 4), (i + 2), (i + 1) and leave input
   slot s's sum in lane 4 (s % 2) + s / 2, so slot s takes v[that]. */
static inline peak_vf peak_vf_sum_lanes(const peak_vf v[8])
{
    __m256 x[4], y[2];
    for (int i = 0; i < 4; i++) {
        const __m256 a = v[4 * ((2 * i) % 2) + (2 * i) / 2];
        const __m256 b = v[4 * ((2 * i + 1) % 2) + (2 * i + 1) / 2];
        x[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    }
    for (int i = 0; i < 2; i++)
        y[i] = _mm256_add_ps(_mm256_shuffle_ps(x[2 * i], x[2 * i + 1], 0x44),
                             _mm256_shuffle_ps(x[2 * i], x[2 * i + 1], 0xee));
    return _mm256_add_ps(_mm256_shuffle_ps(y[0], y[1], 0x88), _mm256_shuffle_ps(y[0], y[1], 0xdd));
}

/* The largest lane, NaN lanes skipped unless all are NaN. */
static inline float peak_vf_reduce_max(peak_vf v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline peak_vfh peak_vfh_set1(float x) { return _mm_set1_ps(x); }
static inline peak_vfh peak_vfh_loadu(const float *p) { return _mm_loadu_ps(p); }
static inline void peak_vfh_storeu(float *p, peak_vfh v) { _mm_storeu_ps(p, v); }
/* p a multiple of PEAK_VF_ALIGN / 2 bytes; weakly ordered: peak_vf_stream_fence. */
static inline void peak_vfh_stream(float *p, peak_vfh v) { _mm_stream_ps(p, v); }

/* p[0 .. n) = lanes 0 .. n-1 of v, n <= 4; nothing else is written. */
static inline void peak_vfh_store_first(float *p, peak_vfh v, size_t n)
{
    if (n == PEAK_VD_LANES)
        _mm_storeu_ps(p, v);
    else
        peak_sse_store_first(p, v, n);
}

static inline peak_vfh peak_vfh_mul(peak_vfh a, peak_vfh b) { return _mm_mul_ps(a, b); }
/* v's lanes 0 .. 3 and 4 .. 7. */
static inline peak_vfh peak_vf_low(peak_vf v) { return _mm256_castps256_ps128(v); }
static inline peak_vfh peak_vf_high(peak_vf v) { return _mm256_extractf128_ps(v, 1); }

/* (v1 v0 v3 v2 ...): each pair of lanes swapped (VPERMILPS, in-lane). */
static inline peak_vf peak_vf_swap_pairs(peak_vf v) { return _mm256_permute_ps(v, 0xb1); }

/* (a0 b0 a1 b1 ...): the lanes of two halves interleaved into one peak_vf. */
static inline peak_vf peak_vf_interleave(peak_vfh a, peak_vfh b)
{
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_unpacklo_ps(a, b)),
                                _mm_unpackhi_ps(a, b), 1);
}

static inline peak_vd peak_vd_zero(void) { return _mm256_setzero_pd(); }
static inline peak_vd peak_vd_add(peak_vd a, peak_vd b) { return _mm256_add_pd(a, b); }
static inline peak_vd peak_vd_set1(double x) { return _mm256_set1_pd(x); }
/* p a multiple of PEAK_VD_LANES * 8 bytes. */
static inline peak_vd peak_vd_load(const double *p) { return _mm256_load_pd(p); }
static inline void peak_vd_store(double *p, peak_vd v) { _mm256_store_pd(p, v); }
static inline peak_vd peak_vd_sub(peak_vd a, peak_vd b) { return _mm256_sub_pd(a, b); }
static inline peak_vd peak_vd_mul(peak_vd a, peak_vd b) { return _mm256_mul_pd(a, b); }
/* a * b + c, rounded once. */
static inline peak_vd peak_vd_fma(peak_vd a, peak_vd b, peak_vd c) { return _mm256_fmadd_pd(a, b, c); }
/* c - a * b, rounded once. */
static inline peak_vd peak_vd_fnma(peak_vd a, peak_vd b, peak_vd c) { return _mm256_fnmadd_pd(a, b, c); }
/* a * b - c, rounded once. */
static inline peak_vd peak_vd_fms(peak_vd a, peak_vd b, peak_vd c) { return _mm256_fmsub_pd(a, b, c); }
/* Lanes rounded to float (to nearest). */
static inline peak_vfh peak_vd_narrow(peak_vd v) { return _mm256_cvtpd_ps(v); }
/* Lanes widened to double (exact). */
static inline peak_vd peak_vd_widen(peak_vfh v) { return _mm256_cvtps_pd(v); }

/* Bit i set where !(a[i] < b[i]): b[i] <= a[i], or either is NaN. */
static inline unsigned peak_vd_mask_not_lt(peak_vd a, peak_vd b)
{
    return (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_NLT_UQ));
}

/* On a key's bit pattern read as a 64-bit integer (where a shifter's
   add leaves a rounded integer): b where it is odd, else a. */
static inline peak_vd peak_vd_select_odd(peak_vd key, peak_vd a, peak_vd b)
{
    /* BLENDVPD keys on the sign bit: bit 0 moved there. */
    const __m256i odd = _mm256_slli_epi64(_mm256_castpd_si256(key), 63);
    return _mm256_blendv_pd(a, b, _mm256_castsi256_pd(odd));
}

/* x with its sign flipped (the exact -x) where bit 1 of key's pattern is set. */
static inline peak_vd peak_vd_negate_bit1(peak_vd x, peak_vd key)
{
    const __m256i bit1 = _mm256_and_si256(_mm256_castpd_si256(key), _mm256_set1_epi64x(2));
    const __m256i sign = _mm256_slli_epi64(bit1, 62);
    return _mm256_castsi256_pd(_mm256_xor_si256(_mm256_castpd_si256(x), sign));
}

/* key's bit pattern plus 1, as a 64-bit integer. */
static inline peak_vd peak_vd_inc_bits(peak_vd key)
{
    return _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(key), _mm256_set1_epi64x(1)));
}

/* acc + (lo + hi): v's lower and upper halves widened to double, added
   lane by lane (lane i of the result takes v's lanes i and i + 4). */
static inline peak_vd peak_vd_add_widened(peak_vd acc, peak_vf v)
{
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    return _mm256_add_pd(acc, _mm256_add_pd(lo, hi));
}

/* Lanes summed as (0 + 2) + (1 + 3). */
static inline double peak_vd_reduce_add(peak_vd v)
{
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* ---- int32 lanes (peak_vi): powers of two built in the exponent field --- */

typedef __m256i peak_vi;

static inline peak_vi peak_vi_set1(int32_t x) { return _mm256_set1_epi32(x); }
static inline peak_vi peak_vi_add(peak_vi a, peak_vi b) { return _mm256_add_epi32(a, b); }
static inline peak_vi peak_vi_sub(peak_vi a, peak_vi b) { return _mm256_sub_epi32(a, b); }
/* a >> 1, the sign bit copied: floor(a / 2). */
static inline peak_vi peak_vi_halve(peak_vi a) { return _mm256_srai_epi32(a, 1); }
/* v's bits, unchanged. */
static inline peak_vi peak_vf_as_vi(peak_vf v) { return _mm256_castps_si256(v); }
/* e's low 9 bits shifted into the sign and exponent fields: 2^(e - 127)
   for 1 <= e <= 254, +0 for e = 0. */
static inline peak_vf peak_vf_pow2_biased(peak_vi e) { return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)); }

/* ---- 16-bit element types (peak_convert; convert.h gives the bits) ---- */

/* NaN lanes with the fraction's top bit set (quiet). */
static inline peak_vf peak_vf_quiet_nan(peak_vf v)
{
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_or_ps(v, _mm256_and_ps(nan, _mm256_castsi256_ps(_mm256_set1_epi32(0x400000))));
}

/* 8 bfloat16 as floats, shifted up: exact, a signalling NaN left as it is
   (for arithmetic, which quiets it). */
static inline peak_vf peak_vf_load_bf16_bits(const uint16_t *p)
{
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}

/* 8 bfloat16 as floats: shifted up, exact; NaN quieted. */
static inline peak_vf peak_vf_load_bf16(const uint16_t *p)
{
    return peak_vf_quiet_nan(peak_vf_load_bf16_bits(p));
}

/* 8 floats as bfloat16: + 0x7fff + the kept part's lowest bit, the top
   half (ties to even, overflow to inf); NaN: its top half, quieted. */
static inline peak_vfh peak_vf_narrow_bf16(peak_vf v)
{
    const __m256i u = _mm256_castps_si256(v), hi = _mm256_srli_epi32(u, 16);
    const __m256i odd = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i r =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    const __m256i h = _mm256_blendv_epi8(r, q, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    /* Each 128-bit lane packs its 4 values twice; qwords 0 and 2 hold 0..7. */
    return _mm_castsi128_ps(
        _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08)));
}

static inline void peak_vf_store_bf16(uint16_t *p, peak_vf v)
{
    _mm_storeu_ps((float *)(void *)p, peak_vf_narrow_bf16(v));
}

/* float16 needs F16C, which the AVX2 tier does not require: its users
   carry this attribute and run only where peak_cpu_features() has it. */
#define PEAK_VF_F16_TARGET __attribute__((target("f16c")))

/* 8 float16 as floats (VCVTPH2PS: exact, NaN quieted). */
PEAK_VF_F16_TARGET static inline peak_vf peak_vf_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* 8 floats as float16 (VCVTPS2PH, round to nearest even by its immediate,
   not MXCSR). */
PEAK_VF_F16_TARGET static inline peak_vfh peak_vf_narrow_f16(peak_vf v)
{
    return _mm_castsi128_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

PEAK_VF_F16_TARGET static inline void peak_vf_store_f16(uint16_t *p, peak_vf v)
{
    _mm_storeu_ps((float *)(void *)p, peak_vf_narrow_f16(v));
}

#endif /* PEAK_F32_AVX2_H */
