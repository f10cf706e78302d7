/* The matmul seam: every weight product in every architecture goes through here.
 * Activations are converted once per token to the weight type's vec_dot_type (as
 * llama.cpp does, so the numerics match); output rows are split across threads. Each
 * output element is one vec_dot call whatever the thread count or batch size, so the
 * results are bitwise independent of both. */
#include "../backends/backend.h"
#include <stdatomic.h>

typedef struct matmul_job {
    const ll_weight *w;
    const uint8_t *xq;
    size_t xq_row;
    int n_tok;
    float *y;
    ll_vec_dot_fn dot;
    ll_vec_dot_x8_fn dot8;
    ll_vec_dot_x8_t4_fn dot8t4;
    ll_dot_packed_fn dotp;      /* for the weight's repacked tiles, when it has them, */
    ll_dot_packed_fn dotp2;     /* and for two adjacent ones */
    ll_gemm_fn gemm;            /* prompts of float weights: a whole item in one call, */
    ll_gemm_fn gemm_tiles;      /* on the repacked tiles when their layout needs its own (else gemm) */
} matmul_job;

/* A job's work items (items_of) */
typedef struct { int64_t n_tiles, item_tiles, n_rb, n_items, item_bytes; int chunk; } job_items;

/* Several products run as one pool task: their work items are numbered one after the
 * other and handed out as threads ask (the fast finish the rest), so many small products
 * (a token's experts) cost one barrier, not one each. */
#ifndef LL_MATMUL_MAX_JOBS
#define LL_MATMUL_MAX_JOBS 64   /* a test build sets it low to exercise the flushes */
#endif
#define MAX_JOBS LL_MATMUL_MAX_JOBS
typedef struct matmul_set {
    const matmul_job *jobs;
    int n, decode;              /* decode: every job one token */
    const job_items *its;       /* each job's work items, counted once for all threads: */
    const int64_t *end;         /* numbered one after the other, job k's before end[k], */
    int64_t total;              /* total in all */
    ll_pool *pool;
    int64_t own_bytes;          /* decode: thread i starts with the items from byte i·own_bytes on, its own */
    const ll_plan_set *next;    /* decode: the set expected next, or NULL */
    uint8_t *scratch;           /* the prompt kernels' per-thread scratch, */
    size_t scratch_stride;      /* one slice per pool thread */
    /* On its own cache line, so the other threads' grabs do not evict the fields above. */
    _Alignas(64) atomic_long next_item;
} matmul_set;

#define ROW_TILE 8
#define DECODE_ITEM_TILES 4 /* decode: 32 rows per work item */
#define TOK_CHUNK 64        /* prefill: tokens per work item (their activations stay in L2) */
#ifndef GEMM_TOK_CHUNK
#define GEMM_TOK_CHUNK 256  /* the same for float weights, whose rows cost more to fetch again */
#endif
#define PREFILL_TILES 8     /* prefill: row tiles per work item (their weights stay in L1/L2) */
#define GEMM_TILES 6        /* the same for float weights: 48 rows, a whole number of six-row tiles */

/* Packed tiles from the one starting at row r0 (one tile, or two for a pair kernel)
 * against tokens t0..t1, four tokens a call. */
static void run_packed(const matmul_job *j, ll_dot_packed_fn kernel, int64_t r0, int t0, int t1) {
    const uint8_t *tile = j->w->packed + (size_t)(r0 / ROW_TILE) * j->w->packed_tile;
    for (int t = t0; t < t1; t += 4)
        kernel(j->w->cols, j->y + (size_t)t * (size_t)j->w->rows + (size_t)r0, (size_t)j->w->rows, tile,
               j->xq + (size_t)t * j->xq_row, j->xq_row, t1 - t < 4 ? t1 - t : 4);
}

