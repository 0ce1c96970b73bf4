/*
 * peak-simde-avx512.h - AVX-512 intrinsics on a CPU without AVX-512, for
 * the test suite's emulated AVX-512 tier only (tests/meson.build,
 * "avx512-emulated"; kernels/avx512/intrin-avx512.h includes this file
 * when PEAK_SIMDE_AVX512 is defined).  Never part of libpeak.
 *
 * The sources in kernels/avx512/ are compiled a second time with -mavx2
 * -mfma and no AVX-512 flag.  SIMDe (Debian's libsimde-dev 0.7.4)
 * implements most of their 512-bit intrinsics with native AVX2 + FMA (two
 * ymm halves: the same IEEE operations, MXCSR rounding, FTZ and DAZ as the
 * hardware's); this header supplies the ones it lacks and replaces the
 * ones whose SIMDe version differs from the hardware where these kernels
 * look.  An intrinsic SIMDe lacks binds silently to GCC's own AVX-512
 * function and fails to compile ("inlining failed ... target specific
 * option mismatch"): add it here, written from Intel's documented
 * operation of the instruction (the Intrinsics Guide's pseudo-code, the
 * SDM's special-case tables), never from another implementation.
 *
 * Supplied (SIMDe 0.7.4 has no such function):
 *   _mm512_maskz_loadu_ps, _mm512_maskz_load_ps, _mm512_mask_storeu_ps,
 *   _mm256_mask_storeu_ps, _mm_maskz_loadu_epi8, _mm_mask_test_epi8_mask,
 *   _mm512_mask_cmp_ps_mask, _mm512_cvtps_pd, _mm512_cvtpd_ps,
 *   _mm512_extractf32x8_ps, _mm512_stream_ps, _mm512_reduce_add_ps,
 *   _mm512_reduce_add_pd, _mm512_reduce_max_ps, _mm512_reduce_ps
 * Named (SIMDe 0.7.4 has simde_mm512_shuffle_f32x4 but not its native
 *   name): _mm512_shuffle_f32x4.
 * Supplied for peak_convert: _mm512_cvtepu16_epi32, _mm512_cvtepi32_epi16
 *   (element by element), _mm512_cvtph_ps and _mm512_cvtps_ph (the
 *   same instructions' 256-bit F16C forms on each half: the emulated tier
 *   needs F16C, which every AVX2 CPU peak's CI meets has; only the
 *   immediate peak passes, round to nearest even).
 * Replaced (SIMDe's differs from the hardware):
 *   _mm512_scalef_ps, _mm512_maskz_scalef_ps; and _mm512_load_ps,
 *   _mm512_store_ps, _mm512_load_pd, _mm512_store_pd, which gain the
 *   hardware's alignment fault.
 *
 * Where the emulation could differ from the hardware, and what is done:
 *
 * - VSCALEFPS (exp-avx512.h: peak_avx512_exp and peak_avx512_exp2_maskz,
 *   so peak_exp, attention's 2^t and the exp2 of the tests).  SIMDe 0.7.4
 *   computes a * exp2f(floor(b)) with denormal a and b always flushed to
 *   zero.  That gives +inf where the kernel's e^x is p * 2^128 with p < 1
 *   (finite: x in about [88.38, 88.72]), 0 where it is p * 2^-150 (2^-149
 *   after rounding when p > 1), NaN for 0 * 2^(n >= 128), and 2^0 instead
 *   of 2^-1 for exp2 of a tiny negative denormal t (floor(t) = -1, but b
 *   flushed to 0), without MXCSR.DAZ being set: test-exp fails 4 of its 8
 *   checks on SIMDe's version.  Replaced by the SDM's SCALE() pseudo-code
 *   (DAZ only when MXCSR.DAZ is set, one rounding of a * 2^floor(b) under
 *   MXCSR.RC, FTZ through the final conversion) and its table of special
 *   cases (NaN, +-inf and +-0 operands), lane by lane.
 * - VREDUCEPS (exp-avx512.h: peak_avx512_exp2_maskz, attention's 2^t, imm8
 *   = round down).  Not in SIMDe 0.7.4.  Written from the SDM's
 *   ReduceArgumentSP() for M = imm8[7:4] = 0: src - ROUND(src) with the
 *   subtraction rounded by imm8's rounding control (not MXCSR's), +0 for
 *   +-inf, -0 for an exact zero under round-down (+0 otherwise), the quiet
 *   source for NaN.  The inexact case (src in (-1, 0) under round-down) is
 *   the one the kernel's header documents (r rounded down, where AVX2's
 *   subtraction rounds to nearest); it is reproduced exactly.  M != 0,
 *   round-to-nearest and MXCSR rounding (imm8[2]) are not used by peak and
 *   are refused at compile time.  DAZ is applied to the source as for the
 *   other EVEX arithmetic; FTZ is not applied to the result (the
 *   pseudo-code does not say; only a denormal source that rounds to 0 can
 *   give a denormal result, and it is returned exactly).
 * - _mm512_reduce_add_ps/_pd, _mm512_reduce_max_ps (layernorm's shift
 *   guess and sums, the softmax's row maximum and sum, attention's dot
 *   products and sums):
 *   compiler sequences, not instructions.  Written as the Intrinsics
 *   Guide's REDUCE_ADD/REDUCE_MAX: fold the upper half onto the lower half
 *   until one element is left, so the additions happen in the same order as
 *   in GCC 12's expansion that the library runs (bit-identical sums).  For
 *   the maximum the Guide's (a > b ? a : b) and GCC's MAXPS(hi, lo) pick
 *   different operands for a NaN or for +0 against -0; the kernels never
 *   pass a NaN (their running maxima drop NaN scores) and the sign of a
 *   zero maximum changes no result (s - max, then 2^t).
 * - Masked loads and stores: element by element, so nothing outside the
 *   mask is read or written (as the hardware's fault suppression) and
 *   AddressSanitizer checks each element the kernel really touches.
 * - Alignment: VMOVAPS/VMOVAPD/VMOVNTPS fault on an address that is not
 *   64-byte aligned, masked or not; SIMDe's aligned loads and stores do
 *   not check.  Here they trap (__builtin_trap) as the hardware would.
 * - rcp14/rsqrt14, getexp, getmant, fixupimm, roundscale: not used by any
 *   AVX-512 kernel, so not provided; SIMDe's versions (where present) are
 *   not exercised.
 * - MXCSR exception flags are not emulated for the replaced intrinsics
 *   (peak never reads them).
 */
