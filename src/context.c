/* Inference contexts: each owns its KV cache, scratch, thread pool, sampler and
 * position; the model is shared read-only. All buffers are sized at creation, so
 * evaluation and decoding allocate nothing (except growing the all-rows logits buffer
 * the first time a longer batch asks for every row). */
#include "model.h"
#include "backends/backend.h"
#include <stdlib.h>

llambda_sampler_params llambda_sampler_default_params(void) {
    llambda_sampler_params p = {0};
    p.temperature = 0.8f; p.top_k = 40; p.top_p = 0.95f; p.min_p = 0.05f;
    p.repeat_penalty = 1.0f; p.repeat_last_n = 64; p.seed = 0xFFFFFFFFu;
    return p;
}

llambda_context_params llambda_context_default_params(void) {
    llambda_context_params p = {0};
    p.n_batch = 512;
    p.logits = LLAMBDA_LOGITS_LAST;
    p.kv_type = LLAMBDA_KV_F16;
    p.sampling = llambda_sampler_default_params();
    return p;
}

llambda_status ll_sampler_init(ll_sampler *s, int n_vocab, const llambda_sampler_params *p);
void ll_sampler_free(ll_sampler *s);
void ll_sampler_reset(ll_sampler *s);

static void *xcalloc(size_t n, size_t sz, int *fail) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) *fail = 1;
    return p;
}

/* Zeroed by writing, so the pages are in place before decoding touches them, and starting
 * on a cache line: the kernels stream state and inputs in 32- and 64-byte vectors, and
 * calloc's 16-byte offset split every other one across two lines (a DeltaNet head's update
 * from cache: 3.7 us aligned, 4.6-5.5 at +16). */
static void *xcalloc_lines(size_t n, size_t sz, int *fail) {
    void *p = NULL;
    size_t bytes = (n ? n : 1) * sz;
    if (n && bytes / n != sz) { *fail = 1; return NULL; }
    if (posix_memalign(&p, 64, (bytes + 63) & ~(size_t)63)) { *fail = 1; return NULL; }
    return memset(p, 0, bytes);
}

