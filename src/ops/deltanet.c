/* Gated DeltaNet mixer (qwen3next.md §3.1): qkv and gate projections, causal depthwise
 * conv (no bias) with SiLU, L2-normalised q and k, beta = ll_sigmoid(b), decay from
 * ssm_a·ll_softplus(a + dt_bias), the delta-rule update of a per-value-head S×S memory with
 * the read-out after the update (scaled by 1/sqrt(S)), gated RMSNorm with SiLU(z), and
 * the output projection. Tokens are walked in order, so batching never changes the state. */
#include "../model.h"


/* x / max(||x||, eps), squares summed in double */
static void l2_normalize(float *x, int n, float eps) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)(x[i] * x[i]);
    float scale = 1.0f / fmaxf(sqrtf((float)s), eps);
    for (int i = 0; i < n; i++) x[i] *= scale;
}

/* One token through the value heads: each updates its own S×S memory. */
typedef struct dn_heads {
    const ll_kernels *kn;
    int S, r, Hv;
    const float *ba, *A, *dtb, *q, *k, *v, *z, *nw;
    float *M, *y;
    float inv_sqrt_s, eps;
} dn_heads;

static void dn_head(const dn_heads *d, int hv) {
    int S = d->S, r = d->r, g = hv / r;
    /* b and a of value head hv, key-group-major: [b of the group's r heads, a of them] */
    float b = d->ba[g * 2 * r + (hv % r)], a = d->ba[g * 2 * r + r + (hv % r)];
    float beta = ll_sigmoid(b), decay = expf(d->A[hv] * ll_softplus(a + d->dtb[hv]));
    const float *kh = d->k + g * S, *qh = d->q + g * S, *vh = d->v + hv * S;
    float *Mh = d->M + (size_t)hv * S * S, *o = d->y + hv * S;
    for (size_t i = 0; i < (size_t)S * S; i++) Mh[i] *= decay;
    for (int j = 0; j < S; j++) {
        float *row = Mh + (size_t)j * S, pred, rd;
        d->kn->vec_dot[LLAMBDA_TYPE_F32](S, &pred, row, kh);
        float delta = beta * (vh[j] - pred);
        d->kn->axpy(row, kh, delta, S);   /* row += kh · delta, fused */
        d->kn->vec_dot[LLAMBDA_TYPE_F32](S, &rd, row, qh);
        o[j] = rd * d->inv_sqrt_s;
    }
    /* gated RMSNorm over the head: RMSNorm(o)·w ⊙ ll_silu(z) */
    double ss = 0;
    for (int j = 0; j < S; j++) ss += (double)(o[j] * o[j]);
    float sc = 1.0f / sqrtf((float)(ss / S) + d->eps);
    for (int j = 0; j < S; j++) o[j] = ((o[j] * sc) * d->nw[j]) * ll_silu(d->z[hv * S + j]);
}

static void dn_heads_task(void *arg, int ith, int nth) {
    const dn_heads *d = arg;
    for (int hv = ith; hv < d->Hv; hv += nth) dn_head(d, hv);
}

void ll_deltanet(struct llambda_context *c, const ll_layer *Y, int layer, const float *u, int n, float *out) {
    const ll_hparams *h = &c->m->hp;
    const ll_kernels *kn = ll_kernels_get();
    int S = h->ssm_d_state, Hk = h->ssm_n_group, Hv = h->ssm_n_head, K = h->ssm_conv_k, r = Hv / Hk;
    int key_dim = Hk * S, value_dim = Hv * S, conv_dim = 2 * key_dim + value_dim;
    /* arch_buf per token: qkv [conv_dim] | z [value_dim] | ba [2 Hv] | conv out [conv_dim] | y [value_dim] */
    size_t per = (size_t)h->arch_scratch;
    float *buf = c->arch_buf;
    float *cs = c->conv_state[layer], *M = c->ssm_state[layer];
    const float *cw = (const float *)Y->ssm_conv.data, *A = (const float *)Y->ssm_a.data, *dtb = (const float *)Y->ssm_dt_b.data;
    const float *nw = (const float *)Y->ssm_norm.data;
    float *qkv0 = c->hb, *z0 = c->hb2;   /* batched projections */
    if (Y->attn_qkv.data) {
        ll_matmul(c, &Y->attn_qkv, u, n, qkv0);
        ll_matmul(c, &Y->attn_gate, u, n, z0);
    } else {
        /* legacy fused ssm_in: per key head [q_g, k_g, v_g (r·S), z_g (r·S)] */
        float *p = buf;   /* [n][2 key_dim + 2 value_dim] fits in arch_buf */
        ll_matmul(c, &Y->ssm_in_legacy, u, n, p);
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
    float *ba0 = buf + (size_t)n * (size_t)(2 * key_dim + 2 * value_dim);   /* after the legacy area */
    ll_matmul(c, &Y->ssm_ba, u, n, ba0);
    float *ys = c->att;   /* [n][value_dim] gated outputs */
    float inv_sqrt_s = 1.0f / sqrtf((float)S);
    for (int t = 0; t < n; t++) {
        float *x = qkv0 + (size_t)t * conv_dim, *z = z0 + (size_t)t * value_dim, *ba = ba0 + (size_t)t * 2 * Hv;
        float *co = buf + per * 0 + (size_t)n * (size_t)(2 * key_dim + 2 * value_dim) + (size_t)n * 2 * Hv; /* conv out, one token */
        (void)per;
        for (int ch = 0; ch < conv_dim; ch++) {
            const float *w = cw + (size_t)ch * K;
            float sum = 0.0f;
            for (int k = 0; k < K - 1; k++) sum = fmaf(cs[(size_t)k * conv_dim + ch], w[k], sum);
            sum = fmaf(x[ch], w[K - 1], sum);
            co[ch] = ll_silu(sum);
        }
        if (K > 1) {
            memmove(cs, cs + conv_dim, (size_t)(K - 2) * conv_dim * sizeof *cs);
            memcpy(cs + (size_t)(K - 2) * conv_dim, x, (size_t)conv_dim * sizeof *cs);
        }
        float *q = co, *k = co + key_dim, *v = co + 2 * key_dim;
        for (int g = 0; g < Hk; g++) { l2_normalize(q + g * S, S, h->eps); l2_normalize(k + g * S, S, h->eps); }
        dn_heads d = {kn, S, r, Hv, ba, A, dtb, q, k, v, z, nw, M, ys + (size_t)t * value_dim, inv_sqrt_s, h->eps};
        ll_pool_run(c->pool, dn_heads_task, &d);   /* value heads are independent: split across threads */
    }
    ll_matmul(c, &Y->ssm_out, ys, n, out);
}
