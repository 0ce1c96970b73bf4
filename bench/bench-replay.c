/*
 * bench-replay.c - bench_replay: the speedup peak's scheduling would give
 * on N workers, predicted from one core.
 *
 * For each shape below, the public call is made with a peak_work_intercept
 * (kernels/schedule/parallel.h) set: every work the call hands to the
 * runner comes here instead, and each of its items is run on the calling
 * thread, alone, and timed (clock_gettime(CLOCK_THREAD_CPUTIME_ID), the
 * calling thread's CPU time, as bench/report.sh times bench_peak: on a
 * loaded machine a wall-clock time also counts the time other processes
 * held the core, and on a quiet one the two agree; --clock=wall takes
 * CLOCK_MONOTONIC.  The item is run --repeat times, 5 by default, with
 * the work's scratch slot 0, and the median is its cost).  The items' costs are then replayed through the
 * runner's own scheduling -- greedy list scheduling in item order,
 * peak_schedule_makespan -- for N = 1, 2, 4, 8, 16, 32, 64, 128, 192
 * workers, as peak_work_run would run them: a work runs inline (one task)
 * when it has fewer than 2 items or its modelled time (total_ns) is below
 * PEAK_INLINE_NS, and on at most min(N, items, slots) tasks otherwise.  A
 * call made of several works (decode: the split-KV chunks, then the merge)
 * takes the sum of their makespans.  The predicted speedup is
 * T(1) / T(N), T(N) that sum.
 *
 * Assumptions (printed with the results):
 *   - no memory-bandwidth limit: an item takes on N busy cores what it took
 *     alone on one (the "speedup" column);
 *   - items are timed warm: a repeated item finds its data in cache, which
 *     favours memory-bound items (--timing=first times only the first run);
 *   - the pool costs nothing to wake and join (--overhead-us=X adds X per
 *     work that runs on more than one task);
 *   - the workers are identical and not shared with anything else.
 * The "bw" column caps the speedup of every shape by memory bandwidth:
 *   speedup_bw(N) = min(speedup(N), max(1, BW(N) / (bytes / T_call)))
 * with bytes the call's traffic (what bench_peak counts for the family),
 * T_call the whole call's time alone on one thread (pool NULL), and BW(N)
 * the bandwidth of a memcpy of the same bytes (half read, half written, at
 * most 256 MiB) split over N threads of a peak_threadpool_create() pool,
 * measured in this run (the best of 7 copies).  BW(N) can only be measured for N up to the CPUs
 * this machine has: beyond them the column is null, unless --bw-gbs=X
 * gives the target machine's aggregate bandwidth (then BW(N) = X GB/s for
 * N beyond this machine's CPUs, an assumption the output repeats).  On a
 * 2-core machine that is N = 1 and 2 only: the no-limit column is the
 * prediction, the bw column a check of it where it can be made.  A BW(N)
 * below BW(1) means the other CPUs were busy (a loaded machine): the
 * output then says that the bw column means nothing in this run.
 *
 * Usage: bench_replay [--format=table|json] [--filter=REGEX] [--repeat=N]
 *                     [--timing=median|first] [--clock=cpu|wall]
 *                     [--overhead-us=X] [--bw-gbs=X] [--no-bandwidth] [--list]
 * --filter keeps the shapes whose name matches the (POSIX extended) regex.
 *
 * JSON (--format=json; bench/report*.py reads it), one object:
 *   program        "bench_replay"
 *   peak_version, isa            the library and its active tier
 *   cpus           online CPUs of this machine
 *   loadavg        the 1-minute load average at the start (-1 unknown)
 *   repeat, timing, clock        as given ("median" or "first"; "cpu"
 *                                or "wall")
 *   overhead_ns    the modelled cost of one pooled work (0: none)
 *   bw_gbs_target  --bw-gbs, or null
 *   workers        [1, 2, 4, ..., 192]: the N of every "predicted" entry
 *   assumptions    [strings]: the list above, as this run applied it
 *   bandwidth      [{copy_bytes, threads, gbs}]: every BW(N) measured
 *                  (gbs counts bytes read and written), [] if none
 *   bandwidth_busy true if a BW(N) came out below BW(1) (busy CPUs: the
 *                  speedup_bw figures of this run mean nothing)
 *   shapes         [{
 *     name         "<family>/<arg>:<value>/..." (the arguments below)
 *     family       attention, softmax, layernorm, pe_table, exp,
 *                  embedding, pe_add
 *     args         {name: value}: the shape
 *     bytes        the call's traffic (bytes read + written)
 *     call_ns      median time of the whole call, pool NULL, no intercept
 *     items_ns     T(1): the sum of all items' costs
 *     check        "same bytes" (the intercepted call's output equals the
 *                  plain call's), "DIFFERENT", or "skipped (in place)"
 *     works        [{items, slots, model_total_ns, inline, items_ns,
 *                    max_item_ns, first_ns}]: one per work of the call, in
 *                  order; inline: the runner would run it on one task
 *                  (slots 0: any number; first_ns: the items' first runs)
 *     predicted    [{workers, makespan_ns, speedup, speedup_model,
 *                    bw_cap, speedup_bw}]: per N; speedup_model is the same
 *                  replay with the scheduler's cost model instead of the
 *                  measured times (null without one); bw_cap and
 *                  speedup_bw are null where BW(N) is unknown
 *   }]
 * A call that hands no work to the runner (a family still serial) has
 * works [] and speedup 1 at every N.
 *
 * Timings on a shared machine are noisy; the figures are the lead's to
 * take on a quiet one.
 */
