/*
 * peak-demo - the PyTorch PositionalEncoding example through peak, checked
 * against PyTorch.
 *
 * The PyTorch PositionalEncoding module (max_len 5000, d_model 512) adds a
 * sinusoidal positional encoding to a batch of 2 sentences of 50 word
 * embeddings.  This program does that twice - the module's way
 * (embeddings, then peak_pe_add with the
 * precomputed peak_pe_table) and fused (peak_embed_pe) - and carries the
 * result through one post-norm encoder layer (self-attention with key
 * padding: the second sentence has 42 real tokens) and one decoder layer
 * (causal self-attention over 30 target tokens, cross-attention onto the
 * encoder output, so Lq != Lk).  GEMMs are OpenBLAS's; attention, masks and
 * residual + LayerNorm are peak's.
 *
 * The weights are not stored: demo-gen.c derives them from a hash that
 * scripts/make-demo-ref.py evaluates to the same bits, and that script ran
 * the same model through torch.nn and stored its outputs in tests/data.
 *
 *   peak-demo [--data DIR] [--isa TIER] [--repeat N] [--no-check] [--quiet]
 *
 * Exit status: 0 all checks within tolerance, 1 a difference beyond its
 * tolerance, 2 usage, data or library error, 77 the --isa tier is not
 * available here (meson's SKIP).
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "demo-gen.h"
#include "demo-layers.h"
#include "demo-ref.h"
#include "peak.h"

#ifndef PEAK_DEMO_DATA_DIR
#define PEAK_DEMO_DATA_DIR "tests/data"
#endif

enum {
    D = DEMO_D_MODEL,
    N_SRC = DEMO_BATCH * DEMO_SRC_LEN, /* source tokens, all sentences */
    N_TGT = DEMO_BATCH * DEMO_TGT_LEN,
    EXIT_MISMATCH = 1,
    EXIT_ERROR = 2,
    EXIT_SKIP = 77
};

/* ---- tolerances --------------------------------------------------------
 * Every check is a maximum absolute difference over all elements.
 *
 * PE, default mode, against PyTorch's float64 table rounded to float32:
 * peak_pe_table promises |PE - exact| <= 2^-23, the reference's rounding adds
 * up to 2^-25.
 *
 * PE, PEAK_PE_TORCH_F32 mode, against that module's float32 table: peak.h
 * promises 2 ULP of torch's table; entries are <= 1 in magnitude, where
 * 2 ULP <= 2^-22.
 *
 * Embedding + PE: the PE bound, plus half an ULP of rounding on each side of
 * a sum whose magnitude is below 2 (embeddings after the sqrt(d_model) scale
 * and the PE are both within [-1, 1]): 2^-23 + 2^-25 + 2^-23.
 *
 * Layer outputs: both sides are float32 throughout, but sum in different
 * orders (OpenBLAS vs torch's GEMMs, K up to 2048; peak's and torch's
 * softmax), and every LayerNorm divides by a row standard deviation near 1
 * and multiplies by gamma <= 1.25.  The rounding noise that leaves is ~1e-6
 * (measured with a float64-accumulating attention); 1e-4 gives it ample room
 * while real defects stay far outside it (measured by breaking attention on
 * purpose: ignoring the key padding or shifting the causal mask by one moves
 * outputs by 0.16 to 0.65, a softmax scale off by 1% by 6e-4 to 1.1e-3).  The
 * decoder gets 2e-4: its input carries the encoder's error through
 * cross-attention and it stacks three sublayers.
 */
#define TOL_PE_EXACT (0x1p-23 + 0x1p-25)
#define TOL_PE_TORCH_F32 0x1p-22
#define TOL_EMBED_PE (0x1p-23 + 0x1p-25 + 0x1p-23)
#define TOL_ENCODER 1e-4
#define TOL_DECODER 2e-4

/* ---- options ---------------------------------------------------------- */

