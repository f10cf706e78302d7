/* Portable dot products: weight row (its own block type) · activation row (the type's
 * vec_dot_type). Per-block integer sums are exact; block results are added in order in
 * f32, so every output element has one fixed reduction order. */
#include "../internal.h"

/* The reduction order every ISA follows (llama.cpp's AVX2 layout): 8 f32 lanes, one
 * fused multiply-add per lane per block, then hsum8 = ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). */
static float hsum8(const float *a) {
    float r0 = a[0] + a[4], r1 = a[1] + a[5], r2 = a[2] + a[6], r3 = a[3] + a[7];
    return (r0 + r2) + (r1 + r3);
}

/* Float dots follow llama.cpp's AVX-512 layout (the build the reference logits came from):
 * four accumulators of 16 lanes over 64-element steps, fused multiply-adds, reduced
 * acc0+acc2, acc1+acc3, then acc0+acc1, then halves 16 -> 8 -> 4 and (0+2) + (1+3);
 * a tail shorter than 64 is added in double. */
float ll_reduce_4x16(float acc[4][16]) {
    for (int l = 0; l < 16; l++) { acc[0][l] += acc[2][l]; acc[1][l] += acc[3][l]; }
    for (int l = 0; l < 16; l++) acc[0][l] += acc[1][l];
    float t3[8], t6[4];
    for (int l = 0; l < 8; l++) t3[l] = acc[0][l + 8] + acc[0][l];
    for (int l = 0; l < 4; l++) t6[l] = t3[l + 4] + t3[l];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
}

static void dot_f32(int64_t n, float *s, const void *w, const void *x) {
    const float *a = w, *b = x;
    float acc[4][16] = {{0}};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++) acc[j][l] = fmaf(a[i + 16 * j + l], b[i + 16 * j + l], acc[j][l]);
    double sum = ll_reduce_4x16(acc);
    for (; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

float ll_dot_f16_f16(const uint16_t *a, const uint16_t *b, int64_t n) {
    float acc[4][16] = {{0}};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++) acc[j][l] = fmaf(LL_FP16(a[i + 16 * j + l]), LL_FP16(b[i + 16 * j + l]), acc[j][l]);
    double sum = ll_reduce_4x16(acc);
    for (; i < n; i++) sum += (double)(LL_FP16(a[i]) * LL_FP16(b[i]));
    return (float)sum;
}

/* F16 weights against activations already rounded to f16 and held as f32
 * (LL_ACT_F16_AS_F32): ll_dot_f16_f16's operations on the same values */
static void dot_f16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w;
    const float *b = x;
    float acc[4][16] = {{0}};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++) acc[j][l] = fmaf(LL_FP16(a[i + 16 * j + l]), b[i + 16 * j + l], acc[j][l]);
    double sum = ll_reduce_4x16(acc);
    for (; i < n; i++) sum += (double)(LL_FP16(a[i]) * b[i]);
    *s = (float)sum;
}

/* Sixteen lanes to one float: lanes l and l + 8, then l and l + 4, then the AVX pair sums
 * (hsum8 of the two halves' sum). */
static float reduce16(const float a[16]) {
    float t8[8];
    for (int l = 0; l < 8; l++) t8[l] = a[l] + a[l + 8];
    return hsum8(t8);
}

/* BF16 against bf16 activations, as llama.cpp computes it on CPUs with AVX512_BF16: per
 * 64 elements, one vdpbf16ps on the first 32 and one on the second 32 into two 16-lane
 * accumulators, each reduced to a float and summed in double with the tail. Lane l of a
 * vdpbf16ps takes the pair (2l, 2l + 1): ll_dpbf16_lane says how, to the bit. */
static void dot_bf16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    float acc[2][16] = {{0}};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 16; l++) acc[h][l] = ll_dpbf16_lane(acc[h][l], a + i + 32 * h + 2 * l, b + i + 32 * h + 2 * l);
    double sum = (double)reduce16(acc[0]) + (double)reduce16(acc[1]);
    for (; i < n; i++) sum += (double)(ll_bf16_to_fp32(a[i]) * ll_bf16_to_fp32(b[i]));
    *s = (float)sum;
}

