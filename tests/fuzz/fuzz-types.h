/*
 * fuzz-types.h - bfloat16 and float16 tensors for the harnesses whose calls
 * take them (softmax, embedding, layernorm, attention).
 *
 * A harness decodes its float32 case as before and reads the element types
 * after everything else (fz_types_read): an input that ends earlier, as
 * every seed written before the types existed does, reads 0, float32
 * everywhere, and decodes to the case it always did.  A 16-bit input is
 * made from the float32 one with peak_convert (fz_narrow), and the float32
 * one then holds the 16-bit values widened (exact), so the harness's
 * oracle and snapshots read the values the call reads.  16-bit gaps hold a
 * canary of their own: a signalling NaN of the type, which no conversion
 * writes (peak_convert quiets every NaN), so a 16-bit output element is
 * never the canary by accident, and an input canary read by mistake is a
 * NaN that poisons its row.
 *
 * A 16-bit output is a float32 result rounded once to nearest even
 * (peak.h), so a float32 bound [lo, hi] becomes [round(lo), round(hi)]
 * (rounding is monotonic): fz_within.  Two 16-bit results of float32
 * values within `slack` of each other: fz_near.
 */
#ifndef PEAK_FUZZ_TYPES_H
#define PEAK_FUZZ_TYPES_H

#include "fuzz.h"

/* Signalling NaNs (quiet bit clear): bfloat16's quiet bit is 0x0040,
   float16's 0x0200. */
#define FZ_CANARY_BF16 0x7fa5u
#define FZ_CANARY_F16 0x7d5au

static inline uint16_t fz_canary16(peak_dtype t)
{
    return (uint16_t)(t == PEAK_F16 ? FZ_CANARY_F16 : FZ_CANARY_BF16);
}

static inline const char *fz_type_name(peak_dtype t)
{
    return t == PEAK_F32 ? "f32" : t == PEAK_BF16 ? "bf16" : t == PEAK_F16 ? "f16" : "bad";
}

/* ---- decoding ------------------------------------------------------------------ */

/* Element types of n (<= 4) tensors.  Read last: 0 (an exhausted input)
   and any byte below 128 give float32 for all, so half the new inputs stay
   float32 too; 128..143 one 16-bit type for all (a model's "all bfloat16"
   or "all float16"); 144..255 each tensor's own, two bits of the next byte
   each (float32, bfloat16, float16, float32).  From 232 the harness also
   makes one invalid type case, from the byte returned in *bad; returns
   whether it should. */
static inline int fz_types_read(fz_in *in, peak_dtype *t, size_t n, uint32_t *bad)
{
    static const peak_dtype pick[4] = {PEAK_F32, PEAK_BF16, PEAK_F16, PEAK_F32};
    const uint32_t b = fz_u8(in);
    for (size_t k = 0; k < n; k++)
        t[k] = PEAK_F32;
    *bad = 0;
    if (b < 128)
        return 0;
    if (b < 144) {
        for (size_t k = 0; k < n; k++)
            t[k] = (b & 1) ? PEAK_F16 : PEAK_BF16;
        return 0;
    }
    const uint32_t m = fz_u8(in);
    for (size_t k = 0; k < n; k++)
        t[k] = pick[(m >> (2 * k)) & 3];
    if (b < 232)
        return 0;
    *bad = fz_u8(in);
    return 1;
}

/* A value outside peak_dtype (PEAK_ERR_UNSUPPORTED): just past the enum,
   far past it, and all bits set. */
static inline peak_dtype fz_bad_dtype(uint32_t w)
{
    static const unsigned bad[] = {3, 4, 16, 255, 0x10000, 0x7fffffff, 0xffffffffu};
    return (peak_dtype)bad[w % (sizeof bad / sizeof bad[0])];
}

/* A type other than t, for "in place with another type": for float32 a
   16-bit one; for a 16-bit one float32 (another size) or the other 16-bit
   type (the same size), as w says. */
static inline peak_dtype fz_other_type(peak_dtype t, uint32_t w)
{
    return t == PEAK_F32 ? ((w & 1) ? PEAK_F16 : PEAK_BF16)
                         : (w & 1) ? PEAK_F32 : t == PEAK_BF16 ? PEAK_F16 : PEAK_BF16;
}

/* ---- values ------------------------------------------------------------------- */

/* A 16-bit code widened to float32 (exact; a NaN keeps its payload's top
   bits). */
