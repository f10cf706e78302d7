/* `gemma4`: sliding-window and global attention layers with their own head sizes, RoPE
 * bases and KV head counts; Q/K RMSNorm and a weightless V norm; shared-KV layers that
 * read the cache of the last sliding / global layer owning one; per-layer embeddings
 * (PLE); GeGLU FFN with post norms; layer output scale; final logit soft-capping.
 * Expert layers (26B-A4B) run the routed experts beside the dense MLP.
 * Spec: gemma4.md §1-§4. */
#include "../model.h"
#include <stdio.h>

static llambda_status gemma4_hparams(llambda_model *m) {
    ll_hparams *h = &m->hp;
    llambda_status st;
    if ((st = ll_hp_u32(m, "context_length", 1, 0, &h->n_ctx_train)) || (st = ll_hp_u32(m, "embedding_length", 1, 0, &h->n_embd)) ||
        (st = ll_hp_u32(m, "block_count", 1, 0, &h->n_layer))) return st;
    if (h->n_layer < 1 || h->n_layer > LL_MAX_LAYERS) return ll_error(LLAMBDA_ERR_FORMAT, "gemma4.block_count = %d is out of range", h->n_layer);
    int L = h->n_layer;
    if ((st = ll_hp_u32(m, "attention.head_count", 1, 0, &h->n_head))) return st;
    if (h->n_head < 1) return ll_error(LLAMBDA_ERR_FORMAT, "gemma4.attention.head_count must be positive");
    if ((st = ll_hp_layers(m, "feed_forward_length", 1, 0, h->n_ff_l)) ||
        (st = ll_hp_layers(m, "attention.head_count_kv", 0, h->n_head, h->n_head_kv_l)) ||
        (st = ll_hp_layers(m, "attention.sliding_window_pattern", 1, 0, h->swa_l))) return st;
    int kl, vl, kls, vls, rot, rot_swa;
    if ((st = ll_hp_u32(m, "attention.key_length", 0, h->n_embd / h->n_head, &kl)) ||
        (st = ll_hp_u32(m, "attention.value_length", 0, h->n_embd / h->n_head, &vl)) ||
        (st = ll_hp_u32(m, "attention.key_length_swa", 1, 0, &kls)) ||
        (st = ll_hp_u32(m, "attention.value_length_swa", 1, 0, &vls))) return st;
    if (kl != vl || kls != vls || kl < 2 || kls < 2 || kl % 2 || kls % 2)
        return ll_error(LLAMBDA_ERR_FORMAT, "gemma4: key and value lengths must agree and be even (global %d/%d, sliding %d/%d)", kl, vl, kls, vls);
    if ((st = ll_hp_u32(m, "rope.dimension_count", 0, kl, &rot)) || (st = ll_hp_u32(m, "rope.dimension_count_swa", 0, rot, &rot_swa))) return st;
    if (rot > kl || rot_swa > kls || rot % 2 || rot_swa % 2)
        return ll_error(LLAMBDA_ERR_FORMAT, "gemma4: rope dimension counts %d/%d exceed the head sizes %d/%d", rot, rot_swa, kl, kls);
    float base, base_swa;
    if ((st = ll_hp_f32(m, "rope.freq_base", 0, 10000.f, &base)) || (st = ll_hp_f32(m, "rope.freq_base_swa", 0, 10000.f, &base_swa)) ||
        (st = ll_hp_f32(m, "attention.layer_norm_rms_epsilon", 1, 0, &h->eps)) ||
        (st = ll_hp_f32(m, "final_logit_softcapping", 0, 0.f, &h->logit_softcap)) ||
        (st = ll_hp_u32(m, "attention.sliding_window", 1, 0, &h->n_swa)) ||
        (st = ll_hp_u32(m, "embedding_length_per_layer_input", 1, 0, &h->n_embd_per_layer))) return st;
    if (h->n_swa < 1) return ll_error(LLAMBDA_ERR_FORMAT, "gemma4.attention.sliding_window must be positive");
    int shared;
    if ((st = ll_hp_u32(m, "attention.shared_kv_layers", 0, 0, &shared))) return st;
    if (shared >= L) return ll_error(LLAMBDA_ERR_FORMAT, "gemma4.attention.shared_kv_layers = %d leaves no layer owning a cache", shared);
    if ((st = ll_hp_u32(m, "expert_count", 0, 0, &h->n_expert)) || (st = ll_hp_u32(m, "expert_used_count", 0, 0, &h->n_expert_used)) ||
        (st = ll_hp_u32(m, "expert_feed_forward_length", 0, 0, &h->n_ff_exp))) return st;
    if (h->n_expert > 0 && (h->n_expert_used < 1 || h->n_expert_used > h->n_expert || h->n_ff_exp < 1))
        return ll_error(LLAMBDA_ERR_FORMAT, "gemma4: %d experts with %d used and expert ff %d is inconsistent", h->n_expert, h->n_expert_used, h->n_ff_exp);
    h->head_dim = kl; h->n_rot = rot; h->rope_base = base; h->rope_type = LL_ROPE_NEOX;
    h->attn_scale = 1.0f;
    h->rope_freq_scale = 1.0f; h->rope_attn_factor = 1.0f;
    int n_kv = L - shared;
    for (int l = 0; l < L; l++) {
        int swa = h->swa_l[l] = h->swa_l[l] != 0;
        h->head_dim_l[l] = swa ? kls : kl;
        h->n_rot_l[l] = swa ? rot_swa : rot;
        h->rope_base_l[l] = swa ? base_swa : base;
        if (h->n_head_kv_l[l] < 1 || h->n_head % h->n_head_kv_l[l])
            return ll_error(LLAMBDA_ERR_FORMAT, "gemma4: layer %d has %d KV heads, which do not divide %d heads", l, h->n_head_kv_l[l], h->n_head);
        if (h->n_ff_l[l] < 1) return ll_error(LLAMBDA_ERR_FORMAT, "gemma4: layer %d has feed_forward_length %d", l, h->n_ff_l[l]);
        /* shared layers read the cache of the last sliding (n_kv-2) or global (n_kv-1) owner */
        h->kv_src_l[l] = l < n_kv ? l : swa ? n_kv - 2 : n_kv - 1;
        int src = h->kv_src_l[l];
        if (src < 0 || h->swa_l[src] != swa || h->head_dim_l[src] != h->head_dim_l[l] || h->n_head_kv_l[src] != h->n_head_kv_l[l])
            return ll_error(LLAMBDA_ERR_FORMAT, "gemma4: shared-KV layer %d cannot read layer %d (different layer type or KV shape)", l, src);
    }
    h->n_head_kv = h->n_head_kv_l[0];
    h->n_ff = h->n_ff_l[0];
    h->n_vocab = m->vocab.n_vocab;
    return LLAMBDA_OK;
}

