/* Internal declarations shared by the library's sources. Not installed. */
#ifndef LLAMBDA_INTERNAL_H
#define LLAMBDA_INTERNAL_H

#include "llambda.h"
#include <string.h>
#include <math.h>
#include <stdatomic.h>

#if defined(__GNUC__)
#define LL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LL_PRINTF(a, b)
#endif

/* Record an error message for this thread and return status s. */
llambda_status ll_error(llambda_status s, const char *fmt, ...) LL_PRINTF(2, 3);
void ll_error_clear(void);

/* ------------------------------------------------------------------ OS layer (os_posix.c) */

typedef struct ll_mapping { void *addr; size_t size; int owned_heap; } ll_mapping;
/* Map a whole file read-only (or read it into memory when use_mmap is false). */
llambda_status ll_map_file(const char *path, int use_mmap, ll_mapping *m);
void ll_unmap(ll_mapping *m);
int ll_n_cpus(void);
uint64_t ll_mem_available(void);            /* free physical memory in bytes, 0 if unknown */
void *ll_alloc_large(size_t size);          /* zeroed, page-aligned; NULL on failure */
void ll_free_large(void *p, size_t size);
/* Unmap from this process the whole pages inside [p, p + size) of a read-only file mapping:
 * they stay in the page cache and fault back in if read again. */
void ll_release_mapped(const void *p, size_t size);
/* Whether [p, p + n) lies in the file the handle mapped from disk (not in a caller's
 * buffer or a heap copy, whose pages ll_release_mapped would zero) */
int ll_gguf_file_mapped(const llambda_gguf *g, const void *p, size_t n);
double ll_time_seconds(void);

/* ------------------------------------------------------------------ fp16 / bf16 */

float ll_fp16_to_fp32(uint16_t h);
uint16_t ll_fp32_to_fp16(float f);
static inline float ll_bf16_to_fp32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t ll_fp32_to_bf16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64); /* quiet NaN */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
/* One lane of vdpbf16ps (AVX512_BF16), to the bit (checked against the instruction by
 * tests/test_kernels.c wherever the CPU has it): c + a[1]·b[1], then + a[0]·b[0], each a
 * fused multiply-add (a product of two bf16 values is exact in f32) that reads subnormal
 * inputs as zero and flushes a tiny result to zero, keeping its sign. Tiny as x86's
 * flush-to-zero mode judges it, after rounding to 24 bits with an unbounded exponent: a
 * subnormal result, and also ±2^-126 where the exact sum was below 2^-126 - 2^-151 (it
 * rounds to 2^-126 - 2^-150 that way). c = 2^-126 plus -2^-75·2^-75 gives 0 on the
 * instruction, where flushing subnormals alone kept 2^-126 (found in session 28). */
static inline float ll_bf16_daz(uint16_t h) { return ll_bf16_to_fp32((h & 0x7f80) ? h : (uint16_t)(h & 0x8000)); }
static inline float ll_ftz(float v) {
    uint32_t u; memcpy(&u, &v, 4);
    if (!(u & 0x7f800000)) u &= 0x80000000u;
    memcpy(&v, &u, 4); return v;
}
static inline float ll_dpbf16_step(float c, float a, float b) {
    float r = fmaf(a, b, c);
    uint32_t u; memcpy(&u, &r, 4);
    /* the exact sum in double: a·b has 16 significant bits, and the one comparison that
     * matters is decided exactly (c a multiple of 2^-149, the bound one of 2^-151) */
    if ((u & 0x7fffffffu) == 0x00800000u && fabs((double)c + (double)a * (double)b) < 0x1p-126 - 0x1p-151) u &= 0x80000000u;
    memcpy(&r, &u, 4);
    return ll_ftz(r);
}
static inline float ll_dpbf16_lane(float c, const uint16_t *a, const uint16_t *b) {
    c = ll_dpbf16_step(c, ll_bf16_daz(a[1]), ll_bf16_daz(b[1]));
    return ll_dpbf16_step(c, ll_bf16_daz(a[0]), ll_bf16_daz(b[0]));
}
extern float ll_fp16_table[65536];
void ll_init_tables(void);
#define LL_FP16(h) (ll_fp16_table[(uint16_t)(h)])

/* ------------------------------------------------------------------ block layouts */

#define QK4_0 32
#define QK8_0 32
#define QK_K 256

