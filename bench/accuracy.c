/*
 * accuracy.c - peak_accuracy: the error of every kernel family on every
 * tier this CPU runs, and of the baselines bench_peak times, against one
 * oracle per family, printed as JSON for bench/report.py to merge.
 *
 * Usage: peak_accuracy [--quick]      (--quick: fewer samples, for tests)
 *
 * The oracle is x87 long double (64-bit significand: 2^-64 relative, 40
 * bits below float's 2^-24), computed from the same float inputs the kernel
 * got; sinl/cosl/expl/powl of glibc are accurate to a few long double ULP,
 * which is below 1e-11 float ULP.  Metrics per (family, variant, shape):
 *   max_abs   max |got - exact|
 *   max_ulp   max |got - exact| / ulp(exact), ulp(v) = 2^(floor(log2|v|) - 23)
 *             for |v| >= 2^-126, else 2^-149 (float's spacing at v; SLEEF's
 *             countULP and Highway's ULP delta measure the same thing).
 *             embed, pe_add, layernorm, attention: in units of
 *             ulp(max |exact| of the output row) -- their outputs are sums
 *             that cancel to near zero, where an elementwise ULP says
 *             nothing about the kernel
 *   fn_ulp    (PE baselines only) the ULP error of the sin/cos evaluation
 *             itself, against the exact sin/cos of the float angle the
 *             baseline formed: what SLEEF's u10/u35 and libmvec promise,
 *             apart from the error of the float32 angle itself
 *   max_rel   (exp) max |got - exact| / exact
 * Families and oracles:
 *   pe_table   exact table pos * 10000^(-2i/d), positions 0..4999, d 512
 *              (the table of PyTorch's PositionalEncoding(512, max_len=5000)).
 *              peak in its default (exact) mode per tier and in torch_f32
 *              mode; that module's float32 formula (baseline-pe-table.h)
 *              through libm, SLEEF (scalar u10, AVX2/AVX-512 u10, AVX-512
 *              u35), libmvec
 *   exp        e^x for 2^23 float bit patterns spread over [-87.3, 88.7]
 *              (normal results), per tier, libm, SLEEF, libmvec
 *   softmax    rows of 128, 512, 2048 scores (spread ~3), no mask and
 *              causal; per tier, the expf loop, oneDNN (if built).  And
 *              "wide": rows whose scores spread over 88 below the maximum,
 *              so that the probabilities reach down to FLT_MIN (max_ulp
 *              over those >= FLT_MIN: below it a tier may flush, and only
 *              max_abs counts them)
 *   embedding  E[id] * sqrt(d) + PE(pos) for a [2, 50, 512] batch, PE
 *              from the table and on the fly; the exact PE is the oracle's
 *   pe_add     x + PE(pos), same shape, table and on the fly
 *   layernorm  LayerNorm(x + r) * gamma + beta, 256 rows of 768, per tier
 *              and the plain C loop (baseline-plain-loops.c, not vectorised)
 *   attention  softmax(Q K^T / 8) V, H 8, Dh 64, L 128 full and causal,
 *              decode Lq 1 / Lk 2048, q, k, v uniform in [-1, 1]
 * Every float input is generated from a fixed seed: the figures repeat.
 */
#include "baseline-exp.h"
#include "baseline-pe-table.h"
#include "baseline-plain-loops.h"
#include "baseline-softmax.h"
#include "bench.h"

#include "internal.h"
#include "peak.h"
#include "schedule/schedule.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int quick;

/* ---- helpers ------------------------------------------------------------------ */

static long double ulp_of(long double v)
{
    v = fabsl(v);
    if (v < 0x1p-126L)
        return 0x1p-149L;
    int e;
    frexpl(v, &e); /* v = m 2^e, m in [0.5, 1) */
    return ldexpl(1.0L, e - 1 - 23);
}

typedef struct err_acc {
    long double max_abs, max_ulp, max_rel;
    size_t n, nonfinite;
} err_acc;

static void acc_add(err_acc *a, float got, long double want)
{
    a->n++;
    if (!isfinite(got)) {
        a->nonfinite++;
        return;
    }
    const long double e = fabsl((long double)got - want);
    if (e > a->max_abs)
        a->max_abs = e;
    const long double u = e / ulp_of(want);
    if (u > a->max_ulp)
        a->max_ulp = u;
    if (want != 0.0L && e / fabsl(want) > a->max_rel)
        a->max_rel = e / fabsl(want);
}