static llambda_status gemma4_load(llambda_model *m) {
    llambda_status st;
    if ((st = gemma4_hparams(m))) return st;
    ll_hparams *h = &m->hp;
    int E = h->n_embd, L = h->n_layer, P = h->n_embd_per_layer, H = h->n_head;
    if ((st = ll_bind_dense_globals(m))) return st;
    int any_global = 0;
    for (int l = 0; l < L; l++) any_global |= !h->swa_l[l];
    ll_weight rf;
    if ((st = ll_bind(m, &rf, any_global, h->n_rot / 2, 0, "rope_freqs.weight"))) return st;
    for (int l = 0; l < L; l++) h->rope_freqs_l[l] = h->swa_l[l] ? NULL : (const float *)rf.data;
    if (P > 0 && ((st = ll_bind(m, &m->ple_tok_embd, 1, (int64_t)P * L, h->n_vocab, "per_layer_token_embd.weight")) ||
                  (st = ll_bind(m, &m->ple_model_proj, 1, E, (int64_t)P * L, "per_layer_model_proj.weight")) ||
                  (st = ll_bind(m, &m->ple_proj_norm, 1, P, 0, "per_layer_proj_norm.weight")))) return st;
    for (int l = 0; l < L; l++) {
        ll_layer *Y = &m->layers[l];
        int D = h->head_dim_l[l], KV = h->n_head_kv_l[l], F = h->n_ff_l[l], owns = h->kv_src_l[l] == l;
        if ((st = ll_bind(m, &Y->attn_norm, 1, E, 0, "blk.%d.attn_norm.weight", l)) ||
            (st = ll_bind(m, &Y->wq, 1, E, (int64_t)H * D, "blk.%d.attn_q.weight", l)) ||
            (st = ll_bind(m, &Y->q_norm, 1, D, 0, "blk.%d.attn_q_norm.weight", l)) ||
            (st = ll_bind(m, &Y->wo, 1, (int64_t)H * D, E, "blk.%d.attn_output.weight", l)) ||
            (st = ll_bind(m, &Y->post_attn_norm, 1, E, 0, "blk.%d.post_attention_norm.weight", l)) ||
            (st = ll_bind(m, &Y->ffn_norm, 1, E, 0, "blk.%d.ffn_norm.weight", l)) ||
            (st = ll_bind(m, &Y->w_gate, 1, E, F, "blk.%d.ffn_gate.weight", l)) ||
            (st = ll_bind(m, &Y->w_up, 1, E, F, "blk.%d.ffn_up.weight", l)) ||
            (st = ll_bind(m, &Y->w_down, 1, F, E, "blk.%d.ffn_down.weight", l)) ||
            (st = ll_bind(m, &Y->post_ffw_norm, 1, E, 0, "blk.%d.post_ffw_norm.weight", l)) ||
            (st = ll_bind(m, &Y->out_scale, 0, 1, 0, "blk.%d.layer_output_scale.weight", l)))
            return st;
        /* K/V weights: required where the layer owns a cache; shared layers may carry them unused */
        if (owns && ((st = ll_bind(m, &Y->wk, 1, E, (int64_t)KV * D, "blk.%d.attn_k.weight", l)) ||
                     (st = ll_bind(m, &Y->k_norm, 1, D, 0, "blk.%d.attn_k_norm.weight", l)) ||
                     (st = ll_bind(m, &Y->wv, 0, E, (int64_t)KV * D, "blk.%d.attn_v.weight", l))))
            return st;
        char rn[64];
        snprintf(rn, sizeof rn, "blk.%d.ffn_gate_inp.weight", l);
        if (llambda_gguf_find_tensor(m->gguf, rn)) {
            int X = h->n_expert, FX = h->n_ff_exp;
            if (X < 1) return ll_error(LLAMBDA_ERR_FORMAT, "tensor '%s' present but gemma4.expert_count is missing", rn);
            ll_moe *e = &Y->moe;
            ll_weight ds;
            if ((st = ll_bind(m, &e->router, 1, E, X, "blk.%d.ffn_gate_inp.weight", l)) ||
                (st = ll_bind(m, &Y->router_scale, 1, E, 0, "blk.%d.ffn_gate_inp.scale", l)) ||
                (st = ll_bind3(m, &e->gate_up, 1, E, 2 * (int64_t)FX, X, "blk.%d.ffn_gate_up_exps.weight", l)) ||
                (st = ll_bind3(m, &e->down, 1, FX, E, X, "blk.%d.ffn_down_exps.weight", l)) ||
                (st = ll_bind(m, &ds, 0, X, 0, "blk.%d.ffn_down_exps.scale", l)) ||
                (st = ll_bind(m, &Y->pre_ffw_norm_2, 1, E, 0, "blk.%d.pre_ffw_norm_2.weight", l)) ||
                (st = ll_bind(m, &Y->post_ffw_norm_1, 1, E, 0, "blk.%d.post_ffw_norm_1.weight", l)) ||
                (st = ll_bind(m, &Y->post_ffw_norm_2, 1, E, 0, "blk.%d.post_ffw_norm_2.weight", l)))
                return st;
            e->down_scale = ds.data ? (const float *)ds.data : NULL;
            e->n_expert = X; e->n_used = h->n_expert_used; e->n_ff = FX;
            e->gating = LL_MOE_SOFTMAX; e->act = LL_ACT_GELU; e->norm_weights = 1;
        }
        if (P > 0 && ((st = ll_bind(m, &Y->inp_gate, 1, E, P, "blk.%d.inp_gate.weight", l)) ||
                      (st = ll_bind(m, &Y->proj, 1, P, E, "blk.%d.proj.weight", l)) ||
                      (st = ll_bind(m, &Y->post_norm, 1, E, 0, "blk.%d.post_norm.weight", l))))
            return st;
    }
    return LLAMBDA_OK;
}

