/*
 * pe-table.h - what the scalar, AVX2, AVX-512 and NEON sinusoid tables
 * share.
 *
 * Every tier must produce the same bits, so everything that decides a bit of
 * the result lives here, written once: the frequencies (a libm/SLEEF helper
 * that every tier calls, compiled once in common/pe-ref.c), the
 * double-precision sincos that pe-table-body.h replicates operation for
 * operation for the SIMD tiers, and its constants.  The drivers that split
 * positions into blocks are in pe-table-driver.h; the tiers only supply
 * how to evaluate many sincos at once and how to store a row segment.
 *
 * EXACT mode, for column frequency w (double) and position p:
 *   p = P0 + k,  P0 = p & ~(PEAK_PE_BLOCK - 1),  k = p & (PEAK_PE_BLOCK - 1)
 *   (SB, CB) = sincos(P0 * w),  (SK, CK) = sincos(k * w)       [double]
 *   sin(p w) = fma(SB, CK, CB * SK),  cos(p w) = fma(CB, CK, -(SB * SK))
 * rounded once to float.  The bits depend only on (p, column, d_model,
 * layout, base): never on pos0, n_pos or the tier.
 *
 * TORCH_F32 mode: angle = (float)p * wf (a float product, wf the float
 * frequency PyTorch computes), then sincos of that float angle in double,
 * rounded to float: within ~0.5 ULP of the true sin/cos of the float angle,
 * so within 2 ULP of SLEEF's u10 results that PyTorch returns.
 */
#ifndef PEAK_PE_TABLE_H
#define PEAK_PE_TABLE_H

#include "common/pe-ref.h" /* peak_pe_freqs, peak_pe_sincos_slow: the drivers call them */
#include "internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Positions are split into blocks of this many rows.  Part of the result:
   changing it changes the bits of the EXACT table (not its accuracy). */
#define PEAK_PE_BLOCK 32
/* Frequencies per column chunk.  Sizes the stack tables (2 * BLOCK * CHUNK
   doubles = 16 KiB, well inside L1); does not change any bit.  A multiple of
   8, so SIMD tiers never need a partial sincos vector. */
#define PEAK_PE_CHUNK 32

#define PEAK_PE_ALIGN _Alignas(64)

/* EXACT tables of at least this many bytes are written by the SIMD tiers
   with streaming (non-temporal) stores where a row segment is aligned.  A
   table this large does not stay in a core's private caches anyway, and the
   column-chunk passes write each line exactly once, so skipping the
   read-for-ownership halves the memory traffic (measured: 5000 x 512
   AVX-512 table ~0.30 -> ~0.20 ns per element).  The bits are the same. */
#define PEAK_PE_STREAM_BYTES ((size_t)2 << 20)

/* Cody-Waite reduction x = n*pi/2 + r.  Two parts of pi/2 suffice because
   the first step is an FMA: for 0 <= x < 2^50, n = round(x*2/pi) fits the
   0x1.8p52 shifter, x - n*PIO2_HI is exact (for x >= 1 it is a multiple of
   2^-52 smaller than 2 in magnitude; below 1, Sterbenz), and the neglected
   n * (pi/2 - HI - LO) stays under 2^-57.  The angles of p < 2^32 with
   base >= 1 are below 2^33, where |r| <= pi/4 + 2^-20.  Anything else goes
   to peak_pe_sincos_slow. */
#define PEAK_PE_FAST_LIMIT 0x1p50
#define PEAK_PE_SHIFTER 0x1.8p52
#define PEAK_PE_2_OVER_PI 0x1.45f306dc9c883p-1
#define PEAK_PE_PIO2_HI 0x1.921fb54442d18p+0
#define PEAK_PE_PIO2_LO 0x1.1a62633145c07p-54

