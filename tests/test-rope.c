/*
 * test-rope.c - peak_rope_cache and peak_rope_apply on one tier (argv[1]).
 *
 *   - EXACT mode against an oracle written here in long double from
 *     peak.h's definitions of the scaling schemes (powl for base^(-2i/r),
 *     each scheme's formula, cosl/sinl of p * w times the attention
 *     factor): within 2^-23 absolute for every scheme, rotary_dim 2 .. 512,
 *     bases 1e4 .. 1e8, positions up to 2^24 - 1;
 *   - HF_F32 against transformers (tests/data/rope-hf-cache.txt, every case
 *     and row): within 2 ULP, inv_freq and attention factor as HF's; EXACT
 *     on the same cases against the oracle, and the oracle's frequencies
 *     and attention factors against HF's (a check of the oracle itself);
 *   - every tier's cache the scalar tier's bits (public calls on forced
 *     tiers, and the kernels of the dispatch rows with explicit positions
 *     and row gaps), at odd row counts and positions near 2^24 and 2^32; a
 *     row the same bits whatever pos0 and n_pos produced it;
 *   - the rotation, bit for bit against a scalar reference written here
 *     (tests/tester.c's sweeps over head_dim 1..70 and 127..1025, row gaps,
 *     misalignment and in place, for both pairings, full and partial
 *     rotary, cache and on the fly, both modes; then layouts [B, L, H, D]
 *     and [B, H, L, D] with padded strides, odd head counts, positions
 *     arrays of both widths, broadcast and per batch); against HF's
 *     rotations (tests/data/rope-hf-apply.txt) bit for bit; cache and on
 *     the fly the same bits for every scheme;
 *   - decode (one token, by pos0 or by a positions array) the bits of the
 *     same token in a prefill call;
 *   - bfloat16 and float16 caches: EXACT within half an ULP of the type
 *     plus 2^-24 A of the oracle (schemes with attention factors 1, 1.5,
 *     0.8 and YaRN's), and in both modes the bits of peak_convert() of the
 *     float32 cache (whole rows and frequency windows, item boundaries,
 *     an attention factor past float16's range: inf);
 *   - every documented invalid argument rejected with its status, and no
 *     byte written (a cache type outside peak_dtype included).
 */
#include "tester.h"

#include "rope.h" /* peak_rope_freqs, peak_rope_freqs_init, peak_rope_attention_factor */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIER peak_isa_name(peak_test_isa)

static const char *const mode_names[2] = {"exact", "hf_f32"};

/* ---- the parameter sets ------------------------------------------------------ */

/* Every scheme, with the parameters of the models that use it (Qwen2 YaRN,
   DeepSeek's mscale, gpt-oss's untruncated ramp, Llama 3.1, Phi-3's
   LongRoPE), and the defaults that 0 stands for. */
enum { N_SETS = 13 };
static const char *const set_names[N_SETS] = {
    "none",
    "none, attention_factor 1.5",
    "linear 4",
    "ntk alpha 8",
    "dynamic 2, L0 4096, seq_len 10000",
    "dynamic 2, L0 4096, seq_len 100",
    "yarn 4, L0 32768",
    "yarn 40, L0 4096, mscale 0.707 / 1",
    "yarn 32, L0 4096, untruncated, betas 0 (defaults)",
    "yarn 8, L0 2048, betas 16 / 2, attention_factor 0.8",
    "llama3 8, L0 8192, 1 / 4",
    "longrope 32, L0 4096, long factors",
    "longrope 1, L0 4096, short factors",
};

static float longrope_long[PEAK_ROPE_MAX_DIM / 2], longrope_short[PEAK_ROPE_MAX_DIM / 2];

static void init_factors(void)
{
    for (size_t i = 0; i < PEAK_ROPE_MAX_DIM / 2; i++) {
        longrope_long[i] = 1.0f + 0.5f * (float)i;
        longrope_short[i] = 1.0f + 0.01f * (float)i;
    }
}

static peak_rope_params param_set(int k, size_t r, double base, peak_rope_mode mode)
{
    peak_rope_params p = PEAK_ROPE_PARAMS_DEFAULT;
    p.rotary_dim = r;
    p.base = base;
    p.mode = mode;
    switch (k) {
    case 1: p.attention_factor = 1.5; break;
    case 2: p.scaling = PEAK_ROPE_LINEAR, p.factor = 4.0; break;
    case 3: p.scaling = PEAK_ROPE_NTK, p.ntk_alpha = 8.0; break;
    case 4:
    case 5:
        p.scaling = PEAK_ROPE_DYNAMIC, p.factor = 2.0, p.original_max_position = 4096;
        p.seq_len = k == 4 ? 10000 : 100;
        break;
    case 6: p.scaling = PEAK_ROPE_YARN, p.factor = 4.0, p.original_max_position = 32768; break;
    case 7:
        p.scaling = PEAK_ROPE_YARN, p.factor = 40.0, p.original_max_position = 4096;
        p.mscale = 0.707, p.mscale_all_dim = 1.0;
        break;
    case 8:
        p.scaling = PEAK_ROPE_YARN, p.factor = 32.0, p.original_max_position = 4096;
        p.yarn_truncate = 0, p.beta_fast = 0.0, p.beta_slow = 0.0;
        break;
    case 9:
        p.scaling = PEAK_ROPE_YARN, p.factor = 8.0, p.original_max_position = 2048;
        p.beta_fast = 16.0, p.beta_slow = 2.0, p.attention_factor = 0.8;
        break;
    case 10:
        p.scaling = PEAK_ROPE_LLAMA3, p.factor = 8.0, p.original_max_position = 8192;
        p.low_freq_factor = 1.0, p.high_freq_factor = 4.0;
        break;
    case 11:
    case 12:
        p.scaling = PEAK_ROPE_LONGROPE, p.factor = k == 11 ? 32.0 : 1.0;
        p.original_max_position = 4096;
        p.longrope_factors = k == 11 ? longrope_long : longrope_short;
        break;
    default: break;
    }
    return p;
}

/* NTK and DYNAMIC raise to r / (r - 2): not defined at rotary_dim 2. */
static int set_takes(int k, size_t r)
{
    return r > 2 || (k != 3 && k != 4 && k != 5);
}

/* ---- the long double oracle ------------------------------------------------------ */

#define PI_L 3.141592653589793238462643383279502884L

typedef struct oracle {
    size_t n;
    long double w[PEAK_ROPE_MAX_DIM / 2];
    long double af;
    int ambiguous; /* YaRN's truncated ramp end within 1e-9 of an integer */
} oracle;

/* YaRN's m(s, k) = 0.1 k ln s + 1, 1 for s <= 1 (peak.h). */
static long double yarn_m(long double s, long double k)
{
    return s <= 1.0L ? 1.0L : 0.1L * k * logl(s) + 1.0L;
}

/* The dimension index at which a frequency turns `rot` times over the
   original context (YaRN's correction dimension). */
static long double yarn_dim(long double rot, long double r, long double base, long double l0)
{
    return r * logl(l0 / (rot * 2.0L * PI_L)) / (2.0L * logl(base));
}

static int near_integer(long double v)
{
    return fabsl(v - roundl(v)) < 1e-9L;
}

/* The frequencies and attention factor of params, written from peak.h's
   documentation of peak_rope_scaling and peak_rope_params. */
static void oracle_init(oracle *o, const peak_rope_params *p)
{
    const long double r = (long double)p->rotary_dim, f = (long double)p->factor;
    const long double l0 = (long double)p->original_max_position;
    long double base = (long double)p->base;
    o->n = p->rotary_dim / 2;
    o->ambiguous = 0;
    if (p->scaling == PEAK_ROPE_NTK)
        base *= powl((long double)p->ntk_alpha, r / (r - 2.0L));
    if (p->scaling == PEAK_ROPE_DYNAMIC) {
        const long double len = (long double)p->seq_len > l0 ? (long double)p->seq_len : l0;
        base *= powl(f * len / l0 - (f - 1.0L), r / (r - 2.0L));
    }
    for (size_t i = 0; i < o->n; i++)
        o->w[i] = powl(base, -(long double)(2 * i) / r);
    switch (p->scaling) {
    case PEAK_ROPE_LINEAR:
        for (size_t i = 0; i < o->n; i++)
            o->w[i] /= f;
        break;
    case PEAK_ROPE_YARN: {
        const long double fast = p->beta_fast != 0.0 ? (long double)p->beta_fast : 32.0L;
        const long double slow = p->beta_slow != 0.0 ? (long double)p->beta_slow : 1.0L;
        long double lo = yarn_dim(fast, r, base, l0), hi = yarn_dim(slow, r, base, l0);
        if (p->yarn_truncate) {
            o->ambiguous = near_integer(lo) || near_integer(hi);
            lo = floorl(lo);
            hi = ceill(hi);
        }
        lo = lo > 0.0L ? lo : 0.0L;
        hi = hi < r - 1.0L ? hi : r - 1.0L;
        if (lo == hi)
            hi += 0.001L;
        for (size_t i = 0; i < o->n; i++) {
            long double ramp = ((long double)i - lo) / (hi - lo);
            ramp = ramp < 0.0L ? 0.0L : ramp > 1.0L ? 1.0L : ramp;
            /* ramp 0: the original frequency; 1: interpolated */
            o->w[i] = o->w[i] / f * ramp + o->w[i] * (1.0L - ramp);
        }
        break;
    }
    case PEAK_ROPE_LLAMA3: {
        const long double lf = (long double)p->low_freq_factor;
        const long double hf = (long double)p->high_freq_factor;
        for (size_t i = 0; i < o->n; i++) {
            const long double wavelen = 2.0L * PI_L / o->w[i];
            if (wavelen < l0 / hf)
                continue;
            if (wavelen > l0 / lf) {
                o->w[i] /= f;
                continue;
            }
            const long double s = (l0 / wavelen - lf) / (hf - lf);
            o->w[i] = (1.0L - s) * o->w[i] / f + s * o->w[i];
        }
        break;
    }
    case PEAK_ROPE_LONGROPE:
        for (size_t i = 0; i < o->n; i++)
            o->w[i] /= (long double)p->longrope_factors[i];
        break;
    default: break;
    }
    if (p->attention_factor != 0.0)
        o->af = (long double)p->attention_factor;
    else if (p->scaling == PEAK_ROPE_YARN)
        o->af = p->mscale != 0.0 && p->mscale_all_dim != 0.0
                    ? yarn_m(f, (long double)p->mscale) / yarn_m(f, (long double)p->mscale_all_dim)
                    : yarn_m(f, 1.0L);
    else if (p->scaling == PEAK_ROPE_LONGROPE)
        o->af = f <= 1.0L ? 1.0L : sqrtl(1.0L + logl(f) / logl(l0));
    else
        o->af = 1.0L;
}

/* Max |row - oracle| over a cache row at position pos. */
static double oracle_row_error(const oracle *o, const float *row, size_t pos, size_t *worst_col)
{
    double worst = 0.0;
    for (size_t i = 0; i < o->n; i++) {
        const long double a = (long double)pos * o->w[i];
        const double ec = (double)fabsl((long double)row[i] - o->af * cosl(a));
        const double es = (double)fabsl((long double)row[o->n + i] - o->af * sinl(a));
        const double e = ec > es ? ec : es;
        if (!(e <= worst)) { /* NaN counts as worst */
            worst = isnan(e) ? INFINITY : e;
            *worst_col = ec >= es ? i : o->n + i;
        }
    }
    return worst;
}

/* ---- EXACT mode accuracy ------------------------------------------------------------ */

/* Largest error seen (scalar, AVX2, emulated AVX-512, NEON; every set,
   rotary_dim 2 .. 512, bases 1e4 .. 1e8, positions below 2^24): 6.07e-8 =
   2^-23.97 where the attention factor is 1.35 or 1.5, half an ULP of
   values in [1, 2); 3.09e-8 = 2^-24.95 for the sets whose values stay in
   [-1, 1].  The bound tested is the promised 2^-23. */
#define EXACT_BOUND 0x1p-23

static const size_t exact_dims[] = {2, 4, 6, 24, 64, 128, 512};
static const double exact_bases[] = {1e4, 5e5, 1e6, 1e8};
static const size_t fixed_positions[] = {0, 1, 4095, 65535, 131071, 1000000, 16777215};

static double check_exact(const peak_rope_params *prm, const size_t *pos, size_t n_single,
                          size_t block0, size_t block_n, const char *what)
{
    oracle o;
    oracle_init(&o, prm);
    if (o.ambiguous) /* a truncated ramp end the oracle cannot place: none here */
        ck_abort_msg("%s r %zu base %g: YaRN ramp end within 1e-9 of an integer", what,
                     prm->rotary_dim, prm->base);
    const size_t r = prm->rotary_dim;
    double worst = 0.0;
    float *row = peak_test_alloc(r, 1);
    for (size_t k = 0; k < n_single; k++) {
        ck_assert_int_eq(peak_rope_cache(row, PEAK_F32, 1, pos[k], prm, NULL), PEAK_OK);
        size_t col = 0;
        const double e = oracle_row_error(&o, row, pos[k], &col);
        CHECK(e <= EXACT_BOUND, "%s %s r %zu base %g p %zu col %zu: %.9g, error %.3g > 2^-23",
              TIER, what, r, prm->base, pos[k], col, (double)row[col], e);
        worst = e > worst ? e : worst;
    }
    peak_test_free(row);
    float *t = peak_test_alloc(block_n * r, 0);
    ck_assert_int_eq(peak_rope_cache(t, PEAK_F32, block_n, block0, prm, NULL), PEAK_OK);
    for (size_t k = 0; k < block_n; k++) {
        size_t col = 0;
        const double e = oracle_row_error(&o, t + k * r, block0 + k, &col);
        CHECK(e <= EXACT_BOUND, "%s %s r %zu base %g p %zu (block) col %zu: error %.3g", TIER,
              what, r, prm->base, block0 + k, col, e);
        worst = e > worst ? e : worst;
    }
    peak_test_free(t);
    return worst;
}

