/* The dense decoder block shared by llama and qwen2 (dense-archs.md §3.1):
 *   h = RMSNorm(x)·attn_norm;  q,k,v = W·h (+b);  RoPE(q,k);  store k,v;
 *   x += Wo·Attention(q, K, V);
 *   h = RMSNorm(x)·ffn_norm;   x += Wdown·(silu(Wgate·h) ⊙ Wup·h);
 *   logits = Whead·(RMSNorm(x)·output_norm) (+ output bias).
 * Every token of a batch goes through each weight as one matmul. */
#include "dense.h"

llambda_status ll_bind_dense_layers(llambda_model *m, int qkv_bias) {
    const ll_hparams *h = &m->hp;
    int d = h->n_embd, qd = h->n_head * h->head_dim, kvd = h->n_head_kv * h->head_dim, F = h->n_ff;
    (void)qkv_bias; /* biases are bound when present; qwen2 files always carry them */
    for (int l = 0; l < h->n_layer; l++) {
        ll_layer *L = &m->layers[l];
        llambda_status st;
        if ((st = ll_bind(m, &L->attn_norm, 1, d, 0, "blk.%d.attn_norm.weight", l)) ||
            (st = ll_bind(m, &L->wq, 1, d, qd, "blk.%d.attn_q.weight", l)) ||
            (st = ll_bind(m, &L->wk, 1, d, kvd, "blk.%d.attn_k.weight", l)) ||
            (st = ll_bind(m, &L->wv, 1, d, kvd, "blk.%d.attn_v.weight", l)) ||
            (st = ll_bind(m, &L->wo, 1, qd, d, "blk.%d.attn_output.weight", l)) ||
            (st = ll_bind(m, &L->bq, 0, qd, 0, "blk.%d.attn_q.bias", l)) ||
            (st = ll_bind(m, &L->bk, 0, kvd, 0, "blk.%d.attn_k.bias", l)) ||
            (st = ll_bind(m, &L->bv, 0, kvd, 0, "blk.%d.attn_v.bias", l)) ||
            (st = ll_bind(m, &L->bo, 0, d, 0, "blk.%d.attn_output.bias", l)) ||
            (st = ll_bind(m, &L->ffn_norm, 1, d, 0, "blk.%d.ffn_norm.weight", l)) ||
            (st = ll_bind(m, &L->w_gate, 1, d, F, "blk.%d.ffn_gate.weight", l)) ||
            (st = ll_bind(m, &L->w_up, 1, d, F, "blk.%d.ffn_up.weight", l)) ||
            (st = ll_bind(m, &L->w_down, 1, F, d, "blk.%d.ffn_down.weight", l)))
            return st;
    }
    return LLAMBDA_OK;
}

static void attention_block(struct llambda_context *c, const ll_layer *L, int l, int n, int pos) {
    const ll_hparams *h = &c->m->hp;
    int d = h->n_embd, qd = h->n_head * h->head_dim, kvd = h->n_head_kv * h->head_dim;
    ll_rms_norm_tokens(c, c->xb, c->x, &L->attn_norm, d, n, h->eps);
    ll_prefetch_small(&L->ffn_norm);   /* the next norm's weights arrive while the products run */
    ll_matmul_op qkv[3] = {{&L->wq, c->xb, n, c->q}, {&L->wk, c->xb, n, c->k}, {&L->wv, c->xb, n, c->v}};
    ll_matmul_many(c, qkv, 3);   /* one pool task, the input converted once */
    ll_add_bias(c->q, &L->bq, n);
    ll_add_bias(c->k, &L->bk, n);
    ll_add_bias(c->v, &L->bv, n);
    ll_rope_tokens(c, c->q, n, h->n_head, h->head_dim, qd, h->n_rot, c->rope_cs);
    ll_rope_tokens(c, c->k, n, h->n_head_kv, h->head_dim, kvd, h->n_rot, c->rope_cs);
    ll_kv_store(c, l, c->k, c->v, n, pos);
    ll_attention(c, l, c->q, n, pos, c->att);
    ll_matmul(c, &L->wo, c->att, n, c->xb2);  ll_add_bias(c->xb2, &L->bo, n);
    ll_add_tokens(c, c->x, c->xb2, d, n);
}

static void ffn_block(struct llambda_context *c, const ll_layer *L, const ll_weight *next_norm, int n) {
    const ll_hparams *h = &c->m->hp;
    int d = h->n_embd;
    ll_rms_norm_tokens(c, c->xb, c->x, &L->ffn_norm, d, n, h->eps);
    ll_prefetch_small(next_norm);
    ll_matmul_op gate_up[2] = {{&L->w_gate, c->xb, n, c->hb}, {&L->w_up, c->xb, n, c->hb2}};
    ll_matmul_many(c, gate_up, 2);
    ll_swiglu_tokens(c, c->hb, c->hb2, h->n_ff, n);
    ll_matmul(c, &L->w_down, c->hb, n, c->xb2);
    ll_add_tokens(c, c->x, c->xb2, d, n);
}

/* Final norm and LM head for the rows that want logits (gathered into one matmul). */
void ll_output_head(struct llambda_context *c, int n, float *logits, const uint8_t *want) {
    const llambda_model *m = c->m;
    int d = m->hp.n_embd, n_out = 0;
    for (int t = 0; t < n; t++)
        if (want[t]) ll_rms_norm(c->xb + (size_t)(n_out++) * d, c->x + (size_t)t * d, &m->output_norm, d, m->hp.eps);
    if (!n_out) return;
    ll_matmul(c, &m->output, c->xb, n_out, logits);
    ll_add_bias(logits, &m->output_bias, n_out);
}

llambda_status ll_dense_forward(struct llambda_context *c, const int32_t *tokens, int n, int pos, float *logits, const uint8_t *want) {
    const llambda_model *m = c->m;
    int d = m->hp.n_embd;
    for (int t = 0; t < n; t++) ll_embed(&m->tok_embd, tokens[t], c->x + (size_t)t * d);
    ll_rope_cache(c, c->rope_cs, n, pos, m->hp.n_rot, m->hp.rope_base, m->rope_freqs);
    for (int l = 0; l < m->hp.n_layer; l++) {
        attention_block(c, &m->layers[l], l, n, pos);
        ffn_block(c, &m->layers[l], ll_next_layer_norm(m, l), n);
    }
    ll_output_head(c, n, logits, want);
    return LLAMBDA_OK;
}
