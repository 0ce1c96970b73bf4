/*
 * pe-table-avx512.c - the sinusoid table with AVX-512 F/DQ/VL: 8 columns'
 * frequencies per vector of doubles.
 *
 * Bit-identical to pe-table-scalar.c: sincos8 is peak_pe_sincos (pe-table.h)
 * with each scalar operation replaced by the one vector instruction that
 * rounds the same way (fma -> vfmadd, -n*h+x -> vfnmadd, ...), and the
 * driver, the frequencies and the rare slow-path angles are the shared
 * scalar code.  Column tails use masked stores: nothing outside the row's
 * d_model floats is read or written.
 */
#include "pe-table.h"

#include "avx512/intrin-avx512.h"

static inline void sincos8(__m512d x, __m512d *sin_out, __m512d *cos_out)
{
    const __m512d vshift = _mm512_set1_pd(PEAK_PE_SHIFTER);
    const __m512d t = _mm512_fmadd_pd(x, _mm512_set1_pd(PEAK_PE_2_OVER_PI), vshift);
    const __m512d n = _mm512_sub_pd(t, vshift);
    const __m512i q = _mm512_castpd_si512(t);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(PEAK_PE_PIO2_HI), x);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(PEAK_PE_PIO2_LO), r);
    const __m512d z = _mm512_mul_pd(r, r);

    __m512d ps = _mm512_set1_pd(PEAK_PE_S15);
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(PEAK_PE_S13));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(PEAK_PE_S11));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(PEAK_PE_S9));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(PEAK_PE_S7));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(PEAK_PE_S5));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(PEAK_PE_S3));
    const __m512d s = _mm512_fmadd_pd(_mm512_mul_pd(r, z), ps, r);

    __m512d pc = _mm512_set1_pd(PEAK_PE_C16);
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(PEAK_PE_C14));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(PEAK_PE_C12));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(PEAK_PE_C10));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(PEAK_PE_C8));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(PEAK_PE_C6));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(PEAK_PE_C4));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(PEAK_PE_C2));
    const __m512d c = _mm512_fmadd_pd(z, pc, _mm512_set1_pd(1.0));

    const __m512i one = _mm512_set1_epi64(1);
    const __m512i two = _mm512_set1_epi64(2);
    const __mmask8 odd = _mm512_test_epi64_mask(q, one);
    const __m512d a = _mm512_mask_blend_pd(odd, s, c);
    const __m512d b = _mm512_mask_blend_pd(odd, c, s);
    /* Bit 1 of n (sin) and of n + 1 (cos) moved to the sign bit. */
    const __m512i sa = _mm512_slli_epi64(_mm512_and_si512(q, two), 62);
    const __m512i sb = _mm512_slli_epi64(_mm512_and_si512(_mm512_add_epi64(q, one), two), 62);
    *sin_out = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(a), sa));
    *cos_out = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(b), sb));
}

/* Lanes beyond the fast range (NaN compares false too) take the shared
   scalar path, so they match the scalar tier. */
static inline __mmask8 slow_lanes(__m512d x)
{
    return _mm512_cmp_pd_mask(x, _mm512_set1_pd(PEAK_PE_FAST_LIMIT), _CMP_NLT_UQ);
}

void peak_pe_sincos_chunk__avx512(const double *x, double *s, double *c)
{
    for (size_t j = 0; j < PEAK_PE_CHUNK; j += 8) {
        const __m512d vx = _mm512_load_pd(x + j);
        __m512d vs, vc;
        sincos8(vx, &vs, &vc);
        _mm512_store_pd(s + j, vs);
        _mm512_store_pd(c + j, vc);
        __mmask8 slow = slow_lanes(vx);
        while (slow) {
            const unsigned l = (unsigned)__builtin_ctz(slow);
            peak_pe_sincos_slow(x[j + l], &s[j + l], &c[j + l]);
            slow &= (__mmask8)(slow - 1);
        }
    }
}

enum store_kind { STORE_MASKED, STORE_FULL, STORE_STREAM };

/* 8 sines and cosines (columns' frequencies i .. i+7, n of them valid) to
   the row.  STORE_FULL/STREAM: all 8 valid and, interleaved, all 16 columns
   inside the row; STREAM also needs 64-byte (interleaved) or 32-byte
   (split) aligned destinations. */
