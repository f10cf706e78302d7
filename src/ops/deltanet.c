/* Gated DeltaNet mixer (qwen3next.md §3.1): qkv and gate projections, causal depthwise
 * conv (no bias) with SiLU, L2-normalised q and k, beta = ll_sigmoid(b), decay from
 * ssm_a·ll_softplus(a + dt_bias), the delta-rule update of a per-value-head S×S memory with
 * the read-out after the update (scaled by 1/sqrt(S)), gated RMSNorm with SiLU(z), and
 * the output projection. Each head walks the tokens in order, so batching never changes
 * the state. */
#include "../model.h"


/* The value heads over a run of tokens: each updates its own S×S memory, tokens in order. */
typedef struct dn_heads {
    const ll_kernels *kn;
    int S, r, Hv, n;
    const float *ba, *A, *dtb, *q, *k, *v, *z, *nw;   /* token 0's; per-token strides below */
    size_t ba_stride, qkv_stride, z_stride, y_stride;
    float *M, *y;
    float inv_sqrt_s, eps;
} dn_heads;

static void dn_head(const dn_heads *d, int hv, int t) {
    int S = d->S, r = d->r, g = hv / r;
    const float *ba = d->ba + (size_t)t * d->ba_stride, *z = d->z + (size_t)t * d->z_stride;
    /* b and a of value head hv, key-group-major: [b of the group's r heads, a of them] */
    float b = ba[g * 2 * r + (hv % r)], a = ba[g * 2 * r + r + (hv % r)];
    float beta = ll_sigmoid(b), decay = expf(d->A[hv] * ll_softplus(a + d->dtb[hv]));
    size_t qo = (size_t)t * d->qkv_stride;
    const float *kh = d->k + qo + g * S, *qh = d->q + qo + g * S, *vh = d->v + qo + hv * S;
    float *Mh = d->M + (size_t)hv * S * S, *o = d->y + (size_t)t * d->y_stride + hv * S;
    /* decay, read against k, delta-rule update (row += k·beta·(v - pred)), read against q */
    d->kn->deltanet_rows(Mh, kh, qh, vh, decay, beta, d->inv_sqrt_s, o, S);
    /* gated RMSNorm over the head: RMSNorm(o)·w ⊙ ll_silu(z) */
    double ss = ll_sum_squares(o, S);
    float sc = 1.0f / sqrtf((float)(ss / S) + d->eps);
    float sz[256];   /* silu(z), a chunk at a time */
    for (int j0 = 0; j0 < S; j0 += 256) {
        int m = S - j0 < 256 ? S - j0 : 256;
        d->kn->silu(sz, z + hv * S + j0, m);
        for (int j = 0; j < m; j++) o[j0 + j] = ((o[j0 + j] * sc) * d->nw[j0 + j]) * sz[j];
    }
}

/* Each thread takes a contiguous run of heads, so its memories stream from one place
 * (interleaved heads left every 64 KiB memory of a 128-state head a fresh stream start). */
static void dn_heads_task(void *arg, int ith, int nth) {
    const dn_heads *d = arg;
    int h0 = (int)((int64_t)d->Hv * ith / nth), h1 = (int)((int64_t)d->Hv * (ith + 1) / nth);
    for (int hv = h0; hv < h1; hv++)
        for (int t = 0; t < d->n; t++) dn_head(d, hv, t);
}

void ll_deltanet(struct llambda_context *c, const ll_layer *Y, int layer, const float *u, int n, float *out) {
    const ll_hparams *h = &c->m->hp;
    const ll_kernels *kn = ll_kernels_get();
    int S = h->ssm_d_state, Hk = h->ssm_n_group, Hv = h->ssm_n_head, K = h->ssm_conv_k, r = Hv / Hk;
    int key_dim = Hk * S, value_dim = Hv * S, conv_dim = 2 * key_dim + value_dim;
    /* arch_buf: [n][2 key_dim + 2 value_dim] (the legacy split) | [n][2 Hv] ba | [n][conv_dim] conv out */
    float *buf = c->arch_buf;
    float *cs = c->conv_state[layer], *M = c->ssm_state[layer];
    const float *cw = (const float *)Y->ssm_conv.data, *A = (const float *)Y->ssm_a.data, *dtb = (const float *)Y->ssm_dt_b.data;
    const float *nw = (const float *)Y->ssm_norm.data;
    float *qkv0 = c->hb, *z0 = c->hb2;   /* batched projections */
    float *ba0 = buf + (size_t)n * (size_t)(2 * key_dim + 2 * value_dim);   /* after the legacy area */
    if (Y->attn_qkv.data) {
        ll_matmul_op in[3] = {{&Y->attn_qkv, u, n, qkv0}, {&Y->attn_gate, u, n, z0}, {&Y->ssm_ba, u, n, ba0}};
        ll_matmul_many(c, in, 3);   /* one pool task */
    } else {
        /* legacy fused ssm_in: per key head [q_g, k_g, v_g (r·S), z_g (r·S)] */
        float *p = buf;   /* [n][2 key_dim + 2 value_dim] fits in arch_buf */
        ll_matmul_op in[2] = {{&Y->ssm_in_legacy, u, n, p}, {&Y->ssm_ba, u, n, ba0}};
        ll_matmul_many(c, in, 2);
        int per_g = 2 * S + 2 * r * S;
        for (int t = 0; t < n; t++) {
            const float *pt = p + (size_t)t * (size_t)(2 * key_dim + 2 * value_dim);
            float *q = qkv0 + (size_t)t * conv_dim, *k = q + key_dim, *v = k + key_dim, *z = z0 + (size_t)t * value_dim;
            for (int g = 0; g < Hk; g++) {
                const float *src = pt + (size_t)g * per_g;
                memcpy(q + g * S, src, (size_t)S * 4);
                memcpy(k + g * S, src + S, (size_t)S * 4);
                memcpy(v + g * r * S, src + 2 * S, (size_t)r * S * 4);
                memcpy(z + g * r * S, src + 2 * S + r * S, (size_t)r * S * 4);
            }
        }
    }
    float *ys = c->att;   /* [n][value_dim] gated outputs */
    float *co = ba0 + (size_t)n * 2 * Hv;   /* [n][conv_dim] conv outputs */
    /* conv + SiLU of all tokens, S channels a unit; q and k groups then L2-normalised */
    ll_conv_silu(c, qkv0, (size_t)conv_dim, cw, NULL, cs, co, n, K, conv_dim, S, 2 * Hk, h->eps);
    dn_heads d = {kn, S, r, Hv, n, ba0, A, dtb, co, co + key_dim, co + 2 * key_dim, z0, nw,
                  (size_t)2 * Hv, (size_t)conv_dim, (size_t)value_dim, (size_t)value_dim, M, ys, 1.0f / sqrtf((float)S), h->eps};
    ll_pool_run(c->pool, dn_heads_task, &d);   /* value heads are independent: split across threads */
    ll_matmul(c, &Y->ssm_out, ys, n, out);
}