/* The 8-row tile r0..r1 against tokens t0..t1, through the widest kernel that fits. */
static void matmul_tile(const matmul_job *j, int64_t r0, int64_t r1, int t0, int t1) {
    int64_t rows = j->w->rows;
    const uint8_t *wt = j->w->data + (size_t)r0 * j->w->row_bytes;
    int t = t0;
    if (j->dotp && r1 - r0 == ROW_TILE) {   /* a full tile is always one of the packed ones */
        run_packed(j, j->dotp, r0, t0, t1);
        return;
    }
    if (j->dot8t4 && r1 - r0 == ROW_TILE)
        for (; t + 4 <= t1; t += 4)
            j->dot8t4(j->w->cols, j->y + (size_t)t * (size_t)rows + (size_t)r0, (size_t)rows, wt, j->w->row_bytes,
                      j->xq + (size_t)t * j->xq_row, j->xq_row);
    for (; t < t1; t++) {
        const uint8_t *xq = j->xq + (size_t)t * j->xq_row;
        float *yt = j->y + (size_t)t * (size_t)rows;
        if (j->dot8 && r1 - r0 == ROW_TILE) {
            j->dot8(j->w->cols, &yt[r0], wt, j->w->row_bytes, xq);
            continue;
        }
        for (int64_t r = r0; r < r1; r++)
            j->dot(j->w->cols, &yt[r], j->w->data + (size_t)r * j->w->row_bytes, xq);
    }
}

/* A job's work items (job_items): a decode item is a run of row tiles; a prefill item is
 * a block of row tiles times a chunk of tokens, chunks outermost, so one chunk's
 * activations stay in cache while the rows stream past. */
static job_items items_of(const matmul_job *j) {
    job_items it;
    it.n_tiles = (j->w->rows + ROW_TILE - 1) / ROW_TILE;
    it.item_tiles = j->n_tok == 1 ? DECODE_ITEM_TILES : j->gemm ? GEMM_TILES : PREFILL_TILES;
    if (it.item_tiles > it.n_tiles) it.item_tiles = it.n_tiles;
    it.n_rb = (it.n_tiles + it.item_tiles - 1) / it.item_tiles;
    it.chunk = j->gemm ? GEMM_TOK_CHUNK : TOK_CHUNK;
    it.n_items = it.n_rb * (((int64_t)j->n_tok + it.chunk - 1) / it.chunk);
    it.item_bytes = it.item_tiles * (int64_t)(j->w->packed ? j->w->packed_tile : ROW_TILE * j->w->row_bytes);
    return it;
}

/* Rows r0..r1 of a float weight for its prompt kernel: the repacked copy holds the whole
 * tiles, packed_tile bytes each (stride = packed_tile / 8 a row, for kernels whose tiles
 * are plain rows), the rest are the file's rows. */
typedef struct { const uint8_t *w; size_t stride; int64_t r0, r1; int tiles; } row_span;

static int float_row_spans(const ll_weight *w, int64_t r0, int64_t r1, row_span span[2]) {
    int64_t split = w->packed ? w->rows / ROW_TILE * ROW_TILE : 0, n = 0;
    if (split > r1) split = r1;
    if (r0 < split) {
        size_t stride = w->packed_tile / ROW_TILE;
        span[n++] = (row_span){w->packed + (size_t)r0 * stride, stride, r0, split, 1};
    }
    if (split < r0) split = r0;
    if (split < r1) span[n++] = (row_span){w->data + (size_t)split * w->row_bytes, w->row_bytes, split, r1, 0};
    return (int)n;
}

static void item_row_range(const job_items *it, const ll_weight *w, int64_t item, int64_t *r0, int64_t *r1) {
    int64_t tile0 = (item % it->n_rb) * it->item_tiles;
    int64_t tile1 = tile0 + it->item_tiles < it->n_tiles ? tile0 + it->item_tiles : it->n_tiles;
    *r0 = tile0 * ROW_TILE;
    *r1 = tile1 * ROW_TILE < w->rows ? tile1 * ROW_TILE : w->rows;
}

/* The weight bytes an item reads first: its rows (all its tokens read the same ones). */
static const uint8_t *item_rows(const matmul_job *j, const job_items *it, int64_t item, size_t *bytes) {
    int64_t r0, r1;
    row_span span[2];
    item_row_range(it, j->w, item, &r0, &r1);
    float_row_spans(j->w, r0, r1, span);
    *bytes = (size_t)(span[0].r1 - span[0].r0) * span[0].stride;
    return span[0].w;
}