/* _i: the parameter set. */
START_TEST(exact_mode_within_2_pow_minus_23)
{
    const int quick = peak_test_quick();
    size_t pos[16];
    size_t n_pos = 0;
    for (; n_pos < sizeof fixed_positions / sizeof fixed_positions[0]; n_pos++)
        pos[n_pos] = fixed_positions[n_pos];
    uint64_t rng = 0x20be0000u + (uint64_t)_i;
    const size_t n_rand = quick ? 2 : 6;
    for (size_t k = 0; k < n_rand; k++)
        pos[n_pos++] = (size_t)(peak_test_next(&rng) % ((size_t)1 << 24));
    const size_t block = quick ? 8 : 40;
    double worst = 0.0;
    for (size_t d = 0; d < sizeof exact_dims / sizeof exact_dims[0]; d++) {
        for (size_t b = 0; b < sizeof exact_bases / sizeof exact_bases[0]; b++) {
            if (quick && (d + b) % 2) /* quick: half the (dim, base) pairs */
                continue;
            if (!set_takes(_i, exact_dims[d]))
                continue;
            const peak_rope_params prm =
                param_set(_i, exact_dims[d], exact_bases[b], PEAK_ROPE_EXACT);
            /* the block: the last positions below 2^24, and some from 4070 */
            double e = check_exact(&prm, pos, n_pos, ((size_t)1 << 24) - block, block,
                                   set_names[_i]);
            worst = e > worst ? e : worst;
            e = check_exact(&prm, pos, 0, 4070, block, set_names[_i]);
            worst = e > worst ? e : worst;
        }
    }
    printf("%s rope %-52s max |EXACT - oracle| = %.3g (2^%.2f)\n", TIER, set_names[_i], worst,
           log2(worst));
}
END_TEST

/* ---- Hugging Face's caches -------------------------------------------------------- */

/* PEAK_TEST_DATA_DIR (environment) or tests/data next to this source. */
static FILE *open_data(const char *name)
{
    char path[4096];
    const char *dir = getenv("PEAK_TEST_DATA_DIR");
    if (dir) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
    } else {
        const char *src = __FILE__;
        const char *slash = strrchr(src, '/');
        const int len = slash ? (int)(slash - src) : 1;
        snprintf(path, sizeof path, "%.*s/data/%s", len, slash ? src : ".", name);
    }
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s (set PEAK_TEST_DATA_DIR to tests/data)", path);
    return f;
}

static float hex_float(const char *tok, const char *line_name)
{
    char *end = NULL;
    const unsigned long u = strtoul(tok, &end, 16);
    CHECK(end && *end == '\0' && end - tok == 8, "%s: bad float bits '%s'", line_name, tok);
    const uint32_t b = (uint32_t)u;
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

/* The next n hex floats of strtok's line into out. */
static void hex_floats(float *out, size_t n, const char *what)
{
    for (size_t k = 0; k < n; k++) {
        const char *tok = strtok(NULL, " \n");
        CHECK(tok != NULL, "%s: %zu values, want %zu", what, k, n);
        out[k] = hex_float(tok, what);
    }
    CHECK(strtok(NULL, " \n") == NULL, "%s: more than %zu values", what, n);
}

static size_t next_size(const char *what)
{
    const char *tok = strtok(NULL, " \n");
    CHECK(tok != NULL, "%s: missing value", what);
    return (size_t)strtoull(tok, NULL, 10);
}

static double next_double(const char *what)
{
    const char *tok = strtok(NULL, " \n");
    CHECK(tok != NULL, "%s: missing value", what);
    return strtod(tok, NULL);
}

enum { HF_MAX_CASES = 32, HF_MAX_ROWS = 8 };

typedef struct hf_case {
    char name[64];
    peak_rope_params prm; /* HF_F32 */
    float factors[PEAK_ROPE_MAX_DIM / 2];
    float inv_freq[PEAK_ROPE_MAX_DIM / 2];
    double attention_scaling;
    size_t n_rows;
    size_t pos[HF_MAX_ROWS];
    float rows[HF_MAX_ROWS][PEAK_ROPE_MAX_DIM];
} hf_case;

static const struct {
    const char *name;
    peak_rope_scaling s;
} scaling_names[] = {{"none", PEAK_ROPE_NONE},       {"linear", PEAK_ROPE_LINEAR},
                     {"ntk", PEAK_ROPE_NTK},         {"dynamic", PEAK_ROPE_DYNAMIC},
                     {"yarn", PEAK_ROPE_YARN},       {"llama3", PEAK_ROPE_LLAMA3},
                     {"longrope", PEAK_ROPE_LONGROPE}};

/* tests/data/rope-hf-cache.txt (format in its header).  Returns the number
   of cases; cs must hold HF_MAX_CASES. */
static size_t hf_load_cache(hf_case *cs)
{
    FILE *f = open_data("rope-hf-cache.txt");
    char *line = NULL;
    size_t cap = 0, n = 0;
    hf_case *c = NULL;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#')
            continue;
        const char *key = strtok(line, " \n");
        if (!key)
            continue;
        if (strcmp(key, "case") == 0) {
            CHECK(n < HF_MAX_CASES, "rope-hf-cache.txt: more than %d cases", HF_MAX_CASES);
            c = &cs[n];
            memset(c, 0, sizeof *c);
            c->prm = (peak_rope_params)PEAK_ROPE_PARAMS_DEFAULT;
            c->prm.mode = PEAK_ROPE_HF_F32;
            const char *name = strtok(NULL, " \n");
            snprintf(c->name, sizeof c->name, "%s", name ? name : "?");
            continue;
        }
        CHECK(c != NULL, "rope-hf-cache.txt: '%s' before the first case", key);
        peak_rope_params *p = &c->prm;
        if (strcmp(key, "rotary_dim") == 0) {
            p->rotary_dim = next_size(c->name);
            CHECK(p->rotary_dim >= 2 && p->rotary_dim <= PEAK_ROPE_MAX_DIM, "%s: rotary_dim %zu",
                  c->name, p->rotary_dim);
        } else if (strcmp(key, "base") == 0) {
            p->base = next_double(c->name);
        } else if (strcmp(key, "scaling") == 0) {
            const char *s = strtok(NULL, " \n");
            size_t k = 0;
            while (k < 7 && !(s && strcmp(s, scaling_names[k].name) == 0))
                k++;
            CHECK(k < 7, "%s: unknown scaling", c->name);
            p->scaling = scaling_names[k].s;
        } else if (strcmp(key, "factor") == 0) {
            p->factor = next_double(c->name);
        } else if (strcmp(key, "ntk_alpha") == 0) {
            p->ntk_alpha = next_double(c->name);
        } else if (strcmp(key, "original_max_position") == 0) {
            p->original_max_position = next_size(c->name);
        } else if (strcmp(key, "seq_len") == 0) {
            p->seq_len = next_size(c->name);
        } else if (strcmp(key, "beta_fast") == 0) {
            p->beta_fast = next_double(c->name);
        } else if (strcmp(key, "beta_slow") == 0) {
            p->beta_slow = next_double(c->name);
        } else if (strcmp(key, "truncate") == 0) {
            p->yarn_truncate = (int)next_size(c->name);
        } else if (strcmp(key, "mscale") == 0) {
            p->mscale = next_double(c->name);
        } else if (strcmp(key, "mscale_all_dim") == 0) {
            p->mscale_all_dim = next_double(c->name);
        } else if (strcmp(key, "attention_factor") == 0) {
            p->attention_factor = next_double(c->name);
        } else if (strcmp(key, "low_freq_factor") == 0) {
            p->low_freq_factor = next_double(c->name);
        } else if (strcmp(key, "high_freq_factor") == 0) {
            p->high_freq_factor = next_double(c->name);
        } else if (strcmp(key, "longrope_factors") == 0) {
            const size_t k = next_size(c->name);
            CHECK(k == p->rotary_dim / 2, "%s: %zu longrope factors", c->name, k);
            hex_floats(c->factors, k, c->name);
            p->longrope_factors = c->factors;
        } else if (strcmp(key, "inv_freq") == 0) {
            const size_t k = next_size(c->name);
            CHECK(k == p->rotary_dim / 2, "%s: %zu inv_freq", c->name, k);
            hex_floats(c->inv_freq, k, c->name);
        } else if (strcmp(key, "attention_scaling") == 0) {
            c->attention_scaling = next_double(c->name);
        } else if (strcmp(key, "row") == 0) {
            CHECK(c->n_rows < HF_MAX_ROWS, "%s: more than %d rows", c->name, HF_MAX_ROWS);
            c->pos[c->n_rows] = next_size(c->name);
            hex_floats(c->rows[c->n_rows], p->rotary_dim, c->name);
            c->n_rows++;
        } else if (strcmp(key, "end") == 0) {
            CHECK(p->rotary_dim && c->n_rows, "%s: incomplete case", c->name);
            n++;
            c = NULL;
        } else {
            ck_abort_msg("rope-hf-cache.txt: unknown key '%s'", key);
        }
    }
    free(line);
    fclose(f);
    CHECK(c == NULL && n >= 17, "rope-hf-cache.txt: %zu complete cases, want 17", n);
    return n;
}

/* Largest difference seen: 2 ULP (every tier), the promise: HF's cos/sin
   are torch's float32 ones of the same float angle, ours the double's
   rounded to float; both are then multiplied by the float attention
   factor. */
#define HF_ULP_BOUND 2

START_TEST(hf_f32_matches_transformers)
{
    hf_case *cs = malloc(HF_MAX_CASES * sizeof *cs);
    ck_assert_ptr_nonnull(cs);
    const size_t n = hf_load_cache(cs);
    int64_t worst = 0;
    for (size_t k = 0; k < n; k++) {
        const hf_case *c = &cs[k];
        const size_t r = c->prm.rotary_dim;
        /* inv_freq: the float frequencies HF multiplies by, bit for bit (at
           p = 2^24 - 1 one ULP of w_i moves the angle by up to 2 radians,
           so nothing less gives the rows) */
        peak_rope_freqs fr;
        peak_rope_freqs_init(&fr, &c->prm);
        for (size_t i = 0; i < r / 2; i++)
            CHECK(peak_test_bytes_equal(&fr.w_f32[i], &c->inv_freq[i], sizeof(float)),
                  "%s: inv_freq[%zu] = %a, HF %a", c->name, i, (double)fr.w_f32[i],
                  (double)c->inv_freq[i]);
        const double af = peak_rope_attention_factor(&c->prm);
        CHECK(fabs(af - c->attention_scaling) <= 1e-15 * c->attention_scaling,
              "%s: attention factor %.17g, HF %.17g", c->name, af, c->attention_scaling);
        float *row = peak_test_alloc(r, 3);
        for (size_t t = 0; t < c->n_rows; t++) {
            ck_assert_int_eq(peak_rope_cache(row, PEAK_F32, 1, c->pos[t], &c->prm, NULL), PEAK_OK);
            for (size_t j = 0; j < r; j++) {
                const int64_t u = peak_test_ulp_diff(row[j], c->rows[t][j]);
                CHECK(u <= HF_ULP_BOUND, "%s %s p %zu col %zu: %.9g, HF %.9g (%lld ULP)", TIER,
                      c->name, c->pos[t], j, (double)row[j], (double)c->rows[t][j],
                      (long long)u);
                worst = u > worst ? u : worst;
            }
        }
        peak_test_free(row);
        /* Rows 0 and 1 once more as one block. */
        float *two = peak_test_alloc(2 * r, 0);
        ck_assert_int_eq(peak_rope_cache(two, PEAK_F32, 2, 0, &c->prm, NULL), PEAK_OK);
        for (size_t j = 0; j < 2 * r; j++)
            CHECK(peak_test_ulp_diff(two[j], c->rows[j / r][j % r]) <= HF_ULP_BOUND,
                  "%s %s block row %zu col %zu", TIER, c->name, j / r, j % r);
        peak_test_free(two);
    }
    printf("%s rope hf_f32: %zu cases, max %lld ULP from transformers\n", TIER, n,
           (long long)worst);
    free(cs);
}
END_TEST

/* EXACT on HF's cases, against the oracle; and the oracle against HF:
   its frequencies within 2^-18 relative of HF's float ones (float
   rounding of a few operations; a scheme written wrongly is off by far
   more) and its attention factor within 1e-15 of HF's double. */
START_TEST(exact_on_transformers_cases)
{
    hf_case *cs = malloc(HF_MAX_CASES * sizeof *cs);
    ck_assert_ptr_nonnull(cs);
    const size_t n = hf_load_cache(cs);
    double worst = 0.0, worst_w = 0.0;
    for (size_t k = 0; k < n; k++) {
        hf_case *c = &cs[k];
        const size_t r = c->prm.rotary_dim;
        oracle o;
        oracle_init(&o, &c->prm);
        for (size_t i = 0; i < r / 2; i++) {
            const double rel = (double)fabsl(o.w[i] - (long double)c->inv_freq[i]) /
                               (double)c->inv_freq[i];
            CHECK(rel <= 0x1p-18, "%s: oracle w[%zu] = %.12Lg, HF %.9g (relative %.3g)",
                  c->name, i, o.w[i], (double)c->inv_freq[i], rel);
            worst_w = rel > worst_w ? rel : worst_w;
        }
        CHECK(fabsl(o.af - (long double)c->attention_scaling) <= 1e-15L,
              "%s: oracle attention factor %.17Lg, HF %.17g", c->name, o.af,
              c->attention_scaling);
        c->prm.mode = PEAK_ROPE_EXACT;
        const double e = check_exact(&c->prm, c->pos, c->n_rows, 4090, 12, c->name);
        worst = e > worst ? e : worst;
    }
    printf("%s rope exact on %zu HF cases: max |EXACT - oracle| = %.3g (2^%.2f); oracle "
           "frequencies within %.3g of HF's\n",
           TIER, n, worst, log2(worst), worst_w);
    free(cs);
}
END_TEST

