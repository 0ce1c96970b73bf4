/*
 * test-schedule.c - the scheduling layer (kernels/schedule/parallel.h):
 * the runner itself, and the simulation of machines we do not have.
 *
 * The runner: peak_schedule_makespan and peak_work_imbalance on cases
 * computed by hand; peak_work_run with a hand-made peak_work on pools of
 * 1..7 workers runs every item exactly once, gives each concurrent task a
 * scratch slot of its own, starts no more tasks than the pool's workers,
 * the items or the scratch's slots allow, runs inline when the work is
 * below PEAK_INLINE_NS, has one item or is nested in a task of peak's
 * (then a public call made there completes with the same bytes), hands
 * the work to the intercept when one is set, and gives every task the
 * caller's floating-point environment.
 *
 * The simulation: with peak_work_intercept set, real public calls (their
 * buffers mapped but never touched: the intercept receives each call's
 * work instead of running it) on a stand-in pool of 16, 64 and 192 workers
 * give each family's partition and cost model; the greedy schedule's
 * makespan over the mean (peak_work_imbalance) must be at most 1.10 on the
 * SIMD tier for the shapes of a large model (attention prefill and split-KV
 * decode, softmax rows, LayerNorm rows), wherever the call gives each
 * worker at least 50 us of work.  The scalar tier's table is printed, not
 * held to the bound.  The tables are in the test's output
 * (meson test -v).
 *
 * Links the static library, which exposes the internal symbols.
 */
#include "test-util.h"

#include "schedule/parallel.h"
#include "schedule/schedule.h"

#include <fenv.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- pools ------------------------------------------------------------------- */

enum { MAX_TASKS = 64 };

enum pool_kind { POOL_CREATE, POOL_PTHREADS, POOL_REVERSE, N_POOL_KINDS };
static const char *const pool_kind_name[N_POOL_KINDS] = {"create", "pthreads", "reverse"};

typedef struct tpool {
    peak_threadpool iface;
    enum pool_kind kind;
    size_t workers;
    peak_threadpool *created;
    atomic_size_t runs, tasks, max_tasks;
    atomic_int bad; /* a run of more tasks than workers, or 0 tasks */
} tpool;

typedef struct trun {
    tpool *pool;
    peak_task_fn fn;
    void *arg;
} trun;

typedef struct tthread {
    trun *r;
    size_t task;
} tthread;

static void trun_task(void *arg, size_t t)
{
    trun *r = arg;
    r->fn(r->arg, t);
    atomic_fetch_add(&r->pool->tasks, 1);
}

static void *tthread_main(void *arg)
{
    tthread *t = arg;
    trun_task(t->r, t->task);
    return NULL;
}

static size_t tp_workers(void *ctx)
{
    return ((tpool *)ctx)->workers;
}

static void tp_run(void *ctx, peak_task_fn fn, void *arg, size_t n)
{
    tpool *p = ctx;
    atomic_fetch_add(&p->runs, 1);
    size_t seen = atomic_load(&p->max_tasks);
    while (n > seen && !atomic_compare_exchange_weak(&p->max_tasks, &seen, n))
        ;
    if (n == 0 || n > p->workers || n > MAX_TASKS) {
        atomic_store(&p->bad, 1);
        n = n > MAX_TASKS ? MAX_TASKS : n;
    }
    trun r = {p, fn, arg};
    if (p->kind == POOL_CREATE) {
        p->created->run(p->created->ctx, trun_task, &r, n);
    } else if (p->kind == POOL_REVERSE) {
        for (size_t t = n; t-- > 0;)
            trun_task(&r, t);
    } else {
        tthread tt[MAX_TASKS];
        pthread_t th[MAX_TASKS];
        for (size_t t = 1; t < n; t++) {
            tt[t] = (tthread){&r, t};
            if (pthread_create(&th[t], NULL, tthread_main, &tt[t]) != 0)
                abort();
        }
        if (n)
            trun_task(&r, 0);
        for (size_t t = 1; t < n; t++)
            pthread_join(th[t], NULL);
    }
}

static tpool *tpool_new(enum pool_kind kind, size_t workers)
{
    tpool *p = calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    p->kind = kind;
    p->workers = workers;
    p->iface = (peak_threadpool){tp_workers, tp_run, p};
    if (kind == POOL_CREATE) {
#if PEAK_HAVE_PTHREADPOOL
        ck_assert_int_eq(peak_threadpool_create(workers, &p->created), PEAK_OK);
#else
        /* built without pthreadpool: the create kind runs as the reverse one */
        ck_assert_int_eq(peak_threadpool_create(workers, &p->created), PEAK_ERR_UNSUPPORTED);
        p->kind = POOL_REVERSE;
#endif
    }
    return p;
}

static void tpool_free(tpool *p)
{
    peak_threadpool_destroy(p->created);
    free(p);
}

