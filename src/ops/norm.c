/* Elementwise pieces: RMSNorm, SwiGLU, residual add. */
#include "../model.h"
#include <pthread.h>

/* y = x / sqrt(mean(x²) + eps) ⊙ w; squares summed in double, as llama.cpp does. */
void ll_rms_norm(float *y, const float *x, const ll_weight *w, int n, float eps) { ll_rms_norm_rows(y, x, w, n, 1, eps); }

/* exp(x) as llama.cpp's AVX-512 SiLU computes it, so FFN activations round the same way:
 * n = round(x·log2 e) through the 1.5·2^23 shift, b = x − n·ln2 in two parts, a degree-5
 * polynomial for e^b, then an exact scaling by 2^n (scalef). */
float ll_exp_simd(float x) { return ll_exp_simd_inline(x); }

/* g = silu(g) ⊙ u over one row: vector lanes in groups of 16, the tail with libm expf,
 * exactly as llama.cpp's AVX-512 build splits it. */
void ll_swiglu(float *g, const float *u, int64_t n) {
    const ll_kernels *k = ll_kernels_get();
    if (k->swiglu) { k->swiglu(g, u, n); return; }
    ll_swiglu_scalar(g, u, n);
}

void ll_swiglu_scalar(float *g, const float *u, int64_t n) {
    int64_t body = n - n % 16;
    for (int64_t i = 0; i < body; i++) g[i] = g[i] / (1.0f + ll_exp_simd(-g[i])) * u[i];
    for (int64_t i = body; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* Squared ReLU (Nemotron-H's FFN and experts). The vector kernels matter: half the inputs
 * are negative at random, and this loop compiled with a branch spent 54-100 us of a
 * Nemotron token mispredicting over a token's six expert rows. */
void ll_relu2(float *x, int64_t n) {
    const ll_kernels *k = ll_kernels_get();
    if (k->relu2) { k->relu2(x, n); return; }
    ll_relu2_scalar(x, n);
}

void ll_relu2_scalar(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) { float r = x[i] > 0 ? x[i] : 0.0f; x[i] = r * r; }
}

/* y = ll_sigmoid(x) element by element (y may be x): expf through the kernels' row exp,
 * which gives libm's bits (checked at start-up, else it is libm), a chunk at a time. The
 * scalar loop was about 35 us of a Qwen3-Next token for one attention layer's 4096 gates. */
void ll_sigmoid_row(float *y, const float *x, int64_t n) {
    const ll_kernels *k = ll_kernels_get();
    float neg[256], e[256];
    for (int64_t i0 = 0; i0 < n; i0 += 256) {
        int m = n - i0 < 256 ? (int)(n - i0) : 256;
        for (int j = 0; j < m; j++) neg[j] = -x[i0 + j];
        k->expf_row(e, neg, m);
        for (int j = 0; j < m; j++) y[i0 + j] = 1.0f / (1.0f + e[j]);
    }
}

/* Σ x², each square rounded to float and summed in double, as llama.cpp does, but over
 * eight running sums (element i into sum i mod 8, added pairwise at the end) rather than
 * one chain of dependent double additions: 2048 squares from cache in 250 ns instead of
 * 1070, and a decode step runs its norms serially between products. In double the order
 * almost never shows after the rounding to float; the order is fixed, so the bits do not
 * depend on threads or batch size. */
typedef float f32x4 __attribute__((vector_size(16)));
typedef double f64x2 __attribute__((vector_size(16)));

double ll_sum_squares(const float *x, int64_t n) {
    f64x2 s01 = {0, 0}, s23 = {0, 0}, s45 = {0, 0}, s67 = {0, 0};   /* sums 0 and 1, 2 and 3, ... */
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        f32x4 a, b;
        memcpy(&a, x + i, sizeof a);
        memcpy(&b, x + i + 4, sizeof b);
        a *= a;
        b *= b;
        s01 += (f64x2){a[0], a[1]};
        s23 += (f64x2){a[2], a[3]};
        s45 += (f64x2){b[0], b[1]};
        s67 += (f64x2){b[2], b[3]};
    }
    double s[8] = {s01[0], s01[1], s23[0], s23[1], s45[0], s45[1], s67[0], s67[1]};
    for (int j = 0; i < n; i++, j++) s[j] += (double)(x[i] * x[i]);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* y += x, four lanes at a time. The plain loop stayed scalar (y and x may overlap, so
 * the compiler would not vectorize it without a runtime check): 0.76 us of a decode
 * step's serial path for 2048 floats, twice a layer. Each element's one addition is the
 * same either way, so are the bits. */
void ll_add(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        f32x4 a, b;
        memcpy(&a, y + i, sizeof a);
        memcpy(&b, x + i, sizeof b);
        a += b;
        memcpy(y + i, &a, sizeof a);
    }
    for (; i < n; i++) y[i] += x[i];
}

/* y = (x·scale)·w (w may be NULL: y = x·scale), four lanes at a time for the reason of
 * ll_add; the same two roundings per element as the scalar loop. */
static void scale_mul(float *y, const float *x, float scale, const float *w, int n) {
    const f32x4 s = {scale, scale, scale, scale};
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        f32x4 a, b;
        memcpy(&a, x + i, sizeof a);
        a *= s;
        if (w) { memcpy(&b, w + i, sizeof b); a *= b; }
        memcpy(y + i, &a, sizeof a);
    }
    for (; i < n; i++) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

/* A small weight (a norm's vector, at most its first 64 KiB) fetched into cache ahead of
 * its use. A decode step runs its norms serially between products, and their weights,
 * read once a token, came from memory: fetched a product earlier, a 2048-wide RMS norm of
 * llama-3.2-1b took 1.2-1.5 us instead of 2.1-2.2 (two threads, means of 1952 calls). */
void ll_prefetch_small(const ll_weight *w) {
    if (!w->data) return;
    size_t bytes = w->row_bytes * (size_t)(w->rows > 1 ? w->rows : 1);
    if (bytes > ((size_t)64 << 10)) bytes = (size_t)64 << 10;
    for (size_t i = 0; i < bytes; i += 64) __builtin_prefetch(w->data + i, 0, 3);
}

void ll_rms_norm_rows(float *y, const float *x, const ll_weight *w, int n, int rows, float eps) {
    const float *wt = w && w->data ? (const float *)w->data : NULL;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        double sum = ll_sum_squares(xr, n);
        scale_mul(y + (size_t)r * n, xr, 1.0f / sqrtf((float)(sum / n) + eps), wt, n);
    }
}