static void run_item(const matmul_job *j, const job_items *it, int64_t item, void *scratch, const void *next,
                     size_t next_bytes) {
    int t0 = (int)(item / it->n_rb) * it->chunk, t1 = t0 + it->chunk < j->n_tok ? t0 + it->chunk : j->n_tok;
    int64_t tile0 = (item % it->n_rb) * it->item_tiles;
    int64_t tile1 = tile0 + it->item_tiles < it->n_tiles ? tile0 + it->item_tiles : it->n_tiles;
    if (j->gemm) {
        int64_t r0, r1;
        row_span span[2];
        item_row_range(it, j->w, item, &r0, &r1);
        for (int s = 0, n = float_row_spans(j->w, r0, r1, span); s < n; s++) {
            ll_gemm_fn gemm = span[s].tiles && j->gemm_tiles ? j->gemm_tiles : j->gemm;
            gemm(j->w->cols, j->y + (size_t)t0 * (size_t)j->w->rows + (size_t)span[s].r0, (size_t)j->w->rows, span[s].w,
                 span[s].stride, (int)(span[s].r1 - span[s].r0), j->xq + (size_t)t0 * j->xq_row, j->xq_row, t1 - t0, scratch,
                 s + 1 == n ? next : NULL, next_bytes);
        }
        return;
    }
    for (int64_t tile = tile0; tile < tile1; tile++) {
        int64_t r0 = tile * ROW_TILE, r1 = r0 + ROW_TILE < j->w->rows ? r0 + ROW_TILE : j->w->rows;
        if (j->dotp2 && tile + 1 < tile1 && r0 + 2 * ROW_TILE <= j->w->rows) {   /* two packed tiles at once */
            run_packed(j, j->dotp2, r0, t0, t1);
            tile++;
            continue;
        }
        matmul_tile(j, r0, r1, t0, t1);
    }
}

/* Decode: how many of the items left a thread takes at once, a share of them that shrinks
 * as they run out (guided self-scheduling). The first grabs are long runs that stream
 * (a set of a token's experts takes each matrix in one or a few pieces), the last are one
 * 32-row item each, so the threads finish together: with a fixed eighth of the set per
 * grab per thread, the caller spent 2.4% of a llama-3.2-1b token waiting for the other
 * thread at the ends of tasks, 1.0% with this (perf, two threads). */
#define GUIDED_SHARE 2   /* each grab takes 1 / (GUIDED_SHARE x threads) of what is left */
static int64_t grab_items(int64_t left, int nth) {
    int64_t take = left / ((int64_t)GUIDED_SHARE * nth);
    return take < 1 ? 1 : take;
}

/* Decode: the items each thread takes first, before it grabs from what is left: fixed,
 * so that a thread knows them before the set starts (fetch_own_items), and shares of the
 * set's bytes, not of its items: a Qwen3-Next router (F32, 256 KiB an item) shares a set
 * with the shared expert's Q4_K rows (36 KiB an item), and equal counts gave one thread
 * three quarters of the bytes to stream alone. Six eighths of the set are owned, a
 * quarter is left to balance the threads: every grab starts a new stream (its first lines
 * not prefetched, the prefetches past the last run's end wasted), and at this host's
 * upper bandwidth level a model of a llama-3.2-1b token (two threads, the Q4_K tile,
 * a barrier per set) streamed 74.1 GB/s with half the set owned, 76.4 with seven
 * eighths, 77.7 with fixed halves, against a plain read's 77.4 (means of 2240 passes;
 * even at the lower level). But fixed halves leave one thread waiting when the other
 * runs slower, which on this shared host it often does: timed in a real token, one
 * thread took 10-19% longer than the other for its owned part, either one, run to run
 * (session 31; fixed halves then made the head 64 -> 54 GB/s). Seven eighths against six,
 * session 31, three alternations, each token against a read pass just before it:
 * llama-3.2-1b Q4_K_M 0.946 / 1.031 / 1.033 -> 0.919 / 1.072 / 1.164, Q5_K_M 0.938 /
 * 0.947 / 0.957 -> 0.956 / 0.970 / 1.046, Q8_0 0.831 / 0.870 / 0.854 -> 0.897 / 0.930 /
 * 0.905, Qwen3-Next 0.923 / 0.937 / 0.817 -> 1.047 / 1.052 / 0.936 (token rates higher
 * in 11 of 12); Nemotron, F16 and BF16 even in two. */
