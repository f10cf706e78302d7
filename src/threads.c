/* Thread pool. A job is published by bumping `generation`; workers spin on it for a
 * short while (cheap back-to-back matmuls), then wait on a condition variable. The
 * caller works as thread 0 and waits for the `pending` count to reach zero. */
#include "threads.h"
#include "internal.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>

#define SPIN_ITERS 200000

/* a polite busy-wait step: tells the core we are spinning, no syscall */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* What a thread prefetches while it waits for the next task: set by the thread itself
 * from within a task (ll_pool_fetch_while_idle), on a cache line of its own. */
typedef struct { _Alignas(64) const char *at; size_t left; } idle_fetch;

struct ll_pool {
    int n;
    idle_fetch *idle;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_mutex_t run_lock;   /* callers from several contexts take turns */
    atomic_uint generation;
    atomic_int pending;
    atomic_int stop;
    ll_task_fn fn;
    void *arg;
};

typedef struct { ll_pool *p; int ith; } worker_arg;

#define FETCH_SLICE 1024   /* bytes prefetched between two looks at the generation */

/* One slice of a waiting thread's prefetch; 0 when there is none left. */
static int fetch_slice(idle_fetch *f) {
    if (!f->left) return 0;
    size_t n = f->left < FETCH_SLICE ? f->left : FETCH_SLICE;
    for (size_t i = 0; i < n; i += 64) __builtin_prefetch(f->at + i, 0, 3);
    f->at += n;
    f->left -= n;
    return 1;
}

void ll_pool_fetch_while_idle(ll_pool *p, int ith, const void *bytes, size_t n) {
    p->idle[ith] = (idle_fetch){bytes, n};
}

static void *worker(void *a) {
    worker_arg *wa = a;
    ll_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen && !atomic_load(&p->stop)) {
            if (fetch_slice(&p->idle[ith])) continue;
            if (++spins < SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        p->idle[ith].left = 0;
        p->fn(p->arg, ith, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

ll_pool *ll_pool_create(int n) {
    if (n < 1) n = 1;
    ll_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_mutex_init(&p->run_lock, NULL);
    p->threads = calloc((size_t)n, sizeof *p->threads);
    p->idle = aligned_alloc(64, (size_t)n * sizeof *p->idle);
    if (!p->threads || !p->idle) { free(p->threads); free(p->idle); free(p); return NULL; }
    memset(p->idle, 0, (size_t)n * sizeof *p->idle);
    for (int i = 1; i < n; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) { p->n = i; break; }
        wa->p = p; wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker, wa) != 0) { free(wa); p->n = i; break; }
    }
    return p;
}

int ll_pool_size(const ll_pool *p) { return p->n; }

void ll_pool_run(ll_pool *p, ll_task_fn fn, void *arg) {
    if (p->n == 1) { fn(arg, 0, 1); return; }
    pthread_mutex_lock(&p->run_lock);
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n - 1);
    p->idle[0].left = 0;
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (fetch_slice(&p->idle[0])) continue;
        if (spins < SPIN_ITERS) cpu_relax();
        else sched_yield();
    }
    pthread_mutex_unlock(&p->run_lock);
}

void ll_pool_free(ll_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_lock);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p->idle);
    free(p);
}
