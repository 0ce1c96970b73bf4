/*
 * fuzz-softmax.c - peak_softmax on every tier against a double-precision
 * oracle of peak.h's definition and against the scalar tier.  The oracle's
 * scores are peak_test_softmax_score's (tests/test-util.h), formed in float
 * as peak.h orders them: x * scale, the cap, the ALiBi term, + bias; the
 * sink joins the row's maximum and sum (peak_test_softmax_row).  Checked:
 *   - visible probabilities within 4 ULP of the oracle where it is at least
 *     FLT_MIN, relative however small (the bound of peak.h, the README and
 *     tests/test-softmax.c), within FLT_MIN absolutely below (they may be
 *     flushed); within 8 ULP (2 FLT_MIN) of the scalar tier;
 *   - with a cap, the oracle's scores are within a slack of the kernels'
 *     (its tanh is the C library's): a row's probabilities are held to
 *     4 + 1 + 2^24 (e^(2 delta) - 1) ULP of it, delta the row's largest
 *     slack, as tests/test-softmax.c does (unbounded where that is
 *     infinite: huge capped scores); the scalar tier's bound stays 8 ULP,
 *     since every tier forms the same capped scores (peak.h);
 *   - the SIMD tiers give the same bits (peak.h);
 *   - masked keys exactly +0; a row with no visible key, or only -inf
 *     scores, all +0, sink or not; a visible +inf/NaN score (after the
 *     cap, which makes +-inf +-cap) makes the visible entries NaN; a normal
 *     row sums to 1 within 1e-6, or with a sink to the oracle's sum within
 *     1e-6 of it (plus the slack's share and FLT_MIN per key);
 *   - masked scores are never read: they hold NaN canaries, which would
 *     turn a row that reads them into NaN;
 *   - gaps of y keep their canaries; x, the mask, the slopes and the sinks
 *     are not written;
 *   - invalid options (fuzz-logits.h) are rejected, nothing written.
 * x and y may each be bfloat16 or float16 (fuzz-types.h; in place, one
 * type): the oracle reads the widened x, and a 16-bit y is held to where
 * the float32 bounds above round to (peak.h: each probability rounded
 * once), the SIMD tiers to the same bytes (NaN payloads aside), and its
 * row sums get each element's half ULP of the type besides.  A type outside
 * peak_dtype is refused (PEAK_ERR_UNSUPPORTED), and in place with two
 * types (PEAK_ERR_INVALID_ARG), nothing written; 16-bit gaps and masked
 * scores hold the type's canary.
 * The logit options are decoded after the rest, the types last
 * (fuzz-logits.h, fuzz-types.h): inputs that end before them have none and
 * are float32.
 */
#include "fuzz-logits.h"
#include "fuzz-mask.h"
#include "fuzz-types.h"

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

/* The oracle's row: kind, probabilities in p (0 at masked keys), and in
   *slack the largest slack of its visible scores.  The scores are formed
   in float under the caller's FTZ/DAZ mode, as the kernels form them. */
static int oracle_row(const peak_softmax_desc *d, const float *x, size_t b, size_t h, size_t i,
                      int ftz, double *p, int *vis, double *slack)
{
    const float *xr = x + row_off(d->x_stride, b, h, i);
    *slack = 0.0;
    unsigned csr = fz_ftz_set(ftz);
    for (size_t j = 0; j < d->k_len; j++) {
        vis[j] = peak_test_mask_visible(&d->mask, d->q_len, d->k_len, b, h, i, j);
        p[j] = -INFINITY;
        if (!vis[j])
            continue;
        double sl;
        p[j] = peak_test_softmax_score(d, xr[j], b, h, i, j, &sl);
        *slack = fmax(*slack, sl);
    }
    fz_ftz_restore(csr);
    return peak_test_softmax_row(p, vis, d->k_len, peak_test_sink(&d->logits, h));
}

/* got within ulp units of ref where ref >= FLT_MIN; under it (a
   probability that may be flushed) within `below` FLT_MINs absolutely,
   plus ref * rel, the relative slack of a capped row (0 without a cap). */
static int close_to(float got, double ref, double ulp, double below, double rel)
{
    if (ref < (double)FLT_MIN)
        return fabs((double)got - ref) <= below * (double)FLT_MIN + (ref > 0.0 ? ref * rel : 0.0);
    return (double)fz_ulp(got, (float)ref) <= ulp;
}

