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
#include <stddef.h>
#include <string.h>

#define PEAK_VF_LANES 4
#define PEAK_VD_LANES 2
/* Bytes a streaming store's address must be a multiple of. */
#define PEAK_VF_ALIGN 16

typedef float32x4_t peak_vf;
typedef float64x2_t peak_vd;

static inline peak_vf peak_vf_zero(void) { return vdupq_n_f32(0.0f); }
static inline peak_vf peak_vf_set1(float x) { return vdupq_n_f32(x); }
static inline peak_vf peak_vf_loadu(const float *p) { return vld1q_f32(p); }
static inline void peak_vf_storeu(float *p, peak_vf v) { vst1q_f32(p, v); }
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
/* a > b ? a : b, lane by lane: b where either is NaN, as x86's MAXPS
   (FMAX would return the NaN, FMAXNM the number). */
static inline peak_vf peak_vf_max(peak_vf a, peak_vf b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }

/* Lanes summed as (0 + 1) + (2 + 3) (FADDP twice). */
static inline float peak_vf_reduce_add(peak_vf v) { return vaddvq_f32(v); }
/* The largest lane, NaN lanes skipped unless all are NaN (FMAXNMV). */
static inline float peak_vf_reduce_max(peak_vf v) { return vmaxnmvq_f32(v); }

static inline peak_vd peak_vd_zero(void) { return vdupq_n_f64(0.0); }
static inline peak_vd peak_vd_add(peak_vd a, peak_vd b) { return vaddq_f64(a, b); }

/* acc + (lo + hi): v's lower and upper halves widened to double, added
   lane by lane (lane i of the result takes v's lanes i and i + 2). */
static inline peak_vd peak_vd_add_widened(peak_vd acc, peak_vf v)
{
    return vaddq_f64(acc, vaddq_f64(vcvt_f64_f32(vget_low_f32(v)), vcvt_high_f64_f32(v)));
}

/* Lanes summed as 0 + 1. */
static inline double peak_vd_reduce_add(peak_vd v) { return vaddvq_f64(v); }

#endif /* PEAK_F32_NEON_H */
