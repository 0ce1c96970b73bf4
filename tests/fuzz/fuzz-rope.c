/*
 * fuzz-rope.c - peak_rope_cache and peak_rope_apply (the first byte picks
 * which): every tier returns the scalar tier's bits (peak.h: "Every tier
 * returns the same bits", "the same bits on every tier"); on the scalar
 * tier, each rotated head equals the rotation written here (two float
 * products rounded separately, one add) from the cos/sin row of its
 * position (the cache's row, or a one-row peak_rope_cache on the fly: the
 * same bits, peak.h), the columns past rotary_dim are x's, and a cache row
 * is finite with cos^2 + sin^2 = A^2; y's floats outside its rows keep
 * their canaries (or x's values, in place); x, the cache and the positions
 * are not written.  A call with one documented invalid argument returns
 * its status on every tier and writes nothing.
 */
#include "fuzz-types.h"
#include "rope.h" /* peak_rope_attention_factor */

/* ---- parameters ------------------------------------------------------------- */

/* rotary_dim: every even value, or the tails of the vector widths. */
static size_t decode_rotary(fz_in *in)
{
    static const size_t edges[] = {2,  4,  6,  8,   10,  14,  16,  18,  30,  32,  34,
                                   62, 64, 66, 96,  126, 128, 130, 254, 256, 258, 510, 512};
    const uint32_t k = fz_u8(in);
    if (k & 1)
        return 2 * (1 + fz_upto(in, PEAK_ROPE_MAX_DIM / 2 - 1));
    return edges[(k >> 1) % (sizeof edges / sizeof edges[0])];
}

static double pick(fz_in *in, const double *v, size_t n)
{
    return v[fz_u8(in) % n];
}

#define PICK(in, arr) pick(in, arr, sizeof arr / sizeof arr[0])

/* Valid params of any scheme (the ranges of peak_rope_params), factors for
   LONGROPE into f[r / 2]. */
static peak_rope_params decode_params(fz_in *in, size_t r, float *f)
{
    static const double bases[] = {1e4, 5e5, 1e6, 1e8, 150000.0, 10.0, 2.0, 1.0000001, 1e300};
    static const double factors[] = {1.0, 1.5, 2.0, 4.0, 8.0, 32.0, 40.0, 1e6};
    static const double alphas[] = {1.0, 2.0, 8.0, 1000.0};
    static const double betas_fast[] = {0.0, 32.0, 16.0, 1e-3, 1e6};
    static const double betas_slow[] = {0.0, 1.0, 2.0, 0.5};
    static const double mscales[] = {0.0, 0.707, 1.0, 2.0};
    static const double afs[] = {0.0, 0.0, 0.8, 1.25, 1e-30};
    static const double lows[] = {1.0, 0.5, 2.0};
    static const double gaps[] = {3.0, 0.5, 1e-6};
    static const size_t l0s[] = {2, 3, 100, 2048, 4096, 32768, (size_t)1 << 20};
    static const size_t seqs[] = {0, 100, 4096, 10000, (size_t)1 << 30};
    static const float lfs[] = {1.0f, 1.01f, 1.5f, 4.0f, 100.0f, 1e-3f, 1e6f};
    peak_rope_params p = PEAK_ROPE_PARAMS_DEFAULT;
    p.rotary_dim = r;
    p.mode = (peak_rope_mode)fz_bit(in);
    p.scaling = (peak_rope_scaling)(fz_u8(in) % 7);
    p.base = PICK(in, bases);
    p.factor = PICK(in, factors);
    p.ntk_alpha = PICK(in, alphas);
    p.original_max_position = l0s[fz_u8(in) % 7];
    p.seq_len = seqs[fz_u8(in) % 5];
    p.beta_fast = PICK(in, betas_fast);
    p.beta_slow = PICK(in, betas_slow);
    p.yarn_truncate = fz_bit(in);
    p.mscale = PICK(in, mscales);
    p.mscale_all_dim = PICK(in, mscales);
    p.attention_factor = PICK(in, afs);
    p.low_freq_factor = PICK(in, lows);
    p.high_freq_factor = p.low_freq_factor + PICK(in, gaps);
    const uint64_t seed = fz_u64(in);
    uint64_t s = seed;
    for (size_t i = 0; i < r / 2; i++)
        f[i] = lfs[fz_next(&s) % 7];
    p.longrope_factors = f;
    if (r == 2 && (p.scaling == PEAK_ROPE_NTK || p.scaling == PEAK_ROPE_DYNAMIC))
        p.scaling = PEAK_ROPE_LINEAR; /* r / (r - 2): rotary_dim 2 is rejected there */
    if ((p.scaling == PEAK_ROPE_NTK || p.scaling == PEAK_ROPE_DYNAMIC) && p.base > 1e8)
        p.base = 1e8; /* 1e300 scaled up overflows: a base that is not finite, rejected */
    return p;
}

