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
 * x, r, y and sum may each be bfloat16 or float16 (read last,
 * fuzz-types.h: older inputs stay float32; an alias has its buffer's
 * type): the oracle reads the widened inputs, a 16-bit y is held to where
 * the bounds above round to (peak.h: plus half an ULP of its type), a
 * 16-bit sum is the float sum rounded by peak_convert, byte for byte.  A
 * type outside peak_dtype is refused (PEAK_ERR_UNSUPPORTED), in place with
 * another type too (PEAK_ERR_INVALID_ARG), and d_model above 16384 with a
 * 16-bit tensor (its own call, layernorm_limit), nothing written.
 */
#include "fuzz-types.h"

#define LAYERNORM_TOL 2e-6

enum { USE_R = 1, USE_GAMMA = 2, USE_BETA = 4, USE_SUM = 8 };
enum { ALIAS_NONE, ALIAS_Y_X, ALIAS_SUM_X, ALIAS_SUM_R, ALIAS_Y_X_SUM_R };

enum { TY_Y, TY_SUM, TY_X, TY_R }; /* fz_types_read's order: peak_layernorm_types' */

typedef struct buf {
    float *p, *p0;   /* the float32 buffer (16-bit: the values widened), and
                        its contents before the call */
    uint16_t *h;     /* the 16-bit buffer, or NULL */
    void *c, *c0;    /* the call's buffer (p or h), and its bytes before it */
    peak_dtype type; /* of c */
    size_t n, sel;
    ptrdiff_t ld;
} buf;

static void buf_make(buf *b, size_t rows, size_t d, ptrdiff_t ld, size_t mis)
{
    memset(b, 0, sizeof *b);
    b->ld = ld;
    b->n = (rows - 1) * (size_t)ld + d;
    b->sel = mis;
    b->p = fz_alloc(b->n, mis);
}

/* The call's buffer behind float32 buffer p (NULL: NULL). */
static void *call_buf(const float *p, buf *const all[6])
{
    for (size_t k = 0; p && k < 6; k++)
        if (all[k]->p == p)
            return all[k]->c;
    return NULL;
}

/* d_model just past 16384, or 16384 itself (w's bits 0-7), rows of 1 or 2
   (bit 8), no gaps, r and sum given or not (bits 9, 10), with the types
   ty: with a 16-bit tensor among those passed every tier refuses it
   (PEAK_ERR_UNSUPPORTED: the stack row) and writes nothing; otherwise
   every tier takes it and writes every element (y finite: the rows
   vary). */