llambda_status llambda_context_create(llambda_model *m, const llambda_context_params *pp, llambda_context **out) {
    *out = NULL;
    llambda_context_params p = pp ? *pp : llambda_context_default_params();
    const ll_hparams *h = &m->hp;
    if (m->vocab_only) return ll_error(LLAMBDA_ERR_ARG, "context: the model was loaded vocab_only");
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_threads < 0) return ll_error(LLAMBDA_ERR_ARG, "context: negative size");
    if (p.kv_type != LLAMBDA_KV_F16 && p.kv_type != LLAMBDA_KV_F32) return ll_error(LLAMBDA_ERR_ARG, "context: unknown KV cache type %d", p.kv_type);
    int n_ctx = p.n_ctx ? p.n_ctx : (h->n_ctx_train > 0 && h->n_ctx_train < 4096 ? h->n_ctx_train : 4096);
    if (n_ctx > (1 << 22)) return ll_error(LLAMBDA_ERR_ARG, "context: n_ctx %d is too large", n_ctx);
    int n_batch = p.n_batch ? p.n_batch : 512;
    if (n_batch > n_ctx) n_batch = n_ctx;
    int n_threads = p.n_threads ? p.n_threads : m->n_threads;
    llambda_context *c = calloc(1, sizeof *c);
    if (!c) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    c->m = m; c->p = p; c->n_ctx = n_ctx; c->n_batch = n_batch;
    int fail = 0;
    /* widths: the largest any layer needs */
    int d = h->n_embd, qd = 0, kvd = 0, ff = 0, rot = 0, hd = 0;
    for (int l = 0; l < h->n_layer; l++) {
        int q = h->n_head * h->head_dim_l[l], kv = h->n_head_kv_l[l] * h->head_dim_l[l];
        if (q > qd) qd = q;
        if (kv > kvd) kvd = kv;
        if (h->n_ff_l[l] > ff) ff = h->n_ff_l[l];
        if (h->n_rot_l[l] > rot) rot = h->n_rot_l[l];
        if (h->head_dim_l[l] > hd) hd = h->head_dim_l[l];
    }
    size_t nb = (size_t)n_batch;
    size_t esz = p.kv_type == LLAMBDA_KV_F16 ? 2 : 4;
    c->kv.type = p.kv_type; c->kv.n_ctx = n_ctx;
    c->kv.k = xcalloc((size_t)h->n_layer, sizeof *c->kv.k, &fail);
    c->kv.v = xcalloc((size_t)h->n_layer, sizeof *c->kv.v, &fail);
    c->kv.width = xcalloc((size_t)h->n_layer, sizeof *c->kv.width, &fail);
    c->kv.cells = xcalloc((size_t)h->n_layer, sizeof *c->kv.cells, &fail);
    for (int l = 0; !fail && l < h->n_layer; l++) {
        c->kv.width[l] = h->n_head_kv_l[l] * h->head_dim_l[l];
        if (h->kv_src_l[l] != l) continue;   /* reads another layer's cache */
        /* a sliding layer keeps its window plus one batch: a batch writes all its K/V
         * before attending, and its first token still needs the n_swa-1 keys before it */
        int cells = h->swa_l[l] && h->n_swa + n_batch - 1 < n_ctx ? h->n_swa + n_batch - 1 : n_ctx;
        c->kv.cells[l] = cells;
        /* written through now, as llama.cpp clears its cache: calloc's pages would otherwise
         * fault in during decoding, a page every few tokens per layer (a llama-3.2-1b token
         * spent 10-12 us of each layer's K/V store so, 1.5 us with the pages in place) */
        c->kv.k[l] = xcalloc_lines((size_t)cells * (size_t)c->kv.width[l], esz, &fail);
        c->kv.v[l] = xcalloc_lines((size_t)cells * (size_t)c->kv.width[l], esz, &fail);
    }
    for (int l = 0; l < h->n_layer; l++) {   /* shared layers see their source's geometry */
        int src = h->kv_src_l[l];
        if (src >= 0 && src != l) c->kv.cells[l] = c->kv.cells[src];
    }
    /* recurrent state (F32, zeroed) of the layers that declare one */
    int ssm_w = 0, any_rs = 0;
    for (int l = 0; l < h->n_layer; l++) any_rs |= h->rs_state_l[l] > 0;
    if (h->ssm_d_inner > 0 && h->kind_l[0] != LL_LAYER_DELTANET)
        ssm_w = 2 * h->ssm_d_inner + 2 * h->ssm_n_group * h->ssm_d_state + h->ssm_n_head;
    if (any_rs) {
        c->conv_state = xcalloc((size_t)h->n_layer, sizeof *c->conv_state, &fail);
        c->ssm_state = xcalloc((size_t)h->n_layer, sizeof *c->ssm_state, &fail);
        for (int l = 0; !fail && l < h->n_layer; l++) {
            if (h->rs_state_l[l] <= 0) continue;
            c->conv_state[l] = xcalloc_lines((size_t)h->rs_conv_l[l] + 1, 4, &fail);
            c->ssm_state[l] = xcalloc_lines((size_t)h->rs_state_l[l], 4, &fail);
        }
    }
    if (h->arch_scratch > 0) c->arch_buf = xcalloc_lines(nb * (size_t)h->arch_scratch, 4, &fail);
    int widest = d > ff ? d : ff;
    if (qd > widest) widest = qd;
    if (ssm_w > widest) widest = ssm_w;
    if (h->min_width > widest) widest = h->min_width;
    if (h->n_ff_exp * 2 > widest) widest = h->n_ff_exp * 2;
    c->x = xcalloc(nb * (size_t)d, 4, &fail);
    c->xb = xcalloc_lines(nb * (size_t)widest, 4, &fail);
    c->xb2 = xcalloc(nb * (size_t)(d > qd ? d : qd), 4, &fail);
    c->q = xcalloc(nb * (size_t)qd, 4, &fail);
    c->k = xcalloc(nb * (size_t)kvd, 4, &fail);
    c->v = xcalloc(nb * (size_t)kvd, 4, &fail);
    int ssm_ch = h->ssm_d_inner > 0 ? h->ssm_d_inner + 2 * h->ssm_n_group * h->ssm_d_state : 0;
    c->att = xcalloc_lines(nb * (size_t)(qd > ssm_ch ? qd : ssm_ch), 4, &fail);   /* also one token's conv output */
    c->hb = xcalloc_lines(nb * (size_t)widest, 4, &fail);
    c->hb2 = xcalloc_lines(nb * (size_t)widest, 4, &fail);
    /* per-layer inputs: the token part, then the projection part */
    if (h->n_embd_per_layer > 0) c->ple = xcalloc(2 * nb * (size_t)h->n_layer * (size_t)h->n_embd_per_layer, 4, &fail);
    if (h->n_expert > 0) {
        size_t X = (size_t)h->n_expert, K = (size_t)h->n_expert_used, FX = (size_t)h->n_ff_exp;
        c->moe_logits = xcalloc(nb * X, 4, &fail);
        c->moe_probs = xcalloc(nb * X, 4, &fail);
        c->moe_w = xcalloc(nb * K, 4, &fail);
        c->moe_sel = xcalloc(nb * K, sizeof *c->moe_sel, &fail);
        c->moe_rows = xcalloc(nb * K, sizeof *c->moe_rows, &fail);
        c->moe_out = xcalloc(nb * K * (size_t)d, 4, &fail);
        c->moe_in = xcalloc(nb * K * (size_t)d, 4, &fail);
        c->moe_h = xcalloc(nb * K * 2 * FX, 4, &fail);
        c->moe_u = xcalloc(nb * K * FX, 4, &fail);
        c->moe_d = xcalloc(nb * K * (size_t)d, 4, &fail);
    }
    c->rope_cs = xcalloc(nb * (size_t)rot, 4, &fail);
    c->rope_cs2 = xcalloc(nb * (size_t)rot, 4, &fail);
    int qrow = widest > h->n_layer * h->n_embd_per_layer ? widest : h->n_layer * h->n_embd_per_layer;
    c->qbuf_row = (size_t)qrow * 4 + 512;   /* the widest activation row in any vec_dot type */
    c->qbuf = xcalloc(nb, c->qbuf_row, &fail);
    c->want = xcalloc(nb, 1, &fail);
    c->plan = xcalloc(LL_PLAN_SETS, sizeof *c->plan, &fail);
    c->plan_at = -1;
    c->n_logits_rows = 1;
    c->logits = xcalloc((size_t)h->n_vocab, 4, &fail);
    if (!fail && p.shared_pool) {
        pthread_mutex_lock(&m->pool_once);
        if (!m->shared_pool) m->shared_pool = ll_pool_create(m->n_threads);
        c->pool = m->shared_pool;
        pthread_mutex_unlock(&m->pool_once);
        if (!c->pool) fail = 1;
    } else if (!fail) {
        c->pool = ll_pool_create(n_threads);
        c->owns_pool = c->pool != NULL;
        if (!c->pool) fail = 1;
    }
    c->scores_stride = (size_t)hd * 5 / 2 + 16;  /* f16 queries of up to 4 heads and an accumulator */
    if (!fail) c->scores = xcalloc((size_t)ll_pool_size(c->pool) * c->scores_stride, 4, &fail);
    c->gemm_scratch_stride = ll_gemm_scratch_bytes(qrow);
    if (!fail) c->gemm_scratch = xcalloc((size_t)ll_pool_size(c->pool), c->gemm_scratch_stride, &fail);
    if (!fail && ll_sampler_init(&c->smp, h->n_vocab, &p.sampling)) fail = 1;
    if (fail) { llambda_context_free(c); return ll_error(LLAMBDA_ERR_NOMEM, "context: out of memory (n_ctx %d)", n_ctx); }
    *out = c;
    return LLAMBDA_OK;
}

