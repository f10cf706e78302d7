/* AVX2 + FMA + F16C dot products. Each one computes exactly what its scalar twin in
 * scalar.c computes — the same exact integer lane sums, the same fused multiply-adds in
 * the same lane layout, the same final reduction — so results are bitwise identical
 * across ISAs. Compiled with -mavx2 -mfma -mf16c; used only after a cpuid check. */
#include "../internal.h"
#include <immintrin.h>

int ll_cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

/* hsum8 of scalar.c: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) */
static inline float hsum8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* ll_reduce_4x16 with each 16-lane accumulator held as (lo: lanes 0-7, hi: lanes 8-15) */
static inline float reduce_4x16(__m256 lo[4], __m256 hi[4]) {
    lo[0] = _mm256_add_ps(lo[0], lo[2]); hi[0] = _mm256_add_ps(hi[0], hi[2]);
    lo[1] = _mm256_add_ps(lo[1], lo[3]); hi[1] = _mm256_add_ps(hi[1], hi[3]);
    lo[0] = _mm256_add_ps(lo[0], lo[1]); hi[0] = _mm256_add_ps(hi[0], hi[1]);
    __m256 t3 = _mm256_add_ps(hi[0], lo[0]);
    __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    __m128 s = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));          /* t0+t2, t1+t3 */
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void dot_f32(int64_t n, float *s, const void *w, const void *x) {
    const float *a = w, *b = x;
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; j++) lo[j] = hi[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 4; j++) {
            lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16 * j), _mm256_loadu_ps(b + i + 16 * j), lo[j]);
            hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16 * j + 8), _mm256_loadu_ps(b + i + 16 * j + 8), hi[j]);
        }
    double sum = reduce_4x16(lo, hi);
    for (; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static float dot_f16_f16(const uint16_t *a, const uint16_t *b, int64_t n) {
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; j++) lo[j] = hi[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 4; j++) {
            lo[j] = _mm256_fmadd_ps(load_f16(a + i + 16 * j), load_f16(b + i + 16 * j), lo[j]);
            hi[j] = _mm256_fmadd_ps(load_f16(a + i + 16 * j + 8), load_f16(b + i + 16 * j + 8), hi[j]);
        }
    double sum = reduce_4x16(lo, hi);
    for (; i < n; i++) sum += (double)(LL_FP16(a[i]) * LL_FP16(b[i]));
    return (float)sum;
}

static void dot_f16(int64_t n, float *s, const void *w, const void *x) { *s = dot_f16_f16(w, x, n); }

/* Signed bytes a·b summed in groups of four into 8 int32 lanes (lane m = bytes 4m..4m+3
 * of each 128-bit half, i.e. elements 4m..4m+3 in order). */
static inline __m256i dot_i8_groups4(__m256i a, __m256i b) {
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* unsigned bytes u (0..127) times signed bytes b, pairs summed to int16 */
static inline __m256i mul_u8_i8_pairs(__m256i u, __m256i b) { return _mm256_maddubs_epi16(u, b); }

static inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static void dot_q8_0(int64_t n, float *s, const void *w, const void *x) {
    const block_q8_0 *a = w; const block_q8_0 *b = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        __m256 d = _mm256_set1_ps(LL_FP16(a[i].d) * LL_FP16(b[i].d));
        __m256i q = dot_i8_groups4(_mm256_loadu_si256((const __m256i *)a[i].qs), _mm256_loadu_si256((const __m256i *)b[i].qs));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), acc);
    }
    *s = hsum8(acc);
}

/* 16 packed nibble bytes -> 32 bytes: low nibbles first, then high nibbles */
static inline __m256i unpack_nibbles(const uint8_t *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

static void dot_q4_0(int64_t n, float *s, const void *w, const void *x) {
    const block_q4_0 *a = w; const block_q8_0 *b = x;
    float acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        __m256i q = _mm256_sub_epi8(unpack_nibbles(a[i].qs), _mm256_set1_epi8(8));
        int isum = hsum_i32(dot_i8_groups4(q, _mm256_loadu_si256((const __m256i *)b[i].qs)));
        acc = fmaf((float)isum, LL_FP16(b[i].d) * LL_FP16(a[i].d), acc);
    }
    *s = acc;
}

/* the 8 six-bit scales and mins of a Q4_K/Q5_K block */
static inline void k4_scales(const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    for (int j = 0; j < 8; j++) ll_get_scale_min_k4(j, q, &sc[j], &mn[j]);
}

