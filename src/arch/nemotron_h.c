/* `nemotron_h_moe` and `nemotron_h`: a stack of blocks, each one RMS pre-norm, one mixer
 * and one residual add. The per-layer arrays decide the mixer: Mamba-2 (no KV heads, no
 * FFN), attention without positional encoding (KV heads, no FFN), or an FFN — routed
 * ReLU² experts plus a shared expert (moe), or a dense ReLU² MLP (dense).
 * Spec: nemotron-h-moe.md §1-§4. */
#include "../model.h"
#include <stdio.h>

static int is_moe(const llambda_model *m) { return !strcmp(m->arch_name, "nemotron_h_moe"); }

static llambda_status nemotron_hparams(llambda_model *m) {
    ll_hparams *h = &m->hp;
    llambda_status st;
    if ((st = ll_hp_u32(m, "context_length", 1, 0, &h->n_ctx_train)) || (st = ll_hp_u32(m, "embedding_length", 1, 0, &h->n_embd)) ||
        (st = ll_hp_u32(m, "block_count", 1, 0, &h->n_layer))) return st;
    if (h->n_layer < 1 || h->n_layer > LL_MAX_LAYERS) return ll_error(LLAMBDA_ERR_FORMAT, "%s.block_count = %d is out of range", m->arch_name, h->n_layer);
    int L = h->n_layer;
    if ((st = ll_hp_u32(m, "attention.head_count", 0, 0, &h->n_head)) ||
        (st = ll_hp_layers(m, "attention.head_count_kv", 0, h->n_head, h->n_head_kv_l)) ||
        (st = ll_hp_layers(m, "feed_forward_length", 0, 0, h->n_ff_l)) ||
        (st = ll_hp_f32(m, "attention.layer_norm_rms_epsilon", 1, 0, &h->eps)) ||
        (st = ll_hp_u32(m, "ssm.conv_kernel", 1, 0, &h->ssm_conv_k)) ||
        (st = ll_hp_u32(m, "ssm.inner_size", 1, 0, &h->ssm_d_inner)) ||
        (st = ll_hp_u32(m, "ssm.state_size", 1, 0, &h->ssm_d_state)) ||
        (st = ll_hp_u32(m, "ssm.time_step_rank", 1, 0, &h->ssm_n_head)) ||
        (st = ll_hp_u32(m, "ssm.group_count", 1, 0, &h->ssm_n_group))) return st;
    if (h->ssm_conv_k > LL_MAX_CONV_K)
        return ll_error(LLAMBDA_ERR_FORMAT, "%s: ssm.conv_kernel %d is longer than the %d supported", m->arch_name, h->ssm_conv_k, LL_MAX_CONV_K);
    if (h->ssm_conv_k < 1 || h->ssm_d_state < 1 || h->ssm_n_head < 1 || h->ssm_n_group < 1 ||
        h->ssm_d_inner % h->ssm_n_head || h->ssm_n_head % h->ssm_n_group || h->ssm_d_inner % h->ssm_n_group)
        return ll_error(LLAMBDA_ERR_FORMAT, "%s: ssm sizes do not divide (inner %d, heads %d, groups %d, state %d, kernel %d)",
                        m->arch_name, h->ssm_d_inner, h->ssm_n_head, h->ssm_n_group, h->ssm_d_state, h->ssm_conv_k);
    int D = 0, Dv = 0;
    if ((st = ll_hp_u32(m, "attention.key_length", 0, h->n_head ? h->n_embd / h->n_head : 0, &D)) ||
        (st = ll_hp_u32(m, "attention.value_length", 0, D, &Dv))) return st;
    if (D != Dv) return ll_error(LLAMBDA_ERR_UNSUPPORTED, "%s: key_length %d differs from value_length %d", m->arch_name, D, Dv);
    if (is_moe(m)) {
        if ((st = ll_hp_u32(m, "expert_count", 0, 0, &h->n_expert)) || (st = ll_hp_u32(m, "expert_used_count", 0, 0, &h->n_expert_used)) ||
            (st = ll_hp_u32(m, "expert_feed_forward_length", 0, 0, &h->n_ff_exp))) return st;
        if (h->n_expert < 1 || h->n_expert_used < 1 || h->n_expert_used > h->n_expert || h->n_ff_exp < 1)
            return ll_error(LLAMBDA_ERR_FORMAT, "%s: %d experts, %d used, expert ff %d", m->arch_name, h->n_expert, h->n_expert_used, h->n_ff_exp);
        int groups = 0, groups_used = 0;
        if ((st = ll_hp_u32(m, "expert_group_count", 0, 0, &groups)) || (st = ll_hp_u32(m, "expert_group_used_count", 0, 0, &groups_used))) return st;
        if (groups > 1 && (groups > 64 || h->n_expert % groups || groups_used < 1 || groups_used > groups ||
                           groups_used * (h->n_expert / groups) < h->n_expert_used))
            return ll_error(LLAMBDA_ERR_FORMAT, "%s: %d expert groups with %d used cannot route %d of %d experts", m->arch_name,
                            groups, groups_used, h->n_expert_used, h->n_expert);
        h->ssm_n_group_moe = groups > 1 ? groups : 0;
        h->n_group_used_moe = groups_used;
    }
    int n_attn = 0;
    for (int l = 0; l < L; l++) {
        int kv = h->n_head_kv_l[l], ff = h->n_ff_l[l];
        h->kind_l[l] = ff > 0 ? LL_LAYER_FFN : kv > 0 ? LL_LAYER_ATTN : LL_LAYER_MAMBA;
        if (ff > 0 && (st = ll_hp_width(m, "embedding_length x feed_forward_length", h->n_embd, ff))) return st;
        h->head_dim_l[l] = D; h->n_rot_l[l] = 0; h->swa_l[l] = 0; h->rope_base_l[l] = 0; h->rope_freqs_l[l] = NULL;
        h->kv_src_l[l] = h->kind_l[l] == LL_LAYER_ATTN ? l : -1;
        if (h->kind_l[l] == LL_LAYER_ATTN) {
            n_attn++;
            if (h->n_head < 1 || D < 1 || h->n_head % kv)
                return ll_error(LLAMBDA_ERR_FORMAT, "%s: attention layer %d has %d KV heads for %d heads", m->arch_name, l, kv, h->n_head);
        } else h->n_head_kv_l[l] = 0;
    }
    int64_t ch64 = (int64_t)h->ssm_d_inner + 2 * (int64_t)h->ssm_n_group * h->ssm_d_state;
    if (h->ssm_d_inner > 0 &&   /* widths of the Mamba-2 state and conv buffers fit an int */
        ((st = ll_hp_width(m, "ssm inner size x state size", h->ssm_d_inner, h->ssm_d_state)) ||
         (st = ll_hp_width(m, "ssm conv channels x conv kernel", ch64, h->ssm_conv_k > 0 ? h->ssm_conv_k : 1)))) return st;
    int ch = (int)ch64;
    for (int l = 0; l < L; l++)
        if (h->kind_l[l] == LL_LAYER_MAMBA) {
            h->rs_conv_l[l] = (h->ssm_conv_k - 1) * ch;
            h->rs_state_l[l] = h->ssm_d_inner * h->ssm_d_state;
        }
    h->arch_scratch = ch;   /* per token: the Mamba-2 conv outputs of a run */
    h->head_dim = D; h->n_head_kv = n_attn ? h->n_head_kv_l[0] : 0;
    h->rope_type = LL_ROPE_NONE;
    h->rope_freq_scale = 1.0f; h->rope_attn_factor = 1.0f;
    h->n_vocab = m->vocab.n_vocab;
    return LLAMBDA_OK;
}

