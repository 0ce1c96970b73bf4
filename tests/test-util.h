/*
 * test-util.h - shared by every Check test program.
 *
 * Each test program covers one kernel family and takes the tier to test as
 * argv[1] ("scalar", "avx2", "avx512", "neon").  peak_test_main() forces
 * that tier (so the public API, its validation and the dispatch table are
 * all exercised) and exits 77, which meson reports as SKIP, when the CPU,
 * the OS or the build lacks it.
 */
#ifndef PEAK_TEST_UTIL_H
#define PEAK_TEST_UTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "peak.h"

/* ck_assert_msg without its cost: Check records the location of every
   passing assertion (a write to its pipe), which dominates element-wise
   comparisons, under AddressSanitizer most of all. */
#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond))                                                             \
            ck_abort_msg(__VA_ARGS__);                                           \
    } while (0)

/* The tier under test (set by peak_test_main before the suite is built). */
extern peak_isa peak_test_isa;

/* Parses argv[1], forces the tier, builds the suite with make(isa), runs
   it (CK_ENV verbosity) and returns 0 on success, 1 on any failure, 77 if
   the tier is unavailable, 99 if no test ran. */
int peak_test_main(int argc, char **argv, Suite *(*make)(peak_isa isa));

/* 1 when the environment variable PEAK_TEST_QUICK is set and not "0": the
   valgrind and qemu setups of tests/meson.build set it.  The few tests
   that take a second or more natively then sample their sweeps more
   sparsely or use fewer rows (same code paths and tails, except the
   streaming-store paths that need outputs of 16 MiB and more), so that a
   100x slower emulated run fits in CI.  Native runs are unchanged. */
int peak_test_quick(void);

/* Turns on flush-to-zero and denormals-are-zero (as a caller built with
   -ffast-math runs) and returns the previous state for
   peak_test_ftz_restore; returns 0 and does nothing where the build has
   no way to set them or they do not take effect (valgrind ignores them);
   tests of FTZ behaviour then pass trivially. */
int peak_test_ftz_on(unsigned *saved);
void peak_test_ftz_restore(unsigned saved);

/* splitmix64: a fixed-seed generator, so every failure reproduces. */
uint64_t peak_test_next(uint64_t *state);
/* Uniform in [lo, hi). */
float peak_test_uniform(uint64_t *state, float lo, float hi);
void peak_test_fill_uniform(float *p, size_t n, uint64_t *state, float lo, float hi);

/* Distance in units in the last place between two finite floats of any sign
   (0 for equal bits or +0/-0); INT64_MAX if exactly one is NaN. */
int64_t peak_test_ulp_diff(float a, float b);

/* Exact-size heap buffer (no padding: AddressSanitizer sees any over-read),
   offset by `misalign` floats from a 64-byte boundary; free with
   peak_test_free().  Contents are filled with the canary pattern. */
float *peak_test_alloc(size_t n, size_t misalign);
void peak_test_free(float *p);

/* The canary: a NaN payload no kernel produces.  peak_test_canaries_intact
   returns 1 if p[i] still holds it for every i in [0, n). */
#define PEAK_TEST_CANARY_BITS 0x7fc0beefu
void peak_test_fill_canary(float *p, size_t n);
int peak_test_is_canary(float v);
int peak_test_canaries_intact(const float *p, size_t n);
/* peak.h's mask rule written out per element, independently of
   kernels/mask.h: 1 if key j is visible to query row i of (batch b, head h)
   for Lq = q_len, Lk = k_len.  The softmax and attention oracles share it. */
int peak_test_mask_visible(const peak_mask *m, size_t q_len, size_t k_len, size_t b, size_t h,
                           size_t i, size_t j);

/* What an oracle row of softmax or attention is (peak.h): a visible NaN or
   +inf score makes it a NaN row, no finite visible score a zero row. */
enum peak_test_row_kind { ROW_NORMAL, ROW_ZERO, ROW_NAN };

/* s[j] for j < n: a row's scores in double, read where vis[j] != 0, with
   a sink (peak_logits; NULL: none), which joins the maximum and the sum of
   a row with a finite maximum.  Returns the row's kind; for a normal row s
   becomes its probabilities (0 at masked keys; they sum to less than 1
   with a sink). */
