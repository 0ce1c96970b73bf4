#include "test-util.h"

#include <math.h>
#include <stdio.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif
#include <stdlib.h>
#include <string.h>

peak_isa peak_test_isa = PEAK_ISA_SCALAR;

int peak_test_main(int argc, char **argv, Suite *(*make)(peak_isa isa))
{
    const char *name = argc > 1 ? argv[1] : "scalar";
    if (!peak_isa_parse(name, &peak_test_isa)) {
        fprintf(stderr, "%s: unknown tier '%s'\n", argv[0], name);
        return 99;
    }
    if (peak_isa_force(peak_test_isa) != PEAK_OK) {
        printf("SKIP: tier %s is not available on this CPU/OS/build\n", name);
        return 77;
    }
    SRunner *sr = srunner_create(make(peak_test_isa));
    srunner_run_all(sr, CK_ENV);
    int run = srunner_ntests_run(sr);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (run == 0)
        return 99;
    return failed ? 1 : 0;
}

int peak_test_quick(void)
{
    const char *v = getenv("PEAK_TEST_QUICK");
    return v && *v && strcmp(v, "0") != 0;
}

int peak_test_ftz_on(unsigned *saved)
{
#if defined(__x86_64__) || defined(__i386__)
    *saved = _mm_getcsr();
    _mm_setcsr(*saved | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
    /* valgrind ignores these bits: then report FTZ as unavailable */
    volatile float tiny = 1e-40f, one = 1.0f;
    const float prod = tiny * one;
    if (prod != 0.0f) {
        _mm_setcsr(*saved);
        return 0;
    }
    return 1;
#else
    *saved = 0;
    return 0;
#endif
}

void peak_test_ftz_restore(unsigned saved)
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(saved);
#else
    (void)saved;
#endif
}

uint64_t peak_test_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float peak_test_uniform(uint64_t *state, float lo, float hi)
{
    double u = (double)(peak_test_next(state) >> 11) * 0x1p-53;
    return (float)(lo + (hi - lo) * u);
}

void peak_test_fill_uniform(float *p, size_t n, uint64_t *state, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        p[i] = peak_test_uniform(state, lo, hi);
}

/* Maps float bits onto a line where adjacent floats differ by 1. */
static int64_t ordered(float x)
{
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - (int64_t)i : (int64_t)i;
}

int64_t peak_test_ulp_diff(float a, float b)
{
    if (isnan(a) || isnan(b))
        return (isnan(a) && isnan(b)) ? 0 : INT64_MAX;
    int64_t d = ordered(a) - ordered(b);
    return d < 0 ? -d : d;
}

/* The block ends exactly at the end of the allocation (so AddressSanitizer
   flags any read past element n-1); the raw pointer is kept in the head. */
float *peak_test_alloc(size_t n, size_t misalign)
{
    size_t head = 64 + (misalign % 16) * sizeof(float);
    size_t bytes = (n ? n : 1) * sizeof(float);
    void *raw = NULL;
    if (posix_memalign(&raw, 64, head + bytes) != 0)
        abort();
    float *p = (float *)((unsigned char *)raw + head);
    memcpy((unsigned char *)raw, &raw, sizeof raw);
    peak_test_fill_canary(p, n);
    return p;
}

void peak_test_free(float *p)
{
    if (!p)
        return;
    /* The head is 64 bytes plus the misalignment: find the 64-byte boundary. */
    unsigned char *raw = (unsigned char *)((uintptr_t)p & ~(uintptr_t)63) - 64;
    void *orig;
    memcpy(&orig, raw, sizeof orig);
    free(orig);
}

void peak_test_fill_canary(float *p, size_t n)
{
    uint32_t bits = PEAK_TEST_CANARY_BITS;
    for (size_t i = 0; i < n; i++)
        memcpy(&p[i], &bits, sizeof bits);
}

int peak_test_is_canary(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits == PEAK_TEST_CANARY_BITS;
}

int peak_test_canaries_intact(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!peak_test_is_canary(p[i]))
            return 0;
    return 1;
}