/* ---- every tier the scalar tier's bits ------------------------------------------- */

static void cache_on(peak_isa isa, float *out, size_t n_pos, size_t pos0,
                     const peak_rope_params *prm)
{
    ck_assert_int_eq(peak_isa_force(isa), PEAK_OK);
    const peak_status s = peak_rope_cache(out, PEAK_F32, n_pos, pos0, prm, NULL);
    ck_assert_int_eq(peak_isa_force(peak_test_isa), PEAK_OK);
    ck_assert_int_eq(s, PEAK_OK);
}

static void expect_same_floats(const float *got, const float *want, size_t n, size_t r,
                               const char *what)
{
    if (peak_test_bytes_equal(got, want, n * sizeof(float)))
        return;
    size_t j = 0;
    while (peak_test_bytes_equal(&got[j], &want[j], sizeof(float)))
        j++;
    ck_abort_msg("%s: %s: row %zu col %zu: %a, want %a", TIER, what, j / r, j % r,
                 (double)got[j], (double)want[j]);
}

/* The sets that differ in how frequencies are formed (one per scheme). */
static const int tier_sets[] = {0, 2, 3, 4, 6, 8, 10, 11};

/* _i: the mode.  Row counts across the 32-position blocks (odd ones), at
   positions from 0, below and across 2^24, and up to 2^32 - 1. */
START_TEST(cache_tiers_bit_identical)
{
    const size_t dims[] = {2, 6, 24, 64, 130, 512};
    const size_t counts[] = {1, 3, 31, 33, 65, 97};
    const size_t top = PEAK_MAX_POSITION;
    const int quick = peak_test_quick();
    size_t calls = 0;
    if (peak_test_isa == PEAK_ISA_SCALAR) { /* the reference itself */
        printf("scalar rope %s: the reference tier, nothing to compare\n", mode_names[_i]);
        return;
    }
    for (size_t s = 0; s < sizeof tier_sets / sizeof tier_sets[0]; s++) {
        for (size_t d = 0; d < 6; d++) {
            if (!set_takes(tier_sets[s], dims[d]))
                continue;
            const peak_rope_params prm =
                param_set(tier_sets[s], dims[d], d % 2 ? 1e6 : 1e4, (peak_rope_mode)_i);
            for (size_t c = 0; c < 6; c++) {
                if (quick && (s + d + c) % 3)
                    continue;
                const size_t n = counts[c], r = dims[d];
                const size_t starts[] = {0, 7, ((size_t)1 << 24) - 50, ((size_t)1 << 24) - 1,
                                         top - 1 - n, top - n};
                float *got = peak_test_alloc(n * r, c), *want = peak_test_alloc(n * r, 0);
                for (size_t k = 0; k < 6; k++) {
                    ck_assert_int_eq(peak_rope_cache(got, PEAK_F32, n, starts[k], &prm, NULL),
                                     PEAK_OK);
                    cache_on(PEAK_ISA_SCALAR, want, n, starts[k], &prm);
                    char what[160];
                    snprintf(what, sizeof what, "%s %s r %zu n_pos %zu pos0 %zu vs scalar",
                             set_names[tier_sets[s]], mode_names[_i], r, n, starts[k]);
                    expect_same_floats(got, want, n * r, r, what);
                    calls++;
                }
                peak_test_free(got);
                peak_test_free(want);
            }
        }
    }
    printf("%s rope %s: %zu caches the scalar tier's bits\n", TIER, mode_names[_i], calls);
}
END_TEST

/* A row is the same bits alone as in any call that holds it; _i: the mode. */
START_TEST(rows_independent_of_pos0_and_n_pos)
{
    const size_t dims[] = {2, 24, 130, 512};
    const size_t starts[] = {0, 29, ((size_t)1 << 24) - 35, PEAK_MAX_POSITION - 70};
    const int sets[] = {0, 6, 10};
    const size_t n = 70;
    for (size_t s = 0; s < 3; s++) {
        for (size_t d = 0; d < 4; d++) {
            if (peak_test_quick() && (s + d) % 2)
                continue;
            const size_t r = dims[d];
            const peak_rope_params prm = param_set(sets[s], r, 5e5, (peak_rope_mode)_i);
            float *table = peak_test_alloc(n * r, 0), *row = peak_test_alloc(r, 1);
            float *part = peak_test_alloc(n * r, 2);
            for (size_t k = 0; k < 4; k++) {
                ck_assert_int_eq(peak_rope_cache(table, PEAK_F32, n, starts[k], &prm, NULL),
                                 PEAK_OK);
                for (size_t t = 0; t < n; t++) {
                    ck_assert_int_eq(peak_rope_cache(row, PEAK_F32, 1, starts[k] + t, &prm, NULL),
                                     PEAK_OK);
                    CHECK(peak_test_bytes_equal(row, table + t * r, r * sizeof(float)),
                          "%s %s %s r %zu: row %zu alone differs from the call from %zu", TIER,
                          set_names[sets[s]], mode_names[_i], r, starts[k] + t, starts[k]);
                }
                /* the rows from t0 on, in a call of their own */
                for (size_t t0 = 1; t0 < n; t0 += 13) {
                    ck_assert_int_eq(
                        peak_rope_cache(part, PEAK_F32, n - t0, starts[k] + t0, &prm, NULL),
                        PEAK_OK);
                    CHECK(peak_test_bytes_equal(part, table + t0 * r, (n - t0) * r * sizeof(float)),
                          "%s %s r %zu: rows from %zu differ from the call from %zu", TIER,
                          mode_names[_i], r, starts[k] + t0, starts[k]);
                }
            }
            peak_test_free(table);
            peak_test_free(row);
            peak_test_free(part);
        }
    }
}
END_TEST

/* The rope_cache kernels of the dispatch rows, with the explicit positions
   the on-the-fly rotation gives them (any order, repeats, far apart) and a
   row stride with gaps: each row the public one-row call's bits, gaps
   untouched, this tier's kernel the scalar kernel's bits.  _i: the mode. */
START_TEST(cache_kernels_with_positions_and_gaps)
{
    const peak_kernels *mine = peak_kernels_for(peak_test_isa);
    const peak_kernels *ref = peak_kernels_for(PEAK_ISA_SCALAR);
    ck_assert_ptr_nonnull(mine);
    ck_assert_ptr_nonnull(ref);
    enum { N = 75 };
    int64_t pos[N];
    uint64_t rng = 0x90505u + (uint64_t)_i;
    for (size_t t = 0; t < N; t++) {
        const uint64_t u = peak_test_next(&rng);
        switch (t % 5) {
        case 0: pos[t] = (int64_t)(u % 100); break; /* the same few blocks again */
        case 1: pos[t] = t ? pos[t - 1] : 0; break;  /* a repeat */
        case 2: pos[t] = (int64_t)(u % ((uint64_t)1 << 24)); break;
        case 3: pos[t] = (int64_t)(PEAK_MAX_POSITION - 1 - u % 64); break;
        default: pos[t] = (int64_t)(u % 4096); break;
        }
    }
    const size_t dims[] = {2, 8, 34, 64, 512};
    for (size_t d = 0; d < 5; d++) {
        const size_t r = dims[d], ld = r + 3;
        const peak_rope_params prm = param_set(d % 2 ? 10 : 7, r, 1e4, (peak_rope_mode)_i);
        peak_rope_freqs f;
        peak_rope_freqs_init(&f, &prm);
        const size_t total = (N - 1) * ld + r;
        float *got = peak_test_alloc(total, 1), *want = peak_test_alloc(total, 2);
        float *row = peak_test_alloc(r, 0);
        mine->rope_cache(got, (ptrdiff_t)ld, N, 0, pos, &f);
        ref->rope_cache(want, (ptrdiff_t)ld, N, 0, pos, &f);
        expect_same_floats(got, want, total, ld, "rope_cache kernel vs scalar kernel");
        for (size_t t = 0; t < N; t++) {
            ck_assert_int_eq(peak_rope_cache(row, PEAK_F32, 1, (size_t)pos[t], &prm, NULL),
                             PEAK_OK);
            CHECK(peak_test_bytes_equal(row, got + t * ld, r * sizeof(float)),
                  "%s %s r %zu: kernel row %zu (position %lld) differs from the public call",
                  TIER, mode_names[_i], r, t, (long long)pos[t]);
            for (size_t g = r; t + 1 < N && g < ld; g++)
                CHECK(peak_test_is_canary(got[t * ld + g]), "%s r %zu: gap after row %zu written",
                      TIER, r, t);
        }
        peak_test_free(got);
        peak_test_free(want);
        peak_test_free(row);
    }
}
END_TEST

/* ---- the rotation: a scalar reference --------------------------------------------- */

/* y from x and a cache row (n cos, n sin) as peak.h writes it: two float
   products rounded separately (the build has -ffp-contract=off) and one
   add or subtract. */
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

/* ---- the rotation through the tester ----------------------------------------------- */

enum pos_kind { POS_NONE, POS_I64, POS_I32 };

/* A case's shape beyond the tester's: rows = batch * L * heads. */
typedef struct rope_opts {
    size_t batch, heads;
    int bhld;              /* x and y [B, H, L, D] (else [B, L, H, D]) */
    size_t rotary;         /* 0: from the variant */
    size_t pos0;
    enum pos_kind pos_kind;
    size_t pos_stride;     /* 0: one row for every batch entry; else >= L */
    size_t pos_max;        /* positions arrays: random below it */
    int set;               /* param_set */
    double base;
} rope_opts;

static const rope_opts rope_defaults = {1, 3, 0, 0, 29, POS_NONE, 0, 0, 0, 1e4};

/* variant bits */
enum { V_INTERLEAVED = 1, V_FLY = 2, V_PARTIAL = 4, V_HF = 8, ROPE_VARIANTS = 16 };

typedef struct rope_problem {
    rope_opts o;
    size_t B, L, H, D, r;
    peak_rope_desc desc;
    float *x, *y, *cache;
    int64_t *pos64;
    int32_t *pos32;
    float *rows; /* [B * L, r]: the one-row peak_rope_cache of each token's position */
} rope_problem;

static size_t full_rotary(size_t d)
{
    const size_t r = d & ~(size_t)1;
    return r < PEAK_ROPE_MAX_DIM ? r : PEAK_ROPE_MAX_DIM;
}

static size_t partial_rotary(size_t d)
{
    size_t r = (d / 2) & ~(size_t)1;
    r = r < 2 ? 2 : r;
    return r < PEAK_ROPE_MAX_DIM ? r : PEAK_ROPE_MAX_DIM;
}

static size_t token_position(const rope_problem *e, size_t b, size_t l)
{
    const size_t at = b * e->o.pos_stride + l;
    if (e->pos64)
        return (size_t)e->pos64[at];
    if (e->pos32)
        return (size_t)e->pos32[at];
    return e->o.pos0 + l;
}

/* Row t of the tester's buffers: (b, l, h) of the layout. */
static void row_index(const rope_problem *e, size_t t, size_t *b, size_t *l, size_t *h)
{
    if (e->o.bhld) {
        *l = t % e->L, *h = t / e->L % e->H, *b = t / (e->L * e->H);
    } else {
        *h = t % e->H, *l = t / e->H % e->L, *b = t / (e->L * e->H);
    }
}

