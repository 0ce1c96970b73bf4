/*
 * pe-table-body.h - the sinusoid table's vector code, written once against
 * the vector vocabulary (simd/f32-<isa>.h, which the tier's file includes
 * first): the arithmetic that pe-table-driver.h calls by name, the
 * drivers themselves, and the tier's kernels (PEAK_TIER_FN).
 *
 * Bit-identical to the scalar tier: pe_sincos is peak_pe_sincos
 * (pe-table.h) over PEAK_VD_LANES angles with each scalar operation
 * replaced by the vector one that rounds the same way (fma(-n, h, x) ->
 * peak_vd_fnma, (float) -> peak_vd_narrow, ...), and the frequencies and
 * the rare slow-path angles are the shared scalar code.  A step handles
 * PEAK_VD_LANES frequencies, stored as half a peak_vf of sines and one of
 * cosines; row ends use the vocabulary's store_first, so nothing outside
 * a row's d_model floats is written.
 */
#ifndef PEAK_PE_TABLE_BODY_H
#define PEAK_PE_TABLE_BODY_H

#include "pe-table.h"

#ifndef PEAK_VD_LANES
#error "include a vector vocabulary (simd/f32-<isa>.h) before pe-table-body.h"
#endif

/* Vectors per step of pe_sincos_chunk: a tier raises it where the core
   needs more independent polynomial chains in flight than it finds itself. */
#ifndef PEAK_PE_SINCOS_UNROLL
#define PEAK_PE_SINCOS_UNROLL 1
#endif

/* ---- the double sincos -------------------------------------------------- */

/* pe-table.h's peak_pe_horner, lane by lane (unrolled: the coefficients
   become constants). */
static inline __attribute__((always_inline)) peak_vd pe_horner(peak_vd z, const double *coef,
                                                               int n)
{
    peak_vd p = peak_vd_set1(coef[0]);
#pragma GCC unroll 8
    for (int i = 1; i < n; i++)
        p = peak_vd_fma(p, z, peak_vd_set1(coef[i]));
    return p;
}

static inline void pe_sincos(peak_vd x, peak_vd *sin_out, peak_vd *cos_out)
{
    const peak_vd shifter = peak_vd_set1(PEAK_PE_SHIFTER);
    /* t = 0x1.8p52 + round(x * 2/pi): n lands in the low bits of t's pattern. */
    const peak_vd t = peak_vd_fma(x, peak_vd_set1(PEAK_PE_2_OVER_PI), shifter);
    const peak_vd n = peak_vd_sub(t, shifter);
    peak_vd r = peak_vd_fnma(n, peak_vd_set1(PEAK_PE_PIO2_HI), x);
    r = peak_vd_fnma(n, peak_vd_set1(PEAK_PE_PIO2_LO), r);
    const peak_vd z = peak_vd_mul(r, r);

    const peak_vd ps = pe_horner(z, peak_pe_sin_coef, PEAK_PE_SIN_TERMS);
    const peak_vd s = peak_vd_fma(peak_vd_mul(r, z), ps, r);
    const peak_vd pc = pe_horner(z, peak_pe_cos_coef, PEAK_PE_COS_TERMS);
    const peak_vd c = peak_vd_fma(z, pc, peak_vd_set1(1.0));

    /* Quadrant n mod 4: odd swaps sin and cos; sin is negated for 2, 3 and
       cos for 1, 2 (bit 1 of n + 1). */
    *sin_out = peak_vd_negate_bit1(peak_vd_select_odd(t, s, c), t);
    *cos_out = peak_vd_negate_bit1(peak_vd_select_odd(t, c, s), peak_vd_inc_bits(t));
}

/* Lanes of x beyond the fast range (NaN too), a bit each: these take the
   shared scalar path, so that they match the scalar tier. */
static inline unsigned pe_slow_lanes(peak_vd x)
{
    return peak_vd_mask_not_lt(x, peak_vd_set1(PEAK_PE_FAST_LIMIT));
}

/* s[l], c[l] = the scalar path's sincos of x[l] for each lane l of slow. */
static inline void pe_redo_slow(const double *x, double *s, double *c, unsigned slow)
{
    while (slow) {
        const unsigned l = (unsigned)__builtin_ctz(slow);
        peak_pe_sincos_slow(x[l], &s[l], &c[l]);
        slow &= slow - 1;
    }
}

/* sin/cos of x[0 .. PEAK_PE_CHUNK) (64-byte aligned, as s and c).  Out of
   line: the drivers call it from 6 places, each worth one call, not one
   more copy of the polynomials. */
