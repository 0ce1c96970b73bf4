/*
 * test-pool.c - peak.h's promise for the caller's pool: every output byte
 * is the same with no pool, with a pool of 1, 2, 3, 4 or 7 workers, and
 * whatever order and on whatever threads the pool runs its tasks.
 *
 * Every family runs each of its cases first with no pool (the bytes the
 * family tests check against the scalar reference), then on four kinds of
 * pool at each size, and every output (lse and LayerNorm's sum included,
 * row gaps too) must equal the no-pool bytes:
 *   - create:   peak_threadpool_create(n), pthreadpool's threads;
 *   - reverse:  the tasks one after another on the calling thread, last
 *               task first;
 *   - one:      every task on one other thread, one after another;
 *   - pthreads: one new pthread per task but the first, which runs on the
 *               caller, so that ThreadSanitizer sees real concurrency.
 * Each pool is wrapped in a counter: it checks the library's side of the
 * interface (no run of more tasks than workers() said) and records how
 * many tasks the call used; a case above the library's inline threshold
 * (PEAK_INLINE_NS of modelled work) must have used more than one on a
 * pool of 2 or more, so a scheduler that silently stays serial fails.
 *
 * Also: a peak call made inside a task of the caller's own run on a
 * peak_threadpool_create pool, with that same pool; a pool whose workers()
 * answers 0, and one whose answer changes from call to call; the attention
 * workspace query per worker count, and a workspace sized for fewer
 * workers than the pool's rejected.  Shapes are large enough to be split
 * (hundreds of microseconds natively), small enough for valgrind and qemu
 * (PEAK_TEST_QUICK: fewer pool sizes per case, the same shapes).
 *
 * The program takes the tier as argv[1], as the family tests.
 */
#include "test-util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the test pools -------------------------------------------------------- */

enum pool_kind { POOL_CREATE, POOL_REVERSE, POOL_ONE, POOL_PTHREADS, N_POOL_KINDS };
static const char *const pool_kind_name[N_POOL_KINDS] = {"create", "reverse", "one-thread",
                                                         "pthreads"};

enum { MAX_TASKS = 64 };

/* -Dpthreadpool=disabled (the AArch64 cross build): peak_threadpool_create
   returns PEAK_ERR_UNSUPPORTED, and the create pools are left out. */
#if PEAK_HAVE_PTHREADPOOL
static const int have_pthreadpool = 1;
#else
static const int have_pthreadpool = 0;
#endif

/* A pool of `workers` workers of one kind, behind the counting interface
   handed to peak. */
typedef struct tpool {
    peak_threadpool iface;
    enum pool_kind kind;
    size_t workers;            /* what workers() answers (fickle: the largest) */
    const size_t *fickle;      /* non-NULL: workers() answers these in turn */
    size_t n_fickle;
    atomic_size_t asked;       /* workers() calls */
    peak_threadpool *created;  /* POOL_CREATE */
    atomic_size_t runs;        /* run() calls */
    atomic_size_t tasks;       /* tasks run, over all runs */
    atomic_size_t max_tasks;   /* the most tasks of one run */
    atomic_int too_many;       /* a run asked for more tasks than workers() */
    atomic_int bad;            /* a task not run exactly once, or a thread not started */
} tpool;

/* One run: the library's task and a once-only check per task. */
typedef struct trun {
    tpool *pool;
    peak_task_fn fn;
    void *arg;
    size_t n;
    atomic_uchar done[MAX_TASKS];
} trun;

static void trun_task(trun *r, size_t t)
{
    if (t >= r->n || t >= MAX_TASKS) {
        atomic_store(&r->pool->bad, 1);
        return;
    }
    atomic_fetch_add(&r->done[t], 1);
    r->fn(r->arg, t);
    atomic_fetch_add(&r->pool->tasks, 1);
}

typedef struct tthread {
    trun *r;
    size_t first, last; /* tasks [first, last) */
} tthread;

static void *tthread_main(void *arg)
{
    tthread *t = arg;
    for (size_t i = t->first; i < t->last; i++)
        trun_task(t->r, i);
    return NULL;
}

static void create_task(void *arg, size_t t)
{
    trun_task(arg, t);
}

static size_t tp_workers(void *ctx)
{
    tpool *p = ctx;
    const size_t k = atomic_fetch_add(&p->asked, 1);
    return p->fickle ? p->fickle[k % p->n_fickle] : p->workers;
}

static void tp_run(void *ctx, peak_task_fn fn, void *arg, size_t n)
{
    tpool *p = ctx;
    atomic_fetch_add(&p->runs, 1);
    size_t seen = atomic_load(&p->max_tasks);
    while (n > seen && !atomic_compare_exchange_weak(&p->max_tasks, &seen, n))
        ;
    if (n > (p->workers ? p->workers : 1) || n > MAX_TASKS || n == 0) {
        atomic_store(&p->too_many, 1);
        if (n > MAX_TASKS)
            n = MAX_TASKS;
    }
    trun *r = calloc(1, sizeof *r);
    if (!r) {
        atomic_store(&p->bad, 1);
        return;
    }
    r->pool = p, r->fn = fn, r->arg = arg, r->n = n;
    switch (p->kind) {
    case POOL_CREATE:
        p->created->run(p->created->ctx, create_task, r, n);
        break;
    case POOL_REVERSE:
        for (size_t t = n; t-- > 0;)
            trun_task(r, t);
        break;
    case POOL_ONE: {
        tthread one = {r, 0, n};
        pthread_t th;
        if (pthread_create(&th, NULL, tthread_main, &one) != 0) {
            atomic_store(&p->bad, 1);
            tthread_main(&one);
        } else {
            pthread_join(th, NULL);
        }
        break;
    }
    case POOL_PTHREADS: {
        tthread tt[MAX_TASKS];
        pthread_t th[MAX_TASKS];
        int started[MAX_TASKS] = {0};
        for (size_t t = 1; t < n; t++) {
            tt[t] = (tthread){r, t, t + 1};
            started[t] = pthread_create(&th[t], NULL, tthread_main, &tt[t]) == 0;
            if (!started[t])
                atomic_store(&p->bad, 1);
        }
        if (n > 0)
            trun_task(r, 0);
        for (size_t t = 1; t < n; t++) {
            if (started[t])
                pthread_join(th[t], NULL);
            else
                tthread_main(&tt[t]);
        }
        break;
    }
    default:
        atomic_store(&p->bad, 1);
    }
    for (size_t t = 0; t < n; t++)
        if (atomic_load(&r->done[t]) != 1)
            atomic_store(&p->bad, 1);
    free(r);
}

static tpool *tpool_new(enum pool_kind kind, size_t workers)
{
    tpool *p = calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    p->kind = kind;
    p->workers = workers;
    p->iface = (peak_threadpool){tp_workers, tp_run, p};
    if (kind == POOL_CREATE) {
        const peak_status st = peak_threadpool_create(workers ? workers : 1, &p->created);
        if (st == PEAK_ERR_UNSUPPORTED && !have_pthreadpool) { /* built without pthreadpool */
            ck_assert_ptr_null(p->created);
            free(p);
            return NULL;
        }
        ck_assert_int_eq(st, PEAK_OK);
        ck_assert_ptr_nonnull(p->created);
        ck_assert_uint_eq(peak_threadpool_workers(p->created), workers ? workers : 1);
    }
    return p;
}

static void tpool_free(tpool *p)
{
    if (!p)
        return;
    peak_threadpool_destroy(p->created);
    free(p);
}

/* ---- the cases ---------------------------------------------------------- */

