/*
 * fuzz-logits.h - the logit options (peak_logits) decoded from fuzz input,
 * for the softmax and attention harnesses: the cap (0, -0, 30, 50, 1e-3,
 * 1e30), ALiBi of either form with peak.h's slopes or the caller's (stride
 * 0, 1 or 2; +0, -0, small, ordinary, steep and huge slopes), sinks (stride
 * 0 or 1; +-0, ordinary, +-1e4, +-1e30, +-FLT_MAX), and optionally one
 * invalid option.  The harnesses read these bytes last, after everything
 * else: an input that ends before them (every seed committed before the
 * options existed) has none, and decodes to the case it always did.
 */
#ifndef PEAK_FUZZ_LOGITS_H
#define PEAK_FUZZ_LOGITS_H

#include "fuzz.h"

typedef struct fz_logits {
    peak_logits l;           /* the options: always valid */
    float *slopes, *sinks;   /* the caller's arrays (exact size), or NULL */
    float *slopes0, *sinks0; /* what they hold: no call may write them */
    size_t n_slopes, n_sinks;
    float *bad;              /* an invalid case's own array, or NULL */
} fz_logits;

/* A caller's slope from one input byte: >= 0, and finite. */
static inline float fz_slope_value(uint32_t v)
{
    const float u = (float)(v >> 3); /* 0 .. 31 */
    switch (v & 7) {
    case 0: return 0.0f;
    case 1: return -0.0f;                   /* >= 0 too: no ALiBi */
    case 2: return ldexpf(1.0f, -1 - (int)((v >> 3) % 9)); /* peak.h's kind */
    case 3: return u / 32.0f;
    case 4: return u * 1e-6f;               /* near 0 */
    case 5: return 1.0f + u;                /* steep */
    case 6: return (v >> 3) & 1 ? FLT_MIN * u : fz_from_bits(1 + (v >> 4)); /* tiny, subnormal */
    default: return (v >> 3) & 1 ? 1e30f : FLT_MAX; /* the term overflows at long distances */
    }
}

/* A sink from one input byte: finite. */
static inline float fz_sink_value(uint32_t v)
{
    const float sign = (v >> 3) & 1 ? -1.0f : 1.0f, u = (float)(v >> 4); /* 0 .. 15 */
    switch (v & 7) {
    case 0: return sign * 0.0f;
    case 1: return sign * u / 4.0f;          /* among ordinary scores */
    case 2: return sign * (u * 8.0f + 0.5f); /* above or below them */
    case 3: return sign * 1e4f;
    case 4: return sign * 1e30f;
    case 5: return sign * FLT_MAX;
    case 6: return sign * 88.7f * u / 15.0f; /* up to exp's overflow */
    default: return sign * (float)(u * 1e-3);
    }
}

/* Per-head values at stride st (n = (H - 1) st + 1 floats, exact size;
   the floats between strided values keep the canary, a NaN, so a wrong
   stride is seen), one input byte each; `sel` picks the buffer's kind
   (fz_alloc). */
static inline float *fz_per_head(fz_in *in, size_t H, ptrdiff_t st, size_t sel, size_t *n,
                                 float (*value)(uint32_t))
{
    *n = st ? (H - 1) * (size_t)st + 1 : 1;
    float *p = fz_alloc(*n, sel);
    for (size_t h = 0; h < (st ? H : 1); h++)
        p[h * (size_t)st] = value(fz_u8(in));
    return p;
}

/* Reads the options of a call with H query heads. */
static inline void fz_logits_read(fz_logits *f, fz_in *in, size_t H)
{
    static const float caps[] = {0.0f, 30.0f, 50.0f, 1e-3f, 1e30f, -0.0f /* off */};
    memset(f, 0, sizeof *f);
    f->l = (peak_logits)PEAK_LOGITS_DEFAULT;
    f->l.softcap = caps[fz_u8(in) % 6];
    f->l.alibi = (peak_alibi)(fz_u8(in) % 3);
    if (f->l.alibi != PEAK_ALIBI_NONE) {
        const uint32_t mode = fz_u8(in); /* 0: peak.h's slopes; else stride mode - 1 */
        if (mode % 4) {
            const ptrdiff_t st = (ptrdiff_t)(mode % 4 - 1);
            f->slopes = fz_per_head(in, H, st, mode >> 2, &f->n_slopes, fz_slope_value);
            f->slopes0 = fz_dup(f->slopes, f->n_slopes);
            f->l.alibi_slopes = f->slopes;
            f->l.alibi_slopes_stride = st;
        }
    }
    const uint32_t mode = fz_u8(in); /* 0: no sinks; else stride mode - 1 */
    if (mode % 3) {
        const ptrdiff_t st = (ptrdiff_t)(mode % 3 - 1);
        f->sinks = fz_per_head(in, H, st, mode >> 2, &f->n_sinks, fz_sink_value);
        f->sinks0 = fz_dup(f->sinks, f->n_sinks);
        f->l.sinks = f->sinks;
        f->l.sinks_stride = st;
    }
}

static inline int fz_logits_any(const peak_logits *l)
{
    return l->softcap != 0.0f || l->alibi != PEAK_ALIBI_NONE || l->sinks;
}