/* Q4_0 and Q4_K follow llama.cpp's repacked (8 rows interleaved) kernels, which it uses
 * for these types on x86: one exact integer sum per block and row, then
 * acc = fma(isum, d_y·d_x, acc) (mins likewise, subtracted at the end). */
static void dot_q4_0(int64_t n, float *s, const void *w, const void *x) {
    const block_q4_0 *a = w; const block_q8_0 *b = x;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((a[i].qs[j] & 0xF) - 8) * b[i].qs[j] + ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        acc = fmaf((float)isum, LL_FP16(b[i].d) * LL_FP16(a[i].d), acc);
    }
    *s = acc;
}

static void dot_q4_1(int64_t n, float *s, const void *w, const void *x) {
    const block_q4_1 *a = w; const block_q8_1 *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += (a[i].qs[j] & 0xF) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + 16];
        sum += (LL_FP16(a[i].d) * LL_FP16(b[i].d)) * (float)isum + LL_FP16(a[i].m) * LL_FP16(b[i].s);
    }
    *s = sum;
}

static void dot_q5_0(int64_t n, float *s, const void *w, const void *x) {
    const block_q5_0 *a = w; const block_q8_0 *b = x;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t h; memcpy(&h, a[i].qh, 4);
        float d = LL_FP16(a[i].d) * LL_FP16(b[i].d);
        for (int m = 0; m < 8; m++) {
            int isum = 0;
            for (int e = 4 * m; e < 4 * m + 4; e++) {
                int nib = e < 16 ? (a[i].qs[e] & 0xF) : (a[i].qs[e - 16] >> 4);
                isum += ((nib | (int)(((h >> e) & 1) << 4)) - 16) * b[i].qs[e];
            }
            acc[m] = fmaf(d, (float)isum, acc[m]);
        }
    }
    *s = hsum8(acc);
}

static void dot_q5_1(int64_t n, float *s, const void *w, const void *x) {
    const block_q5_1 *a = w; const block_q8_1 *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t h; memcpy(&h, a[i].qh, 4);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = (a[i].qs[j] & 0xF) | (int)(((h >> j) & 1) << 4);
            int q1 = (a[i].qs[j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4);
            isum += q0 * b[i].qs[j] + q1 * b[i].qs[j + 16];
        }
        sum += (LL_FP16(a[i].d) * LL_FP16(b[i].d)) * (float)isum + LL_FP16(a[i].m) * LL_FP16(b[i].s);
    }
    *s = sum;
}

static void dot_q8_0(int64_t n, float *s, const void *w, const void *x) {
    const block_q8_0 *a = w; const block_q8_0 *b = x;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        float d = LL_FP16(a[i].d) * LL_FP16(b[i].d);
        for (int m = 0; m < 8; m++) {
            int isum = 0;
            for (int e = 4 * m; e < 4 * m + 4; e++) isum += a[i].qs[e] * b[i].qs[e];
            acc[m] = fmaf(d, (float)isum, acc[m]);
        }
    }
    *s = hsum8(acc);
}

static void dot_iq4_nl(int64_t n, float *s, const void *w, const void *x) {
    const block_iq4_nl *a = w; const block_q8_0 *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ll_kvalues_iq4nl[a[i].qs[j] & 0xF] * b[i].qs[j] + ll_kvalues_iq4nl[a[i].qs[j] >> 4] * b[i].qs[j + 16];
        sum += (float)isum * (LL_FP16(a[i].d) * LL_FP16(b[i].d));
    }
    *s = sum;
}

static void dot_mxfp4(int64_t n, float *s, const void *w, const void *x) {
    const block_mxfp4 *a = w; const block_q8_0 *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ll_kvalues_mxfp4[a[i].qs[j] & 0xF] * b[i].qs[j] + ll_kvalues_mxfp4[a[i].qs[j] >> 4] * b[i].qs[j + 16];
        sum += (float)isum * (ll_mxfp4_scale(a[i].e) * LL_FP16(b[i].d));
    }
    *s = sum;
}

