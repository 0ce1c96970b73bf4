/*
 * test-convert.c - peak_convert on one tier (argv[1]) against an oracle of
 * its own: widening decodes each 16-bit pattern into a double by its
 * fields; narrowing finds the nearest value of the narrower type in a
 * sorted table of all its finite values (ties to the even encoding, and
 * 2^16 / 2^128 with the even encoding of inf past the largest finite, so
 * that overflow follows the same rule).  Every tier must also give the
 * scalar tier's bits.
 *
 * Inputs: every bfloat16 and float16 pattern; float32 patterns in a
 * stride through all 2^32 plus the edges peak.h names (the carry of a
 * tie into the exponent, the largest finite values and overflow, both
 * types' subnormals, NaN payloads); lengths 1..70 at misalignments 0..15
 * elements (every tail of 4, 8 and 16 lanes); a pool of 3 workers; MXCSR
 * with DAZ and FTZ on.  Rejected calls write nothing.
 */
#include "test-util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const peak_dtype types[3] = {PEAK_F32, PEAK_BF16, PEAK_F16};

static const char *type_name(peak_dtype t)
{
    return t == PEAK_F32 ? "f32" : t == PEAK_BF16 ? "bf16" : "f16";
}

/* ---- the oracle ---------------------------------------------------------- */

/* The NaN a widening gives: IEEE 754 6.2.3, the payload kept in the top
   bits, the quiet bit set. */
static uint32_t half_nan_widened(peak_dtype t, uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    const uint32_t payload = t == PEAK_BF16 ? (uint32_t)(h & 0x7f) << 16 : (uint32_t)(h & 0x3ff) << 13;
    return sign | 0x7f800000u | 0x00400000u | payload;
}

/* The non-negative finite values of a type in increasing order, with the
   next power of two (inf's encoding) at the end. */
typedef struct table {
    double v[32768];
    uint16_t code[32768];
    size_t n;
} table;

static table tables[3];

static void make_table(peak_dtype t)
{
    table *tb = &tables[t];
    const uint16_t inf = t == PEAK_BF16 ? 0x7f80 : 0x7c00;
    tb->n = 0;
    for (uint32_t h = 0; h < inf; h++) {
        tb->v[tb->n] = peak_test_half_value(t, (uint16_t)h);
        tb->code[tb->n++] = (uint16_t)h;
    }
    tb->v[tb->n] = t == PEAK_BF16 ? ldexp(1.0, 128) : ldexp(1.0, 16);
    tb->code[tb->n++] = inf;
}