enum family {
    F_PE_TABLE,
    F_PE_ADD,
    F_EMBED,
    F_EXP,
    F_SOFTMAX,
    F_LAYERNORM,
    F_ATTENTION,
    F_ROPE_CACHE,
    F_ROPE_APPLY,
    F_CONVERT
};

enum { MAX_OUT = 4, MAX_MEM = 16 };

typedef struct pcase {
    char name[96];
    enum family fam;
    /* Large enough that the library must split it: more than one task on a
       pool of two workers or more. */
    int big;
    /* Outputs, compared byte for byte; init: an in/out operand's contents
       before every call (NULL: the canary before every call). */
    size_t nout;
    struct {
        const char *name;
        float *p;
        size_t n;
        float *init;
    } out[MAX_OUT];
    float *fmem[MAX_MEM]; /* peak_test_free */
    size_t nfmem;
    void *mem[MAX_MEM];   /* free */
    size_t nmem;
    /* the call */
    float *f[8];
    ptrdiff_t s[4];
    size_t z[6];
    float eps;
    const int32_t *ids;
    peak_pe_params prm;
    peak_embed_desc ed;
    peak_softmax_desc sd;
    peak_attention_desc ad;
    peak_rope_params rp;
    peak_rope_desc rd;
    int caller_ws; /* attention: a workspace of the queried size, not NULL */
} pcase;

static float *case_floats(pcase *c, size_t n, size_t misalign)
{
    ck_assert_uint_lt(c->nfmem, MAX_MEM);
    float *p = peak_test_alloc(n, misalign);
    ck_assert_ptr_nonnull(p);
    return c->fmem[c->nfmem++] = p;
}