static void dot_q2_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q2_K *a = w; const block_q8_K *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int g = 0; g < 16; g++) msum += b[i].bsums[g] * (a[i].scales[g] >> 4);
        for (int e = 0; e < QK_K; e += 16) {
            int part = 0;
            for (int k = e; k < e + 16; k++) {
                int h = k / 128, j = (k % 128) / 32, l = k % 32;
                part += ((a[i].qs[32 * h + l] >> (2 * j)) & 3) * b[i].qs[k];
            }
            isum += (a[i].scales[e / 16] & 0xF) * part;
        }
        sum += b[i].d * LL_FP16(a[i].d) * (float)isum - b[i].d * LL_FP16(a[i].dmin) * (float)msum;
    }
    *s = sum;
}

static void dot_q3_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q3_K *a = w; const block_q8_K *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int8_t S[16];
        ll_q3_K_scales(a[i].scales, S);
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            int part = 0;
            for (int k = 16 * g; k < 16 * g + 16; k++) {
                int h = k / 128, j = (k % 128) / 32, l = k % 32;
                int q = ((a[i].qs[32 * h + l] >> (2 * j)) & 3) - (((a[i].hmask[l] >> (4 * h + j)) & 1) ? 0 : 4);
                part += q * b[i].qs[k];
            }
            isum += S[g] * part;
        }
        sum += LL_FP16(a[i].d) * b[i].d * (float)isum;
    }
    *s = sum;
}

/* K-quants: per 256-block, 8 int32 lanes (lane m = elements 4m..4m+3 of every 32-group,
 * times that group's scale), one fused multiply-add per lane per block; the mins of
 * Q4_K go through 4 lanes (pairs of sub-blocks), those of Q5_K through one scalar. */
static void dot_q4_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q4_K *a = w; const block_q8_K *b = x;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            ll_get_scale_min_k4(sb, a[i].scales, &sc, &m);
            const uint8_t *q = a[i].qs + 32 * (sb / 2);
            const int8_t *y = b[i].qs + 32 * sb;
            int part = 0;
            for (int l = 0; l < 32; l++) part += ((sb & 1) ? (q[l] >> 4) : (q[l] & 0xF)) * y[l];
            isum += sc * part;
            msum += m * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        }
        acc = fmaf((float)isum, b[i].d * LL_FP16(a[i].d), acc);
        accm = fmaf((float)msum, b[i].d * LL_FP16(a[i].dmin), accm);
    }
    *s = acc - accm;
}

static void dot_q5_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q5_K *a = w; const block_q8_K *b = x;
    float acc[8] = {0}, summs = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = b[i].d * LL_FP16(a[i].d), dmin = -b[i].d * LL_FP16(a[i].dmin);
        int sumi[8] = {0}, msum = 0;
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, mn;
            ll_get_scale_min_k4(sb, a[i].scales, &sc, &mn);
            msum += mn * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
            const uint8_t *q = a[i].qs + 32 * (sb / 2);
            const int8_t *y = b[i].qs + 32 * sb;
            for (int m = 0; m < 8; m++) {
                int part = 0;
                for (int l = 4 * m; l < 4 * m + 4; l++) {
                    int nib = (sb & 1) ? (q[l] >> 4) : (q[l] & 0xF);
                    part += (nib + 16 * ((a[i].qh[l] >> sb) & 1)) * y[l];
                }
                sumi[m] += sc * part;
            }
        }
        summs = fmaf(dmin, (float)msum, summs);
        for (int m = 0; m < 8; m++) acc[m] = fmaf(d, (float)sumi[m], acc[m]);
    }
    *s = hsum8(acc) + summs;
}

