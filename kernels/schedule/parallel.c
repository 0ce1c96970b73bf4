/*
 * parallel.c - the runner of parallel.h and the ready-made pools of peak.h
 * (peak_threadpool_create, peak_threadpool_from_pthreadpool).
 */
#include "parallel.h"

#include <fenv.h>
#if PEAK_HAVE_PTHREADPOOL
#include <pthreadpool.h>
#endif
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* Set while this thread runs a task of peak_work_run: a peak call made
   from inside one runs inline instead of entering a pool again (a
   pthreadpool's parallelize would deadlock on its own mutex). */
static _Thread_local int in_task;

static _Thread_local peak_work_intercept_fn intercept;
static _Thread_local void *intercept_arg;

void peak_work_intercept(peak_work_intercept_fn fn, void *arg)
{
    intercept = fn;
    intercept_arg = arg;
}

typedef struct work_run {
    const peak_work *w;
    atomic_size_t next;
    /* The caller's floating-point environment: a caller built with
       -ffast-math runs with FTZ/DAZ, and a worker thread that did not
       would flush differently (the same bytes at any thread count). */
    fenv_t env;
} work_run;

static void *slot_scratch(const peak_work *w, size_t slot)
{
    return w->slot_bytes ? (char *)w->scratch + slot * w->slot_bytes : NULL;
}

static void work_task(void *arg, size_t task)
{
    work_run *r = arg;
    const peak_work *w = r->w;
    fenv_t saved;
    fegetenv(&saved);
    fesetenv(&r->env);
    const int outer = in_task;
    in_task = 1;
    void *scratch = slot_scratch(w, task);
    for (size_t i; (i = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed)) < w->items;)
        w->run(w->ctx, i, scratch);
    in_task = outer;
    fesetenv(&saved);
}

size_t peak_threadpool_workers(const peak_threadpool *pool)
{
    if (!pool || !pool->workers || !pool->run)
        return 1;
    const size_t n = pool->workers(pool->ctx);
    return n ? n : 1;
}

size_t peak_work_tasks(const peak_work *w, const peak_threadpool *pool)
{
    if (!pool || in_task || w->items < 2 || w->total_ns < PEAK_INLINE_NS)
        return 1;
    size_t n = peak_threadpool_workers(pool);
    n = n < w->items ? n : w->items;
    return w->slots && n > w->slots ? w->slots : n;
}

void peak_work_run(const peak_work *w, const peak_threadpool *pool)
{
    if (intercept) {
        intercept(w, pool, intercept_arg);
        return;
    }
    const size_t tasks = peak_work_tasks(w, pool);
    if (tasks <= 1) {
        void *scratch = slot_scratch(w, 0);
        for (size_t i = 0; i < w->items; i++)
            w->run(w->ctx, i, scratch);
        return;
    }
    work_run r = {.w = w};
    atomic_init(&r.next, 0);
    fegetenv(&r.env);
    pool->run(pool->ctx, work_task, &r, tasks);
}

double peak_schedule_makespan(const double *cost, size_t n, size_t workers)
{
    if (workers == 0)
        workers = 1;
    double *busy = calloc(workers, sizeof *busy);
    if (!busy)
        return -1.0;
    /* The next item goes to the worker that frees up first: O(n workers),
       fine for a simulation. */
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        for (size_t j = 1; j < workers; j++)
            k = busy[j] < busy[k] ? j : k;
        busy[k] += cost[i];
    }
    double end = 0.0;
    for (size_t j = 0; j < workers; j++)
        end = busy[j] > end ? busy[j] : end;
    free(busy);
    return end;
}

double peak_work_imbalance(const peak_work *w, size_t workers)
{
    if (w->items == 0)
        return 1.0;
    double *c = malloc(w->items * sizeof *c), total = 0.0;
    if (!c)
        return -1.0;
    for (size_t i = 0; i < w->items; i++)
        total += c[i] = w->cost(w->ctx, i);
    const double end = peak_schedule_makespan(c, w->items, workers);
    free(c);
    return total > 0.0 ? end * (double)workers / total : 1.0;
}

/* ---- pthreadpool: the adapter and the ready-made pool ------------------- */

