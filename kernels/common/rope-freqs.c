/*
 * rope-freqs.c - the rotary frequencies of every scaling scheme and the
 * attention factor, and the check of their parameters: ISA-free, compiled
 * once, run once per call (contracts: rope.h).
 *
 * EXACT evaluates each scheme's formula in double.  HF_F32 replays
 * transformers' float32 tensor program operation for operation (its
 * modeling_rope_utils.py, transformers 5.24, on torch 2.15's CPU kernels),
 * because at position 1e6 one ULP of inv_freq moves the angle by ~0.06 rad:
 * matching HF's cos/sin needs HF's inv_freq bit for bit.  What torch does
 * with the Python scalars of those expressions, checked against
 * tests/data/rope-hf-cache.txt (scripts/rope-reference.py):
 *   - a Python float meeting a float32 tensor is cast to float32 first;
 *   - `s / t` with a scalar s is t.reciprocal() * s (Tensor.__rtruediv__);
 *   - `s ** t` is torch.pow: SLEEF's powf8_u10 over whole pairs of AVX2
 *     vectors (16 elements), libm powf on the rest (cpu_kernel_vec's
 *     vectorized_loop; SLEEF's scalar FMA variant gives the vector
 *     function's bits).
 */
#include "rope.h"

#include <float.h>
#include <math.h>
#include <sleef.h>

/* As common/pe-ref.c: the FMA variant is declared only under FP_FAST_FMA. */
#if !defined(FP_FAST_FMA)
float Sleef_powf1_u10purecfma(float, float);
#endif
#if defined(__aarch64__)
#pragma weak Sleef_powf1_u10purecfma
#endif

#define TWO_PI 6.283185307179586 /* Python's 2 * math.pi */

/* Elements torch's vectorized_loop handles with whole vectors: pairs of
   8-float AVX2 vectors. */
#define TORCH_VEC_BLOCK 16

static float torch_powf(float b, float e, size_t i, size_t n)
{
    if (i < n / TORCH_VEC_BLOCK * TORCH_VEC_BLOCK) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("fma"))
            return Sleef_powf1_u10purecfma(b, e);
        return Sleef_powf1_u10purec(b, e);
#elif defined(__aarch64__)
        if (Sleef_powf1_u10purecfma)
            return Sleef_powf1_u10purecfma(b, e);
        return Sleef_powf_u10(b, e);
#else
        return Sleef_powf_u10(b, e);
#endif
    }
    return powf(b, e);
}

static bool finite_at_least(double v, double lo) { return isfinite(v) && v >= lo; }
static bool finite_above(double v, double lo) { return isfinite(v) && v > lo; }

/* YaRN's m(s, k) = 0.1 k ln s + 1, 1 for s <= 1. */
static double yarn_m(double s, double k) { return s <= 1.0 ? 1.0 : 0.1 * k * log(s) + 1.0; }

double peak_rope_attention_factor(const peak_rope_params *p)
{
    if (p->attention_factor != 0.0)
        return p->attention_factor;
    if (p->scaling == PEAK_ROPE_YARN) {
        if (p->mscale != 0.0 && p->mscale_all_dim != 0.0)
            return yarn_m(p->factor, p->mscale) / yarn_m(p->factor, p->mscale_all_dim);
        return yarn_m(p->factor, 1.0);
    }
    if (p->scaling == PEAK_ROPE_LONGROPE && p->factor > 1.0)
        return sqrt(1.0 + log(p->factor) / log((double)p->original_max_position));
    return 1.0;
}

/* The base after NTK-aware or dynamic NTK scaling (Python's expression
   order, so HF_F32 gets transformers' double before its float cast). */
static double scaled_base(const peak_rope_params *p)
{
    const double r = (double)p->rotary_dim;
    if (p->scaling == PEAK_ROPE_NTK)
        return p->base * pow(p->ntk_alpha, r / (r - 2.0));
    if (p->scaling == PEAK_ROPE_DYNAMIC) {
        const size_t l0 = p->original_max_position;
        const double len = (double)(p->seq_len > l0 ? p->seq_len : l0);
        return p->base * pow(p->factor * len / (double)l0 - (p->factor - 1.0), r / (r - 2.0));
    }
    return p->base;
}