static void layernorm_limit(const peak_dtype ty[4], uint32_t w, size_t sel)
{
    const size_t d = w % 4 ? 16385 + (w >> 2) % 64 : 16384, rows = 1 + (w >> 8) % 2;
    const int with_r = (int)((w >> 9) & 1), with_sum = (int)((w >> 10) & 1);
    const size_t n = rows * d;
    const int typed = ty[TY_Y] != PEAK_F32 || ty[TY_X] != PEAK_F32 ||
                      (with_r && ty[TY_R] != PEAK_F32) || (with_sum && ty[TY_SUM] != PEAK_F32);
    const int refused = typed && d > 16384;
    const peak_layernorm_types types = {ty[TY_Y], ty[TY_SUM], ty[TY_X], ty[TY_R]};
    float *xf = malloc(n * sizeof *xf), *rf = malloc(n * sizeof *rf);
    if (!xf || !rf)
        abort();
    for (size_t k = 0; k < n; k++)
        xf[k] = (float)(k % 13) * 0.25f - 1.0f, rf[k] = (float)(k % 5) * 0.5f;
    uint16_t *x16 = fz_narrow(xf, n, ty[TY_X], sel);
    uint16_t *r16 = fz_narrow(rf, n, ty[TY_R], sel + 1);
    const void *x = x16 ? (void *)x16 : xf, *r = !with_r ? NULL : r16 ? (void *)r16 : rf;
    void *y = fz_alloc_t(n, sel + 2, ty[TY_Y]);
    void *sum = with_sum ? fz_alloc_t(n, sel + 3, ty[TY_SUM]) : NULL;
    void *y0 = fz_dup_t(y, n, ty[TY_Y]), *s0 = sum ? fz_dup_t(sum, n, ty[TY_SUM]) : NULL;
    fz_describe("layernorm d_model limit: rows %zu d %zu r %d sum %d types y %s sum %s x %s r %s "
                "-> %s", rows, d, with_r, with_sum, fz_type_name(ty[TY_Y]),
                fz_type_name(ty[TY_SUM]), fz_type_name(ty[TY_X]), fz_type_name(ty[TY_R]),
                refused ? "UNSUPPORTED" : "OK");
    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        memcpy(y, y0, n * peak_dtype_size(ty[TY_Y]));
        if (sum)
            memcpy(sum, s0, n * peak_dtype_size(ty[TY_SUM]));
        const peak_status st = peak_add_layernorm(y, (ptrdiff_t)d, sum, (ptrdiff_t)d, x,
                                                  (ptrdiff_t)d, r, (ptrdiff_t)d, NULL, NULL, rows,
                                                  d, 1e-5f, &types, NULL);
        fz_expect_status(t, st, refused ? PEAK_ERR_UNSUPPORTED : PEAK_OK);
        if (refused) {
            fz_expect_unchanged_t(t, "y", y, y0, n, ty[TY_Y]);
            if (sum)
                fz_expect_unchanged_t(t, "sum", sum, s0, n, ty[TY_SUM]);
            continue;
        }
        for (size_t k = 0; k < n; k++)
            if (!isfinite(fz_get(y, ty[TY_Y], k)) || (sum && fz_is_canary_at(sum, ty[TY_SUM], k)))
                fz_fail("tier %s: y[%zu] = 0x%x, sum 0x%x", peak_isa_name(fz_tier[t]), k,
                        fz_code(y, ty[TY_Y], k), sum ? fz_code(sum, ty[TY_SUM], k) : 0u);
    }
    free(y0);
    free(s0);
    fz_free_t(y, ty[TY_Y]);
    if (sum)
        fz_free_t(sum, ty[TY_SUM]);
    fz_free16(x16);
    fz_free16(r16);
    free(xf);
    free(rf);
}

/* y element `got` (type yt, widened) against the exact e, within tol, and
   past the scalar tier (t > 0) within 2 tol of its ref (where finite).  A
   16-bit y: where those float32 ranges round to. */
