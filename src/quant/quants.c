/* Block formats: exact dequantization of every supported ggml block type, and
 * quantizers from float. Layouts are those of ggml (see internal.h). The quantizers
 * search per sub-block for the least-squares scale (and min), then quantize the
 * sub-block scales themselves; they aim for low error, not bit-equality with ggml. */
#include "../internal.h"
#include <float.h>
#include <stdlib.h>

const int8_t ll_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const int8_t ll_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* ------------------------------------------------------------------ dequantize */

void ll_dequantize_row_q4_0(const void *src, float *y, int64_t n) {
    const block_q4_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = LL_FP16(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
            y[j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void ll_dequantize_row_q4_1(const void *src, float *y, int64_t n) {
    const block_q4_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = LL_FP16(b[i].d), m = LL_FP16(b[i].m);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            y[j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

static uint32_t load_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

void ll_dequantize_row_q5_0(const void *src, float *y, int64_t n) {
    const block_q5_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = LL_FP16(b[i].d);
        uint32_t h = load_u32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int q0 = (b[i].qs[j] & 0xF) | (int)(((h >> j) & 1) << 4);
            int q1 = (b[i].qs[j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4);
            y[j] = (float)(q0 - 16) * d;
            y[j + 16] = (float)(q1 - 16) * d;
        }
    }
}

void ll_dequantize_row_q5_1(const void *src, float *y, int64_t n) {
    const block_q5_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = LL_FP16(b[i].d), m = LL_FP16(b[i].m);
        uint32_t h = load_u32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            int q0 = (b[i].qs[j] & 0xF) | (int)(((h >> j) & 1) << 4);
            int q1 = (b[i].qs[j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4);
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        }
    }
}

void ll_dequantize_row_q8_0(const void *src, float *y, int64_t n) {
    const block_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = LL_FP16(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = (float)b[i].qs[j] * d;
    }
}

void ll_dequantize_row_q8_1(const void *src, float *y, int64_t n) {
    const block_q8_1 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = LL_FP16(b[i].d);
        for (int j = 0; j < 32; j++) y[j] = (float)b[i].qs[j] * d;
    }
}

void ll_dequantize_row_q2_K(const void *src, float *y, int64_t n) {
    const block_q2_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        float d = LL_FP16(b[i].d), dmin = LL_FP16(b[i].dmin);
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128, j = (e % 128) / 32, l = e % 32;
            int q = (b[i].qs[32 * h + l] >> (2 * j)) & 3;
            uint8_t sc = b[i].scales[e / 16];
            y[e] = d * (float)(sc & 0xF) * (float)q - dmin * (float)(sc >> 4);
        }
    }
}

void ll_dequantize_row_q3_K(const void *src, float *y, int64_t n) {
    const block_q3_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        float d = LL_FP16(b[i].d);
        int8_t S[16];
        ll_q3_K_scales(b[i].scales, S);
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128, j = (e % 128) / 32, l = e % 32;
            int q2 = (b[i].qs[32 * h + l] >> (2 * j)) & 3;
            int hb = (b[i].hmask[l] >> (4 * h + j)) & 1;
            y[e] = d * (float)S[e / 16] * (float)(q2 - (hb ? 0 : 4));
        }
    }
}

void ll_dequantize_row_q4_K(const void *src, float *y, int64_t n) {
    const block_q4_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        float d = LL_FP16(b[i].d), dmin = LL_FP16(b[i].dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            ll_get_scale_min_k4(s, b[i].scales, &sc, &m);
            float dl = d * sc, ml = dmin * m;
            const uint8_t *q = b[i].qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++) {
                int nib = (s & 1) ? (q[l] >> 4) : (q[l] & 0xF);
                y[32 * s + l] = dl * (float)nib - ml;
            }
        }
    }
}

void ll_dequantize_row_q5_K(const void *src, float *y, int64_t n) {
    const block_q5_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        float d = LL_FP16(b[i].d), dmin = LL_FP16(b[i].dmin);
        for (int s = 0; s < 8; s++) {
            uint8_t sc, m;
            ll_get_scale_min_k4(s, b[i].scales, &sc, &m);
            float dl = d * sc, ml = dmin * m;
            const uint8_t *q = b[i].qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++) {
                int nib = (s & 1) ? (q[l] >> 4) : (q[l] & 0xF);
                int hb = (b[i].qh[l] >> s) & 1;
                y[32 * s + l] = dl * (float)(nib + 16 * hb) - ml;
            }
        }
    }
}