int peak_test_bytes_equal(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

uint16_t *peak_test_half_alloc(size_t n)
{
    uint16_t *m = malloc((n + 2) * sizeof *m);
    if (!m)
        abort();
    for (size_t i = 0; i < n + 2; i++)
        m[i] = PEAK_TEST_HALF_CANARY;
    return m + 1;
}

void peak_test_half_free(uint16_t *h)
{
    free(h - 1);
}

int peak_test_half_guards_intact(const uint16_t *h, size_t n)
{
    return h[-1] == PEAK_TEST_HALF_CANARY && h[n] == PEAK_TEST_HALF_CANARY;
}

/* IEEE 754 layouts: bfloat16 1-8-7 (float32's exponent), float16 1-5-10. */
double peak_test_half_value(peak_dtype t, uint16_t h)
{
    const int ebits = t == PEAK_BF16 ? 8 : 5, mbits = t == PEAK_BF16 ? 7 : 10;
    const int bias = (1 << (ebits - 1)) - 1;
    const int e = (h >> mbits) & ((1 << ebits) - 1), m = h & ((1 << mbits) - 1);
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == (1 << ebits) - 1)
        return m ? NAN : sign * INFINITY;
    if (e == 0)
        return sign * ldexp((double)m, 1 - bias - mbits);
    return sign * ldexp((double)(m | (1 << mbits)), e - bias - mbits);
}

double peak_test_half_ulp(peak_dtype t, double x)
{
    const int mbits = t == PEAK_BF16 ? 7 : 10, emin = t == PEAK_BF16 ? -126 : -14;
    int e = emin + 1;
    if (x != 0.0)
        (void)frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
    return ldexp(1.0, (e - 1 > emin ? e - 1 : emin) - mbits);
}

const char *peak_test_type_name(peak_dtype t)
{
    return t == PEAK_F32 ? "f32" : t == PEAK_BF16 ? "bf16" : "f16";
}

int peak_test_mask_visible(const peak_mask *m, size_t q_len, size_t k_len, size_t b, size_t h,
                           size_t i, size_t j)
{
    long long qpos = (long long)i + (long long)m->q_offset;
    if (m->align == PEAK_ALIGN_BOTTOM_RIGHT)
        qpos += (long long)k_len - (long long)q_len;
    if (m->causal && (long long)j > qpos)
        return 0;
    if (m->window && (long long)j <= qpos - (long long)m->window)
        return 0;
    if (m->key_len && (long long)j >= m->key_len[b])
        return 0;
    if (m->keep &&
        !m->keep[b * m->keep_stride[0] + h * m->keep_stride[1] + i * m->keep_stride[2] + j])
        return 0;
    if (m->bias && m->bias[b * m->bias_stride[0] + h * m->bias_stride[1] +
                           i * m->bias_stride[2] + j] == -INFINITY)
        return 0;
    return 1;
}

static void mask_strides(peak_test_dims d, unsigned broadcast, ptrdiff_t st[3])
{
    st[2] = (broadcast & 4) ? 0 : (ptrdiff_t)d.Lk;
    st[1] = (broadcast & 2) ? 0 : (ptrdiff_t)(d.Lq * d.Lk);
    st[0] = (broadcast & 1) ? 0 : (ptrdiff_t)(d.H * d.Lq * d.Lk);
}

static size_t mask_span(peak_test_dims d, const ptrdiff_t st[3])
{
    return (d.B - 1) * (size_t)st[0] + (d.H - 1) * (size_t)st[1] + (d.Lq - 1) * (size_t)st[2] +
           d.Lk;
}

uint8_t *peak_test_add_keep(peak_mask *m, peak_test_dims d, unsigned broadcast, double density,
                            uint64_t *rng)
{
    mask_strides(d, broadcast, m->keep_stride);
    size_t n = mask_span(d, m->keep_stride);
    uint8_t *keep = malloc(n);
    if (!keep)
        abort();
    for (size_t e = 0; e < n; e++)
        keep[e] = peak_test_uniform(rng, 0.0f, 1.0f) < density ? 1 : 0;
    m->keep = keep;
    return keep;
}

float *peak_test_add_bias(peak_mask *m, peak_test_dims d, unsigned broadcast, float lo, float hi,
                          double masked, size_t misalign, uint64_t *rng)
{
    mask_strides(d, broadcast, m->bias_stride);
    size_t n = mask_span(d, m->bias_stride);
    float *bias = peak_test_alloc(n, misalign);
    for (size_t e = 0; e < n; e++) {
        int off = peak_test_uniform(rng, 0.0f, 1.0f) < masked;
        bias[e] = off ? -INFINITY : peak_test_uniform(rng, lo, hi);
    }
    m->bias = bias;
    return bias;
}

