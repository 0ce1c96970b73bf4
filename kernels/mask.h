/*
 * mask.h - which keys a score row may see (peak_mask, see peak.h).
 *
 * Shared by every softmax and attention kernel so that all tiers agree on
 * the visible set bit for bit.  The structural conditions (causal, window,
 * key_len) shrink a row to one contiguous key range [lo, hi); the element
 * masks (keep, bias) are then tested per key inside that range.
 */
#ifndef PEAK_MASK_H
#define PEAK_MASK_H

#include "peak.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* No score matrix can have a side this long (its bytes would not fit in
   memory), and the bound keeps every signed sum below exact in int64. */
#define PEAK_MASK_MAX_LEN ((uint64_t)1 << 60)

/* Keys lo <= j < hi pass the structural conditions; lo == hi: none do. */
typedef struct peak_key_range {
    size_t lo, hi;
} peak_key_range;

/* a - b, saturated to +-2^62.  q_offset and window are arbitrary size_t
   values; once a difference is beyond any key index its exact value no
   longer matters, only its sign, and saturation keeps the later sums from
   overflowing. */
static inline int64_t peak_mask_sat_diff(uint64_t a, uint64_t b)
{
    const uint64_t big = (uint64_t)1 << 62;
    if (a >= b)
        return a - b >= big ? (int64_t)big : (int64_t)(a - b);
    return b - a >= big ? -(int64_t)big : -(int64_t)(b - a);
}

static inline size_t peak_mask_clamp(int64_t v, size_t k_len)
{
    if (v <= 0)
        return 0;
    return (uint64_t)v >= (uint64_t)k_len ? k_len : (size_t)v;
}

/* qpos - q_offset for row i: bottom-right alignment shifts the diagonal so
   that the last query sees the last key (flash-attn, KV-cache decoding). */
static inline int64_t peak_mask_row_base(const peak_mask *m, size_t i, size_t q_len,
                                         size_t k_len)
{
    int64_t base = (int64_t)i;
    if (m->align == PEAK_ALIGN_BOTTOM_RIGHT)
        base += (int64_t)k_len - (int64_t)q_len;
    return base;
}

/* The structural key range of row (b, i): causal j <= qpos, window
   j > qpos - window, key padding j < key_len[b]. */
static inline peak_key_range peak_mask_keys(const peak_mask *m, size_t b, size_t i,
                                            size_t q_len, size_t k_len)
{
    assert(q_len <= PEAK_MASK_MAX_LEN && k_len <= PEAK_MASK_MAX_LEN && i < q_len);
    const int64_t base = peak_mask_row_base(m, i, q_len, k_len);
    peak_key_range r = {0, k_len};
    if (m->causal)
        r.hi = peak_mask_clamp(base + peak_mask_sat_diff(m->q_offset, 0) + 1, k_len);
    if (m->window > 0)
        r.lo = peak_mask_clamp(base + peak_mask_sat_diff(m->q_offset, m->window) + 1, k_len);
    if (m->key_len) {
        assert(m->key_len[b] >= 0 && (size_t)m->key_len[b] <= k_len);
        if ((size_t)m->key_len[b] < r.hi)
            r.hi = (size_t)m->key_len[b];
    }
    if (r.lo > r.hi)
        r.lo = r.hi;
    return r;
}

/* Row (b, h, i) of the boolean mask, or NULL when there is none. */
static inline const uint8_t *peak_mask_keep_row(const peak_mask *m, size_t b, size_t h, size_t i)
{
    if (!m->keep)
        return NULL;
    return m->keep + (ptrdiff_t)b * m->keep_stride[0] + (ptrdiff_t)h * m->keep_stride[1] +
           (ptrdiff_t)i * m->keep_stride[2];
}

/* Row (b, h, i) of the additive mask, or NULL when there is none. */
static inline const float *peak_mask_bias_row(const peak_mask *m, size_t b, size_t h, size_t i)
{
    if (!m->bias)
        return NULL;
    return m->bias + (ptrdiff_t)b * m->bias_stride[0] + (ptrdiff_t)h * m->bias_stride[1] +
           (ptrdiff_t)i * m->bias_stride[2];
}

/* Key j of a row passes the element masks.  An additive -inf is a mask,
   not a score: treating it as one keeps "-inf everywhere" rows at zeros
   instead of the NaN that exp(-inf - -inf) would give.  bias is not read
   where keep already masks. */
static inline bool peak_mask_visible(const uint8_t *keep_row, const float *bias_row, size_t j)
{
    if (keep_row && !keep_row[j])
        return false;
    return !bias_row || bias_row[j] != -INFINITY;
}

#endif /* PEAK_MASK_H */