/* x (a float32's value, any sign) rounded to type t, to nearest even. */
static uint16_t narrow_oracle(peak_dtype t, float x)
{
    const uint32_t bits = peak_test_to_bits(x);
    const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    if (isnan(x)) {
        const uint32_t payload = t == PEAK_BF16 ? (bits >> 16) & 0x7f : (bits >> 13) & 0x3ff;
        const uint16_t quiet = t == PEAK_BF16 ? 0x7fc0 : 0x7e00;
        return (uint16_t)(sign | quiet | payload);
    }
    const table *tb = &tables[t];
    const double a = fabs((double)x);
    if (a >= tb->v[tb->n - 1])
        return (uint16_t)(sign | tb->code[tb->n - 1]);
    size_t lo = 0, hi = tb->n - 1; /* v[lo] <= a < v[hi] */
    while (hi - lo > 1) {
        const size_t mid = (lo + hi) / 2;
        if (tb->v[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double dl = a - tb->v[lo], dh = tb->v[hi] - a;
    const size_t pick = dl < dh ? lo : dh < dl ? hi : (tb->code[lo] & 1) ? hi : lo;
    return (uint16_t)(sign | tb->code[pick]);
}

/* Element j of an array of type t as float32 bits (the oracle's view). */
static uint32_t as_f32_bits(peak_dtype t, const void *p, size_t j)
{
    if (t == PEAK_F32)
        return peak_test_to_bits(((const float *)p)[j]);
    const uint16_t h = ((const uint16_t *)p)[j];
    const double v = peak_test_half_value(t, h);
    return isnan(v) ? half_nan_widened(t, h) : peak_test_to_bits((float)v);
}

/* What converting element j of x (type xt) to yt must give, as the bits of
   y's element (16 or 32). */
static uint32_t expected(peak_dtype yt, peak_dtype xt, const void *x, size_t j)
{
    if (xt == yt)
        return xt == PEAK_F32 ? peak_test_to_bits(((const float *)x)[j]) : ((const uint16_t *)x)[j];
    const uint32_t wide = as_f32_bits(xt, x, j); /* exact */
    return yt == PEAK_F32 ? wide : narrow_oracle(yt, peak_test_from_bits(wide));
}

static uint32_t element(peak_dtype t, const void *p, size_t j)
{
    return t == PEAK_F32 ? peak_test_to_bits(((const float *)p)[j]) : ((const uint16_t *)p)[j];
}

/* ---- buffers --------------------------------------------------------------- */

/* n elements of type t at `off` elements past a 64-byte boundary, with
   `canary` spare elements after them filled with 0xA5 bytes. */
typedef struct buf {
    unsigned char *base;
    void *p;
    size_t bytes, tail;
} buf;

static buf buf_make(peak_dtype t, size_t n, size_t off, size_t canary)
{
    const size_t es = peak_dtype_size(t);
    buf b;
    b.bytes = n * es;
    b.tail = canary * es;
    b.base = aligned_alloc(64, ((off * es + b.bytes + b.tail) / 64 + 1) * 64);
    ck_assert_ptr_nonnull(b.base);
    b.p = b.base + off * es;
    memset(b.p, 0xA5, b.bytes + b.tail);
    return b;
}

static int tail_intact(const buf *b)
{
    const unsigned char *t = (const unsigned char *)b->p + b->bytes;
    for (size_t i = 0; i < b->tail; i++)
        if (t[i] != 0xA5)
            return 0;
    return 1;
}

/* x's n elements of type xt from a float32 source (rounded by the oracle). */
static void fill_from_f32(peak_dtype xt, void *x, const float *src, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        if (xt == PEAK_F32)
            ((float *)x)[j] = src[j];
        else
            ((uint16_t *)x)[j] = narrow_oracle(xt, src[j]);
    }
}

/* Converts x to y on the tier under test (and on the scalar tier) and
   checks every element and the canaries. */
static void check_convert(peak_dtype yt, peak_dtype xt, const void *x, size_t n, size_t off,
                          const peak_threadpool *pool, const char *what)
{
    buf y = buf_make(yt, n, off, 17);
    ck_assert_int_eq(peak_convert(y.p, yt, x, xt, n, pool), PEAK_OK);
    for (size_t j = 0; j < n; j++) {
        const uint32_t want = expected(yt, xt, x, j), got = element(yt, y.p, j);
        CHECK(got == want, "%s %s: %s -> %s, n %zu, element %zu (x 0x%x): got 0x%x, want 0x%x",
              peak_isa_name(peak_test_isa), what, type_name(xt), type_name(yt),
              n, j, (unsigned)element(xt, x, j), (unsigned)got, (unsigned)want);
    }
    CHECK(tail_intact(&y), "%s %s: wrote past y (n %zu)", peak_isa_name(peak_test_isa), what, n);
    /* The scalar tier's bits, through its table row directly. */
    buf s = buf_make(yt, n, 0, 0);
    peak_kernels_for(PEAK_ISA_SCALAR)->convert(s.p, yt, x, xt, n, false); /* plain stores */
    CHECK(memcmp(s.p, y.p, y.bytes) == 0, "%s %s: not the scalar tier's bits (n %zu)",
          peak_isa_name(peak_test_isa), what, n);
    free(s.base);
    free(y.base);
}

/* ---- inputs ---------------------------------------------------------------- */

/* The float32 edges peak.h names, and their neighbours. */
static const uint32_t f32_edges[] = {
    0x00000000, 0x80000000, 0x7f800000, 0xff800000,          /* zeros, infinities */
    0x3f808000, 0x3f818000, 0x3f80ffff, 0x3f807fff,          /* bf16 ties: even both ways */
    0xbf808000, 0x3f7f8000, 0x3fff8000,                      /* a carry into the exponent */
    0x7f7fffff, 0x7f7f8000, 0x7f7f7fff, 0xff7fffff,          /* bf16 overflow edges */
    0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0xc77ff000, /* f16 65504, 65520 */
    0x47800000, 0x7f000000,                                  /* 2^16, 2^127 */
    0x38800000, 0x387fffff, 0x387fc000, 0x387fe000,          /* f16's least normal, below */
    0x33800000, 0x33000000, 0x33000001, 0x33400000, 0x33c00000, /* f16 subnormals, ties */
    0x32ffffff, 0xb3000001, 0x34200000, 0x34300000,
    0x00800000, 0x007fffff, 0x00010000, 0x00008000, 0x00000001, 0x80000001, /* f32/bf16 subnormals */
    0x0000ffff, 0x00018000, 0x00028000,
    0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001,          /* NaNs: quiet, signalling */
    0x7fbfffff, 0xffffffff, 0x7fc00001, 0x7f802000, 0x7f801fff, 0x7fa55555,
};

static float *f32_inputs(size_t *n)
{
    const size_t edges = sizeof f32_edges / sizeof f32_edges[0];
    const uint32_t step = peak_test_quick() ? 1000003u : 65521u;
    const size_t sweep = (size_t)(UINT32_MAX / step) + 1;
    float *x = malloc((edges + sweep) * sizeof(float));
    ck_assert_ptr_nonnull(x);
    for (size_t k = 0; k < edges; k++)
        x[k] = peak_test_from_bits(f32_edges[k]);
    for (size_t k = 0; k < sweep; k++)
        x[edges + k] = peak_test_from_bits((uint32_t)(k * step));
    *n = edges + sweep;
    return x;
}

static uint16_t *all_halves(void)
{
    uint16_t *h = malloc(65536 * sizeof(uint16_t));
    ck_assert_ptr_nonnull(h);
    for (uint32_t k = 0; k < 65536; k++)
        h[k] = (uint16_t)k;
    return h;
}

/* ---- tests ------------------------------------------------------------------- */

START_TEST(every_half_widens_exactly)
{
    uint16_t *h = all_halves();
    check_convert(PEAK_F32, PEAK_BF16, h, 65536, 0, NULL, "every bfloat16");
    check_convert(PEAK_F32, PEAK_F16, h, 65536, 0, NULL, "every float16");
    check_convert(PEAK_F16, PEAK_BF16, h, 65536, 0, NULL, "every bfloat16");
    check_convert(PEAK_BF16, PEAK_F16, h, 65536, 0, NULL, "every float16");
    free(h);
}
END_TEST

START_TEST(float32_narrows_to_nearest_even)
{
    size_t n;
    float *x = f32_inputs(&n);
    check_convert(PEAK_BF16, PEAK_F32, x, n, 0, NULL, "float32 sweep");
    check_convert(PEAK_F16, PEAK_F32, x, n, 0, NULL, "float32 sweep");
    free(x);
}
END_TEST

/* The named edges one by one, against values written out from peak.h's
   rules (not from the oracle). */
START_TEST(named_edges)
{
    static const struct {
        uint32_t x;
        peak_dtype t;
        uint16_t want;
    } cases[] = {
        {0x3f808000, PEAK_BF16, 0x3f80}, /* a tie: to the even 0x3f80 */
        {0x3f818000, PEAK_BF16, 0x3f82}, /* a tie: to the even 0x3f82 */
        {0x3f80ffff, PEAK_BF16, 0x3f81},
        {0x3fff8000, PEAK_BF16, 0x4000}, /* the carry into the exponent */
        {0x7f7fffff, PEAK_BF16, 0x7f80}, /* FLT_MAX overflows bfloat16 */
        {0x7f7f7fff, PEAK_BF16, 0x7f7f}, /* the largest finite bfloat16 */
        {0x00010000, PEAK_BF16, 0x0001}, /* a bfloat16 subnormal, kept */
        {0x007fffff, PEAK_BF16, 0x0080}, /* rounds up to the least normal */
        {0x7f800001, PEAK_BF16, 0x7fc0}, /* a signalling NaN, quieted */
        {0xffa55555, PEAK_BF16, 0xffe5}, /* sign and top payload bits */
        {0x477fe000, PEAK_F16, 0x7bff},  /* 65504 */
        {0x477fefff, PEAK_F16, 0x7bff},  /* just below 65520 */
        {0x477ff000, PEAK_F16, 0x7c00},  /* 65520: the tie goes to inf */
        {0xc77ff000, PEAK_F16, 0xfc00},
        {0x33800000, PEAK_F16, 0x0001},  /* 2^-24, the least subnormal */
        {0x33000000, PEAK_F16, 0x0000},  /* 2^-25: a tie, to the even 0 */
        {0x33000001, PEAK_F16, 0x0001},
        {0x33c00000, PEAK_F16, 0x0002},  /* 3 x 2^-25: a tie, to the even 2 */
        {0x34200000, PEAK_F16, 0x0002},  /* 5 x 2^-25: a tie, to the even 2 */
        {0x34400000, PEAK_F16, 0x0003},  /* 3 x 2^-24, exact */
        {0x387fe000, PEAK_F16, 0x0400},  /* below 2^-14, up to the least normal */
        {0x00000001, PEAK_F16, 0x0000},  /* a float32 subnormal: 0 */
        {0x80000001, PEAK_F16, 0x8000},
        {0x7f800001, PEAK_F16, 0x7e00},  /* a signalling NaN, quieted */
        {0xffffffff, PEAK_F16, 0xffff},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const float x = peak_test_from_bits(cases[k].x);
        uint16_t y = 0x5a5a;
        ck_assert_int_eq(peak_convert(&y, cases[k].t, &x, PEAK_F32, 1, NULL), PEAK_OK);
        CHECK(y == cases[k].want, "%s: 0x%08x -> %s 0x%04x, want 0x%04x",
              peak_isa_name(peak_test_isa), (unsigned)cases[k].x, type_name(cases[k].t),
              (unsigned)y, (unsigned)cases[k].want);
        /* The same element inside a whole vector, too. */
        float v[40];
        uint16_t w[40];
        for (size_t j = 0; j < 40; j++)
            v[j] = x;
        ck_assert_int_eq(peak_convert(w, cases[k].t, v, PEAK_F32, 40, NULL), PEAK_OK);
        for (size_t j = 0; j < 40; j++)
            CHECK(w[j] == cases[k].want, "%s: 0x%08x in a vector, element %zu: 0x%04x",
                  peak_isa_name(peak_test_isa), (unsigned)cases[k].x, j, (unsigned)w[j]);
    }
    /* Widening: a signalling float16 / bfloat16 NaN comes back quiet. */
    static const uint16_t snan_f16 = 0xfd55, snan_bf16 = 0x7f81;
    float f;
    ck_assert_int_eq(peak_convert(&f, PEAK_F32, &snan_f16, PEAK_F16, 1, NULL), PEAK_OK);
    ck_assert_uint_eq(peak_test_to_bits(f), 0xffeaa000u);
    ck_assert_int_eq(peak_convert(&f, PEAK_F32, &snan_bf16, PEAK_BF16, 1, NULL), PEAK_OK);
    ck_assert_uint_eq(peak_test_to_bits(f), 0x7fc10000u);
}
END_TEST

/* Every pair of types at lengths 1..70 and misalignments 0..15 elements:
   every tail of every vector width. */
START_TEST(lengths_and_misalignment)
{
    uint64_t rng = 12345;
    float src[70 + 15];
    for (size_t j = 0; j < 70 + 15; j++)
        src[j] = peak_test_uniform(&rng, -70000.0f, 70000.0f) *
                 (j % 7 == 0 ? 1e-9f : 1.0f); /* some subnormal in float16 */
    for (int xi = 0; xi < 3; xi++)
        for (int yi = 0; yi < 3; yi++) {
            const peak_dtype xt = types[xi], yt = types[yi];
            for (size_t off = 0; off < 16; off += peak_test_quick() ? 5 : 1)
                for (size_t n = 1; n <= 70; n++) {
                    buf x = buf_make(xt, n, off, 0);
                    fill_from_f32(xt, x.p, src + off, n);
                    check_convert(yt, xt, x.p, n, (off * 7) % 16, NULL, "short");
                    free(x.base);
                }
        }
}
END_TEST

/* Many items on a pool of 3 against no pool; in place for equal types. */
START_TEST(pool_and_in_place)
{
    const size_t n = 3 * 16384 + 77;
    peak_threadpool *pool = NULL;
    const peak_status made = peak_threadpool_create(3, &pool);
    ck_assert(made == PEAK_OK || made == PEAK_ERR_UNSUPPORTED);
    uint64_t rng = 99;
    float *src = malloc(n * sizeof(float));
    ck_assert_ptr_nonnull(src);
    peak_test_fill_uniform(src, n, &rng, -3e5f, 3e5f);
    for (int xi = 0; xi < 3; xi++)
        for (int yi = 0; yi < 3; yi++) {
            buf x = buf_make(types[xi], n, 3, 0);
            fill_from_f32(types[xi], x.p, src, n);
            check_convert(types[yi], types[xi], x.p, n, 5, pool, "pool of 3");
            free(x.base);
        }
    /* y == x with equal types: nothing changes. */
    buf x = buf_make(PEAK_BF16, n, 0, 0);
    fill_from_f32(PEAK_BF16, x.p, src, n);
    unsigned char *copy = malloc(x.bytes);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, x.p, x.bytes);
    ck_assert_int_eq(peak_convert(x.p, PEAK_BF16, x.p, PEAK_BF16, n, pool), PEAK_OK);
    ck_assert(memcmp(copy, x.p, x.bytes) == 0);
    free(copy);
    free(x.base);
    free(src);
    peak_threadpool_destroy(pool);
}
END_TEST

/* Widening into more than PEAK_CONVERT_STREAM_BYTES of float32 streams its
   stores (the same bits): every 16-bit pattern over and over, y misaligned
   by 3 floats (the head before the first aligned vector), with and without
   a pool. */
START_TEST(large_widening_streams)
{
    const size_t n = ((size_t)16 << 20) / sizeof(float) + 21;
    buf x = buf_make(PEAK_F16, n, 0, 0);
    for (size_t j = 0; j < n; j++)
        ((uint16_t *)x.p)[j] = (uint16_t)(j * 40503u);
    peak_threadpool *pool = NULL;
    const peak_status made = peak_threadpool_create(2, &pool);
    ck_assert(made == PEAK_OK || made == PEAK_ERR_UNSUPPORTED);
    check_convert(PEAK_F32, PEAK_F16, x.p, n, 3, NULL, "16 MiB out");
    check_convert(PEAK_F32, PEAK_BF16, x.p, n, 3, pool, "16 MiB out, pool of 2");
    peak_threadpool_destroy(pool);
    free(x.base);
}
END_TEST

/* DAZ and FTZ on (a caller built with -ffast-math): subnormals are still
   kept, as peak.h says for x86. */
START_TEST(subnormals_kept_under_daz_ftz)
{
    unsigned saved;
    if (!peak_test_ftz_on(&saved))
        return; /* no way to set them here (valgrind, AArch64) */
    uint16_t *h = all_halves();
    buf y = buf_make(PEAK_F32, 65536, 0, 0);
    const peak_status s1 = peak_convert(y.p, PEAK_F32, h, PEAK_F16, 65536, NULL);
    buf z = buf_make(PEAK_F16, 65536, 0, 0);
    const peak_status s2 = peak_convert(z.p, PEAK_F16, y.p, PEAK_F32, 65536, NULL);
    buf b = buf_make(PEAK_BF16, 65536, 0, 0);
    const peak_status s3 = peak_convert(b.p, PEAK_BF16, y.p, PEAK_F32, 65536, NULL);
    peak_test_ftz_restore(saved);
    ck_assert(s1 == PEAK_OK && s2 == PEAK_OK && s3 == PEAK_OK);
    for (uint32_t k = 0; k < 65536; k++) {
        const uint32_t want = expected(PEAK_F32, PEAK_F16, h, k);
        CHECK(element(PEAK_F32, y.p, k) == want, "%s DAZ/FTZ: float16 0x%04x -> 0x%08x, want 0x%08x",
              peak_isa_name(peak_test_isa), (unsigned)k, (unsigned)element(PEAK_F32, y.p, k),
              (unsigned)want);
        const uint16_t back = isnan(peak_test_half_value(PEAK_F16, (uint16_t)k)) ? (uint16_t)(k | 0x200) : (uint16_t)k;
        CHECK(element(PEAK_F16, z.p, k) == back, "%s DAZ/FTZ: float16 0x%04x round trip: 0x%04x",
              peak_isa_name(peak_test_isa), (unsigned)k, (unsigned)element(PEAK_F16, z.p, k));
        CHECK(element(PEAK_BF16, b.p, k) == expected(PEAK_BF16, PEAK_F32, y.p, k),
              "%s DAZ/FTZ: bfloat16 of float16 0x%04x", peak_isa_name(peak_test_isa), (unsigned)k);
    }
    free(h);
    free(y.base);
    free(z.base);
    free(b.base);
}
END_TEST

/* Bad calls return their status and write nothing. */
START_TEST(rejected_calls_write_nothing)
{
    float x[64] = {1.0f};
    uint16_t y[64];
    memset(y, 0x77, sizeof y);
    ck_assert_int_eq(peak_convert(y, (peak_dtype)3, x, PEAK_F32, 4, NULL), PEAK_ERR_UNSUPPORTED);
    ck_assert_int_eq(peak_convert(y, PEAK_BF16, x, (peak_dtype)-1, 4, NULL), PEAK_ERR_UNSUPPORTED);
    ck_assert_int_eq(peak_convert(NULL, PEAK_BF16, x, PEAK_F32, 4, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_convert(y, PEAK_BF16, NULL, PEAK_F32, 4, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_convert(y, PEAK_BF16, x, PEAK_F32, 0, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_convert(y, PEAK_BF16, x, PEAK_F32, SIZE_MAX / 2, NULL),
                     PEAK_ERR_OUT_OF_RANGE);
    /* In place across types, and any other overlap. */
    ck_assert_int_eq(peak_convert(x, PEAK_BF16, x, PEAK_F32, 8, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_convert(x + 1, PEAK_F32, x, PEAK_F32, 8, NULL), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_convert(y + 4, PEAK_F16, (const char *)y + 1, PEAK_BF16, 8, NULL),
                     PEAK_ERR_INVALID_ARG);
    for (size_t j = 0; j < 64; j++)
        ck_assert_uint_eq(y[j], 0x7777);
    ck_assert_float_eq(x[0], 1.0f);
    /* y == x with equal types returns at once, whatever n (a hostile n
       once walked every item of nothing). */
    ck_assert_int_eq(peak_convert(x, PEAK_F32, x, PEAK_F32, (size_t)PTRDIFF_MAX / 4, NULL),
                     PEAK_OK);
    ck_assert_float_eq(x[0], 1.0f);
    ck_assert_uint_eq(peak_dtype_size(PEAK_F32), 4);
    ck_assert_uint_eq(peak_dtype_size(PEAK_BF16), 2);
    ck_assert_uint_eq(peak_dtype_size(PEAK_F16), 2);
    ck_assert_uint_eq(peak_dtype_size((peak_dtype)7), 0);
}
END_TEST

static Suite *make_suite(peak_isa isa)
{
    (void)isa;
    make_table(PEAK_BF16);
    make_table(PEAK_F16);
    Suite *s = suite_create("convert");
    TCase *tc = tcase_create("convert");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, named_edges);
    tcase_add_test(tc, every_half_widens_exactly);
    tcase_add_test(tc, float32_narrows_to_nearest_even);
    tcase_add_test(tc, lengths_and_misalignment);
    tcase_add_test(tc, pool_and_in_place);
    tcase_add_test(tc, large_widening_streams);
    tcase_add_test(tc, subnormals_kept_under_daz_ftz);
    tcase_add_test(tc, rejected_calls_write_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
