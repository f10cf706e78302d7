/* Elementwise pieces: RMSNorm, SwiGLU, residual add. */
#include "../model.h"

/* y = x / sqrt(mean(x²) + eps) ⊙ w; squares summed in double, as llama.cpp does. */
void ll_rms_norm(float *y, const float *x, const ll_weight *w, int n, float eps) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    float mean = (float)(sum / n);
    float scale = 1.0f / sqrtf(mean + eps);
    const float *wt = (const float *)w->data;
    for (int i = 0; i < n; i++) y[i] = (x[i] * scale) * wt[i];
}

/* g = silu(g) ⊙ u */
void ll_swiglu(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void ll_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}