/* Rows whose entries are sums that may cancel (x + PE, LayerNorm, the
   attention output): the ULP is counted in units of ulp(max |exact| of the
   row), since an element near zero says nothing about the kernel there. */
static void acc_rows(err_acc *a, const float *got, const long double *want, size_t rows,
                     size_t d)
{
    for (size_t r = 0; r < rows; r++) {
        long double rmax = 0.0L;
        for (size_t e = 0; e < d; e++)
            rmax = fabsl(want[r * d + e]) > rmax ? fabsl(want[r * d + e]) : rmax;
        const long double u = ulp_of(rmax);
        for (size_t e = 0; e < d; e++) {
            const float g = got[r * d + e];
            a->n++;
            if (!isfinite(g)) {
                a->nonfinite++;
                continue;
            }
            const long double err = fabsl((long double)g - want[r * d + e]);
            a->max_abs = err > a->max_abs ? err : a->max_abs;
            a->max_ulp = err / u > a->max_ulp ? err / u : a->max_ulp;
        }
    }
}

static int first_entry = 1;

static void emit(const char *family, const char *variant, const char *shape, const err_acc *a,
                 double fn_ulp, const char *note)
{
    printf("%s\n    {\"family\": \"%s\", \"variant\": \"%s\", \"shape\": \"%s\", "
           "\"max_abs\": %.6Lg, \"max_ulp\": %.6Lg, \"max_rel\": %.6Lg, \"n\": %zu, "
           "\"nonfinite\": %zu",
           first_entry ? "" : ",", family, variant, shape, a->max_abs, a->max_ulp, a->max_rel,
           a->n, a->nonfinite);
    if (fn_ulp >= 0.0)
        printf(", \"fn_ulp\": %.6g", fn_ulp);
    if (note)
        printf(", \"note\": \"%s\"", note);
    printf("}");
    first_entry = 0;
    fflush(stdout);
}

typedef struct tier {
    const char *name;
    peak_isa isa;
} tier;

static const tier tiers[] = {
    {"scalar", PEAK_ISA_SCALAR},
    {"avx2", PEAK_ISA_AVX2},
    {"avx512", PEAK_ISA_AVX512},
    {"neon", PEAK_ISA_NEON},
};
#define N_TIERS (sizeof tiers / sizeof tiers[0])

static const peak_kernels *tier_kernels(const tier *t)
{
    return peak_isa_supported(t->isa) ? peak_kernels_for(t->isa) : NULL;
}

/* ---- pe_table ----------------------------------------------------------------- */

#define PE_NPOS 5000
#define PE_D 512

/* The exact table in long double. */
static long double *pe_exact(size_t n_pos, size_t d)
{
    long double *t = malloc(n_pos * d * sizeof *t);
    if (!t)
        return NULL;
    for (size_t j = 0; j < d; j += 2) {
        const long double w = powl(10000.0L, -(long double)j / (long double)d);
        for (size_t p = 0; p < n_pos; p++) {
            t[p * d + j] = sinl((long double)p * w);
            if (j + 1 < d)
                t[p * d + j + 1] = cosl((long double)p * w);
        }
    }
    return t;
}

/* The note of every baseline below: the float32 formula of the PyTorch
   PositionalEncoding module (baseline-pe-table.h). */
#define PE_TORCH_FORMULA "PositionalEncoding's float32 formula"

/* Error of a table against the exact one and, for the baselines of
   PositionalEncoding's float32 formula, of sin/cos against the float angle
   (div from bench_pe_div_term, which every one of them uses). */
static void pe_score(const char *variant, const float *out, const long double *exact,
                     const float *div, const char *note)
{
    err_acc a = {0};
    long double fn = -1.0L;
    for (size_t p = 0; p < PE_NPOS; p++)
        for (size_t j = 0; j < PE_D; j++) {
            const float got = out[p * PE_D + j];
            acc_add(&a, got, exact[p * PE_D + j]);
            if (div) {
                const float angle = (float)p * div[j / 2];
                const long double want = (j & 1) ? cosl(angle) : sinl(angle);
                const long double u = fabsl((long double)got - want) / ulp_of(want);
                fn = u > fn ? u : fn;
            }
        }
    emit("pe_table", variant, "seq_len:5000/d_model:512", &a, (double)fn, note);
}