typedef struct options {
    const char *data_dir;
    const char *isa;
    int repeat;
    int check;
    int quiet;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: peak-demo [--data DIR] [--isa TIER] [--repeat N] [--no-check] [--quiet]\n"
            "  --data DIR   PyTorch reference data (default %s)\n"
            "  --isa TIER   run on scalar, avx2, avx512 or neon (default: best; PEAK_ISA caps it)\n"
            "  --repeat N   run the pipeline N times, report the best time per stage (default 5)\n"
            "  --no-check   skip the comparison with PyTorch\n"
            "  --quiet      print only failures and a one-line summary\n",
            PEAK_DEMO_DATA_DIR);
}

static void parse_options(int argc, char **argv, options *o)
{
    *o = (options){PEAK_DEMO_DATA_DIR, NULL, 5, 1, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--data") == 0 && has_value) {
            o->data_dir = argv[++i];
        } else if (strcmp(a, "--isa") == 0 && has_value) {
            o->isa = argv[++i];
        } else if (strcmp(a, "--repeat") == 0 && has_value) {
            o->repeat = atoi(argv[++i]);
        } else if (strcmp(a, "--no-check") == 0) {
            o->check = 0;
        } else if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            exit(EXIT_ERROR);
        }
    }
    if (o->repeat < 1 || o->repeat > 1000) {
        fprintf(stderr, "peak-demo: --repeat takes 1 .. 1000\n");
        exit(EXIT_ERROR);
    }
}

/* Forces the named tier through the public API; exits 77 if it is missing. */
static void force_tier(const char *name)
{
    const peak_isa all[] = {PEAK_ISA_SCALAR, PEAK_ISA_AVX2, PEAK_ISA_AVX512, PEAK_ISA_NEON};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcasecmp(name, peak_isa_name(all[i])) != 0)
            continue;
        if (peak_isa_force(all[i]) != PEAK_OK) {
            printf("peak-demo: tier %s is not available on this CPU/OS/build: skipped\n", name);
            exit(EXIT_SKIP);
        }
        return;
    }
    fprintf(stderr, "peak-demo: unknown tier '%s' (scalar, avx2, avx512, neon)\n", name);
    exit(EXIT_ERROR);
}

/* ---- one run of the pipeline ------------------------------------------ */

typedef struct demo_run {
    int32_t src_ids[N_SRC], tgt_ids[N_TGT];
    float *pe;         /* [max_len, D], the PositionalEncoding buffer      */
    float *src_module; /* [N_SRC, D] embeddings, then peak_pe_add          */
    float *src;        /* [N_SRC, D] the same through peak_embed_pe        */
    float *tgt;        /* [N_TGT, D] decoder input, peak_embed_pe          */
    float *enc_mid, *enc_out;
    float *dec_mid1, *dec_mid2, *dec_out;
} demo_run;

static float *alloc_floats(size_t n)
{
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "peak-demo: out of memory (%zu floats)\n", n);
        exit(EXIT_ERROR);
    }
    return p;
}

static void run_alloc(demo_run *r)
{
    demo_token_ids(r->src_ids, DEMO_TOKENS_SRC_ID, demo_src_lengths, DEMO_BATCH, DEMO_SRC_LEN);
    const int32_t full[DEMO_BATCH] = {DEMO_TGT_LEN, DEMO_TGT_LEN};
    demo_token_ids(r->tgt_ids, DEMO_TOKENS_TGT_ID, full, DEMO_BATCH, DEMO_TGT_LEN);
    r->pe = alloc_floats((size_t)DEMO_MAX_LEN * D);
    r->src_module = alloc_floats((size_t)N_SRC * D);
    r->src = alloc_floats((size_t)N_SRC * D);
    r->tgt = alloc_floats((size_t)N_TGT * D);
    r->enc_mid = alloc_floats((size_t)N_SRC * D);
    r->enc_out = alloc_floats((size_t)N_SRC * D);
    r->dec_mid1 = alloc_floats((size_t)N_TGT * D);
    r->dec_mid2 = alloc_floats((size_t)N_TGT * D);
    r->dec_out = alloc_floats((size_t)N_TGT * D);
}