/* ---- the runner's arithmetic -------------------------------------------------- */

START_TEST(makespan_by_hand)
{
    static const double a[] = {3, 3, 2, 2, 2};
    /* Greedy in order: 3 | 3, then 2 to the first free (5 | 3 -> 5 | 5), the
       last 2 to worker 0: 7 (the best split, {3,3} {2,2,2}, is 6: the list
       order is the scheduler's, as the shared counter takes items). */
    ck_assert_double_eq(peak_schedule_makespan(a, 5, 2), 7.0);
    ck_assert_double_eq(peak_schedule_makespan(a, 5, 1), 12.0);
    ck_assert_double_eq(peak_schedule_makespan(a, 5, 0), 12.0); /* 0 is 1 */
    ck_assert_double_eq(peak_schedule_makespan(a, 5, 3), 5.0);  /* 3+2 | 3+2 | 2 */
    ck_assert_double_eq(peak_schedule_makespan(a, 5, 5), 3.0);
    ck_assert_double_eq(peak_schedule_makespan(a, 5, 64), 3.0);
    ck_assert_double_eq(peak_schedule_makespan(a, 0, 4), 0.0);
    static const double b[] = {3, 2, 2, 3, 2}; /* 3 | 2, 2 -> 3 | 4, 3 -> 6 | 4, 2 -> 6 | 6 */
    ck_assert_double_eq(peak_schedule_makespan(b, 5, 2), 6.0);
    static const double c[] = {1, 1, 1, 1, 1, 1, 1, 10}; /* the long item last: 3 + 10 */
    ck_assert_double_eq(peak_schedule_makespan(c, 8, 2), 13.0);
    static const double d[] = {10, 1, 1, 1, 1, 1, 1, 1}; /* first: 10 | 7 */
    ck_assert_double_eq(peak_schedule_makespan(d, 8, 2), 10.0);
    ck_assert_double_eq(peak_schedule_makespan(d, 8, 4), 10.0);
}
END_TEST

static double cost_of_array(const void *ctx, size_t i)
{
    return ((const double *)ctx)[i];
}

static void run_nothing(void *ctx, size_t i, void *scratch)
{
    (void)ctx, (void)i, (void)scratch;
    ck_abort_msg("not to be run");
}

START_TEST(imbalance_by_hand)
{
    static const double a[] = {3, 3, 2, 2, 2};
    peak_work w = {5, run_nothing, cost_of_array, (void *)a, 12.0, NULL, 0, 0};
    ck_assert_double_eq_tol(peak_work_imbalance(&w, 2), 7.0 / 6.0, 1e-12);
    ck_assert_double_eq_tol(peak_work_imbalance(&w, 1), 1.0, 1e-12);
    ck_assert_double_eq_tol(peak_work_imbalance(&w, 3), 5.0 / 4.0, 1e-12);
    ck_assert_double_eq_tol(peak_work_imbalance(&w, 8), 3.0 * 8 / 12.0, 1e-12);
    static const double e[64] = {0}; /* all free: 1 by definition */
    peak_work z = {64, run_nothing, cost_of_array, (void *)e, 0.0, NULL, 0, 0};
    ck_assert_double_eq(peak_work_imbalance(&z, 16), 1.0);
    z.items = 0;
    ck_assert_double_eq(peak_work_imbalance(&z, 16), 1.0);
}
END_TEST

/* ---- the runner ------------------------------------------------------------------ */

enum { SLOT_BYTES = 128, N_ITEMS = 1000 };

typedef struct probe {
    atomic_int count[N_ITEMS];
    atomic_int busy[MAX_TASKS];
    char *scratch;
    size_t slots;
    atomic_int clash;      /* two tasks in one slot at once */
    atomic_int bad_slot;   /* a scratch pointer not a slot's */
    atomic_int wrong_fenv; /* an item that did not see the caller's rounding */
    atomic_int off_caller; /* an item run on another thread than the caller's */
    int want_round;
    pthread_t caller;
    double item_ns;
} probe;

static double probe_cost(const void *ctx, size_t i)
{
    (void)i;
    return ((const probe *)ctx)->item_ns;
}

static void probe_run(void *ctx, size_t i, void *scratch)
{
    probe *p = ctx;
    atomic_fetch_add(&p->count[i], 1);
    if (fegetround() != p->want_round)
        atomic_store(&p->wrong_fenv, 1);
    if (!pthread_equal(pthread_self(), p->caller))
        atomic_store(&p->off_caller, 1);
    if (!p->scratch) {
        if (scratch)
            atomic_store(&p->bad_slot, 1);
        return;
    }
    const ptrdiff_t off = (char *)scratch - p->scratch;
    if (!scratch || off < 0 || off % SLOT_BYTES || (size_t)off / SLOT_BYTES >= p->slots) {
        atomic_store(&p->bad_slot, 1);
        return;
    }
    const size_t slot = (size_t)off / SLOT_BYTES;
    if (atomic_exchange(&p->busy[slot], 1) != 0)
        atomic_store(&p->clash, 1);
    /* use it a little: another task in the same slot would overlap */
    volatile unsigned char *s = scratch;
    for (unsigned k = 0; k < 64; k++)
        s[k % SLOT_BYTES] = (unsigned char)(s[k % SLOT_BYTES] + 1);
    atomic_store(&p->busy[slot], 0);
}

