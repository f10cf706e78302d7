/* `qwen3next` (Qwen3-Next): blocks alternate gated DeltaNet (recurrent) and gated
 * attention (every full_attention_interval-th block); every block then runs the MoE FFN:
 * softmax-routed SwiGLU experts plus a shared expert scaled by a sigmoid gate.
 *   h = RMSNorm(x)·attn_norm; x += DeltaNet(h) or Attention(h);
 *   h2 = RMSNorm(x)·post_attention_norm; x += MoE(h2).
 * Norm weights carry the converter's +1 already. Spec: qwen3next.md §1-§4. */
#include "../model.h"
#include <stdio.h>

static llambda_status qwen3next_hparams(llambda_model *m) {
    ll_hparams *h = &m->hp;
    llambda_status st;
    if ((st = ll_hp_u32(m, "context_length", 1, 0, &h->n_ctx_train)) || (st = ll_hp_u32(m, "embedding_length", 1, 0, &h->n_embd)) ||
        (st = ll_hp_u32(m, "block_count", 1, 0, &h->n_layer))) return st;
    if (h->n_layer < 1 || h->n_layer > LL_MAX_LAYERS) return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next.block_count = %d is out of range", h->n_layer);
    int interval, D, Dv, Fs;
    if ((st = ll_hp_u32(m, "attention.head_count", 1, 0, &h->n_head)) ||
        (st = ll_hp_u32(m, "attention.head_count_kv", 0, h->n_head, &h->n_head_kv)) ||
        (st = ll_hp_u32(m, "attention.key_length", 0, h->n_embd / (h->n_head ? h->n_head : 1), &D)) ||
        (st = ll_hp_u32(m, "attention.value_length", 0, D, &Dv)) ||
        (st = ll_hp_u32(m, "rope.dimension_count", 0, D, &h->n_rot)) ||
        (st = ll_hp_f32(m, "rope.freq_base", 0, 10000.f, &h->rope_base)) ||
        (st = ll_hp_f32(m, "attention.layer_norm_rms_epsilon", 1, 0, &h->eps)) ||
        (st = ll_hp_u32(m, "expert_count", 0, 0, &h->n_expert)) ||
        (st = ll_hp_u32(m, "expert_used_count", 0, 0, &h->n_expert_used)) ||
        (st = ll_hp_u32(m, "ssm.conv_kernel", 1, 0, &h->ssm_conv_k)) ||
        (st = ll_hp_u32(m, "ssm.state_size", 1, 0, &h->ssm_d_state)) ||
        (st = ll_hp_u32(m, "ssm.group_count", 1, 0, &h->ssm_n_group)) ||
        (st = ll_hp_u32(m, "ssm.time_step_rank", 1, 0, &h->ssm_n_head)) ||
        (st = ll_hp_u32(m, "ssm.inner_size", 1, 0, &h->ssm_d_inner)) ||
        (st = ll_hp_u32(m, "full_attention_interval", 0, 4, &interval))) return st;
    if (h->ssm_conv_k > LL_MAX_CONV_K)
        return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next: ssm.conv_kernel %d is longer than the %d supported", h->ssm_conv_k, LL_MAX_CONV_K);
    int ff;
    if ((st = ll_hp_u32(m, "feed_forward_length", 0, 0, &ff))) return st;
    if (h->n_expert < 1) return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next: the model cannot have zero experts (qwen3next.expert_count)");
    if (h->n_expert_used < 1 || h->n_expert_used > h->n_expert)
        return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next: expert_used_count %d out of 1..%d", h->n_expert_used, h->n_expert);
    if ((st = ll_hp_u32(m, "expert_feed_forward_length", 0, ff / h->n_expert_used, &h->n_ff_exp)) ||
        (st = ll_hp_u32(m, "expert_shared_feed_forward_length", 0, ff, &Fs))) return st;
    if (D != Dv || D < 2 || h->n_rot > D || h->n_rot % 2)
        return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next: head sizes %d/%d and rope dimensions %d do not fit", D, Dv, h->n_rot);
    if (h->n_head < 1 || h->n_head_kv < 1 || h->n_head % h->n_head_kv)
        return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next: %d KV heads do not divide %d heads", h->n_head_kv, h->n_head);
    if (h->ssm_n_group < 1 || h->ssm_n_head % h->ssm_n_group)
        return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next: %d value heads are not a multiple of %d key heads (ssm.time_step_rank / ssm.group_count)",
                        h->ssm_n_head, h->ssm_n_group);
    /* the widths the forward pass computes in int (state, conv, scratch, gated query) fit it */
    int64_t kd64 = (int64_t)h->ssm_n_group * h->ssm_d_state, conv64 = 2 * kd64 + h->ssm_d_inner;
    if ((st = ll_hp_width(m, "value heads x state size", h->ssm_n_head, h->ssm_d_state)) ||
        (st = ll_hp_width(m, "DeltaNet state (value heads x state size x state size)", (int64_t)h->ssm_n_head * h->ssm_d_state, h->ssm_d_state)) ||
        (st = ll_hp_width(m, "ssm conv channels x conv kernel", conv64, h->ssm_conv_k > 0 ? h->ssm_conv_k : 1)) ||
        (st = ll_hp_width(m, "DeltaNet scratch row", conv64 + 2 * kd64 + 2 * (int64_t)h->ssm_d_inner + 2 * (int64_t)h->ssm_n_head, 1)) ||
        (st = ll_hp_width(m, "2 x head_count x key_length (query and gate)", 2 * (int64_t)h->n_head, D))) return st;
    if (h->ssm_d_inner != h->ssm_n_head * h->ssm_d_state)
        return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next: ssm.inner_size %d != value heads %d x state size %d", h->ssm_d_inner, h->ssm_n_head, h->ssm_d_state);
    if (interval < 1) return ll_error(LLAMBDA_ERR_FORMAT, "qwen3next.full_attention_interval must be positive");
    int S = h->ssm_d_state, kd = h->ssm_n_group * S, vd = h->ssm_d_inner, conv_dim = 2 * kd + vd;
    h->head_dim = D;
    h->rope_type = LL_ROPE_NEOX;
    h->rope_freq_scale = 1.0f; h->rope_attn_factor = 1.0f;
    for (int l = 0; l < h->n_layer; l++) {
        int attn = (l + 1) % interval == 0;
        h->kind_l[l] = attn ? LL_LAYER_ATTN : LL_LAYER_DELTANET;
        /* n_ff_l holds the shared expert's width: the only dense FFN in this architecture */
        h->head_dim_l[l] = D; h->n_head_kv_l[l] = h->n_head_kv; h->n_ff_l[l] = Fs; h->n_rot_l[l] = h->n_rot;
        h->swa_l[l] = 0; h->rope_base_l[l] = h->rope_base; h->rope_freqs_l[l] = NULL;
        h->kv_src_l[l] = attn ? l : -1;
        if (!attn) { h->rs_conv_l[l] = (h->ssm_conv_k - 1) * conv_dim; h->rs_state_l[l] = h->ssm_n_head * S * S; }
    }
    h->arch_scratch = 2 * kd + 2 * vd + 2 * h->ssm_n_head + conv_dim;
    int w = conv_dim > 2 * h->n_head * D ? conv_dim : 2 * h->n_head * D;
    h->min_width = w > vd ? w : vd;
    h->n_vocab = m->vocab.n_vocab;
    return LLAMBDA_OK;
}