#ifndef PEAK_SIMDE_AVX512_H
#define PEAK_SIMDE_AVX512_H

#if !defined(__AVX2__) || !defined(__FMA__) || defined(__AVX512F__)
#error "peak-simde-avx512.h is for -mavx2 -mfma builds without AVX-512 flags"
#endif

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The element-by-element helpers stay out of line: inlined into every use
   in the kernels' unrolled, always_inline loops they made the emulated
   objects take minutes to compile under the sanitizers. */
#define PEAK_EMU_OUTLINE static __attribute__((noinline, unused))

/* ---- lane access and float bits ---------------------------------------- */

static inline uint32_t peak_emu_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float peak_emu_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#define PEAK_EMU_SIGN 0x80000000u
#define PEAK_EMU_ABS 0x7fffffffu
#define PEAK_EMU_INF 0x7f800000u
#define PEAK_EMU_QUIET 0x00400000u
#define PEAK_EMU_INDEFINITE 0xffc00000u /* the x86 "QNaN floating-point indefinite" */
#define PEAK_EMU_MXCSR_DAZ 0x0040u

static inline int peak_emu_is_nan(uint32_t u)
{
    return (u & PEAK_EMU_ABS) > PEAK_EMU_INF;
}

static inline int peak_emu_is_inf(uint32_t u)
{
    return (u & PEAK_EMU_ABS) == PEAK_EMU_INF;
}