int peak_test_softmax_row(double *s, const int *vis, size_t n, const float *sink);

/* Random masks for a [B, H, Lq, Lk] score tensor.  Bits 1, 2, 4 of
   `broadcast` give the b, h, i strides 0 (broadcast) instead of packed.
   Each sets the mask's pointer and strides and returns the buffer, which the
   caller frees (free(), or peak_test_free() for the bias). */
typedef struct peak_test_dims {
    size_t B, H, Lq, Lk;
} peak_test_dims;
/* keep bytes, each 1 with probability `density` */
uint8_t *peak_test_add_keep(peak_mask *m, peak_test_dims d, unsigned broadcast, double density,
                            uint64_t *rng);
/* bias in [lo, hi), -inf with probability `masked`; misaligned by `misalign` floats */
float *peak_test_add_bias(peak_mask *m, peak_test_dims d, unsigned broadcast, float lo, float hi,
                          double masked, size_t misalign, uint64_t *rng);
/* key lengths in [0, Lk], with Lk forced at b = 1 and 0 at b = 2 when B allows */
int32_t *peak_test_add_key_len(peak_mask *m, peak_test_dims d, uint64_t *rng);

/* A whole mask, as the softmax and attention tests describe it. */
typedef struct peak_test_mask_spec {
    int causal;
    peak_align align;
    size_t q_offset, window;
    int key_len;         /* random key lengths */
    int keep;            /* a keep mask of `keep_density` ones */
    unsigned keep_bcast; /* its broadcast bits (b, h, i) */
    double keep_density;
    int bias;            /* a bias in [bias_lo, bias_hi), -inf at rate bias_masked */
    unsigned bias_bcast;
    float bias_lo, bias_hi;
    double bias_masked;
} peak_test_mask_spec;

/* The arrays peak_test_make_mask allocated, NULL where the spec has none:
   free key_len and keep with free(), bias with peak_test_free(). */
typedef struct peak_test_mask_arrays {
    int32_t *key_len;
    uint8_t *keep;
    float *bias;
} peak_test_mask_arrays;

/* Sets m from spec for a [B, H, Lq, Lk] tensor d; the bias misaligned by
   bias_misalign floats. */
peak_test_mask_arrays peak_test_make_mask(peak_mask *m, const peak_test_mask_spec *spec,
                                          peak_test_dims d, size_t bias_misalign, uint64_t *rng);

/* peak.h's ALiBi slope of head h of n heads (peak_alibi_slopes), evaluated
   here in long double from the formula, independently of the library:
   2^(-8 (h + 1) / n) for n a power of two; else, p the largest power of
   two below n, the p slopes of p heads, then 2^(-4 h' / p) at odd h'.
   peak_test_alibi_slope rounds it once to float, as peak.h defines it. */
long double peak_test_alibi_slope_exact(size_t h, size_t n);
float peak_test_alibi_slope(size_t h, size_t n);

/* What the logit options (peak_logits) of a call with `heads` query heads
   do to row (h, i) of Lq = q_len rows over Lk = k_len keys, as peak.h
   defines them; the softmax and attention oracles, unit and fuzz, share
   them.  The ALiBi slope of head h: the caller's, or
   peak_test_alibi_slope's. */
float peak_test_slope(const peak_logits *l, size_t h, size_t heads);
/* The ALiBi distance of key j, exact: qpos - j (the causal form) or
   |qpos - j| (symmetric), qpos as peak_mask defines it (q_offset and the
   causal alignment included, whether or not the mask is causal). */
long long peak_test_alibi_distance(const peak_logits *l, const peak_mask *m, size_t q_len,
                                   size_t k_len, size_t i, size_t j);
/* s capped in double, cap * tanh(s / cap) (s itself without a cap). */
double peak_test_softcap(const peak_logits *l, double s);
/* The sink of head h, or NULL. */
const float *peak_test_sink(const peak_logits *l, size_t h);