#define OWNED_EIGHTHS 6
static int64_t own_bytes(int64_t total_bytes, int nth) { return total_bytes / 8 * OWNED_EIGHTHS / nth; }

/* The first item that starts at or after byte b of the set */
static int64_t item_at_byte(const job_items *its, int n, int64_t b) {
    int64_t first = 0;
    for (int k = 0; k < n; k++) {
        int64_t job_bytes = its[k].n_items * its[k].item_bytes;
        if (b <= 0) return first;
        if (b < job_bytes) return first + (b + its[k].item_bytes - 1) / its[k].item_bytes;
        b -= job_bytes;
        first += its[k].n_items;
    }
    return first;
}

#ifndef LL_IDLE_FETCH
#define LL_IDLE_FETCH (256 << 10)
#endif
/* A thread done with its share of a decode set fetches its own first rows of the next
 * (the first product's) while it waits: the memory stays busy through the steps between
 * products, the other thread's last items and the barrier. */
static void fetch_own_items(ll_pool *pool, const ll_plan_set *next, int ith, int nth) {
    if (!next || nth == 1) return;
    /* the first product's tiles (what the plan knows of the set), from the first whole item
     * of the share on, as item_at_byte finds it */
    int64_t item = next->item_bytes, first_bytes = next->n_tiles * (int64_t)next->tile_bytes;
    int64_t start = (ith * next->own_bytes + item - 1) / item * item, end = (ith + 1) * next->own_bytes;
    if (end > first_bytes) end = first_bytes;
    if (start >= end) return;
    size_t bytes = (size_t)(end - start);
    ll_pool_fetch_while_idle(pool, ith, next->tiles + start, bytes < LL_IDLE_FETCH ? bytes : LL_IDLE_FETCH);
}

/* Prompt items one at a time. A thread computing a float weight's item holds the next
 * one it will compute (but for the last few of the set, which go to whoever is free), so
 * that the kernel fetches that item's rows meanwhile. */
static void prompt_items(matmul_set *s, const job_items *its, const int64_t *end, int64_t total, int nth, uint8_t *scratch) {
    int64_t cur = atomic_fetch_add_explicit(&s->next_item, 1, memory_order_relaxed), nxt;
    int k = 0;
    while (cur < total) {
        while (cur >= end[k]) k++;   /* items only grow */
        int ahead = s->jobs[k].gemm && atomic_load_explicit(&s->next_item, memory_order_relaxed) < total - nth;
        nxt = ahead ? atomic_fetch_add_explicit(&s->next_item, 1, memory_order_relaxed) : -1;
        const uint8_t *next = NULL;
        size_t next_bytes = 0;
        if (ahead && nxt < total) {
            int kn = k;
            while (nxt >= end[kn]) kn++;
            if (s->jobs[kn].gemm) next = item_rows(&s->jobs[kn], &its[kn], nxt - (end[kn] - its[kn].n_items), &next_bytes);
        }
        run_item(&s->jobs[k], &its[k], cur - (end[k] - its[k].n_items), scratch, next, next_bytes);
        cur = ahead ? nxt : atomic_fetch_add_explicit(&s->next_item, 1, memory_order_relaxed);
    }
}

/* Which thread computes an element, and in which item, never changes its bits. */
static void matmul_task(void *arg, int ith, int nth) {
    matmul_set *s = arg;
    const job_items *its = s->its;
    const int64_t *end = s->end, total = s->total;
    uint8_t *scratch = s->scratch + (size_t)ith * s->scratch_stride;
    if (!s->decode) {
        prompt_items(s, its, end, total, nth, scratch);
        return;
    }
    int k = 0;
    int64_t first = item_at_byte(its, s->n, ith * s->own_bytes), take = item_at_byte(its, s->n, (ith + 1) * s->own_bytes) - first;
    for (;;) {
        for (int64_t item = first; item < first + take; item++) {
            while (item >= end[k]) k++;   /* items only grow */
            run_item(&s->jobs[k], &its[k], item - (end[k] - its[k].n_items), scratch, NULL, 0);
        }
        first = atomic_load_explicit(&s->next_item, memory_order_relaxed);
        do {
            if (first >= total) {
                fetch_own_items(s->pool, s->next, ith, nth);
                return;
            }
            take = grab_items(total - first, nth);
        } while (!atomic_compare_exchange_weak_explicit(&s->next_item, &first, first + take, memory_order_relaxed,
                                                        memory_order_relaxed));
    }
}

