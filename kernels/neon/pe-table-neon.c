/*
 * pe-table-neon.c - the sinusoid table on AArch64 AdvSIMD: 2 columns'
 * frequencies per vector of doubles (float64x2_t), 8 per loop step.
 *
 * Bit-identical to pe-table-scalar.c, as the x86 tiers: sincos2 is
 * peak_pe_sincos (pe-table.h) with each scalar operation replaced by the
 * one AdvSIMD instruction that rounds the same way (FMLA for fma(a, b, c),
 * FMLS for fma(-a, b, c), FCVTN for (float)), and the driver, the
 * frequencies and the rare slow-path angles are the shared scalar code.
 * Row tails (a partial chunk, an odd d_model) go through a small stack
 * buffer: nothing outside the row's d_model floats is written.
 *
 * SLEEF is not used: its advsimd sincos (Sleef_sincosd2_u10advsimd in
 * Debian's 3.5.1) is a different algorithm, so its bits would differ from
 * the scalar reference's; bit identity is the contract of this family.
 *
 * No non-temporal stores: ACLE has no intrinsic for STNP, and Neoverse
 * cores detect a stream of full-line writes and stop allocating it in the
 * caches by themselves (write streaming mode), which is what the x86 tiers'
 * streaming stores buy on large tables.
 *
 * Expected on a Neoverse V1/V2 (4 x 128-bit FP/ASIMD pipes, 3 load
 * pipes): the EXACT emit is 8 loads, 14 FP instructions (4 FMUL, 4 FMLA,
 * 2 FNEG, 4 FCVTN) and one ST2 per 4 frequencies, ~3.5 cycles per 8 output
 * floats on the FP pipes; the sincos, amortised over 32 rows, adds ~0.1
 * cycle per element.  So ~0.5 cycle per element in cache.  A
 * 5000 x 512 table (10 MB) is store-bound beyond L2, as on x86 (AVX2:
 * 1.26 ms, ~1 cycle per element at 2.1 GHz): expect about 1 ms at
 * 2.5-3 GHz.  Not measured: no AArch64 hardware here, only qemu.
 */
#include "pe-table.h"

#include <arm_neon.h>

static inline void sincos2(float64x2_t x, float64x2_t *sin_out, float64x2_t *cos_out)
{
    const float64x2_t vshift = vdupq_n_f64(PEAK_PE_SHIFTER);
    const float64x2_t t = vfmaq_f64(vshift, x, vdupq_n_f64(PEAK_PE_2_OVER_PI));
    const float64x2_t n = vsubq_f64(t, vshift);
    const uint64x2_t q = vreinterpretq_u64_f64(t);
    /* FMLS negates the product before the fused add: fma(-n, HI, x). */
    float64x2_t r = vfmsq_f64(x, n, vdupq_n_f64(PEAK_PE_PIO2_HI));
    r = vfmsq_f64(r, n, vdupq_n_f64(PEAK_PE_PIO2_LO));
    const float64x2_t z = vmulq_f64(r, r);

    float64x2_t ps = vdupq_n_f64(PEAK_PE_S15);
    ps = vfmaq_f64(vdupq_n_f64(PEAK_PE_S13), ps, z);
    ps = vfmaq_f64(vdupq_n_f64(PEAK_PE_S11), ps, z);
    ps = vfmaq_f64(vdupq_n_f64(PEAK_PE_S9), ps, z);
    ps = vfmaq_f64(vdupq_n_f64(PEAK_PE_S7), ps, z);
    ps = vfmaq_f64(vdupq_n_f64(PEAK_PE_S5), ps, z);
    ps = vfmaq_f64(vdupq_n_f64(PEAK_PE_S3), ps, z);
    const float64x2_t s = vfmaq_f64(r, vmulq_f64(r, z), ps);

    float64x2_t pc = vdupq_n_f64(PEAK_PE_C16);
    pc = vfmaq_f64(vdupq_n_f64(PEAK_PE_C14), pc, z);
    pc = vfmaq_f64(vdupq_n_f64(PEAK_PE_C12), pc, z);
    pc = vfmaq_f64(vdupq_n_f64(PEAK_PE_C10), pc, z);
    pc = vfmaq_f64(vdupq_n_f64(PEAK_PE_C8), pc, z);
    pc = vfmaq_f64(vdupq_n_f64(PEAK_PE_C6), pc, z);
    pc = vfmaq_f64(vdupq_n_f64(PEAK_PE_C4), pc, z);
    pc = vfmaq_f64(vdupq_n_f64(PEAK_PE_C2), pc, z);
    const float64x2_t c = vfmaq_f64(vdupq_n_f64(1.0), z, pc);

    const uint64x2_t one = vdupq_n_u64(1);
    const uint64x2_t two = vdupq_n_u64(2);
    /* Odd n swaps sin and cos; bit 1 of n (sin) and of n + 1 (cos), moved
       to the sign bit, negates (an XOR of the sign is the exact -x). */
    const uint64x2_t odd = vtstq_u64(q, one);
    const float64x2_t a = vbslq_f64(odd, c, s);
    const float64x2_t b = vbslq_f64(odd, s, c);
    const uint64x2_t sa = vshlq_n_u64(vandq_u64(q, two), 62);
    const uint64x2_t sb = vshlq_n_u64(vandq_u64(vaddq_u64(q, one), two), 62);
    *sin_out = vreinterpretq_f64_u64(veorq_u64(vreinterpretq_u64_f64(a), sa));
    *cos_out = vreinterpretq_f64_u64(veorq_u64(vreinterpretq_u64_f64(b), sb));
}

