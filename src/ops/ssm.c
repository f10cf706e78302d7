/* Mamba-2 mixer (nemotron-h-moe.md §3.1): input projection into z, xBC, dt; causal
 * depthwise conv over xBC with a rolling state, SiLU; the selective scan per head with
 * grouped B/C; D skip; y ⊙ SiLU(z); grouped RMSNorm; output projection.
 * Projections run as one matmul over the batch; the conv and scan walk the tokens in
 * order, so any batch split gives the same state and outputs.
 * The scan reduces each output over the state in llama.cpp's AVX-512 layout (4 x 16
 * lanes, fused accumulation, halves reduced), so results match its CPU kernel. */
#include "../model.h"


/* The selective scan of one token, head by head: each head owns its P state rows. */
typedef struct ssm_heads {
    const ll_kernels *kn;
    int P, N, heads_per_group, H;
    const float *x, *B, *C, *dt, *dtb, *A, *D;
    float *ss, *y;
} ssm_heads;

static void ssm_heads_task(void *arg, int ith, int nth) {
    const ssm_heads *s = arg;
    for (int hh = ith; hh < s->H; hh += nth) {
        float dsp = ll_softplus(s->dt[hh] + s->dtb[hh]);
        float dA = expf(dsp * s->A[hh]);
        int g = hh / s->heads_per_group;
        const float *Bg = s->B + (size_t)g * s->N, *Cg = s->C + (size_t)g * s->N;
        for (int p = 0; p < s->P; p++) {
            int ii = hh * s->P + p;
            float xdt = s->x[ii] * dsp;
            s->y[ii] = s->kn->ssm_scan(s->ss + (size_t)ii * s->N, Bg, Cg, dA, xdt, s->N) + s->x[ii] * s->D[hh];
        }
    }
}

void ll_mamba2(struct llambda_context *c, const ll_layer *Y, int layer, const float *u, int n, float *out) {
    const ll_hparams *h = &c->m->hp;
    int d_in = h->ssm_d_inner, N = h->ssm_d_state, G = h->ssm_n_group, H = h->ssm_n_head, K = h->ssm_conv_k;
    int P = d_in / H, CH = d_in + 2 * G * N, W = 2 * d_in + 2 * G * N + H, heads_per_group = H / G;
    float *proj = c->hb, *ys = c->hb2;           /* [n][W] projections, [n][d_in] mixer outputs */
    float *cs = c->conv_state[layer], *ss = c->ssm_state[layer];
    const float *cw = (const float *)Y->ssm_conv.data, *cb = (const float *)Y->ssm_conv_b.data;
    const float *dtb = (const float *)Y->ssm_dt_b.data, *A = (const float *)Y->ssm_a.data, *D = (const float *)Y->ssm_d.data;
    float *xs = c->att;                          /* [CH] conv output of one token */
    ll_matmul(c, &Y->ssm_in, u, n, proj);
    for (int t = 0; t < n; t++) {
        float *z = proj + (size_t)t * W, *xbc = z + d_in, *dt = xbc + CH, *y = ys + (size_t)t * d_in;
        /* causal conv: window = K-1 stored inputs (oldest first) then this token's */
        for (int ch = 0; ch < CH; ch++) {
            const float *w = cw + (size_t)ch * K;
            float sum = 0.0f;
            for (int k = 0; k < K - 1; k++) sum = fmaf(cs[(size_t)k * CH + ch], w[k], sum);
            sum = fmaf(xbc[ch], w[K - 1], sum);
            xs[ch] = ll_silu(sum + cb[ch]);
        }
        if (K > 1) {
            memmove(cs, cs + CH, (size_t)(K - 2) * CH * sizeof *cs);
            memcpy(cs + (size_t)(K - 2) * CH, xbc, (size_t)CH * sizeof *cs);
        }
        ssm_heads sh = {ll_kernels_get(), P, N, heads_per_group, H, xs, xs + d_in, xs + d_in + G * N, dt, dtb, A, D, ss, y};
        ll_pool_run(c->pool, ssm_heads_task, &sh);   /* heads are independent: split across threads */
        /* gate: y ⊙ ll_silu(z), written into z, then the grouped norm */
        ll_swiglu(z, y, d_in);
        ll_rms_norm_rows(y, z, NULL, d_in / G, G, h->eps);
        const float *nw = (const float *)Y->ssm_norm.data;
        for (int i = 0; i < d_in; i++) y[i] *= nw[i];
    }
    ll_matmul(c, &Y->ssm_out, ys, n, out);
}