static void acc_pe_table(void)
{
    long double *exact = pe_exact(PE_NPOS, PE_D);
    float *out = malloc((size_t)PE_NPOS * PE_D * sizeof(float));
    float *div = malloc(BENCH_PE_DIV_LEN(PE_D) * sizeof(float));
    if (!exact || !out || !div) {
        fprintf(stderr, "peak_accuracy: out of memory\n");
        exit(1);
    }
    const peak_pe_params exact_mode = PEAK_PE_PARAMS_DEFAULT;
    peak_pe_params torch_mode = exact_mode;
    torch_mode.mode = PEAK_PE_TORCH_F32;
    for (size_t t = 0; t < N_TIERS; t++) {
        const peak_kernels *k = tier_kernels(&tiers[t]);
        if (!k)
            continue;
        k->pe_table(out, PE_D, PE_NPOS, PE_D, 0, &exact_mode, 0, PEAK_PE_FREQ_END, false);
        pe_score(tiers[t].name, out, exact, NULL, NULL);
        char name[64];
        snprintf(name, sizeof name, "%s_torch_f32", tiers[t].name);
        k->pe_table(out, PE_D, PE_NPOS, PE_D, 0, &torch_mode, 0, PEAK_PE_FREQ_END, false);
        pe_score(name, out, exact, NULL, "peak's PyTorch-float32 mode");
    }
    bench_pe_div_term(div, PE_D);
    bench_pe_table_libm(out, PE_NPOS, PE_D, div);
    pe_score("libm_loop", out, exact, div, PE_TORCH_FORMULA);
    bench_pe_table_sleef_scalar(out, PE_NPOS, PE_D, div);
    pe_score("sleef_scalar", out, exact, div, PE_TORCH_FORMULA ", SLEEF u10");
#if PEAK_BENCH_SLEEF_AVX2
    if (bench_cpu_avx2()) {
        bench_pe_table_sleef_avx2(out, PE_NPOS, PE_D, div);
        pe_score("sleef_avx2", out, exact, div, PE_TORCH_FORMULA ", SLEEF u10");
    }
#endif
#if PEAK_BENCH_SLEEF_AVX512
    if (bench_cpu_avx512()) {
        bench_pe_table_sleef_avx512(out, PE_NPOS, PE_D, div);
        pe_score("sleef_avx512", out, exact, div, PE_TORCH_FORMULA ", SLEEF u10");
        bench_pe_table_sleef_u35_avx512(out, PE_NPOS, PE_D, div);
        pe_score("sleef_u35_avx512", out, exact, div, PE_TORCH_FORMULA ", SLEEF u35");
    }
#endif
#if PEAK_BENCH_LIBMVEC_AVX2
    if (bench_cpu_avx2()) {
        bench_pe_table_libmvec_avx2(out, PE_NPOS, PE_D, div);
        pe_score("libmvec_avx2", out, exact, div, PE_TORCH_FORMULA ", glibc libmvec");
    }
#endif
#if PEAK_BENCH_LIBMVEC_AVX512
    if (bench_cpu_avx512()) {
        bench_pe_table_libmvec_avx512(out, PE_NPOS, PE_D, div);
        pe_score("libmvec_avx512", out, exact, div, PE_TORCH_FORMULA ", glibc libmvec");
    }
#endif
    free(div);
    free(out);
    free(exact);
}

/* ---- exp ---------------------------------------------------------------------- */

typedef void (*exp_fn)(float *y, const float *x, size_t n);

static void exp_score(const char *variant, exp_fn f, const float *x, float *y,
                      const long double *want, size_t n)
{
    err_acc a = {0};
    f(y, x, n);
    for (size_t k = 0; k < n; k++)
        acc_add(&a, y[k], want[k]);
    emit("exp", variant, "x:[-87.3,88.7]", &a, -1.0, NULL);
}