/* "IF (SRC is denormal AND MXCSR.DAZ) THEN SRC = 0" (a zero of its sign). */
static inline uint32_t peak_emu_daz(uint32_t u, unsigned csr)
{
    const int denormal = (u & PEAK_EMU_INF) == 0 && (u & 0x007fffffu) != 0;
    return (csr & PEAK_EMU_MXCSR_DAZ) && denormal ? u & PEAK_EMU_SIGN : u;
}

static inline void peak_emu_check_aligned(const void *p)
{
    if ((uintptr_t)p & 63u)
        __builtin_trap(); /* the hardware's #GP */
}

/* ---- loads and stores ---------------------------------------------------- */

/* VMOVUPS zmm {k}{z}, m512: element j from memory where k[j], else +0. */
PEAK_EMU_OUTLINE __m512 peak_emu_mm512_maskz_loadu_ps(__mmask16 k, const void *mem)
{
    if (k == (__mmask16)0xffff)
        return simde_mm512_loadu_ps(mem);
    float v[16] = {0};
    for (unsigned j = 0; j < 16; j++)
        if (((unsigned)k >> j) & 1u)
            memcpy(&v[j], (const unsigned char *)mem + 4 * j, 4);
    __m512 r;
    memcpy(&r, v, sizeof r);
    return r;
}
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps(k, mem) peak_emu_mm512_maskz_loadu_ps((k), (mem))

/* VMOVAPS zmm {k}{z}, m512: the same, and a fault if mem is not 64-byte
   aligned whatever the mask. */
static inline __m512 peak_emu_mm512_maskz_load_ps(__mmask16 k, const void *mem)
{
    peak_emu_check_aligned(mem);
    return peak_emu_mm512_maskz_loadu_ps(k, mem);
}
#undef _mm512_maskz_load_ps
#define _mm512_maskz_load_ps(k, mem) peak_emu_mm512_maskz_load_ps((k), (mem))

/* VMOVUPS m512 {k}, zmm: element j to memory where k[j]; nothing else
   written. */
PEAK_EMU_OUTLINE void peak_emu_mm512_mask_storeu_ps(void *mem, __mmask16 k, __m512 a)
{
    if (k == (__mmask16)0xffff) {
        simde_mm512_storeu_ps(mem, a);
        return;
    }
    float v[16];
    memcpy(v, &a, sizeof v);
    for (unsigned j = 0; j < 16; j++)
        if (((unsigned)k >> j) & 1u)
            memcpy((unsigned char *)mem + 4 * j, &v[j], 4);
}
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps(mem, k, a) peak_emu_mm512_mask_storeu_ps((mem), (k), (a))

/* VMOVUPS m256 {k}, ymm (AVX512VL). */
PEAK_EMU_OUTLINE void peak_emu_mm256_mask_storeu_ps(void *mem, __mmask8 k, __m256 a)
{
    float v[8];
    memcpy(v, &a, sizeof v);
    for (unsigned j = 0; j < 8; j++)
        if (((unsigned)k >> j) & 1u)
            memcpy((unsigned char *)mem + 4 * j, &v[j], 4);
}
#undef _mm256_mask_storeu_ps
#define _mm256_mask_storeu_ps(mem, k, a) peak_emu_mm256_mask_storeu_ps((mem), (k), (a))

/* VMOVDQU8 xmm {k}{z}, m128 (AVX512BW + VL): byte j where k[j], else 0. */
PEAK_EMU_OUTLINE __m128i peak_emu_mm_maskz_loadu_epi8(__mmask16 k, const void *mem)
{
    unsigned char v[16] = {0};
    for (unsigned j = 0; j < 16; j++)
        if (((unsigned)k >> j) & 1u)
            v[j] = ((const unsigned char *)mem)[j];
    __m128i r;
    memcpy(&r, v, sizeof r);
    return r;
}
#undef _mm_maskz_loadu_epi8
#define _mm_maskz_loadu_epi8(k, mem) peak_emu_mm_maskz_loadu_epi8((k), (mem))