/* The floats close_to accepts for ref, as an interval (ref >= 0). */
static void close_bounds(double ref, double ulp, double below, double rel, long double *lo,
                        long double *hi)
{
    if (ref < (double)FLT_MIN) {
        const double a = below * (double)FLT_MIN + (ref > 0.0 ? ref * rel : 0.0);
        *lo = (long double)ref - a, *hi = (long double)ref + a;
        return;
    }
    const double b = (double)fz_bits((float)ref), k = floor(ulp);
    *lo = fz_from_bits((uint32_t)fmax(b - k, 0.0));
    *hi = fz_from_bits((uint32_t)fmin(b + k, (double)0x7f800000u));
}

/* A visible probability v of a normal row (type yt, widened): within the
   oracle's bound (when bounded) and, past the scalar tier (t > 0), within
   8 ULP (2 FLT_MIN) of its r.  A 16-bit v: where those float32 ranges
   round to; against the scalar tier, whose float32 value lies within half
   an ULP of the type of r. */
static int prob_ok(float v, double p, float r, int t, double ulp, double rel, int bounded,
                   peak_dtype yt)
{
    if (yt == PEAK_F32)
        return (!bounded || close_to(v, p, ulp, 1.0, rel)) &&
               (t == 0 || close_to(v, (double)r, 2 * SM_ULP, 2.0, 0.0));
    long double lo, hi;
    close_bounds(p, ulp, 1.0, rel, &lo, &hi);
    if (bounded && !fz_within(v, lo, hi, yt))
        return 0;
    const double slack = 2 * SM_ULP * 0x1p-23 * (fabs((double)r) + fz_half_ulp(r, yt)) +
                         2.0 * (double)FLT_MIN;
    return t == 0 || fz_near(v, r, slack, yt);
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
    const size_t ny = in_place ? nx : span(B, H, Lq, Lk, d.y_stride);
    float *y = in_place ? x : fz_alloc(ny, mis_y);

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
    /* The logit options, and one invalid option when nothing else is
       invalid; its slopes or sinks may sit in y (in place: x), at y[0]. */
    fz_logits fl;
    fz_logits_read(&fl, &in, H);
    d.logits = fl.l;
    int bad_opt;
    const peak_status want_opt = fz_logits_bad(&fl, &c.logits, &in, bad < 176, H, y, &bad_opt);
    if (want_opt != PEAK_OK)
        want = want_opt;
    /* The element types, last; in place, y's is x's.  One invalid type
       case when nothing else is invalid. */
    peak_dtype ty[2];
    uint32_t tw;
    const int bad_type = fz_types_read(&in, ty, 2, &tw) && want == PEAK_OK;
    if (in_place)
        ty[1] = ty[0];
    d.x_type = c.x_type = ty[0];
    d.y_type = c.y_type = ty[1];
    if (bad_type && in_place && (tw & 2)) {
        want = PEAK_ERR_INVALID_ARG;
        c.y_type = fz_other_type(ty[0], tw >> 2);
    } else if (bad_type) {
        want = PEAK_ERR_UNSUPPORTED;
        if (tw & 1)
            c.y_type = fz_bad_dtype(tw >> 2);
        else
            c.x_type = fz_bad_dtype(tw >> 2);
    }
    /* X and Y are the call's buffers: x and y, or their 16-bit copies (x
       and y then hold the values widened: the oracle's). */
    uint16_t *x16 = fz_narrow(x, nx, ty[0], mis_x);
    uint16_t *y16 = in_place ? x16 : fz_narrow(y, ny, ty[1], mis_y);
    fz_logits_move(&c.logits, y, y16, ny);
    void *X = x16 ? (void *)x16 : x, *Y = y16 ? (void *)y16 : y;
    const peak_dtype xt = ty[0], yt = ty[1];
    void *xs0 = fz_dup_t(X, nx, xt), *ys0 = fz_dup_t(Y, ny, yt);
    const int capped = d.logits.softcap != 0.0f;
    float *x0 = fz_dup(x, nx);
    char opts[256];
    peak_test_describe_logits(opts, sizeof opts, B, H, &d.mask, &d.logits);
    fz_describe("softmax Lq %zu Lk %zu pads %zu %zu %s in_place %d scale %a %s "
                "x [%g, %g) specials %u kinds 0x%x ftz %d types %s %s (call %u %u); bad %u, "
                "bad option %d -> %s",
                Lq, Lk, x_pad, y_pad, bl ? "[b,i,h]" : "[b,h,i]", in_place, (double)d.scale,
                opts, (double)gx.lo, (double)gx.hi, gx.rate, gx.kinds, ftz, fz_type_name(xt),
                fz_type_name(yt), (unsigned)c.x_type, (unsigned)c.y_type,
                bad >= 176 ? bad % 18 : 99, bad_opt, fz_status(want));

    void *ref = fz_dup_t(Y, ny, yt);  /* the scalar tier's y */
    void *simd = fz_dup_t(Y, ny, yt); /* the first SIMD tier's y */
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
        memcpy(X, xs0, nx * peak_dtype_size(xt));
        if (!in_place)
            memcpy(Y, ys0, ny * peak_dtype_size(yt));
        unsigned csr = fz_ftz_set(ftz);
        peak_status s = peak_softmax(null_y ? NULL : alias_xy ? X : Y, null_x ? NULL : X,
                                     null_d ? NULL : &c, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        if (fm.bias)
            fz_expect_unchanged(t, "bias", fm.bias, fm.bias0, fm.n_bias);
        fz_logits_unchanged(t, &fl);
        if (!in_place || s != PEAK_OK)
            fz_expect_unchanged_t(t, "x", X, xs0, nx, xt);
        if (s != PEAK_OK) {
            if (!in_place)
                fz_expect_unchanged_t(t, "y", Y, ys0, ny, yt);
            continue;
        }
        const char *tier = peak_isa_name(fz_tier[t]);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < Lq; i++) {
                    double slack;
                    const int kind = oracle_row(&d, x0, b, h, i, ftz, p, vis, &slack);
                    const size_t o = row_off(d.y_stride, b, h, i);
                    /* tests/test-softmax.c's bound for a capped call, per row */
                    const double rel = capped ? peak_test_slack_rel(slack) : 0.0;
                    const double ulp = capped ? SM_ULP + 1 + ldexp(rel, 24) : SM_ULP;
                    const int bounded = isfinite(rel);
                    double sum = 0.0, mass = 0.0, rounding = 0.0;
                    for (size_t j = 0; j < Lk; j++) {
                        const float v = fz_get(Y, yt, o + j);
                        int ok;
                        if (!vis[j] || kind == ROW_ZERO)
                            ok = v == 0.0f && !signbit(v);
                        else if (kind == ROW_NAN)
                            ok = isnan(v);
                        else
                            ok = prob_ok(v, p[j], fz_get(ref, yt, o + j), t, ulp, rel, bounded,
                                         yt);
                        if (ok && t > 1 && !fz_same_at(Y, simd, yt, o + j))
                            fz_fail("tier %s [%zu,%zu,%zu,%zu]: %a (0x%x), tier %s %a (0x%x)",
                                    tier, b, h, i, j, (double)v, fz_code(Y, yt, o + j),
                                    peak_isa_name(fz_tier[1]), (double)fz_get(simd, yt, o + j),
                                    fz_code(simd, yt, o + j));
                        if (!ok)
                            fz_fail("tier %s [%zu,%zu,%zu,%zu]: %a (%s 0x%x), oracle %.9g (%s "
                                    "row, %s), scalar %a",
                                    tier, b, h, i, j, (double)v, fz_type_name(yt),
                                    fz_code(Y, yt, o + j), p[j],
                                    kind == ROW_NAN ? "NaN" : kind == ROW_ZERO ? "zero" : "normal",
                                    vis[j] ? "visible" : "masked",
                                    (double)fz_get(ref, yt, o + j));
                        sum += v;
                        mass += vis[j] ? p[j] : 0.0;
                        rounding += vis[j] ? fz_half_ulp(v, yt) : 0.0;
                    }
                    /* With a sink the row sums to the oracle's mass (< 1),
                       as in tests/test-softmax.c (sm_check_row); a 16-bit
                       y adds each element's rounding. */
                    const int sink = d.logits.sinks != NULL;
                    const double want_sum = sink ? mass : 1.0;
                    const double sum_tol =
                        (sink ? (SM_SUM + rel) * mass + (double)Lk * FLT_MIN : SM_SUM) + rounding;
                    if (kind == ROW_NORMAL && (!sink || bounded) &&
                        !(fabs(sum - want_sum) <= sum_tol))
                        fz_fail("tier %s row [%zu,%zu,%zu] sums to %.9g %+.3g", tier, b, h, i,
                                want_sum, sum - want_sum);
                }
        /* Everything outside the rows still holds what it held. */
        for (size_t e = 0; e < ny; e++)
            if (!in_row[e] && fz_code(Y, yt, e) != fz_code(ys0, yt, e))
                fz_fail("tier %s: gap y[%zu] written", tier, e);
        if (t == 0)
            memcpy(ref, Y, ny * peak_dtype_size(yt));
        if (t == 1)
            memcpy(simd, Y, ny * peak_dtype_size(yt));
    }
    peak_isa_reset();
    free(bad_len);
    free(in_row);
    free(vis);
    free(p);
    free(simd);
    free(ref);
    free(ys0);
    free(xs0);
    if (!in_place) {
        fz_free16(y16);
        fz_free(y);
    }
    free(x0);
    fz_free16(x16);
    fz_free(x);
    fz_mask_free(&fm);
    fz_logits_free(&fl);
    return 0;
}