static void run_free(demo_run *r)
{
    float *bufs[] = {r->pe,      r->src_module, r->src,      r->tgt,     r->enc_mid,
                     r->enc_out, r->dec_mid1,   r->dec_mid2, r->dec_out};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
}

/* sqrt(d_model), paper sec. 3.4; the float torch multiplies by too. */
static float embed_scale(void)
{
    return (float)sqrt((double)D);
}

/* nn.Embedding then "* sqrt(d_model)": what PositionalEncoding is fed. */
static void gather_scaled(float *out, const float *table, const int32_t *ids, size_t n)
{
    const float scale = embed_scale();
    for (size_t t = 0; t < n; t++) {
        const float *row = table + (size_t)ids[t] * D;
        for (size_t c = 0; c < D; c++)
            out[t * D + c] = row[c] * scale;
    }
}

/* PositionalEncoding.forward: x[b, s, :] += PE[s, :].  pe NULL: on the fly. */
static void module_path(float *x, const float *table, const int32_t *ids, const float *pe)
{
    gather_scaled(x, table, ids, N_SRC);
    demo_check_status(peak_pe_add(x, (ptrdiff_t)DEMO_SRC_LEN * D, D, DEMO_BATCH, DEMO_SRC_LEN, D,
                                  0, pe, pe ? DEMO_MAX_LEN : 0, NULL, NULL),
                      "peak_pe_add");
}

/* out = E[ids] * sqrt(d_model) + PE(t mod seq_len).  pe NULL: on the fly. */
static void fused_path(float *out, const float *table, const int32_t *ids, size_t batch,
                       size_t seq_len, const float *pe)
{
    peak_embed_desc desc = PEAK_EMBED_DESC_DEFAULT;
    desc.table = table;
    desc.vocab = DEMO_VOCAB;
    desc.ld_table = D;
    desc.d_model = D;
    desc.scale = embed_scale();
    desc.pe = pe;
    desc.pe_rows = pe ? DEMO_MAX_LEN : 0;
    desc.seq_len = seq_len;
    demo_check_status(peak_embed_pe(out, D, ids, batch * seq_len, &desc, NULL), "peak_embed_pe");
}

typedef enum stage {
    ST_PE_TABLE,
    ST_MODULE_PATH,
    ST_EMBED_PE,
    ST_ENCODER,
    ST_DECODER,
    N_STAGES
} stage;

typedef struct demo_times {
    double stage[N_STAGES];
    demo_timing encoder, decoder; /* the layers' time by kind of work */
} demo_times;

typedef struct demo_model {
    const float *embedding;
    demo_encoder_layer enc;
    demo_decoder_layer dec;
} demo_model;

static void run_pipeline(demo_run *r, const demo_model *m, demo_scratch *s, demo_times *t)
{
    double t0 = demo_now();
    demo_check_status(peak_pe_table(r->pe, PEAK_F32, DEMO_MAX_LEN, D, 0, NULL, NULL),
                      "peak_pe_table");
    double t1 = demo_now();
    module_path(r->src_module, m->embedding, r->src_ids, r->pe);
    double t2 = demo_now();
    fused_path(r->src, m->embedding, r->src_ids, DEMO_BATCH, DEMO_SRC_LEN, r->pe);
    fused_path(r->tgt, m->embedding, r->tgt_ids, DEMO_BATCH, DEMO_TGT_LEN, r->pe);
    double t3 = demo_now();
    t->stage[ST_PE_TABLE] = t1 - t0;
    t->stage[ST_MODULE_PATH] = t2 - t1;
    t->stage[ST_EMBED_PE] = t3 - t2;

    s->timing = (demo_timing){0, 0, 0, 0};
    t0 = demo_now();
    demo_encoder_forward(r->enc_out, r->enc_mid, r->src, DEMO_BATCH, DEMO_SRC_LEN,
                         demo_src_lengths, &m->enc, s);
    t->stage[ST_ENCODER] = demo_now() - t0;
    t->encoder = s->timing;

    s->timing = (demo_timing){0, 0, 0, 0};
    t0 = demo_now();
    demo_decoder_forward(r->dec_out, r->dec_mid1, r->dec_mid2, r->tgt, r->enc_out, DEMO_BATCH,
                         DEMO_TGT_LEN, DEMO_SRC_LEN, demo_src_lengths, &m->dec, s);
    t->stage[ST_DECODER] = demo_now() - t0;
    t->decoder = s->timing;
}

