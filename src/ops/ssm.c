/* Mamba-2 mixer (nemotron-h-moe.md §3.1): input projection into z, xBC, dt; causal
 * depthwise conv over xBC with a rolling state, SiLU; the selective scan per head with
 * grouped B/C; D skip; y ⊙ SiLU(z); grouped RMSNorm; output projection.
 * Projections run as one matmul over the batch; the conv and each head's scan walk the
 * tokens in order, so any batch split gives the same state and outputs.
 * The scan reduces each output over the state in llama.cpp's AVX-512 layout (4 x 16
 * lanes, fused accumulation, halves reduced), so results match its CPU kernel. */
#include "../model.h"


/* The causal depthwise conv with SiLU of both recurrent mixers, for every token of a run,
 * channels split across threads in runs of whole units. Token t sees inputs t-K+1..t, the first
 * from the conv state, the rest from the run, taps in order as one token at a time would
 * add them; each channel's state then keeps its last K-1 inputs. The first n_norm units
 * are L2-normalised per token afterwards (DeltaNet's q and k groups). */
typedef struct conv_run {
    const float *x;          /* token t's inputs at x + t·x_stride */
    size_t x_stride;
    const float *w, *bias;   /* [C][K] taps; bias or NULL */
    float *cs, *co;          /* [K-1][C] state; [n][C] outputs */
    int n, K, C, unit, n_norm;
    float eps;
} conv_run;

static void l2_normalize(float *x, int n, float eps) {   /* x / max(||x||, eps), squares summed in double */
    double s = ll_sum_squares(x, n);
    float scale = 1.0f / fmaxf(sqrtf((float)s), eps);
    for (int i = 0; i < n; i++) x[i] *= scale;
}

/* Row k of the conv's window for token t: input t - (K-1) + k, from the state when negative. */
static const float *conv_input(const conv_run *d, int t, int k) {
    int idx = t - (d->K - 1) + k;
    return idx < 0 ? d->cs + (size_t)(idx + d->K - 1) * (size_t)d->C : d->x + (size_t)idx * d->x_stride;
}

static void conv_task(void *arg, int ith, int nth) {
    const conv_run *d = arg;
    const ll_kernels *kn = ll_kernels_get();
    int K = d->K, C = d->C, units = (C + d->unit - 1) / d->unit;
    int u0 = (int)((int64_t)units * ith / nth), u1 = (int)((int64_t)units * (ith + 1) / nth);   /* a contiguous run */
    for (int u = u0; u < u1; u++) {
        int c0 = u * d->unit, end = (u + 1) * d->unit < C ? (u + 1) * d->unit : C;
        const float *src[LL_MAX_CONV_K];
        for (int t = 0; t < d->n; t++) {
            for (int k = 0; k < K; k++) src[k] = conv_input(d, t, k) + c0;
            kn->conv_silu(d->co + (size_t)t * C + c0, src, d->w + (size_t)c0 * K, K, d->bias ? d->bias + c0 : NULL, end - c0);
        }
        for (int k = 0; k < K - 1; k++)   /* the new state: inputs n-K+1..n-1, oldest first (a state row
                                           * is read, if at all, before it is overwritten) */
            memcpy(d->cs + (size_t)k * C + c0, conv_input(d, d->n, k) + c0, (size_t)(end - c0) * sizeof(float));
        if (u < d->n_norm)
            for (int t = 0; t < d->n; t++) l2_normalize(d->co + (size_t)t * C + (size_t)u * d->unit, d->unit, d->eps);
    }
}

void ll_conv_silu(struct llambda_context *c, const float *x, size_t x_stride, const float *w, const float *bias, float *cs,
                  float *co, int n, int K, int C, int unit, int n_norm, float eps) {
    conv_run d = {x, x_stride, w, bias, cs, co, n, K, C, unit, n_norm, eps};
    ll_pool_run(c->pool, conv_task, &d);
}

/* The selective scan of a run of tokens, head by head: each head owns its P state rows and
 * walks the tokens in order. Each thread takes a contiguous run of heads, so its state
 * streams from one place. */
typedef struct ssm_heads {
    const ll_kernels *kn;
    int P, N, heads_per_group, H, n;
    const float *xs, *dt, *dtb, *A, *D;   /* token t: xs + t·CH (x | B | C), dt + t·W */
    size_t xs_stride, dt_stride, y_stride;
    int d_in, GN;
    float *ss, *y;
} ssm_heads;

static void ssm_heads_task(void *arg, int ith, int nth) {
    const ssm_heads *s = arg;
    int h0 = (int)((int64_t)s->H * ith / nth), h1 = (int)((int64_t)s->H * (ith + 1) / nth);   /* a contiguous run */
    for (int hh = h0; hh < h1; hh++)
        for (int t = 0; t < s->n; t++) {
            const float *x = s->xs + (size_t)t * s->xs_stride, *B = x + s->d_in, *Cm = B + s->GN;
            float *y = s->y + (size_t)t * s->y_stride;
            float dsp = ll_softplus(s->dt[(size_t)t * s->dt_stride + hh] + s->dtb[hh]);
            float dA = expf(dsp * s->A[hh]);
            int g = hh / s->heads_per_group;
            const float *Bg = B + (size_t)g * s->N, *Cg = Cm + (size_t)g * s->N;
            for (int p = 0; p < s->P; p++) {
                int ii = hh * s->P + p;
                float xdt = x[ii] * dsp;
                y[ii] = s->kn->ssm_scan(s->ss + (size_t)ii * s->N, Bg, Cg, dA, xdt, s->N) + x[ii] * s->D[hh];
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
    float *xs = c->arch_buf;                     /* [n][CH] conv outputs */
    ll_matmul(c, &Y->ssm_in, u, n, proj);
    ll_conv_silu(c, proj + d_in, (size_t)W, cw, cb, cs, xs, n, K, CH, 64, 0, 0.0f);
    ssm_heads sh = {ll_kernels_get(), P, N, heads_per_group, H, n, xs, proj + d_in + CH, dtb, A, D,
                    (size_t)CH, (size_t)W, (size_t)d_in, d_in, G * N, ss, ys};
    ll_pool_run(c->pool, ssm_heads_task, &sh);   /* heads are independent: split across threads */
    const float *nw = (const float *)Y->ssm_norm.data;
    for (int t = 0; t < n; t++) {
        float *z = proj + (size_t)t * W, *y = ys + (size_t)t * d_in;
        /* gate: y ⊙ ll_silu(z), written into z, then the grouped norm */
        ll_swiglu(z, y, d_in);
        ll_rms_norm_rows(y, z, NULL, d_in / G, G, h->eps);
        for (int i = 0; i < d_in; i++) y[i] *= nw[i];
    }
    ll_matmul(c, &Y->ssm_out, ys, n, out);
}