static void dot_q6_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q6_K *a = w; const block_q8_K *b = x;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = b[i].d * LL_FP16(a[i].d);
        int sumi[8] = {0};
        for (int grp = 0; grp < 8; grp++) {  /* 32-element groups: h = grp/4, t = grp%4 */
            int h = grp / 4, t = grp % 4;
            for (int m = 0; m < 8; m++) {
                int part = 0;
                for (int l = 4 * m; l < 4 * m + 4; l++) {
                    uint8_t lb = a[i].ql[64 * h + l + 32 * (t & 1)];
                    int nib = t < 2 ? (lb & 0xF) : (lb >> 4);
                    int q = (nib | (((a[i].qh[32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
                    part += q * b[i].qs[128 * h + 32 * t + l];
                }
                sumi[m] += a[i].scales[8 * h + 2 * t + (m >= 4)] * part;
            }
        }
        for (int m = 0; m < 8; m++) acc[m] = fmaf(d, (float)sumi[m], acc[m]);
    }
    *s = hsum8(acc);
}

/* The element k (0..31) of an IQ4_XS sub-block: the low nibbles of its 16 bytes first,
 * then the high ones. */
static inline int iq4_value(const uint8_t *q, int k) {
    return ll_kvalues_iq4nl[k < 16 ? q[k] & 0xF : q[k - 16] >> 4];
}

/* IQ4_XS in llama.cpp's AVX2 layout (it has no repacked kernel for this type): lane m of
 * a block sums, over the eight sub-blocks, (scale - 32) times the products of the
 * sub-block's elements 4m..4m+3 (exact integers); one fused multiply-add per lane per
 * block, then hsum8. */
static void dot_iq4_xs(int64_t n, float *s, const void *w, const void *x) {
    const block_iq4_xs *a = w; const block_q8_K *b = x;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK_K; i++) {
        int32_t lane[8] = {0};
        for (int sb = 0; sb < 8; sb++) {
            int ls = ll_iq4_xs_scale(&a[i], sb);
            const uint8_t *q = a[i].qs + 16 * sb;
            const int8_t *y = b[i].qs + 32 * sb;
            for (int m = 0; m < 8; m++) {
                int part = 0;
                for (int k = 4 * m; k < 4 * m + 4; k++) part += iq4_value(q, k) * y[k];
                lane[m] += ls * part;
            }
        }
        float d = LL_FP16(a[i].d) * b[i].d;
        for (int m = 0; m < 8; m++) acc[m] = fmaf(d, (float)lane[m], acc[m]);
    }
    *s = hsum8(acc);
}

/* One query head over n cells: online softmax with running max M and sum S (f32); the
 * V accumulator is kept in f16, rescaled on a new maximum, rounded after every key. */
static void attend_f16_head(const uint16_t *q16, const uint16_t *K, const uint16_t *V, int W, int D, int first, int n,
                            int ring, float scale, uint16_t *acc16, float *out) {
    float M = -INFINITY, S = 0;
    for (int i = 0; i < D; i++) acc16[i] = 0;
    for (int j = 0; j < n; j++) {
        size_t cell = (size_t)ll_ring_cell(first + j, ring);
        const uint16_t *k = K + cell * W, *v = V + cell * W;
        float s = ll_dot_f16_f16(q16, k, D) * scale, ms = 1.0f, vs = 1.0f;
        if (s > M) {
            float Mold = M;
            M = s;
            ms = expf(Mold - M);
            for (int i = 0; i < D; i++) acc16[i] = ll_fp32_to_fp16(LL_FP16(acc16[i]) * ms);
        } else vs = expf(s - M);
        for (int i = 0; i < D; i++) acc16[i] = ll_fp32_to_fp16(fmaf(LL_FP16(v[i]), vs, LL_FP16(acc16[i])));
        S = fmaf(S, ms, vs);
    }
    float inv = S == 0 ? 0 : 1.0f / S;
    for (int i = 0; i < D; i++) out[i] = LL_FP16(acc16[i]) * inv;
}

void ll_attend_f16_scalar(const uint16_t *q16, const uint16_t *K, const uint16_t *V, int W, int D, int nh, int first,
                          int n, int ring, float scale, uint16_t *acc16, float *out) {
    for (int h = 0; h < nh; h++)
        attend_f16_head(q16 + (size_t)h * D, K, V, W, D, first, n, ring, scale, acc16, out + (size_t)h * D);
}

void ll_expf_row_libm(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] = expf(x[i]);
}

void ll_tanhf_scaled_row_libm(float *y, const float *x, float inv, float cap, int n) {
    for (int i = 0; i < n; i++) y[i] = tanhf(x[i] * inv) * cap;
}

static void axpy(float *y, const float *x, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(x[i], a, y[i]);
}

static void deltanet_rows(float *M, const float *k, const float *q, const float *v, float decay, float beta, float scale,
                          float *o, int S) {
    for (int j = 0; j < S; j++) {
        float *row = M + (size_t)j * S, pred, rd;
        for (int i = 0; i < S; i++) row[i] *= decay;
        dot_f32(S, &pred, row, k);
        axpy(row, k, beta * (v[j] - pred), S);
        dot_f32(S, &rd, row, q);
        o[j] = rd * scale;
    }
}

static void exp_shifted(float *y, const float *x, float sub, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ll_exp_simd(x[i] - sub);
}

static void silu(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ll_silu_inline(x[i]);
}

static void conv_silu(float *out, const float *const *src, const float *w, int K, const float *bias, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float s = 0.0f;
        for (int k = 0; k < K; k++) s = fmaf(src[k][i], w[i * K + k], s);
        if (bias) s += bias[i];
        out[i] = ll_silu_inline(s);
    }
}