typedef struct { uint16_t d; uint8_t qs[16]; } block_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[16]; } block_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } block_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } block_q5_1;
typedef struct { uint16_t d; int8_t qs[32]; } block_q8_0;
typedef struct { uint16_t d, s; int8_t qs[32]; } block_q8_1;
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } block_q2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } block_q3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } block_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } block_q5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } block_q6_K;
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; } block_q8_K;
typedef struct { uint16_t d; uint8_t qs[16]; } block_iq4_nl;
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } block_iq4_xs;
typedef struct { uint8_t e; uint8_t qs[16]; } block_mxfp4;

extern const int8_t ll_kvalues_iq4nl[16];
extern const int8_t ll_kvalues_mxfp4[16];

/* Q4_K / Q5_K packed 6-bit scale and min of sub-block j. */
static inline void ll_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) { *d = q[j] & 63; *m = q[j + 4] & 63; }
    else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q3_K's sixteen 6-bit scales (12 packed bytes), less 32. */
static inline void ll_q3_K_scales(const uint8_t *q, int8_t S[16]) {
    for (int g = 0; g < 16; g++) {
        int low4 = g < 8 ? (q[g] & 0xF) : (q[g - 8] >> 4);
        int hi2 = (q[8 + (g % 4)] >> (2 * (g / 4))) & 3;
        S[g] = (int8_t)((low4 | (hi2 << 4)) - 32);
    }
}

/* IQ4_XS sub-block sb's 6-bit scale, less 32. */
static inline int ll_iq4_xs_scale(const block_iq4_xs *a, int sb) {
    return (((a->scales_l[sb / 2] >> (4 * (sb % 2))) & 0xF) | (((a->scales_h >> (2 * sb)) & 3) << 4)) - 32;
}

/* An MXFP4 block's E8M0 exponent as the factor of its table values, halved (the E2M1
 * table holds doubled values). */