void llambda_context_free(llambda_context *c) {
    if (!c) return;
    for (int l = 0; c->kv.k && l < c->m->hp.n_layer; l++) free(c->kv.k[l]);
    for (int l = 0; c->kv.v && l < c->m->hp.n_layer; l++) free(c->kv.v[l]);
    free(c->kv.k); free(c->kv.v); free(c->kv.width); free(c->kv.cells); free(c->ple); free(c->rope_cs2);
    free(c->moe_logits); free(c->moe_probs); free(c->moe_w); free(c->moe_sel); free(c->moe_rows);
    free(c->moe_out); free(c->moe_in); free(c->moe_h); free(c->moe_u); free(c->moe_d);
    for (int l = 0; c->conv_state && l < c->m->hp.n_layer; l++) { free(c->conv_state[l]); free(c->ssm_state[l]); }
    free(c->conv_state); free(c->ssm_state); free(c->arch_buf);
    free(c->x); free(c->xb); free(c->xb2); free(c->q); free(c->k); free(c->v); free(c->att);
    free(c->hb); free(c->hb2); free(c->rope_cs); free(c->scores); free(c->qbuf); free(c->gemm_scratch); free(c->want); free(c->logits);
    free(c->plan);
    if (c->owns_pool) ll_pool_free(c->pool);
    ll_sampler_free(&c->smp);
    free(c);
}