static int rope_setup(peak_tester_problem *p)
{
    const peak_tester_case *c = &p->c;
    rope_problem *e = calloc(1, sizeof *e);
    ck_assert_ptr_nonnull(e);
    p->user = e;
    e->o = c->opts ? *(const rope_opts *)c->opts : rope_defaults;
    e->D = c->n;
    e->r = e->o.rotary ? e->o.rotary
                       : (c->variant & V_PARTIAL ? partial_rotary(c->n) : full_rotary(c->n));
    e->B = e->o.batch, e->H = e->o.heads;
    if (e->r < 2 || e->r > e->D || c->rows % (e->B * e->H))
        return 0;
    e->L = c->rows / (e->B * e->H);
    const peak_rope_mode mode = c->variant & V_HF ? PEAK_ROPE_HF_F32 : PEAK_ROPE_EXACT;
    if (!set_takes(e->o.set, e->r))
        return 0;
    const peak_rope_params prm = param_set(e->o.set, e->r, e->o.base, mode);

    const size_t ld = c->n + c->gap;
    e->x = peak_tester_input(p, "x", c->rows, c->n, (ptrdiff_t)ld, 0);
    peak_tester_fill(p, e->x, -2.0f, 2.0f);
    e->y = c->alias ? peak_tester_alias(p, "y = x", e->x, PEAK_TESTER_EXACT, 0)
                    : peak_tester_output(p, "y", c->rows, c->n, (ptrdiff_t)ld, 3,
                                         PEAK_TESTER_EXACT, 0);

    peak_rope_desc *d = &e->desc;
    *d = (peak_rope_desc)PEAK_ROPE_DESC_DEFAULT;
    d->batch = e->B, d->seq_len = e->L, d->heads = e->H, d->head_dim = e->D;
    const ptrdiff_t sd = (ptrdiff_t)ld;
    const ptrdiff_t st[3] = {(ptrdiff_t)(e->L * e->H) * sd,
                             e->o.bhld ? sd : (ptrdiff_t)e->H * sd,
                             e->o.bhld ? (ptrdiff_t)e->L * sd : sd};
    memcpy(d->x_stride, st, sizeof st);
    memcpy(d->y_stride, st, sizeof st);
    d->pairing = c->variant & V_INTERLEAVED ? PEAK_ROPE_INTERLEAVED : PEAK_ROPE_HALF_SPLIT;
    d->params = prm;
    d->pos0 = e->o.pos0;

    size_t max_pos = e->o.pos0 + e->L - 1;
    if (e->o.pos_kind != POS_NONE) {
        const size_t rows = e->o.pos_stride ? e->B : 1;
        const size_t stride = e->o.pos_stride ? e->o.pos_stride : e->L;
        const size_t count = (rows - 1) * stride + e->L;
        if (e->o.pos_kind == POS_I64)
            e->pos64 = malloc(count * sizeof *e->pos64);
        else
            e->pos32 = malloc(count * sizeof *e->pos32);
        ck_assert(e->pos64 || e->pos32);
        max_pos = 0;
        const uint64_t pmax = e->pos32 && e->o.pos_max > INT32_MAX ? INT32_MAX : e->o.pos_max;
        for (size_t k = 0; k < count; k++) {
            /* past a row's L entries: padding nobody reads */
            const uint64_t v = k % stride < e->L ? peak_test_next(&p->rng) % pmax : 0x7fffffffu;
            if (e->pos64)
                e->pos64[k] = (int64_t)v;
            else
                e->pos32[k] = (int32_t)v;
            max_pos = k % stride < e->L && v > max_pos ? v : max_pos;
        }
        d->positions = e->pos64, d->positions32 = e->pos32;
        d->positions_stride = (ptrdiff_t)e->o.pos_stride;
    }

    /* Each token's cos/sin by a call of its own (rows_independent... holds
       that it is every call's row). */
    e->rows = malloc(e->B * e->L * e->r * sizeof *e->rows);
    ck_assert_ptr_nonnull(e->rows);
    for (size_t b = 0; b < e->B; b++)
        for (size_t l = 0; l < e->L; l++)
            ck_assert_int_eq(peak_rope_cache(e->rows + (b * e->L + l) * e->r, PEAK_F32, 1,
                                             token_position(e, b, l), &prm, NULL),
                             PEAK_OK);
    if (!(c->variant & V_FLY)) {
        const size_t cache_rows = max_pos + 3;
        e->cache = peak_tester_input(p, "cache", cache_rows, e->r, (ptrdiff_t)e->r, 5);
        ck_assert_int_eq(peak_rope_cache(e->cache, PEAK_F32, cache_rows, 0, &prm, NULL), PEAK_OK);
        d->cache = e->cache, d->cache_rows = cache_rows;
    }
    return 1;
}

static peak_status rope_call(peak_tester_problem *p)
{
    const rope_problem *e = p->user;
    return peak_rope_apply(e->y, e->x, &e->desc, NULL);
}

static void rope_oracle_row(const peak_tester_problem *p, size_t buf, size_t t, double *ref)
{
    (void)buf;
    const rope_problem *e = p->user;
    size_t b, l, h;
    row_index(e, t, &b, &l, &h);
    const float *x = peak_tester_before(p, e->x) + t * (size_t)p->buf[0].ld;
    float y[1100];
    ck_assert_uint_le(e->D, sizeof y / sizeof y[0]);
    ref_rotate(y, x, e->rows + (b * e->L + l) * e->r, e->D, e->r, e->desc.pairing);
    for (size_t j = 0; j < e->D; j++)
        ref[j] = (double)y[j];
}

static void rope_teardown(peak_tester_problem *p)
{
    rope_problem *e = p->user;
    if (!e)
        return;
    free(e->pos64);
    free(e->pos32);
    free(e->rows);
    free(e);
}

/* Every tier gives the scalar tier's bits (peak.h).  Base: 2 tokens of 3
   heads at positions 29, 30; every variant at every size. */
static const peak_tester_family rope_family = {
    .name = "rope_apply",
    .setup = rope_setup,
    .call = rope_call,
    .oracle_row = rope_oracle_row,
    .teardown = rope_teardown,
    .same_bits = 1,
    .n_variants = ROPE_VARIANTS,
    .sizes_every_variant = 1,
    .n_aliases = 1,
    .base = {.rows = 6, .variant = 0},
};

static void rope_case(const rope_opts *o, size_t L, size_t d, unsigned variant, size_t gap,
                      size_t misalign, int alias, uint64_t seed)
{
    peak_tester_case c = rope_family.base;
    c.n = d;
    c.rows = o->batch * L * o->heads;
    c.gap = gap;
    c.misalign = misalign;
    c.variant = variant;
    c.alias = alias;
    c.seed = seed;
    c.opts = o;
    peak_tester_check(&rope_family, &c);
}

/* Odd head counts, batches, both layouts, partial rotary with odd extra
   columns (D 80 r 64, D 18 r 8, D 67 r 32), positions from pos0 and from
   arrays of both widths (broadcast and per batch, rows padded), each
   variant, in place and not.  _i: the variant. */
START_TEST(rotation_shapes_layouts_positions)
{
    static const struct {
        size_t d, r;
    } dims[] = {{80, 64}, {18, 8}, {67, 32}, {64, 0}, {128, 0}, {3, 2}, {514, 512}};
    static const size_t heads[] = {1, 3, 5};
    const unsigned v = (unsigned)_i;
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        for (size_t hh = 0; hh < 3; hh++) {
            for (int layout = 0; layout < 2; layout++) {
                for (int pk = 0; pk < 5; pk++) {
                    /* half the grid per variant (a quarter quick), another half
                       for the next: every variant meets every axis value */
                    const size_t every = peak_test_quick() ? 4 : 2;
                    if ((k + hh + (size_t)layout + (size_t)pk + v) % every)
                        continue;
                    rope_opts o = rope_defaults;
                    o.batch = 1 + (k + hh) % 3;
                    o.heads = heads[hh];
                    o.bhld = layout;
                    o.rotary = dims[k].r;
                    o.pos0 = (v & V_FLY) && k % 2 ? ((size_t)1 << 24) - 5 : 3 * k;
                    o.pos_kind = pk == 0 ? POS_NONE : pk <= 2 ? POS_I64 : POS_I32;
                    o.pos_max = (v & V_FLY) && pk % 2 ? PEAK_MAX_POSITION - 1 : 90;
                    const size_t L = 1 + (k * 7 + hh * 3) % 9;
                    o.pos_stride = pk == 0 || pk == 1 || pk == 3 ? 0 : L + (size_t)pk % 3;
                    o.set = (int)((k + hh) % 2 ? 6 : 0);
                    rope_case(&o, L, dims[k].d, v, (k + hh) % 3, k % 16,
                              (int)((hh + (size_t)layout) % 2), 0x9000 + k * 31 + hh);
                }
            }
        }
    }
}
END_TEST

/* Out-of-place outputs of 16 MiB and more (rope.h, PEAK_ROPE_STREAM_BYTES)
   are written with non-temporal stores wherever a head's rotated part
   starts on a vector boundary: 4096 tokens of 8 heads.  _i 0: half-split
   from a cache, y 64-byte aligned (the tester puts y 3 floats after the
   case's misalignment), so every head streams; 1: interleaved on the fly,
   the same; 2: head_dim 129 (rotary 128, a pass-through column), rows 132
   floats apart: every second or fourth head on a boundary; 3: in place,
   nothing streams.  Quick: 64 tokens, below the threshold. */
START_TEST(streaming_outputs)
{
    rope_opts o = rope_defaults;
    o.heads = 8;
    const size_t L = peak_test_quick() ? 64 : 4096;
    static const unsigned variant[] = {0, V_INTERLEAVED | V_FLY, 0, 0};
    rope_case(&o, L, _i == 2 ? 129 : 128, variant[_i], _i == 2 ? 3 : 0, 13, _i == 3,
              0x9900 + (uint64_t)_i);
}
END_TEST

/* ---- strided layouts with canaries --------------------------------------------------- */

typedef struct layout {
    const char *name;
    ptrdiff_t st[3]; /* [b, l, h] */
} layout;

static size_t extent(const ptrdiff_t st[3], size_t B, size_t L, size_t H, size_t D)
{
    return (B - 1) * (size_t)st[0] + (L - 1) * (size_t)st[1] + (H - 1) * (size_t)st[2] + D;
}

/* x in one padded layout, y in another (a KV-cache slot, say), or in
   place; every float of y outside its rows keeps the canary, x unchanged,
   the rows the reference's bits, this tier the scalar tier's. */
static void strided_case(size_t B, size_t L, size_t H, size_t D, size_t r, const layout *lx,
                         const layout *ly, int in_place, peak_rope_pairing pairing, int fly,
                         peak_rope_mode mode, uint64_t seed)
{
    const size_t nx = extent(lx->st, B, L, H, D);
    const size_t ny = in_place ? nx : extent(ly->st, B, L, H, D);
    float *x = peak_test_alloc(nx, seed % 16), *y = in_place ? x : peak_test_alloc(ny, 7);
    unsigned char *is_row = calloc(ny, 1);
    ck_assert_ptr_nonnull(is_row);
    const ptrdiff_t *ys = in_place ? lx->st : ly->st;
    uint64_t rng = seed;
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < L; l++)
            for (size_t h = 0; h < H; h++) {
                peak_test_fill_uniform(x + b * lx->st[0] + l * lx->st[1] + h * lx->st[2], D, &rng,
                                       -3.0f, 3.0f);
                memset(is_row + b * ys[0] + l * ys[1] + h * ys[2], 1, D);
            }
    float *x0 = malloc(nx * sizeof *x0);
    ck_assert_ptr_nonnull(x0);
    memcpy(x0, x, nx * sizeof *x0);
    const size_t pos0 = 40;
    const peak_rope_params prm = param_set(10, r, 5e5, mode);
    float *cache = NULL;
    peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
    d.batch = B, d.seq_len = L, d.heads = H, d.head_dim = D;
    memcpy(d.x_stride, lx->st, sizeof d.x_stride);
    memcpy(d.y_stride, ys, sizeof d.y_stride);
    d.pairing = pairing;
    d.params = prm;
    d.pos0 = pos0;
    if (!fly) {
        cache = peak_test_alloc((pos0 + L) * r, 3);
        ck_assert_int_eq(peak_rope_cache(cache, PEAK_F32, pos0 + L, 0, &prm, NULL), PEAK_OK);
        d.cache = cache, d.cache_rows = pos0 + L;
    }
    ck_assert_int_eq(peak_rope_apply(y, x, &d, NULL), PEAK_OK);
    char what[200];
    snprintf(what, sizeof what, "B %zu L %zu H %zu D %zu r %zu x %s y %s %s %s %s", B, L, H, D, r,
             lx->name, in_place ? "in place" : ly->name, pairing ? "interleaved" : "half",
             fly ? "fly" : "cache", mode_names[mode]);
    float *row = peak_test_alloc(r, 0), *want = malloc(D * sizeof *want);
    ck_assert_ptr_nonnull(want);
    for (size_t l = 0; l < L; l++) {
        ck_assert_int_eq(peak_rope_cache(row, PEAK_F32, 1, pos0 + l, &prm, NULL), PEAK_OK);
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++) {
                ref_rotate(want, x0 + b * lx->st[0] + l * lx->st[1] + h * lx->st[2], row, D, r,
                           pairing);
                const float *got = y + b * ys[0] + l * ys[1] + h * ys[2];
                for (size_t j = 0; j < D; j++)
                    CHECK(peak_test_bytes_equal(&got[j], &want[j], sizeof(float)),
                          "%s: %s: (b %zu, l %zu, h %zu)[%zu] = %a, want %a", TIER, what, b, l, h,
                          j, (double)got[j], (double)want[j]);
            }
    }
    for (size_t k = 0; k < ny; k++)
        if (!is_row[k])
            CHECK(in_place ? peak_test_bytes_equal(&y[k], &x0[k], sizeof(float))
                           : peak_test_is_canary(y[k]),
                  "%s: %s: float %zu of y outside every row written", TIER, what, k);
    if (!in_place)
        CHECK(peak_test_bytes_equal(x, x0, nx * sizeof *x), "%s: %s: x changed", TIER, what);
    /* and the scalar tier's bits, gaps included */
    if (peak_test_isa != PEAK_ISA_SCALAR) {
        float *keep = malloc(ny * sizeof *keep);
        ck_assert_ptr_nonnull(keep);
        memcpy(keep, y, ny * sizeof *keep);
        if (in_place)
            memcpy(x, x0, nx * sizeof *x);
        else
            peak_test_fill_canary(y, ny);
        ck_assert_int_eq(peak_isa_force(PEAK_ISA_SCALAR), PEAK_OK);
        const peak_status s = peak_rope_apply(y, x, &d, NULL);
        ck_assert_int_eq(peak_isa_force(peak_test_isa), PEAK_OK);
        ck_assert_int_eq(s, PEAK_OK);
        expect_same_floats(keep, y, ny, ny, what);
        free(keep);
    }
    peak_test_free(row);
    free(want);
    free(x0);
    free(is_row);
    peak_test_free(cache);
    if (!in_place)
        peak_test_free(y);
    peak_test_free(x);
}