static void acc_exp(void)
{
    /* Bit patterns of [-87.3, 88.7] at a fixed odd stride: every exponent,
       every low-bit pattern class, 2^23 samples (2^19 with --quick). */
    const size_t n = quick ? (size_t)1 << 19 : (size_t)1 << 23;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    long double *want = malloc(n * sizeof *want);
    if (!x || !y || !want) {
        fprintf(stderr, "peak_accuracy: out of memory\n");
        exit(1);
    }
    uint32_t lo_neg, hi_pos;
    const float fneg = -87.3f, fpos = 88.7f;
    memcpy(&lo_neg, &fneg, 4);
    memcpy(&hi_pos, &fpos, 4);
    /* positives 0 .. hi_pos, negatives -0 .. lo_neg: count both as one
       range of "magnitude codes" of size hi_pos + (lo_neg & 0x7fffffff). */
    const uint64_t npos = hi_pos, nneg = lo_neg & 0x7fffffffu, total = npos + nneg;
    for (size_t k = 0; k < n; k++) {
        const uint64_t c = (uint64_t)k * total / n;
        const uint32_t bits = c < npos ? (uint32_t)c : (uint32_t)(c - npos) | 0x80000000u;
        memcpy(&x[k], &bits, 4);
        want[k] = expl((long double)x[k]);
    }
    for (size_t t = 0; t < N_TIERS; t++) {
        const peak_kernels *k = tier_kernels(&tiers[t]);
        if (k)
            exp_score(tiers[t].name, k->exp, x, y, want, n);
    }
    exp_score("libm_loop", bench_exp_libm, x, y, want, n);
    exp_score("sleef_scalar", bench_exp_sleef_scalar, x, y, want, n);
#if PEAK_BENCH_SLEEF_AVX2
    if (bench_cpu_avx2())
        exp_score("sleef_avx2", bench_exp_sleef_avx2, x, y, want, n);
#endif
#if PEAK_BENCH_SLEEF_AVX512
    if (bench_cpu_avx512())
        exp_score("sleef_avx512", bench_exp_sleef_avx512, x, y, want, n);
#endif
#if PEAK_BENCH_LIBMVEC_AVX2
    if (bench_cpu_avx2())
        exp_score("libmvec_avx2", bench_exp_libmvec_avx2, x, y, want, n);
#endif
#if PEAK_BENCH_LIBMVEC_AVX512
    if (bench_cpu_avx512())
        exp_score("libmvec_avx512", bench_exp_libmvec_avx512, x, y, want, n);
#endif
    free(want);
    free(y);
    free(x);
}

/* ---- softmax ------------------------------------------------------------------ */

static void sm_exact(long double *want, const float *x, size_t rows, size_t L, int causal)
{
    for (size_t r = 0; r < rows; r++) {
        const size_t n = causal ? r % L + 1 : L;
        long double m = -INFINITY, sum = 0.0L;
        for (size_t j = 0; j < n; j++)
            m = x[r * L + j] > m ? x[r * L + j] : m;
        for (size_t j = 0; j < n; j++)
            sum += expl((long double)x[r * L + j] - m);
        for (size_t j = 0; j < L; j++)
            want[r * L + j] = j < n ? expl((long double)x[r * L + j] - m) / sum : 0.0L;
    }
}

static void sm_score(const char *variant, const char *shape, const float *y,
                     const long double *want, size_t n, const char *note)
{
    err_acc a = {0};
    for (size_t k = 0; k < n; k++)
        acc_add(&a, y[k], want[k]);
    emit("softmax", variant, shape, &a, -1.0, note);
}

static void acc_softmax(void)
{
    static const size_t lengths[] = {128, 512, 2048};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        for (int causal = 0; causal <= 1; causal++) {
            const size_t L = lengths[li], rows = quick ? 16 : (L < 256 ? 256 : L / 2);
            const size_t n = rows * L;
            float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
            long double *want = malloc(n * sizeof *want);
            if (!x || !y || !want) {
                fprintf(stderr, "peak_accuracy: out of memory\n");
                exit(1);
            }
            bench_fill_scores(x, n);
            sm_exact(want, x, rows, L, causal);
            char shape[64];
            snprintf(shape, sizeof shape, "L:%zu/causal:%d", L, causal);
            peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
            d.batch = d.heads = 1;
            d.q_len = rows;
            d.k_len = L;
            d.x_stride[0] = d.y_stride[0] = d.x_stride[1] = d.y_stride[1] = (ptrdiff_t)n;
            d.x_stride[2] = d.y_stride[2] = (ptrdiff_t)L;
            d.scale = 1.0f;
            d.mask.causal = causal;
            /* rows * L with q_len = rows: top-left causal gives row r keys
               0..r, which is r % L + 1 only for r < L; use the general mask
               through key positions by stacking heads instead. */
            d.heads = rows / L ? rows / L : 1;
            d.q_len = rows / d.heads;
            d.x_stride[1] = d.y_stride[1] = (ptrdiff_t)(d.q_len * L);
            for (size_t t = 0; t < N_TIERS; t++) {
                const peak_kernels *k = tier_kernels(&tiers[t]);
                if (!k)
                    continue;
                k->softmax(y, x, &d, 0, d.batch * d.heads * d.q_len, false);
                sm_score(tiers[t].name, shape, y, want, n, NULL);
            }
            bench_softmax_expf_loop(y, x, rows, L, causal);
            sm_score("expf_loop", shape, y, want, n, NULL);
#if PEAK_BENCH_ONEDNN
            {
                float *xm = malloc(n * sizeof *xm);
                const char *impl = "?";
                if (xm) {
                    memcpy(xm, x, n * sizeof *xm);
                    if (causal)
                        for (size_t r = 0; r < rows; r++)
                            for (size_t j = r % L + 1; j < L; j++)
                                xm[r * L + j] = -INFINITY;
                    if (bench_softmax_onednn_once(y, xm, rows, L, &impl) == 0)
                        sm_score("onednn", shape, y, want, n, impl);
                    free(xm);
                }
            }
#endif
            free(want);
            free(y);
            free(x);
        }
    }
}

