/*
 * pe-table.h - what the scalar, AVX2, AVX-512 and NEON sinusoid tables
 * share.
 *
 * Every tier must produce the same bits, so everything that decides a bit of
 * the result lives here, written once: the frequencies (a libm/SLEEF helper
 * that every tier calls, compiled once in common/pe-ref.c), the
 * double-precision sincos that the SIMD files replicate operation for
 * operation, its constants, and the driver that splits positions into
 * blocks.  The tiers only supply how to evaluate
 * many sincos at once and how to store a row segment.
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

/* ---- the tiers' sincos chunks ------------------------------------------- */

/* The sincos of each tier over PEAK_PE_CHUNK angles (x and outputs 64-byte
   aligned): the driver's callbacks, exported so that the tests can compare
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

/* Whether a SIMD tier should use streaming stores for this call. */
static inline int peak_pe_streams(size_t n_pos, size_t d_model, const peak_pe_params *params)
{
    return params->mode == PEAK_PE_EXACT && d_model >= 64 &&
           n_pos >= PEAK_PE_STREAM_BYTES / sizeof(float) / d_model;
}

/* ---- the reference double sincos ---------------------------------------- */

/* sin and cos of x >= 0, ~1e-16 absolute.  The AVX2, AVX-512 and NEON files
   replicate this operation for operation (same roundings, same order), which
   is what makes the tiers bit-identical: keep them in step. */
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

    double ps = PEAK_PE_S15;
    ps = fma(ps, z, PEAK_PE_S13);
    ps = fma(ps, z, PEAK_PE_S11);
    ps = fma(ps, z, PEAK_PE_S9);
    ps = fma(ps, z, PEAK_PE_S7);
    ps = fma(ps, z, PEAK_PE_S5);
    ps = fma(ps, z, PEAK_PE_S3);
    double s = fma(r * z, ps, r);

    double pc = PEAK_PE_C16;
    pc = fma(pc, z, PEAK_PE_C14);
    pc = fma(pc, z, PEAK_PE_C12);
    pc = fma(pc, z, PEAK_PE_C10);
    pc = fma(pc, z, PEAK_PE_C8);
    pc = fma(pc, z, PEAK_PE_C6);
    pc = fma(pc, z, PEAK_PE_C4);
    pc = fma(pc, z, PEAK_PE_C2);
    double c = fma(z, pc, 1.0);

    /* Quadrant n mod 4: odd swaps sin and cos; sin is negated for 2, 3 and
       cos for 1, 2. */
    double a = (q & 1) ? c : s;
    double b = (q & 1) ? s : c;
    *sin_out = (q & 2) ? -a : a;
    *cos_out = ((q + 1) & 2) ? -b : b;
}

/* ---- the driver, compiled into each tier -------------------------------- */

/* sin/cos of x[0 .. PEAK_PE_CHUNK), elementwise. */
typedef void (*peak_pe_sincos_chunk_fn)(const double *x, double *s, double *c);
/* EXACT: one row's frequencies i0 .. i0+nc-1 from the block (sb, cb) and
   offset (sk, ck) tables. */
typedef void (*peak_pe_emit_exact_fn)(float *row, const double *sb, const double *cb,
                                      const double *sk, const double *ck, size_t i0, size_t nc,
                                      size_t d_model, peak_pe_layout layout);
/* TORCH_F32: one row at float position pf, frequencies wf[0 .. nc). */
typedef void (*peak_pe_emit_torch_fn)(float *row, float pf, const float *wf, size_t i0,
                                      size_t nc, size_t d_model, peak_pe_layout layout);

