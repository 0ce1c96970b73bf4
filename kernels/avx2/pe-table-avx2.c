/*
 * pe-table-avx2.c - the sinusoid table with AVX2 + FMA: 4 columns'
 * frequencies per vector of doubles.
 *
 * Bit-identical to pe-table-scalar.c: sincos4 is peak_pe_sincos (pe-table.h)
 * with each scalar operation replaced by the one vector instruction that
 * rounds the same way, and the driver, the frequencies and the rare
 * slow-path angles are the shared scalar code.  Column tails store with
 * peak_avx2_store_first (simd/f32-avx2.h: vmaskmovps stores are slow on
 * Zen 3): nothing outside the row's d_model floats is written.
 */
#include "pe-table.h"
#include "simd/f32-avx2.h"

#include <immintrin.h>

static inline void sincos4(__m256d x, __m256d *sin_out, __m256d *cos_out)
{
    const __m256d vshift = _mm256_set1_pd(PEAK_PE_SHIFTER);
    const __m256d t = _mm256_fmadd_pd(x, _mm256_set1_pd(PEAK_PE_2_OVER_PI), vshift);
    const __m256d n = _mm256_sub_pd(t, vshift);
    const __m256i q = _mm256_castpd_si256(t);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(PEAK_PE_PIO2_HI), x);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(PEAK_PE_PIO2_LO), r);
    const __m256d z = _mm256_mul_pd(r, r);

    __m256d ps = _mm256_set1_pd(PEAK_PE_S15);
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(PEAK_PE_S13));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(PEAK_PE_S11));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(PEAK_PE_S9));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(PEAK_PE_S7));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(PEAK_PE_S5));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(PEAK_PE_S3));
    const __m256d s = _mm256_fmadd_pd(_mm256_mul_pd(r, z), ps, r);

    __m256d pc = _mm256_set1_pd(PEAK_PE_C16);
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(PEAK_PE_C14));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(PEAK_PE_C12));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(PEAK_PE_C10));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(PEAK_PE_C8));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(PEAK_PE_C6));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(PEAK_PE_C4));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(PEAK_PE_C2));
    const __m256d c = _mm256_fmadd_pd(z, pc, _mm256_set1_pd(1.0));

    const __m256i one = _mm256_set1_epi64x(1);
    const __m256i two = _mm256_set1_epi64x(2);
    /* blendv keys on the sign bit: bit 0 of n moved there. */
    const __m256d odd = _mm256_castsi256_pd(_mm256_slli_epi64(q, 63));
    const __m256d a = _mm256_blendv_pd(s, c, odd);
    const __m256d b = _mm256_blendv_pd(c, s, odd);
    /* Bit 1 of n (sin) and of n + 1 (cos) moved to the sign bit. */
    const __m256i sa = _mm256_slli_epi64(_mm256_and_si256(q, two), 62);
    const __m256i sb = _mm256_slli_epi64(_mm256_and_si256(_mm256_add_epi64(q, one), two), 62);
    *sin_out = _mm256_castsi256_pd(_mm256_xor_si256(_mm256_castpd_si256(a), sa));
    *cos_out = _mm256_castsi256_pd(_mm256_xor_si256(_mm256_castpd_si256(b), sb));
}

/* Lanes beyond the fast range (NaN compares true too) take the shared
   scalar path, so they match the scalar tier. */
static inline int slow_lanes(__m256d x)
{
    return _mm256_movemask_pd(_mm256_cmp_pd(x, _mm256_set1_pd(PEAK_PE_FAST_LIMIT), _CMP_NLT_UQ));
}

void peak_pe_sincos_chunk__avx2(const double *x, double *s, double *c)
{
    for (size_t j = 0; j < PEAK_PE_CHUNK; j += 4) {
        const __m256d vx = _mm256_load_pd(x + j);
        __m256d vs, vc;
        sincos4(vx, &vs, &vc);
        _mm256_store_pd(s + j, vs);
        _mm256_store_pd(c + j, vc);
        int slow = slow_lanes(vx);
        while (slow) {
            const unsigned l = (unsigned)__builtin_ctz((unsigned)slow);
            peak_pe_sincos_slow(x[j + l], &s[j + l], &c[j + l]);
            slow &= slow - 1;
        }
    }
}

enum store_kind { STORE_PART, STORE_FULL, STORE_STREAM };