static inline float ll_mxfp4_scale(uint8_t e) {
    uint32_t bits = e < 2 ? (0x00200000u << e) : ((uint32_t)(e - 1) << 23);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round to nearest, ties to even (the default FP mode), as llama.cpp's nearest_int. */
static inline int ll_nearest_int(float v) {
    float val = v + 12582912.f; int i; memcpy(&i, &val, 4);
    return (i & 0x007fffff) - 0x00400000;
}

/* ------------------------------------------------------------------ compute traits */

/* How a weight type is multiplied with activations: activations are first converted to
 * vec_dot_type (llama.cpp's choice, so the numerics match), then each output element is
 * vec_dot(n, weight_row, converted_activations). */
typedef void (*ll_vec_dot_fn)(int64_t n, float *out, const void *w, const void *x);
typedef void (*ll_from_float_fn)(const float *x, void *y, int64_t n);
/* Eight rows (stride bytes apart) against one activation row; out[r] must equal the
 * single-row vec_dot of row r bit for bit. */
typedef void (*ll_vec_dot_x8_fn)(int64_t n, float *out, const void *w, size_t stride, const void *x);
/* Eight rows against four activation rows (x_stride bytes apart), for prompts:
 * out[t * out_stride + r], each equal to the single-row vec_dot bit for bit. */
typedef void (*ll_vec_dot_x8_t4_fn)(int64_t n, float *out, size_t out_stride, const void *w, size_t stride,
                                    const void *x, size_t x_stride);
/* Repacked weights: pack_x8 rewrites 8 rows (stride bytes apart, n elements each) into a
 * kernel's own interleaved layout at load and returns its size (dst NULL: size only);
 * dot_packed multiplies one packed 8-row tile with n_tok (1..4) activation rows:
 * out[t * out_stride + r], each equal to the single-row vec_dot bit for bit. */
typedef size_t (*ll_pack_x8_fn)(int64_t n, const void *w, size_t stride, void *dst);
typedef void (*ll_dot_packed_fn)(int64_t n, float *out, size_t out_stride, const void *tile, const void *x,
                                 size_t x_stride, int n_tok);

/* Activation formats beyond the weight types. LL_ACT_F16_AS_F32: values rounded to f16
 * exactly as llama.cpp rounds the activations it multiplies F16 weights with, held as f32,
 * so a kernel never widens them again (one conversion per token, not one per tile); BF16
 * weights take plain bf16 activations (LLAMBDA_TYPE_BF16), which vdpbf16ps reads as they
 * are. The _PASS formats are the rounded values as f16 (bf16) ordered for the prompt
 * kernels: vec_dot sums each of its accumulators (four of 16 lanes for F16, two of 16
 * lanes of element pairs for BF16, over 64-element steps) in a pass of its own, so the
 * elements of one pass are stored together (ll_pass_index), the tail past the last whole
 * step in place. LL_ACT_BF16_PASS4 is the bf16 values in the AVX2 BF16 tile's four passes
 * (dot_bf16's four 8-lane accumulators, 16 elements each a step). */
enum { LL_ACT_F16_AS_F32 = LLAMBDA_TYPE_COUNT, LL_ACT_F16_PASS, LL_ACT_BF16_PASS, LL_ACT_BF16_PASS4, LL_ACT_COUNT };
/* Bytes of one activation row in format vdt. The float formats add a cache line, so that
 * the rows of a prompt tile (power-of-two widths) do not share the same cache sets. */
size_t ll_act_row_bytes(int vdt, int64_t n);
/* Where element k of an n-element row goes in a pass-ordered row: each 64-element step
 * is cut into n_pass units of 64 / n_pass elements (16 for F16, 32 for BF16), and unit j
 * of every step goes to pass j. */
#define LL_PASS_STEP 64
static inline int64_t ll_pass_index(int64_t k, int64_t n, int n_pass) {
    int64_t unit = LL_PASS_STEP / n_pass, full = n / LL_PASS_STEP * LL_PASS_STEP;
    if (k >= full) return k;
    return (k % LL_PASS_STEP) / unit * (full / n_pass) + k / LL_PASS_STEP * unit + k % unit;
}

/* Optional, float weights: n_rows rows (stride bytes apart) against n_tok activation rows
 * (x_stride bytes apart, in the format gemm_act names), out[t * out_stride + r], each
 * equal to vec_dot bit for bit; scratch holds ll_gemm_scratch_bytes(n) bytes of the
 * calling thread's own. next (may be NULL) is the next_bytes of weights the thread reads
 * next: the kernel fetches them into cache a slice at a time while it computes. */
typedef void (*ll_gemm_fn)(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, int n_rows,
                           const void *x, size_t x_stride, int n_tok, void *scratch, const void *next, size_t next_bytes);
#define LL_GEMM_ROWS 12  /* a prompt kernel reorders a multiple of this many weight rows into its scratch (whole 6- or 4-row tiles) */
#define LL_GEMM_BLOCK_BYTES (192 * 1024)   /* reordered weight rows a prompt kernel keeps (L2) */
/* A reordered row's stride in elements: n rounded up to 32 (bytes a multiple of 64) */
static inline int64_t ll_gemm_row_stride(int64_t n) { return (n + 31) & ~(int64_t)31; }
/* How many rows a prompt kernel reorders at a time: whole tiles, as many as fit the block
 * (a work item has fewer rows than that for most widths: then all of them) */
static inline int ll_gemm_block_rows(int64_t n) {
    int64_t p = LL_GEMM_BLOCK_BYTES / ((int64_t)LL_GEMM_ROWS * ll_gemm_row_stride(n) * 2);
    return (p < 1 ? 1 : p > 64 ? 64 : (int)p) * LL_GEMM_ROWS;
}
/* room for the block, plus room to align the start; never less than LL_GEMM_BLOCK_BYTES,
 * so it grows with n and a context sized for its widest row has room for every other */
static inline size_t ll_gemm_scratch_bytes(int64_t n) {
    size_t panel = (size_t)LL_GEMM_ROWS * (size_t)ll_gemm_row_stride(n) * 2;
    return (panel > LL_GEMM_BLOCK_BYTES ? panel : LL_GEMM_BLOCK_BYTES) + 64;
}

typedef struct ll_compute_traits {
    int vec_dot_type;
    ll_vec_dot_fn vec_dot;
} ll_compute_traits;

/* The kernel set chosen for the running CPU (kernels/dispatch.c). */
typedef struct ll_kernels {
    const char *isa;
    ll_vec_dot_fn vec_dot[LLAMBDA_TYPE_COUNT];       /* by weight type */
    ll_vec_dot_x8_fn vec_dot_x8[LLAMBDA_TYPE_COUNT]; /* optional 8-row variants */
    ll_vec_dot_x8_t4_fn vec_dot_x8_t4[LLAMBDA_TYPE_COUNT]; /* optional 8-row x 4-token variants */
    ll_pack_x8_fn pack_x8[LLAMBDA_TYPE_COUNT];       /* optional repacked layouts, */
    ll_dot_packed_fn dot_packed[LLAMBDA_TYPE_COUNT]; /* with their tile kernels, */
    ll_dot_packed_fn dot_packed2[LLAMBDA_TYPE_COUNT]; /* optional: two adjacent tiles (16 rows) at once */
    ll_gemm_fn gemm_tiles[LLAMBDA_TYPE_COUNT];       /* optional: gemm on the repacked tiles, where they are not
                                                        plain rows (w the first tile, stride a tile's bytes / 8) */
    ll_gemm_fn gemm[LLAMBDA_TYPE_COUNT];             /* optional: prompt products of float weights, */
    int gemm_act[LLAMBDA_TYPE_COUNT];                /* with the activation format each takes */
    ll_from_float_fn from_float[LL_ACT_COUNT];     /* by activation format */
    float (*dot_f16_f16)(const uint16_t *a, const uint16_t *b, int64_t n);  /* attention q·k */
    void (*axpy)(float *y, const float *x, float a, int64_t n);   /* y[i] = fma(x[i], a, y[i]) */
    /* One gated-DeltaNet head's memory step over its S rows of S: row j decays, is read
     * against k (pred), takes row += k·(beta·(v[j] - pred)) and is read against q, o[j] =
     * that read · scale. Products in vec_dot F32's order, the update as axpy's fused
     * multiply-add, so the bits of those calls; one pass over each row instead of four. */
    void (*deltanet_rows)(float *M, const float *k, const float *q, const float *v, float decay, float beta, float scale,
                          float *o, int S);
    /* Mamba-2 scan of one state row: st[i] = st[i]·dA + B[i]·xdt (two products, then the
     * add); returns Σ st[i]·C[i] fused in llama.cpp's AVX-512 layout (4 x 16 lanes, then
     * ll_reduce_4x16; a tail past the last 64 added one by one) */
    float (*ssm_scan)(float *st, const float *B, const float *C, float dA, float xdt, int n);
    /* optional: ll_swiglu's g = silu(g) ⊙ u with the same bits, vectorized */
    void (*swiglu)(float *g, const float *u, int64_t n);
    void (*geglu)(float *g, const float *u, int64_t n);   /* optional: ll_geglu's bits, vectorized */
    void (*relu2)(float *x, int64_t n);   /* optional: ll_relu2's bits, vectorized */
    /* optional: one head's RoPE (ll_rope's bits): pairs (2i, 2i+1), or (i, i + half) when
     * neox, turned by cs = [cos_0, sin_0, cos_1, ...]; x0·cos − x1·sin and x0·sin + x1·cos
     * each fused, the other product rounded first */
    void (*rope_head)(float *v, int half, int neox, const float *cs);
    /* y[i] = ll_exp_simd(x[i] - sub), every i */
    void (*exp_shifted)(float *y, const float *x, float sub, int64_t n);
    /* y[i] = ll_silu(x[i]) (x / (1 + ll_exp_simd(-x))), every i; y may be x */
    void (*silu)(float *y, const float *x, int64_t n);
    /* One token of a causal depthwise conv and its SiLU over n channels: out[i] =
     * ll_silu(s + bias[i]) (no bias: ll_silu(s)), s = fmaf chain over k = 0..K-1 of
     * src[k][i]·w[i·K + k] from 0 */
    void (*conv_silu)(float *out, const float *const *src, const float *w, int K, const float *bias, int64_t n);
    /* nh query heads (f16, rows of D one after another) that share one KV head, over the
     * cells (first + i) % ring, i < n, of an f16 cache (row stride W halves, head offset
     * applied), each as llama.cpp's single-chunk flash attention: online softmax, f16 V
     * accumulator (acc16: D halves of scratch). out: nh rows of D. */
    void (*attend_f16)(const uint16_t *q16, const uint16_t *K, const uint16_t *V, int W, int D, int nh, int first,
                       int n, int ring, float scale, uint16_t *acc16, float *out);
    /* y[i] = expf(x[i]), the C library's bits (softmax weights that must match llama.cpp's,
     * which calls expf) */
    void (*expf_row)(float *y, const float *x, int n);
    /* y[i] = tanhf(x[i]·inv)·cap with the C library's tanhf bits (Gemma's final logit
     * soft-capping, which llama.cpp computes with tanhf); y may be x */
    void (*tanhf_scaled_row)(float *y, const float *x, float inv, float cap, int n);
} ll_kernels;
void ll_expf_row_libm(float *y, const float *x, int n);
void ll_tanhf_scaled_row_libm(float *y, const float *x, float inv, float cap, int n);
/* A key's cell in the KV cache's ring: a position past the ring's end only on sliding-window
 * layers, so the division only there. Four a key and head group in the vector attention,
 * the idivl was 4% of the attention's samples in a llama-3.2-1b Q4_K_M pp512 at 2048 tokens
 * of context (perf); with this the attention's samples against the Q4_K tile's went 0.81
 * -> 0.78, the same bits. Every attention path (vector, scalar, f32 cache) takes it. */
static inline int ll_ring_cell(int pos, int ring) { return pos < ring ? pos : pos % ring; }
void ll_attend_f16_scalar(const uint16_t *q16, const uint16_t *K, const uint16_t *V, int W, int D, int nh, int first,
                          int n, int ring, float scale, uint16_t *acc16, float *out);

const ll_kernels *ll_kernels_get(void);
/* How far ahead of the weight stream the vector kernels fetch, in bytes (dispatch.c): it
 * follows the rate at which decode products stream (ll_note_stream_rate), as the bytes in
 * flight that rate needs do. Only when bytes arrive changes, never a result. */
extern atomic_int ll_stream_ahead_bytes;
void ll_note_stream_rate(int64_t bytes, double seconds, int n_threads);
int ll_vec_dot_type(int weight_type);   /* its activation format; -1 if the type cannot be multiplied */
void ll_kernels_scalar(ll_kernels *k);
#ifdef LL_HAVE_AVX2
void ll_kernels_avx2(ll_kernels *k);
void ll_kernels_avx2_vnni(ll_kernels *k);   /* the AVX2 set with AVX-VNNI's integer steps */
int ll_cpu_has_avx_vnni(void);
int ll_cpu_has_avx2(void);
int ll_cpu_has_avx2_base(void);
void ll_kernels_avx512(ll_kernels *k);   /* AVX-512 F/BW/VL + VNNI */
int ll_cpu_has_avx512(void);
int ll_cpu_has_avx512_bf16(void);   /* AVX512_BF16 (vdpbf16ps) on top of ll_cpu_has_avx512 */
int ll_cpu_has_gfni(void);          /* GFNI (vgf2p8affineqb), which the AVX-512 Q5_K tile uses where present */
void ll_kernels_avx512_base(ll_kernels *k);   /* the AVX-512 set without its BF16 and GFNI kernels */
#endif

/* The f16·f16 dot every ISA reproduces (scalar.c): used by attention too. */
float ll_dot_f16_f16(const uint16_t *a, const uint16_t *b, int64_t n);
float ll_reduce_4x16(float acc[4][16]);

/* SiLU pieces (ops/norm.c) that the vector kernels fall back on */
float ll_exp_simd(float x);
/* ll_exp_simd's body, for kernels compiled with hardware FMA (fmaf inlines there; in the
 * portable files it is a libm call) */
static inline float ll_exp_simd_inline(float x) {
    const float shift = 0x1.8p23f;
    float z = fmaf(x, 0x1.715476p+0f, shift);
    float n = z - shift;
    float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    float u = b * b;
    float hi = fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f));
    float j = fmaf(hi, u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (n != n) return x;   /* NaN in, NaN out (and no float-to-int of a NaN below) */
    if (fabsf(n) > 192) return n > 0 ? INFINITY : 0.0f;
    if (fabsf(n) <= 126) {   /* 2^n is a normal float: the product is exact, as scalef */
        uint32_t bits = (uint32_t)((int)n + 127) << 23;
        float p2;
        memcpy(&p2, &bits, 4);
        return j * p2;
    }
    return ldexpf(j, (int)n);
}
/* ll_silu (x / (1 + ll_exp_simd(-x))) on the same inline body */
static inline float ll_silu_inline(float x) { return x / (1.0f + ll_exp_simd_inline(-x)); }
void ll_swiglu_scalar(float *g, const float *u, int64_t n);
void ll_geglu_scalar(float *g, const float *u, int64_t n);
void ll_relu2_scalar(float *x, int64_t n);
const uint16_t *ll_gelu_table(void);   /* f16(gelu(x)) for every binary16 x */

/* quantize helpers used by from_float */
void ll_quantize_row_q8_0(const float *x, void *y, int64_t n);
void ll_quantize_row_q8_1(const float *x, void *y, int64_t n);
void ll_quantize_row_q8_K(const float *x, void *y, int64_t n);
void ll_convert_row_f16(const float *x, void *y, int64_t n);
void ll_convert_row_bf16(const float *x, void *y, int64_t n);
void ll_round_row_f16(const float *x, void *y, int64_t n);    /* to f16 and back: LL_ACT_F16_AS_F32 */
void ll_pass_row_f16(const float *x, void *y, int64_t n);     /* LL_ACT_F16_PASS */
void ll_pass_row_bf16(const float *x, void *y, int64_t n);    /* LL_ACT_BF16_PASS */
void ll_pass4_row_bf16(const float *x, void *y, int64_t n);   /* LL_ACT_BF16_PASS4 */
void ll_convert_row_f32(const float *x, void *y, int64_t n);

#endif