int32_t *peak_test_add_key_len(peak_mask *m, peak_test_dims d, uint64_t *rng)
{
    int32_t *key_len = malloc(d.B * sizeof *key_len);
    if (!key_len)
        abort();
    for (size_t b = 0; b < d.B; b++)
        key_len[b] = (int32_t)(peak_test_next(rng) % (d.Lk + 1));
    if (d.B > 1)
        key_len[1] = (int32_t)d.Lk;
    if (d.B > 2)
        key_len[2] = 0;
    m->key_len = key_len;
    return key_len;
}

int peak_test_softmax_row(double *s, const int *vis, size_t n, const float *sink)
{
    double m = -INFINITY;
    int poisoned = 0;
    for (size_t j = 0; j < n; j++) {
        if (!vis[j])
            continue;
        if (isnan(s[j]) || s[j] == INFINITY)
            poisoned = 1;
        else if (s[j] > m)
            m = s[j];
    }
    if (poisoned)
        return ROW_NAN;
    if (m == -INFINITY) /* a sink does not make a row of no finite score */
        return ROW_ZERO;
    if (sink)
        m = fmax(m, (double)*sink);
    double sum = sink ? exp((double)*sink - m) : 0.0;
    for (size_t j = 0; j < n; j++)
        sum += vis[j] ? exp(s[j] - m) : 0.0;
    for (size_t j = 0; j < n; j++)
        s[j] = vis[j] ? exp(s[j] - m) / sum : 0.0;
    return ROW_NORMAL;
}

peak_test_mask_arrays peak_test_make_mask(peak_mask *m, const peak_test_mask_spec *spec,
                                          peak_test_dims d, size_t bias_misalign, uint64_t *rng)
{
    peak_test_mask_arrays a = {NULL, NULL, NULL};
    m->causal = spec->causal;
    m->align = spec->align;
    m->q_offset = spec->q_offset;
    m->window = spec->window;
    if (spec->key_len)
        a.key_len = peak_test_add_key_len(m, d, rng);
    if (spec->keep)
        a.keep = peak_test_add_keep(m, d, spec->keep_bcast, spec->keep_density, rng);
    if (spec->bias)
        a.bias = peak_test_add_bias(m, d, spec->bias_bcast, spec->bias_lo, spec->bias_hi,
                                    spec->bias_masked, bias_misalign, rng);
    return a;
}

long double peak_test_alibi_slope_exact(size_t h, size_t n)
{
    size_t p = 1;
    while (2 * p <= n)
        p *= 2;
    /* Exponents exact (p is a power of two, h < 2^20); one exp2l rounding.
       Not powl of the base: that multiplies the base's rounding by h + 1,
       2^-33 relative for 2^20 heads where valgrind runs long double as
       double. */
    if (h < p) /* the powers 1 .. p of 2^(-8/p) */
        return exp2l(-8.0L * (long double)(h + 1) / (long double)p);
    /* the odd powers of 2p heads' base 2^(-4/p) */
    return exp2l(-4.0L * (long double)(2 * (h - p) + 1) / (long double)p);
}

float peak_test_alibi_slope(size_t h, size_t n)
{
    /* The oracles ask per key: the slopes of the last head count, kept
       (long double exp2l is slow where long double is emulated). */
    static float kept[64];
    static size_t kept_n;
    if (n > 64)
        return (float)peak_test_alibi_slope_exact(h, n);
    if (kept_n != n) {
        for (size_t k = 0; k < n; k++)
            kept[k] = (float)peak_test_alibi_slope_exact(k, n);
        kept_n = n;
    }
    return kept[h];
}

float peak_test_slope(const peak_logits *l, size_t h, size_t heads)
{
    return l->alibi_slopes ? l->alibi_slopes[(ptrdiff_t)h * l->alibi_slopes_stride]
                           : peak_test_alibi_slope(h, heads);
}

long long peak_test_alibi_distance(const peak_logits *l, const peak_mask *m, size_t q_len,
                                   size_t k_len, size_t i, size_t j)
{
    long long qpos = (long long)i + (long long)m->q_offset;
    if (m->align == PEAK_ALIGN_BOTTOM_RIGHT)
        qpos += (long long)k_len - (long long)q_len;
    const long long dist = qpos - (long long)j;
    return l->alibi == PEAK_ALIBI_SYMMETRIC && dist < 0 ? -dist : dist;
}

double peak_test_softcap(const peak_logits *l, double s)
{
    return l->softcap != 0.0f ? (double)l->softcap * tanh(s / (double)l->softcap) : s;
}