static __attribute__((noinline)) void pe_sincos_chunk(const double *x, double *s, double *c)
{
    enum { STEP = PEAK_VD_LANES * PEAK_PE_SINCOS_UNROLL };
    for (size_t j = 0; j < PEAK_PE_CHUNK; j += STEP) {
        for (size_t u = j; u < j + STEP; u += PEAK_VD_LANES) {
            const peak_vd vx = peak_vd_load(x + u);
            peak_vd vs, vc;
            pe_sincos(vx, &vs, &vc);
            peak_vd_store(s + u, vs);
            peak_vd_store(c + u, vc);
            pe_redo_slow(x + u, s + u, c + u, pe_slow_lanes(vx));
        }
    }
}

/* pe_sincos with the slow lanes redone, for angles in registers. */
static inline void pe_sincos_all(peak_vd x, peak_vd *sin_out, peak_vd *cos_out)
{
    pe_sincos(x, sin_out, cos_out);
    const unsigned slow = pe_slow_lanes(x);
    if (slow) {
        PEAK_PE_ALIGN double xs[PEAK_VD_LANES], ss[PEAK_VD_LANES], cs[PEAK_VD_LANES];
        peak_vd_store(xs, x);
        peak_vd_store(ss, *sin_out);
        peak_vd_store(cs, *cos_out);
        pe_redo_slow(xs, ss, cs, slow);
        *sin_out = peak_vd_load(ss);
        *cos_out = peak_vd_load(cs);
    }
}

/* ---- rows --------------------------------------------------------------- */

enum pe_store_kind { PE_STORE_PART, PE_STORE_FULL, PE_STORE_STREAM };

/* The sines and cosines of frequencies i .. i + PEAK_VD_LANES - 1 (n of
   them valid) to the row.  FULL/STREAM: all valid and, interleaved, all
   their columns inside the row; STREAM also needs PEAK_VF_ALIGN
   (interleaved) or PEAK_VF_ALIGN / 2 (split) aligned destinations. */
static inline __attribute__((always_inline)) void
pe_store(float *row, peak_vd s, peak_vd c, size_t i, size_t n, size_t d_model,
         peak_pe_layout layout, enum pe_store_kind kind)
{
    const peak_vfh fs = peak_vd_narrow(s);
    const peak_vfh fc = peak_vd_narrow(c);
    if (layout == PEAK_PE_INTERLEAVED) {
        const peak_vf v = peak_vf_interleave(fs, fc);
        if (kind == PE_STORE_STREAM) {
            peak_vf_stream(row + 2 * i, v);
        } else if (kind == PE_STORE_FULL) {
            peak_vf_storeu(row + 2 * i, v);
        } else {
            /* An odd d_model's last column is a sine: stop at d_model. */
            const size_t cols = d_model - 2 * i < 2 * n ? d_model - 2 * i : 2 * n;
            peak_vf_store_first(row + 2 * i, v, cols);
        }
    } else if (kind == PE_STORE_STREAM) {
        peak_vfh_stream(row + i, fs);
        peak_vfh_stream(row + d_model / 2 + i, fc);
    } else if (kind == PE_STORE_FULL) {
        peak_vfh_storeu(row + i, fs);
        peak_vfh_storeu(row + d_model / 2 + i, fc);
    } else {
        peak_vfh_store_first(row + i, fs, n);
        peak_vfh_store_first(row + d_model / 2 + i, fc, n);
    }
}

/* sin(p w) = fma(SB, CK, CB * SK), cos(p w) = fma(CB, CK, -(SB * SK)) for
   the frequencies at offset j of the tables. */
static inline __attribute__((always_inline)) void
pe_combine(const double *sb, const double *cb, const double *sk, const double *ck, size_t j,
           peak_vd *s, peak_vd *c)
{
    const peak_vd vsb = peak_vd_load(sb + j);
    const peak_vd vcb = peak_vd_load(cb + j);
    const peak_vd vsk = peak_vd_load(sk + j);
    const peak_vd vck = peak_vd_load(ck + j);
    *s = peak_vd_fma(vsb, vck, peak_vd_mul(vcb, vsk));
    *c = peak_vd_fms(vcb, vck, peak_vd_mul(vsb, vsk));
}

/* A whole chunk inside the row: a constant trip count and no row ends.
   Called with a constant layout and kind, so each is a loop of its own. */
static inline __attribute__((always_inline)) void
pe_emit_chunk(float *row, const double *sb, const double *cb, const double *sk,
              const double *ck, size_t i0, size_t d_model, peak_pe_layout layout,
              enum pe_store_kind kind)
{
    for (size_t j = 0; j < PEAK_PE_CHUNK; j += PEAK_VD_LANES) {
        peak_vd s, c;
        pe_combine(sb, cb, sk, ck, j, &s, &c);
        pe_store(row, s, c, i0 + j, PEAK_VD_LANES, d_model, layout, kind);
    }
}

/* Whether p is a multiple of bytes (a power of two). */
static inline int pe_aligned(const float *p, size_t bytes)
{
    return ((uintptr_t)p & (bytes - 1)) == 0;
}