static bool scheme_ok(const peak_rope_params *p)
{
    const size_t r = p->rotary_dim;
    switch (p->scaling) {
    case PEAK_ROPE_NONE:
        return true;
    case PEAK_ROPE_LINEAR:
        return finite_at_least(p->factor, 1.0);
    case PEAK_ROPE_NTK: /* r / (r - 2) needs r >= 4 */
        return r >= 4 && finite_at_least(p->ntk_alpha, 1.0);
    case PEAK_ROPE_DYNAMIC:
        return r >= 4 && finite_at_least(p->factor, 1.0) && p->original_max_position >= 2;
    case PEAK_ROPE_YARN:
        return finite_at_least(p->factor, 1.0) && p->original_max_position >= 2 &&
               (p->beta_fast == 0.0 || finite_above(p->beta_fast, 0.0)) &&
               (p->beta_slow == 0.0 || finite_above(p->beta_slow, 0.0)) &&
               isfinite(p->mscale) && isfinite(p->mscale_all_dim);
    case PEAK_ROPE_LLAMA3:
        return finite_at_least(p->factor, 1.0) && p->original_max_position >= 2 &&
               finite_above(p->low_freq_factor, 0.0) &&
               finite_above(p->high_freq_factor, p->low_freq_factor);
    case PEAK_ROPE_LONGROPE:
        if (!p->longrope_factors || !finite_above(p->factor, 0.0) || p->original_max_position < 2)
            return false;
        for (size_t i = 0; i < r / 2; i++)
            if (!finite_above((double)p->longrope_factors[i], 0.0))
                return false;
        return true;
    }
    return false;
}

peak_status peak_rope_params_check(const peak_rope_params *p)
{
    const size_t r = p->rotary_dim;
    if (r < 2 || r > PEAK_ROPE_MAX_DIM || (r & 1) || !finite_above(p->base, 1.0))
        return PEAK_ERR_INVALID_ARG;
    if (p->mode != PEAK_ROPE_EXACT && p->mode != PEAK_ROPE_HF_F32)
        return PEAK_ERR_INVALID_ARG;
    if (p->attention_factor != 0.0 && !finite_above(p->attention_factor, 0.0))
        return PEAK_ERR_INVALID_ARG;
    if (!scheme_ok(p))
        return PEAK_ERR_INVALID_ARG;
    /* The factor, given or the scheme's own (YaRN's mscale ratio may be
       <= 0 or inf), must be a positive float: it multiplies floats.  The
       scaled base must not overflow either. */
    const double af = peak_rope_attention_factor(p);
    if (!finite_above(af, 0.0) || af > FLT_MAX)
        return PEAK_ERR_INVALID_ARG;
    return finite_above(scaled_base(p), 1.0) ? PEAK_OK : PEAK_ERR_INVALID_ARG;
}

/* YaRN's ramp ends: the dimensions of beta_fast and beta_slow rotations. */
static double yarn_dim(double rotations, const peak_rope_params *p)
{
    return ((double)p->rotary_dim *
            log((double)p->original_max_position / (rotations * 2.0 * M_PI))) /
           (2.0 * log(p->base));
}