/* Taylor coefficients (-1)^k / (2k+1)! and (-1)^k / (2k)!, rounded to
   double.  On |r| <= pi/4 the first omitted terms are r^17/17! < 5e-17 and
   r^18/18! < 3e-18, so both polynomials are good to ~1e-16 absolute: far
   below the float rounding that follows.  A minimax fit would save a term,
   but the sincos is amortised over PEAK_PE_BLOCK rows in EXACT mode. */
#define PEAK_PE_S3 (-0x1.5555555555555p-3)
#define PEAK_PE_S5 0x1.1111111111111p-7
#define PEAK_PE_S7 (-0x1.a01a01a01a01ap-13)
#define PEAK_PE_S9 0x1.71de3a556c734p-19
#define PEAK_PE_S11 (-0x1.ae64567f544e4p-26)
#define PEAK_PE_S13 0x1.6124613a86d09p-33
#define PEAK_PE_S15 (-0x1.ae7f3e733b81fp-41)
#define PEAK_PE_C2 (-0x1p-1)
#define PEAK_PE_C4 0x1.5555555555555p-5
#define PEAK_PE_C6 (-0x1.6c16c16c16c17p-10)
#define PEAK_PE_C8 0x1.a01a01a01a01ap-16
#define PEAK_PE_C10 (-0x1.27e4fb7789f5cp-22)
#define PEAK_PE_C12 0x1.1eed8eff8d898p-29
#define PEAK_PE_C14 (-0x1.93974a8c07c9dp-37)
#define PEAK_PE_C16 0x1.ae7f3e733b81fp-45

/* The same, highest degree first: sin(r) = r + r^3 P(r^2) and
   cos(r) = 1 + r^2 Q(r^2), P and Q evaluated by Horner's rule in this
   order on every tier. */
#define PEAK_PE_SIN_TERMS 7
#define PEAK_PE_COS_TERMS 8
static const double peak_pe_sin_coef[PEAK_PE_SIN_TERMS] = {
    PEAK_PE_S15, PEAK_PE_S13, PEAK_PE_S11, PEAK_PE_S9, PEAK_PE_S7, PEAK_PE_S5, PEAK_PE_S3};
static const double peak_pe_cos_coef[PEAK_PE_COS_TERMS] = {
    PEAK_PE_C16, PEAK_PE_C14, PEAK_PE_C12, PEAK_PE_C10, PEAK_PE_C8, PEAK_PE_C6, PEAK_PE_C4,
    PEAK_PE_C2};

/* ---- the tiers' sincos chunks ------------------------------------------- */

/* The sincos of each tier over PEAK_PE_CHUNK angles (x and outputs 64-byte
   aligned): what the drivers call, exported so that the tests can compare
   the tiers in double precision, where a divergence would otherwise only
   show in the rare float that it tips over a rounding boundary. */
PEAK_INTERNAL void peak_pe_sincos_chunk__scalar(const double *x, double *s, double *c);
PEAK_INTERNAL void peak_pe_sincos_chunk__avx2(const double *x, double *s, double *c);
PEAK_INTERNAL void peak_pe_sincos_chunk__avx512(const double *x, double *s, double *c);
PEAK_INTERNAL void peak_pe_sincos_chunk__neon(const double *x, double *s, double *c);

/* ---- geometry ----------------------------------------------------------- */

/* Number of frequencies: a sin/cos pair each (the last one of an odd
   interleaved row has only its sine). */
static inline size_t peak_pe_n_freq(size_t d_model, peak_pe_layout layout)
{
    return layout == PEAK_PE_INTERLEAVED ? (d_model + 1) / 2 : d_model / 2;
}

/* The columns of the frequencies [f0, f1) of a row (internal.h,
   PEAK_PE_FREQ_END) as up to two ranges [cols[k][0], cols[k][1]), their
   number returned: the whole row is one, a part of an interleaved row one
   (its sines and cosines alternate), a part of a split row two (its sines,
   then its cosines, with the padding column of an odd d_model if the part
   reaches the end). */
