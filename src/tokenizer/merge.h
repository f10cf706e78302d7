/* The symbol list and merge queue shared by SPM and BPE: symbols are contiguous byte
 * ranges in a doubly linked list; candidate pairs wait in a binary heap ordered by the
 * algorithm's priority (lower `prio` first, then the left symbol's position). */
#ifndef LLAMBDA_MERGE_H
#define LLAMBDA_MERGE_H
#include <stdlib.h>

typedef struct ll_sym { int start, len, prev, next; } ll_sym;
typedef struct ll_pair { double prio; int left, right, size; } ll_pair;
typedef struct ll_heap { ll_pair *a; int n, cap; } ll_heap;

static inline int pair_less(const ll_pair *x, const ll_pair *y) {
    return x->prio < y->prio || (x->prio == y->prio && x->left < y->left);
}

static inline int heap_push(ll_heap *h, ll_pair p) {
    if (h->n == h->cap) {
        int nc = h->cap ? h->cap * 2 : 64;
        ll_pair *na = realloc(h->a, (size_t)nc * sizeof *na);
        if (!na) return -1;
        h->a = na; h->cap = nc;
    }
    int i = h->n++;
    h->a[i] = p;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!pair_less(&h->a[i], &h->a[parent])) break;
        ll_pair t = h->a[i]; h->a[i] = h->a[parent]; h->a[parent] = t;
        i = parent;
    }
    return 0;
}

static inline ll_pair heap_pop(ll_heap *h) {
    ll_pair top = h->a[0];
    h->a[0] = h->a[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && pair_less(&h->a[l], &h->a[m])) m = l;
        if (r < h->n && pair_less(&h->a[r], &h->a[m])) m = r;
        if (m == i) break;
        ll_pair t = h->a[i]; h->a[i] = h->a[m]; h->a[m] = t;
        i = m;
    }
    return top;
}
#endif