static probe *probe_new(size_t slots, double item_ns)
{
    probe *p = calloc(1, sizeof *p);
    ck_assert_ptr_nonnull(p);
    p->slots = slots;
    if (slots) {
        p->scratch = aligned_alloc(64, slots * SLOT_BYTES);
        ck_assert_ptr_nonnull(p->scratch);
        memset(p->scratch, 0, slots * SLOT_BYTES);
    }
    p->want_round = fegetround();
    p->caller = pthread_self();
    p->item_ns = item_ns;
    return p;
}

static peak_work probe_work(probe *p, size_t slots_field)
{
    peak_work w = {N_ITEMS, probe_run, probe_cost, p, p->item_ns * N_ITEMS,
                   p->scratch, p->scratch ? SLOT_BYTES : 0, slots_field};
    return w;
}

static void probe_expect_each_once(const probe *p, const char *what)
{
    for (size_t i = 0; i < N_ITEMS; i++)
        CHECK(atomic_load(&p->count[i]) == 1, "%s: item %zu ran %d times", what, i,
              atomic_load(&p->count[i]));
    CHECK(!atomic_load(&p->clash), "%s: two concurrent tasks shared a scratch slot", what);
    CHECK(!atomic_load(&p->bad_slot), "%s: an item got a scratch pointer not its task's slot",
          what);
    CHECK(!atomic_load(&p->wrong_fenv), "%s: an item ran in another rounding mode", what);
}

static void probe_free(probe *p)
{
    free(p->scratch);
    free(p);
}

START_TEST(every_item_once_distinct_slots)
{
    /* _i: the pool kind.  Work of 1000 items, 1 ms modelled in all. */
    const enum pool_kind kind = (enum pool_kind)_i;
    for (size_t workers = 1; workers <= 7; workers++) {
        for (int with_scratch = 0; with_scratch < 2; with_scratch++) {
            char what[96];
            snprintf(what, sizeof what, "%s pool of %zu workers, %s", pool_kind_name[kind],
                     workers, with_scratch ? "scratch slots" : "no scratch");
            tpool *pool = tpool_new(kind, workers);
            probe *p = probe_new(with_scratch ? 8 : 0, 1000.0);
            peak_work w = probe_work(p, with_scratch ? 8 : 0);
            const size_t tasks = peak_work_tasks(&w, &pool->iface);
            CHECK(tasks == workers, "%s: peak_work_tasks %zu", what, tasks);
            peak_work_run(&w, &pool->iface);
            probe_expect_each_once(p, what);
            CHECK(!atomic_load(&pool->bad), "%s: a run of more tasks than workers", what);
            if (workers == 1) {
                CHECK(atomic_load(&pool->runs) == 0, "%s: one worker, yet the pool ran", what);
                CHECK(!atomic_load(&p->off_caller), "%s: one worker, items off the caller",
                      what);
            } else {
                CHECK(atomic_load(&pool->runs) == 1 && atomic_load(&pool->max_tasks) == workers,
                      "%s: %zu runs, at most %zu tasks (want 1 run of %zu)", what,
                      atomic_load(&pool->runs), atomic_load(&pool->max_tasks), workers);
                CHECK(atomic_load(&pool->tasks) == workers, "%s: %zu tasks ran", what,
                      atomic_load(&pool->tasks));
            }
            probe_free(p);
            tpool_free(pool);
        }
    }
}
END_TEST