static llambda_status qwen3next_load(llambda_model *m) {
    llambda_status st;
    if ((st = qwen3next_hparams(m))) return st;
    ll_hparams *h = &m->hp;
    int E = h->n_embd, H = h->n_head, D = h->head_dim, S = h->ssm_d_state, Hv = h->ssm_n_head;
    int kd = h->ssm_n_group * S, vd = h->ssm_d_inner, conv_dim = 2 * kd + vd, X = h->n_expert, FX = h->n_ff_exp;
    if ((st = ll_bind_dense_globals(m))) return st;
    for (int l = 0; l < h->n_layer; l++) {
        ll_layer *Y = &m->layers[l];
        int Fs = h->n_ff_l[l];
        if ((st = ll_bind(m, &Y->attn_norm, 1, E, 0, "blk.%d.attn_norm.weight", l)) ||
            (st = ll_bind(m, &Y->ffn_norm, 1, E, 0, "blk.%d.post_attention_norm.weight", l))) return st;
        if (h->kind_l[l] == LL_LAYER_DELTANET) {
            char qn[64];
            snprintf(qn, sizeof qn, "blk.%d.attn_qkv.weight", l);
            if (llambda_gguf_find_tensor(m->gguf, qn)) {
                if ((st = ll_bind(m, &Y->attn_qkv, 1, E, conv_dim, "blk.%d.attn_qkv.weight", l)) ||
                    (st = ll_bind(m, &Y->attn_gate, 1, E, vd, "blk.%d.attn_gate.weight", l))) return st;
            } else if ((st = ll_bind(m, &Y->ssm_in_legacy, 1, E, 2 * kd + 2 * vd, "blk.%d.ssm_in.weight", l)))
                return ll_error(LLAMBDA_ERR_FORMAT, "blk.%d: neither attn_qkv + attn_gate nor ssm_in (%s)", l, llambda_last_error());
            if ((st = ll_bind(m, &Y->ssm_ba, 1, E, 2 * Hv, "blk.%d.ssm_ba.weight", l)) ||
                (st = ll_bind(m, &Y->ssm_conv, 1, h->ssm_conv_k, conv_dim, "blk.%d.ssm_conv1d.weight", l)) ||
                (st = ll_bind(m, &Y->ssm_dt_b, 1, Hv, 0, "blk.%d.ssm_dt.bias", l)) ||
                (st = ll_bind(m, &Y->ssm_a, 1, Hv, 0, "blk.%d.ssm_a", l)) ||
                (st = ll_bind(m, &Y->ssm_norm, 1, S, 0, "blk.%d.ssm_norm.weight", l)) ||
                (st = ll_bind(m, &Y->ssm_out, 1, vd, E, "blk.%d.ssm_out.weight", l))) return st;
            if (Y->ssm_conv.type != LLAMBDA_TYPE_F32) return ll_error(LLAMBDA_ERR_UNSUPPORTED, "blk.%d.ssm_conv1d.weight must be F32", l);
        } else {
            if ((st = ll_bind(m, &Y->wq, 1, E, 2 * (int64_t)H * D, "blk.%d.attn_q.weight", l)) ||
                (st = ll_bind(m, &Y->wk, 1, E, (int64_t)h->n_head_kv * D, "blk.%d.attn_k.weight", l)) ||
                (st = ll_bind(m, &Y->wv, 1, E, (int64_t)h->n_head_kv * D, "blk.%d.attn_v.weight", l)) ||
                (st = ll_bind(m, &Y->wo, 1, (int64_t)H * D, E, "blk.%d.attn_output.weight", l)) ||
                (st = ll_bind(m, &Y->q_norm, 1, D, 0, "blk.%d.attn_q_norm.weight", l)) ||
                (st = ll_bind(m, &Y->k_norm, 1, D, 0, "blk.%d.attn_k_norm.weight", l))) return st;
        }
        ll_moe *e = &Y->moe;
        char gu[64];
        snprintf(gu, sizeof gu, "blk.%d.ffn_gate_up_exps.weight", l);
        if ((st = ll_bind(m, &e->router, 1, E, X, "blk.%d.ffn_gate_inp.weight", l))) return st;
        if (llambda_gguf_find_tensor(m->gguf, gu)) {
            if ((st = ll_bind3(m, &e->gate_up, 1, E, 2 * (int64_t)FX, X, "blk.%d.ffn_gate_up_exps.weight", l))) return st;
        } else if ((st = ll_bind3(m, &e->gate, 1, E, FX, X, "blk.%d.ffn_gate_exps.weight", l)) ||
                   (st = ll_bind3(m, &e->up, 1, E, FX, X, "blk.%d.ffn_up_exps.weight", l))) return st;
        if ((st = ll_bind3(m, &e->down, 1, FX, E, X, "blk.%d.ffn_down_exps.weight", l)) ||
            (st = ll_bind(m, &Y->gate_shexp, 1, E, Fs, "blk.%d.ffn_gate_shexp.weight", l)) ||
            (st = ll_bind(m, &Y->up_shexp, 1, E, Fs, "blk.%d.ffn_up_shexp.weight", l)) ||
            (st = ll_bind(m, &Y->down_shexp, 1, Fs, E, "blk.%d.ffn_down_shexp.weight", l))) return st;
        /* the shared expert's scalar gate: [n_embd] (or [n_embd, 1]) used as a 1-row matrix */
        const llambda_gguf_tensor *sg = NULL;
        char sgn[64];
        snprintf(sgn, sizeof sgn, "blk.%d.ffn_gate_inp_shexp.weight", l);
        sg = llambda_gguf_find_tensor(m->gguf, sgn);
        if (!sg) return ll_error(LLAMBDA_ERR_FORMAT, "missing tensor '%s'", sgn);
        if (sg->type != LLAMBDA_TYPE_F32 || sg->ne[0] != E || llambda_tensor_nelements(sg) != E)
            return ll_error(LLAMBDA_ERR_FORMAT, "tensor '%s' must be F32 with %d elements", sgn, E);
        Y->gate_inp_shexp = (ll_weight){sg->name, LLAMBDA_TYPE_F32, E, 1, 1, (size_t)E * 4, sg->data, NULL, NULL, 0};
        e->n_expert = X; e->n_used = h->n_expert_used; e->n_ff = FX;
        e->gating = LL_MOE_SOFTMAX; e->act = LL_ACT_SILU; e->norm_weights = 1;
    }
    return LLAMBDA_OK;
}