/* The probabilities of rows of L scores x * scale (formed in float, as
   peak.h defines them), in long double. */
static void sm_exact_scaled(long double *want, const float *x, size_t rows, size_t L,
                            float scale)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * L;
        long double m = -INFINITY, sum = 0.0L;
        for (size_t j = 0; j < L; j++)
            m = xr[j] * scale > m ? xr[j] * scale : m;
        for (size_t j = 0; j < L; j++)
            sum += expl((long double)(xr[j] * scale) - m);
        for (size_t j = 0; j < L; j++)
            want[r * L + j] = expl((long double)(xr[j] * scale) - m) / sum;
    }
}

/* acc_add for the probabilities >= FLT_MIN; below it max_abs only. */
static void acc_add_normal(err_acc *a, float got, long double want)
{
    if (want >= FLT_MIN) {
        acc_add(a, got, want);
        return;
    }
    a->n++;
    const long double e = fabsl((long double)got - want);
    if (e > a->max_abs)
        a->max_abs = e;
}

/* The "wide" softmax: scores spread uniformly over 88 below each row's
   maximum, so that the probabilities cover float's normal range down to
   FLT_MIN (e^-87.3); row maxima either side of 0 and of 256 (where the SIMD
   tiers switch from reducing s to reducing s - max, kernels/softmax.h);
   scale 1 and 0.37; lengths that leave every tail of 4, 8 and 16 lanes, and
   long rows.  The baselines get x * scale already formed. */
static void acc_softmax_wide(void)
{
    static const size_t lengths[] = {1,  2,  3,  5,  7,   8,   9,   13,  15,  16,
                                     17, 31, 33, 63, 64,  65,  127, 128, 129, 509, 4096};
    static const float tops[] = {0.0f, 2.5f, -30.0f, 255.0f, -255.5f, 256.0f, -400.0f, 1e4f};
    static const float scales[] = {1.0f, 0.37f};
    enum { NV = N_TIERS + 2 }; /* tiers, expf_loop, onednn */
    err_acc acc[NV];
    const char *impl = NULL;
    memset(acc, 0, sizeof acc);
    uint64_t seed = 0x9e3779b97f4a7c15u;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
        const size_t L = lengths[li];
        const size_t rows = (quick ? 4096 : 65536) / L < 4 ? 4 : (quick ? 4096 : 65536) / L;
        const size_t n = rows * L;
        float *x = malloc(n * sizeof *x), *xs = malloc(n * sizeof *xs), *y = malloc(n * sizeof *y);
        long double *want = malloc(n * sizeof *want);
        if (!x || !xs || !y || !want) {
            fprintf(stderr, "peak_accuracy: out of memory\n");
            exit(1);
        }
        for (size_t ti = 0; ti < sizeof tops / sizeof tops[0]; ti++) {
            for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
                const float scale = scales[si];
                for (size_t k = 0; k < n; k++) {
                    seed = seed * 6364136223846793005u + 1442695040888963407u;
                    const float u = (float)(seed >> 40) * 0x1p-24f;
                    x[k] = (tops[ti] - 88.0f * u) / scale;
                    xs[k] = x[k] * scale;
                }
                sm_exact_scaled(want, x, rows, L, scale);
                peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
                d.batch = d.heads = 1;
                d.q_len = rows;
                d.k_len = L;
                d.x_stride[0] = d.y_stride[0] = d.x_stride[1] = d.y_stride[1] = (ptrdiff_t)n;
                d.x_stride[2] = d.y_stride[2] = (ptrdiff_t)L;
                d.scale = scale;
                for (size_t t = 0; t < N_TIERS; t++) {
                    const peak_kernels *kt = tier_kernels(&tiers[t]);
                    if (!kt)
                        continue;
                    kt->softmax(y, x, &d, 0, rows, false);
                    for (size_t k = 0; k < n; k++)
                        acc_add_normal(&acc[t], y[k], want[k]);
                }
                bench_softmax_expf_loop(y, xs, rows, L, 0);
                for (size_t k = 0; k < n; k++)
                    acc_add_normal(&acc[N_TIERS], y[k], want[k]);
#if PEAK_BENCH_ONEDNN
                if (bench_softmax_onednn_once(y, xs, rows, L, &impl) == 0)
                    for (size_t k = 0; k < n; k++)
                        acc_add_normal(&acc[N_TIERS + 1], y[k], want[k]);
#endif
            }
        }
        free(want);
        free(y);
        free(xs);
        free(x);
    }
    for (size_t t = 0; t < N_TIERS; t++)
        if (tier_kernels(&tiers[t]))
            emit("softmax", tiers[t].name, "wide", &acc[t], -1.0,
                 "max_ulp over probabilities >= FLT_MIN");
    emit("softmax", "expf_loop", "wide", &acc[N_TIERS], -1.0,
         "max_ulp over probabilities >= FLT_MIN");
    if (acc[N_TIERS + 1].n)
        emit("softmax", "onednn", "wide", &acc[N_TIERS + 1], -1.0, impl);
}

