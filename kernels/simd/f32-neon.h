/*
 * f32-neon.h - the AArch64 AdvSIMD tier's vector vocabulary: peak_vf (4
 * floats) and peak_vd (2 doubles), the operations of f32-avx2.h under the
 * same names, with x86's semantics where they differ (peak_vf_max).
 *
 * AdvSIMD has no masked loads or stores: a row end goes through a 4-float
 * stack buffer (memcpy in and out), so nothing outside the row is read or
 * written.  ACLE has no non-temporal store: peak_vf_stream is a plain
 * store (Neoverse cores stop allocating a stream of full-line writes by
 * themselves) and the fence is empty.
 *
 * Header-only, static inline: AArch64 files only.
 */
#ifndef PEAK_F32_NEON_H
#define PEAK_F32_NEON_H

#include <arm_neon.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* This tier's kernel symbol (kernels.inc): PEAK_TIER_FN(peak_f32_softmax) is
   peak_f32_softmax__neon.  The family bodies define their kernels with it. */
#define PEAK_TIER_FN(name) name##__neon

#define PEAK_VF_LANES 4
#define PEAK_VD_LANES 2
/* Bytes a streaming store's address must be a multiple of. */
#define PEAK_VF_ALIGN 16

typedef float32x4_t peak_vf;
typedef float64x2_t peak_vd;
/* Half a peak_vf: the PEAK_VD_LANES floats a peak_vd narrows to. */
typedef float32x2_t peak_vfh;

static inline peak_vf peak_vf_zero(void) { return vdupq_n_f32(0.0f); }
static inline peak_vf peak_vf_set1(float x) { return vdupq_n_f32(x); }
static inline peak_vf peak_vf_loadu(const float *p) { return vld1q_f32(p); }
static inline void peak_vf_storeu(float *p, peak_vf v) { vst1q_f32(p, v); }
/* p a multiple of PEAK_VF_ALIGN bytes (an aligned load and store). */
static inline peak_vf peak_vf_load(const float *p) { return vld1q_f32(p); }
static inline void peak_vf_store(float *p, peak_vf v) { vst1q_f32(p, v); }
static inline void peak_vf_stream(float *p, peak_vf v) { vst1q_f32(p, v); }
static inline void peak_vf_stream_fence(void) {}

/* p[0 .. n) into lanes 0 .. n-1, +0 in the others, n <= 4: nothing past
   p[n - 1] is read. */
static inline peak_vf peak_vf_load_first(const float *p, size_t n)
{
    if (n == PEAK_VF_LANES)
        return vld1q_f32(p);
    float buf[PEAK_VF_LANES] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(buf, p, n * sizeof(float));
    return vld1q_f32(buf);
}

/* p[0 .. n) = lanes 0 .. n-1 of v, n <= 4; nothing else is written. */
static inline void peak_vf_store_first(float *p, peak_vf v, size_t n)
{
    if (n == PEAK_VF_LANES) {
        vst1q_f32(p, v);
        return;
    }
    float buf[PEAK_VF_LANES];
    vst1q_f32(buf, v);
    memcpy(p, buf, n * sizeof(float));
}

static inline peak_vf peak_vf_add(peak_vf a, peak_vf b) { return vaddq_f32(a, b); }
static inline peak_vf peak_vf_sub(peak_vf a, peak_vf b) { return vsubq_f32(a, b); }
static inline peak_vf peak_vf_mul(peak_vf a, peak_vf b) { return vmulq_f32(a, b); }
/* a * b + c, rounded once (FMLA). */
static inline peak_vf peak_vf_fma(peak_vf a, peak_vf b, peak_vf c) { return vfmaq_f32(c, a, b); }
/* a / b, rounded once (FDIV). */
static inline peak_vf peak_vf_div(peak_vf a, peak_vf b) { return vdivq_f32(a, b); }
/* a > b ? a : b, lane by lane: b where either is NaN, as x86's MAXPS
   (FMAX would return the NaN, FMAXNM the number). */