const float *peak_test_sink(const peak_logits *l, size_t h)
{
    return l->sinks ? &l->sinks[(ptrdiff_t)h * l->sinks_stride] : NULL;
}

/* +-0, by the bits: the fuzz oracles run under DAZ, where a float compare
   takes a subnormal for 0 (a subnormal scale is not the default). */
static int is_zero(float v)
{
    return (peak_test_to_bits(v) & 0x7fffffffu) == 0;
}

float peak_test_softmax_score(const peak_softmax_desc *d, float x, size_t b, size_t h, size_t i,
                              size_t j, double *slack)
{
    const peak_mask *m = &d->mask;
    const peak_logits *l = &d->logits;
    const float scale = is_zero(d->scale) ? 1.0f : d->scale;
    double sl = 0.0;
    float v = x * scale;
    if (!is_zero(l->softcap)) {
        const float t = v / l->softcap;
        v = (float)((double)l->softcap * tanh((double)t));
        if (!isinf(t) && t != 0.0f)
            sl = (PEAK_TEST_TANH_ULP + 1) * 0x1p-23 * fabs((double)v);
    }
    if (l->alibi != PEAK_ALIBI_NONE) {
        const float a = peak_test_slope(l, h, d->heads) *
                        (float)peak_test_alibi_distance(l, m, d->q_len, d->k_len, i, j);
        v = v - a;
        sl += sl != 0.0 ? 0x1p-23 * fabs((double)v) : 0.0;
    }
    if (m->bias) {
        v += m->bias[b * m->bias_stride[0] + h * m->bias_stride[1] + i * m->bias_stride[2] + j];
        sl += sl != 0.0 ? 0x1p-23 * fabs((double)v) : 0.0;
    }
    if (slack) /* NaN scores make NaN rows, whatever the slack */
        *slack = isnan(sl) ? 0.0 : sl;
    return v;
}

double peak_test_slack_rel(double delta)
{
    return expm1(2.0 * delta) * (1.0 + 0x1p-20);
}

void peak_test_describe_logits(char *text, size_t n, size_t B, size_t H, const peak_mask *m,
                               const peak_logits *l)
{
    char slopes[32] = "default", sinks[32] = "none";
    if (l->alibi_slopes)
        snprintf(slopes, sizeof slopes, "stride %td", l->alibi_slopes_stride);
    if (l->sinks)
        snprintf(sinks, sizeof sinks, "stride %td", l->sinks_stride);
    snprintf(text, n,
             "[B %zu H %zu causal %d align %d q_offset %zu window %zu key_len %d keep %d bias %d; "
             "cap %g alibi %d slopes %s sinks %s]",
             B, H, m->causal, (int)m->align, m->q_offset, m->window, m->key_len != NULL,
             m->keep != NULL, m->bias != NULL, (double)l->softcap, (int)l->alibi, slopes, sinks);
}

peak_logits peak_test_make_logits(const peak_test_logit_spec *ls, size_t H, uint64_t *rng,
                                  peak_test_logit_arrays *arr)
{
    peak_logits l = PEAK_LOGITS_DEFAULT;
    arr->slopes = arr->sinks = NULL;
    l.softcap = ls->cap;
    l.alibi = ls->alibi;
    if (ls->alibi != PEAK_ALIBI_NONE && ls->slopes) {
        const ptrdiff_t st = ls->slopes == 2 ? 2 : 0;
        arr->slopes = peak_test_alloc(st ? (H - 1) * 2 + 1 : 1, 1);
        for (size_t h = 0; h < (st ? H : 1); h++)
            arr->slopes[(ptrdiff_t)h * st] =
                peak_test_uniform(rng, 0.0f, ls->slope_hi != 0.0f ? ls->slope_hi : 1.0f);
        l.alibi_slopes = arr->slopes;
        l.alibi_slopes_stride = st;
    }
    if (ls->sinks) {
        const size_t n = ls->sinks == 2 ? H : 1;
        arr->sinks = peak_test_alloc(n, 2);
        for (size_t h = 0; h < n; h++)
            arr->sinks[h] = peak_test_uniform(rng, ls->sink_lo, ls->sink_hi);
        l.sinks = arr->sinks;
        l.sinks_stride = ls->sinks == 2 ? 1 : 0;
    }
    return l;
}

void peak_test_free_logits(peak_test_logit_arrays *arr)
{
    peak_test_free(arr->slopes);
    peak_test_free(arr->sinks);
}