static inline size_t peak_pe_part_cols(size_t f0, size_t f1, size_t d_model,
                                       peak_pe_layout layout, size_t cols[2][2])
{
    const size_t n_freq = peak_pe_n_freq(d_model, layout);
    const size_t stop = f1 < n_freq ? f1 : n_freq;
    if (f0 == 0 && stop == n_freq) {
        cols[0][0] = 0;
        cols[0][1] = d_model;
        return 1;
    }
    if (layout == PEAK_PE_INTERLEAVED) {
        cols[0][0] = 2 * f0;
        cols[0][1] = 2 * stop < d_model ? 2 * stop : d_model;
        return 1;
    }
    cols[0][0] = f0;
    cols[0][1] = stop;
    cols[1][0] = d_model / 2 + f0;
    cols[1][1] = stop == n_freq ? d_model : d_model / 2 + stop;
    return 2;
}

/* Whether a call's table is large enough for streaming stores (on the SIMD
   tiers): the scheduler asks, for the whole call, and passes the answer to
   every part it cuts the call into. */
static inline int peak_pe_streams(size_t n_pos, size_t d_model, const peak_pe_params *params)
{
    return params->mode == PEAK_PE_EXACT && d_model >= 64 &&
           n_pos >= PEAK_PE_STREAM_BYTES / sizeof(float) / d_model;
}

/* ---- the reference double sincos ---------------------------------------- */

/* ((coef[0] z + coef[1]) z + ...) + coef[n - 1], one fma a step. */
static inline double peak_pe_horner(double z, const double *coef, int n)
{
    double p = coef[0];
#pragma GCC unroll 8
    for (int i = 1; i < n; i++)
        p = fma(p, z, coef[i]);
    return p;
}

/* sin and cos of x >= 0, ~1e-16 absolute.  pe-table-body.h replicates this
   operation for operation (same roundings, same order), which is what makes
   the tiers bit-identical: keep them in step. */
static inline void peak_pe_sincos(double x, double *sin_out, double *cos_out)
{
    if (!(x < PEAK_PE_FAST_LIMIT)) {
        peak_pe_sincos_slow(x, sin_out, cos_out);
        return;
    }
    /* t = 0x1.8p52 + round(x * 2/pi): n lands in the low mantissa bits. */
    double t = fma(x, PEAK_PE_2_OVER_PI, PEAK_PE_SHIFTER);
    double n = t - PEAK_PE_SHIFTER;
    uint64_t q;
    memcpy(&q, &t, sizeof q);
    double r = fma(-n, PEAK_PE_PIO2_HI, x);
    r = fma(-n, PEAK_PE_PIO2_LO, r);
    double z = r * r;

    double s = fma(r * z, peak_pe_horner(z, peak_pe_sin_coef, PEAK_PE_SIN_TERMS), r);
    double c = fma(z, peak_pe_horner(z, peak_pe_cos_coef, PEAK_PE_COS_TERMS), 1.0);

    /* Quadrant n mod 4: odd swaps sin and cos; sin is negated for 2, 3 and
       cos for 1, 2. */
    double a = (q & 1) ? c : s;
    double b = (q & 1) ? s : c;
    *sin_out = (q & 2) ? -a : a;
    *cos_out = ((q + 1) & 2) ? -b : b;
}

/* ---- the rows driver's interface (pe-table-driver.h) --------------------- */

/* Callers of the rows driver bound n_rows by this, so that one column pass
   over the rows' operands stays in cache until the next pass. */
#define PEAK_PE_ROWS_MAX 256

/* Each tier's instance of the rows driver (pe-table-driver.h, with the
   tier's sincos and emit) is its pe_rows kernel (kernels.inc, internal.h's
   peak_pe_rows_fn), which the SIMD tiers' embedding kernels call by name
   (PEAK_TIER_FN(peak_f32_pe_rows)). */

#endif /* PEAK_PE_TABLE_H */
