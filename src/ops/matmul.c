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
    ll_dot_packed_fn dotp;      /* for the weight's repacked tiles, when it has them */
    /* work items are handed out as threads ask: the fast finish the rest. On its own cache
     * line, so the other threads' grabs do not evict the fields above. */
    _Alignas(64) atomic_long next_item;
} matmul_job;

#define ROW_TILE 8
#define TILES_PER_GRAB 4    /* decode: 32 rows per grab */
#define TOK_CHUNK 64        /* prefill: tokens per work item (their activations stay in L2) */
#define PREFILL_TILES 8     /* prefill: row tiles per work item (their weights stay in L1/L2) */

/* The 8-row tile r0..r1 against tokens t0..t1, through the widest kernel that fits. */
static void matmul_tile(const matmul_job *j, int64_t r0, int64_t r1, int t0, int t1) {
    int64_t rows = j->w->rows;
    const uint8_t *wt = j->w->data + (size_t)r0 * j->w->row_bytes;
    int t = t0;
    if (j->dotp && r1 - r0 == ROW_TILE && r0 / ROW_TILE < rows / ROW_TILE) {
        const uint8_t *tile = j->w->packed + (size_t)(r0 / ROW_TILE) * j->w->packed_tile;
        for (; t < t1; t += 4)
            j->dotp(j->w->cols, j->y + (size_t)t * (size_t)rows + (size_t)r0, (size_t)rows, tile,
                    j->xq + (size_t)t * j->xq_row, j->xq_row, t1 - t < 4 ? t1 - t : 4);
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

/* Work items are handed out as threads ask: a thread slowed by the other load on the
 * machine then takes fewer items instead of holding the others at the barrier. A decode
 * item is a run of row tiles; a prefill item is a block of row tiles times a chunk of
 * tokens, chunks outermost, so one chunk's activations stay in cache while the rows stream
 * past. Which thread computes an element, and in which item, never changes its bits. */
static void matmul_task(void *arg, int ith, int nth) {
    (void)ith;
    matmul_job *j = arg;
    int64_t rows = j->w->rows;
    int64_t n_tiles = (rows + ROW_TILE - 1) / ROW_TILE;
    int64_t grab = j->n_tok == 1 ? TILES_PER_GRAB : PREFILL_TILES;
    /* tall matrices: about 16 grabs per thread, enough to even out, few enough to be cheap */
    if (j->n_tok == 1 && n_tiles / (16 * nth) > grab) grab = n_tiles / (16 * nth);
    int64_t n_rb = (n_tiles + grab - 1) / grab;
    int64_t n_items = n_rb * (((int64_t)j->n_tok + TOK_CHUNK - 1) / TOK_CHUNK);
    for (;;) {
        int64_t it = atomic_fetch_add_explicit(&j->next_item, 1, memory_order_relaxed);
        if (it >= n_items) break;
        int t0 = (int)(it / n_rb) * TOK_CHUNK, t1 = t0 + TOK_CHUNK < j->n_tok ? t0 + TOK_CHUNK : j->n_tok;
        int64_t tile0 = (it % n_rb) * grab, tile1 = tile0 + grab < n_tiles ? tile0 + grab : n_tiles;
        for (int64_t tile = tile0; tile < tile1; tile++) {
            int64_t r0 = tile * ROW_TILE, r1 = r0 + ROW_TILE < rows ? r0 + ROW_TILE : rows;
            matmul_tile(j, r0, r1, t0, t1);
        }
    }
}

void ll_matmul(struct llambda_context *c, const ll_weight *w, const float *x, int n_tok, float *y) {
    if (w->bind && ll_bindings_run(w, x, n_tok, y)) return;   /* an accelerator took it */
    const ll_kernels *k = ll_kernels_get();
    int vdt = ll_vec_dot_type(w->type);
    size_t xq_row = (size_t)llambda_type_row_bytes(vdt, w->cols);
    for (int t = 0; t < n_tok; t++) k->from_float[vdt](x + (size_t)t * (size_t)w->cols, c->qbuf + (size_t)t * xq_row, w->cols);
    matmul_job j = {.w = w, .xq = c->qbuf, .xq_row = xq_row, .n_tok = n_tok, .y = y, .dot = k->vec_dot[w->type],
                    .dot8 = k->vec_dot_x8[w->type], .dot8t4 = k->vec_dot_x8_t4[w->type],
                    .dotp = w->packed ? k->dot_packed[w->type] : NULL, .next_item = 0};
    ll_pool_run(c->pool, matmul_task, &j);
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