static void *case_mem(pcase *c, size_t bytes)
{
    ck_assert_uint_lt(c->nmem, MAX_MEM);
    void *p = calloc(1, bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    return c->mem[c->nmem++] = p;
}

static void case_keep(pcase *c, void *p)
{
    ck_assert_uint_lt(c->nmem, MAX_MEM);
    c->mem[c->nmem++] = p;
}

/* p[0, n) is an output; in_out: its present contents are the call's input
   (restored before every call). */
static void case_out(pcase *c, const char *name, float *p, size_t n, int in_out)
{
    ck_assert_uint_lt(c->nout, MAX_OUT);
    c->out[c->nout].name = name;
    c->out[c->nout].p = p;
    c->out[c->nout].n = n;
    c->out[c->nout].init = NULL;
    if (in_out) {
        float *init = case_mem(c, n * sizeof *init);
        memcpy(init, p, n * sizeof *init);
        c->out[c->nout].init = init;
    }
    c->nout++;
}

static void case_free(pcase *c)
{
    for (size_t i = 0; i < c->nfmem; i++)
        peak_test_free(c->fmem[i]);
    for (size_t i = 0; i < c->nmem; i++)
        free(c->mem[i]);
    memset(c, 0, sizeof *c);
}

static void case_reset(const pcase *c)
{
    for (size_t i = 0; i < c->nout; i++) {
        if (c->out[i].init)
            memcpy(c->out[i].p, c->out[i].init, c->out[i].n * sizeof(float));
        else
            peak_test_fill_canary(c->out[i].p, c->out[i].n);
    }
}

static void *aligned_bytes(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    return p;
}

static peak_status case_call(const pcase *c, const peak_threadpool *pool)
{
    switch (c->fam) {
    case F_PE_TABLE:
        return peak_pe_table(c->f[0], (peak_dtype)c->z[3], c->z[0], c->z[1], c->z[2], &c->prm,
                             pool);
    case F_PE_ADD:
        return peak_pe_add(c->f[0], c->s[0], c->s[1], c->z[0], c->z[1], c->z[2], c->z[3], c->f[1],
                           c->z[4], &c->prm, pool);
    case F_EMBED:
        return peak_embed_pe(c->f[0], c->s[0], c->ids, c->z[0], &c->ed, pool);
    case F_EXP:
        return peak_exp(c->f[0], c->f[1], c->z[0], pool);
    case F_SOFTMAX:
        return peak_softmax(c->f[0], c->f[1], &c->sd, pool);
    case F_LAYERNORM:
        return peak_add_layernorm(c->f[0], c->s[0], c->f[1], c->s[1], c->f[2], c->s[2], c->f[3],
                                  c->s[3], c->f[4], c->f[5], c->z[0], c->z[1], c->eps, NULL, pool);
    case F_ATTENTION: {
        if (!c->caller_ws)
            return peak_attention(c->f[0], c->f[1], c->f[2], c->f[3], &c->ad, NULL, 0, pool);
        size_t bytes = 0;
        peak_status st = peak_attention_workspace_size(&c->ad, pool, &bytes);
        if (st != PEAK_OK)
            return st;
        void *ws = aligned_bytes(bytes);
        if (!ws)
            return PEAK_ERR_NO_MEMORY;
        st = peak_attention(c->f[0], c->f[1], c->f[2], c->f[3], &c->ad, ws, bytes, pool);
        free(ws);
        return st;
    }
    case F_ROPE_CACHE:
        return peak_rope_cache(c->f[0], (peak_dtype)c->z[2], c->z[0], c->z[1], &c->rp, pool);
    case F_ROPE_APPLY:
        return peak_rope_apply(c->f[0], c->f[1], &c->rd, pool);
    case F_CONVERT:
        return peak_convert(c->f[0], (peak_dtype)c->z[2], c->f[1], (peak_dtype)c->z[1], c->z[0],
                            pool);
    }
    return PEAK_ERR_INVALID_ARG;
}

/* ---- the families' cases -------------------------------------------------- */

enum { N_PE_TABLE = 4, N_PE_ADD = 3, N_EMBED = 6, N_EXP = 2, N_SOFTMAX = 7, N_LAYERNORM = 4,
       N_ATTENTION = 11, N_ROPE_CACHE = 3, N_ROPE_APPLY = 4, N_CONVERT = 3 };

static void make_pe_table(pcase *c, int v)
{
    static const struct {
        const char *name;
        size_t n_pos, d_model, pos0;
        peak_pe_params prm;
        peak_dtype type;
    } cs[N_PE_TABLE] = {
        {"exact interleaved 512 x 512", 512, 512, 1000, {PEAK_PE_INTERLEAVED, PEAK_PE_EXACT, 1e4},
         PEAK_F32},
        {"torch-f32 split 500 x 510", 500, 510, 7, {PEAK_PE_SPLIT, PEAK_PE_TORCH_F32, 1e4},
         PEAK_F32},
        {"exact split-paper 300 x 1023", 300, 1023, 70000,
         {PEAK_PE_SPLIT_PAPER, PEAK_PE_EXACT, 500.0}, PEAK_F32},
        /* two runs of positions, three column parts */
        {"bf16 exact split 4200 x 131", 4200, 131, 9, {PEAK_PE_SPLIT, PEAK_PE_EXACT, 1e4},
         PEAK_BF16},
    };
    c->fam = F_PE_TABLE;
    c->big = 1;
    snprintf(c->name, sizeof c->name, "pe_table %s", cs[v].name);
    c->f[0] = case_floats(c, cs[v].n_pos * cs[v].d_model, 0);
    case_out(c, "out", c->f[0], cs[v].n_pos * cs[v].d_model, 0);
    c->z[0] = cs[v].n_pos, c->z[1] = cs[v].d_model, c->z[2] = cs[v].pos0;
    c->z[3] = (size_t)cs[v].type;
    c->prm = cs[v].prm;
}

static void make_pe_add(pcase *c, int v, uint64_t *rng)
{
    /* 0: on the fly, [4, 256, 512] with row gaps; 1: with a table;
       2: torch-f32 on the fly, one sequence of 1024 */
    const size_t B = v == 2 ? 1 : 4, S = v == 2 ? 1024 : 256, D = 512;
    const size_t ld = v == 0 ? D + 8 : D, bs = S * ld + (v == 0 ? 16 : 0);
    const size_t n = (B - 1) * bs + S * ld;
    c->fam = F_PE_ADD;
    c->big = 1;
    static const char *const names[N_PE_ADD] = {"on the fly B 4 S 256 D 512, row gaps",
                                                "table B 4 S 256 D 512, pos0 100",
                                                "torch-f32 on the fly B 1 S 1024 D 512"};
    snprintf(c->name, sizeof c->name, "pe_add %s", names[v]);
    c->f[0] = case_floats(c, n, 3);
    peak_test_fill_uniform(c->f[0], n, rng, -1.0f, 1.0f);
    case_out(c, "x", c->f[0], n, 1);
    c->s[0] = (ptrdiff_t)bs, c->s[1] = (ptrdiff_t)ld;
    c->z[0] = B, c->z[1] = S, c->z[2] = D, c->z[3] = v == 1 ? 100 : 5;
    c->prm = (peak_pe_params)PEAK_PE_PARAMS_DEFAULT;
    if (v == 2)
        c->prm.mode = PEAK_PE_TORCH_F32;
    if (v == 1) {
        const size_t rows = 400;
        c->f[1] = case_floats(c, rows * D, 0);
        ck_assert_int_eq(peak_pe_table(c->f[1], PEAK_F32, rows, D, 0, NULL, NULL), PEAK_OK);
        c->z[4] = rows;
    }
}

static void make_embed(pcase *c, int v, uint64_t *rng)
{
    /* 0 on the fly, one sequence; 1 table; 2 seq_len 256 batching on the
       fly (2 full sequences and a shorter one); 3 the same with a table;
       4 padding_idx with seq_len 256; 5 explicit positions */
    static const char *const names[N_EMBED] = {
        "on the fly, one sequence of 512", "table, one sequence of 512",
        "on the fly, seq_len 256 x 2 + 88", "table, seq_len 256 x 2 + 88",
        "padding_idx 1, seq_len 256 x 2", "explicit positions, 512 tokens"};
    const size_t V = 1000, D = 512, T = v == 2 || v == 3 ? 600 : 512, ld = D + 4;
    c->fam = F_EMBED;
    c->big = 1;
    snprintf(c->name, sizeof c->name, "embed_pe %s", names[v]);
    float *table = case_floats(c, V * D, 1);
    peak_test_fill_uniform(table, V * D, rng, -1.0f, 1.0f);
    int32_t *ids = case_mem(c, T * sizeof *ids);
    for (size_t t = 0; t < T; t++)
        ids[t] = (int32_t)(peak_test_next(rng) % V);
    c->ed = (peak_embed_desc)PEAK_EMBED_DESC_DEFAULT;
    c->ed.table = table, c->ed.vocab = V, c->ed.ld_table = (ptrdiff_t)D, c->ed.d_model = D;
    c->ed.scale = sqrtf((float)D);
    c->ed.pos0 = 3;
    if (v == 1 || v == 3) {
        const size_t rows = 700;
        float *pe = case_floats(c, rows * D, 2);
        ck_assert_int_eq(peak_pe_table(pe, PEAK_F32, rows, D, 0, NULL, NULL), PEAK_OK);
        c->ed.pe = pe, c->ed.pe_rows = rows;
    }
    if (v >= 2 && v <= 4)
        c->ed.seq_len = 256;
    if (v == 4) {
        c->ed.padding_idx = 1;
        c->ed.pos0 = 0;
        for (size_t t = 0; t < T; t++) /* padded ends and some pads inside */
            if (t % 256 >= 200 || peak_test_next(rng) % 7 == 0)
                ids[t] = 1;
    }
    if (v == 5) {
        int64_t *pos = case_mem(c, T * sizeof *pos);
        for (size_t t = 0; t < T; t++)
            pos[t] = (int64_t)(peak_test_next(rng) % 5000);
        c->ed.positions = pos;
        c->ed.pos0 = 0;
        c->ed.pe_params.mode = PEAK_PE_TORCH_F32;
    }
    c->ids = ids;
    c->f[0] = case_floats(c, T * ld, 5);
    case_out(c, "out", c->f[0], T * ld, 0);
    c->s[0] = (ptrdiff_t)ld;
    c->z[0] = T;
}

static void make_exp(pcase *c, int v, uint64_t *rng)
{
    const size_t n = ((size_t)1 << 19) + 3;
    c->fam = F_EXP;
    c->big = 1;
    snprintf(c->name, sizeof c->name, "exp n 2^19 + 3%s", v ? ", in place" : "");
    float *x = case_floats(c, n, 1);
    peak_test_fill_uniform(x, n, rng, -104.0f, 89.0f);
    if (v) {
        case_out(c, "y = x", x, n, 1);
        c->f[0] = c->f[1] = x;
    } else {
        c->f[1] = x;
        c->f[0] = case_floats(c, n, 2);
        case_out(c, "y", c->f[0], n, 0);
    }
    c->z[0] = n;
}

static void make_softmax(pcase *c, int v, uint64_t *rng)
{
    /* [2, 4, 256, 256], 2 MiB of scores; 2: Lq 128 against Lk 256 */
    static const char *const names[N_SOFTMAX] = {
        "unmasked", "causal top-left", "causal bottom-right Lq 128, q_offset 5",
        "key padding", "keep mask (broadcast over heads)", "bias", "in place, window 40"};
    const size_t B = 2, H = 4, Lq = v == 2 ? 128 : 256, Lk = 256;
    const size_t ld = v == 6 ? Lk : Lk + 3;
    c->fam = F_SOFTMAX;
    c->big = 1;
    snprintf(c->name, sizeof c->name, "softmax B 2 H 4 Lq %zu Lk 256 %s", Lq, names[v]);
    peak_test_mask_spec spec = {0};
    spec.causal = v == 1 || v == 2 || v == 6;
    spec.align = v == 2 ? PEAK_ALIGN_BOTTOM_RIGHT : PEAK_ALIGN_TOP_LEFT;
    spec.q_offset = v == 2 ? 5 : 0;
    spec.window = v == 6 ? 40 : 0;
    spec.key_len = v == 3;
    spec.keep = v == 4, spec.keep_bcast = 2, spec.keep_density = 0.7;
    spec.bias = v == 5, spec.bias_lo = -4.0f, spec.bias_hi = 4.0f, spec.bias_masked = 0.1;
    c->sd = (peak_softmax_desc)PEAK_SOFTMAX_DESC_DEFAULT;
    c->sd.batch = B, c->sd.heads = H, c->sd.q_len = Lq, c->sd.k_len = Lk;
    const ptrdiff_t st[3] = {(ptrdiff_t)(H * Lq * ld), (ptrdiff_t)(Lq * ld), (ptrdiff_t)ld};
    memcpy(c->sd.x_stride, st, sizeof st);
    memcpy(c->sd.y_stride, st, sizeof st);
    c->sd.scale = 0.7f;
    peak_test_mask_arrays a =
        peak_test_make_mask(&c->sd.mask, &spec, (peak_test_dims){B, H, Lq, Lk}, 1, rng);
    if (a.key_len)
        case_keep(c, a.key_len);
    if (a.keep)
        case_keep(c, a.keep);
    if (a.bias) {
        ck_assert_uint_lt(c->nfmem, MAX_MEM);
        c->fmem[c->nfmem++] = a.bias;
    }
    const size_t n = B * H * Lq * ld;
    float *x = case_floats(c, n, 2);
    peak_test_fill_uniform(x, n, rng, -8.0f, 8.0f);
    if (v == 6) {
        c->f[0] = c->f[1] = x;
        case_out(c, "y = x", x, n, 1);
    } else {
        c->f[1] = x;
        c->f[0] = case_floats(c, n, 7);
        case_out(c, "y", c->f[0], n, 0);
    }
}

static void make_layernorm(pcase *c, int v, uint64_t *rng)
{
    /* 0 x alone, no gamma/beta; 1 residual, sum, gamma, beta; 2 d_model 771
       with row gaps, residual, no sum; 3 in place: y = x, sum = r */
    static const char *const names[N_LAYERNORM] = {
        "1024 x 768, no residual", "1024 x 768, residual, sum, gamma, beta",
        "1024 x 771 ld 784, residual, no sum", "1024 x 768 in place: y = x, sum = r"};
    const size_t rows = 1024, D = v == 2 ? 771 : 768, ld = v == 2 ? 784 : D, n = rows * ld;
    c->fam = F_LAYERNORM;
    c->big = 1;
    snprintf(c->name, sizeof c->name, "add_layernorm %s", names[v]);
    float *x = case_floats(c, n, 0);
    peak_test_fill_uniform(x, n, rng, -3.0f, 5.0f);
    float *r = NULL;
    if (v >= 1) {
        r = case_floats(c, n, 3);
        peak_test_fill_uniform(r, n, rng, -1.0f, 1.0f);
    }
    float *gamma = case_floats(c, D, 1), *beta = case_floats(c, D, 2);
    peak_test_fill_uniform(gamma, D, rng, 0.5f, 1.5f);
    peak_test_fill_uniform(beta, D, rng, -0.5f, 0.5f);
    c->f[2] = x, c->f[3] = r;
    c->f[4] = v == 0 ? NULL : gamma, c->f[5] = v == 0 ? NULL : beta;
    c->s[0] = c->s[1] = c->s[2] = c->s[3] = (ptrdiff_t)ld;
    c->z[0] = rows, c->z[1] = D;
    c->eps = 1e-5f;
    if (v == 3) {
        c->f[0] = x, c->f[1] = r;
        case_out(c, "y = x", x, n, 1);
        case_out(c, "sum = r", r, n, 1);
        return;
    }
    c->f[0] = case_floats(c, n, 5);
    case_out(c, "y", c->f[0], n, 0);
    if (v == 1) {
        c->f[1] = case_floats(c, n, 6);
        case_out(c, "sum", c->f[1], n, 0);
    }
}

static void make_attention(pcase *c, int v, uint64_t *rng)
{
    static const struct {
        const char *name;
        size_t B, H, Hkv, Lq, Lk, Dh, Dv;
        int causal;
        peak_align align;
        size_t q_offset, window;
        int key_len, lse, caller_ws;
    } cs[N_ATTENTION] = {
        {"full", 1, 4, 4, 256, 256, 64, 64, 0, PEAK_ALIGN_TOP_LEFT, 0, 0, 0, 0, 1},
        {"causal top-left", 1, 4, 4, 192, 256, 64, 64, 1, PEAK_ALIGN_TOP_LEFT, 0, 0, 0, 1, 0},
        {"causal bottom-right", 1, 4, 4, 192, 256, 64, 64, 1, PEAK_ALIGN_BOTTOM_RIGHT, 0, 0, 0,
         1, 1},
        {"causal window 48", 1, 4, 4, 256, 256, 64, 64, 1, PEAK_ALIGN_TOP_LEFT, 0, 48, 0, 1, 0},
        {"key padding", 2, 4, 4, 192, 192, 64, 64, 0, PEAK_ALIGN_TOP_LEFT, 0, 0, 1, 1, 1},
        {"GQA causal", 1, 8, 2, 256, 256, 64, 64, 1, PEAK_ALIGN_TOP_LEFT, 0, 0, 0, 1, 0},
        {"cross", 1, 4, 4, 160, 288, 64, 64, 0, PEAK_ALIGN_TOP_LEFT, 0, 0, 0, 1, 1},
        {"Dv != Dh", 1, 4, 4, 256, 256, 64, 40, 1, PEAK_ALIGN_TOP_LEFT, 0, 0, 0, 0, 0},
        {"decode", 1, 8, 2, 1, 2048, 64, 64, 0, PEAK_ALIGN_TOP_LEFT, 0, 0, 0, 1, 1},
        {"decode", 1, 8, 2, 1, 8192, 64, 64, 0, PEAK_ALIGN_TOP_LEFT, 0, 0, 0, 1, 0},
        {"decode causal bottom-right, key padding", 2, 8, 2, 1, 2048, 64, 64, 1,
         PEAK_ALIGN_BOTTOM_RIGHT, 0, 0, 1, 1, 1},
    };
    const size_t B = cs[v].B, H = cs[v].H, Hkv = cs[v].Hkv, Lq = cs[v].Lq, Lk = cs[v].Lk;
    const size_t Dh = cs[v].Dh, Dv = cs[v].Dv;
    c->fam = F_ATTENTION;
    c->big = 1;
    c->caller_ws = cs[v].caller_ws;
    snprintf(c->name, sizeof c->name, "attention %s B %zu H %zu Hkv %zu Lq %zu Lk %zu Dh %zu Dv %zu%s",
             cs[v].name, B, H, Hkv, Lq, Lk, Dh, Dv, cs[v].lse ? ", lse" : "");
    peak_attention_desc *d = &c->ad;
    *d = (peak_attention_desc)PEAK_ATTENTION_DESC_DEFAULT;
    d->batch = B, d->heads = H, d->kv_heads = Hkv, d->q_len = Lq, d->kv_len = Lk;
    d->head_dim = Dh, d->v_head_dim = Dv;
    const ptrdiff_t qs[3] = {(ptrdiff_t)(Lq * H * Dh), (ptrdiff_t)(H * Dh), (ptrdiff_t)Dh};
    const ptrdiff_t ks[3] = {(ptrdiff_t)(Lk * Hkv * Dh), (ptrdiff_t)(Hkv * Dh), (ptrdiff_t)Dh};
    const ptrdiff_t vs[3] = {(ptrdiff_t)(Lk * Hkv * Dv), (ptrdiff_t)(Hkv * Dv), (ptrdiff_t)Dv};
    const ptrdiff_t os[3] = {(ptrdiff_t)(Lq * H * Dv), (ptrdiff_t)(H * Dv), (ptrdiff_t)Dv};
    const ptrdiff_t ls[3] = {(ptrdiff_t)(H * Lq), (ptrdiff_t)Lq, 1};
    memcpy(d->q_stride, qs, sizeof qs);
    memcpy(d->k_stride, ks, sizeof ks);
    memcpy(d->v_stride, vs, sizeof vs);
    memcpy(d->o_stride, os, sizeof os);
    d->mask.causal = cs[v].causal;
    d->mask.align = cs[v].align;
    d->mask.q_offset = cs[v].q_offset;
    d->mask.window = cs[v].window;
    if (cs[v].key_len) {
        int32_t *kl = case_mem(c, B * sizeof *kl);
        for (size_t b = 0; b < B; b++)
            kl[b] = (int32_t)(b == 0 ? Lk * 5 / 8 + 3 : Lk);
        d->mask.key_len = kl;
    }
    float *q = case_floats(c, B * Lq * H * Dh, 1);
    float *k = case_floats(c, B * Lk * Hkv * Dh, 2);
    float *vv = case_floats(c, B * Lk * Hkv * Dv, 3);
    peak_test_fill_uniform(q, B * Lq * H * Dh, rng, -1.0f, 1.0f);
    peak_test_fill_uniform(k, B * Lk * Hkv * Dh, rng, -1.0f, 1.0f);
    peak_test_fill_uniform(vv, B * Lk * Hkv * Dv, rng, -2.0f, 2.0f);
    c->f[0] = case_floats(c, B * Lq * H * Dv, 0);
    c->f[1] = q, c->f[2] = k, c->f[3] = vv;
    case_out(c, "o", c->f[0], B * Lq * H * Dv, 0);
    if (cs[v].lse) {
        c->f[4] = case_floats(c, B * H * Lq, 4);
        case_out(c, "lse", c->f[4], B * H * Lq, 0);
        d->lse = c->f[4];
        memcpy(d->lse_stride, ls, sizeof ls);
    }
}

static void make_rope_cache(pcase *c, int v)
{
    /* 0: EXACT, 5000 rows of 128 (20 items of 256 rows); 1: HF_F32 YaRN,
       3000 rows of 96 from position 100000; 2: 1, float16 */
    const size_t rows = v ? 3000 : 5000, r = v ? 96 : 128;
    c->fam = F_ROPE_CACHE;
    c->big = 1;
    snprintf(c->name, sizeof c->name, "rope_cache %s%s",
             v ? "hf-f32 yarn 3000 x 96 from 100000" : "exact 5000 x 128 from 3",
             v == 2 ? ", f16" : "");
    c->rp = (peak_rope_params)PEAK_ROPE_PARAMS_DEFAULT;
    c->rp.rotary_dim = r;
    c->rp.base = v ? 1e6 : 5e5;
    if (v) {
        c->rp.mode = PEAK_ROPE_HF_F32;
        c->rp.scaling = PEAK_ROPE_YARN, c->rp.factor = 4.0, c->rp.original_max_position = 32768;
    }
    c->f[0] = case_floats(c, rows * r, 1);
    case_out(c, "cache", c->f[0], rows * r, 0);
    c->z[0] = rows, c->z[1] = v ? 100000 : 3;
    c->z[2] = (size_t)(v == 2 ? PEAK_F16 : PEAK_F32);
}

static void make_rope_apply(pcase *c, int v, uint64_t *rng)
{
    /* [2, 300, 5, 80], rotary_dim 64: 0 on the fly, EXACT, half-split;
       1 from a cache, interleaved; 2 in place, on the fly, HF_F32 YaRN,
       int64 positions per sequence; 3 [B, H, L, D] from a cache, int32
       positions (one row for both sequences) */
    static const char *const names[N_ROPE_APPLY] = {
        "on the fly, exact, half-split", "cache, interleaved",
        "in place, on the fly, hf-f32 yarn, int64 positions",
        "[B,H,L,D], cache, int32 positions (broadcast)"};
    const size_t B = 2, L = 300, H = 5, D = 80, r = 64, n = B * L * H * D;
    c->fam = F_ROPE_APPLY;
    c->big = 1;
    snprintf(c->name, sizeof c->name, "rope_apply [2, 300, 5, 80] r 64 %s", names[v]);
    peak_rope_desc *d = &c->rd;
    *d = (peak_rope_desc)PEAK_ROPE_DESC_DEFAULT;
    d->batch = B, d->seq_len = L, d->heads = H, d->head_dim = D;
    const ptrdiff_t blhd[3] = {(ptrdiff_t)(L * H * D), (ptrdiff_t)(H * D), (ptrdiff_t)D};
    const ptrdiff_t bhld[3] = {(ptrdiff_t)(H * L * D), (ptrdiff_t)D, (ptrdiff_t)(L * D)};
    memcpy(d->x_stride, v == 3 ? bhld : blhd, sizeof blhd);
    memcpy(d->y_stride, v == 3 ? bhld : blhd, sizeof blhd);
    d->pairing = v == 1 ? PEAK_ROPE_INTERLEAVED : PEAK_ROPE_HALF_SPLIT;
    d->params.rotary_dim = r;
    d->params.base = 5e5;
    d->pos0 = 7;
    if (v == 2) {
        d->params.mode = PEAK_ROPE_HF_F32;
        d->params.scaling = PEAK_ROPE_YARN, d->params.factor = 4.0;
        d->params.original_max_position = 4096;
        int64_t *pos = case_mem(c, B * L * sizeof *pos);
        for (size_t t = 0; t < B * L; t++) /* left padding: the second sequence 40 later */
            pos[t] = (int64_t)(t % L + (t / L) * 40 + 5);
        d->positions = pos, d->positions_stride = (ptrdiff_t)L;
    }
    if (v == 1 || v == 3) {
        const size_t rows = 400;
        float *cache = case_floats(c, rows * r, 2);
        ck_assert_int_eq(peak_rope_cache(cache, PEAK_F32, rows, 0, &d->params, NULL), PEAK_OK);
        d->cache = cache, d->cache_rows = rows;
    }
    if (v == 3) {
        int32_t *pos = case_mem(c, L * sizeof *pos);
        for (size_t l = 0; l < L; l++)
            pos[l] = (int32_t)((l * 7) % 400);
        d->positions32 = pos, d->positions_stride = 0;
    }
    float *x = case_floats(c, n, 3);
    peak_test_fill_uniform(x, n, rng, -2.0f, 2.0f);
    if (v == 2) {
        c->f[0] = c->f[1] = x;
        case_out(c, "y = x", x, n, 1);
    } else {
        c->f[1] = x;
        c->f[0] = case_floats(c, n, 4);
        case_out(c, "y", c->f[0], n, 0);
    }
}

/* float32 -> bfloat16, float16 -> float32, bfloat16 -> float16; a 16-bit
   array of n elements takes n / 2 floats (n even). */
static void make_convert(pcase *c, int v, uint64_t *rng)
{
    static const peak_dtype from[N_CONVERT] = {PEAK_F32, PEAK_F16, PEAK_BF16};
    static const peak_dtype to[N_CONVERT] = {PEAK_BF16, PEAK_F32, PEAK_F16};
    static const char *const names[N_CONVERT] = {"f32 -> bf16", "f16 -> f32", "bf16 -> f16"};
    const size_t n = ((size_t)1 << 19) + 6;
    c->fam = F_CONVERT;
    c->big = 1;
    snprintf(c->name, sizeof c->name, "convert %s, n 2^19 + 6", names[v]);
    float *src = case_floats(c, n, 1), *x = src;
    peak_test_fill_uniform(src, n, rng, -7e4f, 7e4f);
    if (from[v] != PEAK_F32) {
        x = case_floats(c, n / 2, 2);
        ck_assert_int_eq(peak_convert(x, from[v], src, PEAK_F32, n, NULL), PEAK_OK);
    }
    const size_t yf = to[v] == PEAK_F32 ? n : n / 2;
    c->f[0] = case_floats(c, yf, 3);
    case_out(c, "y", c->f[0], yf, 0);
    c->f[1] = x;
    c->z[0] = n;
    c->z[1] = (size_t)from[v];
    c->z[2] = (size_t)to[v];
}

static void make_case(pcase *c, enum family fam, int v)
{
    memset(c, 0, sizeof *c);
    uint64_t rng = 0x9001ull + 977u * (uint64_t)fam + (uint64_t)v;
    switch (fam) {
    case F_PE_TABLE:
        make_pe_table(c, v);
        break;
    case F_PE_ADD:
        make_pe_add(c, v, &rng);
        break;
    case F_EMBED:
        make_embed(c, v, &rng);
        break;
    case F_EXP:
        make_exp(c, v, &rng);
        break;
    case F_SOFTMAX:
        make_softmax(c, v, &rng);
        break;
    case F_LAYERNORM:
        make_layernorm(c, v, &rng);
        break;
    case F_ATTENTION:
        make_attention(c, v, &rng);
        break;
    case F_ROPE_CACHE:
        make_rope_cache(c, v);
        break;
    case F_ROPE_APPLY:
        make_rope_apply(c, v, &rng);
        break;
    case F_CONVERT:
        make_convert(c, v, &rng);
        break;
    }
}

/* ---- running a case on every pool ------------------------------------------- */

static const size_t pool_sizes[] = {1, 2, 3, 4, 7};
enum { N_SIZES = sizeof pool_sizes / sizeof pool_sizes[0] };

typedef struct snapshot {
    size_t n;
    float *p[MAX_OUT];
} snapshot;

static snapshot take_snapshot(const pcase *c)
{
    snapshot s = {c->nout, {NULL}};
    for (size_t i = 0; i < c->nout; i++) {
        s.p[i] = malloc(c->out[i].n * sizeof(float));
        ck_assert_ptr_nonnull(s.p[i]);
        memcpy(s.p[i], c->out[i].p, c->out[i].n * sizeof(float));
    }
    return s;
}

static void free_snapshot(snapshot *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->p[i]);
    s->n = 0;
}