/* Nonzero if a lane is beyond the fast range (or NaN: the compare is
   false for it), which must take the shared scalar path to match the
   scalar tier. */
static inline uint64_t slow_lanes(float64x2_t x)
{
    const uint64x2_t fast = vcltq_f64(x, vdupq_n_f64(PEAK_PE_FAST_LIMIT));
    return ~(vgetq_lane_u64(fast, 0) & vgetq_lane_u64(fast, 1));
}

/* sincos2 of x[0..2) into s, c, with the slow lanes redone in scalar. */
static inline void sincos2_at(const double *x, double *s, double *c)
{
    const float64x2_t vx = vld1q_f64(x);
    float64x2_t vs, vc;
    sincos2(vx, &vs, &vc);
    vst1q_f64(s, vs);
    vst1q_f64(c, vc);
    if (__builtin_expect(slow_lanes(vx) != 0, 0)) {
        for (int l = 0; l < 2; l++)
            if (!(x[l] < PEAK_PE_FAST_LIMIT))
                peak_pe_sincos_slow(x[l], &s[l], &c[l]);
    }
}

void peak_pe_sincos_chunk__neon(const double *x, double *s, double *c)
{
    /* Four independent vectors a step: each polynomial is a chain of 8
       dependent FMAs, and four in flight (eight with sin and cos) cover
       the FMA latency on every FP pipe. */
    for (size_t j = 0; j < PEAK_PE_CHUNK; j += 8) {
        sincos2_at(x + j, s + j, c + j);
        sincos2_at(x + j + 2, s + j + 2, c + j + 2);
        sincos2_at(x + j + 4, s + j + 4, c + j + 4);
        sincos2_at(x + j + 6, s + j + 6, c + j + 6);
    }
}

/* Double pairs (lo: frequencies i, i+1; hi: i+2, i+3) to 4 floats. */
static inline float32x4_t narrow4(float64x2_t lo, float64x2_t hi)
{
    return vcvt_high_f32_f64(vcvt_f32_f64(lo), hi);
}

/* 4 sines and cosines (frequencies i .. i+3, n of them valid) to the row.
   full: all 4 valid and, interleaved, all 8 columns inside the row. */
static inline __attribute__((always_inline)) void
store4(float *row, float32x4_t fs, float32x4_t fc, size_t i, size_t n, size_t d_model,
       peak_pe_layout layout, int full)
{
    if (layout == PEAK_PE_INTERLEAVED) {
        const float32x4x2_t sc = {{fs, fc}};
        if (full) {
            vst2q_f32(row + 2 * i, sc); /* s0 c0 s1 c1 ... */
            return;
        }
        float buf[8];
        vst2q_f32(buf, sc);
        /* An odd d_model's last column is a sine: stop at d_model. */
        const size_t cols = d_model - 2 * i < 2 * n ? d_model - 2 * i : 2 * n;
        for (size_t k = 0; k < cols; k++)
            row[2 * i + k] = buf[k];
    } else if (full) {
        vst1q_f32(row + i, fs);
        vst1q_f32(row + d_model / 2 + i, fc);
    } else {
        float bs[4], bc[4];
        vst1q_f32(bs, fs);
        vst1q_f32(bc, fc);
        for (size_t k = 0; k < n; k++) {
            row[i + k] = bs[k];
            row[d_model / 2 + i + k] = bc[k];
        }
    }
}

/* sin(p w) = fma(SB, CK, CB * SK), cos(p w) = fma(CB, CK, -(SB * SK)) for
   the two frequencies at offset j.  The negation comes before the FMA, as
   in the scalar: fusing it the other way round (an FMLS, negated after)
   would turn an exact +0 into -0. */
static inline void combine2(const double *sb, const double *cb, const double *sk,
                            const double *ck, size_t j, float64x2_t *s, float64x2_t *c)
{
    const float64x2_t vsb = vld1q_f64(sb + j), vcb = vld1q_f64(cb + j);
    const float64x2_t vsk = vld1q_f64(sk + j), vck = vld1q_f64(ck + j);
    *s = vfmaq_f64(vmulq_f64(vcb, vsk), vsb, vck);
    *c = vfmaq_f64(vnegq_f64(vmulq_f64(vsb, vsk)), vcb, vck);
}