void ll_dequantize_row_q6_K(const void *src, float *y, int64_t n) {
    const block_q6_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        float d = LL_FP16(b[i].d);
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128, t = (e % 128) / 32, l = e % 32;
            uint8_t lb = b[i].ql[64 * h + l + 32 * (t & 1)];
            int nib = t < 2 ? (lb & 0xF) : (lb >> 4);
            int hi2 = (b[i].qh[32 * h + l] >> (2 * t)) & 3;
            y[e] = d * (float)b[i].scales[e / 16] * (float)((nib | (hi2 << 4)) - 32);
        }
    }
}

void ll_dequantize_row_q8_K(const void *src, float *y, int64_t n) {
    const block_q8_K *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++) y[j] = b[i].d * (float)b[i].qs[j];
}

void ll_dequantize_row_iq4_nl(const void *src, float *y, int64_t n) {
    const block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = LL_FP16(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)ll_kvalues_iq4nl[b[i].qs[j] & 0xF];
            y[j + 16] = d * (float)ll_kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}

void ll_dequantize_row_iq4_xs(const void *src, float *y, int64_t n) {
    const block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        float d = LL_FP16(b[i].d);
        for (int s = 0; s < 8; s++) {
            float dl = d * (float)ll_iq4_xs_scale(&b[i], s);
            const uint8_t *q = b[i].qs + 16 * s;
            for (int j = 0; j < 16; j++) {
                y[32 * s + j] = dl * (float)ll_kvalues_iq4nl[q[j] & 0xF];
                y[32 * s + j + 16] = dl * (float)ll_kvalues_iq4nl[q[j] >> 4];
            }
        }
    }
}

void ll_dequantize_row_mxfp4(const void *src, float *y, int64_t n) {
    const block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / 32; i++, y += 32) {
        float d = ll_mxfp4_scale(b[i].e);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)ll_kvalues_mxfp4[b[i].qs[j] & 0xF] * d;
            y[j + 16] = (float)ll_kvalues_mxfp4[b[i].qs[j] >> 4] * d;
        }
    }
}

/* ------------------------------------------------------------------ activation formats */

/* Q8_0 as llama.cpp's x86 path: d = amax/127 stored as fp16, q = round-half-even(x*127/amax). */
void ll_quantize_row_q8_0(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
        y[i].d = ll_fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)nearbyintf(x[j] * id);
    }
}

void ll_quantize_row_q8_1(const float *x, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
        int sum = 0;
        for (int j = 0; j < 32; j++) { y[i].qs[j] = (int8_t)nearbyintf(x[j] * id); sum += y[i].qs[j]; }
        y[i].d = ll_fp32_to_fp16(d);
        y[i].s = ll_fp32_to_fp16((float)sum * d);
    }
}

/* Q8_K as llama.cpp: scale from the signed value of largest magnitude. */
void ll_quantize_row_q8_K(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax = 0, max = 0;
        for (int j = 0; j < QK_K; j++) {
            float a = fabsf(x[j]);
            if (a > amax) { amax = a; max = x[j]; }
        }
        if (amax == 0) {
            y[i].d = 0;
            memset(y[i].qs, 0, sizeof y[i].qs);
            memset(y[i].bsums, 0, sizeof y[i].bsums);
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = ll_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int k = 0; k < 16; k++) s += y[i].qs[16 * g + k];
            y[i].bsums[g] = (int16_t)s;
        }
        y[i].d = 1 / iscale;
    }
}

/* ------------------------------------------------------------------ scale fitting */

/* Symmetric fit x ≈ s·q, q integer in [-nmax, nmax-1]; tries scales around the one that
 * maps the extreme value onto -nmax and keeps the least-squares best. Returns s. */
static float fit_symmetric(const float *x, int n, int nmax, int8_t *q) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    if (amax < 1e-30f) { memset(q, 0, (size_t)n); return 0; }
    float best_s = 0, best_err = FLT_MAX;
    int8_t tmp[QK_K];
    for (int step = -9; step <= 9; step++) {
        float iscale = -((float)nmax + 0.1f * (float)step) / max;
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < n; i++) {
            int v = ll_nearest_int(iscale * x[i]);
            v = v < -nmax ? -nmax : v > nmax - 1 ? nmax - 1 : v;
            tmp[i] = (int8_t)v;
            sumqx += x[i] * (float)v; sumq2 += (float)v * (float)v;
        }
        if (sumq2 <= 0) continue;
        float s = sumqx / sumq2, err = 0;
        for (int i = 0; i < n; i++) { float e = x[i] - s * (float)tmp[i]; err += e * e; }
        if (err < best_err) { best_err = err; best_s = s; memcpy(q, tmp, (size_t)n); }
    }
    return best_s;
}