/* A fresh sequence: recurrent state back to zeros. */
static void clear_recurrent(llambda_context *c) {
    const ll_hparams *h = &c->m->hp;
    if (!c->conv_state) return;
    for (int l = 0; l < h->n_layer; l++) {
        if (!c->conv_state[l]) continue;
        memset(c->conv_state[l], 0, (size_t)h->rs_conv_l[l] * 4);
        memset(c->ssm_state[l], 0, (size_t)h->rs_state_l[l] * 4);
    }
}

void llambda_context_reset(llambda_context *c) {
    clear_recurrent(c);
    c->pos = 0;
    c->last_eval_n = 0;
    ll_sampler_reset(&c->smp);
}

int llambda_context_n_ctx(const llambda_context *c) { return c->n_ctx; }

uint64_t llambda_context_state_bytes(const llambda_context *c) {
    uint64_t total = 0;
    for (int l = 0; c->conv_state && l < c->m->hp.n_layer; l++)
        if (c->conv_state[l]) total += 4ull * ((uint64_t)c->m->hp.rs_conv_l[l] + (uint64_t)c->m->hp.rs_state_l[l]);
    return total;
}
int llambda_context_pos(const llambda_context *c) { return c->pos; }
int llambda_context_n_threads(const llambda_context *c) { return ll_pool_size(c->pool); }

llambda_status llambda_context_truncate(llambda_context *c, int pos) {
    if (pos < 0 || pos > c->pos) return ll_error(LLAMBDA_ERR_ARG, "truncate: position %d outside 0..%d", pos, c->pos);
    /* a recurrent state holds only the present: it can restart, not rewind */
    if (c->conv_state && pos != c->pos && pos != 0)
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "truncate: %s keeps a recurrent state, which cannot rewind to position %d (only to 0)",
                        c->m->arch_name, pos);
    if (c->conv_state && pos == 0) clear_recurrent(c);
    c->pos = pos;
    c->last_eval_n = 0;
    return LLAMBDA_OK;
}

uint64_t llambda_context_kv_bytes(const llambda_context *c) {
    size_t esz = c->kv.type == LLAMBDA_KV_F16 ? 2 : 4;
    uint64_t total = 0;
    for (int l = 0; l < c->m->hp.n_layer; l++)
        if (c->kv.k[l]) total += 2ull * (uint64_t)c->kv.cells[l] * (uint64_t)c->kv.width[l] * esz;
    return total;
}

/* Guard against use from two threads at once. */
int ll_enter(llambda_context *c) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&c->busy, &expected, 1)) {
        ll_error(LLAMBDA_ERR_BUSY, "context is in use by another thread");
        return -1;
    }
    return 0;
}
void ll_leave(llambda_context *c) { atomic_store(&c->busy, 0); }

