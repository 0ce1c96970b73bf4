/*
 * pe-ref.c - the sinusoid table's ISA-free code, compiled once with no ISA
 * flags (declarations and contracts: pe-ref.h): the frequencies, PyTorch's
 * expf and the slow sincos that every tier's driver calls, and the table in
 * plain C, the reference every SIMD tier must match bit for bit, with the
 * row and column-window functions built on it (x += PE: pe-add-ref.c).
 *
 * Algorithm and accuracy: see pe-table.h.  Here fma() is the C99 function:
 * a libm call in this TU (built without -mfma), correctly rounded like the
 * vfmadd the SIMD tiers use, so the same operation sequence gives the same
 * bits.
 */
#include "common/pe-ref.h"
#include "pe-table.h"

#include <float.h>
#include <math.h>
#include <sleef.h>

/* sleef.h declares the FMA variants only where FP_FAST_FMA is defined (not
   in this TU on x86, built without -mfma); we call it only on CPUs with FMA.
   On AArch64 (not verified here: no arm64 libsleef on the build host) the
   reference is weak, so a SLEEF built without the scalar FMA variant still
   links and falls back to the generic expf. */
#if !defined(FP_FAST_FMA)
float Sleef_expf1_u10purecfma(float);
#endif
#if defined(__aarch64__)
#pragma weak Sleef_expf1_u10purecfma
#endif

/* PyTorch 1.13 (Debian's python3-torch, CPU capability AVX2) evaluates
   torch.exp on float tensors with SLEEF's Sleef_expf8_u10 (libtorch_cpu.so
   imports it from the system libsleef.so.3).  On 5 million arguments
   (4M in [-12, 0), 1M in [-80, 80]) torch.exp agreed bit for bit with
   Sleef_expf8_u10avx2, Sleef_expf16_u10avx512f and the scalar
   Sleef_expf1_u10purecfma, while the FMA-less Sleef_expf1_u10purec (which
   the generic Sleef_expf_u10 picks) differed in ~1% of them and glibc expf
   in ~9%.  So div_term is only reproducible with SLEEF's FMA variant; this
   single scalar call is what every tier uses, which keeps the tiers
   identical.  A CPU without FMA can't run that variant: it gets the purec
   one (then w may be 1 ULP off PyTorch's for ~1% of the columns). */
float peak_pe_torch_expf(float x)
{
#if defined(__x86_64__) || defined(__i386__)
    /* Cheap once done; needed if we are reached from another constructor. */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("fma"))
        return Sleef_expf1_u10purecfma(x);
    return Sleef_expf1_u10purec(x);
#elif defined(__aarch64__)
    /* FMA is baseline on AArch64, and PyTorch's NEON path uses it too. */
    if (Sleef_expf1_u10purecfma)
        return Sleef_expf1_u10purecfma(x);
    return Sleef_expf_u10(x);
#else
    return Sleef_expf_u10(x);
#endif
}

/* The column exponent e_i = i * step / den: 2i/d for the paper's
   frequencies, i/max(half-1, 1) for tensor2tensor/fairseq's split layout. */
typedef struct freq_rule {
    size_t step, den;
} freq_rule;

static freq_rule rule_of(size_t d_model, peak_pe_layout layout)
{
    freq_rule r = {2, d_model};
    if (layout == PEAK_PE_SPLIT) {
        r.step = 1;
        r.den = d_model / 2 > 1 ? d_model / 2 - 1 : 1;
    }
    return r;
}

/* base^(-e_m) */
static double pow_e(const peak_pe_params *params, freq_rule r, size_t m)
{
    return pow(params->base, -(double)(m * r.step) / (double)r.den);
}

/* Frequency i (EXACT) from its chunk's hi = pow_e(i0) and lo = pow_e(i - i0).
   Clamped so that 0 * w stays 0 (never 0 * inf = NaN) for absurdly small
   bases. */
static double exact_freq(double hi, double lo)
{
    const double w = hi * lo;
    return w > DBL_MAX ? DBL_MAX : w;
}

/* PyTorch's PositionalEncoding: arange(0, d, 2).float() *
   (-math.log(base) / d), the Python double scalar rounded to float by the float tensor's multiply (checked:
   with the product formed in double instead, up to 1/4 of the div_term
   entries change), then SLEEF's expf.  fairseq's split layout is the same
   with arange(half).float() and ln(base) / (half - 1). */
static float torch_cf(const peak_pe_params *params, freq_rule r)
{
    return (float)(-log(params->base) / (double)r.den);
}

static double torch_freq(float cf, freq_rule r, size_t i)
{
    return peak_pe_torch_expf((float)(i * r.step) * cf);
}

void peak_pe_freqs(double *w, double *lo, size_t i0, size_t nc, size_t d_model,
                   const peak_pe_params *params)
{
    const freq_rule r = rule_of(d_model, params->layout);
    if (params->mode == PEAK_PE_TORCH_F32) {
        const float cf = torch_cf(params, r);
        for (size_t j = 0; j < nc; j++)
            w[j] = torch_freq(cf, r, i0 + j);
    } else {
        if (i0 == 0) {
            for (size_t j = 0; j < nc; j++)
                lo[j] = pow_e(params, r, j);
        }
        /* pow(base, -0.0) == 1 exactly: the first chunk is lo itself. */
        const double hi = pow_e(params, r, i0);
        for (size_t j = 0; j < nc; j++)
            w[j] = exact_freq(hi, lo[j]);
    }
    for (size_t j = nc; j < PEAK_PE_CHUNK; j++)
        w[j] = 0.0;
}