/* ---- embedding and pe_add --------------------------------------------------------- */

#define EP_B 2
#define EP_S 50
#define EP_D 512
#define EP_VOCAB 1000

static void acc_embed_pe_add(void)
{
    const size_t n = (size_t)EP_B * EP_S * EP_D;
    float *table = malloc((size_t)EP_VOCAB * EP_D * sizeof(float));
    float *pe = malloc((size_t)EP_S * EP_D * sizeof(float));
    float *out = malloc(n * sizeof(float)), *x0 = malloc(n * sizeof(float));
    long double *want = malloc(n * sizeof *want);
    long double *exact = pe_exact(EP_S, EP_D);
    int32_t ids[EP_B * EP_S];
    if (!table || !pe || !out || !x0 || !want || !exact) {
        fprintf(stderr, "peak_accuracy: out of memory\n");
        exit(1);
    }
    bench_fill_uniform(table, (size_t)EP_VOCAB * EP_D, 0x243f6a88, -1.0f, 1.0f);
    bench_fill_uniform(x0, n, 0x13198a2e, -1.0f, 1.0f);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t t = 0; t < EP_B * EP_S; t++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[t] = (int32_t)((s >> 33) % EP_VOCAB);
    }
    peak_pe_table(pe, PEAK_F32, EP_S, EP_D, 0, NULL, NULL);
    const float scale = sqrtf((float)EP_D);
    const char *shape = "batch:2/seq_len:50/d_model:512";

    /* embed: the exact value of E[id] * scale + PE(pos) */
    for (size_t t = 0; t < EP_B * EP_S; t++)
        for (size_t j = 0; j < EP_D; j++)
            want[t * EP_D + j] = (long double)table[(size_t)ids[t] * EP_D + j] * scale +
                                 exact[(t % EP_S) * EP_D + j];
    for (int fly = 0; fly <= 1; fly++)
        for (size_t ti = 0; ti < N_TIERS; ti++) {
            if (!tier_kernels(&tiers[ti]) || peak_isa_force(tiers[ti].isa) != PEAK_OK)
                continue;
            peak_embed_desc d = PEAK_EMBED_DESC_DEFAULT;
            d.table = table;
            d.vocab = EP_VOCAB;
            d.ld_table = EP_D;
            d.d_model = EP_D;
            d.scale = scale;
            d.seq_len = EP_S;
            if (!fly) {
                d.pe = pe;
                d.pe_rows = EP_S;
            }
            err_acc a = {0};
            if (peak_embed_pe(out, EP_D, ids, EP_B * EP_S, &d, NULL) == PEAK_OK)
                acc_rows(&a, out, want, EP_B * EP_S, EP_D);
            char sh[96];
            snprintf(sh, sizeof sh, "%s/fly:%d", shape, fly);
            emit("embedding", tiers[ti].name, sh, &a, -1.0, "ULP of the row's max |y|");
            peak_isa_reset();
        }

    {
        err_acc a = {0};
        bench_embedding_plain_loop_novec(out, table, ids, pe, EP_B, EP_S, EP_D, scale);
        acc_rows(&a, out, want, EP_B * EP_S, EP_D);
        char sh[96];
        snprintf(sh, sizeof sh, "%s/fly:0", shape);
        emit("embedding", "plain_loop_novec", sh, &a, -1.0,
             "peak's PE table; ULP of the row's max |y|");
    }

    /* pe_add: the exact value of x + PE(pos) */
    for (size_t t = 0; t < EP_B * EP_S; t++)
        for (size_t j = 0; j < EP_D; j++)
            want[t * EP_D + j] = (long double)x0[t * EP_D + j] + exact[(t % EP_S) * EP_D + j];
    static const peak_pe_params params = PEAK_PE_PARAMS_DEFAULT;
    for (int fly = 0; fly <= 1; fly++)
        for (size_t ti = 0; ti < N_TIERS; ti++) {
            const peak_kernels *k = tier_kernels(&tiers[ti]);
            if (!k)
                continue;
            memcpy(out, x0, n * sizeof(float));
            k->pe_add(out, EP_S * EP_D, EP_D, EP_B, EP_S, EP_D, 0, fly ? NULL : pe, &params, 0,
                      PEAK_PE_FREQ_END);
            err_acc a = {0};
            acc_rows(&a, out, want, EP_B * EP_S, EP_D);
            char sh[96];
            snprintf(sh, sizeof sh, "%s/fly:%d", shape, fly);
            emit("pe_add", tiers[ti].name, sh, &a, -1.0, "ULP of the row's max |y|");
        }
    free(exact);
    free(want);
    free(x0);
    free(out);
    free(pe);
    free(table);
}