/* _i: pairing * 4 + fly * 2 + mode. */
START_TEST(padded_strides_keep_canaries)
{
    const size_t B = 2, L = 5, H = 3;
    static const struct {
        size_t d, r;
    } dims[] = {{80, 64}, {18, 8}, {64, 64}, {7, 6}};
    for (size_t k = 0; k < 4; k++) {
        const size_t D = dims[k].d, r = dims[k].r;
        /* [B, L, H, D] and [B, H, L, D], packed and padded at every level */
        const size_t sh = D + 3, sl = H * sh + 5, sb = L * sl + 11;
        const size_t sl2 = D + 1, sh2 = L * sl2 + 2, sb2 = H * sh2 + 9;
        const layout lay[4] = {
            {"[B,L,H,D] packed", {(ptrdiff_t)(L * H * D), (ptrdiff_t)(H * D), (ptrdiff_t)D}},
            {"[B,H,L,D] packed", {(ptrdiff_t)(H * L * D), (ptrdiff_t)D, (ptrdiff_t)(L * D)}},
            {"[B,L,H,D] padded", {(ptrdiff_t)sb, (ptrdiff_t)sl, (ptrdiff_t)sh}},
            {"[B,H,L,D] padded", {(ptrdiff_t)sb2, (ptrdiff_t)sl2, (ptrdiff_t)sh2}},
        };
        for (size_t a = 0; a < 4; a++) {
            for (size_t b = 0; b < 4; b++)
                strided_case(B, L, H, D, r, &lay[a], &lay[b], 0, (peak_rope_pairing)(_i / 4),
                             _i / 2 % 2, (peak_rope_mode)(_i % 2), 0x57000 + 4 * a + b);
            strided_case(B, L, H, D, r, &lay[a], NULL, 1, (peak_rope_pairing)(_i / 4), _i / 2 % 2,
                         (peak_rope_mode)(_i % 2), 0x57100 + a);
        }
        /* x broadcast (stride 0) over the batch and the positions: one
           token's heads, rotated to every position (peak.h) */
        const layout bcast = {"x broadcast over b and l", {0, 0, (ptrdiff_t)D}};
        strided_case(B, L, H, D, r, &bcast, &lay[2], 0, (peak_rope_pairing)(_i / 4), _i / 2 % 2,
                     (peak_rope_mode)(_i % 2), 0x57200 + k);
    }
}
END_TEST

/* ---- cache and on the fly: the same bits for every scheme ---------------------------- */

/* _i: the parameter set; both modes, both pairings, pos0 and positions
   arrays (per batch), [B 2, L 70, H 2, D r + 2]: on the fly and from a
   cache of 600 rows, the same bytes. */
START_TEST(fly_equals_cache_every_scheme)
{
    const size_t dims[] = {4, 24, 128, 512};
    const size_t B = 2, L = 70, H = 2, rows = 600;
    for (size_t k = 0; k < 4; k++) {
        if (peak_test_quick() && (k + (size_t)_i) % 2)
            continue;
        const size_t r = dims[k], D = r + 2, n = B * L * H * D;
        float *x = peak_test_alloc(n, 1), *y1 = peak_test_alloc(n, 2), *y2 = peak_test_alloc(n, 3);
        float *cache = peak_test_alloc(rows * r, 0);
        int64_t pos[2 * 75];
        uint64_t rng = 0xf1ca + (uint64_t)_i;
        peak_test_fill_uniform(x, n, &rng, -1.0f, 1.0f);
        for (size_t t = 0; t < 2 * 75; t++)
            pos[t] = (int64_t)(peak_test_next(&rng) % rows);
        for (int mode = 0; mode < 2; mode++) {
            const peak_rope_params prm = param_set(_i, r, 1e4, (peak_rope_mode)mode);
            ck_assert_int_eq(peak_rope_cache(cache, PEAK_F32, rows, 0, &prm, NULL), PEAK_OK);
            for (int v = 0; v < 4; v++) {
                peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
                d.batch = B, d.seq_len = L, d.heads = H, d.head_dim = D;
                const ptrdiff_t st[3] = {(ptrdiff_t)(L * H * D), (ptrdiff_t)(H * D), (ptrdiff_t)D};
                memcpy(d.x_stride, st, sizeof st);
                memcpy(d.y_stride, st, sizeof st);
                d.pairing = (peak_rope_pairing)(v % 2);
                d.params = prm;
                d.pos0 = rows - L - 3;
                if (v / 2)
                    d.positions = pos, d.positions_stride = 75;
                peak_test_fill_canary(y1, n);
                peak_test_fill_canary(y2, n);
                ck_assert_int_eq(peak_rope_apply(y1, x, &d, NULL), PEAK_OK);
                d.cache = cache, d.cache_rows = rows;
                ck_assert_int_eq(peak_rope_apply(y2, x, &d, NULL), PEAK_OK);
                char what[160];
                snprintf(what, sizeof what, "%s %s r %zu %s %s: on the fly vs cache",
                         set_names[_i], mode_names[mode], r, v % 2 ? "interleaved" : "half",
                         v / 2 ? "positions" : "pos0");
                expect_same_floats(y1, y2, n, D, what);
            }
        }
        peak_test_free(x);
        peak_test_free(y1);
        peak_test_free(y2);
        peak_test_free(cache);
    }
}
END_TEST

/* ---- HF's rotations --------------------------------------------------------------- */

typedef struct hf_apply {
    char name[64];
    peak_rope_pairing pairing;
    size_t B, H, L, D, r;
    size_t pos[16];
    float *x, *cos, *sin, *y;
} hf_apply;

static float *hf_floats_line(size_t n, const char *what)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    ck_assert_ptr_nonnull(v);
    hex_floats(v, n, what);
    return v;
}

static size_t hf_load_apply(hf_apply *cs, size_t max)
{
    FILE *f = open_data("rope-hf-apply.txt");
    char *line = NULL;
    size_t cap = 0, n = 0;
    hf_apply *c = NULL;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#')
            continue;
        const char *key = strtok(line, " \n");
        if (!key)
            continue;
        if (strcmp(key, "case") == 0) {
            CHECK(n < max, "rope-hf-apply.txt: more than %zu cases", max);
            c = &cs[n];
            memset(c, 0, sizeof *c);
            const char *name = strtok(NULL, " \n");
            snprintf(c->name, sizeof c->name, "%s", name ? name : "?");
            continue;
        }
        CHECK(c != NULL, "rope-hf-apply.txt: '%s' before the first case", key);
        if (strcmp(key, "pairing") == 0) {
            const char *s = strtok(NULL, " \n");
            CHECK(s && (strcmp(s, "half_split") == 0 || strcmp(s, "interleaved") == 0),
                  "%s: pairing", c->name);
            c->pairing = strcmp(s, "interleaved") == 0 ? PEAK_ROPE_INTERLEAVED
                                                       : PEAK_ROPE_HALF_SPLIT;
        } else if (strcmp(key, "shape") == 0) {
            c->B = next_size(c->name), c->H = next_size(c->name);
            c->L = next_size(c->name), c->D = next_size(c->name);
            CHECK(c->L <= 16, "%s: L %zu", c->name, c->L);
        } else if (strcmp(key, "rotary_dim") == 0) {
            c->r = next_size(c->name);
        } else if (strcmp(key, "positions") == 0) {
            for (size_t l = 0; l < c->L; l++)
                c->pos[l] = next_size(c->name);
        } else if (strcmp(key, "x") == 0) {
            c->x = hf_floats_line(c->B * c->H * c->L * c->D, c->name);
        } else if (strcmp(key, "y") == 0) {
            c->y = hf_floats_line(c->B * c->H * c->L * c->D, c->name);
        } else if (strcmp(key, "cos") == 0) {
            c->cos = hf_floats_line(c->L * c->r / 2, c->name);
        } else if (strcmp(key, "sin") == 0) {
            c->sin = hf_floats_line(c->L * c->r / 2, c->name);
        } else if (strcmp(key, "end") == 0) {
            CHECK(c->x && c->y && c->cos && c->sin && c->r >= 2 && c->r <= c->D,
                  "%s: incomplete case", c->name);
            n++;
            c = NULL;
        } else {
            ck_abort_msg("rope-hf-apply.txt: unknown key '%s'", key);
        }
    }
    free(line);
    fclose(f);
    CHECK(c == NULL && n >= 4, "rope-hf-apply.txt: %zu complete cases", n);
    return n;
}

/* HF's y bit for bit, from HF's cos/sin put in a cache at HF's positions:
   out of place, in place, int64 and int32 positions (one row for every
   batch entry: stride 0), x stored [B, H, L, D] as HF's. */
START_TEST(rotation_matches_transformers)
{
    hf_apply cs[8];
    const size_t n = hf_load_apply(cs, 8);
    for (size_t k = 0; k < n; k++) {
        const hf_apply *c = &cs[k];
        const size_t half = c->r / 2, total = c->B * c->H * c->L * c->D;
        size_t rows = 0;
        for (size_t l = 0; l < c->L; l++)
            rows = c->pos[l] + 1 > rows ? c->pos[l] + 1 : rows;
        float *cache = peak_test_alloc(rows * c->r, 0);
        for (size_t l = 0; l < c->L; l++) {
            memcpy(cache + c->pos[l] * c->r, c->cos + l * half, half * sizeof(float));
            memcpy(cache + c->pos[l] * c->r + half, c->sin + l * half, half * sizeof(float));
        }
        int64_t p64[16];
        int32_t p32[16];
        for (size_t l = 0; l < c->L; l++)
            p64[l] = (int64_t)c->pos[l], p32[l] = (int32_t)c->pos[l];
        peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
        d.batch = c->B, d.seq_len = c->L, d.heads = c->H, d.head_dim = c->D;
        const ptrdiff_t st[3] = {(ptrdiff_t)(c->H * c->L * c->D), (ptrdiff_t)c->D,
                                 (ptrdiff_t)(c->L * c->D)};
        memcpy(d.x_stride, st, sizeof st);
        memcpy(d.y_stride, st, sizeof st);
        d.pairing = c->pairing;
        d.params.rotary_dim = c->r;
        d.cache = cache, d.cache_rows = rows;
        float *y = peak_test_alloc(total, 1);
        for (int how = 0; how < 3; how++) {
            d.positions = how == 2 ? NULL : p64;
            d.positions32 = how == 2 ? p32 : NULL;
            d.positions_stride = 0;
            const int in_place = how == 1;
            if (in_place)
                memcpy(y, c->x, total * sizeof *y);
            else
                peak_test_fill_canary(y, total);
            ck_assert_int_eq(peak_rope_apply(y, in_place ? y : c->x, &d, NULL), PEAK_OK);
            for (size_t e = 0; e < total; e++)
                CHECK(peak_test_bytes_equal(&y[e], &c->y[e], sizeof(float)),
                      "%s: HF %s (%s): y[b %zu, h %zu, l %zu, %zu] = %a, HF %a", TIER, c->name,
                      how == 0 ? "int64" : how == 1 ? "in place" : "int32",
                      e / (c->H * c->L * c->D), e / (c->L * c->D) % c->H, e / c->D % c->L,
                      e % c->D, (double)y[e], (double)c->y[e]);
        }
        /* and the reference rotation here agrees with HF */
        float *ref = malloc(c->D * sizeof *ref), *row = malloc(c->r * sizeof *row);
        ck_assert(ref && row);
        for (size_t e = 0; e < total; e += c->D) {
            const size_t l = e / c->D % c->L;
            memcpy(row, cache + c->pos[l] * c->r, c->r * sizeof *row);
            ref_rotate(ref, c->x + e, row, c->D, c->r, c->pairing);
            CHECK(peak_test_bytes_equal(ref, c->y + e, c->D * sizeof *ref),
                  "%s: the reference rotation differs from HF's", c->name);
        }
        free(ref);
        free(row);
        peak_test_free(y);
        peak_test_free(cache);
    }
    for (size_t k = 0; k < n; k++) {
        free(cs[k].x), free(cs[k].y), free(cs[k].cos), free(cs[k].sin);
    }
}
END_TEST

/* ---- decode: one token is the prefill's token -------------------------------------- */

/* _i: mode * 4 + fly * 2 + pairing.  A prefill of B 2 sequences of 37
   tokens at different positions (positions per batch), then each token
   alone: by pos0 (batch 1), and by positions {p_b} for the batch of 2
   (int64 and int32): the prefill's bits. */