/* Every output equals the no-pool bytes; else the first float that
   differs. */
static void expect_same_bytes(const pcase *c, const snapshot *want, const char *how)
{
    for (size_t i = 0; i < c->nout; i++) {
        if (peak_test_bytes_equal(want->p[i], c->out[i].p, c->out[i].n * sizeof(float)))
            continue;
        size_t j = 0;
        while (j < c->out[i].n && memcmp(&want->p[i][j], &c->out[i].p[j], sizeof(float)) == 0)
            j++;
        size_t diffs = 0;
        for (size_t t = j; t < c->out[i].n; t++)
            diffs += memcmp(&want->p[i][t], &c->out[i].p[t], sizeof(float)) != 0;
        ck_abort_msg("%s, %s: %s: %s differs from the no-pool call at float %zu of %zu "
                     "(%a, no pool %a; %zu floats differ)",
                     peak_isa_name(peak_test_isa), c->name, how, c->out[i].name, j,
                     c->out[i].n, (double)c->out[i].p[j], (double)want->p[i][j], diffs);
    }
}

/* The case on one pool: the same bytes, the interface kept, and a big
   case split when the pool has two workers or more.  Returns the most
   tasks of one run. */
static size_t run_on_pool(const pcase *c, const snapshot *want, tpool *p)
{
    char how[96];
    snprintf(how, sizeof how, "%s pool of %zu workers", pool_kind_name[p->kind], p->workers);
    case_reset(c);
    const peak_status st = case_call(c, &p->iface);
    CHECK(st == PEAK_OK, "%s, %s: %s: status %s", peak_isa_name(peak_test_isa), c->name, how,
          peak_status_string(st));
    expect_same_bytes(c, want, how);
    CHECK(!atomic_load(&p->too_many), "%s, %s: %s: a run of more tasks than workers() (%zu)",
          peak_isa_name(peak_test_isa), c->name, how, atomic_load(&p->max_tasks));
    CHECK(!atomic_load(&p->bad), "%s, %s: %s: the test pool failed (a task not run once)",
          peak_isa_name(peak_test_isa), c->name, how);
    const size_t most = atomic_load(&p->max_tasks);
    if (c->big && p->workers >= 2)
        CHECK(most >= 2,
              "%s, %s: %s: the call ran as one task (%zu runs): not split, although its work "
              "is well above the inline threshold",
              peak_isa_name(peak_test_isa), c->name, how, atomic_load(&p->runs));
    return most;
}