START_TEST(tasks_limited_by_slots_and_items)
{
    tpool *pool = tpool_new(POOL_PTHREADS, 7);
    /* two scratch slots: two tasks at most */
    probe *p = probe_new(2, 1000.0);
    peak_work w = probe_work(p, 2);
    ck_assert_uint_eq(peak_work_tasks(&w, &pool->iface), 2);
    peak_work_run(&w, &pool->iface);
    probe_expect_each_once(p, "7 workers, 2 slots");
    ck_assert_uint_eq(atomic_load(&pool->max_tasks), 2);
    probe_free(p);
    /* three items, each far above the threshold: three tasks */
    p = probe_new(8, 1e6);
    w = probe_work(p, 8);
    w.items = 3;
    w.total_ns = 3e6;
    ck_assert_uint_eq(peak_work_tasks(&w, &pool->iface), 3);
    atomic_store(&pool->max_tasks, 0);
    peak_work_run(&w, &pool->iface);
    ck_assert_uint_eq(atomic_load(&pool->max_tasks), 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(atomic_load(&p->count[i]), 1);
    ck_assert_int_eq(atomic_load(&p->count[3]), 0);
    probe_free(p);
    tpool_free(pool);
}
END_TEST

START_TEST(inline_below_threshold_or_one_item)
{
    tpool *pool = tpool_new(POOL_PTHREADS, 4);
    /* just below PEAK_INLINE_NS in all */
    probe *p = probe_new(4, (PEAK_INLINE_NS - 1.0) / N_ITEMS);
    peak_work w = probe_work(p, 4);
    ck_assert_uint_eq(peak_work_tasks(&w, &pool->iface), 1);
    peak_work_run(&w, &pool->iface);
    probe_expect_each_once(p, "below the threshold");
    CHECK(atomic_load(&pool->runs) == 0 && !atomic_load(&p->off_caller),
          "below the threshold: the pool ran (%zu runs)", atomic_load(&pool->runs));
    probe_free(p);
    /* just above: the pool runs */
    p = probe_new(4, (PEAK_INLINE_NS + 1.0) / N_ITEMS);
    w = probe_work(p, 4);
    ck_assert_uint_eq(peak_work_tasks(&w, &pool->iface), 4);
    peak_work_run(&w, &pool->iface);
    probe_expect_each_once(p, "above the threshold");
    ck_assert_uint_eq(atomic_load(&pool->runs), 1);
    probe_free(p);
    /* one item, however long: inline */
    p = probe_new(4, 1e9);
    w = probe_work(p, 4);
    w.items = 1;
    ck_assert_uint_eq(peak_work_tasks(&w, &pool->iface), 1);
    peak_work_run(&w, &pool->iface);
    ck_assert_int_eq(atomic_load(&p->count[0]), 1);
    ck_assert_uint_eq(atomic_load(&pool->runs), 1);
    ck_assert(!atomic_load(&p->off_caller));
    probe_free(p);
    /* no pool: inline */
    p = probe_new(4, 1000.0);
    w = probe_work(p, 4);
    ck_assert_uint_eq(peak_work_tasks(&w, NULL), 1);
    peak_work_run(&w, NULL);
    probe_expect_each_once(p, "no pool");
    ck_assert(!atomic_load(&p->off_caller));
    probe_free(p);
    tpool_free(pool);
}
END_TEST

/* Nesting: items of an outer work run an inner work, and a public call, on
   the same pool. */
typedef struct nested {
    const peak_threadpool *pool;
    probe *inner[8];
    atomic_int inner_tasks_wrong;
    /* a public call inside each item */
    const float *x;
    float *y[8];
    peak_softmax_desc sd;
    atomic_int call_failed;
} nested;

static double nested_cost(const void *ctx, size_t i)
{
    (void)ctx, (void)i;
    return 1e6;
}

static void nested_run(void *ctx, size_t i, void *scratch)
{
    (void)scratch;
    nested *n = ctx;
    probe *p = n->inner[i];
    p->caller = pthread_self(); /* the inner work must stay on this thread */
    peak_work w = probe_work(p, p->slots);
    if (peak_work_tasks(&w, n->pool) != 1)
        atomic_store(&n->inner_tasks_wrong, 1);
    peak_work_run(&w, n->pool);
    if (n->x && peak_softmax(n->y[i], n->x, &n->sd, n->pool) != PEAK_OK)
        atomic_store(&n->call_failed, 1);
}

START_TEST(nested_runs_inline)
{
    /* _i: the pool kind (create: pthreadpool's parallelize, which is not
       reentrant, would deadlock if the nested run entered it) */
    const enum pool_kind kind = (enum pool_kind)_i;
    tpool *pool = tpool_new(kind, 3);
    nested n;
    memset(&n, 0, sizeof n);
    n.pool = &pool->iface;
    /* the public call: softmax over [1, 4, 128, 256] */
    const size_t H = 4, L = 128, K = 256, N = H * L * K;
    float *x = peak_test_alloc(N, 0), *want = peak_test_alloc(N, 0);
    uint64_t rng = 5;
    peak_test_fill_uniform(x, N, &rng, -6.0f, 6.0f);
    peak_softmax_desc sd = PEAK_SOFTMAX_DESC_DEFAULT;
    sd.batch = 1, sd.heads = H, sd.q_len = L, sd.k_len = K;
    const ptrdiff_t st[3] = {(ptrdiff_t)N, (ptrdiff_t)(L * K), (ptrdiff_t)K};
    memcpy(sd.x_stride, st, sizeof st);
    memcpy(sd.y_stride, st, sizeof st);
    sd.mask.causal = 1;
    ck_assert_int_eq(peak_softmax(want, x, &sd, NULL), PEAK_OK);
    n.x = x, n.sd = sd;
    for (size_t i = 0; i < 8; i++) {
        n.inner[i] = probe_new(4, 1000.0);
        n.y[i] = peak_test_alloc(N, i);
    }
    peak_work outer = {8, nested_run, nested_cost, &n, 8e6, NULL, 0, 0};
    peak_work_run(&outer, &pool->iface);
    CHECK(!atomic_load(&n.inner_tasks_wrong), "%s: a nested work would start tasks",
          pool_kind_name[kind]);
    CHECK(!atomic_load(&n.call_failed), "%s: a nested peak_softmax failed", pool_kind_name[kind]);
    for (size_t i = 0; i < 8; i++) {
        probe_expect_each_once(n.inner[i], "nested work");
        CHECK(!atomic_load(&n.inner[i]->off_caller),
              "%s: a nested work's item ran off its outer item's thread", pool_kind_name[kind]);
        CHECK(peak_test_bytes_equal(n.y[i], want, N * sizeof(float)),
              "%s: item %zu: the nested softmax differs from the no-pool call",
              pool_kind_name[kind], i);
        probe_free(n.inner[i]);
        peak_test_free(n.y[i]);
    }
    /* the outer run only: nothing nested reached the pool */
    CHECK(atomic_load(&pool->runs) == 1, "%s: %zu runs of the pool, want 1 (the outer work)",
          pool_kind_name[kind], atomic_load(&pool->runs));
    /* and after it, the pool is used again by a call from outside */
    probe *p = probe_new(4, 1000.0);
    peak_work w = probe_work(p, 4);
    peak_work_run(&w, &pool->iface);
    probe_expect_each_once(p, "after a nested run");
    ck_assert_uint_eq(atomic_load(&pool->runs), 2);
    probe_free(p);
    peak_test_free(x);
    peak_test_free(want);
    tpool_free(pool);
}
END_TEST

typedef struct seen_work {
    int calls;
    const peak_work *w;
    const peak_threadpool *pool;
    void *arg;
} seen_work;

static void record_work(const peak_work *w, const peak_threadpool *pool, void *arg)
{
    seen_work *s = arg;
    s->calls++;
    s->w = w;
    s->pool = pool;
    s->arg = arg;
}

START_TEST(intercept_receives_the_work)
{
    tpool *pool = tpool_new(POOL_PTHREADS, 3);
    probe *p = probe_new(4, 1000.0);
    peak_work w = probe_work(p, 4);
    seen_work s = {0, NULL, NULL, NULL};
    peak_work_intercept(record_work, &s);
    peak_work_run(&w, &pool->iface);
    peak_work_intercept(NULL, NULL);
    ck_assert_int_eq(s.calls, 1);
    ck_assert_ptr_eq(s.w, &w);
    ck_assert_ptr_eq(s.pool, &pool->iface);
    ck_assert_ptr_eq(s.arg, &s);
    for (size_t i = 0; i < N_ITEMS; i++)
        ck_assert_int_eq(atomic_load(&p->count[i]), 0);
    ck_assert_uint_eq(atomic_load(&pool->runs), 0);
    /* cleared: runs again */
    peak_work_run(&w, &pool->iface);
    probe_expect_each_once(p, "after the intercept is cleared");
    ck_assert_int_eq(s.calls, 1);
    probe_free(p);
    tpool_free(pool);
}
END_TEST

START_TEST(tasks_run_in_the_callers_fp_environment)
{
    /* _i: the pool kind.  The rounding mode stands for the whole fenv
       (FTZ/DAZ under -ffast-math): set on the caller, seen by every item
       on every thread, whatever the previous run's was. */
    const enum pool_kind kind = (enum pool_kind)_i;
    tpool *pool = tpool_new(kind, 4);
    static const int modes[] = {FE_UPWARD, FE_TONEAREST, FE_TOWARDZERO, FE_TONEAREST};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        ck_assert_int_eq(fesetround(modes[m]), 0);
        probe *p = probe_new(4, 1000.0);
        peak_work w = probe_work(p, 4);
        peak_work_run(&w, &pool->iface);
        fesetround(FE_TONEAREST);
        probe_expect_each_once(p, pool_kind_name[kind]);
        probe_free(p);
    }
    ck_assert_int_eq(fegetround(), FE_TONEAREST);
    tpool_free(pool);
}
END_TEST

