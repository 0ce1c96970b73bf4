/*
 * fuzz-softmax.c - peak_softmax on every tier against a double-precision
 * oracle of peak.h's definition (scores formed in float: x * scale, then
 * + bias) and against the scalar tier:
 *   - visible probabilities within 4 ULP of the oracle where it is at least
 *     FLT_MIN, relative however small (the bound of peak.h, the README and
 *     tests/test-softmax.c), within FLT_MIN absolutely below (they may be
 *     flushed); within 8 ULP (2 FLT_MIN) of the scalar tier;
 *   - the SIMD tiers give the same bits (peak.h);
 *   - masked keys exactly +0; a row with no visible key, or only -inf
 *     scores, all +0; a visible +inf/NaN score makes the visible entries
 *     NaN; a normal row sums to 1 within 1e-6;
 *   - masked scores are never read: they hold NaN canaries, which would
 *     turn a row that reads them into NaN;
 *   - gaps of y keep their canaries, x and the mask are not written.
 */
#include "fuzz-mask.h"

#define SM_ULP 4
#define SM_SUM 1e-6

static size_t row_off(const ptrdiff_t st[3], size_t b, size_t h, size_t i)
{
    return b * (size_t)st[0] + h * (size_t)st[1] + i * (size_t)st[2];
}

static void strides(int bl, size_t H, size_t Lq, size_t row, ptrdiff_t st[3])
{
    if (bl) { /* rows ordered [b, i, h] */
        st[0] = (ptrdiff_t)(Lq * H * row), st[1] = (ptrdiff_t)row, st[2] = (ptrdiff_t)(H * row);
    } else {
        st[0] = (ptrdiff_t)(H * Lq * row), st[1] = (ptrdiff_t)(Lq * row), st[2] = (ptrdiff_t)row;
    }
}

static size_t span(size_t B, size_t H, size_t Lq, size_t Lk, const ptrdiff_t st[3])
{
    return (B - 1) * (size_t)st[0] + (H - 1) * (size_t)st[1] + (Lq - 1) * (size_t)st[2] + Lk;
}

/* The oracle's row: kind, and probabilities in p (0 at masked keys). */
static int oracle_row(const peak_softmax_desc *d, const float *x, size_t b, size_t h, size_t i,
                      int ftz, double *p, int *vis)
{
    const float scale = d->scale == 0.0f ? 1.0f : d->scale;
    const float *xr = x + row_off(d->x_stride, b, h, i);
    unsigned csr = fz_ftz_set(ftz);
    for (size_t j = 0; j < d->k_len; j++) {
        vis[j] = peak_test_mask_visible(&d->mask, d->q_len, d->k_len, b, h, i, j);
        p[j] = -INFINITY;
        if (!vis[j])
            continue;
        float s = xr[j] * scale;
        if (d->mask.bias)
            s += fz_mask_bias(&d->mask, b, h, i, j);
        p[j] = s;
    }
    fz_ftz_restore(csr);
    return peak_test_softmax_row(p, vis, d->k_len);
}

/* got within ulp units of ref where ref >= FLT_MIN, within `below`
   FLT_MINs absolutely under it. */
