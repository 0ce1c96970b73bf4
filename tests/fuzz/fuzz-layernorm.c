/*
 * fuzz-layernorm.c - peak_add_layernorm on every tier against a long double
 * oracle (two passes, as tests/test-layernorm.c) and the scalar tier:
 *   - y within 2e-6 * max(1, |y|, |gamma|, |beta|) of the exact LayerNorm of
 *     s = x + r (peak.h's bound; the fuzzer found the earlier
 *     2e-6 * max(1, |y|) broken by a huge gamma: the normalised value's
 *     absolute error, ~1e-7, is multiplied by gamma), and within twice that
 *     of the scalar tier;
 *   - sum receives s = x + r, the float sum, bit for bit on every tier;
 *   - a row whose exact result is not finite is not finite on any tier;
 *   - row gaps keep their canaries; inputs are not written (unless
 *     aliased as documented: y == x, sum == x, sum == r).
 */
#include "fuzz.h"

#define LAYERNORM_TOL 2e-6

enum { USE_R = 1, USE_GAMMA = 2, USE_BETA = 4, USE_SUM = 8 };
enum { ALIAS_NONE, ALIAS_Y_X, ALIAS_SUM_X, ALIAS_SUM_R, ALIAS_Y_X_SUM_R };

typedef struct buf {
    float *p, *p0; /* the buffer, and its contents before the call */
    size_t n;
    ptrdiff_t ld;
} buf;

static void buf_make(buf *b, size_t rows, size_t d, ptrdiff_t ld, size_t mis)
{
    b->ld = ld;
    b->n = (rows - 1) * (size_t)ld + d;
    b->p = fz_alloc(b->n, mis);
    b->p0 = NULL;
}