/* ------------------------------------------------------------------ forward */

/* Per-layer inputs: pl_l = (norm(proj·x / sqrt(E)) + embed_l · sqrt(P)) / sqrt(2), all layers. */
static void per_layer_inputs(struct llambda_context *c, const int32_t *tokens, int n) {
    const llambda_model *m = c->m;
    const ll_hparams *h = &m->hp;
    int E = h->n_embd, LP = h->n_layer * h->n_embd_per_layer, P = h->n_embd_per_layer;
    float *tok = c->ple, *proj = c->ple + (size_t)n * LP;
    float s_p = sqrtf((float)P), s_e = 1.0f / sqrtf((float)E), s_2 = 1.0f / sqrtf(2.0f);
    for (int t = 0; t < n; t++) {
        float *row = tok + (size_t)t * LP;
        ll_embed(&m->ple_tok_embd, tokens[t], row);
        for (int i = 0; i < LP; i++) row[i] *= s_p;
    }
    ll_matmul(c, &m->ple_model_proj, c->x, n, proj);
    for (size_t i = 0; i < (size_t)n * LP; i++) proj[i] *= s_e;
    ll_rms_norm_rows_tokens(c, proj, proj, &m->ple_proj_norm, P, h->n_layer, n, h->eps);
    for (size_t i = 0; i < (size_t)n * LP; i++) tok[i] = (proj[i] + tok[i]) * s_2;
}