static void run_case(enum family fam, int v, int variant_of_quick)
{
    pcase c;
    make_case(&c, fam, v);
    case_reset(&c);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const peak_status st = case_call(&c, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    CHECK(st == PEAK_OK, "%s, %s: no pool: status %s", peak_isa_name(peak_test_isa), c.name,
          peak_status_string(st));
    snapshot want = take_snapshot(&c);

    /* NULL again (nothing kept between calls), then a pool whose workers()
       answers 0: one worker, never more than one task.  Quick: the first
       case of each family only. */
    const int quick = peak_test_quick();
    if (!quick || variant_of_quick == 0) {
        case_reset(&c);
        ck_assert_int_eq(case_call(&c, NULL), PEAK_OK);
        expect_same_bytes(&c, &want, "a second no-pool call");
        tpool *p = tpool_new(POOL_REVERSE, 0);
        case_reset(&c);
        const peak_status s0 = case_call(&c, &p->iface);
        CHECK(s0 == PEAK_OK, "%s: workers() 0: status %s", c.name, peak_status_string(s0));
        expect_same_bytes(&c, &want, "pool whose workers() is 0");
        CHECK(atomic_load(&p->max_tasks) <= 1 && !atomic_load(&p->too_many),
              "%s: workers() 0: a run of %zu tasks", c.name, atomic_load(&p->max_tasks));
        tpool_free(p);
    }

    /* Every kind at every size; quick (valgrind, qemu, ThreadSanitizer):
       the pthreads pool at one size of 2 or more, and one other kind at one
       size, both rotating with the case so that the family's cases still
       meet every kind and size. */
    char line[256];
    int at = snprintf(line, sizeof line, "%-7s %-72.72s %7.2f ms, tasks:",
                      peak_isa_name(peak_test_isa), c.name, ms);
    const size_t q = (size_t)variant_of_quick;
    for (int k = 0; k < N_POOL_KINDS; k++) {
        for (size_t s = 0; s < N_SIZES; s++) {
            if (quick && k == POOL_PTHREADS && s != 1 + q % (N_SIZES - 1))
                continue;
            if (quick && k != POOL_PTHREADS &&
                (k != (int)(q % (N_POOL_KINDS - 1)) || s != (q + 1) % N_SIZES))
                continue;
            tpool *p = tpool_new((enum pool_kind)k, pool_sizes[s]);
            if (!p)
                continue;
            const size_t most = run_on_pool(&c, &want, p);
            if (at > 0 && (size_t)at < sizeof line && (k == POOL_PTHREADS || quick))
                at += snprintf(line + at, sizeof line - (size_t)at, " %s%zu/%zu",
                               quick ? pool_kind_name[k] : "", most, pool_sizes[s]);
            tpool_free(p);
        }
    }
    printf("%s\n", line);
    free_snapshot(&want);
    case_free(&c);
}

START_TEST(pe_table_same_bytes)
{
    run_case(F_PE_TABLE, _i, _i);
}
END_TEST

START_TEST(pe_add_same_bytes)
{
    run_case(F_PE_ADD, _i, _i);
}
END_TEST

START_TEST(embed_pe_same_bytes)
{
    run_case(F_EMBED, _i, _i);
}
END_TEST

START_TEST(exp_same_bytes)
{
    run_case(F_EXP, _i, _i);
}
END_TEST

START_TEST(softmax_same_bytes)
{
    run_case(F_SOFTMAX, _i, _i);
}
END_TEST

START_TEST(add_layernorm_same_bytes)
{
    run_case(F_LAYERNORM, _i, _i);
}
END_TEST

START_TEST(attention_same_bytes)
{
    run_case(F_ATTENTION, _i, _i);
}
END_TEST

START_TEST(rope_cache_same_bytes)
{
    run_case(F_ROPE_CACHE, _i, _i);
}
END_TEST

START_TEST(convert_same_bytes)
{
    run_case(F_CONVERT, _i, _i);
}
END_TEST

START_TEST(rope_apply_same_bytes)
{
    run_case(F_ROPE_APPLY, _i, _i);
}
END_TEST

/* ---- a pool whose workers() changes between calls ----------------------- */

/* peak asks workers() once per call (peak.h); a pool that answers
   differently each time (a pool resized by another thread) must still get
   at most that many tasks from every run, and the same bytes.  Attention
   sizes its workspace from the answer: a NULL workspace here. */
START_TEST(pool_whose_workers_changes)
{
    static const size_t answers[] = {1, 7, 2, 5, 3, 6, 4, 2, 7, 1, 3};
    static const struct {
        enum family fam;
        int v;
    } cs[] = {{F_SOFTMAX, 1}, {F_ATTENTION, 5}, {F_ATTENTION, 9}, {F_LAYERNORM, 1}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        pcase c;
        make_case(&c, cs[i].fam, cs[i].v);
        c.caller_ws = 0;
        case_reset(&c);
        ck_assert_int_eq(case_call(&c, NULL), PEAK_OK);
        snapshot want = take_snapshot(&c);
        for (size_t start = 0; start < (peak_test_quick() ? 1u : 3u); start++) {
            tpool *p = tpool_new(POOL_PTHREADS, 7);
            p->fickle = answers + start;
            p->n_fickle = sizeof answers / sizeof answers[0] - start;
            case_reset(&c);
            const peak_status st = case_call(&c, &p->iface);
            CHECK(st == PEAK_OK, "%s: fickle pool: status %s", c.name, peak_status_string(st));
            expect_same_bytes(&c, &want, "a pool whose workers() changes");
            CHECK(!atomic_load(&p->bad), "%s: fickle pool: a task not run once", c.name);
            printf("%-7s %-60.60s workers() asked %zu times, %zu runs, at most %zu tasks\n",
                   peak_isa_name(peak_test_isa), c.name, atomic_load(&p->asked),
                   atomic_load(&p->runs), atomic_load(&p->max_tasks));
            tpool_free(p);
        }
        free_snapshot(&want);
        case_free(&c);
    }
}
END_TEST

/* ---- nesting ---------------------------------------------------------------- */

/* The caller's own run on a pool: each task makes a softmax and an
   attention call with that same pool. */
typedef struct nest {
    const peak_threadpool *pool;
    pcase *sm, *at;
    float *sm_y[MAX_TASKS], *at_o[MAX_TASKS], *at_lse[MAX_TASKS];
    atomic_int failed;
    atomic_size_t tasks;
} nest;

static void nest_task(void *arg, size_t t)
{
    nest *n = arg;
    peak_softmax_desc sd = n->sm->sd;
    peak_attention_desc ad = n->at->ad;
    ad.lse = n->at_lse[t];
    if (peak_softmax(n->sm_y[t], n->sm->f[1], &sd, n->pool) != PEAK_OK)
        atomic_store(&n->failed, 1);
    if (peak_attention(n->at_o[t], n->at->f[1], n->at->f[2], n->at->f[3], &ad, NULL, 0,
                       n->pool) != PEAK_OK)
        atomic_store(&n->failed, 1);
    atomic_fetch_add(&n->tasks, 1);
}

typedef struct nest_outer {
    nest *n;
    size_t tasks;
    atomic_int finished;
} nest_outer;

static void *nest_outer_main(void *arg)
{
    nest_outer *o = arg;
    o->n->pool->run(o->n->pool->ctx, nest_task, o->n, o->tasks);
    atomic_store(&o->finished, 1);
    return NULL;
}

/* Natively the nested calls take milliseconds; valgrind, qemu and TSan
   (PEAK_TEST_QUICK) run them 20-100 times slower.  Below Check's 120 s
   (tests/meson.build), so that a deadlock is reported as one. */
#define WATCHDOG_S (peak_test_quick() ? 100 : 60)

/* Runs the nested calls on `pool` from a thread of their own, and fails
   (rather than hangs) if they have not returned within the watchdog's
   time: a pool's run entered again from one of its own tasks may deadlock
   (peak.h, Nesting).  Returns 1 if they finished. */
static int nested_calls(const char *what, const peak_threadpool *pool, size_t tasks)
{
    pcase sm, at;
    make_case(&sm, F_SOFTMAX, 1);
    make_case(&at, F_ATTENTION, 5);
    case_reset(&sm);
    case_reset(&at);
    ck_assert_int_eq(case_call(&sm, NULL), PEAK_OK);
    ck_assert_int_eq(case_call(&at, NULL), PEAK_OK);
    nest *n = calloc(1, sizeof *n);
    ck_assert_ptr_nonnull(n);
    n->pool = pool, n->sm = &sm, n->at = &at;
    for (size_t t = 0; t < tasks; t++) {
        n->sm_y[t] = case_floats(&sm, sm.out[0].n, t % 8);
        n->at_o[t] = case_floats(&at, at.out[0].n, t % 8);
        n->at_lse[t] = case_floats(&at, at.out[1].n, 0);
    }
    nest_outer o = {n, tasks, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, nest_outer_main, &o), 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WATCHDOG_S;
    const int joined = pthread_timedjoin_np(th, NULL, &until);
    if (joined != 0) {
        /* Stuck: leave the thread and the pool (destroying it would hang
           too); the failure ends this test. */
        ck_abort_msg("%s, %s: the nested peak calls did not return within %d s (deadlock: the "
                     "pool's run was entered again from one of its own tasks)",
                     peak_isa_name(peak_test_isa), what, WATCHDOG_S);
    }
    CHECK(!atomic_load(&n->failed), "%s, %s: a nested call failed", peak_isa_name(peak_test_isa),
          what);
    ck_assert_uint_eq(atomic_load(&n->tasks), tasks);
    for (size_t t = 0; t < tasks; t++) {
        CHECK(peak_test_bytes_equal(n->sm_y[t], sm.out[0].p, sm.out[0].n * sizeof(float)),
              "%s, %s: task %zu: the nested softmax differs from the no-pool call",
              peak_isa_name(peak_test_isa), what, t);
        CHECK(peak_test_bytes_equal(n->at_o[t], at.out[0].p, at.out[0].n * sizeof(float)),
              "%s, %s: task %zu: the nested attention differs from the no-pool call",
              peak_isa_name(peak_test_isa), what, t);
        CHECK(peak_test_bytes_equal(n->at_lse[t], at.out[1].p, at.out[1].n * sizeof(float)),
              "%s, %s: task %zu: the nested attention's lse differs from the no-pool call",
              peak_isa_name(peak_test_isa), what, t);
    }
    free(n);
    case_free(&sm);
    case_free(&at);
    return 1;
}

START_TEST(nested_call_on_a_created_pool)
{
    /* peak_threadpool_create(3) behind the counting interface (which only
       forwards: the nested calls reach the same pthreadpool) */
    tpool *p = tpool_new(POOL_CREATE, 3);
    if (!p) {
        printf("built without pthreadpool: peak_threadpool_create returns "
               "PEAK_ERR_UNSUPPORTED, nothing to nest on\n");
        return;
    }
    nested_calls("tasks of peak_threadpool_create(3)'s run calling peak with that pool",
                 &p->iface, 3);
    CHECK(!atomic_load(&p->bad) && !atomic_load(&p->too_many), "the created pool was misused");
    printf("%-7s nested softmax and attention in 3 tasks of a peak_threadpool_create(3) run, "
           "same pool: same bytes, %zu runs (nested ones included), at most %zu tasks\n",
           peak_isa_name(peak_test_isa), atomic_load(&p->runs), atomic_load(&p->max_tasks));
    tpool_free(p);
}
END_TEST

/* The same with a pool whose run may be entered from its tasks (new
   threads per run): the nested calls may really use it. */
START_TEST(nested_call_on_a_reentrant_pool)
{
    tpool *p = tpool_new(POOL_PTHREADS, 4);
    nested_calls("tasks of a reentrant pool's run calling peak with that pool", &p->iface, 4);
    CHECK(!atomic_load(&p->bad) && !atomic_load(&p->too_many), "the reentrant pool was misused");
    printf("%-7s nested softmax and attention in 4 tasks of a reentrant pool: same bytes, "
           "%zu runs (nested ones included), at most %zu tasks\n",
           peak_isa_name(peak_test_isa), atomic_load(&p->runs), atomic_load(&p->max_tasks));
    tpool_free(p);
}
END_TEST

/* ---- the attention workspace per worker count -------------------------------- */

START_TEST(attention_workspace_per_worker_count)
{
    /* _i: a prefill (GQA causal, L 256) and a split-KV decode (Lk 8192) */
    pcase c;
    make_case(&c, F_ATTENTION, _i == 0 ? 5 : 9);
    size_t none = 0, prev = 0, size[N_SIZES];
    ck_assert_int_eq(peak_attention_workspace_size(&c.ad, NULL, &none), PEAK_OK);
    tpool *zero = tpool_new(POOL_REVERSE, 0);
    size_t z = 0;
    ck_assert_int_eq(peak_attention_workspace_size(&c.ad, &zero->iface, &z), PEAK_OK);
    CHECK(z == none, "%s: workspace for a pool of 0 workers %zu, no pool %zu", c.name, z, none);
    tpool_free(zero);
    for (size_t s = 0; s < N_SIZES; s++) {
        tpool *p = tpool_new(POOL_REVERSE, pool_sizes[s]);
        ck_assert_int_eq(peak_attention_workspace_size(&c.ad, &p->iface, &size[s]), PEAK_OK);
        tpool_free(p);
        if (s == 0)
            CHECK(size[s] == none, "%s: workspace for 1 worker %zu, no pool %zu", c.name, size[s],
                  none);
        CHECK(size[s] >= prev, "%s: the workspace shrinks from %zu to %zu at %zu workers", c.name,
              prev, size[s], pool_sizes[s]);
        prev = size[s];
    }
    CHECK(size[N_SIZES - 1] > size[0],
          "%s: the workspace does not grow with the workers (%zu bytes for 1 and for 7)", c.name,
          size[0]);
    printf("%-7s %s: workspace bytes by workers: none %zu", peak_isa_name(peak_test_isa), c.name,
           none);
    for (size_t s = 0; s < N_SIZES; s++)
        printf(", %zu: %zu", pool_sizes[s], size[s]);
    printf("\n");

    /* A workspace sized for one worker, on a pool of more: rejected, and
       nothing written; sized for the pool: accepted, the no-pool bytes. */
    case_reset(&c);
    ck_assert_int_eq(peak_attention(c.f[0], c.f[1], c.f[2], c.f[3], &c.ad, NULL, 0, NULL),
                     PEAK_OK);
    snapshot want = take_snapshot(&c);
    for (size_t s = 1; s < N_SIZES; s++) {
        if (size[s] == size[0])
            continue;
        tpool *p = tpool_new(POOL_PTHREADS, pool_sizes[s]);
        void *ws = aligned_bytes(size[s]);
        ck_assert_ptr_nonnull(ws);
        case_reset(&c);
        const peak_status st =
            peak_attention(c.f[0], c.f[1], c.f[2], c.f[3], &c.ad, ws, size[0], &p->iface);
        CHECK(st == PEAK_ERR_WORKSPACE,
              "%s: a workspace of %zu bytes (1 worker) on a pool of %zu: status %s, not "
              "PEAK_ERR_WORKSPACE",
              c.name, size[0], pool_sizes[s], peak_status_string(st));
        for (size_t i = 0; i < c.nout; i++)
            for (size_t j = 0; j < c.out[i].n; j++)
                CHECK(peak_test_is_canary(c.out[i].p[j]), "%s: rejected call wrote %s[%zu]",
                      c.name, c.out[i].name, j);
        CHECK(atomic_load(&p->runs) == 0, "%s: a rejected call ran tasks", c.name);
        case_reset(&c);
        ck_assert_int_eq(
            peak_attention(c.f[0], c.f[1], c.f[2], c.f[3], &c.ad, ws, size[s], &p->iface),
            PEAK_OK);
        expect_same_bytes(&c, &want, "caller workspace of the pool's size");
        free(ws);
        tpool_free(p);
    }
    free_snapshot(&want);
    case_free(&c);
}
END_TEST

/* ---- the interface's small promises -------------------------------------- */

START_TEST(workers_of_null_and_zero)
{
    ck_assert_uint_eq(peak_threadpool_workers(NULL), 1);
    tpool *p = tpool_new(POOL_REVERSE, 0);
    ck_assert_uint_eq(peak_threadpool_workers(&p->iface), 1);
    p->workers = 5;
    ck_assert_uint_eq(peak_threadpool_workers(&p->iface), 5);
    tpool_free(p);
    peak_threadpool none = {NULL, NULL, NULL};
    ck_assert_uint_eq(peak_threadpool_workers(&none), 1);
    ck_assert_int_eq(peak_threadpool_create(2, NULL), PEAK_ERR_INVALID_ARG);
    peak_threadpool_destroy(NULL);
    /* the adapter of a NULL pthreadpool: pthreadpool's one-thread pool */
    peak_threadpool pp = peak_threadpool_from_pthreadpool(NULL);
    ck_assert_uint_eq(peak_threadpool_workers(&pp), 1);
    pcase c;
    make_case(&c, F_SOFTMAX, 2);
    case_reset(&c);
    ck_assert_int_eq(case_call(&c, NULL), PEAK_OK);
    snapshot want = take_snapshot(&c);
    case_reset(&c);
    ck_assert_int_eq(case_call(&c, &pp), PEAK_OK);
    expect_same_bytes(&c, &want, "peak_threadpool_from_pthreadpool(NULL)");
    free_snapshot(&want);
    case_free(&c);
}
END_TEST

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create(peak_isa_name(isa));
    tcase_add_loop_test(tc, pe_table_same_bytes, 0, N_PE_TABLE);
    tcase_add_loop_test(tc, pe_add_same_bytes, 0, N_PE_ADD);
    tcase_add_loop_test(tc, embed_pe_same_bytes, 0, N_EMBED);
    tcase_add_loop_test(tc, exp_same_bytes, 0, N_EXP);
    tcase_add_loop_test(tc, softmax_same_bytes, 0, N_SOFTMAX);
    tcase_add_loop_test(tc, add_layernorm_same_bytes, 0, N_LAYERNORM);
    tcase_add_loop_test(tc, attention_same_bytes, 0, N_ATTENTION);
    tcase_add_loop_test(tc, rope_cache_same_bytes, 0, N_ROPE_CACHE);
    tcase_add_loop_test(tc, rope_apply_same_bytes, 0, N_ROPE_APPLY);
    tcase_add_loop_test(tc, convert_same_bytes, 0, N_CONVERT);
    tcase_add_test(tc, pool_whose_workers_changes);
    tcase_add_test(tc, nested_call_on_a_reentrant_pool);
    tcase_add_test(tc, nested_call_on_a_created_pool);
    tcase_add_loop_test(tc, attention_workspace_per_worker_count, 0, 2);
    tcase_add_test(tc, workers_of_null_and_zero);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