static llambda_status nemotron_load(llambda_model *m) {
    llambda_status st;
    if ((st = nemotron_hparams(m))) return st;
    ll_hparams *h = &m->hp;
    int E = h->n_embd, d_in = h->ssm_d_inner, G = h->ssm_n_group, N = h->ssm_d_state, H = h->ssm_n_head, K = h->ssm_conv_k;
    if ((st = ll_bind_dense_globals(m))) return st;
    for (int l = 0; l < h->n_layer; l++) {
        ll_layer *Y = &m->layers[l];
        if ((st = ll_bind(m, &Y->attn_norm, 1, E, 0, "blk.%d.attn_norm.weight", l))) return st;
        switch (h->kind_l[l]) {
        case LL_LAYER_MAMBA:
            if ((st = ll_bind(m, &Y->ssm_in, 1, E, 2 * d_in + 2 * G * N + H, "blk.%d.ssm_in.weight", l)) ||
                (st = ll_bind(m, &Y->ssm_conv, 1, K, d_in + 2 * G * N, "blk.%d.ssm_conv1d.weight", l)) ||
                (st = ll_bind(m, &Y->ssm_conv_b, 1, d_in + 2 * G * N, 0, "blk.%d.ssm_conv1d.bias", l)) ||
                (st = ll_bind(m, &Y->ssm_dt_b, 1, H, 0, "blk.%d.ssm_dt.bias", l)) ||
                (st = ll_bind(m, &Y->ssm_a, 1, 1, H, "blk.%d.ssm_a", l)) ||
                (st = ll_bind(m, &Y->ssm_d, 1, 1, H, "blk.%d.ssm_d", l)) ||
                (st = ll_bind(m, &Y->ssm_norm, 1, d_in / G, G, "blk.%d.ssm_norm.weight", l)) ||
                (st = ll_bind(m, &Y->ssm_out, 1, d_in, E, "blk.%d.ssm_out.weight", l)))
                return st;
            if (Y->ssm_conv.type != LLAMBDA_TYPE_F32 || Y->ssm_a.type != LLAMBDA_TYPE_F32 || Y->ssm_d.type != LLAMBDA_TYPE_F32 ||
                Y->ssm_norm.type != LLAMBDA_TYPE_F32)
                return ll_error(LLAMBDA_ERR_UNSUPPORTED, "blk.%d: ssm_conv1d, ssm_a, ssm_d and ssm_norm must be F32", l);
            break;
        case LL_LAYER_ATTN: {
            int qd = h->n_head * h->head_dim, kvd = h->n_head_kv_l[l] * h->head_dim;
            if ((st = ll_bind(m, &Y->wq, 1, E, qd, "blk.%d.attn_q.weight", l)) || (st = ll_bind(m, &Y->wk, 1, E, kvd, "blk.%d.attn_k.weight", l)) ||
                (st = ll_bind(m, &Y->wv, 1, E, kvd, "blk.%d.attn_v.weight", l)) || (st = ll_bind(m, &Y->wo, 1, qd, E, "blk.%d.attn_output.weight", l)) ||
                (st = ll_bind(m, &Y->bq, 0, qd, 0, "blk.%d.attn_q.bias", l)) || (st = ll_bind(m, &Y->bk, 0, kvd, 0, "blk.%d.attn_k.bias", l)) ||
                (st = ll_bind(m, &Y->bv, 0, kvd, 0, "blk.%d.attn_v.bias", l)) || (st = ll_bind(m, &Y->bo, 0, E, 0, "blk.%d.attn_output.bias", l)))
                return st;
            break;
        }
        default:
            if (is_moe(m)) {
                int X = h->n_expert, FX = h->n_ff_exp;
                ll_moe *e = &Y->moe;
                ll_weight bias;
                int Fs = 0;
                if ((st = ll_hp_u32(m, "expert_shared_feed_forward_length", 1, 0, &Fs))) return st;
                if ((st = ll_bind(m, &e->router, 1, E, X, "blk.%d.ffn_gate_inp.weight", l)) ||
                    (st = ll_bind(m, &bias, 1, X, 0, "blk.%d.exp_probs_b.bias", l)) ||
                    (st = ll_bind3(m, &e->gate, 1, E, FX, X, "blk.%d.ffn_up_exps.weight", l)) ||   /* the one projection in */
                    (st = ll_bind3(m, &e->down, 1, FX, E, X, "blk.%d.ffn_down_exps.weight", l)) ||
                    (st = ll_bind(m, &Y->up_shexp, 1, E, Fs, "blk.%d.ffn_up_shexp.weight", l)) ||
                    (st = ll_bind(m, &Y->down_shexp, 1, Fs, E, "blk.%d.ffn_down_shexp.weight", l)))
                    return st;
                e->sel_bias = (const float *)bias.data;
                e->n_expert = X; e->n_used = h->n_expert_used; e->n_ff = FX;
                e->gating = LL_MOE_SIGMOID; e->act = LL_ACT_RELU2;
                e->n_group = h->ssm_n_group_moe; e->n_group_used = h->n_group_used_moe;
                e->norm_weights = llambda_gguf_get_bool(m->gguf, "nemotron_h_moe.expert_weights_norm", false);
                if ((st = ll_hp_f32(m, "expert_weights_scale", 0, 0.f, &e->weight_scale))) return st;
            } else {
                int F = h->n_ff_l[l];
                if ((st = ll_bind(m, &Y->w_up, 1, E, F, "blk.%d.ffn_up.weight", l)) || (st = ll_bind(m, &Y->w_down, 1, F, E, "blk.%d.ffn_down.weight", l)) ||
                    (st = ll_bind(m, &Y->bq, 0, F, 0, "blk.%d.ffn_up.bias", l)) || (st = ll_bind(m, &Y->bo, 0, E, 0, "blk.%d.ffn_down.bias", l)))
                    return st;
            }
        }
    }
    return LLAMBDA_OK;
}

