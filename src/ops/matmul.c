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
    atomic_long next_tile;      /* tiles are handed out as threads ask: the fast finish the rest */
} matmul_job;

#define ROW_TILE 8

#define TILES_PER_GRAB 4

/* Tiles of rows are handed out as threads ask, for one token as for a batch: a thread
 * slowed by the other load on the machine then takes fewer tiles instead of holding the
 * others at the barrier. Which thread computes a row never changes its bits. */
static void matmul_task(void *arg, int ith, int nth) {
    (void)ith; (void)nth;
    matmul_job *j = arg;
    int64_t rows = j->w->rows;
    int64_t n_tiles = (rows + ROW_TILE - 1) / ROW_TILE;
    for (;;) {
    int64_t t0 = atomic_fetch_add_explicit(&j->next_tile, TILES_PER_GRAB, memory_order_relaxed);
    if (t0 >= n_tiles) break;
    int64_t t1 = t0 + TILES_PER_GRAB < n_tiles ? t0 + TILES_PER_GRAB : n_tiles;
    for (int64_t tile = t0; tile < t1; tile++) {
        int64_t r0 = tile * ROW_TILE, r1 = r0 + ROW_TILE < rows ? r0 + ROW_TILE : rows;
        int t = 0;
        if (j->dot8t4 && r1 - r0 == 8)
            for (; t + 4 <= j->n_tok; t += 4)
                j->dot8t4(j->w->cols, j->y + (size_t)t * (size_t)rows + (size_t)r0, (size_t)rows,
                          j->w->data + (size_t)r0 * j->w->row_bytes, j->w->row_bytes, j->xq + (size_t)t * j->xq_row, j->xq_row);
        for (; t < j->n_tok; t++) {
            const uint8_t *xq = j->xq + (size_t)t * j->xq_row;
            float *yt = j->y + (size_t)t * (size_t)rows;
            if (j->dot8 && r1 - r0 == 8) {
                j->dot8(j->w->cols, &yt[r0], j->w->data + (size_t)r0 * j->w->row_bytes, j->w->row_bytes, xq);
                continue;
            }
            for (int64_t r = r0; r < r1; r++)
                j->dot(j->w->cols, &yt[r], j->w->data + (size_t)r * j->w->row_bytes, xq);
        }
    }
    }
}

void ll_matmul(struct llambda_context *c, const ll_weight *w, const float *x, int n_tok, float *y) {
    if (w->bind && ll_bindings_run(w, x, n_tok, y)) return;   /* an accelerator took it */
    const ll_kernels *k = ll_kernels_get();
    int vdt = ll_vec_dot_type(w->type);
    size_t xq_row = (size_t)llambda_type_row_bytes(vdt, w->cols);
    for (int t = 0; t < n_tok; t++) k->from_float[vdt](x + (size_t)t * (size_t)w->cols, c->qbuf + (size_t)t * xq_row, w->cols);
    matmul_job j = {w, c->qbuf, xq_row, n_tok, y, k->vec_dot[w->type], k->vec_dot_x8[w->type], k->vec_dot_x8_t4[w->type], 0};
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
    v.n_mat = 1;
    v.bind = w->bind ? w->bind + e : NULL;   /* each matrix of a stack has its own bindings */
    return v;
}