static void keep_best(demo_times *best, const demo_times *t, int first)
{
    for (int i = 0; i < N_STAGES; i++)
        best->stage[i] = first || t->stage[i] < best->stage[i] ? t->stage[i] : best->stage[i];
    if (first || t->stage[ST_ENCODER] <= best->stage[ST_ENCODER])
        best->encoder = t->encoder;
    if (first || t->stage[ST_DECODER] <= best->stage[ST_DECODER])
        best->decoder = t->decoder;
}

/* ---- report ----------------------------------------------------------- */

/* OpenBLAS 0.3.21 falls back to its SSE3 "Prescott" kernels on CPUs newer
   than it knows (e.g. Emerald Rapids), which makes the GEMMs ~4x slower than
   they need be; it reads OPENBLAS_CORETYPE before main, so all we can do is
   say so. */
static void print_blas_hint(void)
{
    if (strcmp(openblas_get_corename(), "Prescott") == 0 && peak_isa_supported(PEAK_ISA_AVX2))
        printf("  note: OpenBLAS did not recognise this CPU; OPENBLAS_CORETYPE=Haswell (or "
               "SkylakeX) gives it AVX2 (AVX-512) GEMMs\n");
}

static void print_header(void)
{
    printf("peak-demo: positional encoding of a [2, 50, 512] batch, one encoder and one decoder "
           "layer\n");
    printf("  peak %s, tier %s (%s)\n", peak_version(), peak_isa_name(peak_isa_active()),
           peak_isa_reason());
    printf("  GEMMs: %s, core %s, %d thread(s)\n", openblas_get_config(), openblas_get_corename(),
           openblas_get_num_threads());
    print_blas_hint();
    printf("  d_model %d, %d heads of %d, d_ff %d, PE table %d rows, embeddings scaled by "
           "sqrt(d_model)\n",
           D, DEMO_HEADS, DEMO_HEAD_DIM, DEMO_D_FF, DEMO_MAX_LEN);
    printf("  batch %d: source %d tokens (real: %d and %d, the rest padding), target %d\n\n",
           DEMO_BATCH, DEMO_SRC_LEN, demo_src_lengths[0], demo_src_lengths[1], DEMO_TGT_LEN);
}

static void print_shapes(void)
{
    printf("shapes\n");
    printf("  PE table                        [%d, %d]\n", DEMO_MAX_LEN, D);
    printf("  word embeddings                 [%d, %d, %d]\n", DEMO_BATCH, DEMO_SRC_LEN, D);
    printf("  + positional encoding           [%d, %d, %d]\n", DEMO_BATCH, DEMO_SRC_LEN, D);
    printf("  encoder output (memory)         [%d, %d, %d]\n", DEMO_BATCH, DEMO_SRC_LEN, D);
    printf("  decoder input (target + PE)     [%d, %d, %d]\n", DEMO_BATCH, DEMO_TGT_LEN, D);
    printf("  decoder output                  [%d, %d, %d]\n\n", DEMO_BATCH, DEMO_TGT_LEN, D);
}

static void print_layer_time(const char *what, double total, const demo_timing *k)
{
    printf("  %-40s %9.3f ms  (GEMM %.3f, attention %.3f, add+LayerNorm %.3f, ReLU %.3f)\n",
           what, 1e3 * total, 1e3 * k->gemm, 1e3 * k->attention, 1e3 * k->add_norm,
           1e3 * k->relu);
}

