/*
 * parallel.h - how a call's work runs on the caller's pool (parallel.c):
 * the scheduling layer's one runner, used by every family's scheduler
 * (schedule-<family>.c), and the cost-model simulation the tests and the
 * benchmarks use to predict the speedup on machines we do not have.
 *
 * A scheduler cuts a validated call into items by its shapes alone and
 * hands them here as a peak_work.  The runner starts at most `workers`
 * tasks; each takes items one at a time from a shared counter (greedy list
 * scheduling, in the items' order), so the partition never depends on the
 * thread count and every item is computed the same way wherever it runs:
 * the bytes are the same at any thread count (peak.h, peak_threadpool).
 */
#ifndef PEAK_SCHEDULE_PARALLEL_H
#define PEAK_SCHEDULE_PARALLEL_H

#include "internal.h"

#include <stddef.h>

/* Calls whose modelled cost is below this many nanoseconds run inline on
   the calling thread: waking a pthreadpool's workers and joining them
   takes 5-20 us, so a single short decode step would be slower pooled. */
#define PEAK_INLINE_NS 20000.0

typedef struct peak_work {
    size_t items;
    /* Computes item i with a worker's scratch (slot_bytes, 64-byte aligned;
       NULL when slot_bytes is 0). */
    void (*run)(void *ctx, size_t item, void *scratch);
    /* The cost model: item i's time on one core, in nanoseconds (only its
       ratios and the inline threshold matter). */
    double (*cost)(const void *ctx, size_t item);
    void *ctx;
    double total_ns;    /* the whole call's modelled time */
    void *scratch;      /* slots * slot_bytes bytes */
    size_t slot_bytes;  /* per worker; 0: none */
    size_t slots;       /* workers the scratch allows; 0: any number */
} peak_work;

/* Runs every item of w, on pool (NULL: the calling thread), and returns
   when all are done.  Inline when the pool has one worker, the work is
   below PEAK_INLINE_NS or has one item, or the call is made from inside a
   task peak is running (nesting). */
PEAK_INTERNAL void peak_work_run(const peak_work *w, const peak_threadpool *pool);

/* The tasks peak_work_run would start for w on pool: 1 when it runs
   inline. */
PEAK_INTERNAL size_t peak_work_tasks(const peak_work *w, const peak_threadpool *pool);

/* Greedy list scheduling of n items of the given costs, in order, on
   `workers` identical workers (what peak_work_run's shared counter does):
   the time the last worker finishes. */
PEAK_INTERNAL double peak_schedule_makespan(const double *cost, size_t n, size_t workers);

/* Load imbalance of w on `workers` workers from its cost model: the
   makespan over the mean (total / workers); 1.0 is perfect. */
PEAK_INTERNAL double peak_work_imbalance(const peak_work *w, size_t workers);

/* For the tests and the benchmarks only: when set (on this thread),
   peak_work_run hands each call's work to this function instead of
   running it (the function may run items itself, timed, or only read the
   cost model).  NULL in the library's normal use. */
typedef void (*peak_work_intercept_fn)(const peak_work *w, const peak_threadpool *pool,
                                       void *arg);
PEAK_INTERNAL void peak_work_intercept(peak_work_intercept_fn fn, void *arg);

#endif /* PEAK_SCHEDULE_PARALLEL_H */