static inline peak_vf peak_vf_max(peak_vf a, peak_vf b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
/* v, or lo where v < lo; NaN where v is NaN (lo is not): FMAX. */
static inline peak_vf peak_vf_at_least(peak_vf v, peak_vf lo) { return vmaxq_f32(v, lo); }
/* v, or hi where v > hi; NaN where v is NaN (hi is not): FMIN. */
static inline peak_vf peak_vf_at_most(peak_vf v, peak_vf hi) { return vminq_f32(v, hi); }
/* Rounded down to an integer (FRINTM). */
static inline peak_vf peak_vf_floor(peak_vf v) { return vrndmq_f32(v); }
/* v with its sign bit cleared: |v|, a NaN kept (FABS). */
static inline peak_vf peak_vf_abs(peak_vf v) { return vabsq_f32(v); }
/* v's magnitude with s's sign bit (copysign). */
static inline peak_vf peak_vf_copysign(peak_vf v, peak_vf s)
{
    return vbslq_f32(vdupq_n_u32(0x80000000u), s, v);
}
/* x where a < b, else y, lane by lane (y where a or b is NaN). */
static inline peak_vf peak_vf_select_lt(peak_vf a, peak_vf b, peak_vf x, peak_vf y)
{
    return vbslq_f32(vcltq_f32(a, b), x, y);
}
/* Lanes 0 .. n-1 of v and fill in the others, n <= 4. */
static inline peak_vf peak_vf_first_or(peak_vf v, size_t n, float fill)
{
    static const uint32_t lanes[2 * PEAK_VF_LANES] = {~0u, ~0u, ~0u, ~0u, 0u, 0u, 0u, 0u};
    return vbslq_f32(vld1q_u32(lanes + PEAK_VF_LANES - n), v, vdupq_n_f32(fill));
}
/* a + b, or x where b == x (so that a NaN or inf a cannot leak there). */
static inline peak_vf peak_vf_add_except(peak_vf a, peak_vf b, peak_vf x)
{
    return vbslq_f32(vceqq_f32(b, x), x, vaddq_f32(a, b));
}
/* v, or +0 where v == x. */
static inline peak_vf peak_vf_zero_where_eq(peak_vf v, peak_vf x)
{
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(v), vceqq_f32(v, x)));
}
/* True if a lane has a != b, or a NaN in either. */
static inline bool peak_vf_any_ne(peak_vf a, peak_vf b) { return vminvq_u32(vceqq_f32(a, b)) == 0; }
/* True if a < b in every lane (false where either is NaN). */
static inline bool peak_vf_all_lt(peak_vf a, peak_vf b) { return vminvq_u32(vcltq_f32(a, b)) != 0; }
/* v, hidden from the optimiser: a loop storing a known constant would
   become a call to memset, which costs more than a short row's stores. */
static inline peak_vf peak_vf_opaque(peak_vf v)
{
    __asm__("" : "+w"(v));
    return v;
}

/* Lanes summed as (0 + 1) + (2 + 3) (FADDP twice). */
static inline float peak_vf_reduce_add(peak_vf v) { return vaddvq_f32(v); }
/* Lane j: peak_vf_reduce_add(v[j]) bit for bit, (0 + 1) + (2 + 3), for
   4 vectors at once (FADDP thrice where 4 reductions take 8). */
static inline peak_vf peak_vf_sum_lanes(const peak_vf v[4])
{
    return vpaddq_f32(vpaddq_f32(v[0], v[1]), vpaddq_f32(v[2], v[3]));
}
/* The largest lane, NaN lanes skipped unless all are NaN (FMAXNMV). */
static inline float peak_vf_reduce_max(peak_vf v) { return vmaxnmvq_f32(v); }

static inline peak_vfh peak_vfh_set1(float x) { return vdup_n_f32(x); }
static inline peak_vfh peak_vfh_loadu(const float *p) { return vld1_f32(p); }
static inline void peak_vfh_storeu(float *p, peak_vfh v) { vst1_f32(p, v); }
static inline void peak_vfh_stream(float *p, peak_vfh v) { vst1_f32(p, v); }

/* p[0 .. n) = lanes 0 .. n-1 of v, n <= 2; nothing else is written. */
static inline void peak_vfh_store_first(float *p, peak_vfh v, size_t n)
{
    if (n == PEAK_VD_LANES) {
        vst1_f32(p, v);
        return;
    }
    float buf[PEAK_VD_LANES];
    vst1_f32(buf, v);
    memcpy(p, buf, n * sizeof(float));
}