/* 4 sines and cosines (columns' frequencies i .. i+3, n of them valid) to
   the row.  STORE_FULL/STREAM: all 4 valid and, interleaved, all 8 columns
   inside the row; STREAM also needs 32-byte (interleaved) or 16-byte
   (split) aligned destinations.  STORE_PART: any n (a row's last
   frequencies). */
static inline __attribute__((always_inline)) void
store4(float *row, __m256d s, __m256d c, size_t i, size_t n, size_t d_model,
       peak_pe_layout layout, enum store_kind kind)
{
    const __m128 fs = _mm256_cvtpd_ps(s);
    const __m128 fc = _mm256_cvtpd_ps(c);
    if (layout == PEAK_PE_INTERLEAVED) {
        const __m256 v =
            _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_unpacklo_ps(fs, fc)),
                                 _mm_unpackhi_ps(fs, fc), 1);
        if (kind == STORE_STREAM) {
            _mm256_stream_ps(row + 2 * i, v);
        } else if (kind == STORE_FULL) {
            _mm256_storeu_ps(row + 2 * i, v);
        } else {
            /* An odd d_model's last column is a sine: stop at d_model. */
            const size_t cols = d_model - 2 * i < 2 * n ? d_model - 2 * i : 2 * n;
            if (cols == 8)
                _mm256_storeu_ps(row + 2 * i, v);
            else
                peak_avx2_store_first(row + 2 * i, v, cols);
        }
    } else if (kind == STORE_STREAM) {
        _mm_stream_ps(row + i, fs);
        _mm_stream_ps(row + d_model / 2 + i, fc);
    } else if (kind == STORE_FULL || n == 4) {
        _mm_storeu_ps(row + i, fs);
        _mm_storeu_ps(row + d_model / 2 + i, fc);
    } else {
        peak_sse_store_first(row + i, fs, n);
        peak_sse_store_first(row + d_model / 2 + i, fc, n);
    }
}

static inline __attribute__((always_inline)) void
combine4(const double *sb, const double *cb, const double *sk, const double *ck, __m256d *s,
         __m256d *c)
{
    const __m256d vsb = _mm256_load_pd(sb);
    const __m256d vcb = _mm256_load_pd(cb);
    const __m256d vsk = _mm256_load_pd(sk);
    const __m256d vck = _mm256_load_pd(ck);
    *s = _mm256_fmadd_pd(vsb, vck, _mm256_mul_pd(vcb, vsk));
    *c = _mm256_fmsub_pd(vcb, vck, _mm256_mul_pd(vsb, vsk));
}

static inline __attribute__((always_inline)) void
emit_exact(float *row, const double *sb, const double *cb, const double *sk, const double *ck,
           size_t i0, size_t nc, size_t d_model, peak_pe_layout layout, int stream)
{
    __m256d s, c;
    const size_t cols_per_freq = layout == PEAK_PE_INTERLEAVED ? 2 : 1;
    if (nc == PEAK_PE_CHUNK && cols_per_freq * (i0 + PEAK_PE_CHUNK) <= d_model) {
        /* The common case: a constant trip count and no masks. */
        if (layout == PEAK_PE_INTERLEAVED) {
            if (stream && ((uintptr_t)(row + 2 * i0) & 31) == 0) {
                for (size_t j = 0; j < PEAK_PE_CHUNK; j += 4) {
                    combine4(sb + j, cb + j, sk + j, ck + j, &s, &c);
                    store4(row, s, c, i0 + j, 4, d_model, PEAK_PE_INTERLEAVED, STORE_STREAM);
                }
            } else {
                for (size_t j = 0; j < PEAK_PE_CHUNK; j += 4) {
                    combine4(sb + j, cb + j, sk + j, ck + j, &s, &c);
                    store4(row, s, c, i0 + j, 4, d_model, PEAK_PE_INTERLEAVED, STORE_FULL);
                }
            }
        } else {
            if (stream &&
                (((uintptr_t)(row + i0) | (uintptr_t)(row + d_model / 2 + i0)) & 15) == 0) {
                for (size_t j = 0; j < PEAK_PE_CHUNK; j += 4) {
                    combine4(sb + j, cb + j, sk + j, ck + j, &s, &c);
                    store4(row, s, c, i0 + j, 4, d_model, PEAK_PE_SPLIT, STORE_STREAM);
                }
            } else {
                for (size_t j = 0; j < PEAK_PE_CHUNK; j += 4) {
                    combine4(sb + j, cb + j, sk + j, ck + j, &s, &c);
                    store4(row, s, c, i0 + j, 4, d_model, PEAK_PE_SPLIT, STORE_FULL);
                }
            }
        }
        return;
    }
    for (size_t j = 0; j < nc; j += 4) {
        combine4(sb + j, cb + j, sk + j, ck + j, &s, &c);
        store4(row, s, c, i0 + j, nc - j < 4 ? nc - j : 4, d_model, layout, STORE_PART);
    }
}