static inline __attribute__((always_inline)) void
store8(float *row, __m512d s, __m512d c, size_t i, size_t n, size_t d_model,
       peak_pe_layout layout, enum store_kind kind)
{
    const __m256 fs = _mm512_cvtpd_ps(s);
    const __m256 fc = _mm512_cvtpd_ps(c);
    if (layout == PEAK_PE_INTERLEAVED) {
        /* Lanes 0-7 of fs with lanes 0-7 of fc (index 16+): the upper
           halves of the casts are never selected. */
        const __m512i idx =
            _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const __m512 v = _mm512_permutex2var_ps(_mm512_castps256_ps512(fs), idx,
                                                _mm512_castps256_ps512(fc));
        if (kind == STORE_STREAM) {
            _mm512_stream_ps(row + 2 * i, v);
        } else if (kind == STORE_FULL) {
            _mm512_storeu_ps(row + 2 * i, v);
        } else {
            /* An odd d_model's last column is a sine: stop at d_model. */
            const size_t cols = d_model - 2 * i < 2 * n ? d_model - 2 * i : 2 * n;
            _mm512_mask_storeu_ps(row + 2 * i, (__mmask16)((1u << cols) - 1), v);
        }
    } else if (kind == STORE_STREAM) {
        _mm256_stream_ps(row + i, fs);
        _mm256_stream_ps(row + d_model / 2 + i, fc);
    } else if (kind == STORE_FULL) {
        _mm256_storeu_ps(row + i, fs);
        _mm256_storeu_ps(row + d_model / 2 + i, fc);
    } else {
        const __mmask8 m = (__mmask8)((1u << n) - 1);
        _mm256_mask_storeu_ps(row + i, m, fs);
        _mm256_mask_storeu_ps(row + d_model / 2 + i, m, fc);
    }
}

static inline __attribute__((always_inline)) void
combine8(const double *sb, const double *cb, const double *sk, const double *ck, __m512d *s,
         __m512d *c)
{
    const __m512d vsb = _mm512_load_pd(sb);
    const __m512d vcb = _mm512_load_pd(cb);
    const __m512d vsk = _mm512_load_pd(sk);
    const __m512d vck = _mm512_load_pd(ck);
    *s = _mm512_fmadd_pd(vsb, vck, _mm512_mul_pd(vcb, vsk));
    *c = _mm512_fmsub_pd(vcb, vck, _mm512_mul_pd(vsb, vsk));
}

static inline __attribute__((always_inline)) void
emit_exact(float *row, const double *sb, const double *cb, const double *sk, const double *ck,
           size_t i0, size_t nc, size_t d_model, peak_pe_layout layout, int stream)
{
    __m512d s, c;
    const size_t cols_per_freq = layout == PEAK_PE_INTERLEAVED ? 2 : 1;
    if (nc == PEAK_PE_CHUNK && cols_per_freq * (i0 + PEAK_PE_CHUNK) <= d_model) {
        /* The common case: a constant trip count and no masks. */
        if (layout == PEAK_PE_INTERLEAVED) {
            if (stream && ((uintptr_t)(row + 2 * i0) & 63) == 0) {
                for (size_t j = 0; j < PEAK_PE_CHUNK; j += 8) {
                    combine8(sb + j, cb + j, sk + j, ck + j, &s, &c);
                    store8(row, s, c, i0 + j, 8, d_model, PEAK_PE_INTERLEAVED, STORE_STREAM);
                }
            } else {
                for (size_t j = 0; j < PEAK_PE_CHUNK; j += 8) {
                    combine8(sb + j, cb + j, sk + j, ck + j, &s, &c);
                    store8(row, s, c, i0 + j, 8, d_model, PEAK_PE_INTERLEAVED, STORE_FULL);
                }
            }
        } else {
            if (stream &&
                (((uintptr_t)(row + i0) | (uintptr_t)(row + d_model / 2 + i0)) & 31) == 0) {
                for (size_t j = 0; j < PEAK_PE_CHUNK; j += 8) {
                    combine8(sb + j, cb + j, sk + j, ck + j, &s, &c);
                    store8(row, s, c, i0 + j, 8, d_model, PEAK_PE_SPLIT, STORE_STREAM);
                }
            } else {
                for (size_t j = 0; j < PEAK_PE_CHUNK; j += 8) {
                    combine8(sb + j, cb + j, sk + j, ck + j, &s, &c);
                    store8(row, s, c, i0 + j, 8, d_model, PEAK_PE_SPLIT, STORE_FULL);
                }
            }
        }
        return;
    }
    for (size_t j = 0; j < nc; j += 8) {
        combine8(sb + j, cb + j, sk + j, ck + j, &s, &c);
        store8(row, s, c, i0 + j, nc - j < 8 ? nc - j : 8, d_model, layout, STORE_MASKED);
    }
}