/* GELU as llama.cpp evaluates it (GGML_GELU_FP16): a table over all binary16 inputs
 * holding f16(gelu(x)), with the tanh approximation; inputs beyond ±10 short-cut. */
static uint16_t gelu_table[65536];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;
static void build_gelu_table(void) {
    for (uint32_t i = 0; i < 65536; i++) {
        float x = ll_fp16_to_fp32((uint16_t)i);
        float inner = 0.79788456080286535587989211986876f * x * fmaf(0.044715f * x, x, 1.0f);
        gelu_table[i] = ll_fp32_to_fp16(0.5f * x * (1.0f + tanhf(inner)));
    }
}

const uint16_t *ll_gelu_table(void) {
    pthread_once(&gelu_once, build_gelu_table);
    return gelu_table;
}

void ll_geglu(float *g, const float *u, int64_t n) {
    const ll_kernels *k = ll_kernels_get();
    if (k->geglu) { k->geglu(g, u, n); return; }
    ll_geglu_scalar(g, u, n);
}

void ll_geglu_scalar(float *g, const float *u, int64_t n) {
    const uint16_t *table = ll_gelu_table();
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        if (x <= -10.0f) g[i] = 0.0f;
        else if (x >= 10.0f) g[i] = x * u[i];
        else g[i] = LL_FP16(table[ll_fp32_to_fp16(x)]) * u[i];
    }
}

/* A prompt's row-wise steps on every pool thread, a contiguous share of the tokens each
 * (from 32 tokens up; fewer do not pay for waking the pool). Each token is computed alone,
 * so no bit depends on the split. On the calling thread alone they were ~3.7% of a
 * llama-3.2-1b Q4_K_M pp512's samples, with the other thread waiting. */
#define PARALLEL_TOKENS 32
typedef struct { ll_range_fn fn; void *arg; int n; } range_job;

static void range_task(void *a, int ith, int nth) {
    const range_job *j = a;
    int t0 = (int)((int64_t)j->n * ith / nth), t1 = (int)((int64_t)j->n * (ith + 1) / nth);
    if (t0 < t1) j->fn(j->arg, t0, t1);
}

void ll_for_tokens(struct llambda_context *c, int n, ll_range_fn fn, void *arg) {
    range_job j = {fn, arg, n};
    if (n >= PARALLEL_TOKENS) ll_pool_run(c->pool, range_task, &j);
    else if (n > 0) fn(arg, 0, n);
}

typedef struct { float *y; const float *x; const ll_weight *w; int d, rows; float eps; } norm_rows_args;
static void norm_rows_range(void *a, int t0, int t1) {
    const norm_rows_args *r = a;
    size_t at = (size_t)t0 * (size_t)r->rows * (size_t)r->d;
    ll_rms_norm_rows(r->y + at, r->x + at, r->w, r->d, (t1 - t0) * r->rows, r->eps);
}
void ll_rms_norm_rows_tokens(struct llambda_context *c, float *y, const float *x, const ll_weight *w, int d,
                             int rows_per_token, int n, float eps) {
    norm_rows_args r = {y, x, w, d, rows_per_token, eps};
    ll_for_tokens(c, n, norm_rows_range, &r);
}
void ll_rms_norm_tokens(struct llambda_context *c, float *y, const float *x, const ll_weight *w, int d, int n, float eps) {
    ll_rms_norm_rows_tokens(c, y, x, w, d, 1, n, eps);
}

typedef struct { float *g; const float *u; int64_t f; } swiglu_args;
static void swiglu_range(void *a, int t0, int t1) {
    const swiglu_args *r = a;
    for (int t = t0; t < t1; t++) ll_swiglu(r->g + (size_t)t * (size_t)r->f, r->u + (size_t)t * (size_t)r->f, r->f);
}
void ll_swiglu_tokens(struct llambda_context *c, float *g, const float *u, int64_t f, int n) {
    swiglu_args r = {g, u, f};
    ll_for_tokens(c, n, swiglu_range, &r);
}

typedef struct { float *y; const float *x; int64_t d; } add_args;
static void add_range(void *a, int t0, int t1) {
    const add_args *r = a;
    ll_add(r->y + (size_t)t0 * (size_t)r->d, r->x + (size_t)t0 * (size_t)r->d, (int64_t)(t1 - t0) * r->d);
}
void ll_add_tokens(struct llambda_context *c, float *y, const float *x, int64_t d, int n) {
    add_args r = {y, x, d};
    ll_for_tokens(c, n, add_range, &r);
}