/* Asymmetric fit x ≈ s·q − m, q in [0, qmax], m >= 0 (the block min is clamped to <= 0,
 * as the K-quant formats store a non-negative min). Returns s, writes *m. */
static float fit_scale_min(const float *x, int n, int qmax, float *m_out) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) { lo = fminf(lo, x[i]); hi = fmaxf(hi, x[i]); }
    if (lo > 0) lo = 0;
    if (hi <= lo) { *m_out = -lo; return 0; }
    float best_s = (hi - lo) / (float)qmax, best_m = -lo, best_err = FLT_MAX;
    for (int step = -6; step <= 12; step++) {
        float s0 = (hi - lo) / ((float)qmax + 0.1f * (float)step);
        if (s0 <= 0) continue;
        /* quantize with (s0, lo), then refit s and m by least squares on the chosen q */
        float sq = 0, sx = 0, sqq = 0, sqx = 0;
        for (int i = 0; i < n; i++) {
            int q = ll_nearest_int((x[i] - lo) / s0);
            q = q < 0 ? 0 : q > qmax ? qmax : q;
            sq += (float)q; sx += x[i]; sqq += (float)(q * q); sqx += (float)q * x[i];
        }
        float det = (float)n * sqq - sq * sq, s, mn;
        if (det > 0) {
            s = ((float)n * sqx - sq * sx) / det;
            mn = (sqq * sx - sq * sqx) / det;   /* x ≈ s q + mn */
        } else { s = s0; mn = lo; }
        if (mn > 0) { mn = 0; s = sqq > 0 ? sqx / sqq : s0; }
        if (s <= 0) continue;
        float err = 0;
        for (int i = 0; i < n; i++) {
            int q = ll_nearest_int((x[i] - mn) / s);
            q = q < 0 ? 0 : q > qmax ? qmax : q;
            float e = x[i] - (s * (float)q + mn); err += e * e;
        }
        if (err < best_err) { best_err = err; best_s = s; best_m = -mn; }
    }
    *m_out = best_m;
    return best_s;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ------------------------------------------------------------------ 32-element blocks */

void ll_quantize_row_q4_0(const float *x, void *dst, int64_t n) {
    block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        int8_t q[32];
        float s = fit_symmetric(x, 32, 8, q);
        y[i].d = ll_fp32_to_fp16(s);
        float d = LL_FP16(y[i].d), id = d != 0 ? 1.f / d : 0;
        for (int j = 0; j < 16; j++) {
            int a = clampi(ll_nearest_int(x[j] * id), -8, 7) + 8;
            int b = clampi(ll_nearest_int(x[j + 16] * id), -8, 7) + 8;
            y[i].qs[j] = (uint8_t)(a | (b << 4));
        }
    }
}

void ll_quantize_row_q4_1(const float *x, void *dst, int64_t n) {
    block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < 32; j++) { lo = fminf(lo, x[j]); hi = fmaxf(hi, x[j]); }
        y[i].d = ll_fp32_to_fp16((hi - lo) / 15.f);
        y[i].m = ll_fp32_to_fp16(lo);
        float d = LL_FP16(y[i].d), m = LL_FP16(y[i].m), id = d != 0 ? 1.f / d : 0;
        for (int j = 0; j < 16; j++) {
            int a = clampi(ll_nearest_int((x[j] - m) * id), 0, 15);
            int b = clampi(ll_nearest_int((x[j + 16] - m) * id), 0, 15);
            y[i].qs[j] = (uint8_t)(a | (b << 4));
        }
    }
}

void ll_quantize_row_q5_0(const float *x, void *dst, int64_t n) {
    block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        int8_t q[32];
        float s = fit_symmetric(x, 32, 16, q);
        y[i].d = ll_fp32_to_fp16(s);
        float d = LL_FP16(y[i].d), id = d != 0 ? 1.f / d : 0;
        uint32_t h = 0;
        for (int j = 0; j < 16; j++) {
            int a = clampi(ll_nearest_int(x[j] * id), -16, 15) + 16;
            int b = clampi(ll_nearest_int(x[j + 16] * id), -16, 15) + 16;
            y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
            h |= (uint32_t)(a >> 4) << j;
            h |= (uint32_t)(b >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &h, 4);
    }
}

