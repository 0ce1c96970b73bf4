/*
 * pool-pthreads.c - peak on the caller's own threads.
 *
 * An engine that already has worker threads does not want a second pool
 * inside the library.  peak asks for two functions instead (peak.h,
 * peak_threadpool):
 *
 *   workers(ctx)                   how many tasks may run at once;
 *   run(ctx, fn, arg, n_tasks)     call fn(arg, t) for every t < n_tasks,
 *                                  on any threads, and return when all
 *                                  have returned.
 *
 * Here they sit on a tiny persistent pool written with plain pthreads: the
 * threads are started once and sleep on a condition variable; run() posts
 * a job, the threads (and the calling thread, which helps rather than
 * idles) take its task indices one at a time under a mutex, and the last
 * task to finish wakes the caller.
 *
 * peak cuts every call into the same pieces whatever the pool, so the
 * result must be the same bytes as with no pool at all (pool NULL): an
 * attention (causal, grouped-query) and a softmax are run both ways and
 * compared with memcmp.
 *
 * Build: cc pool-pthreads.c $(pkg-config --cflags --libs peak) -lpthread -lm
 */
#include <math.h>
#include <peak.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the caller's pool ---------------------------------------------------- */

enum { POOL_THREADS = 3 }; /* plus the calling thread: 4 workers */

typedef struct my_pool {
    pthread_mutex_t lock;
    pthread_cond_t job_posted; /* a job has tasks left, or stop is set */
    pthread_cond_t job_done;   /* the job's last task has returned */
    pthread_t threads[POOL_THREADS];
    /* The current job, read and written under lock. */
    peak_task_fn fn;
    void *arg;
    size_t n_tasks, next, done;
    int stop;
    size_t tasks_run; /* tasks run for peak, for the printout */
    pthread_mutex_t run_lock; /* one job at a time */
} my_pool;

/* Takes tasks of the current job until none is left; called with lock
   held, returns with it held. */
static void take_tasks(my_pool *p)
{
    while (p->next < p->n_tasks) {
        const size_t t = p->next++;
        peak_task_fn fn = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->lock);
        fn(arg, t); /* outside the lock: tasks run at the same time */
        pthread_mutex_lock(&p->lock);
        p->tasks_run++;
        if (++p->done == p->n_tasks)
            pthread_cond_signal(&p->job_done);
    }
}

static void *worker_main(void *ctx)
{
    my_pool *p = ctx;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->next >= p->n_tasks)
            pthread_cond_wait(&p->job_posted, &p->lock);
        if (p->stop)
            break;
        take_tasks(p);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* peak_threadpool.workers: the threads and the caller. */
static size_t my_workers(void *ctx)
{
    (void)ctx;
    return POOL_THREADS + 1;
}

/* peak_threadpool.run: post the job, help with it, wait for the rest. */
static void my_run(void *ctx, peak_task_fn fn, void *arg, size_t n_tasks)
{
    my_pool *p = ctx;
    pthread_mutex_lock(&p->run_lock);
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    p->next = p->done = 0;
    pthread_cond_broadcast(&p->job_posted);
    take_tasks(p);
    while (p->done < p->n_tasks)
        pthread_cond_wait(&p->job_done, &p->lock);
    p->n_tasks = p->next = 0; /* nothing left for a thread waking late */
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->run_lock);
}

static int my_pool_start(my_pool *p)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_cond_init(&p->job_posted, NULL);
    pthread_cond_init(&p->job_done, NULL);
    for (int i = 0; i < POOL_THREADS; i++)
        if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0)
            return 0; /* an example: a real pool would stop the others */
    return 1;
}

static void my_pool_stop(my_pool *p)
{
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_broadcast(&p->job_posted);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < POOL_THREADS; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->job_done);
    pthread_cond_destroy(&p->job_posted);
    pthread_mutex_destroy(&p->run_lock);
    pthread_mutex_destroy(&p->lock);
}

/* ---- the calls ------------------------------------------------------------ */

enum {
    L = 512,      /* sequence length (queries = keys: self-attention) */
    HEADS = 8,    /* query heads */
    KV_HEADS = 2, /* K/V heads: 4 query heads share each */
    DH = 64       /* head_dim */
};

