/* IEEE binary16 conversions (exact, incl. subnormals, inf, NaN) and the plain float rows. */
#include "../internal.h"
#include <pthread.h>

float ll_fp16_table[65536];

float ll_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            man &= 0x3ff;
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 31) u = sign | 0x7f800000 | (man << 13);
    else u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f; memcpy(&f, &u, 4); return f;
}

/* Round to nearest even. */
uint16_t ll_fp32_to_fp16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00);           /* NaN */
    if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);          /* overflow to inf */
    if (a < 0x38800000) {                                            /* subnormal or zero */
        if (a < 0x33000000) return (uint16_t)sign;                   /* < half the smallest */
        uint32_t e = a >> 23, man = (a & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;                                    /* 14..24 */
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((a >> 13) - (112u << 10));
    uint32_t rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++;
    return (uint16_t)(sign | r);
}

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static void build_tables(void) {
    for (uint32_t i = 0; i < 65536; i++) ll_fp16_table[i] = ll_fp16_to_fp32((uint16_t)i);
}
void ll_init_tables(void) { pthread_once(&tables_once, build_tables); }

void ll_convert_row_f16(const float *x, void *y, int64_t n) {
    uint16_t *o = y;
    for (int64_t i = 0; i < n; i++) o[i] = ll_fp32_to_fp16(x[i]);
}
void ll_convert_row_bf16(const float *x, void *y, int64_t n) {
    uint16_t *o = y;
    for (int64_t i = 0; i < n; i++) o[i] = ll_fp32_to_bf16(x[i]);
}
/* f32 -> f16 -> f32: the activation format LL_ACT_F16_AS_F32 */
void ll_round_row_f16(const float *x, void *y, int64_t n) {
    float *o = y;
    for (int64_t i = 0; i < n; i++) o[i] = ll_fp16_to_fp32(ll_fp32_to_fp16(x[i]));
}
/* The same rounded values as 16-bit numbers in pass order (LL_ACT_F16_PASS / _BF16_PASS / _BF16_PASS4) */
void ll_pass_row_f16(const float *x, void *y, int64_t n) {
    uint16_t *o = y;
    for (int64_t i = 0; i < n; i++) o[ll_pass_index(i, n, 4)] = ll_fp32_to_fp16(x[i]);
}
static void pass_order_bf16(const float *x, uint16_t *o, int64_t n, int n_pass) {
    for (int64_t i = 0; i < n; i++) o[ll_pass_index(i, n, n_pass)] = ll_fp32_to_bf16(x[i]);
}
void ll_pass_row_bf16(const float *x, void *y, int64_t n) { pass_order_bf16(x, y, n, 2); }
void ll_pass4_row_bf16(const float *x, void *y, int64_t n) { pass_order_bf16(x, y, n, 4); }
void ll_convert_row_f32(const float *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }

void ll_dequantize_row_f16(const void *src, float *y, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) y[i] = ll_fp16_to_fp32(x[i]);
}
void ll_dequantize_row_bf16(const void *src, float *y, int64_t n) {
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++) y[i] = ll_bf16_to_fp32(x[i]);
}
void ll_dequantize_row_f32(const void *src, float *y, int64_t n) { memcpy(y, src, (size_t)n * 4); }