static void attention_block(struct llambda_context *c, const ll_layer *Y, int l, int n, int pos) {
    const ll_hparams *h = &c->m->hp;
    int E = h->n_embd, H = h->n_head, D = h->head_dim_l[l], KV = h->n_head_kv_l[l], qd = H * D, kvd = KV * D;
    const float *cs = h->swa_l[l] ? c->rope_cs : c->rope_cs2;
    ll_rms_norm_rows_tokens(c, c->xb, c->x, &Y->attn_norm, E, 1, n, h->eps);
    const ll_weight *later[] = {&Y->q_norm, &Y->k_norm, &Y->post_attn_norm, &Y->ffn_norm};   /* arrive while the products run */
    for (int i = 0; i < 4; i++) ll_prefetch_small(later[i]);
    int own_kv = h->kv_src_l[l] == l;   /* else the layer reads another layer's cache */
    ll_matmul_op qkv[3] = {{&Y->wq, c->xb, n, c->q}, {&Y->wk, c->xb, n, c->k}, {&Y->wv, c->xb, n, c->v}};
    ll_matmul_many(c, qkv, own_kv ? (Y->wv.data ? 3 : 2) : 1);   /* one pool task */
    ll_rms_norm_rows_tokens(c, c->q, c->q, &Y->q_norm, D, H, n, h->eps);
    ll_rope(h, c->q, n, H, D, qd, h->n_rot_l[l], cs);
    if (own_kv) {
        if (!Y->wv.data) memcpy(c->v, c->k, (size_t)n * kvd * sizeof *c->v);   /* K = V: the raw projection */
        ll_rms_norm_rows_tokens(c, c->k, c->k, &Y->k_norm, D, KV, n, h->eps);
        ll_rope(h, c->k, n, KV, D, kvd, h->n_rot_l[l], cs);
        ll_rms_norm_rows_tokens(c, c->v, c->v, NULL, D, KV, n, h->eps);
        ll_kv_store(c, l, c->k, c->v, n, pos);
    }
    ll_attention(c, l, c->q, n, pos, c->att);
    ll_matmul(c, &Y->wo, c->att, n, c->xb2);
    ll_rms_norm_rows_tokens(c, c->xb2, c->xb2, &Y->post_attn_norm, E, 1, n, h->eps);
    ll_add_tokens(c, c->x, c->xb2, E, n);
}

static void ffn_block(struct llambda_context *c, const ll_layer *Y, int l, int n) {
    const ll_hparams *h = &c->m->hp;
    int E = h->n_embd, F = h->n_ff_l[l];
    ll_rms_norm_rows_tokens(c, c->xb, c->x, &Y->ffn_norm, E, 1, n, h->eps);
    const ll_weight *later[] = {&Y->post_ffw_norm, &Y->post_ffw_norm_1, &Y->pre_ffw_norm_2, &Y->post_ffw_norm_2};
    for (int i = 0; i < 4; i++) ll_prefetch_small(later[i]);   /* absent ones have no data */
    ll_matmul_op gate_up[2] = {{&Y->w_gate, c->xb, n, c->hb}, {&Y->w_up, c->xb, n, c->hb2}};
    ll_matmul_many(c, gate_up, 2);
    for (int t = 0; t < n; t++) ll_geglu(c->hb + (size_t)t * F, c->hb2 + (size_t)t * F, F);
    ll_matmul(c, &Y->w_down, c->hb, n, c->xb2);
    if (Y->moe.n_expert > 0) {
        /* f = norm1(dense MLP) + norm2(experts); the router and the experts read x_a */
        ll_rms_norm_rows_tokens(c, c->xb2, c->xb2, &Y->post_ffw_norm_1, E, 1, n, h->eps);
        float s_e = 1.0f / sqrtf((float)E);
        const float *rs = (const float *)Y->router_scale.data;
        ll_rms_norm_rows_tokens(c, c->xb, c->x, NULL, E, 1, n, h->eps);
        for (int t = 0; t < n; t++)
            for (int i = 0; i < E; i++) c->xb[(size_t)t * E + i] = (c->xb[(size_t)t * E + i] * s_e) * rs[i];
        ll_rms_norm_rows_tokens(c, c->hb2, c->x, &Y->pre_ffw_norm_2, E, 1, n, h->eps);
        ll_moe_forward(c, &Y->moe, c->xb, c->hb2, n, c->hb, NULL, 0, NULL);
        ll_rms_norm_rows_tokens(c, c->hb, c->hb, &Y->post_ffw_norm_2, E, 1, n, h->eps);
        ll_add_tokens(c, c->xb2, c->hb, E, n);
    }
    ll_rms_norm_rows_tokens(c, c->xb2, c->xb2, &Y->post_ffw_norm, E, 1, n, h->eps);
    ll_add_tokens(c, c->x, c->xb2, E, n);
}