llambda_status ll_eval(llambda_context *c, const int32_t *tokens, int n) {
    const llambda_model *m = c->m;
    if (n <= 0) return ll_error(LLAMBDA_ERR_ARG, "eval: no tokens");
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return ll_error(LLAMBDA_ERR_ARG, "eval: token %d at index %d is outside the vocabulary (%d)", tokens[i], i, m->hp.n_vocab);
    if (c->pos + n > c->n_ctx)
        return ll_error(LLAMBDA_ERR_CONTEXT_FULL, "context full: %d tokens at position %d exceed the context of %d", n, c->pos, c->n_ctx);
    int all = c->p.logits == LLAMBDA_LOGITS_ALL, none = c->p.logits == LLAMBDA_LOGITS_NONE;
    if (all && n > c->n_logits_rows) {
        float *nl = realloc(c->logits, (size_t)n * (size_t)m->hp.n_vocab * 4);
        if (!nl) return ll_error(LLAMBDA_ERR_NOMEM, "eval: out of memory for %d logits rows", n);
        c->logits = nl;
        c->n_logits_rows = n;
    }
    int out_row = 0;
    for (int done = 0; done < n; done += c->n_batch) {
        int k = n - done < c->n_batch ? n - done : c->n_batch;
        for (int t = 0; t < k; t++) c->want[t] = !none && (all || done + t == n - 1);
        float *dst = c->logits + (size_t)(all ? out_row : 0) * (size_t)m->hp.n_vocab;
        if (c->plan_at > 0) c->plan_len = c->plan_at;   /* the last forward was a decode: its sets */
        c->plan_at = k == 1 ? 0 : -1;
        llambda_status st = m->arch->forward(c, tokens + done, k, c->pos, dst, c->want);
        if (st) return st;
        c->pos += k;
        if (all) out_row += k;
    }
    c->last_eval_n = none ? 0 : n;
    return LLAMBDA_OK;
}

llambda_status llambda_eval(llambda_context *c, const int32_t *tokens, int n) {
    if (ll_enter(c)) return LLAMBDA_ERR_BUSY;
    llambda_status st = ll_eval(c, tokens, n);
    ll_leave(c);
    return st;
}

const float *llambda_get_logits(const llambda_context *c, int i) {
    int n = c->last_eval_n;
    if (n == 0) return NULL;
    if (i < 0) i = n - 1;
    if (i >= n) return NULL;
    if (c->p.logits == LLAMBDA_LOGITS_ALL) return c->logits + (size_t)i * (size_t)c->m->hp.n_vocab;
    return i == n - 1 ? c->logits : NULL;
}

static void fill_random(float *x, size_t n) {
    uint64_t r = 7;
    for (size_t i = 0; i < n; i++) { r = r * 6364136223846793005ull + 1; x[i] = (float)((int)(r >> 40) % 2001 - 1000) / 1000.f; }
}

/* What timing one projection on the CPU needs: the weight as the model uses it (repacked
 * alike), a minimal context (pool, activation scratch) and random activations. */
typedef struct {
    ll_weight w;
    llambda_context c;
    float *x, *y, *ycpu;
    size_t ny;
} proj_bench;

static void proj_bench_free(proj_bench *b) {
    ll_pool_free(b->c.pool);
    free(b->c.qbuf); free(b->c.gemm_scratch); free(b->x); free(b->y); free(b->ycpu);
}

