/*
 * fuzz-attention.c - peak_attention on every tier against a double-precision
 * oracle and against the scalar tier, within peak.h's bound:
 *     |O - exact| <= (8 * 2^-24 * max_j m_j + 4e-6) * max|V|,
 *     m_j = |scale| * sum_d |q_d k_jd| + |bias_j|
 * ("~2^-24 * (a few) * (scale * sum |q k| + |bias|) * max|V| plus ~1e-6 *
 * max|V|", with "a few" = 8 and the measured 5e-6 for moderate inputs
 * covered), and lse within 4e-6 * (1 + |lse|) plus the same score term;
 * max_j and max|V| over the keys the row sees.  A row with no visible key,
 * or only -inf scores, is O = +0 and lse = -inf (with a sink: the sink,
 * exactly); a visible +inf/NaN score gives NaN.
 *
 * The logit options (fuzz-logits.h, decoded last: inputs that end before
 * them have none) enter the oracle's scores in double, in peak.h's order
 * (tests/test-util.h): q . k * scale, the cap, the ALiBi term, the bias;
 * the sink joins the row's maximum and sum (and lse).  Their terms join
 * m_j: |ALiBi_j| as peak.h counts it with |bias|, and the capped score's
 * magnitude for the float tanh and product (the cap does not magnify the
 * dot product's error: tanh is 1-Lipschitz).  A sink within 128 of the
 * row's largest score counts with it (the kernels subtract the larger of
 * the two in float); further above, every weight is below e^-128 of the
 * sink's and O is 0 within the bound, further below the sink's term is
 * lost in the sum.  Invalid options are rejected, nothing written; the
 * slopes and sinks are never written.
 *
 * The bound is finite only where the float scores and the float
 * accumulation of the SIMD tiers cannot overflow (peak.h states the
 * domain): rows where sum_d |q_d k_jd| (finite terms; the SIMD tiers form
 * q . k in float before scaling), m_j (the options' terms included: a huge
 * slope times a long distance), or max|V| * (visible keys) exceed
 * FLT_MAX / 64 are only checked for crashes, memory and canaries (counted,
 * see fz_skipped); columns whose visible V holds inf or NaN are compared
 * only where the oracle is finite.
 *
 * K and V rows that no query can see hold NaN canaries (peak.h: masked
 * keys and values are never read); gaps of O and lse keep theirs.
 *
 * Q, K, V and O may each be bfloat16 or float16 (read last, fuzz-types.h:
 * older inputs stay float32): the oracle reads the widened inputs, and a
 * 16-bit O is held to where the bounds above round to (peak.h: plus half
 * an ULP of O's type); 16-bit canaries are the type's.  A type outside
 * peak_dtype is refused with PEAK_ERR_UNSUPPORTED, nothing written.
 */
#include "fuzz-logits.h"
#include "fuzz-mask.h"
#include "fuzz-types.h"

#define ATTENTION_SCORE_ULPS 8.0
#define ATTENTION_ABS 4e-6
#define ATTENTION_LSE 4e-6
#define ATTENTION_MAX_WORK 1500000.0 /* B*H*Lq*Lk*(D+Dv) per call, for speed */

static size_t off3(const ptrdiff_t st[3], size_t a, size_t b, size_t c)
{
    return a * (size_t)st[0] + b * (size_t)st[1] + c * (size_t)st[2];
}

/* [B, L, heads, w] or [B, heads, L, w] with `pad` floats after each row;
   strides are for the (b, l, h) indices. */
static size_t operand(int bhld, size_t B, size_t L, size_t heads, size_t w, size_t pad,
                      ptrdiff_t st[3])
{
    const size_t row = w + pad;
    if (bhld)
        st[0] = (ptrdiff_t)(heads * L * row), st[1] = (ptrdiff_t)row, st[2] = (ptrdiff_t)(L * row);
    else
        st[0] = (ptrdiff_t)(L * heads * row), st[1] = (ptrdiff_t)(heads * row), st[2] = (ptrdiff_t)row;
    return (B - 1) * (size_t)st[0] + (L - 1) * (size_t)st[1] + (heads - 1) * (size_t)st[2] + w;
}