#include "bench.h"

#include "peak.h"
#include "schedule/parallel.h"

#include <math.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the sweep ------------------------------------------------------------ */

static const size_t replay_workers[] = {1, 2, 4, 8, 16, 32, 64, 128, 192};
#define N_WORKERS (sizeof replay_workers / sizeof replay_workers[0])
#define MAX_WORKERS 192

typedef enum family {
    F_ATTENTION,
    F_SOFTMAX,
    F_LAYERNORM,
    F_PE_TABLE,
    F_EXP,
    F_EMBEDDING,
    F_PE_ADD
} family;

static const char *const family_names[] = {"attention", "softmax", "layernorm", "pe_table",
                                           "exp", "embedding", "pe_add"};

/* Argument names per family (a[] below, in this order). */
static const char *const family_args[][6] = {
    {"B", "H", "Hkv", "Lq", "Lk", "causal"},
    {"heads", "L", "causal"},
    {"rows", "d_model"},
    {"seq_len", "d_model"},
    {"n"},
    {"batch", "seq_len", "d_model"},
    {"batch", "seq_len", "d_model"},
};
static const int family_n_args[] = {6, 3, 2, 2, 1, 3, 3};

typedef struct shape {
    family f;
    int64_t a[6];
} shape;

/* Attention: Dh = Dv = 64, [B, L, H, D] packed, K/V warm (in cache as far
   as they fit).  Self-attention H 8 at L 512 and 2048 (full and causal),
   long-context GQA causal L 4096 H 32 Hkv 8, decode H 8 Lk 8192 and
   B 1 H 32 Hkv 8 Lk 32768.  Softmax: H L x L scores, out of place.  The
   memory-bound families at out-of-cache sizes: LayerNorm 65536 x 768
   (x + r, 192 MiB an operand), the PE table 65536 x 512, exp of 16 Mi
   floats, embedding 64 x 512 tokens of 512 from a table, x += PE on
   32 x 512 x 768. */
static const shape shapes[] = {
    {F_ATTENTION, {1, 8, 8, 512, 512, 0}},
    {F_ATTENTION, {1, 8, 8, 512, 512, 1}},
    {F_ATTENTION, {1, 8, 8, 2048, 2048, 0}},
    {F_ATTENTION, {1, 8, 8, 2048, 2048, 1}},
    {F_ATTENTION, {1, 32, 8, 4096, 4096, 1}},
    {F_ATTENTION, {1, 8, 8, 1, 8192, 0}},
    {F_ATTENTION, {1, 32, 8, 1, 32768, 0}},
    {F_SOFTMAX, {12, 512, 0}},
    {F_SOFTMAX, {12, 512, 1}},
    {F_SOFTMAX, {32, 4096, 0}},
    {F_SOFTMAX, {32, 4096, 1}},
    {F_LAYERNORM, {65536, 768}},
    {F_PE_TABLE, {65536, 512}},
    {F_EXP, {1 << 24}},
    {F_EMBEDDING, {64, 512, 512}},
    {F_PE_ADD, {32, 512, 768}},
};

#define ATT_DH 64
#define EMBED_VOCAB 32000

/* ---- options -------------------------------------------------------------- */