/* VMOVNTPS m512, zmm: non-temporal, and a fault if not 64-byte aligned;
   two non-temporal 32-byte stores here. */
static inline void peak_emu_mm512_stream_ps(void *mem, __m512 a)
{
    peak_emu_check_aligned(mem);
    const simde__m512_private p = simde__m512_to_private(a);
    _mm256_stream_ps((float *)mem, p.m256[0]);
    _mm256_stream_ps((float *)mem + 8, p.m256[1]);
}
#undef _mm512_stream_ps
#define _mm512_stream_ps(mem, a) peak_emu_mm512_stream_ps((mem), (a))

/* SIMDe's aligned forms, with the alignment fault added. */
static inline __m512 peak_emu_mm512_load_ps(const void *mem)
{
    peak_emu_check_aligned(mem);
    return simde_mm512_load_ps(mem);
}
static inline void peak_emu_mm512_store_ps(void *mem, __m512 a)
{
    peak_emu_check_aligned(mem);
    simde_mm512_store_ps(mem, a);
}
static inline __m512d peak_emu_mm512_load_pd(const void *mem)
{
    peak_emu_check_aligned(mem);
    return simde_mm512_load_pd(mem);
}
static inline void peak_emu_mm512_store_pd(void *mem, __m512d a)
{
    peak_emu_check_aligned(mem);
    simde_mm512_store_pd(mem, a);
}
#undef _mm512_load_ps
#define _mm512_load_ps(mem) peak_emu_mm512_load_ps((mem))
#undef _mm512_store_ps
#define _mm512_store_ps(mem, a) peak_emu_mm512_store_ps((mem), (a))
#undef _mm512_load_pd
#define _mm512_load_pd(mem) peak_emu_mm512_load_pd((mem))
#undef _mm512_store_pd
#define _mm512_store_pd(mem, a) peak_emu_mm512_store_pd((mem), (a))

/* ---- compares, conversions, extraction ----------------------------------- */

/* VCMPPS k {k1}, zmm, zmm, imm8: SIMDe's compare, ANDed with k1. */
#undef _mm512_mask_cmp_ps_mask
#define _mm512_mask_cmp_ps_mask(k1, a, b, imm8) \
    ((__mmask16)((k1) & simde_mm512_cmp_ps_mask((a), (b), (imm8))))

/* VPTESTMB k {k1}, xmm, xmm: bit j = k1[j] AND ((a AND b) byte j != 0). */
static inline __mmask16 peak_emu_mm_mask_test_epi8_mask(__mmask16 k1, __m128i a, __m128i b)
{
    const __m128i zero_bytes = _mm_cmpeq_epi8(_mm_and_si128(a, b), _mm_setzero_si128());
    return (__mmask16)((unsigned)k1 & ~(unsigned)_mm_movemask_epi8(zero_bytes));
}
#undef _mm_mask_test_epi8_mask
#define _mm_mask_test_epi8_mask(k1, a, b) peak_emu_mm_mask_test_epi8_mask((k1), (a), (b))

/* VCVTPS2PD zmm, ymm: exact widening (the native instruction per half). */
static inline __m512d peak_emu_mm512_cvtps_pd(__m256 a)
{
    simde__m512d_private r;
    r.m256d[0] = _mm256_cvtps_pd(_mm256_castps256_ps128(a));
    r.m256d[1] = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
    return simde__m512d_from_private(r);
}
#undef _mm512_cvtps_pd
#define _mm512_cvtps_pd(a) peak_emu_mm512_cvtps_pd((a))

/* VCVTPD2PS ymm, zmm: one rounding under MXCSR (the native instruction per
   half). */
static inline __m256 peak_emu_mm512_cvtpd_ps(__m512d a)
{
    const simde__m512d_private p = simde__m512d_to_private(a);
    return _mm256_set_m128(_mm256_cvtpd_ps(p.m256d[1]), _mm256_cvtpd_ps(p.m256d[0]));
}
#undef _mm512_cvtpd_ps
#define _mm512_cvtpd_ps(a) peak_emu_mm512_cvtpd_ps((a))