static inline __attribute__((always_inline)) void
pe_emit_exact(float *row, const double *sb, const double *cb, const double *sk, const double *ck,
              size_t i0, size_t nc, size_t d_model, peak_pe_layout layout, int stream)
{
    const size_t cols_per_freq = layout == PEAK_PE_INTERLEAVED ? 2 : 1;
    if (nc == PEAK_PE_CHUNK && cols_per_freq * (i0 + PEAK_PE_CHUNK) <= d_model) {
        if (layout == PEAK_PE_INTERLEAVED) {
            if (stream && pe_aligned(row + 2 * i0, PEAK_VF_ALIGN))
                pe_emit_chunk(row, sb, cb, sk, ck, i0, d_model, PEAK_PE_INTERLEAVED,
                              PE_STORE_STREAM);
            else
                pe_emit_chunk(row, sb, cb, sk, ck, i0, d_model, PEAK_PE_INTERLEAVED,
                              PE_STORE_FULL);
        } else if (stream && pe_aligned(row + i0, PEAK_VF_ALIGN / 2) &&
                   pe_aligned(row + d_model / 2 + i0, PEAK_VF_ALIGN / 2)) {
            pe_emit_chunk(row, sb, cb, sk, ck, i0, d_model, PEAK_PE_SPLIT, PE_STORE_STREAM);
        } else {
            pe_emit_chunk(row, sb, cb, sk, ck, i0, d_model, PEAK_PE_SPLIT, PE_STORE_FULL);
        }
        return;
    }
    /* The tables hold PEAK_PE_CHUNK entries (zero frequencies past nc), so
       whole vectors may be evaluated; only the stores stop at nc. */
    for (size_t j = 0; j < nc; j += PEAK_VD_LANES) {
        peak_vd s, c;
        pe_combine(sb, cb, sk, ck, j, &s, &c);
        const size_t n = nc - j < PEAK_VD_LANES ? nc - j : PEAK_VD_LANES;
        pe_store(row, s, c, i0 + j, n, d_model, layout, PE_STORE_PART);
    }
}

static inline void pe_emit_torch(float *row, float pf, const float *wf, size_t i0, size_t nc,
                                 size_t d_model, peak_pe_layout layout)
{
    const size_t cols_per_freq = layout == PEAK_PE_INTERLEAVED ? 2 : 1;
    const peak_vfh vpf = peak_vfh_set1(pf);
    for (size_t j = 0; j < nc; j += PEAK_VD_LANES) {
        /* The float product PyTorch forms, then sincos in double. */
        const peak_vd x = peak_vd_widen(peak_vfh_mul(vpf, peak_vfh_loadu(wf + j)));
        peak_vd s, c;
        pe_sincos_all(x, &s, &c);
        const size_t n = nc - j < PEAK_VD_LANES ? nc - j : PEAK_VD_LANES;
        if (n == PEAK_VD_LANES && cols_per_freq * (i0 + j + PEAK_VD_LANES) <= d_model)
            pe_store(row, s, c, i0 + j, n, d_model, layout, PE_STORE_FULL);
        else
            pe_store(row, s, c, i0 + j, n, d_model, layout, PE_STORE_PART);
    }
}

#include "pe-table-driver.h"

/* The table kernel: streaming stores where the scheduler asks for them (a
   large EXACT table, pe-table.h's peak_pe_streams), weakly ordered, so
   fenced before return. */
static inline void pe_table(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                            size_t pos0, const peak_pe_params *params, size_t f0, size_t f1,
                            bool stream)
{
    if (stream) {
        peak_pe_table_run(out, ld_out, n_pos, d_model, pos0, params, f0, f1, 1);
        peak_vf_stream_fence();
    } else {
        peak_pe_table_run(out, ld_out, n_pos, d_model, pos0, params, f0, f1, 0);
    }
}

/* ---- the kernels of the including tier (kernels.inc) ---- */

void PEAK_TIER_FN(peak_pe_sincos_chunk)(const double *x, double *s, double *c)
{
    pe_sincos_chunk(x, s, c);
}

void PEAK_TIER_FN(peak_f32_pe_rows)(float *scratch, size_t scratch_rows, size_t ld_scratch,
                                    size_t n_rows, const int64_t *pos, size_t pos0,
                                    size_t d_model, const peak_pe_params *params, size_t f0,
                                    size_t f1, peak_pe_sink_fn sink, void *ctx)
{
    peak_pe_rows_run(scratch, scratch_rows, ld_scratch, n_rows, pos, pos0, d_model, params, f0,
                     f1, sink, ctx);
}

void PEAK_TIER_FN(peak_f32_pe_table)(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                             size_t pos0, const peak_pe_params *params, size_t f0, size_t f1,
                             bool stream)
{
    pe_table(out, ld_out, n_pos, d_model, pos0, params, f0, f1, stream);
}

#endif /* PEAK_PE_TABLE_BODY_H */