/* ---- layernorm ------------------------------------------------------------------- */

static void acc_layernorm(void)
{
    const size_t rows = quick ? 16 : 256, d = 768, n = rows * d;
    const float eps = 1e-5f;
    float *x = malloc(n * sizeof *x), *r = malloc(n * sizeof *r), *y = malloc(n * sizeof *y);
    float *gamma = malloc(d * sizeof *gamma), *beta = malloc(d * sizeof *beta);
    long double *want = malloc(n * sizeof *want);
    if (!x || !r || !y || !gamma || !beta || !want) {
        fprintf(stderr, "peak_accuracy: out of memory\n");
        exit(1);
    }
    bench_fill_uniform(x, n, 1, -2.0f, 3.0f);
    bench_fill_uniform(r, n, 2, -1.0f, 1.0f);
    bench_fill_uniform(gamma, d, 3, 0.5f, 1.5f);
    bench_fill_uniform(beta, d, 4, -1.0f, 1.0f);
    for (size_t t = 0; t < rows; t++) {
        long double sum = 0.0L, var = 0.0L;
        for (size_t j = 0; j < d; j++)
            sum += (long double)x[t * d + j] + r[t * d + j];
        const long double mean = sum / d;
        for (size_t j = 0; j < d; j++) {
            const long double dev = (long double)x[t * d + j] + r[t * d + j] - mean;
            var += dev * dev;
        }
        const long double rstd = 1.0L / sqrtl(var / d + eps);
        for (size_t j = 0; j < d; j++)
            want[t * d + j] =
                ((long double)x[t * d + j] + r[t * d + j] - mean) * rstd * gamma[j] + beta[j];
    }
    char shape[64];
    snprintf(shape, sizeof shape, "rows:%zu/d_model:%zu", rows, d);
    for (size_t ti = 0; ti < N_TIERS; ti++) {
        const peak_kernels *k = tier_kernels(&tiers[ti]);
        if (!k)
            continue;
        k->add_layernorm(y, (ptrdiff_t)d, NULL, 0, x, (ptrdiff_t)d, r, (ptrdiff_t)d, gamma, beta,
                         rows, d, eps, PEAK_F32, 0, false);
        err_acc a = {0};
        acc_rows(&a, y, want, rows, d);
        emit("layernorm", tiers[ti].name, shape, &a, -1.0, "ULP of the row's max |y|");
    }
    bench_layernorm_plain_loop_novec(y, x, r, gamma, beta, rows, d, eps);
    err_acc a = {0};
    acc_rows(&a, y, want, rows, d);
    emit("layernorm", "plain_loop_novec", shape, &a, -1.0,
         "double accumulators; ULP of the row's max |y|");
    free(want);
    free(beta);
    free(gamma);
    free(y);
    free(r);
    free(x);
}

/* ---- attention -------------------------------------------------------------------- */