void ll_quantize_row_q5_1(const float *x, void *dst, int64_t n) {
    block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float lo = x[0], hi = x[0];
        for (int j = 1; j < 32; j++) { lo = fminf(lo, x[j]); hi = fmaxf(hi, x[j]); }
        y[i].d = ll_fp32_to_fp16((hi - lo) / 31.f);
        y[i].m = ll_fp32_to_fp16(lo);
        float d = LL_FP16(y[i].d), m = LL_FP16(y[i].m), id = d != 0 ? 1.f / d : 0;
        uint32_t h = 0;
        for (int j = 0; j < 16; j++) {
            int a = clampi(ll_nearest_int((x[j] - m) * id), 0, 31);
            int b = clampi(ll_nearest_int((x[j + 16] - m) * id), 0, 31);
            y[i].qs[j] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
            h |= (uint32_t)(a >> 4) << j;
            h |= (uint32_t)(b >> 4) << (j + 16);
        }
        memcpy(y[i].qh, &h, 4);
    }
}

/* Weight quantizer for Q8_0 (ties away from zero, as the reference quantizer). */
static void quantize_row_q8_0_weights(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.f, id = d != 0 ? 1.f / d : 0;
        y[i].d = ll_fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

/* Best index into a sorted 16-value table for v. */
static int nearest_kvalue(const int8_t *tab, float v) {
    int best = 0; float be = fabsf(v - tab[0]);
    for (int k = 1; k < 16; k++) { float e = fabsf(v - tab[k]); if (e < be) { be = e; best = k; } }
    return best;
}

/* Fit x ≈ s·K[q] over a non-uniform table: candidates around s = max/K_extreme. */
static float fit_table(const float *x, int n, const int8_t *tab) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    if (amax < 1e-30f) return 0;
    float best_s = max / (float)tab[0], best_err = FLT_MAX;
    for (int step = -10; step <= 10; step++) {
        float s0 = max / ((float)tab[0] + 0.5f * (float)step);
        float sqx = 0, sqq = 0;
        for (int i = 0; i < n; i++) {
            float q = tab[nearest_kvalue(tab, x[i] / s0)];
            sqx += q * x[i]; sqq += q * q;
        }
        if (sqq <= 0) continue;
        float s = sqx / sqq, err = 0;
        for (int i = 0; i < n; i++) {
            float e = x[i] - s * tab[nearest_kvalue(tab, x[i] / s)]; err += e * e;
        }
        if (err < best_err) { best_err = err; best_s = s; }
    }
    return best_s;
}

void ll_quantize_row_iq4_nl(const float *x, void *dst, int64_t n) {
    block_iq4_nl *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        y[i].d = ll_fp32_to_fp16(fit_table(x, 32, ll_kvalues_iq4nl));
        float d = LL_FP16(y[i].d), id = d != 0 ? 1.f / d : 0;
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(nearest_kvalue(ll_kvalues_iq4nl, x[j] * id) |
                                   (nearest_kvalue(ll_kvalues_iq4nl, x[j + 16] * id) << 4));
    }
}

void ll_quantize_row_mxfp4(const float *x, void *dst, int64_t n) {
    block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        /* choose e so that amax/d lands at or below the largest value 12 */
        int e = 0;
        if (amax > 0) {
            e = (int)ceilf(log2f(amax / 12.f)) + 128;
            e = clampi(e, 0, 254);
        }
        y[i].e = (uint8_t)e;
        float d = ll_mxfp4_scale((uint8_t)e), id = d > 0 ? 1.f / d : 0;
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(nearest_kvalue(ll_kvalues_mxfp4, x[j] * id) |
                                   (nearest_kvalue(ll_kvalues_mxfp4, x[j + 16] * id) << 4));
    }
}

/* ------------------------------------------------------------------ K-quants */

/* Shared by Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins. Writes d, dmin,
 * the packed scales, and the integer levels L[256] in [0, qmax]. */