/* ---- the simulation ------------------------------------------------------------- */

static const size_t sim_workers[] = {16, 64, 192};
enum { N_SIM = 3, MAX_PHASES = 4 };

/* What the intercept saw of one call: each peak_work_run, in order. */
typedef struct phase {
    size_t items, slots, tasks;
    double total_ns, cost_sum, max_item;
    double imbalance[N_SIM];
} phase;

typedef struct sim {
    size_t n;
    phase ph[MAX_PHASES];
    size_t extra; /* runs beyond MAX_PHASES */
} sim;

static void simulate(const peak_work *w, const peak_threadpool *pool, void *arg)
{
    sim *s = arg;
    if (s->n == MAX_PHASES) {
        s->extra++;
        return;
    }
    phase *ph = &s->ph[s->n++];
    ph->items = w->items;
    ph->slots = w->slots;
    ph->total_ns = w->total_ns;
    ph->tasks = peak_work_tasks(w, pool);
    for (size_t i = 0; i < w->items; i++) {
        const double c = w->cost(w->ctx, i);
        ph->cost_sum += c;
        ph->max_item = c > ph->max_item ? c : ph->max_item;
    }
    for (size_t k = 0; k < N_SIM; k++)
        ph->imbalance[k] = peak_work_imbalance(w, sim_workers[k]);
}