static void buf_fill(buf *b, size_t rows, size_t d, fz_gen *g)
{
    for (size_t t = 0; t < rows; t++)
        fz_fill(b->p + t * (size_t)b->ld, d, g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_setup();
    fz_in in = {data, size};
    const size_t rows = 1 + fz_upto(&in, 7);
    size_t d = fz_len(&in, 1100);
    if (fz_u8(&in) == 255)
        d = 4099;
    unsigned use = fz_u8(&in) & 15;
    int alias = (int)(fz_u8(&in) % 5);
    if ((alias == ALIAS_SUM_X || alias == ALIAS_SUM_R || alias == ALIAS_Y_X_SUM_R))
        use |= USE_SUM;
    if (alias == ALIAS_SUM_R || alias == ALIAS_Y_X_SUM_R)
        use |= USE_R;
    static const float epss[] = {1e-5f, 0.0f, 1e-12f, 1e-40f, 1.0f, 1e30f, 1e-6f, 1e-5f};
    const float eps = epss[fz_u8(&in) % 8];
    const int ftz = fz_ftz_bit(&in);
    ptrdiff_t ld_x = (ptrdiff_t)(d + fz_upto(&in, 3)), ld_r = (ptrdiff_t)(d + fz_upto(&in, 3));
    ptrdiff_t ld_y = (ptrdiff_t)(d + fz_upto(&in, 3)), ld_s = (ptrdiff_t)(d + fz_upto(&in, 3));
    if (alias == ALIAS_Y_X || alias == ALIAS_Y_X_SUM_R)
        ld_y = ld_x;
    if (alias == ALIAS_SUM_X)
        ld_s = ld_x;
    if (alias == ALIAS_SUM_R || alias == ALIAS_Y_X_SUM_R)
        ld_s = ld_r;
    fz_gen gx = fz_gen_read(&in, FZ_ALL), gr = fz_gen_read(&in, FZ_ALL);
    fz_gen gg = fz_gen_read(&in, FZ_ALL), gb = fz_gen_read(&in, FZ_ALL);

    buf x, r = {0}, y, s = {0}, gamma = {0}, beta = {0};
    buf_make(&x, rows, d, ld_x, fz_u8(&in) % 32);
    buf_fill(&x, rows, d, &gx);
    if (use & USE_R) {
        buf_make(&r, rows, d, ld_r, fz_u8(&in) % 32);
        buf_fill(&r, rows, d, &gr);
    }
    if (use & USE_GAMMA) {
        buf_make(&gamma, 1, d, (ptrdiff_t)d, fz_u8(&in) % 32);
        buf_fill(&gamma, 1, d, &gg);
    }
    if (use & USE_BETA) {
        buf_make(&beta, 1, d, (ptrdiff_t)d, fz_u8(&in) % 32);
        buf_fill(&beta, 1, d, &gb);
    }
    const int y_is_x = alias == ALIAS_Y_X || alias == ALIAS_Y_X_SUM_R;
    if (y_is_x)
        y = x;
    else
        buf_make(&y, rows, d, ld_y, fz_u8(&in) % 32);
    if (alias == ALIAS_SUM_X)
        s = x;
    else if (alias == ALIAS_SUM_R || alias == ALIAS_Y_X_SUM_R)
        s = r;
    else if (use & USE_SUM)
        buf_make(&s, rows, d, ld_s, fz_u8(&in) % 32);
    buf *all[] = {&x, &r, &y, &s, &gamma, &beta};
    const int sum_aliased = alias == ALIAS_SUM_X || alias == ALIAS_SUM_R ||
                            alias == ALIAS_Y_X_SUM_R;
    for (size_t k = 0; k < 6; k++) {
        const int aliased = (all[k] == &y && y_is_x) || (all[k] == &s && sum_aliased);
        if (all[k]->p && !aliased)
            all[k]->p0 = fz_dup(all[k]->p, all[k]->n);
    }
    /* aliases share the snapshot of the buffer they alias */
    if (y_is_x)
        y.p0 = x.p0;
    if (alias == ALIAS_SUM_X)
        s.p0 = x.p0;
    if (alias == ALIAS_SUM_R || alias == ALIAS_Y_X_SUM_R)
        s.p0 = r.p0;

    /* One documented invalid argument, or none. */
    peak_status want = PEAK_OK;
    float *cy = y.p, *cx = x.p, *cr = r.p, *cs = s.p;
    size_t c_rows = rows, c_d = d;
    ptrdiff_t c_ly = ld_y, c_lx = ld_x, c_lr = ld_r, c_ls = ld_s;
    float c_eps = eps;
    const uint32_t bad = fz_u8(&in);
    if (bad >= 176) {
        want = PEAK_ERR_INVALID_ARG;
        const uint32_t w = fz_u8(&in);
        const ptrdiff_t short_ld = (w & 1) ? (ptrdiff_t)d - 1 : -1 - (ptrdiff_t)(w >> 1);
        switch (bad % 14) {
        case 0: cy = NULL; break;
        case 1: cx = NULL; break;
        case 2: c_rows = 0; break;
        case 3: c_d = 0; break;
        case 4: c_ly = short_ld; break;
        case 5: c_lx = short_ld; break;
        case 6: if (cr) c_lr = short_ld; else c_eps = -1.0f; break;
        case 7: if (cs) c_ls = short_ld; else c_eps = NAN; break;
        case 8: c_eps = (w & 1) ? -1e-5f : (w & 2) ? INFINITY : NAN; break;
        case 9: cy = x.p, c_ly = ld_x + 1; break;                 /* y == x, other ld */
        case 10: if (cs) cs = x.p, c_ls = ld_x + 1; else cy = NULL; break;
        case 11:
            if (cs && cr)
                cs = r.p, c_ls = ld_r + 1; /* sum == r, other ld */
            else if (cs)
                cs = y.p, c_ls = ld_y;     /* sum == y */
            else
                cx = NULL;
            break;
        case 12: if (cs) cs = cy, c_ls = c_ly; else c_eps = INFINITY; break; /* sum == y */
        default: /* an extent whose byte offset overflows ptrdiff_t */
            if (rows > 1 && alias == ALIAS_NONE) {
                want = PEAK_ERR_OUT_OF_RANGE;
                c_lx = PTRDIFF_MAX / 2;
            } else {
                c_eps = -INFINITY;
            }
            break;
        }
    }
    fz_describe("layernorm rows %zu d %zu use 0x%x alias %d eps %a ld %td %td %td %td x [%g,%g) "
                "%u/0x%x r [%g,%g) %u/0x%x gamma [%g,%g) %u/0x%x beta [%g,%g) %u/0x%x ftz %d; "
                "bad %u -> %s",
                rows, d, use, alias, (double)eps, ld_x, ld_r, ld_y, ld_s, (double)gx.lo,
                (double)gx.hi, gx.rate, gx.kinds, (double)gr.lo, (double)gr.hi, gr.rate,
                gr.kinds, (double)gg.lo, (double)gg.hi, gg.rate, gg.kinds, (double)gb.lo,
                (double)gb.hi, gb.rate, gb.kinds, ftz, bad >= 176 ? bad % 14 : 99,
                fz_status(want));

    /* The oracle: s in float (as peak.h defines it), statistics and y in
       long double.  ys[t*d + c] and yf (finite?) per element. */
    long double *ye = malloc(rows * d * sizeof *ye);
    float *sf = malloc(rows * d * sizeof *sf);
    float *ref_y = malloc(rows * d * sizeof *ref_y);
    if (!ye || !sf || !ref_y)
        abort();
    {
        unsigned csr = fz_ftz_set(ftz);
        for (size_t t = 0; t < rows; t++)
            for (size_t c = 0; c < d; c++) {
                float a = x.p0[t * (size_t)ld_x + c];
                if (r.p)
                    a += r.p0[t * (size_t)ld_r + c];
                sf[t * d + c] = a;
            }
        fz_ftz_restore(csr);
        for (size_t t = 0; t < rows; t++) {
            long double mean = 0.0L, var = 0.0L;
            for (size_t c = 0; c < d; c++)
                mean += sf[t * d + c];
            mean /= (long double)d;
            for (size_t c = 0; c < d; c++) {
                long double dv = sf[t * d + c] - mean;
                var += dv * dv;
            }
            var /= (long double)d;
            const long double rstd = 1.0L / sqrtl(var + (long double)fz_daz(eps, ftz));
            for (size_t c = 0; c < d; c++) {
                long double v = (sf[t * d + c] - mean) * rstd;
                if (gamma.p)
                    v *= fz_daz(gamma.p0[c], ftz);
                if (beta.p)
                    v += fz_daz(beta.p0[c], ftz);
                ye[t * d + c] = v;
            }
        }
    }

    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        const char *tier = peak_isa_name(fz_tier[t]);
        for (size_t k = 0; k < 6; k++)
            if (all[k]->p)
                memcpy(all[k]->p, all[k]->p0, all[k]->n * sizeof(float));
        unsigned csr = fz_ftz_set(ftz);
        peak_status st = peak_add_layernorm(cy, c_ly, cs, c_ls, cx, c_lx, cr, c_lr, gamma.p,
                                            beta.p, c_rows, c_d, c_eps, NULL, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, st, want);
        if (gamma.p)
            fz_expect_unchanged(t, "gamma", gamma.p, gamma.p0, d);
        if (beta.p)
            fz_expect_unchanged(t, "beta", beta.p, beta.p0, d);
        if (st != PEAK_OK) {
            const char *names[] = {"x", "r", "y", "sum"};
            for (size_t k = 0; k < 4; k++)
                if (all[k]->p)
                    fz_expect_unchanged(t, names[k], all[k]->p, all[k]->p0, all[k]->n);
            continue;
        }
        /* r and x are inputs unless aliased by y or sum */
        if (!y_is_x && alias != ALIAS_SUM_X)
            fz_expect_unchanged(t, "x", x.p, x.p0, x.n);
        if (r.p && alias != ALIAS_SUM_R && alias != ALIAS_Y_X_SUM_R)
            fz_expect_unchanged(t, "r", r.p, r.p0, r.n);
        for (size_t row = 0; row < rows; row++) {
            for (size_t c = 0; c < d; c++) {
                const float got = y.p[row * (size_t)ld_y + c];
                const long double e = ye[row * d + c];
                /* peak.h: 2e-6 * max(1, |y|, |gamma|, |beta|) */
                long double scale = fmaxl(1.0L, fabsl(e));
                if (gamma.p && isfinite(gamma.p0[c]))
                    scale = fmaxl(scale, fabsl((long double)gamma.p0[c]));
                if (beta.p && isfinite(beta.p0[c]))
                    scale = fmaxl(scale, fabsl((long double)beta.p0[c]));
                int ok;
                if (!isfinite((double)e))
                    ok = !isfinite(got);
                else if (isinf((float)e)) /* beyond FLT_MAX: rounds to inf */
                    ok = got == (float)e || fabsl((long double)got - e) <= LAYERNORM_TOL * scale;
                else
                    ok = fabsl((long double)got - e) <= LAYERNORM_TOL * scale &&
                         (t == 0 || !isfinite(ref_y[row * d + c]) ||
                          fabsl((long double)got - (long double)ref_y[row * d + c]) <=
                              2 * LAYERNORM_TOL * scale);
                if (!ok)
                    fz_fail("tier %s: y[%zu, %zu] = %a (%.9g), exact %.9Lg, scalar %.9g", tier,
                            row, c, (double)got, (double)got, e,
                            t ? (double)ref_y[row * d + c] : (double)got);
                if (t == 0)
                    ref_y[row * d + c] = got;
                if (s.p && !fz_same(s.p[row * (size_t)ld_s + c], sf[row * d + c]))
                    fz_fail("tier %s: sum[%zu, %zu] = %a, x + r = %a", tier, row, c,
                            (double)s.p[row * (size_t)ld_s + c], (double)sf[row * d + c]);
            }
            /* row gaps of y and sum keep what they held */
            if (row + 1 < rows) {
                for (size_t c = d; c < (size_t)ld_y; c++)
                    if (fz_bits(y.p[row * (size_t)ld_y + c]) != fz_bits(y.p0[row * (size_t)ld_y + c]))
                        fz_fail("tier %s: gap y[%zu, %zu] written", tier, row, c);
                for (size_t c = d; s.p && c < (size_t)ld_s; c++)
                    if (fz_bits(s.p[row * (size_t)ld_s + c]) != fz_bits(s.p0[row * (size_t)ld_s + c]))
                        fz_fail("tier %s: gap sum[%zu, %zu] written", tier, row, c);
            }
        }
    }
    peak_isa_reset();
    free(ref_y);
    free(sf);
    free(ye);
    for (size_t k = 0; k < 6; k++) {
        buf *b = all[k];
        const int aliased = (b == &y && y_is_x) || (b == &s && sum_aliased);
        if (b->p && !aliased) {
            free(b->p0);
            fz_free(b->p);
        }
    }
    return 0;
}