void peak_pe_sincos_slow(double x, double *s, double *c)
{
    if (x <= DBL_MAX) {
        *s = sin(x);
        *c = cos(x);
    } else {
        *s = 0.0;
        *c = 1.0;
    }
}

void peak_pe_sincos_chunk_ref(const double *x, double *s, double *c)
{
    for (size_t j = 0; j < PEAK_PE_CHUNK; j++)
        peak_pe_sincos(x[j], &s[j], &c[j]);
}

/* ---- the scalar arithmetic of pe-table-driver.h ------------------------- */

static inline void pe_sincos_chunk(const double *x, double *s, double *c)
{
    peak_pe_sincos_chunk_ref(x, s, c);
}

static inline void put(float *row, size_t i, float s, float c, size_t d_model,
                       peak_pe_layout layout)
{
    if (layout == PEAK_PE_INTERLEAVED) {
        row[2 * i] = s;
        if (2 * i + 1 < d_model)
            row[2 * i + 1] = c;
    } else {
        row[i] = s;
        row[d_model / 2 + i] = c;
    }
}

/* stream is ignored: this tier stores plainly. */
static void pe_emit_exact(float *row, const double *sb, const double *cb, const double *sk,
                          const double *ck, size_t i0, size_t nc, size_t d_model,
                          peak_pe_layout layout, int stream)
{
    (void)stream;
    for (size_t j = 0; j < nc; j++) {
        const double s = fma(sb[j], ck[j], cb[j] * sk[j]);
        const double c = fma(cb[j], ck[j], -(sb[j] * sk[j]));
        put(row, i0 + j, (float)s, (float)c, d_model, layout);
    }
}

static void pe_emit_torch(float *row, float pf, const float *wf, size_t i0, size_t nc,
                          size_t d_model, peak_pe_layout layout)
{
    for (size_t j = 0; j < nc; j++) {
        const float angle = pf * wf[j];
        double s, c;
        peak_pe_sincos((double)angle, &s, &c);
        put(row, i0 + j, (float)s, (float)c, d_model, layout);
    }
}

#include "pe-table-driver.h"

void peak_pe_table_part_ref(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                            size_t pos0, const peak_pe_params *params, size_t f0, size_t f1)
{
    peak_pe_table_run(out, ld_out, n_pos, d_model, pos0, params, f0, f1, 0);
}

void peak_pe_rows_ref(float *scratch, size_t scratch_rows, size_t ld_scratch, size_t n_rows,
                      const int64_t *pos, size_t pos0, size_t d_model,
                      const peak_pe_params *params, size_t f0, size_t f1, peak_pe_sink_fn sink,
                      void *ctx)
{
    peak_pe_rows_run(scratch, scratch_rows, ld_scratch, n_rows, pos, pos0, d_model, params, f0,
                     f1, sink, ctx);
}

void peak_pe_table_ref(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model, size_t pos0,
                       const peak_pe_params *params)
{
    peak_pe_table_part_ref(out, ld_out, n_pos, d_model, pos0, params, 0, PEAK_PE_FREQ_END);
}

void peak_pe_row(float *row, size_t pos, size_t d_model, const peak_pe_params *params)
{
    peak_pe_table_ref(row, (ptrdiff_t)d_model, 1, d_model, pos, params);
}

/* One column window of row pos, without the per-call tables of the driver:
   the same frequency expression, the same two sincos and the same fma
   combination as the table, hence the same bits, computed only for the
   frequencies the window touches. */
void peak_pe_cols(float *dst, size_t pos, size_t c0, size_t n, size_t d_model,
                  const peak_pe_params *params)
{
    if (c0 == 0 && n == d_model) {
        peak_pe_row(dst, pos, d_model, params);
        return;
    }
    const peak_pe_layout layout = params->layout;
    const freq_rule r = rule_of(d_model, layout);
    const size_t half = d_model / 2;
    const int torch = params->mode == PEAK_PE_TORCH_F32;
    const float cf = torch ? torch_cf(params, r) : 0.0f;
    const size_t p0 = pos & ~(size_t)(PEAK_PE_BLOCK - 1);
    const size_t k = pos & (PEAK_PE_BLOCK - 1);

    size_t hi_chunk = SIZE_MAX; /* the chunk whose hi is cached */
    double hi = 0.0;
    size_t last_i = SIZE_MAX; /* interleaved pairs share one evaluation */
    float last_s = 0.0f, last_c = 0.0f;
    for (size_t col = c0; col < c0 + n; col++) {
        size_t i;
        int want_cos;
        if (layout == PEAK_PE_INTERLEAVED) {
            i = col / 2;
            want_cos = (int)(col & 1);
        } else if (col >= 2 * half) {
            dst[col - c0] = 0.0f; /* odd d_model's padding column */
            continue;
        } else {
            want_cos = col >= half;
            i = want_cos ? col - half : col;
        }
        if (i != last_i) {
            double s, c;
            if (torch) {
                const float angle = (float)pos * (float)torch_freq(cf, r, i);
                peak_pe_sincos((double)angle, &s, &c);
            } else {
                const size_t i0 = i - i % PEAK_PE_CHUNK;
                if (i0 != hi_chunk) {
                    hi = pow_e(params, r, i0);
                    hi_chunk = i0;
                }
                const double w = exact_freq(hi, pow_e(params, r, i - i0));
                double sb, cb, sk, ck;
                peak_pe_sincos((double)p0 * w, &sb, &cb);
                peak_pe_sincos((double)k * w, &sk, &ck);
                s = fma(sb, ck, cb * sk);
                c = fma(cb, ck, -(sb * sk));
            }
            last_i = i;
            last_s = (float)s;
            last_c = (float)c;
        }
        dst[col - c0] = want_cos ? last_c : last_s;
    }
}