/* One invalid option, or none: *c becomes f's options with one of them
   made invalid, when the input asks for it (`allowed`: the call has no
   other invalid argument, so the status is the option's).  `out` is an
   element of the call's output, for the cases whose slopes or sinks meet
   it; they set it to a valid value first (so that only the overlap is
   wrong), which the harness must take into its snapshots.  Returns the
   status peak.h gives (PEAK_OK: none), and its number in *which. */
static inline peak_status fz_logits_bad(fz_logits *f, peak_logits *c, fz_in *in, int allowed,
                                        size_t H, float *out, int *which)
{
    *c = f->l;
    *which = -1;
    const uint32_t bad = fz_u8(in);
    if (!allowed || bad < 224)
        return PEAK_OK;
    const uint32_t w = fz_u8(in);
    const ptrdiff_t st = (ptrdiff_t)(w >> 7); /* for the arrays made here */
    peak_status want = PEAK_ERR_INVALID_ARG;
    *which = (int)(bad % 11);
    switch (*which) {
    case 0: c->softcap = (w & 1) ? -NAN : NAN; break;
    case 1: c->softcap = (w & 1) ? -FLT_MIN : (w & 2) ? -30.0f : -1e30f; break;
    case 2: c->softcap = (w & 1) ? INFINITY : -INFINITY; break;
    case 3: c->alibi = (peak_alibi)((w & 1) ? -1 - (int)(w >> 1) : 3 + (int)(w >> 1)); break;
    case 4: /* one slope negative, NaN or infinite */
    case 5: { /* one sink NaN or infinite */
        const size_t n = st ? H : 1;
        f->bad = fz_alloc(n, w % 32);
        for (size_t h = 0; h < n; h++)
            f->bad[h] = *which == 4 ? 0.25f : -1.0f;
        /* not a negative subnormal: under DAZ that is -0, a valid slope */
        static const float bad_slope[] = {-0.25f, -FLT_MIN, NAN, INFINITY, -INFINITY,
                                          -FLT_MAX, -1.0f, -NAN};
        static const float bad_sink[] = {NAN, INFINITY, -INFINITY, -NAN};
        const size_t k = (w >> 1) % n;
        if (*which == 4) {
            f->bad[k] = bad_slope[(w >> 3) % 8];
            if (c->alibi == PEAK_ALIBI_NONE)
                c->alibi = PEAK_ALIBI_CAUSAL;
            c->alibi_slopes = f->bad;
            c->alibi_slopes_stride = st;
        } else {
            f->bad[k] = bad_sink[(w >> 3) % 4];
            c->sinks = f->bad;
            c->sinks_stride = st;
        }
        break;
    }
    case 6: /* a negative stride */
    case 7: {
        static const float one = 0.5f; /* valid as a slope and a sink */
        const ptrdiff_t neg = -1 - (ptrdiff_t)(w % 5);
        if (*which == 6) {
            if (c->alibi == PEAK_ALIBI_NONE)
                c->alibi = PEAK_ALIBI_SYMMETRIC;
            c->alibi_slopes = c->alibi_slopes ? c->alibi_slopes : &one;
            c->alibi_slopes_stride = neg;
        } else {
            c->sinks = c->sinks ? c->sinks : &one;
            c->sinks_stride = neg;
        }
        break;
    }
    case 8: /* slopes in the output (a valid value there) */
    case 9: /* sinks in the output */
        *out = 0.5f;
        if (*which == 8) {
            if (c->alibi == PEAK_ALIBI_NONE)
                c->alibi = PEAK_ALIBI_CAUSAL;
            c->alibi_slopes = out;
            c->alibi_slopes_stride = 0;
        } else {
            c->sinks = out;
            c->sinks_stride = 0;
        }
        break;
    default: { /* an extent past ptrdiff_t (OUT_OF_RANGE), or a NaN cap */
        static const float one = 0.5f;
        if (H < 2) {
            c->softcap = NAN;
            break;
        }
        want = PEAK_ERR_OUT_OF_RANGE;
        if (w & 1) {
            if (c->alibi == PEAK_ALIBI_NONE)
                c->alibi = PEAK_ALIBI_CAUSAL;
            c->alibi_slopes = &one;
            c->alibi_slopes_stride = PTRDIFF_MAX / 2;
        } else {
            c->sinks = &one;
            c->sinks_stride = PTRDIFF_MAX / 2;
        }
        break;
    }
    }
    return want;
}

/* Neither the slopes nor the sinks were written. */
static inline void fz_logits_unchanged(int t, const fz_logits *f)
{
    if (f->slopes)
        fz_expect_unchanged(t, "slopes", f->slopes, f->slopes0, f->n_slopes);
    if (f->sinks)
        fz_expect_unchanged(t, "sinks", f->sinks, f->sinks0, f->n_sinks);
}

static inline void fz_logits_free(fz_logits *f)
{
    fz_free(f->slopes);
    fz_free(f->sinks);
    fz_free(f->bad);
    free(f->slopes0);
    free(f->sinks0);
}

#endif