static void print_times(const demo_times *t, int repeat)
{
    printf("time per stage (best of %d run%s)\n", repeat, repeat == 1 ? "" : "s");
    char what[64];
    snprintf(what, sizeof what, "peak_pe_table [%d, %d]", DEMO_MAX_LEN, D);
    printf("  %-40s %9.3f ms\n", what, 1e3 * t->stage[ST_PE_TABLE]);
    printf("  %-40s %9.3f ms\n", "embed * scale, then peak_pe_add",
           1e3 * t->stage[ST_MODULE_PATH]);
    printf("  %-40s %9.3f ms\n", "peak_embed_pe, source and target", 1e3 * t->stage[ST_EMBED_PE]);
    print_layer_time("encoder layer", t->stage[ST_ENCODER], &t->encoder);
    print_layer_time("decoder layer", t->stage[ST_DECODER], &t->decoder);
    printf("\n");
}

/* ---- checks ----------------------------------------------------------- */

typedef struct check {
    const char *label;
    const char *ref;    /* manifest tensor name; NULL: compare with `other` */
    const float *got;
    const float *other; /* peak against peak (bit identity), when ref is NULL */
    size_t dims[3];     /* of got, for locating the worst element */
    double tol;
} check;

typedef struct check_state {
    const demo_ref *ref;
    int quiet;
    int run, failed, errors;
} check_state;

static size_t dims_count(const size_t dims[3])
{
    return dims[0] * dims[1] * dims[2];
}

static void print_worst(const check *c, const float *want, size_t i)
{
    size_t c2 = i % c->dims[2], c1 = i / c->dims[2] % c->dims[1], c0 = i / c->dims[2] / c->dims[1];
    printf("      worst at [%zu, %zu, %zu]: peak %.9g, %s %.9g\n", c0, c1, c2, (double)c->got[i],
           c->ref ? "torch" : "other path", (double)want[i]);
}

static void run_check(check_state *st, const check *c)
{
    size_t n = dims_count(c->dims);
    float *loaded = c->ref ? demo_ref_load(st->ref, c->ref, n) : NULL;
    const float *want = c->ref ? loaded : c->other;
    if (!want) {
        st->errors++;
        return;
    }
    demo_diff d = demo_max_abs_diff(c->got, want, n);
    int ok = d.max_abs <= c->tol;
    st->run++;
    st->failed += !ok;
    if (!ok || !st->quiet) {
        printf("  %-52s %10.3g  %9.3g  %s\n", c->label, d.max_abs, c->tol,
               ok ? "ok" : "FAIL");
        if (!ok)
            print_worst(c, want, d.where);
    }
    free(loaded);
}

/* The PE rows the reference holds, gathered from peak's table (default
   mode) and computed one row at a time in PEAK_PE_TORCH_F32 mode: a row
   depends only on its position, whatever pos0 / n_pos produced it. */
typedef struct pe_samples {
    size_t n;
    float *exact, *torch_f32;
} pe_samples;

static int pe_samples_make(pe_samples *p, const demo_ref *ref, const float *table)
{
    const demo_ref_line *l = demo_ref_find(ref, "pe_positions");
    p->n = l ? (size_t)(l->n_words - 1) : 0;
    p->exact = alloc_floats(p->n * D + 1);
    p->torch_f32 = alloc_floats(p->n * D + 1);
    peak_pe_params f32 = PEAK_PE_PARAMS_DEFAULT;
    f32.mode = PEAK_PE_TORCH_F32;
    for (size_t i = 0; i < p->n; i++) {
        long pos = strtol(l->words[i + 1], NULL, 10);
        if (pos < 0 || pos >= DEMO_MAX_LEN) {
            fprintf(stderr, "peak-demo: manifest: PE position %ld outside the table\n", pos);
            return -1;
        }
        memcpy(p->exact + i * D, table + (size_t)pos * D, D * sizeof(float));
        demo_check_status(
            peak_pe_table(p->torch_f32 + i * D, PEAK_F32, 1, D, (size_t)pos, &f32, NULL),
            "peak_pe_table (PEAK_PE_TORCH_F32)");
    }
    return p->n > 0 ? 0 : -1;
}

static void pe_samples_free(pe_samples *p)
{
    free(p->exact);
    free(p->torch_f32);
}

/* How far PositionalEncoding's float32 formula itself is from the exact
   table: not a peak defect, so reported, never failed. */