static void emit_exact_avx512(float *row, const double *sb, const double *cb, const double *sk,
                              const double *ck, size_t i0, size_t nc, size_t d_model,
                              peak_pe_layout layout)
{
    emit_exact(row, sb, cb, sk, ck, i0, nc, d_model, layout, 0);
}

static void emit_exact_avx512_stream(float *row, const double *sb, const double *cb,
                                     const double *sk, const double *ck, size_t i0, size_t nc,
                                     size_t d_model, peak_pe_layout layout)
{
    emit_exact(row, sb, cb, sk, ck, i0, nc, d_model, layout, 1);
}

static void emit_torch_avx512(float *row, float pf, const float *wf, size_t i0, size_t nc,
                              size_t d_model, peak_pe_layout layout)
{
    const size_t cols_per_freq = layout == PEAK_PE_INTERLEAVED ? 2 : 1;
    const __m256 vpf = _mm256_set1_ps(pf);
    for (size_t j = 0; j < nc; j += 8) {
        const __m256 angle = _mm256_mul_ps(vpf, _mm256_load_ps(wf + j));
        const __m512d x = _mm512_cvtps_pd(angle);
        __m512d s, c;
        sincos8(x, &s, &c);
        __mmask8 slow = slow_lanes(x);
        if (slow) {
            PEAK_PE_ALIGN double xs[8], ss[8], cs[8];
            _mm512_store_pd(xs, x);
            _mm512_store_pd(ss, s);
            _mm512_store_pd(cs, c);
            while (slow) {
                const unsigned l = (unsigned)__builtin_ctz(slow);
                peak_pe_sincos_slow(xs[l], &ss[l], &cs[l]);
                slow &= (__mmask8)(slow - 1);
            }
            s = _mm512_load_pd(ss);
            c = _mm512_load_pd(cs);
        }
        const size_t n = nc - j < 8 ? nc - j : 8;
        if (n == 8 && cols_per_freq * (i0 + j + 8) <= d_model)
            store8(row, s, c, i0 + j, 8, d_model, layout, STORE_FULL);
        else
            store8(row, s, c, i0 + j, n, d_model, layout, STORE_MASKED);
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

void peak_pe_rows__avx512(float *scratch, size_t scratch_rows, size_t ld_scratch,
                          size_t n_rows, const int64_t *pos, size_t pos0, size_t d_model,
                          const peak_pe_params *params, peak_pe_sink_fn sink, void *ctx)
{
    peak_pe_rows_run(scratch, scratch_rows, ld_scratch, n_rows, pos, pos0, d_model, params,
                     peak_pe_sincos_chunk__avx512, emit_exact_inline, emit_torch_avx512, sink, ctx);
}

void peak_f32_pe_table__avx512(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                               size_t pos0, const peak_pe_params *params)
{
    if (peak_pe_streams(n_pos, d_model, params)) {
        peak_pe_table_run(out, ld_out, n_pos, d_model, pos0, params, peak_pe_sincos_chunk__avx512,
                          emit_exact_avx512_stream, emit_torch_avx512);
        /* Streaming stores are weakly ordered: fence them before return. */
        _mm_sfence();
    } else {
        peak_pe_table_run(out, ld_out, n_pos, d_model, pos0, params, peak_pe_sincos_chunk__avx512,
                          emit_exact_avx512, emit_torch_avx512);
    }
}