static inline peak_vfh peak_vfh_mul(peak_vfh a, peak_vfh b) { return vmul_f32(a, b); }
/* v's lanes 0 .. 1 and 2 .. 3. */
static inline peak_vfh peak_vf_low(peak_vf v) { return vget_low_f32(v); }
static inline peak_vfh peak_vf_high(peak_vf v) { return vget_high_f32(v); }

/* (v1 v0 v3 v2): each pair of lanes swapped. */
static inline peak_vf peak_vf_swap_pairs(peak_vf v) { return vrev64q_f32(v); }

/* (a0 b0 a1 b1 ...): the lanes of two halves interleaved into one peak_vf. */
static inline peak_vf peak_vf_interleave(peak_vfh a, peak_vfh b)
{
    return vcombine_f32(vzip1_f32(a, b), vzip2_f32(a, b));
}

static inline peak_vd peak_vd_zero(void) { return vdupq_n_f64(0.0); }
static inline peak_vd peak_vd_add(peak_vd a, peak_vd b) { return vaddq_f64(a, b); }
static inline peak_vd peak_vd_set1(double x) { return vdupq_n_f64(x); }
/* p a multiple of PEAK_VD_LANES * 8 bytes. */
static inline peak_vd peak_vd_load(const double *p) { return vld1q_f64(p); }
static inline void peak_vd_store(double *p, peak_vd v) { vst1q_f64(p, v); }
static inline peak_vd peak_vd_sub(peak_vd a, peak_vd b) { return vsubq_f64(a, b); }
static inline peak_vd peak_vd_mul(peak_vd a, peak_vd b) { return vmulq_f64(a, b); }
/* a * b + c, rounded once (FMLA). */
static inline peak_vd peak_vd_fma(peak_vd a, peak_vd b, peak_vd c) { return vfmaq_f64(c, a, b); }
/* c - a * b, rounded once (FMLS). */
static inline peak_vd peak_vd_fnma(peak_vd a, peak_vd b, peak_vd c) { return vfmsq_f64(c, a, b); }
/* a * b - c, rounded once: FMLA onto -c, so that an exact zero keeps x86's
   sign (FMLS, negated after, would turn +0 into -0). */
static inline peak_vd peak_vd_fms(peak_vd a, peak_vd b, peak_vd c) { return vfmaq_f64(vnegq_f64(c), a, b); }
/* Lanes rounded to float (to nearest, FCVTN). */
static inline peak_vfh peak_vd_narrow(peak_vd v) { return vcvt_f32_f64(v); }
/* Lanes widened to double (exact). */
static inline peak_vd peak_vd_widen(peak_vfh v) { return vcvt_f64_f32(v); }

/* Bit i set where !(a[i] < b[i]): b[i] <= a[i], or either is NaN. */
static inline unsigned peak_vd_mask_not_lt(peak_vd a, peak_vd b)
{
    const uint64x2_t lt = vcltq_f64(a, b);
    return (unsigned)(~vgetq_lane_u64(lt, 0) & 1u) | (unsigned)(~vgetq_lane_u64(lt, 1) & 1u) << 1;
}

/* On a key's bit pattern read as a 64-bit integer (where a shifter's
   add leaves a rounded integer): b where it is odd, else a. */
static inline peak_vd peak_vd_select_odd(peak_vd key, peak_vd a, peak_vd b)
{
    return vbslq_f64(vtstq_u64(vreinterpretq_u64_f64(key), vdupq_n_u64(1)), b, a);
}

/* x with its sign flipped (the exact -x) where bit 1 of key's pattern is set. */
static inline peak_vd peak_vd_negate_bit1(peak_vd x, peak_vd key)
{
    const uint64x2_t sign = vshlq_n_u64(vandq_u64(vreinterpretq_u64_f64(key), vdupq_n_u64(2)), 62);
    return vreinterpretq_f64_u64(veorq_u64(vreinterpretq_u64_f64(x), sign));
}

/* key's bit pattern plus 1, as a 64-bit integer. */
static inline peak_vd peak_vd_inc_bits(peak_vd key)
{
    return vreinterpretq_f64_u64(vaddq_u64(vreinterpretq_u64_f64(key), vdupq_n_u64(1)));
}

/* acc + (lo + hi): v's lower and upper halves widened to double, added
   lane by lane (lane i of the result takes v's lanes i and i + 2). */