static void emit_exact_avx2(float *row, const double *sb, const double *cb, const double *sk,
                            const double *ck, size_t i0, size_t nc, size_t d_model,
                            peak_pe_layout layout)
{
    emit_exact(row, sb, cb, sk, ck, i0, nc, d_model, layout, 0);
}

static void emit_exact_avx2_stream(float *row, const double *sb, const double *cb,
                                   const double *sk, const double *ck, size_t i0, size_t nc,
                                   size_t d_model, peak_pe_layout layout)
{
    emit_exact(row, sb, cb, sk, ck, i0, nc, d_model, layout, 1);
}

static void emit_torch_avx2(float *row, float pf, const float *wf, size_t i0, size_t nc,
                            size_t d_model, peak_pe_layout layout)
{
    const size_t cols_per_freq = layout == PEAK_PE_INTERLEAVED ? 2 : 1;
    const __m128 vpf = _mm_set1_ps(pf);
    for (size_t j = 0; j < nc; j += 4) {
        const __m128 angle = _mm_mul_ps(vpf, _mm_load_ps(wf + j));
        const __m256d x = _mm256_cvtps_pd(angle);
        __m256d s, c;
        sincos4(x, &s, &c);
        int slow = slow_lanes(x);
        if (slow) {
            PEAK_PE_ALIGN double xs[4], ss[4], cs[4];
            _mm256_store_pd(xs, x);
            _mm256_store_pd(ss, s);
            _mm256_store_pd(cs, c);
            while (slow) {
                const unsigned l = (unsigned)__builtin_ctz((unsigned)slow);
                peak_pe_sincos_slow(xs[l], &ss[l], &cs[l]);
                slow &= slow - 1;
            }
            s = _mm256_load_pd(ss);
            c = _mm256_load_pd(cs);
        }
        const size_t n = nc - j < 4 ? nc - j : 4;
        if (n == 4 && cols_per_freq * (i0 + j + 4) <= d_model)
            store4(row, s, c, i0 + j, 4, d_model, layout, STORE_FULL);
        else
            store4(row, s, c, i0 + j, n, d_model, layout, STORE_PART);
    }
}

/* The on-the-fly PE of peak_embed_pe and peak_pe_add (pe-table.h): the
   table's own emits, into the caller's L1 scratch block, inlined into the
   rows driver (it calls them once per row and column chunk). */
static inline __attribute__((always_inline)) void
emit_exact_inline(float *row, const double *sb, const double *cb, const double *sk,
                  const double *ck, size_t i0, size_t nc, size_t d_model, peak_pe_layout layout)
{
    emit_exact(row, sb, cb, sk, ck, i0, nc, d_model, layout, 0);
}

void peak_pe_rows__avx2(float *scratch, size_t scratch_rows, size_t ld_scratch,
                        size_t n_rows, const int64_t *pos, size_t pos0, size_t d_model,
                        const peak_pe_params *params, peak_pe_sink_fn sink, void *ctx)
{
    peak_pe_rows_run(scratch, scratch_rows, ld_scratch, n_rows, pos, pos0, d_model, params,
                     peak_pe_sincos_chunk__avx2, emit_exact_inline, emit_torch_avx2, sink, ctx);
}

void peak_f32_pe_table__avx2(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                             size_t pos0, const peak_pe_params *params)
{
    if (peak_pe_streams(n_pos, d_model, params)) {
        peak_pe_table_run(out, ld_out, n_pos, d_model, pos0, params, peak_pe_sincos_chunk__avx2,
                          emit_exact_avx2_stream, emit_torch_avx2);
        /* Streaming stores are weakly ordered: fence them before return. */
        _mm_sfence();
    } else {
        peak_pe_table_run(out, ld_out, n_pos, d_model, pos0, params, peak_pe_sincos_chunk__avx2,
                          emit_exact_avx2, emit_torch_avx2);
    }
}