#if PEAK_HAVE_PTHREADPOOL
static size_t pp_workers(void *ctx)
{
    return pthreadpool_get_threads_count((pthreadpool_t)ctx);
}

/* pthreadpool is not built with ThreadSanitizer: the ordering its atomics
   give (a run's tasks after its start, its return after every task) is
   invisible to TSan, which would report the caller's data read in a task,
   and the task's results read after the run, as races.  Stated here. */
#if defined(__SANITIZE_THREAD__)
#define PEAK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PEAK_TSAN 1
#endif
#endif
#ifdef PEAK_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define PP_RELEASE(p) __tsan_release(p)
#define PP_ACQUIRE(p) __tsan_acquire(p)
#else
#define PP_RELEASE(p) ((void)(p))
#define PP_ACQUIRE(p) ((void)(p))
#endif

/* The pthreadpool whose task (given through pp_run) this thread is
   running, if any.  A run entered again from one of those tasks -- the
   caller's task calling peak with the same pool (peak.h, "Nesting") --
   runs its tasks right there, one after another: pthreadpool_parallelize
   is not reentrant and would wait forever on its own lock. */
static _Thread_local const void *running_in;

typedef struct pp_task {
    const void *pool;
    peak_task_fn fn;
    void *arg;
} pp_task;

static void pp_task_run(void *arg, size_t task)
{
    PP_ACQUIRE(arg);
    const pp_task *t = arg;
    const void *outer = running_in;
    running_in = t->pool;
    t->fn(t->arg, task);
    running_in = outer;
    PP_RELEASE(arg);
}

static void pp_run(void *ctx, peak_task_fn fn, void *arg, size_t n_tasks)
{
    if (running_in == ctx) {
        for (size_t t = 0; t < n_tasks; t++)
            fn(arg, t);
        return;
    }
    pp_task t = {ctx, fn, arg};
    PP_RELEASE(&t);
    pthreadpool_parallelize_1d((pthreadpool_t)ctx, pp_task_run, &t, n_tasks, 0);
    PP_ACQUIRE(&t);
}

peak_threadpool peak_threadpool_from_pthreadpool(struct pthreadpool *pthreadpool)
{
    peak_threadpool p = {pp_workers, pp_run, pthreadpool};
    return p;
}

/* The interface first, so that the pointer handed out is the pool's. */
typedef struct owned_pool {
    peak_threadpool iface;
    pthreadpool_t pp;
} owned_pool;

peak_status peak_threadpool_create(size_t threads, peak_threadpool **pool)
{
    if (!pool)
        return PEAK_ERR_INVALID_ARG;
    *pool = NULL;
    /* pthreadpool_create's allocation overflows for counts near 2^58. */
    if (threads > PEAK_THREADPOOL_MAX_THREADS)
        return PEAK_ERR_INVALID_ARG;
    owned_pool *p = malloc(sizeof *p);
    if (!p)
        return PEAK_ERR_NO_MEMORY;
    p->pp = pthreadpool_create(threads);
    if (!p->pp) {
        free(p);
        return PEAK_ERR_NO_MEMORY;
    }
    p->iface = peak_threadpool_from_pthreadpool(p->pp);
    *pool = &p->iface;
    return PEAK_OK;
}

void peak_threadpool_destroy(peak_threadpool *pool)
{
    if (!pool)
        return;
    owned_pool *p = (owned_pool *)(void *)pool;
    pthreadpool_destroy(p->pp);
    free(p);
}
#else
/* Built without pthreadpool (-Dpthreadpool=disabled): no workers function
   means one worker, so run is never called. */
peak_threadpool peak_threadpool_from_pthreadpool(struct pthreadpool *pthreadpool)
{
    peak_threadpool p = {NULL, NULL, pthreadpool};
    return p;
}

peak_status peak_threadpool_create(size_t threads, peak_threadpool **pool)
{
    (void)threads;
    if (!pool)
        return PEAK_ERR_INVALID_ARG;
    *pool = NULL;
    return PEAK_ERR_UNSUPPORTED;
}

void peak_threadpool_destroy(peak_threadpool *pool)
{
    (void)pool;
}
#endif