START_TEST(decode_equals_prefill)
{
    const size_t B = 2, L = 37, H = 3, D = 80, r = 64;
    const peak_rope_mode mode = (peak_rope_mode)(_i / 4);
    const int fly = _i / 2 % 2;
    const peak_rope_pairing pairing = (peak_rope_pairing)(_i % 2);
    const size_t starts[][2] = {
        {0, 5}, {1000, 4093}, {PEAK_MAX_POSITION - L, ((size_t)1 << 24) - 20}};
    const int sets[] = {0, 6, 10};
    for (size_t s = 0; s < 3; s++) {
        if (!fly && s == 2) /* a cache to 2^32: no */
            continue;
        const peak_rope_params prm = param_set(sets[s], r, 5e5, mode);
        const size_t n = B * L * H * D;
        float *x = peak_test_alloc(n, 1), *y = peak_test_alloc(n, 2);
        float *y1 = peak_test_alloc(B * H * D, 3);
        uint64_t rng = 0xdec0de + (uint64_t)s;
        peak_test_fill_uniform(x, n, &rng, -1.0f, 1.0f);
        int64_t pos[2 * 37];
        for (size_t b = 0; b < B; b++)
            for (size_t l = 0; l < L; l++)
                pos[b * L + l] = (int64_t)(starts[s][b] + l);
        const size_t rows = fly ? 0 : starts[s][1] + L;
        float *cache = fly ? NULL : peak_test_alloc(rows * r, 0);
        if (cache)
            ck_assert_int_eq(peak_rope_cache(cache, PEAK_F32, rows, 0, &prm, NULL), PEAK_OK);
        peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
        d.batch = B, d.seq_len = L, d.heads = H, d.head_dim = D;
        const ptrdiff_t st[3] = {(ptrdiff_t)(L * H * D), (ptrdiff_t)(H * D), (ptrdiff_t)D};
        memcpy(d.x_stride, st, sizeof st);
        memcpy(d.y_stride, st, sizeof st);
        d.pairing = pairing;
        d.params = prm;
        d.cache = cache, d.cache_rows = rows;
        d.positions = pos, d.positions_stride = (ptrdiff_t)L;
        ck_assert_int_eq(peak_rope_apply(y, x, &d, NULL), PEAK_OK);

        for (size_t l = 0; l < L; l++) {
            /* each sequence alone, by pos0 */
            for (size_t b = 0; b < B; b++) {
                peak_rope_desc one = d;
                one.batch = 1, one.seq_len = 1;
                one.positions = NULL, one.positions_stride = 0;
                one.pos0 = starts[s][b] + l;
                const float *xt = x + b * (size_t)st[0] + l * (size_t)st[1];
                ck_assert_int_eq(peak_rope_apply(y1, xt, &one, NULL), PEAK_OK);
                CHECK(peak_test_bytes_equal(y1, y + b * (size_t)st[0] + l * (size_t)st[1],
                                            H * D * sizeof(float)),
                      "%s %s %s %s %s: token (%zu, %zu) at pos0 %zu differs from the prefill",
                      TIER, set_names[sets[s]], mode_names[mode], fly ? "fly" : "cache",
                      pairing ? "interleaved" : "half", b, l, one.pos0);
            }
            /* the batch of two, by positions {p_0, p_1}: x and y token l of
               each sequence (the batch stride still st[0]) */
            int64_t p64[2] = {pos[l], pos[L + l]};
            int32_t p32[2] = {(int32_t)pos[l], (int32_t)pos[L + l]};
            const int n_kinds = starts[s][0] + l > INT32_MAX ? 1 : 2;
            for (int kind = 0; kind < n_kinds; kind++) {
                peak_rope_desc two = d;
                two.seq_len = 1;
                two.positions = kind ? NULL : p64;
                two.positions32 = kind ? p32 : NULL;
                two.positions_stride = 1;
                const ptrdiff_t ys[3] = {(ptrdiff_t)(H * D), 0, (ptrdiff_t)D};
                memcpy(two.y_stride, ys, sizeof ys);
                peak_test_fill_canary(y1, B * H * D);
                ck_assert_int_eq(peak_rope_apply(y1, x + l * (size_t)st[1], &two, NULL), PEAK_OK);
                for (size_t b = 0; b < B; b++)
                    CHECK(peak_test_bytes_equal(y1 + b * H * D,
                                                y + b * (size_t)st[0] + l * (size_t)st[1],
                                                H * D * sizeof(float)),
                          "%s %s %s %s: token %zu of sequence %zu by positions (%s) differs", TIER,
                          set_names[sets[s]], mode_names[mode], fly ? "fly" : "cache", l, b,
                          kind ? "int32" : "int64");
            }
        }
        peak_test_free(x);
        peak_test_free(y);
        peak_test_free(y1);
        peak_test_free(cache);
    }
}
END_TEST

/* ---- 16-bit caches ------------------------------------------------------------------ */

static const peak_dtype half_types[2] = {PEAK_BF16, PEAK_F16};


/* Largest (|16-bit - exact| - half an ULP of the type) / A, per type. */
static double half_excess[2];

/* A 16-bit EXACT cache of rows pos0 .. pos0 + n - 1 against the oracle:
   within half an ULP of the type (at the exact value) plus 2^-24 A, A =
   max(1, attention factor) (peak.h). */
static void check_half_exact(peak_dtype t, const peak_rope_params *prm, size_t pos0, size_t n,
                             const char *what)
{
    oracle o;
    oracle_init(&o, prm);
    if (o.ambiguous)
        ck_abort_msg("%s r %zu: YaRN ramp end within 1e-9 of an integer", what, prm->rotary_dim);
    const size_t r = prm->rotary_dim;
    const long double a = o.af > 1.0L ? o.af : 1.0L;
    uint16_t *h = peak_test_half_alloc(n * r);
    ck_assert_int_eq(peak_rope_cache(h, t, n, pos0, prm, NULL), PEAK_OK);
    CHECK(peak_test_half_guards_intact(h, n * r), "%s %s %s r %zu: wrote outside the cache", TIER,
          peak_test_type_name(t), what, r);
    double *excess = &half_excess[t == PEAK_F16];
    for (size_t k = 0; k < n; k++)
        for (size_t c = 0; c < r; c++) {
            const size_t i = c < o.n ? c : c - o.n;
            const long double ang = (long double)(pos0 + k) * o.w[i];
            const long double exact = o.af * (c < o.n ? cosl(ang) : sinl(ang));
            const double got = peak_test_half_value(t, h[k * r + c]);
            const double e = (double)fabsl((long double)got - exact);
            const double half = 0.5 * peak_test_half_ulp(t, (double)exact);
            const double slack = (double)(a * 0x1p-24L);
            CHECK(e <= half + slack, "%s %s %s r %zu base %g p %zu col %zu: %a, exact %La, "
                  "error %.3g > half ULP %.3g + %.3g", TIER, peak_test_type_name(t), what, r,
                  prm->base, pos0 + k, c, got, exact, e, half, slack);
            if ((e - half) / (double)a > *excess)
                *excess = (e - half) / (double)a;
        }
    peak_test_half_free(h);
}

/* The schemes of the 16-bit accuracy test: none, attention factor 1.5,
   YaRN (its own factor 1.34, then 0.8 given), Llama 3, LongRoPE (1.19). */
static const int half_sets[] = {0, 1, 6, 9, 10, 11};
#define N_HALF_SETS (sizeof half_sets / sizeof half_sets[0])

/* _i: type * N_HALF_SETS + set. */
START_TEST(half_cache_exact_within_half_ulp)
{
    const peak_dtype t = half_types[_i / (int)N_HALF_SETS];
    const int set = half_sets[_i % (int)N_HALF_SETS];
    const int quick = peak_test_quick();
    const size_t dims[] = {2, 6, 64, 128, 512};
    const double bases[] = {1e4, 5e5};
    size_t pos[12] = {0, 1, 4095, 65535, 131071, 1000000, (1u << 20) - 1};
    size_t n_pos = 7;
    uint64_t rng = 0x20be1600u + (uint64_t)_i;
    while (n_pos < (quick ? 8u : 12u))
        pos[n_pos++] = (size_t)(peak_test_next(&rng) % (1u << 20));
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t b = 0; b < 2; b++) {
            if ((quick && (d + b) % 2) || !set_takes(set, dims[d]))
                continue;
            const peak_rope_params prm = param_set(set, dims[d], bases[b], PEAK_ROPE_EXACT);
            for (size_t k = 0; k < n_pos; k++)
                check_half_exact(t, &prm, pos[k], 1, set_names[set]);
            check_half_exact(t, &prm, 4070, quick ? 8 : 40, set_names[set]);
            check_half_exact(t, &prm, (1u << 20) - 300, quick ? 20 : 300, set_names[set]);
        }
    printf("%s rope %s %-40s max (|16-bit - oracle| - half ULP) / A = %.3g (2^%.2f)\n", TIER,
           peak_test_type_name(t), set_names[set], half_excess[t == PEAK_F16],
           log2(half_excess[t == PEAK_F16]));
}
END_TEST

/* The shapes of the bit-for-bit test: rows that fit the staging block
   whole (8192 floats an item), frequency windows with a short last one
   (rotary_dim 66, 130), several items (256 rows each), positions near
   2^24 and 2^32. */
static const struct {
    size_t n, r, pos0;
} half_shapes[] = {
    {1, 2, 0},       {7, 6, 29},         {100, 64, 5},      {300, 64, 4000},
    {600, 66, 7},    {257, 130, 100000}, {1000, 128, 3},    {257, 512, 16776959},
    {3, 512, 4294967293u}, {5000, 24, 0},
};

/* _i: mode * 2 + type.  Every 16-bit cache is the float32 cache of the same
   call rounded once (peak_convert's bits), for every scheme. */
START_TEST(half_cache_is_converted_f32)
{
    const peak_dtype t = half_types[_i % 2];
    const peak_rope_mode mode = (peak_rope_mode)(_i / 2);
    size_t calls = 0;
    for (int set = 0; set < N_SETS; set++)
        for (size_t k = 0; k < sizeof half_shapes / sizeof half_shapes[0]; k++) {
            const size_t n = half_shapes[k].n, r = half_shapes[k].r, pos0 = half_shapes[k].pos0;
            if (!set_takes(set, r) || (peak_test_quick() && (set + (int)k) % 3))
                continue;
            const peak_rope_params prm = param_set(set, r, k % 2 ? 1e6 : 1e4, mode);
            float *f = peak_test_alloc(n * r, 0);
            uint16_t *want = peak_test_half_alloc(n * r), *got = peak_test_half_alloc(n * r);
            ck_assert_int_eq(peak_rope_cache(f, PEAK_F32, n, pos0, &prm, NULL), PEAK_OK);
            ck_assert_int_eq(peak_convert(want, t, f, PEAK_F32, n * r, NULL), PEAK_OK);
            ck_assert_int_eq(peak_rope_cache(got, t, n, pos0, &prm, NULL), PEAK_OK);
            CHECK(peak_test_half_guards_intact(got, n * r), "%s %s %s %s %zu x %zu: wrote outside the "
                  "cache", TIER, peak_test_type_name(t), set_names[set], mode_names[mode], n, r);
            for (size_t e = 0; e < n * r; e++)
                CHECK(got[e] == want[e],
                      "%s %s %s %s %zu x %zu from %zu: row %zu col %zu is 0x%04x, the "
                      "converted float32 value (%a) 0x%04x", TIER, peak_test_type_name(t),
                      set_names[set], mode_names[mode], n, r, pos0, e / r, e % r, got[e],
                      (double)f[e], want[e]);
            peak_test_free(f);
            peak_test_half_free(want);
            peak_test_half_free(got);
            calls++;
        }
    printf("%s rope %s %s: %zu caches the converted float32 bits\n", TIER,
           peak_test_type_name(t), mode_names[mode], calls);
}
END_TEST

/* An attention factor beyond float16's range: its values round to inf with
   their sign (from 65520 on) and to bfloat16 as any other, both as
   peak_convert rounds the float32 cache; _i: the mode. */
START_TEST(half_cache_large_attention_factor)
{
    peak_rope_params prm = param_set(0, 64, 1e4, (peak_rope_mode)_i);
    prm.attention_factor = 1e5;
    const size_t n = 300, r = 64;
    float *f = peak_test_alloc(n * r, 0);
    ck_assert_int_eq(peak_rope_cache(f, PEAK_F32, n, 7, &prm, NULL), PEAK_OK);
    for (size_t k = 0; k < 2; k++) {
        uint16_t *want = peak_test_half_alloc(n * r), *got = peak_test_half_alloc(n * r);
        ck_assert_int_eq(peak_convert(want, half_types[k], f, PEAK_F32, n * r, NULL), PEAK_OK);
        ck_assert_int_eq(peak_rope_cache(got, half_types[k], n, 7, &prm, NULL), PEAK_OK);
        size_t infs = 0;
        for (size_t e = 0; e < n * r; e++) {
            CHECK(got[e] == want[e], "%s %s af 1e5: element %zu is 0x%04x, want 0x%04x", TIER,
                  peak_test_type_name(half_types[k]), e, got[e], want[e]);
            infs += isinf(peak_test_half_value(half_types[k], got[e])) != 0;
        }
        CHECK(half_types[k] == PEAK_BF16 ? infs == 0 : infs > n * r / 4,
              "%s %s af 1e5: %zu infinities", TIER, peak_test_type_name(half_types[k]), infs);
        CHECK(peak_test_half_guards_intact(got, n * r), "%s: wrote outside the cache", TIER);
        peak_test_half_free(want);
        peak_test_half_free(got);
    }
    peak_test_free(f);
}
END_TEST

/* ---- invalid arguments ----------------------------------------------------------- */

/* One arena holds x, y, the cache and the positions, so that every
   pointer a rejected call might write through lies in it: it must be the
   same bytes afterwards. */
enum { AB = 2, AL = 3, AH = 2, AD = 10, AR = 8, AROWS = 16 };
enum { A_X = 0, A_Y = 128, A_CACHE = 256, A_POS = 256 + AROWS * AR, A_N = A_POS + 160 };

typedef struct arena {
    float *m;
    float *x, *y, *cache;
    int64_t *pos;
    float snap[A_N];
} arena;

static void arena_init(arena *a)
{
    a->m = peak_test_alloc(A_N, 0);
    a->x = a->m + A_X, a->y = a->m + A_Y, a->cache = a->m + A_CACHE;
    a->pos = (int64_t *)(void *)(a->m + A_POS);
    uint64_t rng = 11;
    peak_test_fill_uniform(a->x, AB * AL * AH * AD, &rng, -1.0f, 1.0f);
    peak_rope_params p = PEAK_ROPE_PARAMS_DEFAULT;
    p.rotary_dim = AR;
    ck_assert_int_eq(peak_rope_cache(a->cache, PEAK_F32, AROWS, 0, &p, NULL), PEAK_OK);
    for (size_t k = 0; k < AB * AL; k++)
        a->pos[k] = (int64_t)(k % AROWS);
    memcpy(a->snap, a->m, sizeof a->snap);
}

