/* Portable dot products: weight row (its own block type) · activation row (the type's
 * vec_dot_type). Per-block integer sums are exact; block results are added in order in
 * f32, so every output element has one fixed reduction order. */
#include "../internal.h"

static void dot_f32(int64_t n, float *s, const void *w, const void *x) {
    const float *a = w, *b = x;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)(a[i] * b[i]);
    *s = (float)acc;
}

static void dot_f16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)(LL_FP16(a[i]) * LL_FP16(b[i]));
    *s = (float)acc;
}

static void dot_bf16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)(ll_bf16_to_fp32(a[i]) * ll_bf16_to_fp32(b[i]));
    *s = (float)acc;
}

static void dot_q4_0(int64_t n, float *s, const void *w, const void *x) {
    const block_q4_0 *a = w; const block_q8_0 *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((a[i].qs[j] & 0xF) - 8) * b[i].qs[j] + ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        sum += (float)isum * (LL_FP16(a[i].d) * LL_FP16(b[i].d));
    }
    *s = sum;
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
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        uint32_t h; memcpy(&h, a[i].qh, 4);
        int isum = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = ((a[i].qs[j] & 0xF) | (int)(((h >> j) & 1) << 4)) - 16;
            int q1 = ((a[i].qs[j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4)) - 16;
            isum += q0 * b[i].qs[j] + q1 * b[i].qs[j + 16];
        }
        sum += (float)isum * (LL_FP16(a[i].d) * LL_FP16(b[i].d));
    }
    *s = sum;
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
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 32; j++) isum += a[i].qs[j] * b[i].qs[j];
        sum += (float)isum * (LL_FP16(a[i].d) * LL_FP16(b[i].d));
    }
    *s = sum;
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
        uint32_t bits = a[i].e < 2 ? (0x00200000u << a[i].e) : ((uint32_t)(a[i].e - 1) << 23);
        float d; memcpy(&d, &bits, 4);
        sum += (float)isum * (d * LL_FP16(b[i].d));
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
        for (int g = 0; g < 16; g++) {
            int low4 = g < 8 ? (a[i].scales[g] & 0xF) : (a[i].scales[g - 8] >> 4);
            int hi2 = (a[i].scales[8 + (g % 4)] >> (2 * (g / 4))) & 3;
            S[g] = (int8_t)((low4 | (hi2 << 4)) - 32);
        }
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

static void dot_q4_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q4_K *a = w; const block_q8_K *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            ll_get_scale_min_k4(sb, a[i].scales, &sc, &m);
            const uint8_t *q = a[i].qs + 32 * (sb / 2);
            const int8_t *y = b[i].qs + 32 * sb;
            int part = 0;
            if (sb & 1) for (int l = 0; l < 32; l++) part += (q[l] >> 4) * y[l];
            else for (int l = 0; l < 32; l++) part += (q[l] & 0xF) * y[l];
            isum += sc * part;
            msum += m * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        }
        sum += LL_FP16(a[i].d) * b[i].d * (float)isum - LL_FP16(a[i].dmin) * b[i].d * (float)msum;
    }
    *s = sum;
}

static void dot_q5_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q5_K *a = w; const block_q8_K *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0, msum = 0;
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            ll_get_scale_min_k4(sb, a[i].scales, &sc, &m);
            const uint8_t *q = a[i].qs + 32 * (sb / 2);
            const int8_t *y = b[i].qs + 32 * sb;
            int part = 0;
            for (int l = 0; l < 32; l++) {
                int nib = (sb & 1) ? (q[l] >> 4) : (q[l] & 0xF);
                part += (nib + 16 * ((a[i].qh[l] >> sb) & 1)) * y[l];
            }
            isum += sc * part;
            msum += m * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        }
        sum += LL_FP16(a[i].d) * b[i].d * (float)isum - LL_FP16(a[i].dmin) * b[i].d * (float)msum;
    }
    *s = sum;
}

static void dot_q6_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q6_K *a = w; const block_q8_K *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            int part = 0;
            for (int k = 16 * g; k < 16 * g + 16; k++) {
                int h = k / 128, t = (k % 128) / 32, l = k % 32;
                uint8_t lb = a[i].ql[64 * h + l + 32 * (t & 1)];
                int nib = t < 2 ? (lb & 0xF) : (lb >> 4);
                int q = (nib | (((a[i].qh[32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
                part += q * b[i].qs[k];
            }
            isum += a[i].scales[g] * part;
        }
        sum += LL_FP16(a[i].d) * b[i].d * (float)isum;
    }
    *s = sum;
}

static void dot_iq4_xs(int64_t n, float *s, const void *w, const void *x) {
    const block_iq4_xs *a = w; const block_q8_K *b = x;
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = LL_FP16(a[i].d) * b[i].d;
        for (int sb = 0; sb < 8; sb++) {
            int ls = ((a[i].scales_l[sb / 2] >> (4 * (sb % 2))) & 0xF) | (((a[i].scales_h >> (2 * sb)) & 3) << 4);
            const uint8_t *q = a[i].qs + 16 * sb;
            const int8_t *y = b[i].qs + 32 * sb;
            int part = 0;
            for (int j = 0; j < 16; j++)
                part += ll_kvalues_iq4nl[q[j] & 0xF] * y[j] + ll_kvalues_iq4nl[q[j] >> 4] * y[j + 16];
            sum += d * (float)(ls - 32) * (float)part;
        }
    }
    *s = sum;
}

void ll_kernels_scalar(ll_kernels *k) {
    memset(k, 0, sizeof *k);
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
    k->from_float[LLAMBDA_TYPE_F32] = ll_convert_row_f32;
    k->from_float[LLAMBDA_TYPE_F16] = ll_convert_row_f16;
    k->from_float[LLAMBDA_TYPE_BF16] = ll_convert_row_bf16;
    k->from_float[LLAMBDA_TYPE_Q8_0] = ll_quantize_row_q8_0;
    k->from_float[LLAMBDA_TYPE_Q8_1] = ll_quantize_row_q8_1;
    k->from_float[LLAMBDA_TYPE_Q8_K] = ll_quantize_row_q8_K;
}