static llambda_status proj_bench_init(proj_bench *b, llambda_model *m, const char *tensor, int n_tok, int n_threads, int reps) {
    memset(b, 0, sizeof *b);
    const llambda_gguf_tensor *t = llambda_gguf_find_tensor(m->gguf, tensor);
    if (!t) return ll_error(LLAMBDA_ERR_ARG, "bench-proj: no tensor named '%s'", tensor);
    if (t->n_dims != 2 || ll_vec_dot_type(t->type) < 0)
        return ll_error(LLAMBDA_ERR_ARG, "bench-proj: '%s' is not a 2-D weight llambda multiplies with", tensor);
    if (n_tok < 1 || n_tok > 4096 || reps < 1) return ll_error(LLAMBDA_ERR_ARG, "bench-proj: bad token count or repetitions");
    b->w = (ll_weight){t->name, t->type, t->ne[0], t->ne[1], 1, (size_t)llambda_type_row_bytes(t->type, t->ne[0]), t->data, NULL, NULL, 0};
    ll_weight_repack(m, &b->w);   /* as the model's own copy is (kept until the model is freed) */
    llambda_context *c = &b->c;
    c->m = m;
    c->pool = ll_pool_create(n_threads > 0 ? n_threads : m->n_threads);
    c->qbuf_row = (size_t)t->ne[0] * 4 + 512;
    c->n_batch = n_tok;
    c->qbuf = malloc((size_t)n_tok * c->qbuf_row);
    c->gemm_scratch_stride = ll_gemm_scratch_bytes(t->ne[0]);
    c->gemm_scratch = c->pool ? malloc((size_t)ll_pool_size(c->pool) * c->gemm_scratch_stride) : NULL;
    b->ny = (size_t)n_tok * (size_t)t->ne[1];
    b->x = malloc((size_t)n_tok * (size_t)t->ne[0] * 4);
    b->y = malloc(b->ny * 4);
    b->ycpu = malloc(b->ny * 4);
    if (!c->pool || !c->qbuf || !c->gemm_scratch || !b->x || !b->y || !b->ycpu) {
        proj_bench_free(b);
        return ll_error(LLAMBDA_ERR_NOMEM, "bench-proj: out of memory");
    }
    fill_random(b->x, (size_t)n_tok * (size_t)t->ne[0]);
    ll_matmul(c, &b->w, b->x, n_tok, b->ycpu);   /* the reference, and a warm-up of the CPU path */
    return LLAMBDA_OK;
}

llambda_status llambda_bench_projection(llambda_model *m, const char *tensor, const char *backend, int n_tok, int n_threads,
                                        int reps, int warmup, llambda_proj_bench *out) {
    memset(out, 0, sizeof *out);
    if (warmup < 0) return ll_error(LLAMBDA_ERR_ARG, "bench-proj: bad warm-up count");
    proj_bench b;
    llambda_status st = proj_bench_init(&b, m, tensor, n_tok, n_threads, reps);
    if (st) return st;
    out->rows = b.w.rows; out->cols = b.w.cols; out->weight_bytes = (uint64_t)b.w.rows * b.w.row_bytes;
    struct ll_backend *be = NULL;
    void *session = NULL;
    if (backend && strcmp(backend, "cpu")) st = ll_backend_session(m, backend, &b.w, &be, &session);   /* export + setup: untimed */
    double best = 1e30;
    for (int k = 0; k < warmup + reps && !st; k++) {
        double t0 = ll_time_seconds();
        if (session) st = ll_backend_session_run(be, session, b.x, n_tok, b.y);
        else ll_matmul(&b.c, &b.w, b.x, n_tok, b.y);
        double dt = ll_time_seconds() - t0;
        if (k >= warmup && dt < best) best = dt;
    }
    if (!st) {
        double drift = 0;
        for (size_t i = 0; i < b.ny; i++) { double d = fabs((double)b.y[i] - b.ycpu[i]); if (!(d <= drift)) drift = d; }
        out->seconds = best;
        out->max_drift = drift;
    }
    if (session) ll_backend_session_free(be, session);
    proj_bench_free(&b);
    return st;
}

llambda_status llambda_bench_projection_runs(llambda_model *m, const char *tensor, int n_tok, int n_threads, int reps,
                                             void (*before)(void *arg), void *arg, double *seconds) {
    proj_bench b;
    llambda_status st = proj_bench_init(&b, m, tensor, n_tok, n_threads, reps);
    if (st) return st;
    for (int k = 0; k < reps; k++) {
        if (before) before(arg);
        double t0 = ll_time_seconds();
        ll_matmul(&b.c, &b.w, b.x, n_tok, b.y);
        seconds[k] = ll_time_seconds() - t0;
    }
    proj_bench_free(&b);
    return LLAMBDA_OK;
}