static void expect_untouched(const arena *a, const char *what)
{
    if (peak_test_bytes_equal(a->m, a->snap, sizeof a->snap))
        return;
    size_t k = 0;
    while (peak_test_bytes_equal(&a->m[k], &a->snap[k], sizeof(float)))
        k++;
    ck_abort_msg("%s: %s: rejected, but float %zu of the arena changed", TIER, what, k);
}

static peak_rope_desc valid_desc(const arena *a)
{
    peak_rope_desc d = PEAK_ROPE_DESC_DEFAULT;
    d.batch = AB, d.seq_len = AL, d.heads = AH, d.head_dim = AD;
    const ptrdiff_t st[3] = {AL * AH * AD, AH * AD, AD};
    memcpy(d.x_stride, st, sizeof st);
    memcpy(d.y_stride, st, sizeof st);
    d.params.rotary_dim = AR;
    d.cache = a->cache, d.cache_rows = AROWS;
    d.pos0 = 2;
    return d;
}

static void apply_rejected(arena *a, const char *what, peak_status want, float *y, const float *x,
                           const peak_rope_desc *d)
{
    const peak_status got = peak_rope_apply(y, x, d, NULL);
    CHECK(got == want, "%s: apply, %s: status %d, want %d", TIER, what, (int)got, (int)want);
    expect_untouched(a, what);
}

static void cache_rejected_typed(arena *a, const char *what, peak_status want, void *cache,
                                 peak_dtype type, size_t n_pos, size_t pos0,
                                 const peak_rope_params *p)
{
    const peak_status got = peak_rope_cache(cache, type, n_pos, pos0, p, NULL);
    CHECK(got == want, "%s: cache (%s), %s: status %d, want %d", TIER,
          peak_test_type_name(type), what, (int)got, (int)want);
    expect_untouched(a, what);
}

static void cache_rejected(arena *a, const char *what, peak_status want, float *cache,
                           size_t n_pos, size_t pos0, const peak_rope_params *p)
{
    const peak_status got = peak_rope_cache(cache, PEAK_F32, n_pos, pos0, p, NULL);
    CHECK(got == want, "%s: cache, %s: status %d, want %d", TIER, what, (int)got, (int)want);
    expect_untouched(a, what);
    /* the same params on the fly: the same verdict (a positions check
       aside) */
    if (n_pos == 1 && pos0 == 0 && cache == a->y && p && want == PEAK_ERR_INVALID_ARG) {
        peak_rope_desc d = valid_desc(a);
        d.cache = NULL, d.cache_rows = 0, d.params = *p;
        d.head_dim = p->rotary_dim > AD || p->rotary_dim == 0 ? AD : p->rotary_dim + 2;
        d.batch = 1, d.seq_len = 1, d.heads = 1;
        d.pos0 = 0;
        apply_rejected(a, what, want, a->y, a->x, &d);
    }
}

/* Each scheme's parameters out of their documented ranges. */
START_TEST(invalid_params)
{
    arena a;
    arena_init(&a);
    const peak_status inval = PEAK_ERR_INVALID_ARG;
    const double bad[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -1.0};
    const double below_one[] = {0.5, 0.999999};
    char what[128];
    peak_rope_params ok = PEAK_ROPE_PARAMS_DEFAULT;
    ok.rotary_dim = AR;
    peak_rope_params p = ok;

    cache_rejected(&a, "NULL cache", inval, NULL, 1, 0, &ok);
    cache_rejected(&a, "NULL params", inval, a.y, 1, 0, NULL);
    cache_rejected(&a, "n_pos 0", inval, a.y, 0, 0, &ok);
    const size_t bad_r[] = {0, 1, 3, 7, 511, 513, 514, 1024, SIZE_MAX};
    for (size_t k = 0; k < sizeof bad_r / sizeof bad_r[0]; k++) {
        p = ok;
        p.rotary_dim = bad_r[k];
        snprintf(what, sizeof what, "rotary_dim %zu", bad_r[k]);
        cache_rejected(&a, what, inval, a.y, 1, 0, &p);
    }
    p = ok, p.mode = (peak_rope_mode)2;
    cache_rejected(&a, "mode 2", inval, a.y, 1, 0, &p);
    p = ok, p.mode = (peak_rope_mode)-1;
    cache_rejected(&a, "mode -1", inval, a.y, 1, 0, &p);
    p = ok, p.scaling = (peak_rope_scaling)7;
    cache_rejected(&a, "scaling 7", inval, a.y, 1, 0, &p);
    p = ok, p.scaling = (peak_rope_scaling)-1;
    cache_rejected(&a, "scaling -1", inval, a.y, 1, 0, &p);

    for (int mode = 0; mode < 2; mode++) {
        for (int set = 0; set < N_SETS; set++) {
            const peak_rope_params sp = param_set(set, AR, 1e4, (peak_rope_mode)mode);
            const peak_rope_scaling s = sp.scaling;
            /* base: > 1 and finite, for every scheme */
            const double bad_base[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -1.0, 0.5, 1.0};
            for (size_t k = 0; k < 8; k++) {
                p = sp, p.base = bad_base[k];
                snprintf(what, sizeof what, "%s %s base %g", set_names[set], mode_names[mode],
                         bad_base[k]);
                cache_rejected(&a, what, inval, a.y, 1, 0, &p);
            }
            /* the attention factor: 0 (the default) or > 0 and a float
               (1e39 is finite in double, inf in float) */
            for (size_t k = 0; k < 7; k++) {
                const double af = k < 6 ? bad[k] : 1e39;
                if (af == 0.0)
                    continue;
                p = sp, p.attention_factor = af;
                snprintf(what, sizeof what, "%s attention_factor %g", set_names[set], af);
                cache_rejected(&a, what, inval, a.y, 1, 0, &p);
            }
            /* factor: >= 1 (LINEAR, DYNAMIC, YARN, LLAMA3), > 0 (LONGROPE) */
            if (s == PEAK_ROPE_LINEAR || s == PEAK_ROPE_DYNAMIC || s == PEAK_ROPE_YARN ||
                s == PEAK_ROPE_LLAMA3 || s == PEAK_ROPE_LONGROPE) {
                for (size_t k = 0; k < 6 + 2; k++) {
                    const double v = k < 6 ? bad[k] : below_one[k - 6];
                    if (s == PEAK_ROPE_LONGROPE && v > 0.0 && isfinite(v))
                        continue; /* 0.5: valid there */
                    p = sp, p.factor = v;
                    snprintf(what, sizeof what, "%s factor %g", set_names[set], v);
                    cache_rejected(&a, what, inval, a.y, 1, 0, &p);
                }
            }
            if (s == PEAK_ROPE_NTK) {
                for (size_t k = 0; k < 6 + 2; k++) {
                    p = sp, p.ntk_alpha = k < 6 ? bad[k] : below_one[k - 6];
                    snprintf(what, sizeof what, "ntk_alpha %g", p.ntk_alpha);
                    cache_rejected(&a, what, inval, a.y, 1, 0, &p);
                }
            }
            if (s == PEAK_ROPE_NTK || s == PEAK_ROPE_DYNAMIC) {
                p = sp, p.rotary_dim = 2;
                snprintf(what, sizeof what, "%s rotary_dim 2 (r / (r - 2))", set_names[set]);
                cache_rejected(&a, what, inval, a.y, 1, 0, &p);
            }
            if (s == PEAK_ROPE_DYNAMIC || s == PEAK_ROPE_YARN || s == PEAK_ROPE_LLAMA3 ||
                s == PEAK_ROPE_LONGROPE) {
                for (size_t l0 = 0; l0 < 2; l0++) {
                    p = sp, p.original_max_position = l0;
                    snprintf(what, sizeof what, "%s original_max_position %zu", set_names[set], l0);
                    cache_rejected(&a, what, inval, a.y, 1, 0, &p);
                }
            }
            if (s == PEAK_ROPE_YARN) {
                for (size_t k = 0; k < 6; k++) {
                    if (bad[k] == 0.0)
                        continue; /* 0: the default */
                    p = sp, p.beta_fast = bad[k];
                    snprintf(what, sizeof what, "beta_fast %g", bad[k]);
                    cache_rejected(&a, what, inval, a.y, 1, 0, &p);
                    p = sp, p.beta_slow = bad[k];
                    snprintf(what, sizeof what, "beta_slow %g", bad[k]);
                    cache_rejected(&a, what, inval, a.y, 1, 0, &p);
                }
            }
            if (s == PEAK_ROPE_LLAMA3) {
                for (size_t k = 0; k < 6; k++) {
                    p = sp, p.low_freq_factor = bad[k];
                    snprintf(what, sizeof what, "low_freq_factor %g", bad[k]);
                    cache_rejected(&a, what, inval, a.y, 1, 0, &p);
                    p = sp, p.high_freq_factor = bad[k];
                    snprintf(what, sizeof what, "high_freq_factor %g", bad[k]);
                    cache_rejected(&a, what, inval, a.y, 1, 0, &p);
                }
                p = sp, p.high_freq_factor = p.low_freq_factor;
                cache_rejected(&a, "high_freq_factor = low_freq_factor", inval, a.y, 1, 0, &p);
                p = sp, p.high_freq_factor = 0.5, p.low_freq_factor = 1.0;
                cache_rejected(&a, "high_freq_factor < low_freq_factor", inval, a.y, 1, 0, &p);
            }
            if (s == PEAK_ROPE_LONGROPE) {
                p = sp, p.longrope_factors = NULL;
                cache_rejected(&a, "NULL longrope_factors", inval, a.y, 1, 0, &p);
                const float badf[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -1.0f};
                float fac[AR / 2];
                for (size_t k = 0; k < 6; k++) {
                    for (size_t i = 0; i < AR / 2; i++)
                        fac[i] = 1.0f + (float)i;
                    fac[k % (AR / 2)] = badf[k];
                    p = sp, p.longrope_factors = fac;
                    snprintf(what, sizeof what, "longrope_factors[%zu] %g", k % (AR / 2),
                             (double)badf[k]);
                    cache_rejected(&a, what, inval, a.y, 1, 0, &p);
                }
            }
        }
    }
    peak_test_free(a.m);
}
END_TEST