/* always_inline so each tier's callbacks are inlined into its own copy. */
static inline __attribute__((always_inline)) void
peak_pe_table_run(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model, size_t pos0,
                  const peak_pe_params *params, peak_pe_sincos_chunk_fn sincos_chunk,
                  peak_pe_emit_exact_fn emit_exact, peak_pe_emit_torch_fn emit_torch)
{
    const peak_pe_layout layout = params->layout;
    const size_t n_freq = peak_pe_n_freq(d_model, layout);

    if (layout != PEAK_PE_INTERLEAVED && (d_model & 1)) {
        for (size_t t = 0; t < n_pos; t++)
            out[(ptrdiff_t)t * ld_out + (ptrdiff_t)(d_model - 1)] = 0.0f;
    }

    PEAK_PE_ALIGN double w[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double lo[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double x[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double sb[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double cb[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double sk[PEAK_PE_BLOCK][PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double ck[PEAK_PE_BLOCK][PEAK_PE_CHUNK];
    PEAK_PE_ALIGN float wf[PEAK_PE_CHUNK];

    for (size_t i0 = 0; i0 < n_freq; i0 += PEAK_PE_CHUNK) {
        const size_t nc = n_freq - i0 < PEAK_PE_CHUNK ? n_freq - i0 : PEAK_PE_CHUNK;
        peak_pe_freqs(w, lo, i0, nc, d_model, params);

        if (params->mode == PEAK_PE_TORCH_F32) {
            for (size_t c = 0; c < PEAK_PE_CHUNK; c++)
                wf[c] = (float)w[c];
            for (size_t t = 0; t < n_pos; t++)
                emit_torch(out + (ptrdiff_t)t * ld_out, (float)(pos0 + t), wf, i0, nc, d_model,
                           layout);
            continue;
        }

        /* Offsets k: all of them once n_pos >= BLOCK, else only the n_pos
           (distinct) ones this call touches, so a 1-row call costs two
           sincos per frequency. */
        const size_t nk = n_pos < PEAK_PE_BLOCK ? n_pos : PEAK_PE_BLOCK;
        for (size_t t = 0; t < nk; t++) {
            const size_t k = (pos0 + t) & (PEAK_PE_BLOCK - 1);
            for (size_t c = 0; c < PEAK_PE_CHUNK; c++)
                x[c] = (double)k * w[c];
            sincos_chunk(x, sk[k], ck[k]);
        }

        const size_t end = pos0 + n_pos;
        for (size_t p = pos0; p < end;) {
            const size_t p0 = p & ~(size_t)(PEAK_PE_BLOCK - 1);
            const size_t block_end = end - p0 < PEAK_PE_BLOCK ? end : p0 + PEAK_PE_BLOCK;
            for (size_t c = 0; c < PEAK_PE_CHUNK; c++)
                x[c] = (double)p0 * w[c];
            sincos_chunk(x, sb, cb);
            for (; p < block_end; p++) {
                const size_t k = p - p0;
                emit_exact(out + (ptrdiff_t)(p - pos0) * ld_out, sb, cb, sk[k], ck[k], i0, nc,
                           d_model, layout);
            }
        }
    }
}

/* ---- the rows driver: on-the-fly PE fused into its consumer -------------- */

/* peak_embed_pe and peak_pe_add without a table.  Their rows sit at
   arbitrary positions (a batch of sequences, fairseq pads, per-token
   positions), and a PE row is wanted only to be added to something at once,
   so the rows driver evaluates the table's very expressions -- the same
   frequencies, sincos chunks and emit callbacks as peak_pe_table_run, hence
   the same bits -- one column chunk of a few rows at a time into a small
   scratch block, and hands each finished block to a sink that consumes it
   while it is in L1.  Writing whole PE rows to the output first and adding
   afterwards would send every row through L2 twice.

   Order: column chunk outermost (the offset tables sk/ck of one chunk are
   16 KiB; all of a row's would not stay in L1), then blocks of rows.  A
   block base (sb, cb) is reused while consecutive rows stay in its block of
   PEAK_PE_BLOCK positions, and an offset k is evaluated the first time a row
   of the chunk needs it, so a call costs two sincos per frequency for a
   single row and ~1/6 of one per row and frequency for 256 consecutive
   positions.  Callers bound n_rows (PEAK_PE_ROWS_MAX) so that one column
   pass over the rows' operands stays in cache until the next pass. */
#define PEAK_PE_ROWS_MAX 256
_Static_assert(PEAK_PE_BLOCK <= 64, "the rows driver keeps one bit per offset k in a uint64_t");

/* Rows t0 .. t1-1 of the call have their PE columns [c0, c1) in
   scratch[(t - t0) * ld_scratch + c0 .. + c1) (rows with a negative
   position: nothing, skip them). */
typedef void (*peak_pe_sink_fn)(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1);

/* Calls sink for the columns that chunk (i0, nc) fills. */
static inline __attribute__((always_inline)) void
peak_pe_sink_chunk(peak_pe_sink_fn sink, void *ctx, size_t t0, size_t t1, size_t i0, size_t nc,
                   size_t d_model, peak_pe_layout layout)
{
    if (layout == PEAK_PE_INTERLEAVED) {
        sink(ctx, t0, t1, 2 * i0, 2 * (i0 + nc) < d_model ? 2 * (i0 + nc) : d_model);
    } else {
        sink(ctx, t0, t1, i0, i0 + nc);
        sink(ctx, t0, t1, d_model / 2 + i0, d_model / 2 + i0 + nc);
    }
}

/* scratch: scratch_rows rows of d_model floats, ld_scratch apart.  pos ==
   NULL: row t is at position pos0 + t. */
static inline __attribute__((always_inline)) void
peak_pe_rows_run(float *scratch, size_t scratch_rows, size_t ld_scratch, size_t n_rows,
                 const int64_t *pos, size_t pos0, size_t d_model, const peak_pe_params *params,
                 peak_pe_sincos_chunk_fn sincos_chunk, peak_pe_emit_exact_fn emit_exact,
                 peak_pe_emit_torch_fn emit_torch, peak_pe_sink_fn sink, void *ctx)
{
    const peak_pe_layout layout = params->layout;
    const size_t n_freq = peak_pe_n_freq(d_model, layout);
    const int torch = params->mode == PEAK_PE_TORCH_F32;

    if (layout != PEAK_PE_INTERLEAVED && (d_model & 1)) {
        for (size_t r = 0; r < scratch_rows; r++)
            scratch[r * ld_scratch + d_model - 1] = 0.0f;
        for (size_t t0 = 0; t0 < n_rows; t0 += scratch_rows)
            sink(ctx, t0, n_rows - t0 < scratch_rows ? n_rows : t0 + scratch_rows, d_model - 1,
                 d_model);
    }

    PEAK_PE_ALIGN double w[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double lo[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double x[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double sb[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double cb[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double sk[PEAK_PE_BLOCK][PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double ck[PEAK_PE_BLOCK][PEAK_PE_CHUNK];
    PEAK_PE_ALIGN float wf[PEAK_PE_CHUNK];

    for (size_t i0 = 0; i0 < n_freq; i0 += PEAK_PE_CHUNK) {
        const size_t nc = n_freq - i0 < PEAK_PE_CHUNK ? n_freq - i0 : PEAK_PE_CHUNK;
        peak_pe_freqs(w, lo, i0, nc, d_model, params);
        if (torch)
            for (size_t c = 0; c < PEAK_PE_CHUNK; c++)
                wf[c] = (float)w[c];
        uint64_t have_k = 0;    /* offsets k already in sk/ck */
        size_t base = SIZE_MAX; /* the block whose sincos is in sb/cb */
        for (size_t t0 = 0; t0 < n_rows; t0 += scratch_rows) {
            const size_t t1 = n_rows - t0 < scratch_rows ? n_rows : t0 + scratch_rows;
            for (size_t t = t0; t < t1; t++) {
                if (pos && pos[t] < 0)
                    continue;
                float *row = scratch + (t - t0) * ld_scratch;
                const size_t p = pos ? (size_t)pos[t] : pos0 + t;
                if (torch) {
                    emit_torch(row, (float)p, wf, i0, nc, d_model, layout);
                    continue;
                }
                const size_t p0 = p & ~(size_t)(PEAK_PE_BLOCK - 1);
                const size_t k = p - p0;
                if (!(have_k >> k & 1)) {
                    for (size_t c = 0; c < PEAK_PE_CHUNK; c++)
                        x[c] = (double)k * w[c];
                    sincos_chunk(x, sk[k], ck[k]);
                    have_k |= (uint64_t)1 << k;
                }
                if (p0 != base) {
                    for (size_t c = 0; c < PEAK_PE_CHUNK; c++)
                        x[c] = (double)p0 * w[c];
                    sincos_chunk(x, sb, cb);
                    base = p0;
                }
                emit_exact(row, sb, cb, sk[k], ck[k], i0, nc, d_model, layout);
            }
            peak_pe_sink_chunk(sink, ctx, t0, t1, i0, nc, d_model, layout);
        }
    }
}

/* Each SIMD tier's instance of the rows driver (its own sincos and emit). */
PEAK_INTERNAL void peak_pe_rows__avx2(float *scratch, size_t scratch_rows, size_t ld_scratch,
                                      size_t n_rows, const int64_t *pos, size_t pos0,
                                      size_t d_model, const peak_pe_params *params,
                                      peak_pe_sink_fn sink, void *ctx);
PEAK_INTERNAL void peak_pe_rows__avx512(float *scratch, size_t scratch_rows, size_t ld_scratch,
                                        size_t n_rows, const int64_t *pos, size_t pos0,
                                        size_t d_model, const peak_pe_params *params,
                                        peak_pe_sink_fn sink, void *ctx);
PEAK_INTERNAL void peak_pe_rows__neon(float *scratch, size_t scratch_rows, size_t ld_scratch,
                                      size_t n_rows, const int64_t *pos, size_t pos0,
                                      size_t d_model, const peak_pe_params *params,
                                      peak_pe_sink_fn sink, void *ctx);

#endif /* PEAK_PE_TABLE_H */