/* VEXTRACTF32X8 ymm, zmm, imm8 (AVX512DQ): the 256 bits imm8[0] selects. */
static inline __m256 peak_emu_mm512_extractf32x8_ps(__m512 a, int imm8)
{
    return simde__m512_to_private(a).m256[imm8 & 1];
}
#undef _mm512_extractf32x8_ps
#define _mm512_extractf32x8_ps(a, imm8) peak_emu_mm512_extractf32x8_ps((a), (imm8))

/* ---- horizontal reductions (the Intrinsics Guide's REDUCE_ADD/MAX) ------- */

PEAK_EMU_OUTLINE float peak_emu_mm512_reduce_add_ps(__m512 a)
{
    float v[16];
    memcpy(v, &a, sizeof v);
    for (unsigned len = 8; len >= 1; len /= 2)
        for (unsigned j = 0; j < len; j++)
            v[j] = v[j] + v[j + len];
    return v[0];
}
#undef _mm512_reduce_add_ps
#define _mm512_reduce_add_ps(a) peak_emu_mm512_reduce_add_ps((a))

PEAK_EMU_OUTLINE double peak_emu_mm512_reduce_add_pd(__m512d a)
{
    double v[8];
    memcpy(v, &a, sizeof v);
    for (unsigned len = 4; len >= 1; len /= 2)
        for (unsigned j = 0; j < len; j++)
            v[j] = v[j] + v[j + len];
    return v[0];
}
#undef _mm512_reduce_add_pd
#define _mm512_reduce_add_pd(a) peak_emu_mm512_reduce_add_pd((a))

PEAK_EMU_OUTLINE float peak_emu_mm512_reduce_max_ps(__m512 a)
{
    float v[16];
    memcpy(v, &a, sizeof v);
    for (unsigned len = 8; len >= 1; len /= 2)
        for (unsigned j = 0; j < len; j++)
            v[j] = v[j] > v[j + len] ? v[j] : v[j + len];
    return v[0];
}
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps(a) peak_emu_mm512_reduce_max_ps((a))

#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4(a, b, imm8) simde_mm512_shuffle_f32x4((a), (b), (imm8))

/* ---- 16-bit conversions --------------------------------------------------- */

/* VPMOVZXWD zmm, ymm: 16 words zero-extended to dwords. */
PEAK_EMU_OUTLINE __m512i peak_emu_mm512_cvtepu16_epi32(__m256i a)
{
    uint16_t in[16];
    uint32_t out[16];
    __m512i r;
    memcpy(in, &a, sizeof in);
    for (int i = 0; i < 16; i++)
        out[i] = in[i];
    memcpy(&r, out, sizeof r);
    return r;
}
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32(a) peak_emu_mm512_cvtepu16_epi32((a))

/* VPMOVDW ymm, zmm: each dword's low word (truncation). */
PEAK_EMU_OUTLINE __m256i peak_emu_mm512_cvtepi32_epi16(__m512i a)
{
    uint32_t in[16];
    uint16_t out[16];
    __m256i r;
    memcpy(in, &a, sizeof in);
    for (int i = 0; i < 16; i++)
        out[i] = (uint16_t)in[i];
    memcpy(&r, out, sizeof r);
    return r;
}
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16(a) peak_emu_mm512_cvtepi32_epi16((a))

/* _mm256_cvtph_ps and _mm256_cvtps_ph are the compiler's own F16C
   intrinsics here: SIMDe's avx512.h does not include its f16c.h, whose
   aliases would replace them with software. */
/* VCVTPH2PS zmm, ymm as two VCVTPH2PS ymm, xmm. */
__attribute__((target("f16c"), noinline, unused)) static __m512 peak_emu_mm512_cvtph_ps(__m256i a)
{
    __m128i half[2];
    float out[16];
    __m512 r;
    memcpy(half, &a, sizeof half);
    _mm256_storeu_ps(out, _mm256_cvtph_ps(half[0]));
    _mm256_storeu_ps(out + 8, _mm256_cvtph_ps(half[1]));
    memcpy(&r, out, sizeof r);
    return r;
}
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps(a) peak_emu_mm512_cvtph_ps((a))