static void quantize_k_scale_min_block(const float *x, int qmax, uint16_t *d16, uint16_t *dmin16,
                                       uint8_t *scales, uint8_t *L) {
    float sc[8], mn[8], max_sc = 0, max_mn = 0;
    for (int s = 0; s < 8; s++) {
        sc[s] = fit_scale_min(x + 32 * s, 32, qmax, &mn[s]);
        max_sc = fmaxf(max_sc, sc[s]); max_mn = fmaxf(max_mn, mn[s]);
    }
    float inv_sc = max_sc > 0 ? 63.f / max_sc : 0, inv_mn = max_mn > 0 ? 63.f / max_mn : 0;
    uint8_t ls[8], lm[8];
    for (int s = 0; s < 8; s++) {
        ls[s] = (uint8_t)clampi(ll_nearest_int(inv_sc * sc[s]), 0, 63);
        lm[s] = (uint8_t)clampi(ll_nearest_int(inv_mn * mn[s]), 0, 63);
    }
    for (int s = 0; s < 8; s++) {
        if (s < 4) { scales[s] = ls[s]; scales[s + 4] = lm[s]; }
        else {
            scales[s + 4] = (uint8_t)((ls[s] & 0xF) | ((lm[s] & 0xF) << 4));
            scales[s - 4] |= (uint8_t)((ls[s] >> 4) << 6);
            scales[s] |= (uint8_t)((lm[s] >> 4) << 6);
        }
    }
    *d16 = ll_fp32_to_fp16(max_sc / 63.f);
    *dmin16 = ll_fp32_to_fp16(max_mn / 63.f);
    float d = LL_FP16(*d16), dmin = LL_FP16(*dmin16);
    for (int s = 0; s < 8; s++) {
        uint8_t a, m;
        ll_get_scale_min_k4(s, scales, &a, &m);
        float dl = d * a, ml = dmin * m;
        for (int l = 0; l < 32; l++) {
            int q = dl > 0 ? ll_nearest_int((x[32 * s + l] + ml) / dl) : 0;
            L[32 * s + l] = (uint8_t)clampi(q, 0, qmax);
        }
    }
}

void ll_quantize_row_q4_K(const float *x, void *dst, int64_t n) {
    block_q4_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        memset(y[i].scales, 0, 12);
        quantize_k_scale_min_block(x, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                y[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

void ll_quantize_row_q5_K(const float *x, void *dst, int64_t n) {
    block_q5_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        uint8_t L[QK_K];
        memset(y[i].scales, 0, 12);
        quantize_k_scale_min_block(x, 31, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, 32);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int a = L[64 * c + l], b = L[64 * c + 32 + l];
                y[i].qs[32 * c + l] = (uint8_t)((a & 0xF) | ((b & 0xF) << 4));
                y[i].qh[l] |= (uint8_t)(((a >> 4) << (2 * c)) | ((b >> 4) << (2 * c + 1)));
            }
    }
}

void ll_quantize_row_q6_K(const float *x, void *dst, int64_t n) {
    block_q6_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sc[16], amax = 0, max = 0;
        int8_t q[16];
        for (int g = 0; g < 16; g++) {
            sc[g] = fit_symmetric(x + 16 * g, 16, 32, q);
            if (fabsf(sc[g]) > amax) { amax = fabsf(sc[g]); max = sc[g]; }
        }
        if (amax == 0) { memset(&y[i], 0, sizeof y[i]); continue; }
        float iscale = -128.f / max;
        y[i].d = ll_fp32_to_fp16(1 / iscale);
        for (int g = 0; g < 16; g++) y[i].scales[g] = (int8_t)clampi(ll_nearest_int(iscale * sc[g]), -128, 127);
        float d = LL_FP16(y[i].d);
        uint8_t L[QK_K];
        for (int g = 0; g < 16; g++) {
            float dl = d * (float)y[i].scales[g];
            for (int k = 0; k < 16; k++) {
                int v = dl != 0 ? ll_nearest_int(x[16 * g + k] / dl) : 0;
                L[16 * g + k] = (uint8_t)(clampi(v, -32, 31) + 32);
            }
        }
        memset(y[i].qh, 0, 64);
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128, t = (e % 128) / 32, l = e % 32;
            uint8_t *lb = &y[i].ql[64 * h + l + 32 * (t & 1)];
            if (t < 2) *lb = (uint8_t)((*lb & 0xF0) | (L[e] & 0xF));
            else *lb = (uint8_t)((*lb & 0x0F) | ((L[e] & 0xF) << 4));
            y[i].qh[32 * h + l] |= (uint8_t)((L[e] >> 4) << (2 * t));
        }
    }
}