/* A parameter the scheme uses, out of its range: returns 0 if none was
   changed. */
static int corrupt_params(fz_in *in, peak_rope_params *p, float *f)
{
    static const double bad[] = {NAN, INFINITY, -INFINITY, -1.0};
    const double v = bad[fz_u8(in) % 4];
    switch (fz_u8(in) % 6) {
    case 0: p->base = fz_bit(in) ? v : 1.0; return 1;
    case 1: p->mode = (peak_rope_mode)(2 + fz_u8(in)); return 1;
    case 2: p->scaling = (peak_rope_scaling)(7 + fz_u8(in)); return 1;
    case 3: p->attention_factor = v; return 1;
    default: break;
    }
    switch (p->scaling) {
    case PEAK_ROPE_LINEAR:
    case PEAK_ROPE_DYNAMIC:
    case PEAK_ROPE_YARN:
    case PEAK_ROPE_LLAMA3:
        if (fz_bit(in) || p->scaling == PEAK_ROPE_LINEAR) {
            p->factor = fz_bit(in) ? v : 0.5;
        } else if (p->scaling == PEAK_ROPE_YARN) {
            p->beta_fast = v;
        } else if (p->scaling == PEAK_ROPE_LLAMA3) {
            p->high_freq_factor = p->low_freq_factor - (fz_bit(in) ? 0.0 : 0.25);
        } else {
            p->original_max_position = fz_bit(in);
        }
        return 1;
    case PEAK_ROPE_NTK: p->ntk_alpha = fz_bit(in) ? v : 0.5; return 1;
    case PEAK_ROPE_LONGROPE:
        if (fz_bit(in))
            p->longrope_factors = NULL;
        else
            f[fz_upto(in, p->rotary_dim / 2 - 1)] = fz_bit(in) ? (float)v : 0.0f;
        return 1;
    default: return 0;
    }
}

/* Positions near the documented edges: small, 2^24 (EXACT's accuracy
   promise), PEAK_MAX_POSITION, anywhere below it. */
static size_t decode_pos0(fz_in *in, size_t n)
{
    const size_t top = PEAK_MAX_POSITION - n;
    switch (fz_u8(in) % 4) {
    case 0: return fz_upto(in, 5000);
    case 1: return ((size_t)1 << 24) - fz_upto(in, 64);
    case 2: return top - fz_upto(in, 64);
    default: return (size_t)(fz_u64(in) % (top + 1));
    }
}

static const char *const scaling_names[] = {"none", "linear", "ntk", "dynamic",
                                            "yarn", "llama3", "longrope"};

static const char *scaling_name(peak_rope_scaling s)
{
    return (unsigned)s < 7 ? scaling_names[s] : "?";
}

/* The params fields a corrupted call changed, then the status expected
   (a static buffer). */