/* Gated attention: q and a gate per head from one projection; q/k RMSNorm; partial NEOX
 * RoPE; GQA with 1/sqrt(D); output times sigmoid(gate). */
static void attention_block(struct llambda_context *c, const ll_layer *Y, int l, int n, int pos) {
    const ll_hparams *h = &c->m->hp;
    int H = h->n_head, D = h->head_dim, qd = H * D, kvd = h->n_head_kv * D;
    float *qg = c->hb2, *gate = c->hb;   /* [n][2 qd] then the gates [n][qd] */
    ll_matmul_op qkv[3] = {{&Y->wq, c->xb, n, qg}, {&Y->wk, c->xb, n, c->k}, {&Y->wv, c->xb, n, c->v}};
    ll_matmul_many(c, qkv, 3);   /* one pool task */
    for (int t = 0; t < n; t++)
        for (int hd = 0; hd < H; hd++) {
            memcpy(c->q + (size_t)t * qd + (size_t)hd * D, qg + (size_t)t * 2 * qd + (size_t)hd * 2 * D, (size_t)D * 4);
            memcpy(gate + (size_t)t * qd + (size_t)hd * D, qg + (size_t)t * 2 * qd + (size_t)hd * 2 * D + D, (size_t)D * 4);
        }
    ll_rms_norm_rows_tokens(c, c->q, c->q, &Y->q_norm, D, H, n, h->eps);
    ll_rms_norm_rows_tokens(c, c->k, c->k, &Y->k_norm, D, h->n_head_kv, n, h->eps);
    ll_rope(h, c->q, n, H, D, qd, h->n_rot, c->rope_cs);
    ll_rope(h, c->k, n, h->n_head_kv, D, kvd, h->n_rot, c->rope_cs);
    ll_kv_store(c, l, c->k, c->v, n, pos);
    ll_attention(c, l, c->q, n, pos, c->att);
    ll_sigmoid_row(gate, gate, (int64_t)n * qd);
    for (size_t i = 0; i < (size_t)n * qd; i++) c->att[i] *= gate[i];
    ll_matmul(c, &Y->wo, c->att, n, c->xb2);
}