/* Notes a decode set in the context's plan and returns the set the token before ran
 * after it, if that one is the same each token. */
static const ll_plan_set *plan_step(struct llambda_context *c, const matmul_job *j0, const job_items *it0, int64_t own) {
    if (!c->plan || c->plan_at < 0 || c->plan_at >= LL_PLAN_SETS) return NULL;
    const ll_weight *w = j0->w;
    ll_plan_set now = {w->packed ? w->packed : w->data, w->packed ? w->packed_tile : ROW_TILE * w->row_bytes,
                       w->rows / ROW_TILE, it0->item_bytes, own, 0};
    ll_plan_set *at = &c->plan[c->plan_at++];
    now.stable = at->tiles == now.tiles && at->tile_bytes == now.tile_bytes && at->own_bytes == own;
    *at = now;
    const ll_plan_set *next = c->plan_at < c->plan_len ? &c->plan[c->plan_at] : &c->plan[0];
    return next->stable ? next : NULL;
}

/* One pool task for the gathered products. */
static void run_set(struct llambda_context *c, const matmul_job *jobs, int n) {
    job_items its[MAX_JOBS];
    int64_t end[MAX_JOBS], total = 0, total_bytes = 0;
    int decode = 1, nth = ll_pool_size(c->pool);
    for (int k = 0; k < n; k++) {
        its[k] = items_of(&jobs[k]);
        end[k] = total += its[k].n_items;
        total_bytes += its[k].n_items * its[k].item_bytes;
        decode &= jobs[k].n_tok == 1;
    }
    matmul_set set = {.jobs = jobs, .n = n, .decode = decode, .its = its, .end = end, .total = total, .pool = c->pool,
                      .scratch = c->gemm_scratch, .scratch_stride = c->gemm_scratch_stride, .next_item = 0};
    if (decode) {
        set.own_bytes = own_bytes(total_bytes, nth);
        atomic_init(&set.next_item, (long)item_at_byte(its, n, set.own_bytes * nth));
        set.next = plan_step(c, &jobs[0], &its[0], set.own_bytes);
    }
    /* a decode set of a megabyte or more times the weight stream (ll_note_stream_rate) */
    int timed = decode && total_bytes >= (1 << 20);
    double t0 = timed ? ll_time_seconds() : 0;
    ll_pool_run(c->pool, matmul_task, &set);
    if (timed) ll_note_stream_rate(total_bytes, ll_time_seconds() - t0, nth);
}

/* Activation rows converted to a product's input format, on every pool thread for a
 * prompt (ll_for_tokens: each row converted alone, so which thread does it never changes
 * a bit). A prompt's conversions ran on the calling thread alone before: 1.75% of the
 * samples of a llama-3.2-1b Q4_K_M pp512, with the other thread waiting. */
typedef struct { ll_from_float_fn conv; const float *x; int64_t cols; uint8_t *dst; size_t row; } convert_args;

static void convert_range(void *arg, int t0, int t1) {
    const convert_args *j = arg;
    for (int t = t0; t < t1; t++) j->conv(j->x + (size_t)t * (size_t)j->cols, j->dst + (size_t)t * j->row, j->cols);
}

/* y_k = W_k · x_k for each product; activations converted to each weight's vec_dot_type
 * once (products that share an input and a type share the conversion). No input may be
 * the output of another product of the same call. When the jobs or the scratch run out,
 * what is gathered runs first and the rest follows. */