static struct {
    int json, first, bandwidth, list, cpu_clock;
    size_t repeat;
    double overhead_ns, bw_gbs; /* bw_gbs 0: not given */
    const char *filter;
} opt = {0, 0, 1, 0, 1, 5, 0.0, 0.0, NULL};

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(opt.cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Bandwidth is always wall-clock time: the copy runs on several threads. */
static double wall_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the intercept: run and time every item -------------------------------- */

typedef struct work_rec {
    size_t items, slots;
    double model_total_ns;
    double *cost;   /* measured, per item */
    double *first;  /* the first run of each item */
    double *model;  /* w->cost, or NULL */
} work_rec;

typedef struct recorder {
    work_rec *w;
    size_t n, cap;
    int failed;
} recorder;

static void record_work(const peak_work *w, const peak_threadpool *pool, void *arg)
{
    (void)pool;
    recorder *r = arg;
    if (r->n == r->cap) {
        const size_t cap = r->cap ? 2 * r->cap : 4;
        work_rec *grown = realloc(r->w, cap * sizeof *grown);
        if (!grown) {
            r->failed = 1;
            return;
        }
        r->w = grown;
        r->cap = cap;
    }
    work_rec *rec = &r->w[r->n++];
    memset(rec, 0, sizeof *rec);
    rec->items = w->items;
    rec->slots = w->slots;
    rec->model_total_ns = w->total_ns;
    const size_t n = w->items ? w->items : 1;
    rec->cost = malloc(n * sizeof *rec->cost);
    rec->first = malloc(n * sizeof *rec->first);
    rec->model = w->cost ? malloc(n * sizeof *rec->model) : NULL;
    double *t = malloc(opt.repeat * sizeof *t);
    if (!rec->cost || !rec->first || (w->cost && !rec->model) || !t) {
        r->failed = 1;
        free(t);
        return;
    }
    void *scratch = w->slot_bytes ? w->scratch : NULL; /* slot 0 */
    for (size_t i = 0; i < w->items; i++) {
        for (size_t k = 0; k < opt.repeat; k++) {
            const double t0 = now_ns();
            w->run(w->ctx, i, scratch);
            t[k] = now_ns() - t0;
        }
        rec->first[i] = t[0];
        rec->cost[i] = opt.first ? t[0] : median(t, opt.repeat);
        if (rec->model)
            rec->model[i] = w->cost(w->ctx, i);
    }
    free(t);
}

static void recorder_free(recorder *r)
{
    for (size_t k = 0; k < r->n; k++) {
        free(r->w[k].cost);
        free(r->w[k].first);
        free(r->w[k].model);
    }
    free(r->w);
    memset(r, 0, sizeof *r);
}

/* The tasks peak_work_run would start for this work on N workers. */
static size_t work_tasks(const work_rec *w, size_t n)
{
    if (w->items < 2 || w->model_total_ns < PEAK_INLINE_NS)
        return 1;
    n = n < w->items ? n : w->items;
    return w->slots && n > w->slots ? w->slots : n;
}

/* T(N) of the call: the works one after the other.  model: the cost model
   instead of the measured times (-1 if a work has none). */
static double call_makespan(const recorder *r, size_t n, int model)
{
    double total = 0.0;
    for (size_t k = 0; k < r->n; k++) {
        const work_rec *w = &r->w[k];
        const double *c = model ? w->model : w->cost;
        if (!c)
            return -1.0;
        const size_t tasks = work_tasks(w, n);
        total += peak_schedule_makespan(c, w->items, tasks);
        if (tasks > 1)
            total += opt.overhead_ns;
    }
    return total;
}

/* A pool that says it has MAX_WORKERS workers, so the call is set up (its
   scratch sized) as for the largest N; its run is never reached under the
   intercept, and would run the tasks one after the other. */
static size_t fake_workers(void *ctx)
{
    (void)ctx;
    return MAX_WORKERS;
}

static void fake_run(void *ctx, peak_task_fn fn, void *arg, size_t n_tasks)
{
    (void)ctx;
    for (size_t t = 0; t < n_tasks; t++)
        fn(arg, t);
}

static const peak_threadpool fake_pool = {fake_workers, fake_run, NULL};

/* ---- bandwidth: memcpy of the same bytes on N threads ----------------------- */

typedef struct bw_rec {
    size_t copy_bytes, threads;
    double gbs;
} bw_rec;

static bw_rec bw_done[64];
static size_t n_bw_done;
static size_t n_cpus = 1;
static peak_threadpool *bw_pools[MAX_WORKERS + 1];
static int bw_no_pool; /* peak_threadpool_create failed (no pthreadpool) */

typedef struct copy_job {
    char *dst;
    const char *src;
    size_t bytes, parts;
} copy_job;

static void copy_part(void *arg, size_t t)
{
    const copy_job *j = arg;
    /* 64-byte aligned parts, the last one takes the rest */
    const size_t step = (j->bytes / j->parts + 63) & ~(size_t)63;
    const size_t lo = t * step < j->bytes ? t * step : j->bytes;
    const size_t hi = t + 1 == j->parts ? j->bytes : (lo + step < j->bytes ? lo + step : j->bytes);
    memcpy(j->dst + lo, j->src + lo, hi - lo);
}

/* BW(threads) for a copy of copy_bytes, in GB/s (bytes read + written);
   0 when it cannot be measured. */
static double bandwidth(size_t copy_bytes, size_t threads)
{
    for (size_t k = 0; k < n_bw_done; k++)
        if (bw_done[k].copy_bytes == copy_bytes && bw_done[k].threads == threads)
            return bw_done[k].gbs;
    if (threads > n_cpus || (threads > 1 && bw_no_pool))
        return 0.0;
    if (threads > 1 && !bw_pools[threads] &&
        peak_threadpool_create(threads, &bw_pools[threads]) != PEAK_OK) {
        bw_no_pool = 1; /* a library built without pthreadpool */
        return 0.0;
    }
    char *src = bench_alloc(copy_bytes), *dst = bench_alloc(copy_bytes);
    double gbs = 0.0;
    if (src && dst) {
        memset(src, 0x3c, copy_bytes);
        memset(dst, 0, copy_bytes);
        copy_job j = {dst, src, copy_bytes, threads};
        double t[7];
        for (size_t k = 0; k < 8; k++) { /* the first faults and warms */
            const double t0 = wall_ns();
            if (threads == 1)
                copy_part(&j, 0);
            else
                bw_pools[threads]->run(bw_pools[threads]->ctx, copy_part, &j, threads);
            if (k)
                t[k - 1] = wall_ns() - t0;
        }
        qsort(t, 7, sizeof *t, cmp_double); /* the best: a ceiling, noise only slows */
        gbs = 2.0 * (double)copy_bytes / t[0];
    }
    free(src);
    free(dst);
    if (gbs > 0.0 && n_bw_done < sizeof bw_done / sizeof bw_done[0])
        bw_done[n_bw_done++] = (bw_rec){copy_bytes, threads, gbs};
    return gbs;
}

/* Whether some BW(N), N > 1, came out below BW(1) of the same copy. */
static int bandwidth_busy(void)
{
    for (size_t k = 0; k < n_bw_done; k++)
        for (size_t j = 0; j < n_bw_done; j++)
            if (bw_done[k].copy_bytes == bw_done[j].copy_bytes && bw_done[j].threads == 1 &&
                bw_done[k].threads > 1 && bw_done[k].gbs < bw_done[j].gbs)
                return 1;
    return 0;
}

static double load_average(void)
{
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

/* ---- the calls ------------------------------------------------------------- */

typedef struct problem {
    const shape *s;
    char name[160];
    size_t bytes;        /* traffic of one call */
    float *in[4], *out;  /* inputs, output */
    size_t out_floats;
    int32_t *ids;
    void *ws;
    size_t ws_bytes;
    peak_attention_desc ad;
    peak_softmax_desc sd;
    peak_embed_desc ed;
    int in_place;
} problem;

static void fill(float *x, size_t n, uint64_t seed)
{
    bench_fill_uniform(x, n, seed, -1.0f, 1.0f);
}

static float *alloc_f(size_t n)
{
    return bench_alloc(n * sizeof(float));
}

/* "<family>/<arg>:<value>/..." */
static void shape_name(const shape *s, char *name, size_t len)
{
    int n = snprintf(name, len, "%s", family_names[s->f]);
    for (int k = 0; k < family_n_args[s->f] && n > 0 && (size_t)n < len; k++)
        n += snprintf(name + n, len - (size_t)n, "/%s:%lld", family_args[s->f][k],
                      (long long)s->a[k]);
}

static const char *setup(problem *p)
{
    const int64_t *a = p->s->a;
    switch (p->s->f) {
    case F_ATTENTION: {
        peak_attention_desc *d = &p->ad;
        *d = (peak_attention_desc)PEAK_ATTENTION_DESC_DEFAULT;
        d->batch = (size_t)a[0];
        d->heads = (size_t)a[1];
        d->kv_heads = (size_t)a[2];
        d->q_len = (size_t)a[3];
        d->kv_len = (size_t)a[4];
        d->mask.causal = (int)a[5];
        d->head_dim = ATT_DH;
        const ptrdiff_t qrow = (ptrdiff_t)(d->heads * ATT_DH), krow = (ptrdiff_t)(d->kv_heads * ATT_DH);
        const ptrdiff_t qs[3] = {(ptrdiff_t)d->q_len * qrow, qrow, ATT_DH};
        const ptrdiff_t ks[3] = {(ptrdiff_t)d->kv_len * krow, krow, ATT_DH};
        memcpy(d->q_stride, qs, sizeof qs);
        memcpy(d->o_stride, qs, sizeof qs);
        memcpy(d->k_stride, ks, sizeof ks);
        memcpy(d->v_stride, ks, sizeof ks);
        const size_t nq = d->batch * d->q_len * (size_t)qrow, nk = d->batch * d->kv_len * (size_t)krow;
        p->bytes = (2 * nq + 2 * nk) * sizeof(float);
        p->in[0] = alloc_f(nq);
        p->in[1] = alloc_f(nk);
        p->in[2] = alloc_f(nk);
        p->out = alloc_f(p->out_floats = nq);
        size_t w0, w1;
        if (peak_attention_workspace_size(d, NULL, &w0) != PEAK_OK ||
            peak_attention_workspace_size(d, &fake_pool, &w1) != PEAK_OK)
            return "peak_attention_workspace_size failed";
        p->ws_bytes = w0 > w1 ? w0 : w1;
        p->ws = bench_alloc(p->ws_bytes ? p->ws_bytes : 64);
        if (!p->in[0] || !p->in[1] || !p->in[2] || !p->out || !p->ws)
            return "out of memory";
        fill(p->in[0], nq, 1);
        fill(p->in[1], nk, 2);
        fill(p->in[2], nk, 3);
        return NULL;
    }
    case F_SOFTMAX: {
        const size_t H = (size_t)a[0], L = (size_t)a[1], n = H * L * L;
        peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
        d.batch = 1;
        d.heads = H;
        d.q_len = d.k_len = L;
        d.x_stride[0] = d.y_stride[0] = (ptrdiff_t)n;
        d.x_stride[1] = d.y_stride[1] = (ptrdiff_t)(L * L);
        d.x_stride[2] = d.y_stride[2] = (ptrdiff_t)L;
        d.mask.causal = (int)a[2];
        p->sd = d;
        p->bytes = 2 * n * sizeof(float);
        p->in[0] = alloc_f(n);
        p->out = alloc_f(p->out_floats = n);
        if (!p->in[0] || !p->out)
            return "out of memory";
        bench_fill_scores(p->in[0], n);
        return NULL;
    }
    case F_LAYERNORM: {
        const size_t rows = (size_t)a[0], d = (size_t)a[1], n = rows * d;
        p->bytes = (3 * n + 2 * d) * sizeof(float);
        p->in[0] = alloc_f(n);
        p->in[1] = alloc_f(n);
        p->in[2] = alloc_f(d);
        p->in[3] = alloc_f(d);
        p->out = alloc_f(p->out_floats = n);
        if (!p->in[0] || !p->in[1] || !p->in[2] || !p->in[3] || !p->out)
            return "out of memory";
        bench_fill_uniform(p->in[0], n, 11, -2.0f, 3.0f);
        fill(p->in[1], n, 12);
        bench_fill_uniform(p->in[2], d, 13, 0.5f, 1.5f);
        fill(p->in[3], d, 14);
        return NULL;
    }
    case F_PE_TABLE:
        p->out_floats = (size_t)a[0] * (size_t)a[1];
        p->bytes = p->out_floats * sizeof(float);
        p->out = alloc_f(p->out_floats);
        return p->out ? NULL : "out of memory";
    case F_EXP:
        p->out_floats = (size_t)a[0];
        p->bytes = 2 * p->out_floats * sizeof(float);
        p->in[0] = alloc_f(p->out_floats);
        p->out = alloc_f(p->out_floats);
        if (!p->in[0] || !p->out)
            return "out of memory";
        bench_fill_uniform(p->in[0], p->out_floats, 0x0e0e0e0e, -87.0f, 88.0f);
        return NULL;
    case F_EMBEDDING: {
        const size_t batch = (size_t)a[0], seq = (size_t)a[1], d = (size_t)a[2], n = batch * seq;
        p->bytes = n * (3 * d * sizeof(float) + sizeof(int32_t));
        p->in[0] = alloc_f((size_t)EMBED_VOCAB * d);
        p->in[1] = alloc_f(seq * d);
        p->ids = malloc(n * sizeof *p->ids);
        p->out = alloc_f(p->out_floats = n * d);
        if (!p->in[0] || !p->in[1] || !p->ids || !p->out)
            return "out of memory";
        fill(p->in[0], (size_t)EMBED_VOCAB * d, 21);
        uint64_t s = 0x9e3779b97f4a7c15ull;
        for (size_t t = 0; t < n; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            p->ids[t] = (int32_t)((s >> 33) % EMBED_VOCAB);
        }
        if (peak_pe_table(p->in[1], PEAK_F32, seq, d, 0, NULL, NULL) != PEAK_OK)
            return "peak_pe_table failed";
        peak_embed_desc e = PEAK_EMBED_DESC_DEFAULT;
        e.table = p->in[0];
        e.vocab = EMBED_VOCAB;
        e.ld_table = (ptrdiff_t)d;
        e.d_model = d;
        e.scale = sqrtf((float)d);
        e.pe = p->in[1];
        e.pe_rows = seq;
        e.seq_len = seq;
        p->ed = e;
        return NULL;
    }
    case F_PE_ADD: {
        const size_t seq = (size_t)a[1], d = (size_t)a[2];
        p->out_floats = (size_t)a[0] * seq * d;
        p->bytes = 3 * p->out_floats * sizeof(float);
        p->in[0] = alloc_f(seq * d);
        p->out = alloc_f(p->out_floats);
        if (!p->in[0] || !p->out)
            return "out of memory";
        fill(p->out, p->out_floats, 31);
        p->in_place = 1;
        return peak_pe_table(p->in[0], PEAK_F32, seq, d, 0, NULL, NULL) == PEAK_OK ? NULL
                                                                           : "peak_pe_table failed";
    }
    }
    return "unknown family";
}

static peak_status call(problem *p, const peak_threadpool *pool)
{
    const int64_t *a = p->s->a;
    switch (p->s->f) {
    case F_ATTENTION:
        return peak_attention(p->out, p->in[0], p->in[1], p->in[2], &p->ad, p->ws, p->ws_bytes,
                              pool);
    case F_SOFTMAX:
        return peak_softmax(p->out, p->in[0], &p->sd, pool);
    case F_LAYERNORM:
        return peak_add_layernorm(p->out, (ptrdiff_t)a[1], NULL, 0, p->in[0], (ptrdiff_t)a[1],
                                  p->in[1], (ptrdiff_t)a[1], p->in[2], p->in[3], (size_t)a[0],
                                  (size_t)a[1], 1e-5f, NULL, pool);
    case F_PE_TABLE:
        return peak_pe_table(p->out, PEAK_F32, (size_t)a[0], (size_t)a[1], 0, NULL, pool);
    case F_EXP:
        return peak_exp(p->out, p->in[0], p->out_floats, pool);
    case F_EMBEDDING:
        return peak_embed_pe(p->out, (ptrdiff_t)a[2], p->ids, (size_t)(a[0] * a[1]), &p->ed, pool);
    case F_PE_ADD:
        return peak_pe_add(p->out, (ptrdiff_t)(a[1] * a[2]), (ptrdiff_t)a[2], (size_t)a[0],
                           (size_t)a[1], (size_t)a[2], 0, p->in[0], (size_t)a[1], NULL, pool);
    }
    return PEAK_ERR_UNSUPPORTED;
}

static void teardown(problem *p)
{
    for (int k = 0; k < 4; k++)
        free(p->in[k]);
    free(p->out);
    free(p->ids);
    free(p->ws);
}

static uint64_t hash_floats(const float *x, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const uint32_t *u = (const uint32_t *)(const void *)x;
    for (size_t k = 0; k < n; k++)
        h = (h ^ u[k]) * 0x100000001b3ull;
    return h;
}

/* ---- one shape --------------------------------------------------------------- */

typedef struct result {
    double call_ns, items_ns;
    const char *check;
    double makespan[N_WORKERS], speedup[N_WORKERS], speedup_model[N_WORKERS];
    double bw_cap[N_WORKERS], speedup_bw[N_WORKERS]; /* < 0: unknown */
} result;

static const char *replay(problem *p, recorder *rec, result *res)
{
    /* The plain call: faults the pages in, then its median time. */
    if (call(p, NULL) != PEAK_OK)
        return "the call failed";
    double t[5];
    size_t runs = 0;
    for (; runs < 5; runs++) {
        const double t0 = now_ns();
        call(p, NULL);
        t[runs] = now_ns() - t0;
        if (runs >= 2 && t[runs] > 5e8) /* 3 runs of a call over half a second */
            break;
    }
    res->call_ns = median(t, runs < 5 ? runs + 1 : 5);
    const uint64_t want = p->in_place ? 0 : hash_floats(p->out, p->out_floats);
    if (!p->in_place)
        memset(p->out, 0xff, p->out_floats * sizeof(float)); /* NaN: every item must write */

    /* The intercepted call. */
    peak_work_intercept(record_work, rec);
    const peak_status s = call(p, &fake_pool);
    peak_work_intercept(NULL, NULL);
    if (s != PEAK_OK)
        return "the intercepted call failed";
    if (rec->failed)
        return "out of memory (recording)";
    res->check = p->in_place ? "skipped (in place)"
                             : hash_floats(p->out, p->out_floats) == want ? "same bytes"
                                                                          : "DIFFERENT";

    res->items_ns = 0.0;
    for (size_t k = 0; k < rec->n; k++)
        for (size_t i = 0; i < rec->w[k].items; i++)
            res->items_ns += rec->w[k].cost[i];
    const double t1 = rec->n ? call_makespan(rec, 1, 0) : res->call_ns;
    const double t1_model = rec->n ? call_makespan(rec, 1, 1) : -1.0;
    /* Bandwidth: a copy of the call's bytes, at most 256 MiB moved. */
    size_t copy = p->bytes / 2;
    copy = copy < ((size_t)128 << 20) ? copy : ((size_t)128 << 20);
    copy = (copy + 63) & ~(size_t)63;
    const double achieved = (double)p->bytes / res->call_ns; /* GB/s */
    for (size_t k = 0; k < N_WORKERS; k++) {
        const size_t n = replay_workers[k];
        const double tn = rec->n ? call_makespan(rec, n, 0) : res->call_ns;
        res->makespan[k] = tn;
        res->speedup[k] = t1 / tn;
        const double tm = rec->n ? call_makespan(rec, n, 1) : -1.0;
        res->speedup_model[k] = t1_model > 0.0 && tm > 0.0 ? t1_model / tm : -1.0;
        double bw = 0.0;
        if (opt.bandwidth && n <= n_cpus)
            bw = bandwidth(copy, n);
        else if (opt.bw_gbs > 0.0 && n > n_cpus)
            bw = opt.bw_gbs;
        res->bw_cap[k] = bw > 0.0 ? fmax(1.0, bw / achieved) : -1.0;
        res->speedup_bw[k] = bw > 0.0 ? fmin(res->speedup[k], res->bw_cap[k]) : -1.0;
    }
    return NULL;
}

/* ---- output ------------------------------------------------------------------- */

static void json_num(double x)
{
    if (x < 0.0 || !isfinite(x))
        printf("null");
    else
        printf("%.6g", x);
}

static const char *assumptions[10];
static size_t n_assumptions;

static void set_assumptions(void)
{
    static char bw[256], over[128];
    n_assumptions = 0;
    assumptions[n_assumptions++] =
        "speedup: no memory-bandwidth limit (an item takes on N busy cores what it took alone "
        "on one)";
    assumptions[n_assumptions++] =
        opt.first ? "items timed once each (their first run)"
                  : "items timed warm (median of repeated runs: data in cache as far as it fits)";
    assumptions[n_assumptions++] =
        opt.cpu_clock ? "times are the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID)"
                      : "times are wall-clock (CLOCK_MONOTONIC): on a loaded machine the longer "
                        "runs also count time other processes held the core";
    if (opt.overhead_ns > 0.0)
        snprintf(over, sizeof over, "each pooled work costs %.0f ns to wake and join the pool",
                 opt.overhead_ns);
    else
        snprintf(over, sizeof over, "the pool costs nothing to wake and join");
    assumptions[n_assumptions++] = over;
    assumptions[n_assumptions++] = "identical workers, not shared with anything else";
    if (!opt.bandwidth)
        snprintf(bw, sizeof bw, "speedup_bw: not measured (--no-bandwidth)%s",
                 opt.bw_gbs > 0.0 ? "; beyond this machine's CPUs BW(N) = --bw-gbs" : "");
    else if (opt.bw_gbs > 0.0)
        snprintf(bw, sizeof bw,
                 "speedup_bw: BW(N) measured (memcpy on N threads) for N <= %zu CPUs, "
                 "%.1f GB/s (--bw-gbs) beyond",
                 n_cpus, opt.bw_gbs);
    else
        snprintf(bw, sizeof bw,
                 "speedup_bw: BW(N) measured (memcpy on N threads) for N <= %zu CPUs only; "
                 "beyond, no bandwidth figure (null): pass --bw-gbs",
                 n_cpus);
    assumptions[n_assumptions++] = bw;
}

static void print_json_head(void)
{
    printf("{\n  \"program\": \"bench_replay\",\n  \"peak_version\": \"%s\",\n  \"isa\": \"%s\",\n",
           peak_version(), peak_isa_name(peak_isa_active()));
    printf("  \"cpus\": %zu,\n  \"loadavg\": %.2f,\n  \"repeat\": %zu,\n  \"timing\": \"%s\",\n"
           "  \"clock\": \"%s\",\n  \"overhead_ns\": ",
           n_cpus, load_average(), opt.repeat, opt.first ? "first" : "median",
           opt.cpu_clock ? "cpu" : "wall");
    json_num(opt.overhead_ns);
    printf(",\n  \"bw_gbs_target\": ");
    json_num(opt.bw_gbs > 0.0 ? opt.bw_gbs : -1.0);
    printf(",\n  \"workers\": [");
    for (size_t k = 0; k < N_WORKERS; k++)
        printf("%s%zu", k ? ", " : "", replay_workers[k]);
    printf("],\n  \"assumptions\": [");
    for (size_t k = 0; k < n_assumptions; k++)
        printf("%s\n    \"%s\"", k ? "," : "", assumptions[k]);
    printf("\n  ],\n  \"shapes\": [");
}

static void print_json_shape(const problem *p, const recorder *rec, const result *res,
                             int first_shape, const char *error)
{
    printf("%s\n    {\n      \"name\": \"%s\",\n      \"family\": \"%s\",\n      \"args\": {",
           first_shape ? "" : ",", p->name, family_names[p->s->f]);
    for (int k = 0; k < family_n_args[p->s->f]; k++)
        printf("%s\"%s\": %lld", k ? ", " : "", family_args[p->s->f][k], (long long)p->s->a[k]);
    printf("},\n      \"bytes\": %zu,\n", p->bytes);
    if (error) {
        printf("      \"error\": \"%s\"\n    }", error);
        return;
    }
    printf("      \"call_ns\": %.6g,\n      \"items_ns\": %.6g,\n      \"check\": \"%s\",\n",
           res->call_ns, res->items_ns, res->check);
    printf("      \"works\": [");
    for (size_t k = 0; k < rec->n; k++) {
        const work_rec *w = &rec->w[k];
        double sum = 0.0, mx = 0.0, first = 0.0;
        for (size_t i = 0; i < w->items; i++) {
            sum += w->cost[i];
            mx = fmax(mx, w->cost[i]);
            first += w->first[i];
        }
        printf("%s\n        {\"items\": %zu, \"slots\": %zu, \"model_total_ns\": %.6g, "
               "\"inline\": %s, \"items_ns\": %.6g, \"max_item_ns\": %.6g, \"first_ns\": %.6g}",
               k ? "," : "", w->items, w->slots, w->model_total_ns,
               work_tasks(w, MAX_WORKERS) == 1 ? "true" : "false", sum, mx, first);
    }
    printf("%s],\n      \"predicted\": [", rec->n ? "\n      " : "");
    for (size_t k = 0; k < N_WORKERS; k++) {
        printf("%s\n        {\"workers\": %zu, \"makespan_ns\": %.6g, \"speedup\": %.4f, "
               "\"speedup_model\": ",
               k ? "," : "", replay_workers[k], res->makespan[k], res->speedup[k]);
        json_num(res->speedup_model[k]);
        printf(", \"bw_cap\": ");
        json_num(res->bw_cap[k]);
        printf(", \"speedup_bw\": ");
        json_num(res->speedup_bw[k]);
        printf("}");
    }
    printf("\n      ]\n    }");
}

static void print_table_head(void)
{
    printf("bench_replay: predicted speedup T(1)/T(N) of peak's scheduling, from every work "
           "item timed alone on one core\n");
    printf("peak %s, %s, %zu CPUs here (load average %.2f), items: %s of %zu run%s, %s "
           "clock\n",
           peak_version(), peak_isa_name(peak_isa_active()), n_cpus, load_average(),
           opt.first ? "first" : "median", opt.repeat, opt.repeat == 1 ? "" : "s",
           opt.cpu_clock ? "CPU-time" : "wall");
    printf("assumptions:\n");
    for (size_t k = 0; k < n_assumptions; k++)
        printf("  - %s\n", assumptions[k]);
    printf("rows: speedup (measured items), model (the scheduler's cost model), bw (capped by "
           "memcpy bandwidth; - unknown)\n");
    printf("PROVISIONAL on a shared machine: timings are noisy.\n");
}

static void print_row(const char *label, const double *v)
{
    printf("  %-8s", label);
    for (size_t k = 0; k < N_WORKERS; k++) {
        if (v[k] < 0.0)
            printf(" %6s", "-");
        else
            printf(" %6.2f", v[k]);
    }
    printf("\n");
}

static void print_table_shape(const problem *p, const recorder *rec, const result *res,
                              const char *error)
{
    printf("\n%s\n", p->name);
    if (error) {
        printf("  error: %s\n", error);
        return;
    }
    size_t items = 0;
    for (size_t k = 0; k < rec->n; k++)
        items += rec->w[k].items;
    printf("  call %.3f ms alone; %zu work%s, %zu items, sum %.3f ms (%.0f%% of the call); "
           "check: %s\n",
           res->call_ns * 1e-6, rec->n, rec->n == 1 ? "" : "s", items, res->items_ns * 1e-6,
           res->call_ns > 0.0 ? 100.0 * res->items_ns / res->call_ns : 0.0, res->check);
    if (rec->n == 0)
        printf("  (no work reached the runner: the family is not scheduled yet)\n");
    for (size_t k = 0; k < rec->n; k++)
        if (work_tasks(&rec->w[k], MAX_WORKERS) == 1)
            printf("  work %zu runs inline (%zu items, modelled %.1f us)\n", k, rec->w[k].items,
                   rec->w[k].model_total_ns * 1e-3);
    printf("  %-8s", "N");
    for (size_t k = 0; k < N_WORKERS; k++)
        printf(" %6zu", replay_workers[k]);
    printf("\n");
    print_row("speedup", res->speedup);
    print_row("model", res->speedup_model);
    print_row("bw", res->speedup_bw);
    fflush(stdout);
}

/* ---- main ------------------------------------------------------------------------ */

static int usage(const char *bad)
{
    fprintf(stderr,
            "bench_replay: unknown or bad argument '%s'\n"
            "usage: bench_replay [--format=table|json] [--filter=REGEX] [--repeat=N]\n"
            "                    [--timing=median|first] [--clock=cpu|wall] [--overhead-us=X]\n"
            "                    [--bw-gbs=X] [--no-bandwidth] [--list]\n",
            bad);
    return 2;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char *end;
        if (strcmp(a, "--format=json") == 0)
            opt.json = 1;
        else if (strcmp(a, "--format=table") == 0 || strcmp(a, "--format=console") == 0)
            opt.json = 0;
        else if (strncmp(a, "--filter=", 9) == 0)
            opt.filter = a + 9;
        else if (strncmp(a, "--repeat=", 9) == 0) {
            const long r = strtol(a + 9, &end, 10);
            if (*end || r < 1 || r > 1000)
                return usage(a);
            opt.repeat = (size_t)r;
        } else if (strcmp(a, "--timing=median") == 0)
            opt.first = 0;
        else if (strcmp(a, "--timing=first") == 0)
            opt.first = 1;
        else if (strcmp(a, "--clock=wall") == 0)
            opt.cpu_clock = 0;
        else if (strcmp(a, "--clock=cpu") == 0)
            opt.cpu_clock = 1;
        else if (strncmp(a, "--overhead-us=", 14) == 0) {
            opt.overhead_ns = strtod(a + 14, &end) * 1e3;
            if (*end || !(opt.overhead_ns >= 0.0))
                return usage(a);
        } else if (strncmp(a, "--bw-gbs=", 9) == 0) {
            opt.bw_gbs = strtod(a + 9, &end);
            if (*end || !(opt.bw_gbs > 0.0))
                return usage(a);
        } else if (strcmp(a, "--no-bandwidth") == 0)
            opt.bandwidth = 0;
        else if (strcmp(a, "--list") == 0)
            opt.list = 1;
        else
            return usage(a);
    }
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    n_cpus = cpus > 1 ? (size_t)cpus : 1;
    n_cpus = n_cpus < MAX_WORKERS ? n_cpus : MAX_WORKERS;
    regex_t re;
    if (opt.filter && regcomp(&re, opt.filter, REG_EXTENDED | REG_NOSUB) != 0)
        return usage(opt.filter);
    set_assumptions();

    int matched = 0, failed = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        problem p;
        memset(&p, 0, sizeof p);
        p.s = &shapes[s];
        shape_name(p.s, p.name, sizeof p.name);
        if (opt.filter && regexec(&re, p.name, 0, NULL, 0) != 0)
            continue;
        if (opt.list) {
            printf("%s\n", p.name);
            matched++;
            continue;
        }
        if (!matched) {
            if (opt.json)
                print_json_head();
            else
                print_table_head();
        }
        recorder rec = {0};
        result res;
        memset(&res, 0, sizeof res);
        const char *error = setup(&p);
        if (!error)
            error = replay(&p, &rec, &res);
        if (error || strcmp(res.check, "DIFFERENT") == 0)
            failed = 1;
        if (opt.json)
            print_json_shape(&p, &rec, &res, !matched, error);
        else
            print_table_shape(&p, &rec, &res, error);
        matched++;
        recorder_free(&rec);
        teardown(&p);
    }
    if (opt.filter)
        regfree(&re);
    if (matched && !opt.list && opt.json) {
        printf("\n  ],\n  \"bandwidth\": [");
        for (size_t k = 0; k < n_bw_done; k++)
            printf("%s\n    {\"copy_bytes\": %zu, \"threads\": %zu, \"gbs\": %.4g}",
                   k ? "," : "", bw_done[k].copy_bytes, bw_done[k].threads, bw_done[k].gbs);
        printf("%s],\n  \"bandwidth_busy\": %s\n}\n", n_bw_done ? "\n  " : "",
               bandwidth_busy() ? "true" : "false");
    } else if (matched && !opt.list && n_bw_done) {
        printf("\nmemcpy bandwidth measured here (bytes read + written):\n");
        for (size_t k = 0; k < n_bw_done; k++)
            printf("  %9.1f MiB copied on %zu thread%s: %6.2f GB/s\n",
                   (double)bw_done[k].copy_bytes / (1 << 20), bw_done[k].threads,
                   bw_done[k].threads == 1 ? "" : "s", bw_done[k].gbs);
        if (bandwidth_busy())
            printf("WARNING: a copy on several threads was slower than on one: the other CPUs "
                   "were busy, and the bw rows of this run mean nothing.\n");
    }
    for (size_t k = 0; k <= MAX_WORKERS; k++)
        peak_threadpool_destroy(bw_pools[k]);
    if (!matched) {
        fprintf(stderr, "bench_replay: no shape matches '%s'\n", opt.filter ? opt.filter : "");
        return 1;
    }
    return failed;
}