#define AT_H 8
#define AT_DH 64

static void acc_attention_shape(size_t Lq, size_t Lk, int causal)
{
    const size_t H = AT_H, nq = Lq * H * AT_DH, nk = Lk * H * AT_DH;
    float *q = malloc(nq * sizeof *q), *o = malloc(nq * sizeof *o);
    float *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
    long double *want = malloc(nq * sizeof *want), *s = malloc(Lk * sizeof *s);
    if (!q || !o || !k || !v || !want || !s) {
        fprintf(stderr, "peak_accuracy: out of memory\n");
        exit(1);
    }
    bench_fill_uniform(q, nq, 11, -1.0f, 1.0f);
    bench_fill_uniform(k, nk, 12, -1.0f, 1.0f);
    bench_fill_uniform(v, nk, 13, -1.0f, 1.0f);
    const float scale = 0.125f;
    for (size_t h = 0; h < H; h++)
        for (size_t i = 0; i < Lq; i++) {
            const size_t hi = causal ? (i + 1 < Lk ? i + 1 : Lk) : Lk;
            long double m = -INFINITY, sum = 0.0L;
            for (size_t j = 0; j < hi; j++) {
                long double dot = 0.0L;
                for (size_t e = 0; e < AT_DH; e++)
                    dot += (long double)q[(i * H + h) * AT_DH + e] * k[(j * H + h) * AT_DH + e];
                s[j] = dot * scale;
                m = s[j] > m ? s[j] : m;
            }
            for (size_t e = 0; e < AT_DH; e++)
                want[(i * H + h) * AT_DH + e] = 0.0L;
            for (size_t j = 0; j < hi; j++) {
                const long double p = expl(s[j] - m);
                sum += p;
                for (size_t e = 0; e < AT_DH; e++)
                    want[(i * H + h) * AT_DH + e] += p * v[(j * H + h) * AT_DH + e];
            }
            for (size_t e = 0; e < AT_DH; e++)
                want[(i * H + h) * AT_DH + e] /= sum;
        }
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1;
    d.heads = d.kv_heads = H;
    d.q_len = Lq;
    d.kv_len = Lk;
    d.head_dim = d.v_head_dim = AT_DH;
    d.scale = scale;
    d.mask.causal = causal;
    const ptrdiff_t row = (ptrdiff_t)(H * AT_DH);
    const ptrdiff_t qs[3] = {(ptrdiff_t)Lq * row, row, AT_DH};
    const ptrdiff_t ks[3] = {(ptrdiff_t)Lk * row, row, AT_DH};
    memcpy(d.q_stride, qs, sizeof qs);
    memcpy(d.o_stride, qs, sizeof qs);
    memcpy(d.k_stride, ks, sizeof ks);
    memcpy(d.v_stride, ks, sizeof ks);
    char shape[96];
    snprintf(shape, sizeof shape, "H:%zu/Lq:%zu/Lk:%zu/causal:%d", H, Lq, Lk, causal);
    for (size_t ti = 0; ti < N_TIERS; ti++) {
        const peak_kernels *kern = tier_kernels(&tiers[ti]);
        if (!kern)
            continue;
        void *ws =
            aligned_alloc(64, (peak_schedule_attention_workspace(kern, &d, 1) + 64) / 64 * 64);
        if (!ws)
            continue;
        peak_schedule_attention(kern, o, q, k, v, &d, ws, 1, NULL);
        free(ws);
        err_acc a = {0};
        acc_rows(&a, o, want, Lq * H, AT_DH);
        emit("attention", tiers[ti].name, shape, &a, -1.0, "ULP of the row's max |O|");
    }
    free(s);
    free(want);
    free(v);
    free(k);
    free(o);
    free(q);
}

static void acc_attention(void)
{
    acc_attention_shape(128, 128, 0);
    acc_attention_shape(128, 128, 1);
    acc_attention_shape(1, 2048, 0);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else {
            fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
            return 2;
        }
    }
    printf("{\n  \"peak_version\": \"%s\",\n  \"peak_isa_active\": \"%s\",\n"
           "  \"oracle\": \"x87 long double (64-bit significand)\",\n  \"entries\": [",
           peak_version(), peak_isa_name(peak_isa_active()));
    acc_pe_table();
    acc_exp();
    acc_softmax();
    acc_softmax_wide();
    acc_embed_pe_add();
    acc_layernorm();
    acc_attention();
    printf("\n  ]\n}\n");
    return 0;
}