/* VCVTPS2PH ymm, zmm, imm as two VCVTPS2PH xmm, ymm, imm (round to
   nearest even: the only immediate peak passes). */
__attribute__((target("f16c"), noinline, unused)) static __m256i peak_emu_mm512_cvtps_ph_rne(__m512 a)
{
    float in[16];
    __m128i half[2];
    __m256i r;
    memcpy(in, &a, sizeof in);
    half[0] = _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT);
    half[1] = _mm256_cvtps_ph(_mm256_loadu_ps(in + 8), _MM_FROUND_TO_NEAREST_INT);
    memcpy(&r, half, sizeof r);
    return r;
}
#undef _mm512_cvtps_ph
#define _mm512_cvtps_ph(a, imm) \
    ((void)sizeof(char[(imm) == _MM_FROUND_TO_NEAREST_INT ? 1 : -1]), peak_emu_mm512_cvtps_ph_rne((a)))

/* ---- VSCALEFPS ----------------------------------------------------------- */

/* One element of SCALE(SRC1, SRC2) = SRC1 * 2^floor(SRC2), with the SDM's
   special cases (VSCALEFPD/SD/PS/SS table):
       SRC1 \ SRC2  NaN          +inf             -inf             other
       QNaN         QNaN(SRC1)   +inf             +0               QNaN(SRC1)
       SNaN         QNaN(SRC1)   QNaN(SRC1)       QNaN(SRC1)       QNaN(SRC1)
       +-inf        QNaN(SRC2)   SRC1             indefinite       SRC1
       +-0          QNaN(SRC2)   indefinite       SRC1             SRC1
       finite       QNaN(SRC2)   +-inf            +-0              rounded
   The finite product is exact in double (|floor(SRC2)| clamped to 400: any
   exponent past +-278 already overflows or underflows every nonzero float
   the same way), so converting it to float rounds once, under MXCSR.RC and
   with MXCSR.FTZ, as the instruction does. */
static inline float peak_emu_scalef1(float src1, float src2, unsigned csr)
{
    const uint32_t a = peak_emu_daz(peak_emu_bits(src1), csr);
    const uint32_t b = peak_emu_daz(peak_emu_bits(src2), csr);
    const uint32_t a_sign = a & PEAK_EMU_SIGN;
    if (peak_emu_is_nan(a)) {
        const int a_quiet = (a & PEAK_EMU_QUIET) != 0;
        if (a_quiet && peak_emu_is_inf(b))
            return (b & PEAK_EMU_SIGN) ? 0.0f : peak_emu_float(PEAK_EMU_INF);
        return peak_emu_float(a | PEAK_EMU_QUIET);
    }
    if (peak_emu_is_nan(b))
        return peak_emu_float(b | PEAK_EMU_QUIET);
    const int a_zero = (a & PEAK_EMU_ABS) == 0;
    if (peak_emu_is_inf(b)) {
        if (!(b & PEAK_EMU_SIGN)) /* 2^+inf */
            return peak_emu_float(a_zero ? PEAK_EMU_INDEFINITE : a_sign | PEAK_EMU_INF);
        return peak_emu_float(peak_emu_is_inf(a) ? PEAK_EMU_INDEFINITE : a_sign); /* 2^-inf */
    }
    float n = floorf(peak_emu_float(b));
    n = n > 400.0f ? 400.0f : n < -400.0f ? -400.0f : n;
    const uint64_t two_n_bits = (uint64_t)((int64_t)n + 1023) << 52;
    double two_n;
    memcpy(&two_n, &two_n_bits, sizeof two_n);
    return (float)((double)peak_emu_float(a) * two_n);
}

