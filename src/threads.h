/* A persistent thread pool: workers spin briefly, then sleep, between jobs. */
#ifndef LLAMBDA_THREADS_H
#define LLAMBDA_THREADS_H
#include <stddef.h>
typedef struct ll_pool ll_pool;
typedef void (*ll_task_fn)(void *arg, int ith, int nth);
ll_pool *ll_pool_create(int n_threads);
void ll_pool_free(ll_pool *p);
int ll_pool_size(const ll_pool *p);
/* Run fn(arg, i, n) for i in 0..n-1, the caller as thread 0; returns when all are done. */
void ll_pool_run(ll_pool *p, ll_task_fn fn, void *arg);
/* From within a task: bytes thread ith prefetches, a slice at a time, while it waits for
 * the next task (dropped when that starts). */
void ll_pool_fetch_while_idle(ll_pool *p, int ith, const void *bytes, size_t n);
#endif