START_TEST(invalid_ranges_and_overlaps)
{
    arena a;
    arena_init(&a);
    const peak_status inval = PEAK_ERR_INVALID_ARG, range = PEAK_ERR_OUT_OF_RANGE;
    const size_t top = PEAK_MAX_POSITION;
    peak_rope_params ok = PEAK_ROPE_PARAMS_DEFAULT;
    ok.rotary_dim = AR;

    /* peak_rope_cache: positions and sizes */
    cache_rejected(&a, "pos0 + n_pos = 2^32 + 1", range, a.y, 2, top - 1, &ok);
    cache_rejected(&a, "pos0 2^32", range, a.y, 1, top, &ok);
    cache_rejected(&a, "pos0 SIZE_MAX", range, a.y, 1, SIZE_MAX, &ok);
    cache_rejected(&a, "n_pos 2^32 + 1", range, a.y, top + 1, 0, &ok);
    cache_rejected(&a, "n_pos SIZE_MAX", range, a.y, SIZE_MAX, 0, &ok);

    /* peak_rope_apply */
    const peak_rope_desc v = valid_desc(&a);
    peak_rope_desc d = v;
    ck_assert_int_eq(peak_rope_apply(a.y, a.x, &v, NULL), PEAK_OK); /* the valid call */
    memcpy(a.snap, a.m, sizeof a.snap);
    apply_rejected(&a, "NULL y", inval, NULL, a.x, &v);
    apply_rejected(&a, "NULL x", inval, a.y, NULL, &v);
    apply_rejected(&a, "NULL desc", inval, a.y, a.x, NULL);
    d = v, d.batch = 0;
    apply_rejected(&a, "batch 0", inval, a.y, a.x, &d);
    d = v, d.seq_len = 0;
    apply_rejected(&a, "seq_len 0", inval, a.y, a.x, &d);
    d = v, d.heads = 0;
    apply_rejected(&a, "heads 0", inval, a.y, a.x, &d);
    d = v, d.head_dim = 0;
    apply_rejected(&a, "head_dim 0", inval, a.y, a.x, &d);
    d = v, d.head_dim = AR - 2;
    apply_rejected(&a, "head_dim < rotary_dim", inval, a.y, a.x, &d);
    const size_t bad_r[] = {0, 1, 7, 514};
    for (size_t k = 0; k < 4; k++) {
        for (int fly = 0; fly < 2; fly++) {
            d = v, d.params.rotary_dim = bad_r[k], d.head_dim = 600;
            d.x_stride[2] = d.y_stride[2] = 600;
            d.x_stride[1] = d.y_stride[1] = 1200;
            d.x_stride[0] = d.y_stride[0] = 3600;
            if (fly)
                d.cache = NULL, d.cache_rows = 0;
            char what[64];
            snprintf(what, sizeof what, "rotary_dim %zu%s", bad_r[k], fly ? " on the fly" : "");
            float *big = peak_test_alloc(2 * 3600, 0), *bigy = peak_test_alloc(2 * 3600, 0);
            const peak_status got = peak_rope_apply(bigy, big, &d, NULL);
            CHECK(got == inval, "%s: %s: status %d", TIER, what, (int)got);
            for (size_t e = 0; e < 2 * 3600; e++)
                CHECK(peak_test_is_canary(bigy[e]), "%s: %s: y written", TIER, what);
            peak_test_free(big);
            peak_test_free(bigy);
        }
    }
    d = v, d.pairing = (peak_rope_pairing)2;
    apply_rejected(&a, "pairing 2", inval, a.y, a.x, &d);
    d = v, d.pairing = (peak_rope_pairing)-1;
    apply_rejected(&a, "pairing -1", inval, a.y, a.x, &d);
    int32_t p32[AB * AL] = {0};
    d = v, d.positions = a.pos, d.positions32 = p32, d.positions_stride = AL;
    apply_rejected(&a, "both positions arrays", inval, a.y, a.x, &d);
    for (int k = 0; k < 3; k++) {
        d = v, d.x_stride[k] = -1;
        apply_rejected(&a, "negative x stride", inval, a.y, a.x, &d);
        d = v, d.y_stride[k] = -(ptrdiff_t)AD;
        apply_rejected(&a, "negative y stride", inval, a.y, a.x, &d);
    }
    d = v, d.positions = a.pos, d.positions_stride = -1;
    apply_rejected(&a, "negative positions_stride", inval, a.y, a.x, &d);
    /* y rows that coincide or overlap */
    d = v, d.y_stride[1] = 0;
    apply_rejected(&a, "y tokens on the same rows", inval, a.y, a.x, &d);
    d = v, d.y_stride[2] = AD - 1;
    apply_rejected(&a, "y heads overlapping", inval, a.y, a.x, &d);
    d = v, d.y_stride[0] = AD;
    apply_rejected(&a, "y batches over tokens", inval, a.y, a.x, &d);
    /* y against x (not in place), the cache and the positions */
    apply_rejected(&a, "y = x + 1", inval, a.x + 1, a.x, &v);
    apply_rejected(&a, "y = x - 3", inval, a.x + 3, a.x + 6, &v);
    d = v, d.y_stride[2] = AD + 1, d.y_stride[1] = AH * (AD + 1);
    d.y_stride[0] = AL * AH * (AD + 1);
    apply_rejected(&a, "y = x with other strides", inval, a.x, a.x, &d);
    apply_rejected(&a, "y over the cache", inval, a.cache + 3 * AR, a.x, &v);
    d = v, d.positions = a.pos, d.positions_stride = AL;
    apply_rejected(&a, "y over the positions", inval, (float *)(void *)a.pos - 10, a.x, &d);
    /* valid positions (0 .. 5) where y is, so that only the overlap is wrong */
    for (int32_t t = 0; t < AB * AL; t++)
        memcpy(a.y + 5 + t, &t, sizeof t);
    memcpy(a.snap, a.m, sizeof a.snap);
    d = v, d.positions32 = (const int32_t *)(const void *)(a.y + 5), d.positions_stride = AL;
    apply_rejected(&a, "positions32 inside y", inval, a.y, a.x, &d);

    /* positions */
    d = v, d.pos0 = AROWS - AL + 1;
    apply_rejected(&a, "pos0 + seq_len > cache_rows", range, a.y, a.x, &d);
    d = v, d.pos0 = SIZE_MAX - 1;
    apply_rejected(&a, "pos0 SIZE_MAX - 1", range, a.y, a.x, &d);
    d = v, d.cache = NULL, d.cache_rows = 0, d.pos0 = top - AL + 1;
    apply_rejected(&a, "on the fly: pos0 + seq_len > 2^32", range, a.y, a.x, &d);
    d.pos0 = SIZE_MAX;
    apply_rejected(&a, "on the fly: pos0 SIZE_MAX", range, a.y, a.x, &d);
    const int64_t bad64[] = {-1, INT64_MIN, AROWS, (int64_t)top, INT64_MAX};
    for (size_t k = 0; k < 5; k++) {
        for (int fly = 0; fly < 2; fly++) {
            if (fly && bad64[k] >= 0 && bad64[k] < (int64_t)top)
                continue; /* AROWS: valid on the fly */
            a.pos[AB * AL - 1] = bad64[k];
            memcpy(a.snap, a.m, sizeof a.snap);
            d = v, d.positions = a.pos, d.positions_stride = AL;
            if (fly)
                d.cache = NULL, d.cache_rows = 0;
            char what[96];
            snprintf(what, sizeof what, "last position %lld%s", (long long)bad64[k],
                     fly ? " on the fly" : "");
            apply_rejected(&a, what, range, a.y, a.x, &d);
        }
    }
    a.pos[AB * AL - 1] = 1;
    memcpy(a.snap, a.m, sizeof a.snap);
    const int32_t bad32[] = {-1, INT32_MIN, AROWS};
    for (size_t k = 0; k < 3; k++) {
        int32_t q[AB * AL];
        for (size_t t = 0; t < AB * AL; t++)
            q[t] = (int32_t)(t % AROWS);
        q[k] = bad32[k];
        d = v, d.positions32 = q, d.positions_stride = AL;
        apply_rejected(&a, "bad int32 position", range, a.y, a.x, &d);
        d.positions_stride = 0; /* broadcast: the first row, where the bad one is */
        apply_rejected(&a, "bad int32 position (broadcast)", range, a.y, a.x, &d);
    }
    /* extents beyond PTRDIFF_MAX bytes */
    d = v, d.x_stride[0] = PTRDIFF_MAX / 2;
    apply_rejected(&a, "x batch stride PTRDIFF_MAX / 2", range, a.y, a.x, &d);
    d = v, d.y_stride[1] = PTRDIFF_MAX / 4;
    apply_rejected(&a, "y token stride PTRDIFF_MAX / 4", range, a.y, a.x, &d);
    d = v, d.positions = a.pos, d.positions_stride = PTRDIFF_MAX / 2;
    apply_rejected(&a, "positions_stride PTRDIFF_MAX / 2", range, a.y, a.x, &d);
    d = v, d.cache_rows = SIZE_MAX / 4;
    apply_rejected(&a, "cache_rows SIZE_MAX / 4", range, a.y, a.x, &d);
    /* on the fly: the params' errors */
    d = v, d.cache = NULL, d.cache_rows = 0, d.params.base = NAN;
    apply_rejected(&a, "on the fly: base NaN", inval, a.y, a.x, &d);
    d.params.base = 1e4, d.params.scaling = PEAK_ROPE_LONGROPE;
    d.params.original_max_position = 4096;
    apply_rejected(&a, "on the fly: LONGROPE without factors", inval, a.y, a.x, &d);

    /* The cache type: outside peak_dtype PEAK_ERR_UNSUPPORTED, after the
       NULL pointers and the params, before the ranges and the overlap. */
    const peak_status unsup = PEAK_ERR_UNSUPPORTED;
    const int bad_types[] = {3, -1, 7, 0x7fffffff};
    peak_rope_params bad_base = ok;
    bad_base.base = NAN;
    for (size_t k = 0; k < 4; k++) {
        const peak_dtype bt = (peak_dtype)bad_types[k];
        cache_rejected_typed(&a, "type outside peak_dtype", unsup, a.y, bt, 2, 0, &ok);
        cache_rejected_typed(&a, "bad type and pos0 2^32", unsup, a.y, bt, 1, top, &ok);
        cache_rejected_typed(&a, "bad type and n_pos SIZE_MAX", unsup, a.y, bt, SIZE_MAX, 0,
                             &ok);
        cache_rejected_typed(&a, "bad type and NULL cache", inval, NULL, bt, 2, 0, &ok);
        cache_rejected_typed(&a, "bad type and n_pos 0", inval, a.y, bt, 0, 0, &ok);
        cache_rejected_typed(&a, "bad type and base NaN", inval, a.y, bt, 2, 0, &bad_base);
    }
    for (size_t k = 0; k < 2; k++) {
        const peak_dtype t = half_types[k];
        cache_rejected_typed(&a, "16-bit: pos0 + n_pos = 2^32 + 1", range, a.y, t, 2, top - 1,
                             &ok);
        cache_rejected_typed(&a, "16-bit: n_pos SIZE_MAX", range, a.y, t, SIZE_MAX, 0, &ok);
        cache_rejected_typed(&a, "16-bit: NULL cache", inval, NULL, t, 2, 0, &ok);
        cache_rejected_typed(&a, "16-bit: base NaN", inval, a.y, t, 2, 0, &bad_base);
    }
    /* A 16-bit cache's extent is counted in its elements: LongRoPE factors
       right after 2 x 8 bfloat16 (8 floats' bytes) do not meet it, one
       float earlier they do. */
    {
        float *buf = peak_test_alloc(16, 0);
        for (size_t j = 0; j < 16; j++)
            buf[j] = 1.0f + (float)j;
        peak_rope_params lr = ok;
        lr.scaling = PEAK_ROPE_LONGROPE, lr.original_max_position = 4096;
        lr.longrope_factors = buf + 8;
        for (size_t k = 0; k < 2; k++) {
            ck_assert_int_eq(peak_rope_cache(buf, half_types[k], 2, 0, &lr, NULL), PEAK_OK);
            for (size_t j = 8; j < 16; j++)
                CHECK(buf[j] == 1.0f + (float)j, "%s: a 16-bit cache wrote past its end", TIER);
        }
        lr.longrope_factors = buf + 7;
        float snap[16];
        memcpy(snap, buf, sizeof snap);
        for (size_t k = 0; k < 2; k++)
            CHECK(peak_rope_cache(buf, half_types[k], 2, 0, &lr, NULL) == inval &&
                      peak_test_bytes_equal(buf, snap, sizeof snap),
                  "%s: a 16-bit cache over longrope_factors accepted or written", TIER);
        peak_test_free(buf);
    }

    /* The edges that are allowed. */
    float *row = peak_test_alloc(2 * AR, 0);
    ck_assert_int_eq(peak_rope_cache(row, PEAK_F32, 2, top - 2, &ok, NULL), PEAK_OK);
    ck_assert_int_eq(peak_rope_cache(row, PEAK_F32, 1, top - 1, &ok, NULL), PEAK_OK);
    for (size_t k = 0; k < 2; k++) {
        ck_assert_int_eq(peak_rope_cache(row, half_types[k], 2, top - 2, &ok, NULL), PEAK_OK);
        ck_assert_int_eq(peak_rope_cache(row, half_types[k], 1, top - 1, &ok, NULL), PEAK_OK);
    }
    peak_test_free(row);
    d = v, d.pos0 = AROWS - AL;
    ck_assert_int_eq(peak_rope_apply(a.y, a.x, &d, NULL), PEAK_OK);
    d = v, d.cache = NULL, d.cache_rows = 0, d.pos0 = top - AL;
    ck_assert_int_eq(peak_rope_apply(a.y, a.x, &d, NULL), PEAK_OK);
    peak_test_free(a.m);
}
END_TEST

/* With a cache, the params beyond rotary_dim are not read (peak.h): a
   NaN base or a LONGROPE without factors is accepted and gives the bits
   of the valid call. */
START_TEST(cache_ignores_other_params)
{
    arena a;
    arena_init(&a);
    const peak_rope_desc v = valid_desc(&a);
    float want[A_N];
    ck_assert_int_eq(peak_rope_apply(a.y, a.x, &v, NULL), PEAK_OK);
    memcpy(want, a.m, sizeof want);
    peak_rope_desc d = v;
    d.params.base = NAN;
    d.params.mode = (peak_rope_mode)5;
    d.params.scaling = PEAK_ROPE_LONGROPE;
    d.params.longrope_factors = NULL;
    peak_test_fill_canary(a.y, AB * AL * AH * AD);
    ck_assert_int_eq(peak_rope_apply(a.y, a.x, &d, NULL), PEAK_OK);
    CHECK(peak_test_bytes_equal(a.m, want, sizeof want), "%s: unused params changed the result",
          TIER);
    peak_test_free(a.m);
}
END_TEST

/* ---- suite ------------------------------------------------------------------------- */

static Suite *make_suite(peak_isa isa)
{
    init_factors();
    Suite *s = suite_create("rope");
    TCase *tc = tcase_create(peak_isa_name(isa));
    peak_tester_add_sweeps(tc, &rope_family);
    tcase_add_loop_test(tc, exact_mode_within_2_pow_minus_23, 0, N_SETS);
    tcase_add_test(tc, hf_f32_matches_transformers);
    tcase_add_test(tc, exact_on_transformers_cases);
    tcase_add_loop_test(tc, cache_tiers_bit_identical, 0, 2);
    tcase_add_loop_test(tc, rows_independent_of_pos0_and_n_pos, 0, 2);
    tcase_add_loop_test(tc, cache_kernels_with_positions_and_gaps, 0, 2);
    tcase_add_loop_test(tc, rotation_shapes_layouts_positions, 0, ROPE_VARIANTS);
    tcase_add_loop_test(tc, streaming_outputs, 0, 4);
    tcase_add_loop_test(tc, padded_strides_keep_canaries, 0, 8);
    tcase_add_loop_test(tc, fly_equals_cache_every_scheme, 0, N_SETS);
    tcase_add_test(tc, rotation_matches_transformers);
    tcase_add_loop_test(tc, decode_equals_prefill, 0, 8);
    tcase_add_loop_test(tc, half_cache_exact_within_half_ulp, 0, 2 * (int)N_HALF_SETS);
    tcase_add_loop_test(tc, half_cache_is_converted_f32, 0, 4);
    tcase_add_loop_test(tc, half_cache_large_attention_factor, 0, 2);
    tcase_add_test(tc, invalid_params);
    tcase_add_test(tc, invalid_ranges_and_overlaps);
    tcase_add_test(tc, cache_ignores_other_params);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