static int y_ok(float got, long double e, long double tol, float ref, int t, peak_dtype yt)
{
    if (!isfinite((double)e))
        return !isfinite(got);
    if (yt != PEAK_F32)
        return fz_within(got, e - tol, e + tol, yt) &&
               (t == 0 || !isfinite(ref) || fz_near(got, ref, (double)(2 * tol), yt));
    if (isinf((float)e)) /* beyond FLT_MAX: rounds to inf */
        return got == (float)e || fabsl((long double)got - e) <= tol;
    return fabsl((long double)got - e) <= tol &&
           (t == 0 || !isfinite(ref) || fabsl((long double)got - (long double)ref) <= 2 * tol);
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
    buf *const all[] = {&x, &r, &y, &s, &gamma, &beta};
    const int sum_aliased = alias == ALIAS_SUM_X || alias == ALIAS_SUM_R ||
                            alias == ALIAS_Y_X_SUM_R;

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
    /* The types, last; an alias has its buffer's.  One invalid type case
       when nothing else is invalid: a value outside peak_dtype for a
       tensor passed, an alias with another type, or the d_model limit. */
    peak_dtype ty[4];
    uint32_t tw;
    const int bad_type = fz_types_read(&in, ty, 4, &tw) && want == PEAK_OK;
    if (y_is_x)
        ty[TY_Y] = ty[TY_X];
    if (alias == ALIAS_SUM_X)
        ty[TY_SUM] = ty[TY_X];
    if (alias == ALIAS_SUM_R || alias == ALIAS_Y_X_SUM_R)
        ty[TY_SUM] = ty[TY_R];
    peak_layernorm_types types = {ty[TY_Y], ty[TY_SUM], ty[TY_X], ty[TY_R]};
    const int limit = bad_type && tw % 3 == 2;
    const uint32_t lw = limit ? fz_u8(&in) : 0; /* the limit call's rows, r and sum */
    if (bad_type && tw % 3 == 1 && (y_is_x || sum_aliased)) {
        want = PEAK_ERR_INVALID_ARG;
        if (y_is_x)
            types.y = fz_other_type(ty[TY_X], tw >> 2);
        else
            types.sum = fz_other_type(ty[TY_SUM], tw >> 2);
    } else if (bad_type && !limit) {
        want = PEAK_ERR_UNSUPPORTED;
        peak_dtype *given[4] = {&types.y, &types.x, s.p ? &types.sum : &types.y,
                                r.p ? &types.r : &types.x};
        *given[(tw >> 2) % 4] = fz_bad_dtype(tw >> 4);
    }
    const int all_f32 = types.y == PEAK_F32 && types.sum == PEAK_F32 &&
                        types.x == PEAK_F32 && types.r == PEAK_F32;
    /* The 16-bit buffers (an alias shares its buffer's), then the
       snapshots: of the values (p0, the oracle's) and of the call's bytes. */
    x.type = ty[TY_X], r.type = ty[TY_R], y.type = ty[TY_Y], s.type = ty[TY_SUM];
    for (size_t k = 0; k < 4; k++) {
        const int aliased = (all[k] == &y && y_is_x) || (all[k] == &s && sum_aliased);
        if (all[k]->p && !aliased)
            all[k]->h = fz_narrow(all[k]->p, all[k]->n, all[k]->type, all[k]->sel);
    }
    if (y_is_x)
        y.h = x.h;
    if (alias == ALIAS_SUM_X)
        s.h = x.h;
    if (alias == ALIAS_SUM_R || alias == ALIAS_Y_X_SUM_R)
        s.h = r.h;
    for (size_t k = 0; k < 6; k++) {
        const int aliased = (all[k] == &y && y_is_x) || (all[k] == &s && sum_aliased);
        all[k]->c = all[k]->h ? (void *)all[k]->h : all[k]->p;
        if (all[k]->p && !aliased) {
            all[k]->p0 = fz_dup(all[k]->p, all[k]->n);
            all[k]->c0 = fz_dup_t(all[k]->c, all[k]->n, all[k]->type);
        }
    }
    /* aliases share the snapshots of the buffer they alias */
    if (y_is_x)
        y.p0 = x.p0, y.c0 = x.c0;
    if (alias == ALIAS_SUM_X)
        s.p0 = x.p0, s.c0 = x.c0;
    if (alias == ALIAS_SUM_R || alias == ALIAS_Y_X_SUM_R)
        s.p0 = r.p0, s.c0 = r.c0;
    void *const Cy = call_buf(cy, all), *const Cs = call_buf(cs, all);
    const void *const Cx = call_buf(cx, all), *const Cr = call_buf(cr, all);
    fz_describe("layernorm rows %zu d %zu use 0x%x alias %d eps %a ld %td %td %td %td x [%g,%g) "
                "%u/0x%x r [%g,%g) %u/0x%x gamma [%g,%g) %u/0x%x beta [%g,%g) %u/0x%x ftz %d "
                "types y %s sum %s x %s r %s (call %u %u %u %u%s)%s; bad %u -> %s",
                rows, d, use, alias, (double)eps, ld_x, ld_r, ld_y, ld_s, (double)gx.lo,
                (double)gx.hi, gx.rate, gx.kinds, (double)gr.lo, (double)gr.hi, gr.rate,
                gr.kinds, (double)gg.lo, (double)gg.hi, gg.rate, gg.kinds, (double)gb.lo,
                (double)gb.hi, gb.rate, gb.kinds, ftz, fz_type_name(ty[TY_Y]),
                fz_type_name(ty[TY_SUM]), fz_type_name(ty[TY_X]), fz_type_name(ty[TY_R]),
                (unsigned)types.y, (unsigned)types.sum, (unsigned)types.x, (unsigned)types.r,
                all_f32 ? ", NULL" : "", limit ? " + d_model limit" : "",
                bad >= 176 ? bad % 14 : 99, fz_status(want));

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
                memcpy(all[k]->c, all[k]->c0, all[k]->n * peak_dtype_size(all[k]->type));
        unsigned csr = fz_ftz_set(ftz);
        peak_status st = peak_add_layernorm(Cy, c_ly, Cs, c_ls, Cx, c_lx, Cr, c_lr, gamma.p,
                                            beta.p, c_rows, c_d, c_eps, all_f32 ? NULL : &types,
                                            NULL);
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
                    fz_expect_unchanged_t(t, names[k], all[k]->c, all[k]->c0, all[k]->n,
                                          all[k]->type);
            continue;
        }
        /* r and x are inputs unless aliased by y or sum */
        if (!y_is_x && alias != ALIAS_SUM_X)
            fz_expect_unchanged_t(t, "x", x.c, x.c0, x.n, x.type);
        if (r.p && alias != ALIAS_SUM_R && alias != ALIAS_Y_X_SUM_R)
            fz_expect_unchanged_t(t, "r", r.c, r.c0, r.n, r.type);
        for (size_t row = 0; row < rows; row++) {
            for (size_t c = 0; c < d; c++) {
                const float got = fz_get(y.c, y.type, row * (size_t)ld_y + c);
                const long double e = ye[row * d + c];
                /* peak.h: 2e-6 * max(1, |y|, |gamma|, |beta|) */
                long double scale = fmaxl(1.0L, fabsl(e));
                if (gamma.p && isfinite(gamma.p0[c]))
                    scale = fmaxl(scale, fabsl((long double)gamma.p0[c]));
                if (beta.p && isfinite(beta.p0[c]))
                    scale = fmaxl(scale, fabsl((long double)beta.p0[c]));
                const float ref = t ? ref_y[row * d + c] : got;
                if (!y_ok(got, e, LAYERNORM_TOL * scale, ref, t, y.type))
                    fz_fail("tier %s: y[%zu, %zu] = %a (%.9g, %s 0x%x), exact %.9Lg, scalar %.9g",
                            tier, row, c, (double)got, (double)got, fz_type_name(y.type),
                            fz_code(y.c, y.type, row * (size_t)ld_y + c), e, (double)ref);
                if (t == 0)
                    ref_y[row * d + c] = got;
                /* sum: x + r in float, rounded once to its type */
                const size_t so = row * (size_t)ld_s + c;
                if (s.p && !fz_same(fz_get(s.c, s.type, so), fz_round16(sf[row * d + c], s.type)))
                    fz_fail("tier %s: sum[%zu, %zu] = %a (%s 0x%x), x + r = %a", tier, row, c,
                            (double)fz_get(s.c, s.type, so), fz_type_name(s.type),
                            fz_code(s.c, s.type, so), (double)sf[row * d + c]);
            }
            /* row gaps of y and sum keep what they held */
            if (row + 1 < rows) {
                for (size_t c = d; c < (size_t)ld_y; c++)
                    if (fz_code(y.c, y.type, row * (size_t)ld_y + c) !=
                        fz_code(y.c0, y.type, row * (size_t)ld_y + c))
                        fz_fail("tier %s: gap y[%zu, %zu] written", tier, row, c);
                for (size_t c = d; s.p && c < (size_t)ld_s; c++)
                    if (fz_code(s.c, s.type, row * (size_t)ld_s + c) !=
                        fz_code(s.c0, s.type, row * (size_t)ld_s + c))
                        fz_fail("tier %s: gap sum[%zu, %zu] written", tier, row, c);
            }
        }
    }
    if (limit)
        layernorm_limit(ty, tw >> 2 | lw << 8, x.sel);
    peak_isa_reset();
    free(ref_y);
    free(sf);
    free(ye);
    for (size_t k = 0; k < 6; k++) {
        buf *b = all[k];
        const int aliased = (b == &y && y_is_x) || (b == &s && sum_aliased);
        if (b->p && !aliased) {
            free(b->p0);
            free(b->c0);
            fz_free16(b->h);
            fz_free(b->p);
        }
    }
    return 0;
}
