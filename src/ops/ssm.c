/* Mamba-2 mixer (nemotron-h-moe.md §3.1): input projection into z, xBC, dt; causal
 * depthwise conv over xBC with a rolling state, SiLU; the selective scan per head with
 * grouped B/C; D skip; y ⊙ SiLU(z); grouped RMSNorm; output projection.
 * Projections run as one matmul over the batch; the conv and scan walk the tokens in
 * order, so any batch split gives the same state and outputs.
 * The scan reduces each output over the state in llama.cpp's AVX-512 layout (4 x 16
 * lanes, fused accumulation, halves reduced), so results match its CPU kernel. */
#include "../model.h"


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
        const float *x = xs, *B = xs + d_in, *C = xs + d_in + G * N;
        for (int hh = 0; hh < H; hh++) {
            float dsp = ll_softplus(dt[hh] + dtb[hh]);
            float dA = expf(dsp * A[hh]);
            int g = hh / heads_per_group;
            const float *Bg = B + (size_t)g * N, *Cg = C + (size_t)g * N;
            for (int p = 0; p < P; p++) {
                int ii = hh * P + p;
                float xdt = x[ii] * dsp, *st = ss + (size_t)ii * N;
                float acc[4][16] = {{0}};
                int np = N & ~63, i = 0;
                for (; i < np; i++) {
                    float v = st[i] * dA + Bg[i] * xdt;   /* two products, then the add */
                    st[i] = v;
                    acc[(i % 64) / 16][i % 16] = fmaf(v, Cg[i], acc[(i % 64) / 16][i % 16]);
                }
                float sum = ll_reduce_4x16(acc);
                for (; i < N; i++) {
                    float v = st[i] * dA + Bg[i] * xdt;
                    st[i] = v;
                    sum = fmaf(v, Cg[i], sum);
                }
                y[ii] = sum + x[ii] * D[hh];
            }
        }
        /* gate: y ⊙ ll_silu(z), written into z, then the grouped norm */
        ll_swiglu(z, y, d_in);
        ll_rms_norm_rows(y, z, NULL, d_in / G, G, h->eps);
        const float *nw = (const float *)Y->ssm_norm.data;
        for (int i = 0; i < d_in; i++) y[i] *= nw[i];
    }
    ll_matmul(c, &Y->ssm_out, ys, n, out);
}