/* The library's tanh (the cap) is within PEAK_TEST_TANH_ULP units in the
   last place of tanh for every float argument (kernels/tanh.h: 0.959,
   measured over all 2^32 floats); the oracles have only the C library's
   tanh.  So for a capped score peak_test_softmax_score takes c_oracle =
   (float)(cap * tanh(t)) in double, t = s / cap in float as the kernels
   have it, and the kernels' c (their tanh times cap, rounded once) lies
   within (PEAK_TEST_TANH_ULP + 1) 2^-23 |c_oracle| of it (ulp(y) <=
   2^-23 |y|; one ulp for the two roundings).  Each later float sum (the
   ALiBi term, the bias) may round the two apart by one more ulp of its
   result.  +-inf and 0 are capped exactly (peak.h: +-cap, and tanh(0) =
   0), no slack. */
#define PEAK_TEST_TANH_ULP 1

/* peak_softmax's score of key j in row (b, h, i) from x, the float there,
   as peak.h defines it in float, each operation rounded once: x * scale,
   the cap (t = s / cap, then cap * tanh(t) in double: PEAK_TEST_TANH_ULP),
   s - slope * distance, then + bias.  *slack (if not NULL) receives how far
   the kernels' score may lie from it: 0 without a cap, and for a NaN. */
float peak_test_softmax_score(const peak_softmax_desc *d, float x, size_t b, size_t h, size_t i,
                              size_t j, double *slack);
/* Scores that each move by at most delta move every probability of their
   row by a factor within e^(+-2 delta) (the row's log-sum-exp moves by at
   most delta): the relative bound e^(2 delta) - 1, rounded up. */
double peak_test_slack_rel(double delta);

/* A logit case (peak_logits) of the softmax and attention tests. */
typedef struct peak_test_logit_spec {
    float cap; /* 0: none */
    peak_alibi alibi;
    int slopes;     /* 0: peak.h's; 1: the caller's, one for all (stride 0); 2: stride 2 */
    float slope_hi; /* the caller's slopes in [0, slope_hi) (0: 1) */
    int sinks;      /* 0: none; 1: one for all (stride 0); 2: one per head (stride 1) */
    float sink_lo, sink_hi; /* sinks uniform in [sink_lo, sink_hi) */
} peak_test_logit_spec;

/* The caller's slopes and sinks of a logit case, exactly the floats read
   (so AddressSanitizer sees a read past the last head's); the floats
   between strided slopes keep the canary, a NaN, so a wrong stride
   poisons rows.  Free with peak_test_free_logits. */
typedef struct peak_test_logit_arrays {
    float *slopes, *sinks;
} peak_test_logit_arrays;

peak_logits peak_test_make_logits(const peak_test_logit_spec *ls, size_t H, uint64_t *rng,
                                  peak_test_logit_arrays *arr);
void peak_test_free_logits(peak_test_logit_arrays *arr);

/* "[B.. H.. causal.. align.. q_offset.. window.. key_len.. keep.. bias..;
   cap.. alibi.. slopes.. sinks..]": a call's mask and logit options, into
   text[n], for failure messages. */
void peak_test_describe_logits(char *text, size_t n, size_t B, size_t H, const peak_mask *m,
                               const peak_logits *l);

/* The float of bit pattern b, and the bit pattern of f. */
static inline float peak_test_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline uint32_t peak_test_to_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* 1 if n bytes at a and b are identical. */
int peak_test_bytes_equal(const void *a, const void *b, size_t n);

/* ---- 16-bit outputs (bfloat16, float16), decoded here without the library -- */

/* A bfloat16 or float16 bit pattern of type t as a double (exact; NaN as
   NaN). */
double peak_test_half_value(peak_dtype t, uint16_t h);
/* The spacing of type t (bfloat16 or float16) at |x|: the ULP of x's binade,
   the subnormal spacing below the least normal. */
double peak_test_half_ulp(peak_dtype t, double x);
/* n 16-bit elements between two canary elements (PEAK_TEST_HALF_CANARY,
   which a call must write neither of); returns the first element.  Free
   with peak_test_half_free; aborts when out of memory. */
#define PEAK_TEST_HALF_CANARY 0xa5a5u
uint16_t *peak_test_half_alloc(size_t n);
void peak_test_half_free(uint16_t *h);
int peak_test_half_guards_intact(const uint16_t *h, size_t n);
/* "bf16", "f16" or "f32". */
const char *peak_test_type_name(peak_dtype t);

#endif