static void dot_q4_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q4_K *a = w; const block_q8_K *b = x;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], mn[8];
        k4_scales(a[i].scales, sc, mn);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q4 = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * j));
            __m256i ql = _mm256_and_si256(q4, m4), qh = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
            __m256i pl = mul_u8_i8_pairs(ql, _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * j)));
            __m256i ph = mul_u8_i8_pairs(qh, _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * j + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * j])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        int msum = 0;
        for (int sb = 0; sb < 8; sb++) msum += mn[sb] * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        acc = fmaf((float)hsum_i32(sumi), b[i].d * LL_FP16(a[i].d), acc);
        accm = fmaf((float)msum, b[i].d * LL_FP16(a[i].dmin), accm);
    }
    *s = acc - accm;
}

static void dot_q5_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q5_K *a = w; const block_q8_K *b = x;
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = b[i].d * LL_FP16(a[i].d), dmin = -b[i].d * LL_FP16(a[i].dmin);
        uint8_t sc[8], mn[8];
        k4_scales(a[i].scales, sc, mn);
        int msum = 0;
        for (int sb = 0; sb < 8; sb++) msum += mn[sb] * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        __m256i qhbits = _mm256_loadu_si256((const __m256i *)a[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q5 = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * j));
            __m256i hl = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qhbits, 2 * j), one), 4);
            __m256i hh = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qhbits, 2 * j + 1), one), 4);
            __m256i ql = _mm256_or_si256(_mm256_and_si256(q5, m4), hl);
            __m256i qh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q5, 4), m4), hh);
            __m256i pl = mul_u8_i8_pairs(ql, _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * j)));
            __m256i ph = mul_u8_i8_pairs(qh, _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * j + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(pl, _mm256_set1_epi16(sc[2 * j])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(ph, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        summs = fmaf(dmin, (float)msum, summs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum8(acc) + summs;
}

static void dot_q6_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q6_K *a = w; const block_q8_K *b = x;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = b[i].d * LL_FP16(a[i].d);
        __m256i sumi = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(a[i].ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(a[i].ql + 64 * h + 32));
            __m256i hb = _mm256_loadu_si256((const __m256i *)(a[i].qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4));
            for (int t = 0; t < 4; t++) {
                __m256i y = _mm256_loadu_si256((const __m256i *)(b[i].qs + 128 * h + 32 * t));
                __m256i p = _mm256_sub_epi16(mul_u8_i8_pairs(q[t], y), mul_u8_i8_pairs(m32, y));
                int sa = a[i].scales[8 * h + 2 * t], sb = a[i].scales[8 * h + 2 * t + 1];
                __m256i scale = _mm256_set_m128i(_mm_set1_epi16((short)sb), _mm_set1_epi16((short)sa));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, scale));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum8(acc);
}

/* Q8_0 activations, vectorized: the same d, the same round-half-even of x·127/amax. */
static void quantize_row_q8_0(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        __m256 v[4], mx = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) { v[k] = _mm256_loadu_ps(x + 8 * k); mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[k])); }
        __m128 m = _mm_max_ps(_mm256_extractf128_ps(mx, 1), _mm256_castps256_ps128(mx));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float amax = _mm_cvtss_f32(m);
        float d = amax / 127.f, id = amax != 0 ? 127.f / amax : 0.f;
        y[i].d = ll_fp32_to_fp16(d);
        __m256 mul = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], mul), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i p01 = _mm256_packs_epi32(q[0], q[1]), p23 = _mm256_packs_epi32(q[2], q[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
    }
}

void ll_kernels_avx2(ll_kernels *k) {
    k->isa = "avx2";
    k->vec_dot[LLAMBDA_TYPE_F32] = dot_f32;
    k->vec_dot[LLAMBDA_TYPE_F16] = dot_f16;
    k->vec_dot[LLAMBDA_TYPE_Q8_0] = dot_q8_0;
    k->vec_dot[LLAMBDA_TYPE_Q4_0] = dot_q4_0;
    k->vec_dot[LLAMBDA_TYPE_Q4_K] = dot_q4_K;
    k->vec_dot[LLAMBDA_TYPE_Q5_K] = dot_q5_K;
    k->vec_dot[LLAMBDA_TYPE_Q6_K] = dot_q6_K;
    k->dot_f16_f16 = dot_f16_f16;
    k->from_float[LLAMBDA_TYPE_Q8_0] = quantize_row_q8_0;
}