static int close_to(float got, double ref, int ulp, double below)
{
    if (ref < (double)FLT_MIN)
        return fabs((double)got - ref) <= below * (double)FLT_MIN;
    return fz_ulp(got, (float)ref) <= ulp;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_setup();
    fz_in in = {data, size};
    const size_t B = 1 + fz_upto(&in, 2), H = 1 + fz_upto(&in, 2);
    const size_t Lq = fz_len(&in, 12), Lk = fz_len(&in, 300);
    const size_t x_pad = fz_upto(&in, 5), y_pad = fz_upto(&in, 5);
    const int bl = fz_bit(&in), in_place = fz_bit(&in), ftz = fz_ftz_bit(&in);
    const size_t mis_x = fz_u8(&in) % 32, mis_y = fz_u8(&in) % 32;
    static const float scales[] = {0.0f, 1.0f, 0.125f, -1.0f, 1e30f, 1e-40f, -0.0f, 3.0f, 1e-3f};
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = B, d.heads = H, d.q_len = Lq, d.k_len = Lk;
    d.scale = scales[fz_u8(&in) % 9];
    strides(bl, H, Lq, Lk + x_pad, d.x_stride);
    if (in_place)
        memcpy(d.y_stride, d.x_stride, sizeof d.y_stride);
    else
        strides(bl, H, Lq, Lk + y_pad, d.y_stride);
    fz_mask fm;
    fz_mask_read(&fm, &in, B, H, Lq, Lk);
    d.mask = fm.m;
    fz_gen gx = fz_gen_read(&in, FZ_ALL);

    /* x: visible scores from the generator, masked ones and gaps NaN
       canaries (never to be read). */
    const size_t nx = span(B, H, Lq, Lk, d.x_stride);
    float *x = fz_alloc(nx, mis_x);
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Lq; i++)
                for (size_t j = 0; j < Lk; j++)
                    if (peak_test_mask_visible(&d.mask, Lq, Lk, b, h, i, j))
                        x[row_off(d.x_stride, b, h, i) + j] = fz_value(&gx);
    float *x0 = fz_dup(x, nx);
    const size_t ny = in_place ? nx : span(B, H, Lq, Lk, d.y_stride);
    float *y = in_place ? x : fz_alloc(ny, mis_y);
    float *y0 = fz_dup(y, ny);

    /* One documented invalid argument, or none. */
    peak_softmax_desc c = d;
    peak_status want = PEAK_OK;
    int null_y = 0, null_x = 0, null_d = 0, alias_xy = 0;
    int32_t *bad_len = NULL;
    const uint32_t bad = fz_u8(&in);
    if (bad >= 176) {
        want = PEAK_ERR_INVALID_ARG;
        const uint32_t which = fz_u8(&in), k = which % 3;
        switch (bad % 18) {
        case 0: null_y = 1; break;
        case 1: null_x = 1; break;
        case 2: null_d = 1; break;
        case 3: c.batch = 0; break;
        case 4: c.heads = 0; break;
        case 5: c.q_len = 0; break;
        case 6: c.k_len = 0; break;
        case 7: c.scale = (which & 1) ? NAN : ((which & 2) ? INFINITY : -INFINITY); break;
        case 8: c.x_stride[k] = -1 - (ptrdiff_t)(which >> 2); break;
        case 9: c.y_stride[k] = -1 - (ptrdiff_t)(which >> 2); break;
        case 10: /* two rows of y coincide (or overlap) */
            if (Lq > 1)
                c.y_stride[2] = (ptrdiff_t)(which % Lk);
            else if (H > 1)
                c.y_stride[1] = (ptrdiff_t)(which % Lk);
            else if (B > 1)
                c.y_stride[0] = (ptrdiff_t)(which % Lk);
            else
                null_y = 1;
            break;
        case 11: /* in place (y == x) with other strides */
            alias_xy = 1;
            c.y_stride[k] += 1 + (ptrdiff_t)(which >> 4);
            break;
        case 12: c.mask.align = (peak_align)(2 + which); break;
        case 13:
            if (which & 1)
                c.mask.keep_stride[k] = -1;
            else
                c.mask.bias_stride[k] = -1;
            break;
        case 14: { /* a key length outside [0, Lk] */
            want = PEAK_ERR_OUT_OF_RANGE;
            bad_len = fz_bad_key_len(&d.mask, B, Lk, which,
                                     (which & 64) ? -1 - (int32_t)(which >> 7) : (int32_t)Lk + 1);
            c.mask.key_len = bad_len;
            break;
        }
        case 15:
            want = PEAK_ERR_OUT_OF_RANGE;
            c.mask.q_offset = FZ_LIMIT + 1 + which;
            break;
        case 16:
            want = PEAK_ERR_OUT_OF_RANGE;
            c.mask.window = FZ_LIMIT + 1 + which;
            break;
        default: /* an extent whose byte offset overflows ptrdiff_t */
            want = PEAK_ERR_OUT_OF_RANGE;
            if (B > 1)
                c.x_stride[0] = PTRDIFF_MAX / 2;
            else if (H > 1)
                c.y_stride[1] = PTRDIFF_MAX / 2;
            else if (Lq > 1)
                c.x_stride[2] = PTRDIFF_MAX / 4 + 1;
            else
                c.mask.q_offset = SIZE_MAX;
            break;
        }
    }
    fz_describe("softmax B %zu H %zu Lq %zu Lk %zu pads %zu %zu %s in_place %d scale %a "
                "causal %d align %d q_offset %zu window %zu key_len %d keep %d bias %d "
                "x [%g, %g) specials %u kinds 0x%x ftz %d; bad %u -> %s",
                B, H, Lq, Lk, x_pad, y_pad, bl ? "[b,i,h]" : "[b,h,i]", in_place,
                (double)d.scale, d.mask.causal, d.mask.align, d.mask.q_offset, d.mask.window,
                d.mask.key_len != NULL, d.mask.keep != NULL, d.mask.bias != NULL, (double)gx.lo,
                (double)gx.hi, gx.rate, gx.kinds, ftz, bad >= 176 ? bad % 18 : 99,
                fz_status(want));

    float *ref = fz_dup(y, ny);  /* the scalar tier's y */
    float *simd = fz_dup(y, ny); /* the first SIMD tier's y */
    unsigned char *in_row = calloc(ny, 1);
    if (!in_row)
        abort();
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Lq; i++)
                memset(in_row + row_off(d.y_stride, b, h, i), 1, Lk);
    double *p = malloc(Lk * sizeof *p);
    int *vis = malloc(Lk * sizeof *vis);
    if (!p || !vis)
        abort();
    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        memcpy(x, x0, nx * sizeof *x);
        if (!in_place)
            memcpy(y, y0, ny * sizeof *y);
        unsigned csr = fz_ftz_set(ftz);
        peak_status s = peak_softmax(null_y ? NULL : alias_xy ? x : y, null_x ? NULL : x,
                                     null_d ? NULL : &c, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        if (fm.bias)
            fz_expect_unchanged(t, "bias", fm.bias, fm.bias0, fm.n_bias);
        if (!in_place || s != PEAK_OK)
            fz_expect_unchanged(t, "x", x, x0, nx);
        if (s != PEAK_OK) {
            if (!in_place)
                fz_expect_unchanged(t, "y", y, y0, ny);
            continue;
        }
        const char *tier = peak_isa_name(fz_tier[t]);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < Lq; i++) {
                    const int kind = oracle_row(&d, x0, b, h, i, ftz, p, vis);
                    const size_t o = row_off(d.y_stride, b, h, i);
                    double sum = 0.0;
                    for (size_t j = 0; j < Lk; j++) {
                        const float v = y[o + j];
                        int ok;
                        if (!vis[j] || kind == ROW_ZERO)
                            ok = v == 0.0f && !signbit(v);
                        else if (kind == ROW_NAN)
                            ok = isnan(v);
                        else
                            ok = close_to(v, p[j], SM_ULP, 1.0) &&
                                 (t == 0 || close_to(v, (double)ref[o + j], 2 * SM_ULP, 2.0));
                        if (ok && t > 1 && !fz_same(v, simd[o + j]))
                            fz_fail("tier %s [%zu,%zu,%zu,%zu]: %a, tier %s %a", tier, b, h, i, j,
                                    (double)v, peak_isa_name(fz_tier[1]), (double)simd[o + j]);
                        if (!ok)
                            fz_fail("tier %s [%zu,%zu,%zu,%zu]: %a, oracle %.9g (%s row, %s), "
                                    "scalar %a",
                                    tier, b, h, i, j, (double)v, p[j],
                                    kind == ROW_NAN ? "NaN" : kind == ROW_ZERO ? "zero" : "normal",
                                    vis[j] ? "visible" : "masked", (double)ref[o + j]);
                        sum += v;
                    }
                    if (kind == ROW_NORMAL && !(fabs(sum - 1.0) <= SM_SUM))
                        fz_fail("tier %s row [%zu,%zu,%zu] sums to 1 %+.3g", tier, b, h, i,
                                sum - 1.0);
                }
        /* Everything outside the rows still holds what it held. */
        for (size_t e = 0; e < ny; e++)
            if (!in_row[e] && fz_bits(y[e]) != fz_bits(y0[e]))
                fz_fail("tier %s: gap y[%zu] written", tier, e);
        if (t == 0)
            memcpy(ref, y, ny * sizeof *y);
        if (t == 1)
            memcpy(simd, y, ny * sizeof *y);
    }
    peak_isa_reset();
    free(bad_len);
    free(in_row);
    free(vis);
    free(p);
    free(simd);
    free(ref);
    free(y0);
    if (!in_place)
        fz_free(y);
    free(x0);
    fz_free(x);
    fz_mask_free(&fm);
    return 0;
}
