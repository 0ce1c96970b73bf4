/*
 * fuzz-mask.h - a peak_mask decoded from fuzz input, for the softmax and
 * attention harnesses: causal (both alignments), q_offset and window near 0,
 * near the lengths and at the 2^40 limit, key padding, a boolean mask and
 * an additive bias (with broadcast strides, -inf entries and any specials).
 * Visibility comes from tests/test-util.c's oracle (peak.h's rule written
 * out per element, independent of kernels/mask.h).
 */
#ifndef PEAK_FUZZ_MASK_H
#define PEAK_FUZZ_MASK_H

#include "fuzz.h"
#include "test-util.h"

typedef struct fz_mask {
    peak_mask m;
    uint8_t *keep;
    float *bias, *bias0;
    int32_t *key_len;
    size_t n_keep, n_bias;
} fz_mask;

#define FZ_LIMIT ((size_t)1 << 40) /* peak_mask's documented limit */

static inline void fz_mask_strides(size_t H, size_t Lq, size_t Lk, unsigned bcast, ptrdiff_t st[3])
{
    st[2] = (bcast & 4) ? 0 : (ptrdiff_t)Lk;
    st[1] = (bcast & 2) ? 0 : (ptrdiff_t)(Lq * Lk);
    st[0] = (bcast & 1) ? 0 : (ptrdiff_t)(H * Lq * Lk);
}

static inline size_t fz_mask_span(size_t B, size_t H, size_t Lq, size_t Lk, const ptrdiff_t st[3])
{
    return (B - 1) * (size_t)st[0] + (H - 1) * (size_t)st[1] + (Lq - 1) * (size_t)st[2] + Lk;
}

static inline void fz_mask_read(fz_mask *f, fz_in *in, size_t B, size_t H, size_t Lq, size_t Lk)
{
    memset(f, 0, sizeof *f);
    f->m = (peak_mask)PEAK_MASK_DEFAULT;
    const uint32_t flags = fz_u8(in);
    f->m.causal = flags & 1;
    f->m.align = (peak_align)((flags >> 1) & 1);
    switch (fz_u8(in) % 4) {
    case 0: break;
    case 1: f->m.q_offset = fz_upto(in, Lk + 4); break;
    case 2: f->m.q_offset = fz_upto(in, 3 * Lk + 70); break;
    default: f->m.q_offset = FZ_LIMIT - fz_upto(in, 3); break;
    }
    switch (fz_u8(in) % 4) {
    case 0: case 1: break;
    case 2: f->m.window = 1 + fz_upto(in, Lk + 3); break;
    default: f->m.window = FZ_LIMIT - fz_upto(in, 3); break;
    }
    if (flags & 8) {
        f->key_len = malloc(B * sizeof *f->key_len);
        if (!f->key_len)
            abort();
        for (size_t b = 0; b < B; b++) {
            uint32_t k = fz_u8(in);
            f->key_len[b] = (int32_t)(k < 64 ? Lk : k < 96 ? 0 : (k * 7919u) % (Lk + 1));
        }
        f->m.key_len = f->key_len;
    }
    if (flags & 16) {
        const unsigned bcast = fz_u8(in) & 7;
        const uint32_t density = fz_u8(in);
        uint64_t rng = fz_u64(in);
        fz_mask_strides(H, Lq, Lk, bcast, f->m.keep_stride);
        f->n_keep = fz_mask_span(B, H, Lq, Lk, f->m.keep_stride);
        f->keep = malloc(f->n_keep);
        if (!f->keep)
            abort();
        for (size_t e = 0; e < f->n_keep; e++)
            f->keep[e] = (uint8_t)(fz_next(&rng) % 256 < density ? 1 + fz_next(&rng) % 255 : 0);
        f->m.keep = f->keep;
    }
    if (flags & 32) {
        const unsigned bcast = fz_u8(in) & 7;
        const uint32_t masked = fz_u8(in);
        fz_gen g = fz_gen_read(in, FZ_ALL);
        fz_mask_strides(H, Lq, Lk, bcast, f->m.bias_stride);
        f->n_bias = fz_mask_span(B, H, Lq, Lk, f->m.bias_stride);
        f->bias = fz_alloc(f->n_bias, fz_u8(in) % 32);
        for (size_t e = 0; e < f->n_bias; e++)
            f->bias[e] = fz_next(&g.rng) % 256 < masked / 2 ? -INFINITY : fz_value(&g);
        f->bias0 = fz_dup(f->bias, f->n_bias);
        f->m.bias = f->bias;
    }
}

static inline float fz_mask_bias(const peak_mask *m, size_t b, size_t h, size_t i, size_t j)
{
    return m->bias[b * (size_t)m->bias_stride[0] + h * (size_t)m->bias_stride[1] +
                   i * (size_t)m->bias_stride[2] + j];
}

/* A copy of m's key lengths (Lk for all when it has none) with entry
   `which % B` replaced by `bad`, for the out-of-range case; the caller
   frees it. */
static inline int32_t *fz_bad_key_len(const peak_mask *m, size_t B, size_t Lk, uint32_t which,
                                      int32_t bad)
{
    int32_t *len = malloc(B * sizeof *len);
    if (!len)
        abort();
    for (size_t b = 0; b < B; b++)
        len[b] = m->key_len ? m->key_len[b] : (int32_t)Lk;
    len[which % B] = bad;
    return len;
}

static inline void fz_mask_free(fz_mask *f)
{
    free(f->keep);
    fz_free(f->bias);
    free(f->bias0);
    free(f->key_len);
}

#endif