/* Any deterministic numbers in [-1, 1]. */
static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)sin(0.37 * (double)i + 1.7 * seed);
}

/* The same bytes?  Prints where they first differ. */
static int same(const char *what, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0) {
            printf("%s: element %zu differs: %.9g with the pool, %.9g without\n", what, i,
                   (double)a[i], (double)b[i]);
            return 0;
        }
    printf("%s: the same %zu floats with the pool and without\n", what, n);
    return 1;
}

int main(void)
{
    my_pool mine;
    if (!my_pool_start(&mine))
        return 1;
    /* What peak sees: two functions and the pool as their context. */
    const peak_threadpool pool = {my_workers, my_run, &mine};

    /* Causal self-attention, [1, L, H, D] tensors, 4 query heads per K/V head. */
    peak_attention_desc d = PEAK_ATTENTION_DESC_DEFAULT;
    d.batch = 1;
    d.heads = HEADS;
    d.kv_heads = KV_HEADS;
    d.q_len = d.kv_len = L;
    d.head_dim = DH;
    const ptrdiff_t qo[3] = {L * HEADS * DH, HEADS * DH, DH};
    const ptrdiff_t kv[3] = {L * KV_HEADS * DH, KV_HEADS * DH, DH};
    memcpy(d.q_stride, qo, sizeof qo);
    memcpy(d.o_stride, qo, sizeof qo);
    memcpy(d.k_stride, kv, sizeof kv);
    memcpy(d.v_stride, kv, sizeof kv);
    d.mask.causal = 1;

    /* Softmax over H rows of L x L scores (causal), out of place. */
    peak_softmax_desc sd = PEAK_SOFTMAX_DESC_DEFAULT;
    sd.batch = 1;
    sd.heads = HEADS;
    sd.q_len = sd.k_len = L;
    sd.x_stride[0] = sd.y_stride[0] = (ptrdiff_t)HEADS * L * L;
    sd.x_stride[1] = sd.y_stride[1] = (ptrdiff_t)L * L;
    sd.x_stride[2] = sd.y_stride[2] = L;
    sd.mask.causal = 1;

    const size_t nq = (size_t)L * HEADS * DH, nkv = (size_t)L * KV_HEADS * DH;
    const size_t ns = (size_t)HEADS * L * L;
    float *q = malloc(nq * sizeof *q), *k = malloc(nkv * sizeof *k), *v = malloc(nkv * sizeof *v);
    float *o_pool = malloc(nq * sizeof *q), *o_alone = malloc(nq * sizeof *q);
    float *s = malloc(ns * sizeof *s), *p_pool = malloc(ns * sizeof *s),
          *p_alone = malloc(ns * sizeof *s);
    int ok = q && k && v && o_pool && o_alone && s && p_pool && p_alone;
    if (ok) {
        fill(q, nq, 1);
        fill(k, nkv, 2);
        fill(v, nkv, 3);
        for (size_t i = 0; i < ns; i++)
            s[i] = 4.0f * (float)sin(0.013 * (double)i * (double)(i % 97));
        /* workspace NULL: peak allocates what the pool's workers need */
        peak_status st[4] = {
            peak_attention(o_pool, q, k, v, &d, NULL, 0, &pool),
            peak_attention(o_alone, q, k, v, &d, NULL, 0, NULL), /* this thread only */
            peak_softmax(p_pool, s, &sd, &pool),
            peak_softmax(p_alone, s, &sd, NULL),
        };
        for (int i = 0; i < 4; i++)
            if (st[i] != PEAK_OK) {
                fprintf(stderr, "peak call %d: %s\n", i, peak_status_string(st[i]));
                ok = 0;
            }
    }
    if (ok) {
        printf("peak %s on %s, a pool of %d pthreads + the caller: it ran %zu tasks\n",
               peak_version(), peak_isa_name(peak_isa_active()), POOL_THREADS, mine.tasks_run);
        ok = same("attention", o_pool, o_alone, nq);
        ok = same("softmax", p_pool, p_alone, ns) && ok;
    }
    my_pool_stop(&mine);
    free(q);
    free(k);
    free(v);
    free(o_pool);
    free(o_alone);
    free(s);
    free(p_pool);
    free(p_alone);
    return ok ? 0 : 1;
}