/* routed experts + sigmoid(w_sg·h2) · shared expert */
static void moe_block(struct llambda_context *c, const ll_layer *Y, int l, int n) {
    const ll_hparams *h = &c->m->hp;
    int E = h->n_embd, Fs = h->n_ff_l[l];
    float *g = c->att;
    ll_matmul_op shared[3] = {{&Y->gate_shexp, c->xb, n, c->hb}, {&Y->up_shexp, c->xb, n, c->hb2},
                              {&Y->gate_inp_shexp, c->xb, n, g}};
    /* the shared expert's inputs with the router, its down with the experts' */
    ll_moe_shared sh = {LL_ACT_SILU, c->hb, c->hb2, Fs, &Y->down_shexp, c->hb2};
    ll_moe_forward(c, &Y->moe, c->xb, c->xb, n, c->xb2, shared, 3, &sh);
    for (int t = 0; t < n; t++) {
        float s = ll_sigmoid(g[t]);
        float *sh = c->hb2 + (size_t)t * E, *o = c->xb2 + (size_t)t * E;
        for (int i = 0; i < E; i++) o[i] += sh[i] * s;
    }
}

static llambda_status qwen3next_forward(struct llambda_context *c, const int32_t *tokens, int n, int pos, float *logits, const uint8_t *want) {
    const llambda_model *m = c->m;
    const ll_hparams *h = &m->hp;
    int E = h->n_embd;
    for (int t = 0; t < n; t++) ll_embed(&m->tok_embd, tokens[t], c->x + (size_t)t * E);
    ll_rope_cache(c, c->rope_cs, n, pos, h->n_rot, h->rope_base, NULL);
    for (int l = 0; l < h->n_layer; l++) {
        const ll_layer *Y = &m->layers[l];
        ll_rms_norm_rows_tokens(c, c->xb, c->x, &Y->attn_norm, E, 1, n, h->eps);
        ll_prefetch_small(&Y->ffn_norm);   /* the next norm's weights arrive while the layer runs */
        if (h->kind_l[l] == LL_LAYER_DELTANET) ll_deltanet(c, Y, l, c->xb, n, c->xb2);
        else attention_block(c, Y, l, n, pos);
        ll_add_tokens(c, c->x, c->xb2, E, n);
        ll_rms_norm_rows_tokens(c, c->xb, c->x, &Y->ffn_norm, E, 1, n, h->eps);
        ll_prefetch_small(ll_next_layer_norm(m, l));
        moe_block(c, Y, l, n);
        ll_add_tokens(c, c->x, c->xb2, E, n);
    }
    ll_output_head(c, n, logits, want);
    return LLAMBDA_OK;
}

const ll_arch ll_arch_qwen3next = {"qwen3next", qwen3next_load, qwen3next_forward};