void ll_quantize_row_q3_K(const float *x, void *dst, int64_t n) {
    block_q3_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sc[16], amax = 0, max = 0;
        int8_t q[16];
        for (int g = 0; g < 16; g++) {
            sc[g] = fit_symmetric(x + 16 * g, 16, 4, q);
            if (fabsf(sc[g]) > amax) { amax = fabsf(sc[g]); max = sc[g]; }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0) continue;
        float iscale = -32.f / max;
        y[i].d = ll_fp32_to_fp16(1 / iscale);
        int S[16];
        for (int g = 0; g < 16; g++) {
            S[g] = clampi(ll_nearest_int(iscale * sc[g]), -32, 31);
            int l = S[g] + 32;
            if (g < 8) y[i].scales[g] = (uint8_t)(l & 0xF);
            else y[i].scales[g - 8] |= (uint8_t)((l & 0xF) << 4);
            y[i].scales[8 + g % 4] |= (uint8_t)((l >> 4) << (2 * (g / 4)));
        }
        float d = LL_FP16(y[i].d);
        for (int e = 0; e < QK_K; e++) {
            float dl = d * (float)S[e / 16];
            int v = dl != 0 ? clampi(ll_nearest_int(x[e] / dl), -4, 3) : 0;
            int u = v + 4; /* 0..7: low 2 bits in qs, bit 2 in hmask */
            int h = e / 128, j = (e % 128) / 32, l = e % 32;
            y[i].qs[32 * h + l] |= (uint8_t)((u & 3) << (2 * j));
            if (u & 4) y[i].hmask[l] |= (uint8_t)(1 << (4 * h + j));
        }
    }
}

void ll_quantize_row_q2_K(const float *x, void *dst, int64_t n) {
    block_q2_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sc[16], mn[16], max_sc = 0, max_mn = 0;
        for (int g = 0; g < 16; g++) {
            sc[g] = fit_scale_min(x + 16 * g, 16, 3, &mn[g]);
            max_sc = fmaxf(max_sc, sc[g]); max_mn = fmaxf(max_mn, mn[g]);
        }
        memset(&y[i], 0, sizeof y[i]);
        float inv_sc = max_sc > 0 ? 15.f / max_sc : 0, inv_mn = max_mn > 0 ? 15.f / max_mn : 0;
        for (int g = 0; g < 16; g++)
            y[i].scales[g] = (uint8_t)(clampi(ll_nearest_int(inv_sc * sc[g]), 0, 15) |
                                       (clampi(ll_nearest_int(inv_mn * mn[g]), 0, 15) << 4));
        y[i].d = ll_fp32_to_fp16(max_sc / 15.f);
        y[i].dmin = ll_fp32_to_fp16(max_mn / 15.f);
        float d = LL_FP16(y[i].d), dmin = LL_FP16(y[i].dmin);
        for (int e = 0; e < QK_K; e++) {
            float dl = d * (float)(y[i].scales[e / 16] & 0xF), ml = dmin * (float)(y[i].scales[e / 16] >> 4);
            int v = dl > 0 ? clampi(ll_nearest_int((x[e] + ml) / dl), 0, 3) : 0;
            int h = e / 128, j = (e % 128) / 32, l = e % 32;
            y[i].qs[32 * h + l] |= (uint8_t)(v << (2 * j));
        }
    }
}

void ll_quantize_row_iq4_xs(const float *x, void *dst, int64_t n) {
    block_iq4_xs *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float sc[8], amax = 0, max = 0;
        for (int s = 0; s < 8; s++) {
            sc[s] = fit_table(x + 32 * s, 32, ll_kvalues_iq4nl);
            if (fabsf(sc[s]) > amax) { amax = fabsf(sc[s]); max = sc[s]; }
        }
        memset(&y[i], 0, sizeof y[i]);
        if (amax == 0) continue;
        float d = -max / 32.f;
        y[i].d = ll_fp32_to_fp16(d);
        d = LL_FP16(y[i].d);
        float id = d != 0 ? 1.f / d : 0;
        for (int s = 0; s < 8; s++) {
            int ls = clampi(ll_nearest_int(id * sc[s]), -32, 31) + 32;
            y[i].scales_l[s / 2] |= (uint8_t)((ls & 0xF) << (4 * (s % 2)));
            y[i].scales_h |= (uint16_t)((ls >> 4) << (2 * s));
            float dl = d * (float)(ls - 32), idl = dl != 0 ? 1.f / dl : 0;
            for (int j = 0; j < 16; j++)
                y[i].qs[16 * s + j] = (uint8_t)(nearest_kvalue(ll_kvalues_iq4nl, x[32 * s + j] * idl) |
                                                (nearest_kvalue(ll_kvalues_iq4nl, x[32 * s + j + 16] * idl) << 4));
        }
    }
}

/* exported for the traits table */
void ll_quantize_row_q8_0_ref(const float *x, void *y, int64_t n) { quantize_row_q8_0_weights(x, y, n); }