/* A pool that only answers workers(): the intercept never lets it run. */
static size_t fake_workers(void *ctx)
{
    return *(const size_t *)ctx;
}

static void fake_run(void *ctx, peak_task_fn fn, void *arg, size_t n)
{
    (void)ctx, (void)fn, (void)arg, (void)n;
    abort(); /* the intercept stops every run before it reaches the pool */
}

/* Zero pages that are never touched: mapped, not committed. */
static float *untouched(size_t floats)
{
    void *p = mmap(NULL, floats * sizeof(float), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ck_assert_msg(p != MAP_FAILED, "mmap of %zu floats failed", floats);
    return p;
}

static void release(float *p, size_t floats)
{
    munmap(p, floats * sizeof(float));
}

enum sim_shape { S_ATTENTION, S_DECODE, S_SOFTMAX, S_SOFTMAX_CAUSAL, S_LN_BIG, S_LN_BERT,
                 N_SHAPES };
static const char *const shape_name[N_SHAPES] = {
    "attention causal B 1 L 4096 H 32 Hkv 8 Dh 64",
    "decode B 1 H 32 Hkv 8 Lq 1 Lk 32768 Dh 64",
    "softmax rows B 1 H 32 L 4096",
    "softmax rows B 1 H 32 L 4096 causal",
    "layernorm rows 65536 x 4096",
    "layernorm rows 4096 x 768"};

/* The call of shape `shape` (scale 1: probe, a small version that is
   cheap to run if the family does not reach the runner), on `pool`. */
static peak_status sim_call(enum sim_shape shape, int probe_only, const peak_threadpool *pool)
{
    peak_status st = PEAK_ERR_INVALID_ARG;
    switch (shape) {
    case S_ATTENTION:
    case S_DECODE: {
        const size_t B = 1, H = probe_only ? 4 : 32, Hkv = probe_only ? 1 : 8, D = 64;
        const size_t Lq = shape == S_DECODE ? 1 : probe_only ? 256 : 4096;
        const size_t Lk = shape == S_DECODE ? (probe_only ? 4096 : 32768) : Lq;
        peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
        d.batch = B, d.heads = H, d.kv_heads = Hkv, d.q_len = Lq, d.kv_len = Lk;
        d.head_dim = D;
        const ptrdiff_t qs[3] = {(ptrdiff_t)(Lq * H * D), (ptrdiff_t)(H * D), (ptrdiff_t)D};
        const ptrdiff_t ks[3] = {(ptrdiff_t)(Lk * Hkv * D), (ptrdiff_t)(Hkv * D), (ptrdiff_t)D};
        memcpy(d.q_stride, qs, sizeof qs);
        memcpy(d.o_stride, qs, sizeof qs);
        memcpy(d.k_stride, ks, sizeof ks);
        memcpy(d.v_stride, ks, sizeof ks);
        d.mask.causal = shape == S_ATTENTION;
        float *q = untouched(B * Lq * H * D), *o = untouched(B * Lq * H * D);
        float *k = untouched(B * Lk * Hkv * D), *v = untouched(B * Lk * Hkv * D);
        st = peak_attention(o, q, k, v, &d, NULL, 0, pool);
        release(q, B * Lq * H * D), release(o, B * Lq * H * D);
        release(k, B * Lk * Hkv * D), release(v, B * Lk * Hkv * D);
        break;
    }
    case S_SOFTMAX:
    case S_SOFTMAX_CAUSAL: {
        const size_t H = probe_only ? 4 : 32, L = probe_only ? 256 : 4096, n = H * L * L;
        peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
        d.batch = 1, d.heads = H, d.q_len = L, d.k_len = L;
        const ptrdiff_t s[3] = {(ptrdiff_t)n, (ptrdiff_t)(L * L), (ptrdiff_t)L};
        memcpy(d.x_stride, s, sizeof s);
        memcpy(d.y_stride, s, sizeof s);
        d.mask.causal = shape == S_SOFTMAX_CAUSAL;
        float *x = untouched(n), *y = untouched(n);
        st = peak_softmax(y, x, &d, pool);
        release(x, n), release(y, n);
        break;
    }
    case S_LN_BIG:
    case S_LN_BERT: {
        const size_t rows = probe_only ? 256 : shape == S_LN_BIG ? 65536 : 4096;
        const size_t D = shape == S_LN_BIG ? 4096 : 768, n = rows * D;
        float *x = untouched(n), *y = untouched(n);
        st = peak_add_layernorm(y, (ptrdiff_t)D, NULL, 0, x, (ptrdiff_t)D, NULL, 0, NULL, NULL,
                                rows, D, 1e-5f, NULL, pool);
        release(x, n), release(y, n);
        break;
    }
    default:
        break;
    }
    return st;
}

/* The main phase of a call: the one of the largest modelled time. */
static size_t main_phase(const sim *s)
{
    size_t m = 0;
    for (size_t i = 1; i < s->n; i++)
        m = s->ph[i].total_ns > s->ph[m].total_ns ? i : m;
    return m;
}

static int sim_tier_ok(peak_isa isa)
{
    if (peak_isa_force(isa) != PEAK_OK) {
        printf("%s: not available here; simulation not run on it\n", peak_isa_name(isa));
        return 0;
    }
    return 1;
}

/* _i: the tier (0: the SIMD tier of this architecture, held to the bound;
   1: scalar, printed). */
START_TEST(imbalance_on_large_machines)
{
#if defined(__aarch64__)
    const peak_isa simd = PEAK_ISA_NEON;
#else
    const peak_isa simd = PEAK_ISA_AVX2;
#endif
    const peak_isa isa = _i == 0 ? simd : PEAK_ISA_SCALAR;
    const int assert_bound = _i == 0;
    if (!sim_tier_ok(isa))
        return;
    char failures[2048] = "";
    size_t nfail = 0;
    printf("\nimbalance (greedy makespan / mean, cost model) on the %s tier%s\n",
           peak_isa_name(isa), assert_bound ? ", bound 1.10" : ", printed only");
    printf("%-44s %-6s %8s %8s %10s %7s %7s %7s %s\n", "shape", "phase", "items", "slots",
           "model ms", "16", "64", "192", "tasks@16/64/192");
    for (int sh = 0; sh < N_SHAPES; sh++) {
        /* Does this family reach the runner at all?  A small real call
           (intercepted too, so its buffers are not touched either). */
        sim s;
        memset(&s, 0, sizeof s);
        peak_work_intercept(simulate, &s);
        size_t w16 = 16;
        peak_threadpool pool16 = {fake_workers, fake_run, &w16};
        peak_status st = sim_call((enum sim_shape)sh, 1, &pool16);
        peak_work_intercept(NULL, NULL);
        ck_assert_int_eq(st, PEAK_OK);
        if (s.n == 0) {
            printf("%-44s the family does not run through peak_work_run yet\n",
                   shape_name[sh]);
            nfail++;
            snprintf(failures + strlen(failures), sizeof failures - strlen(failures),
                     "\n  %s: not scheduled through peak_work_run", shape_name[sh]);
            continue;
        }
        /* The full shape once per machine size: the pool's worker count
           sizes the workspace and the scratch slots. */
        sim per[N_SIM];
        for (size_t k = 0; k < N_SIM; k++) {
            memset(&per[k], 0, sizeof per[k]);
            size_t workers = sim_workers[k];
            peak_threadpool pool = {fake_workers, fake_run, &workers};
            peak_work_intercept(simulate, &per[k]);
            st = sim_call((enum sim_shape)sh, 0, &pool);
            peak_work_intercept(NULL, NULL);
            ck_assert_int_eq(st, PEAK_OK);
            ck_assert_uint_eq(per[k].n, per[0].n);
            ck_assert_uint_eq(per[k].extra, 0);
        }
        const sim *s0 = &per[0];
        const size_t m = main_phase(s0);
        double total = 0.0;
        for (size_t p = 0; p < s0->n; p++)
            total += s0->ph[p].total_ns;
        for (size_t p = 0; p < s0->n; p++) {
            const phase *ph = &s0->ph[p];
            char slots[24];
            if (ph->slots)
                snprintf(slots, sizeof slots, "%zu", ph->slots);
            else
                snprintf(slots, sizeof slots, "any");
            printf("%-44s %-6s %8zu %8s %10.3f %7.3f %7.3f %7.3f %zu/%zu/%zu",
                   p == 0 ? shape_name[sh] : "", p == m ? "main" : "other", ph->items, slots,
                   ph->total_ns * 1e-6, ph->imbalance[0], ph->imbalance[1], ph->imbalance[2],
                   per[0].ph[p].tasks, per[1].ph[p].tasks, per[2].ph[p].tasks);
            if (p != m)
                printf("  (%.3f%% of the call's modelled time)", 100.0 * ph->total_ns / total);
            printf("\n");
            /* the model is consistent: the items add up to the total */
            CHECK(ph->cost_sum <= ph->total_ns * 1.000001 + 1e-9 &&
                      ph->cost_sum >= ph->total_ns * 0.999999 - 1e-9,
                  "%s: phase %zu: items sum to %.1f ns, total_ns %.1f", shape_name[sh], p,
                  ph->cost_sum, ph->total_ns);
        }
        /* The main phase: the bound, and a scratch that lets every worker
           take part (as the workspace was sized for the pool). */
        for (size_t k = 0; k < N_SIM; k++) {
            const phase *ph = &per[k].ph[m];
            const double imb = ph->imbalance[k];
            const int slots_ok = ph->slots == 0 || ph->slots >= sim_workers[k];
            const int tasks_ok = ph->tasks == (ph->items < sim_workers[k] ? ph->items
                                                                          : sim_workers[k]);
            /* A call with under 50 us of work per worker is not one such a
               machine would split that far (waking a pool costs 5-20 us):
               printed, not held to the bound (LayerNorm 4096 x 768 on 192
               workers: 7 us each). */
            const int worth_it = ph->total_ns / (double)sim_workers[k] >= 50e3;
            if (assert_bound && !worth_it && imb > 1.10) {
                printf("  (%.3f on %zu workers: %.1f us of work each, below the 50 us a "
                       "worker the bound applies to: printed only)\n",
                       imb, sim_workers[k], ph->total_ns / (double)sim_workers[k] * 1e-3);
            } else if (assert_bound && (imb > 1.10 || !slots_ok || !tasks_ok)) {
                nfail++;
                snprintf(failures + strlen(failures), sizeof failures - strlen(failures),
                         "\n  %s on %zu workers: imbalance %.3f, %zu items, %zu slots, %zu tasks",
                         shape_name[sh], sim_workers[k], imb, ph->items, ph->slots, ph->tasks);
            } else if (!assert_bound && imb > 1.10) {
                printf("  (scalar: %.3f on %zu workers, above the SIMD tier's bound: printed "
                       "only)\n",
                       imb, sim_workers[k]);
            }
        }
    }
    peak_isa_reset();
    CHECK(nfail == 0, "%s tier: %zu over the bound or not scheduled:%s", peak_isa_name(isa), nfail,
          failures);
}
END_TEST

/* Calls with a float16 tensor on the AVX2 tier of a CPU without F16C run
   on the scalar tier's kernels (no CPU we test on lacks it, so the choice
   is checked with the feature flags given); every other call, and every
   other tier, keeps its own. */
START_TEST(float16_without_f16c_takes_the_scalar_tier)
{
    const peak_kernels *rows[] = {&peak_kernels_scalar,
#if PEAK_HAVE_AVX2
                                  &peak_kernels_avx2,
#endif
#if PEAK_HAVE_AVX512
                                  &peak_kernels_avx512,
#endif
#if PEAK_HAVE_NEON
                                  &peak_kernels_neon,
#endif
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const peak_kernels *k = rows[i];
        const bool avx2 = k->isa == PEAK_ISA_AVX2;
        ck_assert_ptr_eq(peak_typed_kernels_for(k, 0, false), k);
        ck_assert_ptr_eq(peak_typed_kernels_for(k, PEAK_CPU_F16C, true), k);
        ck_assert_ptr_eq(peak_typed_kernels_for(k, 0, true), avx2 ? &peak_kernels_scalar : k);
        ck_assert_ptr_eq(peak_typed_kernels_for(k, ~(unsigned)PEAK_CPU_F16C, true),
                         avx2 ? &peak_kernels_scalar : k);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("runner");
    tcase_add_test(tc, makespan_by_hand);
    tcase_add_test(tc, imbalance_by_hand);
    tcase_add_loop_test(tc, every_item_once_distinct_slots, 0, N_POOL_KINDS);
    tcase_add_test(tc, tasks_limited_by_slots_and_items);
    tcase_add_test(tc, inline_below_threshold_or_one_item);
    tcase_add_loop_test(tc, nested_runs_inline, 0, N_POOL_KINDS);
    tcase_add_test(tc, intercept_receives_the_work);
    tcase_add_loop_test(tc, tasks_run_in_the_callers_fp_environment, 0, N_POOL_KINDS);
    tcase_add_test(tc, float16_without_f16c_takes_the_scalar_tier);
    suite_add_tcase(s, tc);
    TCase *sim = tcase_create("simulation");
    tcase_add_loop_test(sim, imbalance_on_large_machines, 0, 2);
    suite_add_tcase(s, sim);
    return s;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    SRunner *sr = srunner_create(make_suite());
    srunner_run_all(sr, CK_ENV);
    const int run = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return run == 0 ? 99 : failed ? 1 : 0;
}