static inline float fz_widen(uint16_t h, peak_dtype t)
{
    if (t == PEAK_BF16)
        return fz_from_bits((uint32_t)h << 16);
    const uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 0x3ffu;
    if (e == 31)
        return fz_from_bits(s | 0x7f800000u | m << 13);
    if (e)
        return fz_from_bits(s | (e + 112) << 23 | m << 13);
    const float v = ldexpf((float)m, -24); /* subnormal or zero: exact */
    return s ? -v : v;
}

/* v rounded to type t by peak_convert (float32: v), widened again. */
static inline float fz_round16(float v, peak_dtype t)
{
    uint16_t h;
    if (t == PEAK_F32)
        return v;
    if (peak_convert(&h, t, &v, PEAK_F32, 1, NULL) != PEAK_OK)
        fz_fail("peak_convert of one float to %s failed", fz_type_name(t));
    return fz_widen(h, t);
}

/* Half the spacing of type t at |w| (float32: 0; inf and NaN: inf). */
static inline double fz_half_ulp(float w, peak_dtype t)
{
    if (t == PEAK_F32)
        return 0.0;
    if (!isfinite(w))
        return INFINITY;
    const int p = t == PEAK_BF16 ? 8 : 11, emin = t == PEAK_BF16 ? -126 : -14;
    int e = w != 0.0f ? ilogbf(w) : emin;
    if (e < emin)
        e = emin;
    return ldexp(1.0, e - p);
}

/* Element k of a buffer of type t, as a float (16-bit: widened). */
static inline float fz_get(const void *p, peak_dtype t, size_t k)
{
    if (t == PEAK_F32)
        return ((const float *)p)[k];
    return fz_widen(((const uint16_t *)p)[k], t);
}

/* Element k's bits (16 or 32 of them), for messages and canaries. */
static inline uint32_t fz_code(const void *p, peak_dtype t, size_t k)
{
    if (t == PEAK_F32)
        return fz_bits(((const float *)p)[k]);
    return ((const uint16_t *)p)[k];
}

static inline int fz_is_canary_at(const void *p, peak_dtype t, size_t k)
{
    return fz_code(p, t, k) == (t == PEAK_F32 ? FZ_CANARY : fz_canary16(t));
}

/* Same bits, or both NaN (fz_same; 16-bit NaN payloads may differ too). */
static inline int fz_same_at(const void *a, const void *b, peak_dtype t, size_t k)
{
    return fz_code(a, t, k) == fz_code(b, t, k) || (isnan(fz_get(a, t, k)) && isnan(fz_get(b, t, k)));
}

/* w, an element of type t, lies where a float32 result in [lo, hi]
   rounds to: [round(lo), round(hi)], the bounds taken outward to float. */
static inline int fz_within(float w, long double lo, long double hi, peak_dtype t)
{
    float flo = (float)lo, fhi = (float)hi;
    if ((long double)flo > lo)
        flo = nextafterf(flo, -INFINITY);
    if ((long double)fhi < hi)
        fhi = nextafterf(fhi, INFINITY);
    return fz_round16(flo, t) <= w && w <= fz_round16(fhi, t);
}

/* a and b, elements of type t, are roundings of float32 values within
   `slack` of each other: a lies where a value within slack of any float
   that rounds to b rounds to.  An infinite b is the rounding of anything
   from the type's overflow threshold on (float16: 65520; bfloat16:
   0x1.ffp+127), so a finite a near that threshold is one too. */
static inline int fz_near(float a, float b, double slack, peak_dtype t)
{
    if (isinf(b)) {
        const long double edge = t == PEAK_F16 ? 65520.0L : t == PEAK_BF16 ? 0x1.ffp+127L : FLT_MAX;
        return b > 0 ? fz_within(a, edge - slack, INFINITY, t)
                     : fz_within(a, -INFINITY, slack - edge, t);
    }
    const long double r = (long double)fz_half_ulp(b, t) + slack;
    return fz_within(a, (long double)b - r, (long double)b + r, t);
}

/* ---- buffers -------------------------------------------------------------------- */

/* fz_alloc for n 16-bit elements of type t (n may be 0: one), filled with
   the type's canary: the same two kinds, the head before a heap buffer
   (sel % 16 elements: misaligned by 2 bytes when odd) poisoned. */
static inline uint16_t *fz_alloc16(size_t n, size_t sel, peak_dtype t)
{
    uint16_t *p = fz_alloc_bytes((n ? n : 1) * sizeof(uint16_t), sizeof(uint16_t), sel);
    for (size_t k = 0; k < (n ? n : 1); k++)
        p[k] = fz_canary16(t);
    return p;
}

static inline void fz_free16(uint16_t *p)
{
    fz_free_bytes(p);
}