/* u = RMSNorm(x)·attn_norm; x += mixer(u) */
static llambda_status nemotron_forward(struct llambda_context *c, const int32_t *tokens, int n, int pos, float *logits, const uint8_t *want) {
    const llambda_model *m = c->m;
    const ll_hparams *h = &m->hp;
    int E = h->n_embd;
    for (int t = 0; t < n; t++) ll_embed(&m->tok_embd, tokens[t], c->x + (size_t)t * E);
    for (int l = 0; l < h->n_layer; l++) {
        const ll_layer *Y = &m->layers[l];
        ll_rms_norm_rows_tokens(c, c->xb, c->x, &Y->attn_norm, E, 1, n, h->eps);
        ll_prefetch_small(ll_next_layer_norm(m, l));   /* arrives meanwhile */
        switch (h->kind_l[l]) {
        case LL_LAYER_MAMBA:
            ll_mamba2(c, Y, l, c->xb, n, c->xb2);
            break;
        case LL_LAYER_ATTN: {
            ll_matmul_op qkv[3] = {{&Y->wq, c->xb, n, c->q}, {&Y->wk, c->xb, n, c->k}, {&Y->wv, c->xb, n, c->v}};
            ll_matmul_many(c, qkv, 3);   /* one pool task */
            ll_add_bias(c->q, &Y->bq, n);
            ll_add_bias(c->k, &Y->bk, n);
            ll_add_bias(c->v, &Y->bv, n);
            ll_kv_store(c, l, c->k, c->v, n, pos);
            ll_attention(c, l, c->q, n, pos, c->att);
            ll_matmul(c, &Y->wo, c->att, n, c->xb2); ll_add_bias(c->xb2, &Y->bo, n);
            break;
        }
        default:
            if (Y->moe.n_expert > 0) {
                int Fs = (int)Y->up_shexp.rows;
                ll_matmul_op shared_up = {&Y->up_shexp, c->xb, n, c->hb};
                /* the shared expert's input with the router, its down with the experts' */
                ll_moe_shared sh = {LL_ACT_RELU2, c->hb, NULL, Fs, &Y->down_shexp, c->hb2};
                ll_moe_forward(c, &Y->moe, c->xb, c->xb, n, c->xb2, &shared_up, 1, &sh);
                ll_add_tokens(c, c->xb2, c->hb2, E, n);
            } else {
                int F = h->n_ff_l[l];
                ll_matmul(c, &Y->w_up, c->xb, n, c->hb); ll_add_bias(c->hb, &Y->bq, n);
                ll_relu2(c->hb, (int64_t)n * F);
                ll_matmul(c, &Y->w_down, c->hb, n, c->xb2); ll_add_bias(c->xb2, &Y->bo, n);
            }
        }
        ll_add_tokens(c, c->x, c->xb2, E, n);
    }
    ll_output_head(c, n, logits, want);
    return LLAMBDA_OK;
}

const ll_arch ll_arch_nemotron_h_moe = {"nemotron_h_moe", nemotron_load, nemotron_forward};
const ll_arch ll_arch_nemotron_h = {"nemotron_h", nemotron_load, nemotron_forward};