void ll_matmul_many(struct llambda_context *c, const ll_matmul_op *ops, int n_ops) {
    const ll_kernels *k = ll_kernels_get();
    matmul_job jobs[MAX_JOBS];
    const float *job_x[MAX_JOBS];
    int job_vdt[MAX_JOBS];
    size_t cap = (size_t)c->n_batch * c->qbuf_row, used = 0;
    int n = 0;
    for (int i = 0; i < n_ops; i++) {
        const ll_weight *w = ops[i].w;
        if (w->bind && ll_bindings_run(w, ops[i].x, ops[i].n_tok, ops[i].y)) continue;   /* an accelerator took it */
        /* prompts of float weights: the prompt kernel and the activation format it takes */
        ll_gemm_fn gemm = ops[i].n_tok > 1 && ll_gemm_scratch_bytes(w->cols) <= c->gemm_scratch_stride ? k->gemm[w->type] : NULL;
        int vdt = gemm ? k->gemm_act[w->type] : ll_vec_dot_type(w->type);
        size_t xq_row = (size_t)ll_act_row_bytes(vdt, w->cols), bytes = xq_row * (size_t)ops[i].n_tok;
        const uint8_t *xq = NULL;
        for (int p = 0; p < n && !xq; p++)   /* the same input already converted to the same type */
            if (job_x[p] == ops[i].x && jobs[p].n_tok == ops[i].n_tok && job_vdt[p] == vdt && jobs[p].w->cols == w->cols)
                xq = jobs[p].xq;
        if (n == MAX_JOBS || (!xq && used + bytes > cap)) {   /* jobs or scratch full: run what we have */
            if (n) run_set(c, jobs, n);
            n = 0; used = 0;
            xq = NULL;   /* the scratch is reused: convert again */
        }
        if (!xq) {
            uint8_t *dst = c->qbuf + used;
            convert_args conv = {k->from_float[vdt], ops[i].x, w->cols, dst, xq_row};
            ll_for_tokens(c, ops[i].n_tok, convert_range, &conv);
            xq = dst;
            used += (bytes + 63) & ~(size_t)63;
        }
        job_x[n] = ops[i].x;
        job_vdt[n] = vdt;
        jobs[n++] = (matmul_job){.w = w, .xq = xq, .xq_row = xq_row, .n_tok = ops[i].n_tok, .y = ops[i].y,
                                 .dot = k->vec_dot[w->type], .dot8 = k->vec_dot_x8[w->type], .dot8t4 = k->vec_dot_x8_t4[w->type],
                                 .dotp = w->packed ? k->dot_packed[w->type] : NULL,
                                 /* pairs for prompts only: at one token the 256-bit tile streams weights
                                  * from memory as fast or faster (measured on 220-330 MB Q6_K heads, one
                                  * and two threads, with the pair's blocks apart or interleaved) */
                                 .dotp2 = w->packed && ops[i].n_tok > 1 ? k->dot_packed2[w->type] : NULL,
                                 .gemm = gemm, .gemm_tiles = gemm ? k->gemm_tiles[w->type] : NULL};
    }
    if (n) run_set(c, jobs, n);
}

void ll_matmul(struct llambda_context *c, const ll_weight *w, const float *x, int n_tok, float *y) {
    ll_matmul_op op = {w, x, n_tok, y};
    ll_matmul_many(c, &op, 1);
}

void ll_add_bias(float *y, const ll_weight *b, int n_tok) {
    if (!b->data) return;
    const float *bias = (const float *)b->data;
    for (int t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < b->cols; i++) y[(size_t)t * (size_t)b->cols + (size_t)i] += bias[i];
}

void ll_embed(const ll_weight *emb, int32_t tok, float *out) {
    llambda_type_get(emb->type)->dequantize_row(emb->data + (size_t)tok * emb->row_bytes, out, emb->cols);
}

ll_weight ll_weight_matrix(const ll_weight *w, int64_t e) {
    ll_weight v = *w;
    v.data = w->data + (size_t)e * (size_t)w->rows * w->row_bytes;
    if (w->packed) v.packed = w->packed + (size_t)e * (size_t)(w->rows / 8) * w->packed_tile;
    v.n_mat = 1;
    v.bind = w->bind ? w->bind + e : NULL;   /* each matrix of a stack has its own bindings */
    return v;
}
