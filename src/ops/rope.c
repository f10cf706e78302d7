/* Rotary position embedding. Angles follow llama.cpp's f32 running product:
 * t_0 = pos, t_{i+1} = t_i · base^(-2/n_rot); θ_i = freq_scale · t_i / freq_factor_i. */
#include "../model.h"

void ll_rope_cache(struct llambda_context *c, float *cs, int n_tok, int pos0, int n_rot, float base, const float *freqs) {
    const ll_hparams *h = &c->m->hp;
    int half = n_rot / 2;
    float theta_scale = powf(base, -2.0f / (float)n_rot);
    for (int t = 0; t < n_tok; t++) {
        float theta = (float)(pos0 + t);
        float *row = cs + (size_t)t * (size_t)half * 2;
        for (int i = 0; i < half; i++) {
            float ff = freqs ? freqs[i] : 1.0f;
            float th = h->rope_freq_scale * (theta / ff);
            row[2 * i] = cosf(th) * h->rope_attn_factor;
            row[2 * i + 1] = sinf(th) * h->rope_attn_factor;
            theta *= theta_scale;
        }
    }
}

/* One head. In this portable file fmaf is a libm call: a llama-3.2-1b token's 40 heads took
 * 5-7 us a layer so, hence the vector kernels' rope_head. */
static void rope_head_scalar(float *v, int half, int neox, const float *row) {
    for (int i = 0; i < half; i++) {
        int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        float x0 = v[a], x1 = v[b], co = row[2 * i], si = row[2 * i + 1];
        /* fused as llama.cpp's build contracts them: x0·cos − (x1·sin), x0·sin + (x1·cos) */
        v[a] = fmaf(x0, co, -(x1 * si));
        v[b] = fmaf(x0, si, x1 * co);
    }
}

void ll_rope(const ll_hparams *h, float *x, int n_tok, int n_heads, int D, int stride, int n_rot, const float *cs) {
    int half = n_rot / 2, neox = h->rope_type == LL_ROPE_NEOX;
    const ll_kernels *k = ll_kernels_get();
    void (*head)(float *, int, int, const float *) = k->rope_head ? k->rope_head : rope_head_scalar;
    for (int t = 0; t < n_tok; t++) {
        const float *row = cs + (size_t)t * (size_t)half * 2;
        for (int hd = 0; hd < n_heads; hd++) head(x + (size_t)t * (size_t)stride + (size_t)hd * (size_t)D, half, neox, row);
    }
}

typedef struct { const ll_hparams *h; float *x; int n_heads, D, stride, n_rot; const float *cs; } rope_args;
static void rope_range(void *a, int t0, int t1) {
    const rope_args *r = a;
    ll_rope(r->h, r->x + (size_t)t0 * (size_t)r->stride, t1 - t0, r->n_heads, r->D, r->stride, r->n_rot,
            r->cs + (size_t)t0 * (size_t)(r->n_rot / 2) * 2);
}
/* ll_rope over a prompt's tokens on every pool thread (ll_for_tokens) */
void ll_rope_tokens(struct llambda_context *c, float *x, int n_tok, int n_heads, int D, int stride, int n_rot, const float *cs) {
    rope_args r = {&c->m->hp, x, n_heads, D, stride, n_rot, cs};
    ll_for_tokens(c, n_tok, rope_range, &r);
}