/* n elements of type t, exact size, of kind sel, filled with the type's
   canary (fz_alloc, fz_alloc16). */
static inline void *fz_alloc_t(size_t n, size_t sel, peak_dtype t)
{
    if (t == PEAK_F32)
        return fz_alloc(n, sel);
    return fz_alloc16(n, sel, t);
}

static inline void fz_free_t(void *p, peak_dtype t)
{
    if (t == PEAK_F32)
        fz_free(p);
    else
        fz_free16(p);
}

/* The 16-bit tensor of type t holding f's n values as peak_convert rounds
   them, in a fresh exact-size buffer of kind sel (fz_alloc16), with the
   type's canary where f holds the float32 one; f's other values become
   the 16-bit values widened.  NULL for float32 (f is the tensor). */
static inline uint16_t *fz_narrow(float *f, size_t n, peak_dtype t, size_t sel)
{
    if (t == PEAK_F32)
        return NULL;
    uint16_t *h = fz_alloc16(n, sel, t);
    if (n && peak_convert(h, t, f, PEAK_F32, n, NULL) != PEAK_OK)
        fz_fail("peak_convert of a %zu-element input to %s failed", n, fz_type_name(t));
    for (size_t k = 0; k < n; k++) {
        if (fz_is_canary(f[k]))
            h[k] = fz_canary16(t);
        else
            f[k] = fz_widen(h[k], t);
    }
    return h;
}

/* A copy of n elements of type t (a snapshot). */
static inline void *fz_dup_t(const void *p, size_t n, peak_dtype t)
{
    const size_t bytes = (n ? n : 1) * peak_dtype_size(t);
    void *q = malloc(bytes);
    if (!q)
        abort();
    memcpy(q, p, n * peak_dtype_size(t));
    return q;
}

/* n elements of type t at p equal the snapshot `was`, byte for byte. */
static inline void fz_expect_unchanged_t(int tier, const char *what, const void *p,
                                         const void *was, size_t n, peak_dtype t)
{
    if (t == PEAK_F32) {
        fz_expect_unchanged(tier, what, p, was, n);
        return;
    }
    if (memcmp(p, was, n * sizeof(uint16_t)) == 0)
        return;
    size_t k = 0;
    while (fz_code(p, t, k) == fz_code(was, t, k))
        k++;
    fz_fail("tier %s changed %s %s[%zu]: 0x%04x was 0x%04x", peak_isa_name(fz_tier[tier]),
            fz_type_name(t), what, k, (unsigned)fz_code(p, t, k), (unsigned)fz_code(was, t, k));
}

/* A float inside n 16-bit elements at h (4-byte aligned), or NULL when
   none fits: where fz_logits_bad's "slopes or sinks in the output" cases
   put their float when the output is 16-bit. */
static inline float *fz_float_in(uint16_t *h, size_t n)
{
    const uintptr_t a = ((uintptr_t)h + 3) & ~(uintptr_t)3;
    return a + sizeof(float) <= (uintptr_t)(h + n) ? (float *)a : NULL;
}

/* fz_logits_bad's slopes or sinks put at `was` (a float32 output's element
   0) moved into the 16-bit output h of n elements, holding 0.5 as there;
   where no float fits in h, a NaN cap makes the options invalid instead. */
static inline void fz_logits_move(peak_logits *c, const float *was, uint16_t *h, size_t n)
{
    if (!h || (c->alibi_slopes != was && c->sinks != was))
        return;
    float *in = fz_float_in(h, n);
    if (!in) {
        c->softcap = NAN;
        return;
    }
    memcpy(in, &(float){0.5f}, sizeof(float));
    if (c->alibi_slopes == was)
        c->alibi_slopes = in;
    if (c->sinks == was)
        c->sinks = in;
}

/* The scalar tier's 16-bit output got[0 .. n) (rows of cols) against its
   float32 call f32 rounded by peak_convert (want): every element equal. */
static inline void fz_expect_rounded16(const char *what, const uint16_t *got,
                                       const uint16_t *want, const float *f32, size_t n,
                                       size_t cols, peak_dtype t)
{
    for (size_t k = 0; k < n; k++)
        if (got[k] != want[k])
            fz_fail("scalar: %s %s (%zu, %zu) = 0x%04x, the float32 value %a converted 0x%04x",
                    t == PEAK_BF16 ? "bf16" : "f16", what, k / cols, k % cols,
                    (unsigned)got[k], (double)f32[k], (unsigned)want[k]);
}

#endif /* PEAK_FUZZ_TYPES_H */