static float ssm_scan(float *st, const float *B, const float *C, float dA, float xdt, int n) {
    float acc[4][16] = {{0}};
    int np = n & ~63, i = 0;
    for (; i < np; i++) {
        float v = st[i] * dA + B[i] * xdt;   /* two products, then the add */
        st[i] = v;
        acc[(i % 64) / 16][i % 16] = fmaf(v, C[i], acc[(i % 64) / 16][i % 16]);
    }
    float sum = ll_reduce_4x16(acc);
    for (; i < n; i++) {
        float v = st[i] * dA + B[i] * xdt;
        st[i] = v;
        sum = fmaf(v, C[i], sum);
    }
    return sum;
}

void ll_kernels_scalar(ll_kernels *k) {
    memset(k, 0, sizeof *k);
    k->axpy = axpy;
    k->deltanet_rows = deltanet_rows;
    k->exp_shifted = exp_shifted;
    k->silu = silu;
    k->conv_silu = conv_silu;
    k->ssm_scan = ssm_scan;
    k->isa = "scalar";
    k->vec_dot[LLAMBDA_TYPE_F32] = dot_f32;
    k->vec_dot[LLAMBDA_TYPE_F16] = dot_f16;
    k->vec_dot[LLAMBDA_TYPE_BF16] = dot_bf16;
    k->vec_dot[LLAMBDA_TYPE_Q4_0] = dot_q4_0;
    k->vec_dot[LLAMBDA_TYPE_Q4_1] = dot_q4_1;
    k->vec_dot[LLAMBDA_TYPE_Q5_0] = dot_q5_0;
    k->vec_dot[LLAMBDA_TYPE_Q5_1] = dot_q5_1;
    k->vec_dot[LLAMBDA_TYPE_Q8_0] = dot_q8_0;
    k->vec_dot[LLAMBDA_TYPE_IQ4_NL] = dot_iq4_nl;
    k->vec_dot[LLAMBDA_TYPE_MXFP4] = dot_mxfp4;
    k->vec_dot[LLAMBDA_TYPE_Q2_K] = dot_q2_K;
    k->vec_dot[LLAMBDA_TYPE_Q3_K] = dot_q3_K;
    k->vec_dot[LLAMBDA_TYPE_Q4_K] = dot_q4_K;
    k->vec_dot[LLAMBDA_TYPE_Q5_K] = dot_q5_K;
    k->vec_dot[LLAMBDA_TYPE_Q6_K] = dot_q6_K;
    k->vec_dot[LLAMBDA_TYPE_IQ4_XS] = dot_iq4_xs;
    k->dot_f16_f16 = ll_dot_f16_f16;
    k->attend_f16 = ll_attend_f16_scalar;
    k->expf_row = ll_expf_row_libm;
    k->tanhf_scaled_row = ll_tanhf_scaled_row_libm;
    k->from_float[LLAMBDA_TYPE_F32] = ll_convert_row_f32;
    k->from_float[LLAMBDA_TYPE_F16] = ll_convert_row_f16;
    k->from_float[LLAMBDA_TYPE_BF16] = ll_convert_row_bf16;
    k->from_float[LL_ACT_F16_AS_F32] = ll_round_row_f16;
    k->from_float[LL_ACT_F16_PASS] = ll_pass_row_f16;
    k->from_float[LL_ACT_BF16_PASS] = ll_pass_row_bf16;
    k->from_float[LL_ACT_BF16_PASS4] = ll_pass4_row_bf16;
    k->from_float[LLAMBDA_TYPE_Q8_0] = ll_quantize_row_q8_0;
    k->from_float[LLAMBDA_TYPE_Q8_1] = ll_quantize_row_q8_1;
    k->from_float[LLAMBDA_TYPE_Q8_K] = ll_quantize_row_q8_K;
}