static inline __attribute__((always_inline)) void
combine4(const double *sb, const double *cb, const double *sk, const double *ck, size_t j,
         float32x4_t *fs, float32x4_t *fc)
{
    float64x2_t s0, c0, s1, c1;
    combine2(sb, cb, sk, ck, j, &s0, &c0);
    combine2(sb, cb, sk, ck, j + 2, &s1, &c1);
    *fs = narrow4(s0, s1);
    *fc = narrow4(c0, c1);
}

static inline __attribute__((always_inline)) void
emit_exact(float *row, const double *sb, const double *cb, const double *sk, const double *ck,
           size_t i0, size_t nc, size_t d_model, peak_pe_layout layout)
{
    float32x4_t fs, fc;
    const size_t cols_per_freq = layout == PEAK_PE_INTERLEAVED ? 2 : 1;
    if (nc == PEAK_PE_CHUNK && cols_per_freq * (i0 + PEAK_PE_CHUNK) <= d_model) {
        /* The common case: a constant trip count, no tails. */
        if (layout == PEAK_PE_INTERLEAVED) {
            for (size_t j = 0; j < PEAK_PE_CHUNK; j += 4) {
                combine4(sb, cb, sk, ck, j, &fs, &fc);
                store4(row, fs, fc, i0 + j, 4, d_model, PEAK_PE_INTERLEAVED, 1);
            }
        } else {
            for (size_t j = 0; j < PEAK_PE_CHUNK; j += 4) {
                combine4(sb, cb, sk, ck, j, &fs, &fc);
                store4(row, fs, fc, i0 + j, 4, d_model, PEAK_PE_SPLIT, 1);
            }
        }
        return;
    }
    /* The tables hold PEAK_PE_CHUNK entries (zero frequencies past nc), so
       whole vectors may be evaluated; only the stores stop at nc. */
    for (size_t j = 0; j < nc; j += 4) {
        const size_t n = nc - j < 4 ? nc - j : 4;
        combine4(sb, cb, sk, ck, j, &fs, &fc);
        store4(row, fs, fc, i0 + j, n, d_model, layout,
               n == 4 && cols_per_freq * (i0 + j + 4) <= d_model);
    }
}

static void emit_exact_neon(float *row, const double *sb, const double *cb, const double *sk,
                            const double *ck, size_t i0, size_t nc, size_t d_model,
                            peak_pe_layout layout)
{
    emit_exact(row, sb, cb, sk, ck, i0, nc, d_model, layout);
}

/* sincos2 of a float pair widened to double, slow lanes in scalar. */
static inline void sincos2_torch(float64x2_t x, float64x2_t *s, float64x2_t *c)
{
    sincos2(x, s, c);
    if (__builtin_expect(slow_lanes(x) != 0, 0)) {
        double xs[2], ss[2], cs[2];
        vst1q_f64(xs, x);
        vst1q_f64(ss, *s);
        vst1q_f64(cs, *c);
        for (int l = 0; l < 2; l++)
            if (!(xs[l] < PEAK_PE_FAST_LIMIT))
                peak_pe_sincos_slow(xs[l], &ss[l], &cs[l]);
        *s = vld1q_f64(ss);
        *c = vld1q_f64(cs);
    }
}

static void emit_torch_neon(float *row, float pf, const float *wf, size_t i0, size_t nc,
                            size_t d_model, peak_pe_layout layout)
{
    const size_t cols_per_freq = layout == PEAK_PE_INTERLEAVED ? 2 : 1;
    const float32x4_t vpf = vdupq_n_f32(pf);
    for (size_t j = 0; j < nc; j += 4) {
        /* The float product PyTorch forms, then sincos in double. */
        const float32x4_t angle = vmulq_f32(vpf, vld1q_f32(wf + j));
        float64x2_t s0, c0, s1, c1;
        sincos2_torch(vcvt_f64_f32(vget_low_f32(angle)), &s0, &c0);
        sincos2_torch(vcvt_high_f64_f32(angle), &s1, &c1);
        const size_t n = nc - j < 4 ? nc - j : 4;
        store4(row, narrow4(s0, s1), narrow4(c0, c1), i0 + j, n, d_model, layout,
               n == 4 && cols_per_freq * (i0 + j + 4) <= d_model);
    }
}

void peak_pe_rows__neon(float *scratch, size_t scratch_rows, size_t ld_scratch, size_t n_rows,
                        const int64_t *pos, size_t pos0, size_t d_model,
                        const peak_pe_params *params, peak_pe_sink_fn sink, void *ctx)
{
    peak_pe_rows_run(scratch, scratch_rows, ld_scratch, n_rows, pos, pos0, d_model, params,
                     peak_pe_sincos_chunk__neon, emit_exact, emit_torch_neon, sink, ctx);
}

void peak_f32_pe_table__neon(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                             size_t pos0, const peak_pe_params *params)
{
    peak_pe_table_run(out, ld_out, n_pos, d_model, pos0, params, peak_pe_sincos_chunk__neon,
                      emit_exact_neon, emit_torch_neon);
}
