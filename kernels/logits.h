/*
 * logits.h - the logit options of peak_logits (peak.h) as one score row
 * sees them: soft-capping, the ALiBi term and the sink.  ISA-free and shared
 * by every softmax and attention tier, so that every tier resolves a row's
 * slope, distance and sink the same way; the arithmetic on the scores is
 * each tier's (tanh.h / tanh-body.h for the cap).
 */
#ifndef PEAK_LOGITS_H
#define PEAK_LOGITS_H

#include "internal.h"
#include "mask.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Head counts peak_alibi_slopes() takes: 2^20 keeps -8 (h + 1) / n and the
   powers of two it needs exact in double. */
#define PEAK_ALIBI_MAX_HEADS ((size_t)1 << 20)

/* The ALiBi slope of head h of `heads` (peak.h: peak_alibi_slopes), the
   exact value rounded once to float (common/logits.c). */
PEAK_INTERNAL float peak_alibi_slope(size_t h, size_t heads);

/* What the logit options do to one row (b, h, i). */
typedef struct peak_logit_row {
    float softcap;  /* 0: off */
    float slope;    /* ALiBi slope; 0 with ALiBi off */
    peak_alibi alibi;
    int64_t qpos;   /* the row's query position (peak_mask), for ALiBi */
    bool has_sink;
    float sink;
} peak_logit_row;

/* Whether the options change the scores themselves (cap, ALiBi), which
   then have to be formed before the softmax's passes. */
static inline bool peak_logits_shape(const peak_logits *l)
{
    return !peak_f32_is_zero(l->softcap) || l->alibi != PEAK_ALIBI_NONE;
}

static inline bool peak_logits_any(const peak_logits *l)
{
    return peak_logits_shape(l) || l->sinks;
}

/* qpos of row i as peak_mask defines it: i + q_offset, plus Lk - Lq for
   bottom-right alignment (exact: every term is at most 2^40, api.c). */
static inline int64_t peak_mask_qpos(const peak_mask *m, size_t i, size_t q_len, size_t k_len)
{
    return peak_mask_row_base(m, i, q_len, k_len) + (int64_t)m->q_offset;
}

/* Row (h, i) of a call with `heads` query heads. */
static inline peak_logit_row peak_logit_row_of(const peak_logits *l, const peak_mask *m,
                                               size_t heads, size_t h, size_t i, size_t q_len,
                                               size_t k_len)
{
    peak_logit_row r;
    r.softcap = peak_f32_is_zero(l->softcap) ? 0.0f : l->softcap;
    r.alibi = l->alibi;
    r.slope = 0.0f;
    r.qpos = 0;
    if (l->alibi != PEAK_ALIBI_NONE) {
        r.slope = l->alibi_slopes ? l->alibi_slopes[(ptrdiff_t)h * l->alibi_slopes_stride]
                                  : peak_alibi_slope(h, heads);
        r.qpos = peak_mask_qpos(m, i, q_len, k_len);
    }
    r.has_sink = l->sinks != NULL;
    r.sink = l->sinks ? l->sinks[(ptrdiff_t)h * l->sinks_stride] : 0.0f;
    return r;
}

/* The ALiBi distance of key j, as a float: exact below 2^24, else rounded
   once (int64 to float). */
static inline float peak_alibi_distance(const peak_logit_row *r, size_t j)
{
    const int64_t d = r->qpos - (int64_t)j;
    return (float)(r->alibi == PEAK_ALIBI_SYMMETRIC && d < 0 ? -d : d);
}

/* s with the ALiBi term, in float as peak.h defines it: s - slope *
   distance, each operation rounded once. */
static inline float peak_alibi_add(const peak_logit_row *r, float s, size_t j)
{
    return r->alibi == PEAK_ALIBI_NONE ? s : s - r->slope * peak_alibi_distance(r, j);
}

#endif /* PEAK_LOGITS_H */