/* x += norm(proj · (gelu(inp_gate · x) ⊙ pl_l)) */
static void per_layer_block(struct llambda_context *c, const ll_layer *Y, int l, int n) {
    const ll_hparams *h = &c->m->hp;
    int E = h->n_embd, P = h->n_embd_per_layer, LP = h->n_layer * P;
    ll_matmul(c, &Y->inp_gate, c->x, n, c->hb);
    for (int t = 0; t < n; t++) ll_geglu(c->hb + (size_t)t * P, c->ple + (size_t)t * LP + (size_t)l * P, P);
    ll_matmul(c, &Y->proj, c->hb, n, c->xb2);
    ll_rms_norm_rows_tokens(c, c->xb2, c->xb2, &Y->post_norm, E, 1, n, h->eps);
    ll_add_tokens(c, c->x, c->xb2, E, n);
}

/* Final logit soft-capping, cap * tanh(logit / cap), over the vocabulary split across the
 * pool (element by element, tanhf's bits: the same whatever the split). */
typedef struct { float *x; size_t n; float inv, cap; } softcap_job;

static void softcap_task(void *arg, int ith, int nth) {
    softcap_job *j = arg;
    const ll_kernels *k = ll_kernels_get();
    size_t i0 = j->n * (size_t)ith / (size_t)nth, i1 = j->n * (size_t)(ith + 1) / (size_t)nth;
    for (size_t i = i0; i < i1; i += 65536) {
        int m = i1 - i < 65536 ? (int)(i1 - i) : 65536;
        k->tanhf_scaled_row(j->x + i, j->x + i, j->inv, j->cap, m);
    }
}

static llambda_status gemma4_forward(struct llambda_context *c, const int32_t *tokens, int n, int pos, float *logits, const uint8_t *want) {
    const llambda_model *m = c->m;
    const ll_hparams *h = &m->hp;
    int E = h->n_embd;
    float s_e = sqrtf((float)E);
    for (int t = 0; t < n; t++) {
        float *x = c->x + (size_t)t * E;
        ll_embed(&m->tok_embd, tokens[t], x);
        for (int i = 0; i < E; i++) x[i] *= s_e;
    }
    if (h->n_embd_per_layer > 0) per_layer_inputs(c, tokens, n);
    /* one RoPE table per layer type: sliding (no factors) and global (rope_freqs) */
    int have_swa = 0, have_global = 0, ls = 0, lg = 0;
    for (int l = 0; l < h->n_layer; l++) {
        if (h->swa_l[l]) { if (!have_swa) ls = l; have_swa = 1; } else { if (!have_global) lg = l; have_global = 1; }
    }
    if (have_swa) ll_rope_cache(c, c->rope_cs, n, pos, h->n_rot_l[ls], h->rope_base_l[ls], NULL);
    if (have_global) ll_rope_cache(c, c->rope_cs2, n, pos, h->n_rot_l[lg], h->rope_base_l[lg], h->rope_freqs_l[lg]);
    for (int l = 0; l < h->n_layer; l++) {
        const ll_layer *Y = &m->layers[l];
        attention_block(c, Y, l, n, pos);
        ffn_block(c, Y, l, n);
        if (h->n_embd_per_layer > 0) per_layer_block(c, Y, l, n);
        if (Y->out_scale.data) {
            float s = *(const float *)Y->out_scale.data;
            for (size_t i = 0; i < (size_t)n * E; i++) c->x[i] *= s;
        }
    }
    ll_output_head(c, n, logits, want);
    if (h->logit_softcap > 0) {
        int n_out = 0;
        for (int t = 0; t < n; t++) n_out += want[t] != 0;
        softcap_job j = {logits, (size_t)n_out * h->n_vocab, 1.0f / h->logit_softcap, h->logit_softcap};
        ll_pool_run(c->pool, softcap_task, &j);
    }
    return LLAMBDA_OK;
}

const ll_arch ll_arch_gemma4 = {"gemma4", gemma4_load, gemma4_forward};
