/*
 * attention-logits.h - the logit options (peak_logits) of one attention
 * row, ISA-free: shared by the SIMD tiers' tile and row paths (attention.h)
 * and split-KV's merge (schedule/schedule-merge.c), so that a split row's
 * chunks and their merge agree on its ALiBi frame.
 *
 *   attention_alibi_ref      the row's ALiBi frame: the key its distances
 *                            are taken from and the shift of its scores;
 *   attention_logits_finish  a finished row's divisor and lse with the
 *                            shift and the sink;
 *   attention_row_frame      the frame from the call's descriptor alone
 *                            (the merge's view of a row).
 *
 * Split-KV: a chunk of a row's keys (a part with key_lo > 0 or key_hi <
 * Lk) forms its scores in the frame of the row's whole key range and
 * writes its lse without the shift and without the sink; the merge adds
 * both, in double.  A chunk's lse is stored as a float, and with the shift
 * in it a query 10^6 positions past its keys would have an lse near
 * -slope 10^6, rounded to 2^-5: the chunks' weights off by 3%.
 */
#ifndef PEAK_ATTENTION_LOGITS_H
#define PEAK_ATTENTION_LOGITS_H

#include "logits.h"
#include "mask.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* The key a row's ALiBi distances are taken from: the key of its range
   [lo, hi) with the largest bias -- the last one for the causal form
   (-slope (qpos - key) grows with the key, also past qpos when the mask
   lets the row see keys there), the one nearest qpos for the symmetric
   form.  Its scores are formed as s - slope * distance(aref, key), and the
   rest, -slope * distance(qpos, aref) (the same for every key: qpos - key
   = (qpos - aref) + (aref - key), and for |.| aref lies between qpos and
   every key), is the row's shift, added to its max at the finish in
   double.  In float, s - slope * distance(qpos, key) for a query 10^6
   positions past its keys rounds to 2^-5 and the scores lose their
   differences (O off by 1e-2 * max|V|); from aref the keys that count
   have small distances.  (From the key nearest qpos, a decode step at
   position 0 over 8192 later keys was off by 2.8e-5 * max|V|: its
   heaviest keys were 8000 away.) */
static inline void attention_alibi_ref(const peak_logit_row *lr, size_t lo, size_t hi,
                                       int64_t *aref, double *shift)
{
    int64_t a = lr->qpos;
    if (lo < hi && lr->alibi == PEAK_ALIBI_CAUSAL)
        a = (int64_t)hi - 1;
    else if (lo < hi)
        a = a < (int64_t)lo ? (int64_t)lo : a > (int64_t)hi - 1 ? (int64_t)hi - 1 : a;
    const int64_t dist = lr->qpos - a;
    *aref = a;
    *shift = -(double)lr->slope *
             (double)(lr->alibi == PEAK_ALIBI_SYMMETRIC && dist < 0 ? -dist : dist);
}

/* The finish of a row with its shift (ALiBi) or sink: returns its lse and
   sets *div, what O^T is divided by.  m, l: the row's max (without the
   shift) and sum; l = 0 (it saw nothing: O = 0) or NaN keep their
   meaning.  With a sink, m' = max(m + shift, sink) and l' = l e^(m + shift
   - m') + e^(sink - m'): O = O^T e^(m + shift - m') / l' = O^T / (l +
   e^(sink - m - shift)) (+inf when the sink's term is beyond float: O is
   then 0 to float), lse = m' + log l', all in double, rounded once. */
static inline float attention_logits_finish(float m, float l, double shift, bool has_sink,
                                            float sink, float *div)
{
    *div = l;
    if (isnan(l))
        return NAN;
    if (l == 0.0f)
        return has_sink ? sink : -INFINITY;
    const double mt = (double)m + shift;
    if (!has_sink)
        return (float)(mt + log((double)l));
    const double top = mt > (double)sink ? mt : (double)sink;
    *div = (float)((double)l + exp((double)sink - mt));
    return (float)(top + log((double)l * exp(mt - top) + exp((double)sink - top)));
}

/* Row (b, h, i) of call d: its ALiBi shift (0 without ALiBi) over its
   whole key range, as the kernels' chunks of it take it. */
static inline double attention_row_frame(const peak_attention_desc *d, size_t b, size_t h,
                                         size_t i)
{
    if (d->logits.alibi == PEAK_ALIBI_NONE)
        return 0.0;
    const peak_logit_row lr =
        peak_logit_row_of(&d->logits, &d->mask, d->heads, h, i, d->q_len, d->kv_len);
    const peak_key_range kr = peak_mask_keys(&d->mask, b, i, d->q_len, d->kv_len);
    int64_t aref;
    double shift;
    attention_alibi_ref(&lr, kr.lo, kr.hi, &aref, &shift);
    return shift;
}

#endif /* PEAK_ATTENTION_LOGITS_H */