static void print_torch_formula_error(const demo_ref *ref, const pe_samples *p)
{
    float *torch_f32 = demo_ref_load(ref, "pe_seed_f32", p->n * D);
    if (!torch_f32)
        return;
    demo_diff d = demo_max_abs_diff(p->exact, torch_f32, p->n * D);
    printf("  (info: PyTorch's float32 formula is %.3g away from the exact table at these rows)\n",
           d.max_abs);
    free(torch_f32);
}

static void check_against_torch(check_state *st, const demo_run *r)
{
    const demo_ref_line *tv = demo_ref_find(st->ref, "torch");
    if (!st->quiet) {
        printf("check against PyTorch %s (%s)\n", tv && tv->n_words > 1 ? tv->words[1] : "?",
               st->ref->dir);
        printf("  %-52s %10s  %9s\n", "what", "max |diff|", "tolerance");
    }

    pe_samples p;
    if (pe_samples_make(&p, st->ref, r->pe) != 0) {
        pe_samples_free(&p);
        st->errors++;
        return;
    }
    const check checks[] = {
        {"PE table rows, default mode (exact)",
         "pe_exact",
         p.exact,
         NULL,
         {1, p.n, D},
         TOL_PE_EXACT},
        {"PE table rows, PEAK_PE_TORCH_F32 vs torch's float32",
         "pe_seed_f32",
         p.torch_f32,
         NULL,
         {1, p.n, D},
         TOL_PE_TORCH_F32},
        {"source embedding + PE (embed, then peak_pe_add)",
         "src_embedding_pe",
         r->src_module,
         NULL,
         {DEMO_BATCH, DEMO_SRC_LEN, D},
         TOL_EMBED_PE},
        {"source embedding + PE (peak_embed_pe)",
         "src_embedding_pe",
         r->src,
         NULL,
         {DEMO_BATCH, DEMO_SRC_LEN, D},
         TOL_EMBED_PE},
        {"target embedding + PE (peak_embed_pe)",
         "tgt_embedding_pe",
         r->tgt,
         NULL,
         {DEMO_BATCH, DEMO_TGT_LEN, D},
         TOL_EMBED_PE},
        {"encoder: norm1(x + self-attention, key padding)",
         "enc_norm1",
         r->enc_mid,
         NULL,
         {DEMO_BATCH, DEMO_SRC_LEN, D},
         TOL_ENCODER},
        {"encoder output: norm2(x + FFN)",
         "enc_out",
         r->enc_out,
         NULL,
         {DEMO_BATCH, DEMO_SRC_LEN, D},
         TOL_ENCODER},
        {"decoder: norm1(y + causal self-attention)",
         "dec_norm1",
         r->dec_mid1,
         NULL,
         {DEMO_BATCH, DEMO_TGT_LEN, D},
         TOL_DECODER},
        {"decoder: norm2(y + cross-attention, Lq 30, Lk 50)",
         "dec_norm2",
         r->dec_mid2,
         NULL,
         {DEMO_BATCH, DEMO_TGT_LEN, D},
         TOL_DECODER},
        {"decoder output: norm3(y + FFN)",
         "dec_out",
         r->dec_out,
         NULL,
         {DEMO_BATCH, DEMO_TGT_LEN, D},
         TOL_DECODER},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        run_check(st, &checks[i]);
    if (!st->quiet)
        print_torch_formula_error(st->ref, &p);
    pe_samples_free(&p);
}

/* peak promises the same bits whichever path makes the PE: table or on the
   fly, separate add or fused gather. */
static void check_paths_agree(check_state *st, const demo_run *r, const float *embedding)
{
    float *fly_add = alloc_floats((size_t)N_SRC * D);
    float *fly_fused = alloc_floats((size_t)N_SRC * D);
    module_path(fly_add, embedding, r->src_ids, NULL);
    fused_path(fly_fused, embedding, r->src_ids, DEMO_BATCH, DEMO_SRC_LEN, NULL);

    if (!st->quiet) {
        printf("peak's own paths (must agree bit for bit)\n");
        printf("  %-52s %10s  %9s\n", "what", "max |diff|", "tolerance");
    }
#define SRC_DIMS {DEMO_BATCH, DEMO_SRC_LEN, D}
    const check checks[] = {
        {"peak_embed_pe vs embed + peak_pe_add", NULL, r->src, r->src_module, SRC_DIMS, 0.0},
        {"peak_pe_add: PE on the fly vs from the table", NULL, fly_add, r->src_module, SRC_DIMS,
         0.0},
        {"peak_embed_pe: PE on the fly vs from the table", NULL, fly_fused, r->src, SRC_DIMS,
         0.0},
    };
#undef SRC_DIMS
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        run_check(st, &checks[i]);
    if (!st->quiet)
        printf("\n");
    free(fly_add);
    free(fly_fused);
}

static void print_tolerances(void)
{
    printf("tolerances (max |peak - torch| over all elements)\n"
           "  PE default mode %.3g: peak's bound 2^-23 on |PE - exact| + 2^-25 for torch's\n"
           "    float64 table rounded to float32\n"
           "  PE torch-f32 mode %.3g: peak promises 2 ULP of torch's table; |PE| <= 1\n"
           "  embedding + PE %.3g: the PE bound + half an ULP of each side's rounding of a sum\n"
           "    below 2 in magnitude\n"
           "  encoder %.0e, decoder %.0e: float32 GEMM / softmax summation-order noise (~1e-6)\n"
           "    through LayerNorm, with room; a wrong mask costs > 0.1, a 1%% scale error 6e-4\n",
           TOL_PE_EXACT, TOL_PE_TORCH_F32, TOL_EMBED_PE, TOL_ENCODER, TOL_DECODER);
}

/* ---- main ------------------------------------------------------------- */

static void model_bind(demo_model *m, const demo_weights *w)
{
    m->embedding = demo_weights_get(w, "embed.weight");
    demo_encoder_bind(&m->enc, w);
    demo_decoder_bind(&m->dec, w);
}

static int open_reference(demo_ref *ref, const options *o)
{
    if (demo_ref_open(ref, o->data_dir) != 0) {
        fprintf(stderr, "peak-demo: use --data DIR, or --no-check to run without it\n");
        return -1;
    }
    if (demo_ref_check_model(ref) != 0) {
        demo_ref_close(ref);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options opt;
    parse_options(argc, argv, &opt);
    if (opt.isa)
        force_tier(opt.isa);

    demo_ref ref;
    if (opt.check && open_reference(&ref, &opt) != 0)
        return EXIT_ERROR;

    demo_weights weights;
    demo_scratch scratch;
    if (demo_weights_init(&weights) != 0 || demo_scratch_init(&scratch, N_SRC) != 0) {
        fprintf(stderr, "peak-demo: out of memory\n");
        return EXIT_ERROR;
    }
    demo_model model;
    model_bind(&model, &weights);
    demo_run run;
    run_alloc(&run);

    demo_times best, t;
    for (int i = 0; i < opt.repeat; i++) {
        run_pipeline(&run, &model, &scratch, &t);
        keep_best(&best, &t, i == 0);
    }

    if (!opt.quiet) {
        print_header();
        print_shapes();
        print_times(&best, opt.repeat);
    }
    check_state st = {opt.check ? &ref : NULL, opt.quiet, 0, 0, 0};
    check_paths_agree(&st, &run, model.embedding);
    if (opt.check) {
        check_against_torch(&st, &run);
        if (!opt.quiet)
            print_tolerances();
        demo_ref_close(&ref);
    }

    const char *tier = peak_isa_name(peak_isa_active());
    if (st.errors)
        printf("peak-demo: %d check(s) could not run (see above); tier %s\n", st.errors, tier);
    else
        printf("peak-demo: %s: %d of %d checks within tolerance, tier %s\n",
               st.failed ? "FAILED" : "ok", st.run - st.failed, st.run, tier);

    run_free(&run);
    demo_scratch_free(&scratch);
    demo_weights_free(&weights);
    return st.errors ? EXIT_ERROR : st.failed ? EXIT_MISMATCH : 0;
}
