/* KV cache writes and causal grouped-query attention. K and V are stored (f16 by
 * default, rounded after RoPE) before attention runs, so a token attends to its own
 * rounded K/V, as in llama.cpp. Each (token, head) is computed by one thread in one
 * fixed order, so the result does not depend on batch size or thread count. */
#include "../model.h"

/* Cell of position pos in a layer's cache: a ring for sliding layers. */
static inline size_t cell_of(const ll_kv_cache *kv, int layer, int pos) { return (size_t)(pos % kv->cells[layer]); }

/* The cache is head-major: KV head g's rows (head dim elements a cell) lie one after
 * another, so a head group's attention reads one contiguous stream. Stored by cell
 * ([cell][all heads]) a group read 128 bytes of every KiB (llama-3.2-1b: 8 KV heads of
 * 64), which the hardware prefetcher follows poorly. llama-3.2-1b Q4_K_M, two threads, at
 * 3072 tokens of context, three alternations, the attention calls timed alone: a decode
 * layer's 469 / 457 / 472 -> 338 / 321 / 412 us (a token 23.9 / 21.8 / 32.0 -> 20.0 / 19.9
 * / 28.8 ms); all of a 3072 + 1536-token prefill's 16.2 / 17.2 / 18.2 -> 15.9 / 14.6 / 16.9 s. */
static inline size_t head_dim_of(const struct llambda_context *c, int layer) {
    return (size_t)c->kv.width[layer] / (size_t)c->m->hp.n_head_kv_l[layer];
}
static inline size_t head_rows(const struct llambda_context *c, int layer, int g) {
    return (size_t)g * (size_t)c->kv.cells[layer] * head_dim_of(c, layer);
}

void ll_kv_store(struct llambda_context *c, int layer, const float *k, const float *v, int n_tok, int pos0) {
    ll_kv_cache *kv = &c->kv;
    int W = kv->width[layer], Hkv = c->m->hp.n_head_kv_l[layer];
    size_t D = head_dim_of(c, layer);
    const ll_kernels *kn = ll_kernels_get();
    for (int t = 0; t < n_tok; t++) {
        size_t cell = cell_of(kv, layer, pos0 + t);
        const float *kt = k + (size_t)t * W, *vt = v + (size_t)t * W;
        for (int g = 0; g < Hkv; g++) {
            size_t at = head_rows(c, layer, g) + cell * D;
            if (kv->type == LLAMBDA_KV_F16) {
                kn->from_float[LLAMBDA_TYPE_F16](kt + g * D, (uint16_t *)kv->k[layer] + at, (int64_t)D);
                kn->from_float[LLAMBDA_TYPE_F16](vt + g * D, (uint16_t *)kv->v[layer] + at, (int64_t)D);
            } else {
                memcpy((float *)kv->k[layer] + at, kt + g * D, D * 4);
                memcpy((float *)kv->v[layer] + at, vt + g * D, D * 4);
            }
        }
    }
}

typedef struct attn_job {
    struct llambda_context *c;
    int layer, n_tok, pos0;
    const float *q;
    float *out;
} attn_job;

static void attend_f32(const float *q, const float *K, const float *V, int W, int D, int first, int n_cells, int ring,
                       float scale, float *o) {
    float M = -INFINITY, S = 0;
    memset(o, 0, (size_t)D * sizeof *o);
    for (int i = 0; i < n_cells; i++) {
        size_t cell = (size_t)ll_ring_cell(first + i, ring);
        const float *k = K + cell * W, *v = V + cell * W;
        float s = 0, ms = 1.0f, vs = 1.0f;
        for (int i = 0; i < D; i++) s += q[i] * k[i];
        s *= scale;
        if (s > M) { float Mold = M; M = s; ms = expf(Mold - M); for (int i = 0; i < D; i++) o[i] *= ms; }
        else vs = expf(s - M);
        for (int i = 0; i < D; i++) o[i] += v[i] * vs;
        S = S * ms + vs;
    }
    float inv = S == 0 ? 0 : 1.0f / S;
    for (int i = 0; i < D; i++) o[i] *= inv;
}

static void attn_task(void *arg, int ith, int nth) {
    attn_job *j = arg;
    struct llambda_context *c = j->c;
    const ll_hparams *h = &c->m->hp;
    int l = j->layer, src = h->kv_src_l[l];
    int H = h->n_head, D = h->head_dim_l[l], G = h->n_head / h->n_head_kv_l[l], ring = c->kv.cells[src];
    int row = (int)head_dim_of(c, src);   /* elements from one cell's row to the next */
    float scale = h->attn_scale > 0 ? h->attn_scale : 1.0f / sqrtf((float)D);
    /* heads are taken HG at a time, all of one KV head: its K and V rows are read once */
    int HG = G % 4 == 0 ? 4 : G % 3 == 0 ? 3 : G % 2 == 0 ? 2 : 1;
    /* per-thread scratch: the HG queries in f16 and one f16 accumulator */
    uint16_t *q16 = (uint16_t *)(c->scores + (size_t)ith * (size_t)c->scores_stride), *acc16 = q16 + (size_t)HG * D;
    const ll_kernels *k = ll_kernels_get();
    int groups = H / HG, total = j->n_tok * groups;
    for (int idx = ith; idx < total; idx += nth) {
        int t = idx / groups, hd0 = idx % groups * HG, g = hd0 / G, pos = j->pos0 + t;
        /* visible keys: positions first..pos (the last n_swa on sliding layers), oldest first */
        int first = h->swa_l[l] && pos + 1 > h->n_swa ? pos + 1 - h->n_swa : 0, n_cells = pos + 1 - first;
        const float *q = j->q + (size_t)t * (size_t)(H * D) + (size_t)hd0 * D;
        float *o = j->out + (size_t)t * (size_t)(H * D) + (size_t)hd0 * D;
        size_t rows = head_rows(c, src, g);   /* where KV head g's rows start */
        if (c->kv.type == LLAMBDA_KV_F16) {
            /* Q rounded to f16, as llama.cpp's single-chunk path does */
            k->from_float[LLAMBDA_TYPE_F16](q, q16, (int64_t)HG * D);
            k->attend_f16(q16, (const uint16_t *)c->kv.k[src] + rows, (const uint16_t *)c->kv.v[src] + rows, row, D, HG, first,
                          n_cells, ring, scale, acc16, o);
        } else
            for (int i = 0; i < HG; i++)
                attend_f32(q + (size_t)i * D, (const float *)c->kv.k[src] + rows, (const float *)c->kv.v[src] + rows, row, D,
                           first, n_cells, ring, scale, o + (size_t)i * D);
    }
}

void ll_attention(struct llambda_context *c, int layer, const float *q, int n_tok, int pos0, float *out) {
    attn_job j = {c, layer, n_tok, pos0, q, out};
    ll_pool_run(c->pool, attn_task, &j);
}