static const char *describe_call(const peak_rope_params *p, const peak_rope_params *c,
                                 const char *want)
{
    static char text[200];
    int at = snprintf(text, sizeof text, "call");
#define FZ_FIELD(f, fmt)                                                                         \
    if (memcmp(&p->f, &c->f, sizeof p->f) != 0 && at > 0 && (size_t)at < sizeof text)            \
        at += snprintf(text + at, sizeof text - (size_t)at, " " #f " " fmt, c->f);
    FZ_FIELD(rotary_dim, "%zu")
    FZ_FIELD(base, "%a")
    FZ_FIELD(mode, "%d")
    FZ_FIELD(scaling, "%d")
    FZ_FIELD(factor, "%a")
    FZ_FIELD(ntk_alpha, "%a")
    FZ_FIELD(original_max_position, "%zu")
    FZ_FIELD(beta_fast, "%a")
    FZ_FIELD(attention_factor, "%a")
    FZ_FIELD(high_freq_factor, "%a")
#undef FZ_FIELD
    if (p->longrope_factors != c->longrope_factors && at > 0 && (size_t)at < sizeof text)
        at += snprintf(text + at, sizeof text - (size_t)at, " longrope_factors NULL");
    if (at > 0 && (size_t)at < sizeof text)
        snprintf(text + at, sizeof text - (size_t)at, " -> %s", want);
    return text;
}

/* ---- peak_rope_cache ------------------------------------------------------------ */

static void fuzz_cache(fz_in *in)
{
    const size_t r = decode_rotary(in), n_pos = fz_len(in, 70);
    const size_t pos0 = decode_pos0(in, n_pos);
    float f[PEAK_ROPE_MAX_DIM / 2];
    const peak_rope_params prm = decode_params(in, r, f);
    const int ftz = fz_ftz_bit(in);
    const size_t n = n_pos * r;

    peak_rope_params c = prm;
    size_t c_n = n_pos, c_pos0 = pos0;
    int null_out = 0, null_params = 0;
    peak_status want = PEAK_OK;
    const uint32_t bad = fz_u8(in);
    if (bad >= 192) {
        want = PEAK_ERR_INVALID_ARG;
        switch (bad % 8) {
        case 0: null_out = 1; break;
        case 1: null_params = 1; break;
        case 2: c_n = 0; break;
        case 3: c.rotary_dim = fz_bit(in) ? r - 1 : fz_bit(in) ? 0 : PEAK_ROPE_MAX_DIM + 2; break;
        case 4:
            want = PEAK_ERR_OUT_OF_RANGE;
            c_pos0 = PEAK_MAX_POSITION - n_pos + 1 + fz_upto(in, 1000);
            break;
        case 5:
            want = PEAK_ERR_OUT_OF_RANGE;
            c_n = fz_bit(in) ? SIZE_MAX / 2 : PEAK_MAX_POSITION + 1, c_pos0 = 0;
            break;
        default:
            if (!corrupt_params(in, &c, f))
                c.base = NAN;
            break;
        }
    }
    const size_t sel = fz_u8(in) % 32;
    /* The cache's type (the input's last byte: older inputs decode as
       before, float32); 3: one outside peak_dtype, checked after the NULL
       pointers and the params, before the ranges. */
    static const peak_dtype types[3] = {PEAK_F32, PEAK_BF16, PEAK_F16};
    const uint32_t type_sel = fz_u8(in) % 4;
    const peak_dtype type = types[type_sel % 3];
    peak_dtype c_type = type;
    if (type_sel == 3) {
        c_type = (peak_dtype)(3 + fz_u8(in) % 250);
        if (want != PEAK_ERR_INVALID_ARG)
            want = PEAK_ERR_UNSUPPORTED;
    }
    fz_describe("cache r %zu n_pos %zu pos0 %zu mode %d %s base %a factor %a alpha %a L0 %zu "
                "seq %zu beta %a/%a trunc %d mscale %a/%a af %a freq %a/%a ftz %d type %d; call "
                "r %zu n_pos %zu pos0 %zu null %d/%d type %d, %s",
                r, n_pos, pos0, prm.mode, scaling_name(prm.scaling), prm.base, prm.factor,
                prm.ntk_alpha, prm.original_max_position, prm.seq_len, prm.beta_fast,
                prm.beta_slow, prm.yarn_truncate, prm.mscale, prm.mscale_all_dim,
                prm.attention_factor, prm.low_freq_factor, prm.high_freq_factor, ftz, (int)type,
                c.rotary_dim, c_n, c_pos0, null_out, null_params, (int)c_type,
                describe_call(&prm, &c, fz_status(want)));

    /* In floats (fz_alloc's unit): rotary_dim is even, so a 16-bit cache
       fills whole floats. */
    const size_t es = peak_dtype_size(type), nf = n * es / 4;
    float *out = fz_alloc(nf, sel);
    float *ref = NULL;
    float f0[PEAK_ROPE_MAX_DIM / 2];
    memcpy(f0, f, sizeof f0);
    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        fz_canary(out, nf);
        unsigned csr = fz_ftz_set(ftz);
        const peak_status s = peak_rope_cache(null_out ? NULL : out, c_type, c_n, c_pos0,
                                              null_params ? NULL : &c, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        fz_expect_unchanged(t, "longrope_factors", f, f0, r / 2);
        if (s != PEAK_OK) {
            for (size_t k = 0; k < nf; k++)
                if (!fz_is_canary(out[k]))
                    fz_fail("tier %s: rejected call wrote cache[%zu] = %a",
                            peak_isa_name(fz_tier[t]), k, (double)out[k]);
            continue;
        }
        if (type != PEAK_F32) {
            if (t > 0) {
                if (memcmp(out, ref, n * es) != 0)
                    fz_fail("tier %s: the 16-bit cache is not the scalar tier's bytes",
                            peak_isa_name(fz_tier[t]));
                continue;
            }
            /* the scalar float32 cache, converted */
            float *f32 = malloc(n * sizeof *f32);
            uint16_t *want16 = malloc(n * sizeof *want16);
            if (!f32 || !want16)
                abort();
            csr = fz_ftz_set(ftz);
            const peak_status s32 = peak_rope_cache(f32, PEAK_F32, n_pos, pos0, &prm, NULL);
            fz_ftz_restore(csr);
            if (s32 != PEAK_OK || peak_convert(want16, type, f32, PEAK_F32, n, NULL) != PEAK_OK)
                fz_fail("scalar: the float32 cache or its conversion failed");
            fz_expect_rounded16("cache", (const uint16_t *)(const void *)out, want16, f32, n, r,
                                type);
            free(f32);
            free(want16);
            ref = fz_dup(out, nf);
            continue;
        }
        if (t == 0) {
            ref = fz_dup(out, n);
            /* every row finite, cos^2 + sin^2 = A^2 (float rounding of each) */
            const double a = peak_rope_attention_factor(&prm);
            for (size_t k = 0; k < n_pos; k++)
                for (size_t i = 0; i < r / 2; i++) {
                    const double cv = out[k * r + i], sv = out[k * r + r / 2 + i];
                    if (!isfinite(cv) || !isfinite(sv) ||
                        fabs(cv * cv + sv * sv - a * a) > 1e-6 * a * a)
                        fz_fail("scalar: row %zu (p %zu) freq %zu: cos %a sin %a, A %a", k,
                                pos0 + k, i, cv, sv, a);
                }
            continue;
        }
        for (size_t k = 0; k < n; k++)
            if (!fz_same(out[k], ref[k]))
                fz_fail("tier %s: cache (%zu, %zu) = %a (0x%08x), scalar %a (0x%08x)",
                        peak_isa_name(fz_tier[t]), k / r, k % r, (double)out[k], fz_bits(out[k]),
                        (double)ref[k], fz_bits(ref[k]));
    }
    free(ref);
    fz_free(out);
}

/* ---- peak_rope_apply -------------------------------------------------------------- */

static size_t extent3(const ptrdiff_t st[3], size_t B, size_t L, size_t H, size_t D)
{
    return (B - 1) * (size_t)st[0] + (L - 1) * (size_t)st[1] + (H - 1) * (size_t)st[2] + D;
}

/* Strides of [B, L, H, D] (bhld 0) or [B, H, L, D] with gaps from the input. */
static void decode_layout(fz_in *in, ptrdiff_t st[3], size_t L, size_t H, size_t D)
{
    const int bhld = fz_bit(in);
    const size_t g0 = fz_upto(in, 3), g1 = fz_upto(in, 5), g2 = fz_upto(in, 7);
    if (!bhld) {
        st[2] = (ptrdiff_t)(D + g0);
        st[1] = (ptrdiff_t)(H * (size_t)st[2] + g1);
        st[0] = (ptrdiff_t)(L * (size_t)st[1] + g2);
    } else {
        st[1] = (ptrdiff_t)(D + g0);
        st[2] = (ptrdiff_t)(L * (size_t)st[1] + g1);
        st[0] = (ptrdiff_t)(H * (size_t)st[2] + g2);
    }
}

/* y from x and a cache row as peak.h writes it (the build has
   -ffp-contract=off: each product is rounded). */
static void ref_rotate(float *y, const float *x, const float *row, size_t d, size_t r,
                       peak_rope_pairing pairing)
{
    const size_t n = r / 2;
    for (size_t i = 0; i < n; i++) {
        const size_t lo = pairing == PEAK_ROPE_HALF_SPLIT ? i : 2 * i;
        const size_t hi = pairing == PEAK_ROPE_HALF_SPLIT ? i + n : 2 * i + 1;
        const float a = x[lo], b = x[hi], c = row[i], s = row[n + i];
        const float ac = a * c, bs = b * s, bc = b * c, as = a * s;
        y[lo] = ac - bs;
        y[hi] = bc + as;
    }
    for (size_t j = r; j < d; j++)
        y[j] = x[j];
}

static void fuzz_apply(fz_in *in)
{
    const size_t r = decode_rotary(in), D = r + fz_upto(in, 6);
    const size_t B = 1 + fz_upto(in, 2), L = fz_len(in, 24), H = 1 + fz_upto(in, 4);
    ptrdiff_t xs[3], ys[3];
    decode_layout(in, xs, L, H, D);
    const int in_place = fz_bit(in);
    if (in_place)
        memcpy(ys, xs, sizeof ys);
    else
        decode_layout(in, ys, L, H, D);
    const peak_rope_pairing pairing = (peak_rope_pairing)fz_bit(in);
    const int fly = fz_bit(in);
    float f[PEAK_ROPE_MAX_DIM / 2];
    const peak_rope_params prm = decode_params(in, r, f);
    /* positions: 0 pos0 + l, 1 int64, 2 int32; one row (stride 0) or per batch */
    const int pos_kind = (int)(fz_u8(in) % 3);
    const size_t pos_stride = fz_bit(in) ? 0 : L + fz_upto(in, 3);
    size_t pos0 = fly ? decode_pos0(in, L) : fz_upto(in, 300);
    fz_gen gx = fz_gen_read(in, FZ_ALL);
    const int ftz = fz_ftz_bit(in);
    uint64_t rng = fz_u64(in);

    const size_t pos_rows = pos_stride ? B : 1;
    const size_t n_posv = pos_kind ? (pos_rows - 1) * (pos_stride ? pos_stride : L) + L : 0;
    int64_t *p64 = pos_kind == 1 ? malloc(n_posv * sizeof *p64) : NULL;
    int32_t *p32 = pos_kind == 2 ? malloc(n_posv * sizeof *p32) : NULL;
    if ((pos_kind == 1 && !p64) || (pos_kind == 2 && !p32))
        abort();
    size_t max_pos = pos0 + L - 1;
    if (pos_kind) {
        max_pos = 0;
        const int range = (int)(fz_next(&rng) % 4);
        for (size_t k = 0; k < n_posv; k++) {
            uint64_t v;
            if (!fly)
                v = fz_next(&rng) % 400;
            else if (range == 0)
                v = fz_next(&rng) % 5000;
            else if (range == 1)
                v = ((uint64_t)1 << 24) - 1 - fz_next(&rng) % 64 + fz_next(&rng) % 128;
            else if (range == 2)
                v = PEAK_MAX_POSITION - 1 - fz_next(&rng) % 64;
            else
                v = fz_next(&rng) % PEAK_MAX_POSITION;
            if (p32)
                v %= (uint64_t)INT32_MAX + 1;
            if (p64)
                p64[k] = (int64_t)v;
            else
                p32[k] = (int32_t)v;
            const size_t in_row = k % (pos_stride ? pos_stride : L);
            if (in_row < L && v > max_pos)
                max_pos = (size_t)v;
        }
    }
    const size_t cache_rows = fly ? 0 : max_pos + 1 + fz_upto(in, 3);

    peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
    d.batch = B, d.seq_len = L, d.heads = H, d.head_dim = D;
    memcpy(d.x_stride, xs, sizeof xs);
    memcpy(d.y_stride, ys, sizeof ys);
    d.pairing = pairing;
    d.params = prm;
    d.cache_rows = cache_rows;
    d.pos0 = pos0;
    d.positions = p64, d.positions32 = p32;
    d.positions_stride = (ptrdiff_t)pos_stride;

    /* One documented invalid argument, or none. */
    peak_rope_desc c = d;
    peak_status want = PEAK_OK;
    int null_y = 0, null_x = 0, null_desc = 0, y_at = 0; /* y_at: 1 over x, 2 over the cache */
    size_t y_off = 0;
    const uint32_t bad = fz_u8(in);
    if (bad >= 176) {
        want = PEAK_ERR_INVALID_ARG;
        switch (bad % 16) {
        case 0: null_y = 1; break;
        case 1: null_x = 1; break;
        case 2: null_desc = 1; break;
        case 3: {
            const int k = (int)(fz_u8(in) % 4);
            if (k == 0)
                c.batch = 0;
            else if (k == 1)
                c.seq_len = 0;
            else if (k == 2)
                c.heads = 0;
            else
                c.head_dim = r - 1 - fz_upto(in, r - 1); /* below rotary_dim */
            break;
        }
        case 4: /* rotary_dim odd, 0 or beyond 512 (head_dim below it too, or not) */
            c.params.rotary_dim = fz_bit(in) ? r - 1 : fz_bit(in) ? 0 : PEAK_ROPE_MAX_DIM + 2;
            break;
        case 5: c.pairing = (peak_rope_pairing)(2 + fz_u8(in)); break;
        case 6: { /* both positions arrays (never read: rejected first) */
            static const int64_t one64[1] = {0};
            static const int32_t one32[1] = {0};
            c.positions = p64 ? p64 : one64;
            c.positions32 = p32 ? p32 : one32;
            break;
        }
        case 7: {
            const int k = (int)(fz_u8(in) % 3);
            if (fz_bit(in))
                c.x_stride[k] = -1 - (ptrdiff_t)fz_upto(in, 10);
            else
                c.y_stride[k] = -1 - (ptrdiff_t)fz_upto(in, 10);
            break;
        }
        case 8: c.positions_stride = -1 - (ptrdiff_t)fz_upto(in, 3); break;
        case 9: /* y rows meet: two heads (or tokens, or batches) on one row */
            if (H > 1)
                c.y_stride[2] = (ptrdiff_t)fz_upto(in, D - 1);
            else if (L > 1)
                c.y_stride[1] = (ptrdiff_t)fz_upto(in, D - 1);
            else if (B > 1)
                c.y_stride[0] = (ptrdiff_t)fz_upto(in, D - 1);
            else
                c.heads = 2, c.y_stride[2] = 0;
            break;
        case 10: /* y over x, not in place: y_off < D (at D, one row's y
                    would miss x and run past its buffer) */
            y_at = 1, y_off = 1 + fz_upto(in, D - 2);
            memcpy(c.y_stride, xs, sizeof xs);
            break;
        case 11: /* y over the cache, or (on the fly) its params wrong */
            if (!fly) {
                y_at = 2;
            } else if (!corrupt_params(in, &c.params, f)) {
                c.params.base = -0.0;
            }
            break;
        case 12: /* with a cache, params beyond rotary_dim are not read */
            if (!fly) {
                want = PEAK_OK;
                c.params.base = NAN;
                c.params.longrope_factors = NULL;
                c.params.scaling = PEAK_ROPE_LONGROPE;
                break;
            }
            want = PEAK_ERR_OUT_OF_RANGE;
            c.pos0 = PEAK_MAX_POSITION - L + 1 + fz_upto(in, 100);
            c.positions = NULL, c.positions32 = NULL;
            break;
        case 13: /* a position negative or out of range */
            want = PEAK_ERR_OUT_OF_RANGE;
            if (pos_kind == 1) {
                const size_t at = fz_upto(in, L - 1);
                p64[at] = fz_bit(in) ? -1 - (int64_t)fz_upto(in, 3)
                                     : (int64_t)(fly ? PEAK_MAX_POSITION : cache_rows);
            } else if (pos_kind == 2) {
                const size_t at = fz_upto(in, L - 1);
                p32[at] = fz_bit(in) || fly ? INT32_MIN + (int32_t)fz_upto(in, 3)
                                            : (int32_t)cache_rows;
            } else {
                c.pos0 = fly ? PEAK_MAX_POSITION - L + 1 : cache_rows - L + 1;
            }
            break;
        case 14: /* cache rows too few */
            if (!fly) {
                want = PEAK_ERR_OUT_OF_RANGE;
                c.cache_rows = max_pos - fz_upto(in, max_pos);
            } else {
                want = PEAK_ERR_OUT_OF_RANGE;
                c.x_stride[0] = PTRDIFF_MAX / 2, c.batch = 2;
            }
            break;
        default: /* an extent beyond PTRDIFF_MAX bytes */
            want = PEAK_ERR_OUT_OF_RANGE;
            c.y_stride[1] = PTRDIFF_MAX / 4, c.seq_len = L > 1 ? L : 2;
            if (c.positions || c.positions32)
                c.positions = NULL, c.positions32 = NULL, c.positions_stride = 0;
            break;
        }
    }
    fz_describe("apply B %zu L %zu H %zu D %zu r %zu x {%td %td %td} y {%td %td %td}%s %s %s "
                "mode %d %s base %a factor %a alpha %a L0 %zu seq %zu beta %a/%a trunc %d "
                "mscale %a/%a af %a freq %a/%a pos0 %zu pos %d stride %zu rows %zu x [%g, %g) "
                "specials %u kinds 0x%x ftz %d; bad %u, %s",
                B, L, H, D, r, xs[0], xs[1], xs[2], ys[0], ys[1], ys[2],
                in_place ? " in place" : "", pairing ? "interleaved" : "half",
                fly ? "fly" : "cache", prm.mode, scaling_name(prm.scaling), prm.base, prm.factor,
                prm.ntk_alpha, prm.original_max_position, prm.seq_len, prm.beta_fast,
                prm.beta_slow, prm.yarn_truncate, prm.mscale, prm.mscale_all_dim,
                prm.attention_factor, prm.low_freq_factor, prm.high_freq_factor, pos0, pos_kind,
                pos_stride, cache_rows, (double)gx.lo, (double)gx.hi, gx.rate, gx.kinds, ftz,
                bad >= 176 ? bad % 16 : 99, describe_call(&prm, &c.params, fz_status(want)));

    /* Buffers: x's rows filled, its gaps canary; y all canary. */
    const size_t nx = extent3(xs, B, L, H, D), ny = in_place ? nx : extent3(ys, B, L, H, D);
    float *x = fz_alloc(nx, fz_u8(in) % 32);
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++)
            for (size_t h = 0; h < H; h++)
                fz_fill(x + b * (size_t)xs[0] + l * (size_t)xs[1] + h * (size_t)xs[2], D, &gx);
    float *x0 = fz_dup(x, nx);
    float *y = in_place ? x : fz_alloc(ny, fz_u8(in) % 32);
    float *y0 = fz_dup(y, ny);
    float *cache = NULL, *cache0 = NULL;
    peak_status cs = PEAK_OK;
    if (!fly) {
        cache = fz_alloc(cache_rows * r, fz_u8(in) % 32);
        fz_force(0);
        cs = peak_rope_cache(cache, PEAK_F32, cache_rows, 0, &prm, NULL);
        if (cs != PEAK_OK)
            fz_fail("peak_rope_cache of the valid params: %s", fz_status(cs));
        cache0 = fz_dup(cache, cache_rows * r);
    }
    c.cache = cache;
    d.cache = cache;
    int64_t *p64_0 = p64 ? malloc(n_posv * sizeof *p64) : NULL;
    int32_t *p32_0 = p32 ? malloc(n_posv * sizeof *p32) : NULL;
    if (p64)
        memcpy(p64_0, p64, n_posv * sizeof *p64);
    if (p32)
        memcpy(p32_0, p32, n_posv * sizeof *p32);
    float *dst = y_at == 1 ? x + y_off : y_at == 2 ? cache : y;
    const float *src = in_place && y_at == 0 ? y : x;
    float *ref = NULL;
    float *row = malloc(r * sizeof *row), *want_row = malloc(D * sizeof *want_row);
    if (!row || !want_row)
        abort();

    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        memcpy(x, x0, nx * sizeof *x);
        if (!in_place)
            memcpy(y, y0, ny * sizeof *y);
        unsigned csr = fz_ftz_set(ftz);
        const peak_status s = peak_rope_apply(null_y ? NULL : dst, null_x ? NULL : src,
                                              null_desc ? NULL : &c, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        if (cache)
            fz_expect_unchanged(t, "cache", cache, cache0, cache_rows * r);
        if ((p64 && memcmp(p64, p64_0, n_posv * sizeof *p64) != 0) ||
            (p32 && memcmp(p32, p32_0, n_posv * sizeof *p32) != 0))
            fz_fail("tier %s: positions written", peak_isa_name(fz_tier[t]));
        if (s != PEAK_OK) {
            fz_expect_unchanged(t, "x", x, x0, nx);
            if (!in_place)
                fz_expect_unchanged(t, "y", y, y0, ny);
            continue;
        }
        if (!in_place)
            fz_expect_unchanged(t, "x", x, x0, nx);
        if (t > 0) {
            for (size_t k = 0; k < ny; k++)
                if (!fz_same(y[k], ref[k]))
                    fz_fail("tier %s: y[%zu] = %a (0x%08x), scalar %a (0x%08x)",
                            peak_isa_name(fz_tier[t]), k, (double)y[k], fz_bits(y[k]),
                            (double)ref[k], fz_bits(ref[k]));
            continue;
        }
        /* The scalar tier against the rotation written here; then every
           float outside the rows as before. */
        ref = fz_dup(y, ny);
        unsigned char *is_row = calloc(ny, 1);
        if (!is_row)
            abort();
        csr = fz_ftz_set(ftz);
        for (size_t b = 0; b < B; b++) {
            for (size_t l = 0; l < L; l++) {
                const size_t at = b * pos_stride + l;
                const size_t p = p64 ? (size_t)p64[at] : p32 ? (size_t)p32[at] : pos0 + l;
                if (cache) {
                    memcpy(row, cache + p * r, r * sizeof *row);
                } else if (peak_rope_cache(row, PEAK_F32, 1, p, &prm, NULL) != PEAK_OK) {
                    fz_fail("peak_rope_cache(p %zu) of the valid params failed", p);
                }
                for (size_t h = 0; h < H; h++) {
                    const size_t xo = b * (size_t)xs[0] + l * (size_t)xs[1] + h * (size_t)xs[2];
                    const size_t yo = b * (size_t)ys[0] + l * (size_t)ys[1] + h * (size_t)ys[2];
                    ref_rotate(want_row, x0 + xo, row, D, r, pairing);
                    memset(is_row + yo, 1, D);
                    for (size_t j = 0; j < D; j++)
                        if (!fz_same(y[yo + j], want_row[j]))
                            fz_fail("scalar: y (b %zu, l %zu, h %zu)[%zu] at p %zu = %a "
                                    "(0x%08x), reference %a (0x%08x)",
                                    b, l, h, j, p, (double)y[yo + j], fz_bits(y[yo + j]),
                                    (double)want_row[j], fz_bits(want_row[j]));
                }
            }
        }
        fz_ftz_restore(csr);
        for (size_t k = 0; k < ny; k++)
            if (!is_row[k] && fz_bits(y[k]) != fz_bits(in_place ? x0[k] : y0[k]))
                fz_fail("scalar: y[%zu], outside every row, written", k);
        free(is_row);
    }
    free(ref);
    free(row);
    free(want_row);
    free(p64_0);
    free(p32_0);
    free(cache0);
    fz_free(cache);
    free(y0);
    if (!in_place)
        fz_free(y);
    free(x0);
    fz_free(x);
    free(p64);
    free(p32);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_setup();
    fz_in in = {data, size};
    if (fz_bit(&in))
        fuzz_apply(&in);
    else
        fuzz_cache(&in);
    peak_isa_reset();
    return 0;
}