static inline peak_vd peak_vd_add_widened(peak_vd acc, peak_vf v)
{
    return vaddq_f64(acc, vaddq_f64(vcvt_f64_f32(vget_low_f32(v)), vcvt_high_f64_f32(v)));
}

/* Lanes summed as 0 + 1. */
static inline double peak_vd_reduce_add(peak_vd v) { return vaddvq_f64(v); }

/* ---- int32 lanes (peak_vi): powers of two built in the exponent field --- */

typedef int32x4_t peak_vi;

static inline peak_vi peak_vi_set1(int32_t x) { return vdupq_n_s32(x); }
static inline peak_vi peak_vi_add(peak_vi a, peak_vi b) { return vaddq_s32(a, b); }
static inline peak_vi peak_vi_sub(peak_vi a, peak_vi b) { return vsubq_s32(a, b); }
/* a >> 1, the sign bit copied: floor(a / 2). */
static inline peak_vi peak_vi_halve(peak_vi a) { return vshrq_n_s32(a, 1); }
/* v's bits, unchanged. */
static inline peak_vi peak_vf_as_vi(peak_vf v) { return vreinterpretq_s32_f32(v); }
/* e's low 9 bits shifted into the sign and exponent fields: 2^(e - 127)
   for 1 <= e <= 254, +0 for e = 0. */
static inline peak_vf peak_vf_pow2_biased(peak_vi e) { return vreinterpretq_f32_s32(vshlq_n_s32(e, 23)); }

/* ---- 16-bit element types (peak_convert; convert.h gives the bits) ---- */

/* NaN lanes with the fraction's top bit set (quiet). */
static inline peak_vf peak_vf_quiet_nan(peak_vf v)
{
    const uint32x4_t nan = vmvnq_u32(vceqq_f32(v, v));
    return vreinterpretq_f32_u32(
        vorrq_u32(vreinterpretq_u32_f32(v), vandq_u32(nan, vdupq_n_u32(0x400000u))));
}

/* 4 bfloat16 as floats, shifted up: exact, a signalling NaN left as it is
   (for arithmetic, which quiets it). */
static inline peak_vf peak_vf_load_bf16_bits(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

/* 4 bfloat16 as floats: shifted up, exact; NaN quieted. */
static inline peak_vf peak_vf_load_bf16(const uint16_t *p)
{
    return peak_vf_quiet_nan(peak_vf_load_bf16_bits(p));
}

/* 4 floats as bfloat16: + 0x7fff + the kept part's lowest bit, the top
   half (ties to even, overflow to inf); NaN: its top half, quieted. */
static inline peak_vfh peak_vf_narrow_bf16(peak_vf v)
{
    const uint32x4_t u = vreinterpretq_u32_f32(v), hi = vshrq_n_u32(u, 16);
    const uint32x4_t odd = vandq_u32(hi, vdupq_n_u32(1));
    const uint32x4_t r = vshrq_n_u32(vaddq_u32(u, vaddq_u32(odd, vdupq_n_u32(0x7fff))), 16);
    const uint32x4_t q = vorrq_u32(hi, vdupq_n_u32(0x40));
    const uint32x4_t nan = vmvnq_u32(vceqq_f32(v, v));
    return vreinterpret_f32_u16(vmovn_u32(vbslq_u32(nan, q, r)));
}

static inline void peak_vf_store_bf16(uint16_t *p, peak_vf v)
{
    vst1_u16(p, vreinterpret_u16_f32(peak_vf_narrow_bf16(v)));
}

/* Float16 conversions are baseline AArch64 (FCVTL, FCVTN). */
#define PEAK_VF_F16_TARGET

/* 4 float16 as floats (FCVTL: exact, NaN quieted). */
static inline peak_vf peak_vf_load_f16(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

/* 4 floats as float16 (FCVTN, FPCR's rounding: to nearest even unless a
   program changed it). */
static inline peak_vfh peak_vf_narrow_f16(peak_vf v)
{
    return vreinterpret_f32_f16(vcvt_f16_f32(v));
}

static inline void peak_vf_store_f16(uint16_t *p, peak_vf v)
{
    vst1_u16(p, vreinterpret_u16_f32(peak_vf_narrow_f16(v)));
}

#endif /* PEAK_F32_NEON_H */