static void yarn_range(const peak_rope_params *p, double *low, double *high)
{
    const double fast = p->beta_fast != 0.0 ? p->beta_fast : 32.0;
    const double slow = p->beta_slow != 0.0 ? p->beta_slow : 1.0;
    double lo = yarn_dim(fast, p), hi = yarn_dim(slow, p);
    if (p->yarn_truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    *low = lo > 0.0 ? lo : 0.0;
    *high = hi < (double)(p->rotary_dim - 1) ? hi : (double)(p->rotary_dim - 1);
    if (*low == *high)
        *high += 0.001; /* as transformers: no zero-width ramp */
}

/* ---- EXACT: the formulas in double --------------------------------------- */

static double exact_freq(const peak_rope_params *p, double base, size_t i, double low,
                         double high)
{
    const double e = (double)(2 * i) / (double)p->rotary_dim;
    const double w = pow(base, -e);
    switch (p->scaling) {
    case PEAK_ROPE_LINEAR:
        return w / p->factor;
    case PEAK_ROPE_YARN: {
        double ramp = ((double)i - low) / (high - low);
        ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
        const double extra = 1.0 - ramp; /* weight of the original frequency */
        return (w / p->factor) * (1.0 - extra) + w * extra;
    }
    case PEAK_ROPE_LLAMA3: {
        const double l0 = (double)p->original_max_position;
        const double wavelen = 2.0 * M_PI / w;
        if (wavelen < l0 / p->high_freq_factor)
            return w;
        if (wavelen > l0 / p->low_freq_factor)
            return w / p->factor;
        const double smooth = (l0 / wavelen - p->low_freq_factor) /
                              (p->high_freq_factor - p->low_freq_factor);
        return (1.0 - smooth) * w / p->factor + smooth * w;
    }
    case PEAK_ROPE_LONGROPE:
        return w / (double)p->longrope_factors[i];
    default:
        return w;
    }
}

/* ---- HF_F32: transformers' float32 program ------------------------------- */

static float hf_freq(const peak_rope_params *p, float base_f, size_t i, double low, double high)
{
    const size_t n = p->rotary_dim / 2;
    /* arange(0, dim, 2).float() / dim */
    const float e = (float)(2 * i) / (float)p->rotary_dim;
    const float pw = torch_powf(base_f, e, i, n); /* base ** e */
    const float inv = 1.0f / pw;
    switch (p->scaling) {
    case PEAK_ROPE_LINEAR:
        return inv / (float)p->factor; /* inv_freq /= factor */
    case PEAK_ROPE_YARN: {
        const float interp = 1.0f / ((float)p->factor * pw); /* 1.0 / (factor * pos_freqs) */
        float ramp = ((float)i - (float)low) / (float)(high - low);
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        const float extra = 1.0f - ramp;
        return interp * (1.0f - extra) + inv * extra;
    }
    case PEAK_ROPE_LLAMA3: {
        const double l0 = (double)p->original_max_position;
        const float low_wavelen = (float)(l0 / p->low_freq_factor);
        const float high_wavelen = (float)(l0 / p->high_freq_factor);
        const float wavelen = (1.0f / inv) * (float)TWO_PI; /* 2 * math.pi / inv_freq */
        const float llama = wavelen > low_wavelen ? inv / (float)p->factor : inv;
        const float smooth = ((1.0f / wavelen) * (float)l0 - (float)p->low_freq_factor) /
                             (float)(p->high_freq_factor - p->low_freq_factor);
        const float smoothed = (1.0f - smooth) * llama / (float)p->factor + smooth * llama;
        const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        return medium ? smoothed : llama;
    }
    case PEAK_ROPE_LONGROPE:
        return 1.0f / (p->longrope_factors[i] * pw); /* 1.0 / (ext_factors * base**shape) */
    default:
        return inv;
    }
}

void peak_rope_freqs_init(peak_rope_freqs *f, const peak_rope_params *p)
{
    const size_t n = p->rotary_dim / 2;
    const double base = scaled_base(p);
    double low = 0.0, high = 0.0;
    if (p->scaling == PEAK_ROPE_YARN)
        yarn_range(p, &low, &high);
    f->n = n;
    f->mode = p->mode;
    f->af = peak_rope_attention_factor(p);
    f->af_f32 = (float)f->af;
    for (size_t i = 0; i < n; i++) {
        if (p->mode == PEAK_ROPE_HF_F32) {
            f->w_f32[i] = hf_freq(p, (float)base, i, low, high);
            f->w[i] = (double)f->w_f32[i];
        } else {
            f->w[i] = exact_freq(p, base, i, low, high);
            f->w_f32[i] = (float)f->w[i];
        }
    }
    for (size_t i = n; i < PEAK_ROPE_MAX_FREQ + PEAK_PE_CHUNK; i++) {
        f->w[i] = 0.0;
        f->w_f32[i] = 0.0f;
    }
}