static size_t pick(fz_in *in, const size_t *set, size_t n)
{
    return set[fz_u8(in) % n];
}

/* An element of O (type ot, widened) of a normal row: within tol of the
   exact ref, and past the scalar tier (t > 0) within 2 tol of its r.  A
   16-bit O: where those float32 ranges round to. */
static int o_ok(float got, double ref, double tol, float r, int t, peak_dtype ot)
{
    if (ot == PEAK_F32)
        return fabs((double)got - ref) <= tol && (t == 0 || fabs((double)got - (double)r) <= 2 * tol);
    return fz_within(got, (long double)ref - tol, (long double)ref + tol, ot) &&
           (t == 0 || fz_near(got, r, 2 * tol, ot));
}

/* The call's buffer behind float32 buffer p: its 16-bit copy, if any. */
static const void *call_buf(const float *p, float *const f[4], uint16_t *const h[4])
{
    for (int k = 0; p && k < 4; k++)
        if (p == f[k])
            return h[k] ? (const void *)h[k] : p;
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t heads_set[] = {1, 2, 3, 4, 6, 8};
    static const size_t dims[] = {1,  2,  3,  4,  7,   8,   9,   15,  16,  17, 31,
                                  32, 33, 63, 64, 65, 80, 127, 128, 129, 256};
    const size_t n_dims = sizeof dims / sizeof dims[0];
    fz_setup();
    fz_in in = {data, size};
    const size_t B = 1 + fz_upto(&in, 1), H = pick(&in, heads_set, 6);
    size_t KVH = 1 + fz_upto(&in, H - 1);
    while (H % KVH)
        KVH--;
    size_t Lq = fz_bit(&in) ? 1 + fz_upto(&in, 8) : fz_len(&in, 70);
    size_t Lk = fz_len(&in, 200);
    const size_t D = pick(&in, dims, n_dims);
    const size_t Dv = fz_bit(&in) ? D : pick(&in, dims, n_dims);
    while ((double)B * (double)H * (double)Lq * (double)Lk * (double)(D + Dv) > ATTENTION_MAX_WORK)
        if (Lq > 1)
            Lq = (Lq + 1) / 2;
        else
            Lk = (Lk + 1) / 2;
    const int bhld = fz_bit(&in), with_lse = fz_bit(&in), lse_gap = fz_bit(&in);
    const size_t pad = fz_upto(&in, 3);
    const int ftz = fz_ftz_bit(&in), ws_mode = (int)(fz_u8(&in) % 3);
    static const float scales[] = {0.0f, 1.0f, 0.125f, -0.5f, 1e10f, 1e-40f, 3.0f, 0.0f};
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = B, d.heads = H, d.q_len = Lq, d.kv_len = Lk, d.head_dim = D;
    d.kv_heads = KVH == H && fz_bit(&in) ? 0 : KVH;  /* 0 means heads */
    d.v_head_dim = Dv == D && fz_bit(&in) ? 0 : Dv;  /* 0 means head_dim */
    d.scale = scales[fz_u8(&in) % 8];
    const float scale = fz_daz(d.scale != 0.0f ? d.scale : (float)(1.0 / sqrt((double)D)), ftz);
    const size_t nq = operand(bhld, B, Lq, H, D, pad, d.q_stride);
    const size_t nk = operand(bhld, B, Lk, KVH, D, pad, d.k_stride);
    const size_t nv = operand(bhld, B, Lk, KVH, Dv, pad, d.v_stride);
    const size_t no = operand(bhld, B, Lq, H, Dv, pad, d.o_stride);
    size_t nl = 0;
    if (with_lse) {
        const size_t step = lse_gap ? 2 : 1;
        d.lse_stride[2] = (ptrdiff_t)step;
        d.lse_stride[1] = (ptrdiff_t)(Lq * step);
        d.lse_stride[0] = (ptrdiff_t)(H * Lq * step);
        nl = off3(d.lse_stride, B - 1, H - 1, Lq - 1) + 1;
    }
    fz_mask fm;
    fz_mask_read(&fm, &in, B, H, Lq, Lk);
    d.mask = fm.m;
    fz_gen gq = fz_gen_read(&in, FZ_ALL), gk = fz_gen_read(&in, FZ_ALL);
    fz_gen gv = fz_gen_read(&in, FZ_ALL);

    /* Which K/V rows some query sees: only those are filled. */
    const size_t group = H / KVH;
    unsigned char *seen = calloc(B * KVH * Lk, 1);
    if (!seen)
        abort();
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Lq; i++)
                for (size_t j = 0; j < Lk; j++)
                    if (peak_test_mask_visible(&d.mask, Lq, Lk, b, h, i, j))
                        seen[(b * KVH + h / group) * Lk + j] = 1;
    size_t sel[4]; /* of q, k, v, o */
    for (int e = 0; e < 4; e++)
        sel[e] = fz_u8(&in) % 32;
    float *q = fz_alloc(nq, sel[0]), *k = fz_alloc(nk, sel[1]);
    float *v = fz_alloc(nv, sel[2]), *o = fz_alloc(no, sel[3]);
    float *lse = with_lse ? fz_alloc(nl, fz_u8(&in) % 32) : NULL;
    d.lse = lse;
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < Lq; i++)
            for (size_t h = 0; h < H; h++)
                fz_fill(q + off3(d.q_stride, b, i, h), D, &gq);
        for (size_t j = 0; j < Lk; j++)
            for (size_t g = 0; g < KVH; g++)
                if (seen[(b * KVH + g) * Lk + j]) {
                    fz_fill(k + off3(d.k_stride, b, j, g), D, &gk);
                    fz_fill(v + off3(d.v_stride, b, j, g), Dv, &gv);
                }
    }

    /* One documented invalid argument, or none. */
    peak_attention_desc c = d;
    peak_status want = PEAK_OK;
    float *co = o, *cq = q, *ck = k, *cv = v;
    int null_desc = 0, ws_misalign = 0, ws_short = 0;
    int32_t *bad_len = NULL;
    const uint32_t bad = fz_u8(&in);
    if (bad >= 168) {
        want = PEAK_ERR_INVALID_ARG;
        const uint32_t w = fz_u8(&in), kk = w % 3;
        switch (bad % 23) {
        case 0: co = NULL; break;
        case 1: cq = NULL; break;
        case 2: ck = NULL; break;
        case 3: cv = NULL; break;
        case 4: null_desc = 1; break;
        case 5: c.batch = 0; break;
        case 6: c.heads = 0; break;
        case 7: c.q_len = 0; break;
        case 8: c.kv_len = 0; break;
        case 9: c.head_dim = 0; break;
        case 10: /* kv_heads not dividing heads */
            c.kv_heads = H + 1 + (w & 3);
            if (H >= 4 && (w & 4))
                c.kv_heads = H == 4 ? 3 : H == 6 ? 4 : 3;
            break;
        case 11: {
            ptrdiff_t *st[5] = {c.q_stride, c.k_stride, c.v_stride, c.o_stride, c.lse_stride};
            st[(w >> 2) % 5][kk] = -1 - (ptrdiff_t)(w >> 5);
            break;
        }
        case 12: /* two rows of O coincide */
            if (H > 1)
                c.o_stride[2] = 0;
            else if (Lq > 1)
                c.o_stride[1] = (ptrdiff_t)(w % Dv);
            else if (B > 1)
                c.o_stride[0] = 0;
            else
                co = NULL;
            break;
        case 13: c.scale = (w & 1) ? NAN : (w & 2) ? INFINITY : -INFINITY; break;
        case 14: co = kk == 0 ? q : kk == 1 ? k : v; break;
        case 15: c.lse = o; break;
        case 16: ws_misalign = 1 + (int)(w % 63); break;
        case 17: ws_short = 1; break;
        case 18: { /* a key length outside [0, Lk] */
            want = PEAK_ERR_OUT_OF_RANGE;
            bad_len = fz_bad_key_len(&d.mask, B, Lk, w,
                                     (w & 64) ? -1 : (int32_t)Lk + 1 + (int32_t)(w >> 7));
            c.mask.key_len = bad_len;
            break;
        }
        case 19:
            want = PEAK_ERR_OUT_OF_RANGE;
            if (w & 1)
                c.mask.q_offset = FZ_LIMIT + 1 + w;
            else
                c.mask.window = FZ_LIMIT + 1 + w;
            break;
        case 20: /* an extent whose byte offset overflows ptrdiff_t */
            want = PEAK_ERR_OUT_OF_RANGE;
            if (B > 1)
                c.k_stride[0] = PTRDIFF_MAX / 2;
            else if (Lk > 1)
                c.v_stride[1] = PTRDIFF_MAX / 4 + 1;
            else
                c.mask.q_offset = SIZE_MAX;
            break;
        case 21: /* lse entries coincide */
            if (with_lse && B * H * Lq > 1)
                memset(c.lse_stride, 0, sizeof c.lse_stride);
            else
                c.mask.align = (peak_align)2;
            break;
        default: c.mask.align = (peak_align)(2 + w); break;
        }
    }
    /* The logit options, and one invalid option when nothing else is
       invalid; its slopes or sinks may sit in O or lse (element 0). */
    fz_logits fl;
    fz_logits_read(&fl, &in, H);
    d.logits = fl.l;
    int bad_opt;
    const peak_status want_opt =
        fz_logits_bad(&fl, &c.logits, &in, bad < 168, H, lse && (bad & 1) ? lse : o, &bad_opt);
    if (want_opt != PEAK_OK)
        want = want_opt;
    if (ws_short && ws_mode == 0)
        ws_short = 0, co = NULL; /* no workspace passed: make it another error */
    if (ws_misalign && ws_mode == 0)
        ws_misalign = 0, cv = NULL;
    /* The types of Q, K, V and O, last; one invalid type case when nothing
       else is invalid. */
    peak_dtype ty[4];
    uint32_t tw;
    const int bad_type = fz_types_read(&in, ty, 4, &tw) && want == PEAK_OK;
    const peak_dtype ot = ty[3];
    d.q_type = c.q_type = ty[0], d.k_type = c.k_type = ty[1];
    d.v_type = c.v_type = ty[2], d.o_type = c.o_type = ot;
    if (bad_type) {
        peak_dtype *which[4] = {&c.q_type, &c.k_type, &c.v_type, &c.o_type};
        *which[tw % 4] = fz_bad_dtype(tw >> 2);
        want = PEAK_ERR_UNSUPPORTED;
    }
    /* The 16-bit buffers (q, k, v then hold the values widened: the
       oracle's), and the call's pointers moved to them. */
    float *const f32s[4] = {q, k, v, o};
    uint16_t *h16[4];
    const size_t ns[4] = {nq, nk, nv, no};
    for (int e = 0; e < 4; e++)
        h16[e] = fz_narrow(f32s[e], ns[e], ty[e], sel[e]);
    fz_logits_move(&c.logits, o, h16[3], no);
    if (c.lse == o && h16[3]) { /* lse meeting O: a float inside the 16-bit O */
        c.lse = fz_float_in(h16[3], no);
        if (!c.lse)
            c.lse = lse, co = NULL;
    }
    void *O = h16[3] ? (void *)h16[3] : o;
    const void *Q = call_buf(q, f32s, h16);
    const void *K = call_buf(k, f32s, h16), *V = call_buf(v, f32s, h16);
    const void *cO = call_buf(co, f32s, h16), *cQ = call_buf(cq, f32s, h16);
    const void *cK = call_buf(ck, f32s, h16), *cV = call_buf(cv, f32s, h16);
    void *qs0 = fz_dup_t(Q, nq, ty[0]), *ks0 = fz_dup_t(K, nk, ty[1]);
    void *vs0 = fz_dup_t(V, nv, ty[2]);
    float *q0 = fz_dup(q, nq), *k0 = fz_dup(k, nk), *v0 = fz_dup(v, nv);
    char opts[256];
    peak_test_describe_logits(opts, sizeof opts, B, H, &d.mask, &d.logits);
    fz_describe("attention KVH %zu Lq %zu Lk %zu D %zu Dv %zu %s pad %zu lse %d%s scale %a "
                "ws %d %s q [%g,%g) %u/0x%x k [%g,%g) %u/0x%x v [%g,%g) %u/0x%x ftz %d types %s "
                "%s %s %s (call %u %u %u %u); bad %u, bad option %d -> %s",
                KVH, Lq, Lk, D, Dv, bhld ? "[B,H,L,D]" : "[B,L,H,D]", pad, with_lse,
                lse_gap ? " (gaps)" : "", (double)d.scale, ws_mode, opts, (double)gq.lo,
                (double)gq.hi, gq.rate, gq.kinds, (double)gk.lo, (double)gk.hi, gk.rate, gk.kinds,
                (double)gv.lo, (double)gv.hi, gv.rate, gv.kinds, ftz, fz_type_name(ty[0]),
                fz_type_name(ty[1]), fz_type_name(ty[2]), fz_type_name(ot), (unsigned)c.q_type,
                (unsigned)c.k_type, (unsigned)c.v_type, (unsigned)c.o_type,
                bad >= 168 ? bad % 23 : 99, bad_opt, fz_status(want));
    if (ws_short)
        want = PEAK_ERR_WORKSPACE;

    /* The oracle, per row (b, h, i): kind, O, lse, and the row's bound. */
    const size_t rows = B * H * Lq;
    double *ref = malloc(rows * Dv * sizeof *ref), *ref_lse = malloc(rows * sizeof *ref_lse);
    double *tol = malloc(rows * sizeof *tol), *tol_lse = malloc(rows * sizeof *tol_lse);
    int *kind = malloc(rows * sizeof *kind), *checked = malloc(rows * sizeof *checked);
    unsigned char *col_ok = malloc(rows * Dv);
    double *sc = malloc(Lk * sizeof *sc);
    if (!ref || !ref_lse || !tol || !tol_lse || !kind || !checked || !col_ok || !sc)
        abort();
    size_t skipped = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Lq; i++) {
                const size_t r = (b * H + h) * Lq + i, g = h / group;
                const float *qr = q0 + off3(d.q_stride, b, i, h);
                const float *sink_at = peak_test_sink(&d.logits, h);
                const double sink = sink_at ? (double)fz_daz(*sink_at, ftz) : 0.0;
                double m = -INFINITY, hazard = 0.0, raw = 0.0, vmax = 0.0;
                int poisoned = 0;
                size_t n_vis = 0;
                for (size_t j = 0; j < Lk; j++) {
                    sc[j] = NAN;
                    if (!peak_test_mask_visible(&d.mask, Lq, Lk, b, h, i, j))
                        continue;
                    n_vis++;
                    const float *kr = k0 + off3(d.k_stride, b, j, g);
                    const float *vr = v0 + off3(d.v_stride, b, j, g);
                    double s = 0.0, mag = 0.0;
                    for (size_t e = 0; e < D; e++) {
                        const double t = (double)fz_daz(qr[e], ftz) * (double)fz_daz(kr[e], ftz);
                        s += t;
                        if (isfinite(t))
                            mag += fabs(t);
                    }
                    s *= (double)scale;
                    /* The SIMD tiers round the biased score to float, an
                       error of 2^-24 |bias| on top of the dot product's;
                       likewise the capped score and the ALiBi term. */
                    double smag = mag * fabs((double)scale);
                    if (d.logits.softcap != 0.0f) {
                        s = peak_test_softcap(&d.logits, s);
                        if (isfinite(s))
                            smag += fabs(s);
                    }
                    if (d.logits.alibi != PEAK_ALIBI_NONE) {
                        const double a =
                            (double)fz_daz(peak_test_slope(&d.logits, h, H), ftz) *
                            (double)peak_test_alibi_distance(&d.logits, &d.mask, Lq, Lk, i, j);
                        s -= a;
                        if (isfinite(a))
                            smag += fabs(a);
                    }
                    if (d.mask.bias) {
                        const float bj = fz_daz(fz_mask_bias(&d.mask, b, h, i, j), ftz);
                        s += bj;
                        if (isfinite(bj))
                            smag += fabs((double)bj);
                    }
                    sc[j] = s;
                    if (smag > hazard)
                        hazard = smag;
                    if (mag > raw)
                        raw = mag;
                    for (size_t e = 0; e < Dv; e++)
                        if (isfinite(vr[e]) && fabs(vr[e]) > vmax)
                            vmax = fabs(vr[e]);
                    if (isnan(s) || s == INFINITY)
                        poisoned = 1;
                    else if (s > m)
                        m = s;
                }
                kind[r] = poisoned ? ROW_NAN : m == -INFINITY ? ROW_ZERO : ROW_NORMAL;
                if (sink_at && kind[r] == ROW_NORMAL && fabs(sink - m) <= 128.0)
                    hazard = fmax(hazard, fabs(sink));
                checked[r] = hazard <= FLT_MAX / 64 && raw <= FLT_MAX / 64 &&
                             vmax * (double)n_vis <= FLT_MAX / 64;
                skipped += !checked[r];
                const double score_err = ATTENTION_SCORE_ULPS * 0x1p-24 * hazard;
                /* one subnormal step, or FLT_MIN when FTZ flushes the result */
                tol[r] = (score_err + ATTENTION_ABS) * vmax + (ftz ? FLT_MIN : 0x1p-149);
                for (size_t e = 0; e < Dv; e++)
                    ref[r * Dv + e] = 0.0, col_ok[r * Dv + e] = 1;
                /* a zero row's lse is the sink's, exactly (peak.h) */
                ref_lse[r] = kind[r] != ROW_ZERO ? NAN : sink_at ? sink : -INFINITY;
                if (kind[r] != ROW_NORMAL)
                    continue;
                if (sink_at) /* the sink joins the maximum and the sum */
                    m = fmax(m, sink);
                double sum = sink_at ? exp(sink - m) : 0.0;
                for (size_t j = 0; j < Lk; j++) {
                    if (isnan(sc[j])) /* not visible */
                        continue;
                    const double wgt = exp(sc[j] - m);
                    const float *vr = v0 + off3(d.v_stride, b, j, g);
                    sum += wgt;
                    for (size_t e = 0; e < Dv; e++)
                        ref[r * Dv + e] += wgt * (double)fz_daz(vr[e], ftz);
                }
                for (size_t e = 0; e < Dv; e++) {
                    ref[r * Dv + e] /= sum;
                    col_ok[r * Dv + e] = isfinite(ref[r * Dv + e]) != 0;
                }
                ref_lse[r] = m + log(sum);
                tol_lse[r] = ATTENTION_LSE * (1.0 + fabs(ref_lse[r])) + score_err;
            }

    unsigned char *o_row = calloc(no, 1), *l_row = calloc(nl + 1, 1);
    if (!o_row || !l_row)
        abort();
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t i = 0; i < Lq; i++) {
                memset(o_row + off3(d.o_stride, b, i, h), 1, Dv);
                if (lse)
                    l_row[off3(d.lse_stride, b, h, i)] = 1;
            }
    void *o0 = fz_dup_t(O, no, ot), *ref_o = fz_dup_t(O, no, ot);
    float *l0 = lse ? fz_dup(lse, nl) : NULL, *ref_l = lse ? fz_dup(lse, nl) : NULL;

    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        const char *tier = peak_isa_name(fz_tier[t]);
        memcpy(O, o0, no * peak_dtype_size(ot));
        if (lse)
            memcpy(lse, l0, nl * sizeof *lse);
        /* The workspace this tier asks for, exactly that size, or more. */
        size_t need = 0;
        void *ws = NULL;
        size_t ws_bytes = 0;
        if (ws_mode && peak_attention_workspace_size(&d, NULL, &need) == PEAK_OK) {
            ws_bytes = need + (ws_mode == 2 ? 64 + fz_upto(&in, 4096) : 0);
            if (ws_short && need)
                ws_bytes = need - 1 - (need > 1 ? fz_upto(&in, need - 2) : 0);
            if (posix_memalign(&ws, 64, ws_bytes + (size_t)ws_misalign + 1) != 0)
                abort();
        }
        void *ws_arg = ws ? (char *)ws + ws_misalign : NULL;
        unsigned csr = fz_ftz_set(ftz);
        peak_status s = peak_attention((void *)cO, cQ, cK, cV, null_desc ? NULL : &c, ws_arg,
                                       ws_bytes, NULL);
        fz_ftz_restore(csr);
        free(ws);
        fz_expect_status(t, s, ws_short && !need && ws_mode ? PEAK_OK : want);
        fz_expect_unchanged_t(t, "q", Q, qs0, nq, ty[0]);
        fz_expect_unchanged_t(t, "k", K, ks0, nk, ty[1]);
        fz_expect_unchanged_t(t, "v", V, vs0, nv, ty[2]);
        if (fm.bias)
            fz_expect_unchanged(t, "bias", fm.bias, fm.bias0, fm.n_bias);
        fz_logits_unchanged(t, &fl);
        if (s != PEAK_OK) {
            fz_expect_unchanged_t(t, "o", O, o0, no, ot);
            if (lse)
                fz_expect_unchanged(t, "lse", lse, l0, nl);
            continue;
        }
        for (size_t e = 0; e < no; e++)
            if (!o_row[e] && !fz_is_canary_at(O, ot, e))
                fz_fail("tier %s: gap o[%zu] written", tier, e);
        for (size_t e = 0; lse && e < nl; e++)
            if (!l_row[e] && !fz_is_canary(lse[e]))
                fz_fail("tier %s: gap lse[%zu] written", tier, e);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++)
                for (size_t i = 0; i < Lq; i++) {
                    const size_t r = (b * H + h) * Lq + i;
                    const size_t oo = off3(d.o_stride, b, i, h);
                    for (size_t e = 0; e < Dv; e++) {
                        const float got = fz_get(O, ot, oo + e), r_o = fz_get(ref_o, ot, oo + e);
                        if (fz_is_canary_at(O, ot, oo + e))
                            fz_fail("tier %s: O[%zu,%zu,%zu,%zu] not written", tier, b, i, h, e);
                        if (!checked[r])
                            continue;
                        int ok = 1;
                        if (kind[r] == ROW_ZERO)
                            ok = got == 0.0f && !signbit(got);
                        else if (kind[r] == ROW_NAN)
                            ok = isnan(got);
                        else if (col_ok[r * Dv + e])
                            ok = o_ok(got, ref[r * Dv + e], tol[r], r_o, t, ot);
                        if (!ok)
                            fz_fail("tier %s: O[b %zu, i %zu, h %zu, %zu] = %a (%.9g, %s 0x%x), "
                                    "exact %.9g, scalar %.9g, tol %.3g (%s row)",
                                    tier, b, i, h, e, (double)got, (double)got, fz_type_name(ot),
                                    fz_code(O, ot, oo + e), ref[r * Dv + e], (double)r_o, tol[r],
                                    kind[r] == ROW_NAN ? "NaN" : kind[r] == ROW_ZERO ? "zero"
                                                                                     : "normal");
                    }
                    if (!lse || !checked[r])
                        continue;
                    const float gl = lse[off3(d.lse_stride, b, h, i)];
                    int ok = kind[r] == ROW_ZERO  ? (double)gl == ref_lse[r]
                             : kind[r] == ROW_NAN ? isnan(gl)
                                                  : fabs((double)gl - ref_lse[r]) <= tol_lse[r];
                    if (!ok)
                        fz_fail("tier %s: lse[b %zu, h %zu, i %zu] = %.9g, exact %.9g, tol %.3g",
                                tier, b, h, i, (double)gl, ref_lse[r],
                                kind[r] == ROW_NORMAL ? tol_lse[r] : 0.0);
                }
        if (t == 0) {
            memcpy(ref_o, O, no * peak_dtype_size(ot));
            if (lse)
                memcpy(ref_l, lse, nl * sizeof *lse);
        }
    }
    fz_skipped += skipped;
    fz_rows += rows - skipped;
    peak_isa_reset();
    free(ref_o);
    free(ref_l);
    free(o0);
    free(l0);
    free(o_row);
    free(l_row);
    free(sc);
    free(col_ok);
    free(checked);
    free(kind);
    free(tol_lse);
    free(tol);
    free(ref_lse);
    free(ref);
    free(bad_len);
    free(q0);
    free(k0);
    free(v0);
    free(qs0);
    free(ks0);
    free(vs0);
    for (int e = 0; e < 4; e++)
        fz_free16(h16[e]);
    fz_free(q);
    fz_free(k);
    fz_free(v);
    fz_free(o);
    fz_free(lse);
    free(seen);
    fz_mask_free(&fm);
    fz_logits_free(&fl);
    return 0;
}