PEAK_EMU_OUTLINE __m512 peak_emu_mm512_maskz_scalef_ps(__mmask16 k, __m512 a, __m512 b)
{
    const unsigned csr = _mm_getcsr();
    float va[16], vb[16], vr[16];
    memcpy(va, &a, sizeof va);
    memcpy(vb, &b, sizeof vb);
    for (unsigned j = 0; j < 16; j++)
        vr[j] = (((unsigned)k >> j) & 1u) ? peak_emu_scalef1(va[j], vb[j], csr) : 0.0f;
    __m512 r;
    memcpy(&r, vr, sizeof r);
    return r;
}
#undef _mm512_maskz_scalef_ps
#define _mm512_maskz_scalef_ps(k, a, b) peak_emu_mm512_maskz_scalef_ps((k), (a), (b))
#undef _mm512_scalef_ps
#define _mm512_scalef_ps(a, b) peak_emu_mm512_maskz_scalef_ps((__mmask16)0xffff, (a), (b))

/* ---- VREDUCEPS ------------------------------------------------------------ */

/* One element of ReduceArgumentSP(SRC, imm8) for M = imm8[7:4] = 0:
   SRC - ROUND(SRC), both steps under imm8[1:0] (1 = down, 2 = up, 3 =
   toward zero).  x - t is exact except for |x| < 1 with t = +-1, where a
   float subtraction (any MXCSR rounding) gives one of the two floats
   around the exact difference d; s + t is then exact (Sterbenz), so
   comparing it with x says on which side of d the float s lies, and s
   moves one step when the rounding direction asks for the other. */
static inline float peak_emu_reduce1(float src, unsigned rc, unsigned csr)
{
    const uint32_t u = peak_emu_daz(peak_emu_bits(src), csr);
    if (peak_emu_is_nan(u))
        return peak_emu_float(u | PEAK_EMU_QUIET);
    if (peak_emu_is_inf(u))
        return 0.0f;
    const float x = peak_emu_float(u);
    const float t = rc == 1 ? floorf(x) : rc == 2 ? ceilf(x) : truncf(x);
    if (x == t) /* includes x = +-0: an exact zero, -0 when rounding down */
        return rc == 1 ? -0.0f : 0.0f;
    if (t == 0.0f) /* x - 0 */
        return x;
    const float s = x - t;
    const float c = s + t;
    /* toward -inf: rounding down, or toward zero of a positive difference */
    const int down = rc == 1 || (rc == 3 && x > 0.0f);
    const uint32_t sb = peak_emu_bits(s);
    if (down && c > x) /* s above d: the float below s */
        return peak_emu_float((sb & PEAK_EMU_SIGN) ? sb + 1u : sb - 1u);
    if (!down && c < x) /* s below d: the float above s */
        return peak_emu_float((sb & PEAK_EMU_SIGN) ? sb - 1u : sb + 1u);
    return s;
}

PEAK_EMU_OUTLINE __m512 peak_emu_mm512_reduce_ps(__m512 a, unsigned imm8)
{
    const unsigned csr = _mm_getcsr();
    float v[16];
    memcpy(v, &a, sizeof v);
    for (unsigned j = 0; j < 16; j++)
        v[j] = peak_emu_reduce1(v[j], imm8 & 3u, csr);
    __m512 r;
    memcpy(&r, v, sizeof r);
    return r;
}
/* imm8: M = 0, rounding from imm8 (bit 2 clear), not to nearest; bit 3
   (suppress the precision exception) is free.  Anything else does not
   compile (an array of negative size). */
#undef _mm512_reduce_ps
#define _mm512_reduce_ps(a, imm8)                                                          \
    peak_emu_mm512_reduce_ps((a), (unsigned)(imm8) +                                       \
                                      0u * (unsigned)sizeof(char[((imm8) & 0xf4) == 0 &&   \
                                                                         ((imm8) & 3) != 0 \
                                                                     ? 1                   \
                                                                     : -1]))

#endif /* PEAK_SIMDE_AVX512_H */
