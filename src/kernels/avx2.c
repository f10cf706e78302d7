/* AVX2 + FMA + F16C dot products. Each one computes exactly what its scalar twin in
 * scalar.c computes — the same exact integer lane sums, the same fused multiply-adds in
 * the same lane layout, the same final reduction — so results are bitwise identical
 * across ISAs. Compiled with -mavx2 -mfma -mf16c; used only after a cpuid check.
 * avx512.c compiles this same file again with AVX-512 (VL, BW, VNNI) enabled: the integer
 * steps become VNNI instructions and the compiler gets 32 vector registers. avx2vnni.c
 * compiles it a third time with AVX-VNNI (the 256-bit VNNI of CPUs without AVX-512): the
 * AVX2 kernels, their integer steps as VNNI instructions (LL_AVX_VNNI). */
#include "../internal.h"
#include <cpuid.h>
#include <pthread.h>
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF   /* a*b + c stays two roundings, as in the scalar kernels (gcc: -std=c11 does this) */
#endif
#include <immintrin.h>

#ifdef LL_AVX512
/* cpuid: AVX-512 F (leaf 7 EBX 16), BW (EBX 30), VL (EBX 31), VNNI (ECX 11), on top of the
 * AVX2 set; and the OS saving the opmask and ZMM state (XCR0 bits 5-7). */
int ll_cpu_has_avx512(void) {
    unsigned a, b, c, d;
    if (!ll_cpu_has_avx2_base()) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6) != 0xe6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1) && ((c >> 11) & 1);
}
#elif defined(LL_AVX_VNNI)
/* cpuid: AVX-VNNI (leaf 7 subleaf 1 EAX 4) on top of the AVX2 set */
int ll_cpu_has_avx_vnni(void) {
    unsigned a, b, c, d;
    return ll_cpu_has_avx2_base() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 4) & 1);
}
#else
/* cpuid: AVX2 (leaf 7 EBX 5), FMA (leaf 1 ECX 12), F16C (ECX 29), and the OS saving the
 * YMM state (OSXSAVE, ECX 27, and XCR0 bits 1-2). */
int ll_cpu_has_avx2_base(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int fma = (c >> 12) & 1, f16c = (c >> 29) & 1, osxsave = (c >> 27) & 1;
    if (!fma || !f16c || !osxsave) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 5) & 1;
}

int ll_cpu_has_avx2(void) { return ll_cpu_has_avx2_base(); }
#endif

/* The two integer steps every quantized kernel is made of. With AVX-512 VNNI (in its
 * 256-bit form) each is one instruction; without, two or three. The integers are exact
 * either way (no intermediate saturates: |u·s| pairs stay within int16), so both builds
 * give the same sums. */
#ifdef LL_AVX512
#define ISA_NAME "avx512"
/* lane m: u[4m..4m+3] · s[4m..4m+3], u unsigned, s signed bytes */
#define DOT_U8I8_4(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (s))
/* acc + pairwise int16 products summed to int32 */
#define ACC_MADD16(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
/* acc + lane m: u[4m..4m+3] · s[4m..4m+3] */
#define ACC_DOT_U8I8_4(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#elif defined(LL_AVX_VNNI)
/* The AVX2 kernels with the byte dot products as AVX-VNNI's vpdpbusd (the same exact
 * integers: the AVX2 forms never saturate). The int16 products keep vpmaddwd and an add:
 * with vpdpwssd the accumulator's chain is its latency, and one thread from L2 (dot_packed,
 * 384 rows of 2048, three runs) lost on Q5_K (33.7/31.1/32.9 -> 31.8/29.9/31.4 GB/s) and
 * IQ4_XS (25.2/25.2/25.8 -> 22.9/23.1/23.1), even elsewhere. */
#define ISA_NAME "avx2-vnni"
#define DOT_U8I8_4(u, s) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), (u), (s))
#define ACC_MADD16(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define ACC_DOT_U8I8_4(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#else
#define ISA_NAME "avx2"
/* Here a byte dot product is vpmaddubsw (int16 pairs) and then vpmaddwd by ones to int32.
 * The 4-bit quant tiles keep up to eight steps in the int16 pairs instead (a pair is
 * within 2 x 15 x 128, eight of them within 30720: no saturation) and widen them once,
 * with the scale where there is one: the same integers, half the multiplies. One thread,
 * a Q4_K projection from cache (2048 x 2048), 35 -> 41-44 GB/s. */
#define NIBBLE_SUMS16 1
#define DOT_U8I8_4(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1))
#define ACC_MADD16(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#define ACC_DOT_U8I8_4(acc, u, s) _mm256_add_epi32((acc), DOT_U8I8_4((u), (s)))
#endif
/* the high nibbles of packed 4-bit quants, as bytes 0-15 */
#define HIGH_NIBBLES(q, m4) _mm256_and_si256(_mm256_srli_epi16((q), 4), (m4))

/* How far ahead the kernels prefetch the weight stream, as non-temporal (a weight is read
 * once a token: it need not displace the activations and the KV cache from L2). Session
 * 13, AMD family 26, two threads, alternating tg64 medians: 8 KiB rather than 16,
 * llama-3.2-1b Q4_K_M 58.5 -> 64.2 and 61.3 -> 65.9, Qwen3-Next (4 layers) 108.3 -> 112.0
 * and 107.2 -> 114.2, Q4_0 and F16 even, 4 KiB in between; then the NTA hint instead of T0,
 * Q4_K_M 63.8 -> 69.1, Nemotron (6 layers) 77.2 -> 81.5, Qwen3-Next 112.2 -> 118.4; prompts
 * even. Session 15, per-token alternation in one process (which the host's drift does not
 * blur): 6 KiB rather than 8, tokens 1.2-1.9% faster in four runs on llama-3.2-1b Q4_K_M
 * and Qwen3-Next, even on BF16 and Nemotron; 4 KiB slower, 12 KiB slower. Session 24 found
 * the best distance moving with the host's bandwidth level, and the decode rate now sets it,
 * 4-6 KiB (ll_stream_ahead_bytes, dispatch.c): a kernel reads it once a call
 * (stream_ahead) and passes it to each prefetch_ahead. The BF16 row kernels and the 16-bit
 * row kernels' pass_ahead keep the fixed PREFETCH_AHEAD (the AVX-512 F16 and BF16 one-token
 * tiles fetch nothing themselves: tile16_at): with the rate's distance a
 * llama-3.2-1b BF16 file kept 0.979 and 0.948 of its read pass against 0.994 and 0.964 with
 * 6 KiB where passes read 45-50 and 50-55 GB/s (1.001 against 0.996 at 68-78); F16 and Q8_0
 * even or better with the rate's, Nemotron (Q4_K_M, 6 layers) even. */
#define PREFETCH_AHEAD 6144
static inline int stream_ahead(void) { return atomic_load_explicit(&ll_stream_ahead_bytes, memory_order_relaxed); }
/* The AVX-512 Q6_K and Q5_K tiles fetch half as far again. Session 20, the Qwen3-Next head
 * (Q6_K, 467 MB) from memory on two threads, bench-proj: 80-82 GB/s at 6 KiB against 87-90
 * at 9 KiB in four alternations while the host read 84-88 GB/s, 53.8 against 53.2 twice
 * while it read about 52 (12 KiB: 51). Session 24, per-token alternation against each
 * token's read pass: a llama-3.2-1b Q6_K file kept 0.908 of the pass at 6 KiB and 0.880 at
 * 9 where passes read about 50 GB/s, 0.852 and 0.869 where they read about 80; Q5_K_M
 * 0.887 and 0.873 at a fixed 6 KiB, 0.867 and 0.858 at 9, 0.881 and 0.872 at half as far
 * again as stream_ahead (45-50 and 50-55 GB/s), and over 78 GB/s 0.761, 0.805 and 0.800. */
#ifdef LL_AVX512
static inline int stream_ahead_far(void) { return stream_ahead() * 3 / 2; }
#endif
/* the weight stream at p, ahead (stream_ahead) bytes on */
static inline __attribute__((always_inline)) void prefetch_ahead(const void *p, int ahead) {
    _mm_prefetch((const char *)p + ahead, _MM_HINT_NTA);
}
/* The one-token Q4_K, Q5_K, Q6_K and (AVX-512) Q8_0 tiles' prefetch, as an asm statement,
 * which stays where the code puts it. GCC hoisted _mm_prefetch there: the Q6_K tile's 27 a block,
 * written four a row, all went out before the block's first row, the Q4_K tile's 20
 * before its first group (in the AVX2 build's Q4_K tile too, session 27: per-token
 * alternation there, at about 38 GB/s, +0.4 points, even), so a thread asked for a
 * block's lines in one burst and then computed without asking. Spread over the block's
 * work, session 26, two threads, per-token alternation in one process (both kernel sets
 * linked), each token against a read pass just before it: llama-3.2-1b Q4_K_M 0.851 of the pass against 0.821 where
 * passes read about 80 GB/s, 0.924 against 0.886 where they read about 50; Q6_K 0.868
 * against 0.840 and Q5_K_M 0.869 against 0.813 at about 85; Qwen3-Next 0.935 against
 * 0.909 at about 52. The AVX-512 Q8_0 tile, its five a block spread over its row pairs,
 * session 30, three alternations at about 35-40 GB/s: llama-3.2-1b Q8_0 0.940 / 0.899 /
 * 0.929 -> 0.967 / 0.933 / 0.945, Nemotron (6 layers, a 374 MB Q8_0 head) 0.869 / 0.810 /
 * 0.855 -> 0.889 / 0.865 / 0.923. The other kernels' prefetches (Q4_0, AVX2 Q8_0: even that
 * way; the AVX-512 F16 and BF16 tiles have none) and the prompt instances keep the builtin:
 * as asm statements everywhere, prompts lost 4-6% (llama-3.2-1b Q6_K and F16 pp512: the
 * compiler scheduled the copies and the two-token tile around them worse). */
static inline __attribute__((always_inline)) void prefetch_tile(const void *p, int ahead, const int T) {
    if (T == 1) __asm__ volatile("prefetchnta %0" : : "m"(*((const char *)p + ahead)));
    else prefetch_ahead(p, ahead);
}

/* Keeps a loaded vector in its register: the compiler would otherwise fold the load into
 * each instruction that uses it, reading the same bytes twice through the load ports,
 * which bound the one-token kernels. */
#define ONE_LOAD(v) __asm__("" : "+v"(v))

#ifdef LL_AVX512
/* 32 bytes at a in the low half of a 512-bit vector, 32 at b in the high one */
static inline __m512i pair256(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)), _mm256_loadu_si256((const __m256i *)b), 1);
}
/* a in every 32-bit lane of the low half, b in every one of the high half */
static inline __m512i set_halves_epi32(int a, int b) { return _mm512_inserti64x4(_mm512_set1_epi32(a), _mm256_set1_epi32(b), 1); }
/* a in both halves */
static inline __m512 dup_halves(__m256 a) { return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(a))); }
/* the low half plus the high half */
static inline __m256 add_halves(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}
static inline __m256i add_halves_epi32(__m512i a) { return _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1)); }
/* The one-token tiles that read two steps a load hold lanes m and m + 1 of eight rows side
 * by side: acc[h][p] has lanes 4h + 2p (low half) and 4h + 2p + 1 (high half). Each row's
 * hsum8: (l0 + l4) + (l2 + l6) gathers in the low half, (l1 + l5) + (l3 + l7) in the high. */
static inline __m256 paired_hsum8(const __m512 acc[2][2]) {
    return add_halves(_mm512_add_ps(_mm512_add_ps(acc[0][0], acc[1][0]), _mm512_add_ps(acc[0][1], acc[1][1])));
}
/* the permute that puts 32-bit element m in the low half and m + 1 in the high (lanes m
 * and m + 1 of those tiles) */
static inline __m512i lane_pair(int m) { return set_halves_epi32(m, m + 1); }
#endif

/* hsum8 of scalar.c: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) */
static inline float hsum8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* ll_reduce_4x16's steps across its accumulators, each 16-lane accumulator held as (lo:
 * lanes 0-7, hi: lanes 8-15), down to its eight-lane t3 */
static inline __m256 reduce_4x16_t3(__m256 lo[4], __m256 hi[4]) {
    lo[0] = _mm256_add_ps(lo[0], lo[2]); hi[0] = _mm256_add_ps(hi[0], hi[2]);
    lo[1] = _mm256_add_ps(lo[1], lo[3]); hi[1] = _mm256_add_ps(hi[1], hi[3]);
    lo[0] = _mm256_add_ps(lo[0], lo[1]); hi[0] = _mm256_add_ps(hi[0], hi[1]);
    return _mm256_add_ps(hi[0], lo[0]);
}

/* ll_reduce_4x16 on that layout */
static inline float reduce_4x16(__m256 lo[4], __m256 hi[4]) {
    __m256 t3 = reduce_4x16_t3(lo, hi);
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
        #pragma GCC unroll 4   /* the accumulators stay in registers */
        for (int j = 0; j < 4; j++) {
            lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16 * j), _mm256_loadu_ps(b + i + 16 * j), lo[j]);
            hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16 * j + 8), _mm256_loadu_ps(b + i + 16 * j + 8), hi[j]);
        }
    double sum = reduce_4x16(lo, hi);
    for (; i < n; i++) sum += (double)(a[i] * b[i]);
    *s = (float)sum;
}

#ifdef LL_AVX512
/* reduce_4x16 of four 16-lane accumulators held one per 512-bit register */
static inline float reduce_4x16_zmm(const __m512 a[4]) {
    __m512 s4 = _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
    __m256 lo[4], hi[4];   /* reduce_4x16 on the sum already formed: the other three stay zero */
    lo[0] = _mm512_castps512_ps256(s4);
    hi[0] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s4), 1));
    for (int k = 1; k < 4; k++) lo[k] = hi[k] = _mm256_setzero_ps();
    return reduce_4x16(lo, hi);
}

#endif

static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* Σ a·b over n elements, b f16 and a either f16 or already widened (exactly) to f32 (the
 * attention query): 4 x 16 fused lanes, ll_reduce_4x16, a tail summed in double. */
static inline __attribute__((always_inline)) float dot_x_f16(const void *a, int a_f32, const uint16_t *b, int64_t n) {
    const float *af = a;
    const uint16_t *ah = a;
#define LOAD_A(o) (a_f32 ? _mm256_loadu_ps(af + (o)) : load_f16(ah + (o)))
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; j++) lo[j] = hi[j] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        #pragma GCC unroll 4   /* the accumulators stay in registers */
        for (int j = 0; j < 4; j++) {
            lo[j] = _mm256_fmadd_ps(LOAD_A(i + 16 * j), load_f16(b + i + 16 * j), lo[j]);
            hi[j] = _mm256_fmadd_ps(LOAD_A(i + 16 * j + 8), load_f16(b + i + 16 * j + 8), hi[j]);
        }
#undef LOAD_A
    double sum = reduce_4x16(lo, hi);
    for (; i < n; i++) sum += (double)((a_f32 ? af[i] : LL_FP16(ah[i])) * LL_FP16(b[i]));
    return (float)sum;
}

static float dot_f16_f16(const uint16_t *a, const uint16_t *b, int64_t n) { return dot_x_f16(a, 0, b, n); }


/* vdpbf16ps reads subnormal inputs as zeros of their sign and flushes each of its two
 * results the same way (ll_dpbf16_lane): the MXCSR's denormals-are-zero and flush-to-zero
 * modes do both in the hardware (tininess judged after rounding, as the instruction
 * does), so its emulation is plain fused multiply-adds between bf16_modes_on and the
 * _mm_setcsr that puts the caller's modes back (test_kernels checks the bits against the
 * instruction and the scalar lane, in the subnormal and underflow ranges and at the
 * rounding edge). Masking each input and
 * result by its exponent instead (four integer steps a vector, six a pair of products)
 * made the AVX2 BF16 kernels compute-bound: llama-3.2-1b tg128 at 0.57x llama.cpp's AVX2
 * build, 1.29x this way (with the prompt kernel below, pp512 0.16x -> 0.87x). The modes are the thread's: set at a kernel's start, put back before its
 * reduction, with the accumulators passed through an empty asm on either side so that the
 * compiler keeps the arithmetic between the two writes. */
#define MXCSR_DAZ_FTZ 0x8040u
static inline unsigned bf16_modes_on(void) {
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | MXCSR_DAZ_FTZ);
    return csr;
}
#define KEEP_HERE(v) __asm__ volatile("" : "+x"(v))

/* Eight lanes of vdpbf16ps (in the modes above): lane l takes the pair (2l, 2l + 1) of
 * sixteen bf16 values, read as one 32-bit lane whose high half (the odd element) masked
 * and low half (the even one) shifted up are the two values widened */
static inline __m256 dpbf16_8(__m256 c, __m256i ua, __m256i ub) {
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    __m256 a1 = _mm256_castsi256_ps(_mm256_and_si256(ua, high)), b1 = _mm256_castsi256_ps(_mm256_and_si256(ub, high));
    __m256 a0 = _mm256_castsi256_ps(_mm256_slli_epi32(ua, 16)), b0 = _mm256_castsi256_ps(_mm256_slli_epi32(ub, 16));
    return _mm256_fmadd_ps(a0, b0, _mm256_fmadd_ps(a1, b1, c));
}
static inline __m256i load256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* scalar.c's dot_bf16 on CPUs without AVX512_BF16: its two 16-lane accumulators each as
 * two 8-lane halves, each reduced as reduce16 (hsum8 of the halves' sum) */
static void dot_bf16(int64_t n, float *s, const void *w, const void *x) {
    const int ahead = PREFETCH_AHEAD;   /* BF16 keeps the fixed distance (see PREFETCH_AHEAD) */
    const uint16_t *a = w, *b = x;
    __m256 c[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
    unsigned csr = bf16_modes_on();
    for (int h = 0; h < 2; h++) { KEEP_HERE(c[h][0]); KEEP_HERE(c[h][1]); }
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        prefetch_ahead(a + i, ahead);
        prefetch_ahead(a + i + 32, ahead);
        #pragma GCC unroll 2   /* the accumulators stay in registers */
        for (int h = 0; h < 2; h++) {
            c[h][0] = dpbf16_8(c[h][0], load256(a + i + 32 * h), load256(b + i + 32 * h));
            c[h][1] = dpbf16_8(c[h][1], load256(a + i + 32 * h + 16), load256(b + i + 32 * h + 16));
        }
    }
    for (int h = 0; h < 2; h++) { KEEP_HERE(c[h][0]); KEEP_HERE(c[h][1]); }
    _mm_setcsr(csr);
    for (int h = 0; h < 2; h++) { KEEP_HERE(c[h][0]); KEEP_HERE(c[h][1]); }
    double sum = (double)hsum8(_mm256_add_ps(c[0][0], c[0][1])) + (double)hsum8(_mm256_add_ps(c[1][0], c[1][1]));
    for (; i < n; i++) sum += (double)(ll_bf16_to_fp32(a[i]) * ll_bf16_to_fp32(b[i]));
    *s = (float)sum;
}

#ifdef LL_AVX512

/* sixteen f16 values widened to f32 */
static inline __m512 load_f16x16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* dot_bf16's reduction of one 16-lane accumulator held in a 512-bit register */
static inline float reduce16_zmm(__m512 a) {
    return hsum8(add_halves(a));
}

/* The instruction itself, where the CPU has AVX512_BF16 (cpuid leaf 7.1 EAX bit 5); the
 * functions using it carry the target and are chosen only after that check. */
#define BF16_TARGET __attribute__((target("avx512bf16")))
int ll_cpu_has_avx512_bf16(void) {
    unsigned a, b, c, d;
    return ll_cpu_has_avx512() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1);
}
/* GFNI (cpuid leaf 7 ECX bit 8): Ice Lake and Zen 4 on, not Skylake-X or Cascade Lake */
int ll_cpu_has_gfni(void) {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 8) & 1);
}

static inline BF16_TARGET __m512 dpbf16(__m512 c, const uint16_t *a, const uint16_t *b) {
    return _mm512_dpbf16_ps(c, (__m512bh)_mm512_loadu_si512(a), (__m512bh)_mm512_loadu_si512(b));
}

/* dot_bf16 with vdpbf16ps: a 64-element step is two instructions */
static BF16_TARGET void dot_bf16_dp(int64_t n, float *s, const void *w, const void *x) {
    const int ahead = PREFETCH_AHEAD;   /* BF16 keeps the fixed distance (see PREFETCH_AHEAD) */
    const uint16_t *a = w, *b = x;
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        prefetch_ahead(a + i, ahead);
        prefetch_ahead(a + i + 32, ahead);
        c0 = dpbf16(c0, a + i, b + i);
        c1 = dpbf16(c1, a + i + 32, b + i + 32);
    }
    double sum = (double)reduce16_zmm(c0) + (double)reduce16_zmm(c1);
    for (; i < n; i++) sum += (double)(ll_bf16_to_fp32(a[i]) * ll_bf16_to_fp32(b[i]));
    *s = (float)sum;
}

/* Where the decode kernels below fetch ahead in a row of 16-bit weights: they read R rows
 * at once, 64 elements of each a step, so the line PREFETCH_AHEAD bytes on in that stream
 * is PREFETCH_AHEAD / 2R elements further in the same row, or past the row's n the same
 * place in the rows of the next pass, R rows on. They fetched the next pass's rows at the
 * same place before, a whole pass ahead (16 or 32 KiB), and streamed the weights slower:
 * a llama-3.2-1b head from memory on one thread, bench-proj, four alternations, F16
 * 33.7-34.3 -> 34.2-35.2 GB/s, BF16 30.6-31.0 -> 33.2-34.6 (a plain read: 43). */
static inline const char *pass_ahead(const uint16_t *row, int64_t i, int64_t n, size_t stride, int R) {
    const int64_t ahead = PREFETCH_AHEAD / (2 * R);
    return i + ahead < n ? (const char *)(row + i + ahead) : (const char *)(row + i + ahead - n) + (size_t)R * stride;
}

/* Eight BF16 rows against one activation row (decode): each row dot_bf16_dp's two
 * accumulators, the activations loaded once for the eight rows. */
static BF16_TARGET void dot_bf16_x8(int64_t n, float *out, const void *w, size_t stride, const void *x) {
    const uint16_t *b = x;
    __m512 c[8][2];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512bh y0 = (__m512bh)_mm512_loadu_si512(b + i), y1 = (__m512bh)_mm512_loadu_si512(b + i + 32);
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            const uint16_t *row = (const uint16_t *)((const uint8_t *)w + (size_t)r * stride), *a = row + i;
            const char *ahead = pass_ahead(row, i, n, stride, 8);
            _mm_prefetch(ahead, _MM_HINT_NTA);
            _mm_prefetch(ahead + 64, _MM_HINT_NTA);
            c[r][0] = _mm512_dpbf16_ps(c[r][0], (__m512bh)_mm512_loadu_si512(a), y0);
            c[r][1] = _mm512_dpbf16_ps(c[r][1], (__m512bh)_mm512_loadu_si512(a + 32), y1);
        }
    }
    for (int r = 0; r < 8; r++) {
        const uint16_t *a = (const uint16_t *)((const uint8_t *)w + (size_t)r * stride);
        double sum = (double)reduce16_zmm(c[r][0]) + (double)reduce16_zmm(c[r][1]);
        for (int64_t k = i; k < n; k++) sum += (double)(ll_bf16_to_fp32(a[k]) * ll_bf16_to_fp32(b[k]));
        out[r] = (float)sum;
    }
}

#endif

/* F16 weight rows against activations rounded to f16 and held as f32: dot_f16_f16's
 * operations (four 16-lane accumulators), the weight stream prefetched */
static void dot_f16(int64_t n, float *s, const void *w, const void *x) {
    const int ahead = stream_ahead();
    const uint16_t *a = w;
    const float *b = x;
    int64_t i = 0;
#ifdef LL_AVX512
    __m512 acc[4];
    for (int j = 0; j < 4; j++) acc[j] = _mm512_setzero_ps();
    for (; i + 64 <= n; i += 64) {
        prefetch_ahead(a + i, ahead);
        prefetch_ahead((const char *)(a + i) + 64, ahead);
        #pragma GCC unroll 4   /* the accumulators stay in registers */
        for (int j = 0; j < 4; j++)
            acc[j] = _mm512_fmadd_ps(load_f16x16(a + i + 16 * j), _mm512_loadu_ps(b + i + 16 * j), acc[j]);
    }
    double sum = reduce_4x16_zmm(acc);
#else
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; j++) lo[j] = hi[j] = _mm256_setzero_ps();
    for (; i + 64 <= n; i += 64) {
        prefetch_ahead(a + i, ahead);
        prefetch_ahead((const char *)(a + i) + 64, ahead);
        #pragma GCC unroll 4   /* the accumulators stay in registers */
        for (int j = 0; j < 4; j++) {
            const float *bj = b + i + 16 * j;
            lo[j] = _mm256_fmadd_ps(load_f16(a + i + 16 * j), _mm256_loadu_ps(bj), lo[j]);
            hi[j] = _mm256_fmadd_ps(load_f16(a + i + 16 * j + 8), _mm256_loadu_ps(bj + 8), hi[j]);
        }
    }
    double sum = reduce_4x16(lo, hi);
#endif
    for (; i < n; i++) sum += (double)(LL_FP16(a[i]) * b[i]);
    *s = (float)sum;
}

#ifdef LL_AVX512
/* Eight F16 rows against one activation row (decode), four at a time: each row keeps
 * dot_f16's four 16-lane accumulators, and each activation vector feeds four rows. */
static void dot_f16_x8(int64_t n, float *out, const void *w, size_t stride, const void *x) {
    const float *b = x;
    const int64_t full = n / 64 * 64;
    for (int r0 = 0; r0 < 8; r0 += 4) {
        __m512 c[4][4];
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) c[r][j] = _mm512_setzero_ps();
        const uint16_t *a[4];
        for (int r = 0; r < 4; r++) a[r] = (const uint16_t *)((const uint8_t *)w + (size_t)(r0 + r) * stride);
        for (int64_t i = 0; i < full; i += 64) {
            #pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
                const char *ahead = pass_ahead(a[r], i, full, stride, 4);
                _mm_prefetch(ahead, _MM_HINT_NTA);
                _mm_prefetch(ahead + 64, _MM_HINT_NTA);
            }
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m512 y = _mm512_loadu_ps(b + i + 16 * j);
                #pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    c[r][j] = _mm512_fmadd_ps(load_f16x16(a[r] + i + 16 * j), y, c[r][j]);
            }
        }
        for (int r = 0; r < 4; r++) {
            double sum = reduce_4x16_zmm(c[r]);
            for (int64_t k = full; k < n; k++) sum += (double)(LL_FP16(a[r][k]) * b[k]);
            out[r0 + r] = (float)sum;
        }
    }
}
#endif

/* Float weights (F16, BF16, F32) "repacked": eight rows copied as they are, each starting
 * on a 64-byte line (the file's rows start 32 bytes past one), into the model's huge-page
 * memory, where the hardware prefetcher is not stopped at every 4 KiB page's end and the
 * TLB holds the whole matrix. llama-3.2-1b tg64 against the mapped file, alternating
 * medians: BF16 18.6 -> 20.7 t/s, F16 16.0 -> 18.0. The kernels are the single-row ones,
 * each row read in place, so the same bits. (The AVX-512 set interleaves F16 and BF16 rows
 * instead: pack_tile16, below.) */
static size_t float_row_stride(int64_t n, size_t elt) { return ((size_t)n * elt + 63) & ~(size_t)63; }

static size_t pack_float_rows_x8(int64_t n, size_t elt, const void *w, size_t stride, void *dst) {
    const size_t s = float_row_stride(n, elt), bytes = (size_t)n * elt;
    for (int r = 0; dst && r < 8; r++) {
        memcpy((uint8_t *)dst + (size_t)r * s, (const uint8_t *)w + (size_t)r * stride, bytes);
        memset((uint8_t *)dst + (size_t)r * s + bytes, 0, s - bytes);
    }
    return 8 * s;
}
static size_t pack_rows16_x8(int64_t n, const void *w, size_t stride, void *dst) { return pack_float_rows_x8(n, 2, w, stride, dst); }
static size_t pack_rows32_x8(int64_t n, const void *w, size_t stride, void *dst) { return pack_float_rows_x8(n, 4, w, stride, dst); }

/* a repacked tile through the single-row kernel, row by row */
#define PACKED_ROWS(NAME, ROW_DOT, ELT)                                                                            \
    static void NAME(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,  \
                     int n_tok) {                                                                                   \
        for (int t = 0; t < n_tok; t++)                                                                            \
            for (int r = 0; r < 8; r++)                                                                            \
                ROW_DOT(n, &out[(size_t)t * out_stride + (size_t)r],                                              \
                        (const uint8_t *)tile + (size_t)r * float_row_stride(n, ELT), (const uint8_t *)x + (size_t)t * x_stride); \
    }
PACKED_ROWS(dot_f16_rows, dot_f16, 2)
PACKED_ROWS(dot_bf16_rows, dot_bf16, 2)
PACKED_ROWS(dot_f32_rows, dot_f32, 4)

/* F16 and BF16 tiles for the 512-bit kernels: the one-token kernels read G rows at once
 * (F16 four, BF16 eight), so the tile keeps each group of G rows one 64-element step (128
 * bytes) of each row after another: row q's step s at group + (s·G + q)·128. A kernel then
 * reads one stream, not G streams a row apart, and fetches ahead along it. The tails past
 * the last whole step follow, one 64-byte-aligned slot a row. Two threads streaming a
 * 268 MB matrix of F16 rows four at a time reached 39 GB/s where a plain read made 54; this
 * way 52-54 (a model of the kernel, six alternations). The llama-3.2-1b head (525 MB), two
 * threads, bench-proj, three alternations while the host read 52-54 GB/s: F16 43 -> 49-53,
 * BF16 43 -> 53-55. The arithmetic and its order are the row kernels' (dot_f16_x8,
 * dot_bf16_x8): the same bits. The prompt kernels gather their rows from it (pass_rows_tiles).
 * The one-token tiles leave the fetching to the hardware prefetcher, which follows one
 * stream well: session 30, llama-3.2-1b, two threads, each timed token against a read
 * pass just before it, three alternations: F16 0.762 / 0.674 / 0.669 of the pass with a
 * software fetch ahead (8 lines a step, stream_ahead on) and 0.819 / 0.830 / 0.817
 * without; BF16 (6 KiB on) 0.802 / 0.772 / 0.820 against 0.878 / 0.945 / 0.935. */
#define F16_GROUP 4
#define BF16_GROUP 8
static inline size_t tile16_tail_stride(int64_t n) { return ((size_t)(n % 64) * 2 + 63) & ~(size_t)63; }
/* element e of row r of a tile grouped G rows at a time */
static inline const uint16_t *tile16_at(const void *tile, int64_t n, int G, int r, int64_t e) {
    const int64_t full = n / 64 * 64;
    const uint8_t *t = tile;
    if (e >= full) return (const uint16_t *)(t + (size_t)full * 16 + (size_t)r * tile16_tail_stride(n)) + (e - full);
    return (const uint16_t *)(t + (size_t)(r / G) * (size_t)G * (size_t)full * 2 + ((size_t)(e / 64) * (size_t)G + (size_t)(r % G)) * 128) + e % 64;
}
#ifdef LL_AVX512
static size_t pack_tile16(int64_t n, int G, const void *w, size_t stride, void *dst) {
    const int64_t full = n / 64 * 64;
    const size_t ts = tile16_tail_stride(n);
    for (int r = 0; dst && r < 8; r++) {
        const uint16_t *row = (const uint16_t *)((const uint8_t *)w + (size_t)r * stride);
        for (int64_t e = 0; e < full; e += 64) memcpy((void *)tile16_at(dst, n, G, r, e), row + e, 128);
        if (ts) {
            uint16_t *tail = (uint16_t *)tile16_at(dst, n, G, r, full);
            memcpy(tail, row + full, (size_t)(n - full) * 2);
            memset(tail + (n - full), 0, ts - (size_t)(n - full) * 2);
        }
    }
    return (size_t)full * 16 + 8 * ts;
}
static size_t pack_f16_tile(int64_t n, const void *w, size_t stride, void *dst) { return pack_tile16(n, F16_GROUP, w, stride, dst); }
static size_t pack_bf16_tile(int64_t n, const void *w, size_t stride, void *dst) { return pack_tile16(n, BF16_GROUP, w, stride, dst); }

/* dot_f16_x8 on a grouped tile: four rows a pass, each with dot_f16's four accumulators */
static void dot_f16_tile(int64_t n, float *out, const void *tile, const float *b) {
    const int64_t full = n / 64 * 64;
    for (int g = 0; g < 8 / F16_GROUP; g++) {
        const uint16_t *p = tile16_at(tile, n, F16_GROUP, g * F16_GROUP, 0);
        __m512 c[F16_GROUP][4];
        #pragma GCC unroll 4
        for (int r = 0; r < F16_GROUP; r++)
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) c[r][j] = _mm512_setzero_ps();
        for (int64_t i = 0; i < full; i += 64, p += F16_GROUP * 64) {
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m512 y = _mm512_loadu_ps(b + i + 16 * j);
                #pragma GCC unroll 4
                for (int r = 0; r < F16_GROUP; r++) c[r][j] = _mm512_fmadd_ps(load_f16x16(p + 64 * r + 16 * j), y, c[r][j]);
            }
        }
        for (int r = 0; r < F16_GROUP; r++) {
            double sum = reduce_4x16_zmm(c[r]);
            const uint16_t *tail = tile16_at(tile, n, F16_GROUP, g * F16_GROUP + r, full);
            for (int64_t k = full; k < n; k++) sum += (double)(LL_FP16(tail[k - full]) * b[k]);
            out[g * F16_GROUP + r] = (float)sum;
        }
    }
}

/* dot_bf16_x8 on a grouped tile: the eight rows at once, each with dot_bf16_dp's two accumulators */
static BF16_TARGET void dot_bf16_tile(int64_t n, float *out, const void *tile, const uint16_t *b) {
    const int64_t full = n / 64 * 64;
    const uint16_t *p = tile;
    __m512 c[8][2];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) c[r][0] = c[r][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 64, p += BF16_GROUP * 64) {
        __m512bh y0 = (__m512bh)_mm512_loadu_si512(b + i), y1 = (__m512bh)_mm512_loadu_si512(b + i + 32);
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            c[r][0] = _mm512_dpbf16_ps(c[r][0], (__m512bh)_mm512_loadu_si512(p + 64 * r), y0);
            c[r][1] = _mm512_dpbf16_ps(c[r][1], (__m512bh)_mm512_loadu_si512(p + 64 * r + 32), y1);
        }
    }
    for (int r = 0; r < 8; r++) {
        double sum = (double)reduce16_zmm(c[r][0]) + (double)reduce16_zmm(c[r][1]);
        const uint16_t *tail = tile16_at(tile, n, BF16_GROUP, r, full);
        for (int64_t k = full; k < n; k++) sum += (double)(ll_bf16_to_fp32(tail[k - full]) * ll_bf16_to_fp32(b[k]));
        out[r] = (float)sum;
    }
}

static void dot_f16_tiles(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                          int n_tok) {
    for (int t = 0; t < n_tok; t++)
        dot_f16_tile(n, out + (size_t)t * out_stride, tile, (const float *)((const uint8_t *)x + (size_t)t * x_stride));
}
static BF16_TARGET void dot_bf16_tiles(int64_t n, float *out, size_t out_stride, const void *tile, const void *x,
                                       size_t x_stride, int n_tok) {
    for (int t = 0; t < n_tok; t++)
        dot_bf16_tile(n, out + (size_t)t * out_stride, tile, (const uint16_t *)((const uint8_t *)x + (size_t)t * x_stride));
}
#endif

/* f32 -> f16 -> f32 (LL_ACT_F16_AS_F32) with F16C; a group holding a NaN goes scalar
 * (the canonical quiet NaN) */
static void round_row_f16(const float *x, void *y, int64_t n) {
    float *o = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) { ll_round_row_f16(x + i, o + i, 8); continue; }
        _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)));
    }
    ll_round_row_f16(x + i, o + i, n - i);
}

#ifdef LL_AVX512
/* Prompt products of F32 weights against f32 activations: every (row, token) keeps the
 * single-row kernel's accumulators (four of 16 lanes over 64-element steps), its reduction
 * and its tail, so the bits of vec_dot. Each accumulator sums its own elements in order,
 * so they are made one after another: with one live accumulator per pair, four rows x six
 * tokens fill the registers and each weight vector feeds six fused multiply-adds. Tokens
 * are the outer loop: a group's activations stay in cache while the rows stream past. */
#define GEMM_R 4
#define GEMM_T 6

static inline __attribute__((always_inline)) void gemm_tile(int T, int64_t n, float *out, size_t out_stride,
                                                            const uint8_t *w, size_t stride, const uint8_t *x,
                                                            size_t x_stride) {
    const int64_t nfull = n / 64 * 64;   /* elements in whole steps; the rest is the tail */
    const float *a[GEMM_R], *b[GEMM_T];
    for (int r = 0; r < GEMM_R; r++) a[r] = (const float *)(w + (size_t)r * stride);
    for (int t = 0; t < T; t++) b[t] = (const float *)(x + (size_t)t * x_stride);
    float part[4][GEMM_R][GEMM_T][16] __attribute__((aligned(64)));   /* stored explicitly, as in the F16 tiles below */
    for (int j = 0; j < 4; j++) {
        __m512 acc[GEMM_R][GEMM_T];
        #pragma GCC unroll 4
        for (int r = 0; r < GEMM_R; r++)
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
        for (int64_t i = 16 * j; i < nfull; i += 64) {
            __m512 wv[GEMM_R];
            #pragma GCC unroll 4
            for (int r = 0; r < GEMM_R; r++) wv[r] = _mm512_loadu_ps(a[r] + i);
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) {
                __m512 xv = _mm512_loadu_ps(b[t] + i);
                #pragma GCC unroll 4
                for (int r = 0; r < GEMM_R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
            }
        }
        #pragma GCC unroll 4
        for (int r = 0; r < GEMM_R; r++)
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) _mm512_store_ps(part[j][r][t], acc[r][t]);
    }
    for (int r = 0; r < GEMM_R; r++)
        for (int t = 0; t < T; t++) {
            __m512 q[4];
            for (int j = 0; j < 4; j++) q[j] = _mm512_load_ps(part[j][r][t]);
            double sum = reduce_4x16_zmm(q);
            for (int64_t k = nfull; k < n; k++) sum += (double)(a[r][k] * b[t][k]);
            out[(size_t)t * out_stride + (size_t)r] = (float)sum;
        }
}

static void gemm_f32(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, int n_rows, const void *x,
                     size_t x_stride, int n_tok, void *scratch, const void *next, size_t next_bytes) {
    (void)scratch; (void)next; (void)next_bytes;
    const uint8_t *wb = w, *xb = x;
    int rfull = n_rows / GEMM_R * GEMM_R;
    for (int r0 = 0; r0 < rfull; r0 += GEMM_R) {
        const uint8_t *wr = wb + (size_t)r0 * stride;
        for (int t0 = 0; t0 < n_tok; t0 += GEMM_T) {
            const uint8_t *xt = xb + (size_t)t0 * x_stride;
            float *o = out + (size_t)t0 * out_stride + (size_t)r0;
            switch (n_tok - t0) {   /* the token count as a constant, so the tile stays in registers */
            case 1: gemm_tile(1, n, o, out_stride, wr, stride, xt, x_stride); break;
            case 2: gemm_tile(2, n, o, out_stride, wr, stride, xt, x_stride); break;
            case 3: gemm_tile(3, n, o, out_stride, wr, stride, xt, x_stride); break;
            case 4: gemm_tile(4, n, o, out_stride, wr, stride, xt, x_stride); break;
            case 5: gemm_tile(5, n, o, out_stride, wr, stride, xt, x_stride); break;
            default: gemm_tile(6, n, o, out_stride, wr, stride, xt, x_stride); break;
            }
        }
    }
    for (int r = rfull; r < n_rows; r++)   /* rows past the last whole group: one element at a time */
        for (int t = 0; t < n_tok; t++)
            dot_f32(n, &out[(size_t)t * out_stride + (size_t)r], wb + (size_t)r * stride, xb + (size_t)t * x_stride);
}

/* F16 and BF16 prompts in pass order. Strided passes (above) leave the weight stream to
 * the hardware prefetcher a quarter at a time and read f32 activations: here a block of
 * weight rows at a time is reordered into the thread's scratch so that each pass reads
 * its elements contiguously, against activations stored the same way as 16-bit values
 * (LL_ACT_F16_PASS, LL_ACT_BF16_PASS), so twice as many fit in cache. The arithmetic is
 * vec_dot's: each accumulator lane takes the same products in the same order. Six rows
 * by four tokens keeps each weight vector for four products and each activation vector
 * for six (F16; a kernel benchmark: 170-195 GFLOP/s per core where the strided kernel made
 * 107-135; vdpbf16ps does twice the work of an f32 fused multiply-add). Each pass's sums
 * go to their slots with explicit stores: written as an array copy, gcc kept the
 * accumulators themselves in memory (zeroed by stores, loaded before the loop, stored
 * after it, then copied to the slots one by one), four memory round trips per register
 * and pass; 48 rows x 256 tokens at 2048 columns, F16 159 -> 178 GFLOP/s, BF16 285 -> 297. */
/* Tile shapes (rows x tokens): F16 6 x 4, BF16 4 x 6. Each pass reads its weights from the
 * L2 copy (pass_rows) and its tokens' activations from L1; four rows a tile read a third
 * less of L2 per product, which BF16 (no conversions, one vdpbf16ps per pair of loads)
 * feels and F16 does not. Alternating llama-3.2-1b pp512, 4 x 6 against 6 x 4: BF16
 * 212 vs 195 t/s (four pairs, each in its favour), F16 142 vs 146 (five, mixed). */
#define PASS_MAX 6   /* rows or tokens of a tile, at most */

/* f32 -> bf16 (round to nearest even) in pass order */
static void pass_row_bf16(const float *x, void *y, int64_t n) {
    uint16_t *o = y;
    const int64_t full = n / LL_PASS_STEP * LL_PASS_STEP;
    for (int64_t i = 0; i < full; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        uint16_t *d = o + ll_pass_index(i, n, 2);
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) { for (int l = 0; l < 16; l++) d[l] = ll_fp32_to_bf16(x[i + l]); continue; }
        __m512i u = _mm512_castps_si512(v);
        __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        u = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
        _mm256_storeu_si256((__m256i *)d, _mm512_cvtepi32_epi16(u));
    }
    for (int64_t i = full; i < n; i++) o[i] = ll_fp32_to_bf16(x[i]);
}
#endif

/* Weight rows b0 .. b0 + R - 1 into pass order, ws elements apart (unit j of every
 * 64-element step to pass j, the tail in place): plain rows stride bytes apart (G = 0), or
 * the rows of tiles grouped G rows at a time (tile16_at; 8·stride bytes a tile, as matmul.c
 * gives a repacked span's stride), whatever tiles they fall in */
static inline __attribute__((always_inline)) void pass_rows_from(int G, int n_pass, int64_t n, const uint8_t *w,
                                                                 size_t stride, int b0, int R, uint16_t *dst, size_t ws) {
    const int ahead = stream_ahead();
    const int64_t full = n / LL_PASS_STEP * LL_PASS_STEP, P = full / n_pass, unit = LL_PASS_STEP / n_pass;
    for (int r = 0; r < R; r++) {
        const uint8_t *tile = w + (size_t)((b0 + r) / 8) * 8 * stride;
        const uint16_t *row = (const uint16_t *)(w + (size_t)(b0 + r) * stride);
        uint16_t *d = dst + (size_t)r * ws;
        for (int64_t i = 0; i < full; i += LL_PASS_STEP) {
            const uint16_t *s = G ? tile16_at(tile, n, G, (b0 + r) % 8, i) : row + i;
            prefetch_ahead(s, ahead);
            prefetch_ahead(s + 32, ahead);
            for (int j = 0; j < n_pass; j++)
                for (int64_t e = 0; e < unit; e += 16)
                    _mm256_storeu_si256((__m256i *)(d + j * P + i / n_pass + e), _mm256_loadu_si256((const __m256i *)(s + j * unit + e)));
        }
        memcpy(d + full, G ? tile16_at(tile, n, G, (b0 + r) % 8, full) : row + full, (size_t)(n - full) * 2);
    }
}
static void pass_rows(int n_pass, int64_t n, const uint8_t *w, size_t stride, int b0, int R, uint16_t *dst, size_t ws) {
    pass_rows_from(0, n_pass, n, w, stride, b0, R, dst, ws);
}
#ifdef LL_AVX512
static void pass_rows_f16_tiles(int n_pass, int64_t n, const uint8_t *w, size_t stride, int b0, int R, uint16_t *dst,
                                size_t ws) {
    pass_rows_from(F16_GROUP, n_pass, n, w, stride, b0, R, dst, ws);
}
static void pass_rows_bf16_tiles(int n_pass, int64_t n, const uint8_t *w, size_t stride, int b0, int R, uint16_t *dst,
                                 size_t ws) {
    pass_rows_from(BF16_GROUP, n_pass, n, w, stride, b0, R, dst, ws);
}

/* The sums of up to sixteen 16-lane vectors at once, each by reduce16_zmm's tree (lanes l
 * and l + 8, then l and l + 4, then (0 + 2) + (1 + 3)): four levels of adds across
 * vectors, two shuffles an add, where one vector at a time took a chain of eight dependent
 * steps (attention's scores, sixteen keys, and the F16 and BF16 prompt tiles' outputs).
 * Lane o of the result is v[o]'s sum (the inputs go in 4 x 4 transposed, the order the
 * last level leaves them in); inputs past cnt count as zero, and so do their lanes. */
static inline __m512 reduce16_many(const __m512 *v, int cnt) {
    __m512 in[16], w[8], x[4], y[2];
    #pragma GCC unroll 16
    for (int m = 0; m < 16; m++) {
        int o = 4 * (m % 4) + m / 4;
        in[m] = o < cnt ? v[o] : _mm512_setzero_ps();
    }
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++)   /* lanes 0-7: in[2i]'s l + (l + 8); lanes 8-15: in[2i + 1]'s */
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(in[2 * i], in[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(in[2 * i], in[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++)   /* 128-bit lane j: in[4i + j]'s l + (l + 4) */
        x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    #pragma GCC unroll 2
    for (int i = 0; i < 2; i++)   /* lane j: in[8i + j]'s 0 + 2 and 1 + 3, then in[8i + 4 + j]'s */
        y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* element e of lane j: in[j + 4e], that is v[4j + e] */
    return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* A tile's outputs, token-major in res (t * R + r), to their places in out */
static inline void tile_outputs(int R, int T, const float *res, float *out, size_t out_stride) {
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++) out[(size_t)t * out_stride + (size_t)r] = res[t * R + r];
}

/* F16: vec_dot's four 16-lane accumulators, one pass each, widened with F16C */
static inline __attribute__((always_inline)) void pass_tile_f16(int R, int T, int64_t n, float *out, size_t out_stride,
                                                                const uint16_t *w, size_t ws, const uint8_t *x, size_t x_stride) {
    const int64_t full = n / LL_PASS_STEP * LL_PASS_STEP, P = full / 4;
    const uint16_t *b[PASS_MAX];
    for (int t = 0; t < T; t++) b[t] = (const uint16_t *)(x + (size_t)t * x_stride);
    float part[4][PASS_MAX][PASS_MAX][16] __attribute__((aligned(64)));
    for (int j = 0; j < 4; j++) {
        __m512 acc[PASS_MAX][PASS_MAX];
        #pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
        for (int64_t i = j * P; i < (j + 1) * P; i += 16) {
            __m512 wv[PASS_MAX];
            #pragma GCC unroll 6
            for (int r = 0; r < R; r++) wv[r] = load_f16x16(w + (size_t)r * ws + i);
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) {
                __m512 xv = load_f16x16(b[t] + i);
                #pragma GCC unroll 6
                for (int r = 0; r < R; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
            }
        }
        #pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) _mm512_store_ps(part[j][r][t], acc[r][t]);
    }
    if (full == n) {   /* no tail: the double sum is the float one, so sixteen outputs at a time */
        float res[48] __attribute__((aligned(64)));   /* R * T outputs (at most 24), whole 16-lane groups */
        for (int o0 = 0; o0 < R * T; o0 += 16) {
            __m512 s4[16];
            int cnt = R * T - o0 < 16 ? R * T - o0 : 16;
            #pragma GCC unroll 16
            for (int k = 0; k < cnt; k++) {   /* output o = t * R + r */
                int o = o0 + k, r = o % R, t = o / R;
                s4[k] = _mm512_add_ps(_mm512_add_ps(_mm512_load_ps(part[0][r][t]), _mm512_load_ps(part[2][r][t])),
                                      _mm512_add_ps(_mm512_load_ps(part[1][r][t]), _mm512_load_ps(part[3][r][t])));
            }
            _mm512_storeu_ps(res + o0, reduce16_many(s4, cnt));
        }
        tile_outputs(R, T, res, out, out_stride);
        return;
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            __m512 q[4];
            for (int j = 0; j < 4; j++) q[j] = _mm512_load_ps(part[j][r][t]);
            double sum = (double)reduce_4x16_zmm(q);
            for (int64_t k = full; k < n; k++) sum += (double)(LL_FP16(w[(size_t)r * ws + (size_t)k]) * LL_FP16(b[t][k]));
            out[(size_t)t * out_stride + (size_t)r] = (float)sum;
        }
}

/* BF16: dot_bf16_dp's two accumulators, one pass each, 32 elements a vdpbf16ps */
static inline __attribute__((always_inline)) BF16_TARGET void pass_tile_bf16(int R, int T, int64_t n, float *out,
                                                                             size_t out_stride, const uint16_t *w, size_t ws,
                                                                             const uint8_t *x, size_t x_stride) {
    const int64_t full = n / LL_PASS_STEP * LL_PASS_STEP, P = full / 2;
    const uint16_t *b[PASS_MAX];
    for (int t = 0; t < T; t++) b[t] = (const uint16_t *)(x + (size_t)t * x_stride);
    float part[2][PASS_MAX][PASS_MAX][16] __attribute__((aligned(64)));
    for (int j = 0; j < 2; j++) {
        __m512 acc[PASS_MAX][PASS_MAX];
        #pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) acc[r][t] = _mm512_setzero_ps();
        for (int64_t i = j * P; i < (j + 1) * P; i += 32) {
            __m512bh wv[PASS_MAX];
            #pragma GCC unroll 6
            for (int r = 0; r < R; r++) wv[r] = (__m512bh)_mm512_loadu_si512(w + (size_t)r * ws + i);
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) {
                __m512bh xv = (__m512bh)_mm512_loadu_si512(b[t] + i);
                #pragma GCC unroll 6
                for (int r = 0; r < R; r++) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
            }
        }
        #pragma GCC unroll 6
        for (int r = 0; r < R; r++)
            #pragma GCC unroll 6
            for (int t = 0; t < T; t++) _mm512_store_ps(part[j][r][t], acc[r][t]);
    }
    if (full == n) {   /* no tail: each pass's sums sixteen outputs at a time, then their double sums */
        float res[48] __attribute__((aligned(64)));   /* R * T outputs (at most 24), whole 16-lane groups */
        for (int o0 = 0; o0 < R * T; o0 += 16) {
            __m512 p0[16], p1[16];
            int cnt = R * T - o0 < 16 ? R * T - o0 : 16;
            #pragma GCC unroll 16
            for (int k = 0; k < cnt; k++) {   /* output o = t * R + r */
                int o = o0 + k, r = o % R, t = o / R;
                p0[k] = _mm512_load_ps(part[0][r][t]);
                p1[k] = _mm512_load_ps(part[1][r][t]);
            }
            __m512 s0 = reduce16_many(p0, cnt), s1 = reduce16_many(p1, cnt);
            __m256 lo = _mm512_cvtpd_ps(_mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(s0)), _mm512_cvtps_pd(_mm512_castps512_ps256(s1))));
            __m256 hi = _mm512_cvtpd_ps(_mm512_add_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s0), 1))),
                                                      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s1), 1)))));
            _mm256_storeu_ps(res + o0, lo);
            _mm256_storeu_ps(res + o0 + 8, hi);
        }
        tile_outputs(R, T, res, out, out_stride);
        return;
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            double sum = (double)reduce16_zmm(_mm512_load_ps(part[0][r][t])) + (double)reduce16_zmm(_mm512_load_ps(part[1][r][t]));
            for (int64_t k = full; k < n; k++)
                sum += (double)(ll_bf16_to_fp32(w[(size_t)r * ws + (size_t)k]) * ll_bf16_to_fp32(b[t][k]));
            out[(size_t)t * out_stride + (size_t)r] = (float)sum;
        }
}

#endif

/* The weights a thread reads next (its next work item's rows), fetched into L2 in equal
 * slices, one per tile of the current item, so that they arrive while this item computes
 * and its reordering (pass_rows) finds them in cache rather than waiting on memory:
 * pass_rows fell from 7.2% to 1.8% of a llama-3.2-1b F16 pp512's samples with this, the
 * weights' huge pages and pass_rows' own prefetch together. A slice per four-token step
 * (six or four tiles) was a burst that filled the miss buffers: perf put 3.4% of
 * gemm_f16's samples on it, 1.0% per tile. */
typedef struct { const char *p, *end; size_t slice; } next_fetch;

static inline next_fetch next_fetch_start(const void *next, size_t bytes, int steps) {
    next_fetch f = {next, next ? (const char *)next + bytes : NULL, 0};
    if (next && steps > 0) f.slice = (bytes / (size_t)steps + 64) & ~(size_t)63;
    return f;
}

static inline __attribute__((always_inline)) void next_fetch_step(next_fetch *f) {
    if (!f->slice) return;
    for (const char *e = f->p + f->slice < f->end ? f->p + f->slice : f->end; f->p < e; f->p += 64)
        _mm_prefetch(f->p, _MM_HINT_T1);
}

/* The TR-row tiles a four- or six-token step of GEMM_PASS runs over n_rows rows taken a
 * block at a time (the last block may be short, or the only one): one next_fetch_step each */
static inline int row_tiles(int n_rows, int block, int TR) {
    return n_rows / block * ((block + TR - 1) / TR) + (n_rows % block + TR - 1) / TR;
}

/* A block of rows into the scratch, then every TT-token tile against them, TR rows a tile;
 * the tile's shape a constant in each case (CASES lists them), so it stays in registers. A
 * macro, not a function, so that each kernel keeps its own target. */
#define PASS_CASE(TILE, R_, T_) case (R_) * 8 + (T_): TILE(R_, T_, n, o, out_stride, wr, ws, xt, x_stride); break
#define PASS_CASES_6x4(TILE)                                                                                       \
    PASS_CASE(TILE, 6, 4); PASS_CASE(TILE, 6, 3); PASS_CASE(TILE, 6, 2); PASS_CASE(TILE, 6, 1);                    \
    PASS_CASE(TILE, 5, 4); PASS_CASE(TILE, 5, 3); PASS_CASE(TILE, 5, 2); PASS_CASE(TILE, 5, 1);                    \
    PASS_CASE(TILE, 4, 4); PASS_CASE(TILE, 4, 3); PASS_CASE(TILE, 4, 2); PASS_CASE(TILE, 4, 1);                    \
    PASS_CASE(TILE, 3, 4); PASS_CASE(TILE, 3, 3); PASS_CASE(TILE, 3, 2); PASS_CASE(TILE, 3, 1);                    \
    PASS_CASE(TILE, 2, 4); PASS_CASE(TILE, 2, 3); PASS_CASE(TILE, 2, 2); PASS_CASE(TILE, 2, 1);                    \
    PASS_CASE(TILE, 1, 4); PASS_CASE(TILE, 1, 3); PASS_CASE(TILE, 1, 2); PASS_CASE(TILE, 1, 1)
#define PASS_CASES_4x6(TILE)                                                                                       \
    PASS_CASE(TILE, 4, 6); PASS_CASE(TILE, 4, 5); PASS_CASE(TILE, 4, 4); PASS_CASE(TILE, 4, 3);                    \
    PASS_CASE(TILE, 4, 2); PASS_CASE(TILE, 4, 1); PASS_CASE(TILE, 3, 6); PASS_CASE(TILE, 3, 5);                    \
    PASS_CASE(TILE, 3, 4); PASS_CASE(TILE, 3, 3); PASS_CASE(TILE, 3, 2); PASS_CASE(TILE, 3, 1);                    \
    PASS_CASE(TILE, 2, 6); PASS_CASE(TILE, 2, 5); PASS_CASE(TILE, 2, 4); PASS_CASE(TILE, 2, 3);                    \
    PASS_CASE(TILE, 2, 2); PASS_CASE(TILE, 2, 1); PASS_CASE(TILE, 1, 6); PASS_CASE(TILE, 1, 5);                    \
    PASS_CASE(TILE, 1, 4); PASS_CASE(TILE, 1, 3); PASS_CASE(TILE, 1, 2); PASS_CASE(TILE, 1, 1)
#define GEMM_PASS(TILE, PASS_ROWS, N_PASS, TR, TT, CASES)                                                          \
    do {                                                                                                           \
        const size_t ws = (size_t)ll_gemm_row_stride(n);                                                           \
        const int block = ll_gemm_block_rows(n);                                                                   \
        uint16_t *wp = (uint16_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);                                   \
        next_fetch nf = next_fetch_start(next, next_bytes, ((n_tok + (TT) - 1) / (TT)) * row_tiles(n_rows, block, TR));  \
        for (int b0 = 0; b0 < n_rows; b0 += block) {                                                               \
            int B = n_rows - b0 < block ? n_rows - b0 : block;                                                     \
            PASS_ROWS(N_PASS, n, (const uint8_t *)w, stride, b0, B, wp, ws);                                       \
            for (int t0 = 0; t0 < n_tok; t0 += (TT)) {                                                             \
                int T = n_tok - t0 < (TT) ? n_tok - t0 : (TT);                                                     \
                const uint8_t *xt = (const uint8_t *)x + (size_t)t0 * x_stride;                                    \
                for (int r0 = 0; r0 < B; r0 += (TR)) {                                                             \
                    next_fetch_step(&nf);                                                                          \
                    int R = B - r0 < (TR) ? B - r0 : (TR);                                                         \
                    float *o = out + (size_t)t0 * out_stride + (size_t)(b0 + r0);                                  \
                    const uint16_t *wr = wp + (size_t)r0 * ws;                                                     \
                    switch (R * 8 + T) { CASES(TILE); }                                                            \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
    } while (0)

#ifdef LL_AVX512
static void gemm_f16(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, int n_rows, const void *x,
                     size_t x_stride, int n_tok, void *scratch, const void *next, size_t next_bytes) {
    GEMM_PASS(pass_tile_f16, pass_rows, 4, 6, 4, PASS_CASES_6x4);
}
static BF16_TARGET void gemm_bf16(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, int n_rows,
                                  const void *x, size_t x_stride, int n_tok, void *scratch, const void *next,
                                  size_t next_bytes) {
    GEMM_PASS(pass_tile_bf16, pass_rows, 2, 4, 6, PASS_CASES_4x6);
}
/* the same on the grouped tiles of the repacked copy */
static void gemm_f16_tiles(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, int n_rows,
                           const void *x, size_t x_stride, int n_tok, void *scratch, const void *next, size_t next_bytes) {
    GEMM_PASS(pass_tile_f16, pass_rows_f16_tiles, 4, 6, 4, PASS_CASES_6x4);
}
static BF16_TARGET void gemm_bf16_tiles(int64_t n, float *out, size_t out_stride, const void *w, size_t stride,
                                        int n_rows, const void *x, size_t x_stride, int n_tok, void *scratch,
                                        const void *next, size_t next_bytes) {
    GEMM_PASS(pass_tile_bf16, pass_rows_bf16_tiles, 2, 4, 6, PASS_CASES_4x6);
}
#endif

/* F16 prompts in 256-bit registers (the AVX2 set's; the AVX-512 set has its own above).
 * dot_f16 holds each 16-lane accumulator as two 8-lane halves (lo: elements 16j..16j+7 of
 * every 64-element step, hi: the next eight), each lane a chain of its own, so a tile makes
 * the eight halves one after another: half h of pass j reads the h-th eight of each
 * 16-element unit of the reordered rows (pass_rows, as in the AVX-512 kernel) and of the
 * activations, which come rounded to f16 in the same pass order (LL_ACT_F16_PASS, as the
 * AVX-512 kernel takes them). Three rows by four tokens fill the sixteen registers: twelve
 * accumulators, three widened weight vectors, one activation vector. Then dot_f16's
 * reduction and tail for each output: its bits. With the activations as f32 where they are
 * instead (the loads folded into the multiply-adds, no conversions) a four-token group's
 * rows filled most of L1: llama-3.2-1b pp512 on two threads 64.2-64.6 t/s against
 * 79.7-83.8 this way (three alternations; one thread on one projection, even). */
static inline __attribute__((always_inline)) void pass_tile_f16_ymm(int R, int T, int64_t n, float *out, size_t out_stride,
                                                                    const uint16_t *w, size_t ws, const uint8_t *x,
                                                                    size_t x_stride) {
    const int64_t full = n / LL_PASS_STEP * LL_PASS_STEP, P = full / 4;
    const uint16_t *b[4];
    for (int t = 0; t < T; t++) b[t] = (const uint16_t *)(x + (size_t)t * x_stride);
    float part[4][2][3][4][8] __attribute__((aligned(32)));   /* [pass][half][row][token] */
    for (int j = 0; j < 4; j++)
        for (int h = 0; h < 2; h++) {
            __m256 acc[3][4];
            #pragma GCC unroll 3
            for (int r = 0; r < R; r++)
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
            const int64_t off = j * P + 8 * h;
            for (int64_t u = 0; u < P; u += 16) {
                __m256 wv[3];
                #pragma GCC unroll 3
                for (int r = 0; r < R; r++) wv[r] = load_f16(w + (size_t)r * ws + off + u);
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    __m256 xv = load_f16(b[t] + off + u);
                    #pragma GCC unroll 3
                    for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
                }
            }
            #pragma GCC unroll 3
            for (int r = 0; r < R; r++)
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) _mm256_store_ps(part[j][h][r][t], acc[r][t]);
        }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            __m256 lo[4], hi[4];
            for (int j = 0; j < 4; j++) { lo[j] = _mm256_load_ps(part[j][0][r][t]); hi[j] = _mm256_load_ps(part[j][1][r][t]); }
            double sum = reduce_4x16(lo, hi);
            for (int64_t k = full; k < n; k++) sum += (double)(LL_FP16(w[(size_t)r * ws + (size_t)k]) * LL_FP16(b[t][k]));
            out[(size_t)t * out_stride + (size_t)r] = (float)sum;
        }
}
/* f32 -> f16 in pass order with F16C (LL_ACT_F16_PASS, for this kernel and the AVX-512
 * one); a group holding a NaN goes through the scalar conversion, as round_row_f16 does */
static void pass_row_f16(const float *x, void *y, int64_t n) {
    uint16_t *o = y;
    const int64_t full = n / LL_PASS_STEP * LL_PASS_STEP;
    for (int64_t i = 0; i < full; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        uint16_t *d = o + ll_pass_index(i, n, 4);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) { for (int l = 0; l < 8; l++) d[l] = ll_fp32_to_fp16(x[i + l]); continue; }
        _mm_storeu_si128((__m128i *)d, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    for (int64_t i = full; i < n; i++) o[i] = ll_fp32_to_fp16(x[i]);
}
#define PASS_CASES_3x4(TILE)                                                                                       \
    PASS_CASE(TILE, 3, 4); PASS_CASE(TILE, 3, 3); PASS_CASE(TILE, 3, 2); PASS_CASE(TILE, 3, 1);                    \
    PASS_CASE(TILE, 2, 4); PASS_CASE(TILE, 2, 3); PASS_CASE(TILE, 2, 2); PASS_CASE(TILE, 2, 1);                    \
    PASS_CASE(TILE, 1, 4); PASS_CASE(TILE, 1, 3); PASS_CASE(TILE, 1, 2); PASS_CASE(TILE, 1, 1)

static void gemm_f16_ymm(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, int n_rows,
                         const void *x, size_t x_stride, int n_tok, void *scratch, const void *next, size_t next_bytes) {
    GEMM_PASS(pass_tile_f16_ymm, pass_rows, 4, 3, 4, PASS_CASES_3x4);
}

/* BF16 prompts the same way (the AVX-512 set's too where the CPU lacks AVX512_BF16):
 * dot_bf16's four 8-lane accumulators are the four passes (16 elements, eight pairs, a
 * vector a step), each pair two fused multiply-adds in the modes of bf16_modes_on; the
 * activations rounded to bf16 in the same pass order (LL_ACT_BF16_PASS4), so that a pass
 * reads them contiguously. Two rows by four tokens: eight accumulators, each row's two
 * widened halves, a token's two. With the activations plain bf16 instead (a pass reading
 * 32 bytes of every 128), one thread on llama-3.2-1b's down product (8192 wide, 512
 * tokens) made 63 GFLOP/s against 81-85 this way, on gate (2048 wide) 81 against 89. */
static inline __attribute__((always_inline)) void pass_tile_bf16_ymm(int R, int T, int64_t n, float *out, size_t out_stride,
                                                                     const uint16_t *w, size_t ws, const uint8_t *x,
                                                                     size_t x_stride) {
    const int64_t full = n / LL_PASS_STEP * LL_PASS_STEP, P = full / 4;
    const __m256i high = _mm256_set1_epi32((int)0xffff0000u);
    const uint16_t *b[4];
    for (int t = 0; t < T; t++) b[t] = (const uint16_t *)(x + (size_t)t * x_stride);
    float part[4][2][4][8] __attribute__((aligned(32)));   /* [pass][row][token] */
    unsigned csr = bf16_modes_on();
    __asm__ volatile("" ::: "memory");   /* the products after the modes are set (see bf16_modes_on) */
    for (int j = 0; j < 4; j++) {
        __m256 acc[2][4];
        #pragma GCC unroll 2
        for (int r = 0; r < R; r++)
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
        const size_t off = (size_t)j * (size_t)P;
        for (int64_t u = 0; u < P; u += 16) {
            __m256 w1[2], w0[2];
            #pragma GCC unroll 2
            for (int r = 0; r < R; r++) {
                __m256i wv = load256(w + (size_t)r * ws + off + u);
                w1[r] = _mm256_castsi256_ps(_mm256_and_si256(wv, high));
                w0[r] = _mm256_castsi256_ps(_mm256_slli_epi32(wv, 16));
            }
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                __m256i xv = load256(b[t] + off + u);
                __m256 x1 = _mm256_castsi256_ps(_mm256_and_si256(xv, high)), x0 = _mm256_castsi256_ps(_mm256_slli_epi32(xv, 16));
                #pragma GCC unroll 2
                for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(w0[r], x0, _mm256_fmadd_ps(w1[r], x1, acc[r][t]));
            }
        }
        #pragma GCC unroll 2
        for (int r = 0; r < R; r++)
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) _mm256_store_ps(part[j][r][t], acc[r][t]);
    }
    __asm__ volatile("" ::: "memory");   /* and the sums stored before they are put back */
    _mm_setcsr(csr);
    __asm__ volatile("" ::: "memory");
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            __m256 c0 = _mm256_add_ps(_mm256_load_ps(part[0][r][t]), _mm256_load_ps(part[1][r][t]));
            __m256 c1 = _mm256_add_ps(_mm256_load_ps(part[2][r][t]), _mm256_load_ps(part[3][r][t]));
            double sum = (double)hsum8(c0) + (double)hsum8(c1);
            for (int64_t k = full; k < n; k++)
                sum += (double)(ll_bf16_to_fp32(w[(size_t)r * ws + (size_t)k]) * ll_bf16_to_fp32(b[t][k]));
            out[(size_t)t * out_stride + (size_t)r] = (float)sum;
        }
}
#define PASS_CASES_2x4(TILE)                                                                                       \
    PASS_CASE(TILE, 2, 4); PASS_CASE(TILE, 2, 3); PASS_CASE(TILE, 2, 2); PASS_CASE(TILE, 2, 1);                    \
    PASS_CASE(TILE, 1, 4); PASS_CASE(TILE, 1, 3); PASS_CASE(TILE, 1, 2); PASS_CASE(TILE, 1, 1)

static void gemm_bf16_ymm(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, int n_rows,
                          const void *x, size_t x_stride, int n_tok, void *scratch, const void *next, size_t next_bytes) {
    GEMM_PASS(pass_tile_bf16_ymm, pass_rows, 4, 2, 4, PASS_CASES_2x4);
}

/* dot_f16_f16 with its first operand already widened (exactly) to f32: the same bits */
static float dot_f32w_f16(const float *a, const uint16_t *b, int64_t n) { return dot_x_f16(a, 1, b, n); }

/* f32 -> f16 rows with F16C (round to nearest even, as ll_fp32_to_fp16); a group holding a
 * NaN goes scalar, which writes the canonical quiet NaN */
static void convert_row_f16(const float *x, void *y, int64_t n) {
    uint16_t *o = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) { ll_convert_row_f16(x + i, o + i, 8); continue; }
        _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    ll_convert_row_f16(x + i, o + i, n - i);
}

/* f32 -> bf16, round to nearest even (ll_fp32_to_bf16); a group holding a NaN goes
 * scalar, which keeps the payload and sets the quiet bit */
static void convert_row_bf16(const float *x, void *y, int64_t n) {
    uint16_t *o = y;
    int64_t i = 0;
    const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        if (_mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)))) {
            ll_convert_row_bf16(x + i, o + i, 16);
            continue;
        }
        __m256i u0 = _mm256_castps_si256(v0), u1 = _mm256_castps_si256(v1);
        u0 = _mm256_srli_epi32(_mm256_add_epi32(u0, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(u0, 16), one))), 16);
        u1 = _mm256_srli_epi32(_mm256_add_epi32(u1, _mm256_add_epi32(half, _mm256_and_si256(_mm256_srli_epi32(u1, 16), one))), 16);
        /* packus works within 128-bit halves: put the eight results back in order */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(u0, u1), 0xd8);
        _mm256_storeu_si256((__m256i *)(o + i), p);
    }
    ll_convert_row_bf16(x + i, o + i, n - i);
}

/* The same bf16 values in 4-pass order (LL_ACT_BF16_PASS4): each 16-element unit of a
 * 64-element step to its pass, the tail in place */
static void pass4_row_bf16(const float *x, void *y, int64_t n) {
    uint16_t *o = y;
    const int64_t full = n / LL_PASS_STEP * LL_PASS_STEP;
    for (int64_t i = 0; i < full; i += 16) convert_row_bf16(x + i, o + ll_pass_index(i, n, 4), 16);
    convert_row_bf16(x + full, o + full, n - full);
}

/* Signed bytes a·b summed in groups of four into 8 int32 lanes (lane m = bytes 4m..4m+3
 * of each 128-bit half, i.e. elements 4m..4m+3 in order). */
static inline __m256i dot_i8_groups4(__m256i a, __m256i b) {
    return DOT_U8I8_4(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

#ifdef LL_AVX512
/* -(c x the sum of each four activations), lane m for y[4m..4m+3]: where a dot product of
 * quants stored unsigned (q + c) starts so that it ends at the exact Σ q·y (VNNI adds in
 * 32 bits, no int16 stage). */
static inline __m256i dot_start(char c, const int8_t *y) {
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(c), _mm256_loadu_si256((const __m256i *)y)));
}
#endif

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

/* 32 bits -> 32 bytes, byte e 0xFF where bit e is set */
static inline __m256i bytes_from_bits(const uint8_t *p) {
    uint32_t x;
    memcpy(&x, p, 4);
#ifdef LL_AVX512   /* a byte mask */
    return _mm256_movm_epi8(_cvtu32_mask32(x));
#else
    const __m256i which = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                           2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), which);
    return _mm256_cmpeq_epi8(_mm256_and_si256(rep, bit), bit);
#endif
}

/* The 32 signed quants of block i of a Q8_0 or Q5_0 row whose blocks are bs bytes apart
 * (the block size, or eight blocks in a repacked Q8_0 tile). */
static inline __attribute__((always_inline)) __m256i q8_block_quants(int type, const uint8_t *row, size_t bs, int64_t i, float *d) {
    if (type == LLAMBDA_TYPE_Q5_0) {
        const block_q5_0 *a = (const block_q5_0 *)(row + (size_t)i * bs);
        const __m256i b16 = _mm256_set1_epi8(16);
        *d = LL_FP16(a->d);
        return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(a->qs), _mm256_and_si256(bytes_from_bits(a->qh), b16)), b16);
    }
    const block_q8_0 *a = (const block_q8_0 *)(row + (size_t)i * bs);
    *d = LL_FP16(a->d);
    return _mm256_loadu_si256((const __m256i *)a->qs);
}

/* Q5_0 (the fallback llama.cpp picks for rows that are not a multiple of 256): quants
 * (nibble | high bit << 4) - 16, and dot_q8_0's 8-lane accumulation. */
static void dot_q5_0(int64_t n, float *s, const void *w, const void *x) {
    const block_q8_0 *b = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        float xd;
        __m256i q = q8_block_quants(LLAMBDA_TYPE_Q5_0, w, sizeof(block_q5_0), i, &xd);
        __m256 d = _mm256_set1_ps(xd * LL_FP16(b[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8_groups4(q, _mm256_loadu_si256((const __m256i *)b[i].qs))), acc);
    }
    *s = hsum8(acc);
}

/* a 16-entry table of int8 values looked up by a block's 32 nibbles (low ones first) */
static inline __m256i lookup_nibbles(const int8_t *table, const uint8_t *qs) {
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)table)), unpack_nibbles(qs));
}

/* The rarer 32-blocks (Q4_1 and Q5_1 with their Q8_1 activations, IQ4_NL, MXFP4): block i
 * of a row against the activations' block i, its exact integer sum, scale d and (Q4_1,
 * Q5_1) minimum m as scalar.c's kernels take them. */
static inline int block32_sum(int type, const uint8_t *row, int64_t i, const void *x, float *d, float *m) {
    if (type == LLAMBDA_TYPE_Q4_1 || type == LLAMBDA_TYPE_Q5_1) {
        const block_q8_1 *b = (const block_q8_1 *)x + i;
        __m256i q;
        if (type == LLAMBDA_TYPE_Q4_1) {
            const block_q4_1 *a = (const block_q4_1 *)row + i;
            q = unpack_nibbles(a->qs); *d = LL_FP16(a->d); *m = LL_FP16(a->m);
        } else {
            const block_q5_1 *a = (const block_q5_1 *)row + i;
            q = _mm256_or_si256(unpack_nibbles(a->qs), _mm256_and_si256(bytes_from_bits(a->qh), _mm256_set1_epi8(16)));
            *d = LL_FP16(a->d); *m = LL_FP16(a->m);
        }
        return hsum_i32(DOT_U8I8_4(q, _mm256_loadu_si256((const __m256i *)b->qs)));
    }
    const block_q8_0 *b = (const block_q8_0 *)x + i;
    __m256i v;
    if (type == LLAMBDA_TYPE_IQ4_NL) {
        const block_iq4_nl *a = (const block_iq4_nl *)row + i;
        v = lookup_nibbles(ll_kvalues_iq4nl, a->qs); *d = LL_FP16(a->d);
    } else {
        const block_mxfp4 *a = (const block_mxfp4 *)row + i;
        v = lookup_nibbles(ll_kvalues_mxfp4, a->qs); *d = ll_mxfp4_scale(a->e);
    }
    *m = 0;
    return hsum_i32(dot_i8_groups4(v, _mm256_loadu_si256((const __m256i *)b->qs)));
}

static inline size_t block32_bytes(int type) {
    return type == LLAMBDA_TYPE_Q4_1 ? sizeof(block_q4_1) : type == LLAMBDA_TYPE_Q5_1 ? sizeof(block_q5_1)
         : type == LLAMBDA_TYPE_IQ4_NL ? sizeof(block_iq4_nl) : sizeof(block_mxfp4);
}

/* the activations' scale (and, Q8_1, scaled sum) of block i */
static inline float act32_scale(int type, const void *x, int64_t i, float *s) {
    if (type == LLAMBDA_TYPE_Q4_1 || type == LLAMBDA_TYPE_Q5_1) {
        const block_q8_1 *b = (const block_q8_1 *)x + i;
        *s = LL_FP16(b->s);
        return LL_FP16(b->d);
    }
    *s = 0;
    return LL_FP16(((const block_q8_0 *)x + i)->d);
}

/* One row, block after block: the single-row kernels of scalar.c, bit for bit. */
static inline __attribute__((always_inline)) void dot_blocks32(int type, int64_t n, float *s, const void *w, const void *x) {
    const int q8_1 = type == LLAMBDA_TYPE_Q4_1 || type == LLAMBDA_TYPE_Q5_1;
    float sum = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        float d, m, ys, yd = act32_scale(type, x, i, &ys);
        int isum = block32_sum(type, w, i, x, &d, &m);
        if (q8_1) sum += (d * yd) * (float)isum + m * ys;
        else sum += (float)isum * (d * yd);
    }
    *s = sum;
}
static void dot_q4_1(int64_t n, float *s, const void *w, const void *x) { dot_blocks32(LLAMBDA_TYPE_Q4_1, n, s, w, x); }
static void dot_q5_1(int64_t n, float *s, const void *w, const void *x) { dot_blocks32(LLAMBDA_TYPE_Q5_1, n, s, w, x); }
static void dot_iq4_nl(int64_t n, float *s, const void *w, const void *x) { dot_blocks32(LLAMBDA_TYPE_IQ4_NL, n, s, w, x); }
static void dot_mxfp4(int64_t n, float *s, const void *w, const void *x) { dot_blocks32(LLAMBDA_TYPE_MXFP4, n, s, w, x); }

/* Eight rows of one of those types against one activation row: each row's block sums as
 * above, the float steps of the eight rows side by side in the lanes of one vector (the
 * same operations per row, so the same bits, without one long chain of dependent adds). */
static inline __attribute__((always_inline)) void dot_blocks32_x8(int type, int64_t n, float *out, const void *w,
                                                                  size_t stride, const void *x) {
    const int ahead = stream_ahead();
    const int q8_1 = type == LLAMBDA_TYPE_Q4_1 || type == LLAMBDA_TYPE_Q5_1;
    const uint8_t *wb = w;
    const size_t bs = block32_bytes(type);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t isum[8];
        float d[8], m[8], ys, yd = act32_scale(type, x, i, &ys);
        for (int r = 0; r < 8; r++) {
            const uint8_t *row = wb + (size_t)r * stride;
            prefetch_ahead((const char *)row + (size_t)i * bs, ahead);
            isum[r] = block32_sum(type, row, i, x, &d[r], &m[r]);
        }
        __m256 is = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)isum));
        if (q8_1) {
            __m256 dd = _mm256_mul_ps(_mm256_loadu_ps(d), _mm256_set1_ps(yd));
            sum = _mm256_add_ps(sum, _mm256_add_ps(_mm256_mul_ps(dd, is), _mm256_mul_ps(_mm256_loadu_ps(m), _mm256_set1_ps(ys))));
        } else {
            sum = _mm256_add_ps(sum, _mm256_mul_ps(is, _mm256_mul_ps(_mm256_loadu_ps(d), _mm256_set1_ps(yd))));
        }
    }
    _mm256_storeu_ps(out, sum);
}

static void dot_q4_1_x8(int64_t n, float *out, const void *w, size_t stride, const void *x) {
    dot_blocks32_x8(LLAMBDA_TYPE_Q4_1, n, out, w, stride, x);
}
static void dot_q5_1_x8(int64_t n, float *out, const void *w, size_t stride, const void *x) {
    dot_blocks32_x8(LLAMBDA_TYPE_Q5_1, n, out, w, stride, x);
}
static void dot_iq4_nl_x8(int64_t n, float *out, const void *w, size_t stride, const void *x) {
    dot_blocks32_x8(LLAMBDA_TYPE_IQ4_NL, n, out, w, stride, x);
}
static void dot_mxfp4_x8(int64_t n, float *out, const void *w, size_t stride, const void *x) {
    dot_blocks32_x8(LLAMBDA_TYPE_MXFP4, n, out, w, stride, x);
}

/* Eight Q4_1, IQ4_NL or MXFP4 rows' block, repacked: qs[g] holds bytes 4g..4g+3 of each
 * row (row r at 4r), whose low nibbles are elements 4g..4g+3 and high nibbles
 * 16+4g..16+4g+3; the rows' scales (MXFP4: exponents) and Q4_1 minimums side by side. */
typedef struct {
    uint16_t d[8], m[8];
    uint8_t qs[4][32];
} block_4bit_x8;

/* Q5_1 adds the fifth bits: hb byte 4r + b holds, in bit 2g, that of element 4g + b of row
 * r and, in bit 2g + 1, that of element 16 + 4g + b (as many bytes as the file's qh). */
typedef struct {
    block_4bit_x8 base;
    uint8_t hb[32];
} block_q5_1_x8;

static inline __attribute__((always_inline)) size_t pack_4bit_x8(int type, int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / 32;
    size_t bs = type == LLAMBDA_TYPE_Q5_1 ? sizeof(block_q5_1_x8) : sizeof(block_4bit_x8);
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_4bit_x8 *p = (block_4bit_x8 *)((uint8_t *)dst + (size_t)i * bs);
            for (int r = 0; r < 8; r++) {
                const uint8_t *row = (const uint8_t *)w + (size_t)r * stride;
                const uint8_t *qs;
                if (type == LLAMBDA_TYPE_Q5_1) {
                    const block_q5_1 *a = (const block_q5_1 *)row + i;
                    p->d[r] = a->d; p->m[r] = a->m; qs = a->qs;
                    uint32_t h;
                    memcpy(&h, a->qh, 4);
                    uint8_t *hb = ((block_q5_1_x8 *)p)->hb;
                    for (int b = 0; b < 4; b++) {
                        uint8_t v = 0;
                        for (int g = 0; g < 4; g++)
                            v |= (uint8_t)((((h >> (4 * g + b)) & 1) << (2 * g)) | (((h >> (16 + 4 * g + b)) & 1) << (2 * g + 1)));
                        hb[4 * r + b] = v;
                    }
                } else if (type == LLAMBDA_TYPE_Q4_1) {
                    const block_q4_1 *a = (const block_q4_1 *)row + i;
                    p->d[r] = a->d; p->m[r] = a->m; qs = a->qs;
                } else if (type == LLAMBDA_TYPE_IQ4_NL) {
                    const block_iq4_nl *a = (const block_iq4_nl *)row + i;
                    p->d[r] = a->d; p->m[r] = 0; qs = a->qs;
                } else {
                    const block_mxfp4 *a = (const block_mxfp4 *)row + i;
                    p->d[r] = a->e; p->m[r] = 0; qs = a->qs;
                }
                for (int g = 0; g < 4; g++) memcpy(&p->qs[g][4 * r], qs + 4 * g, 4);
            }
        }
    return (size_t)nb * bs;
}
static size_t pack_q5_1_x8(int64_t n, const void *w, size_t stride, void *dst) {
    return pack_4bit_x8(LLAMBDA_TYPE_Q5_1, n, w, stride, dst);
}
static size_t pack_q4_1_x8(int64_t n, const void *w, size_t stride, void *dst) {
    return pack_4bit_x8(LLAMBDA_TYPE_Q4_1, n, w, stride, dst);
}
static size_t pack_iq4_nl_x8(int64_t n, const void *w, size_t stride, void *dst) {
    return pack_4bit_x8(LLAMBDA_TYPE_IQ4_NL, n, w, stride, dst);
}
static size_t pack_mxfp4_x8(int64_t n, const void *w, size_t stride, void *dst) {
    return pack_4bit_x8(LLAMBDA_TYPE_MXFP4, n, w, stride, dst);
}

/* The tile against T (1..4) tokens: per row and token the exact block sum of the
 * single-row kernel and its float step, block after block. */
static inline __attribute__((always_inline)) void packed_4bit_tile(int type, int64_t n, float *out, size_t out_stride,
                                                                   const void *tile, const void *x, size_t x_stride,
                                                                   const int T) {
    const int ahead = stream_ahead();
    const int q8_1 = type == LLAMBDA_TYPE_Q4_1 || type == LLAMBDA_TYPE_Q5_1;   /* Q8_1 activations, a minimum */
    const size_t bs = type == LLAMBDA_TYPE_Q5_1 ? sizeof(block_q5_1_x8) : sizeof(block_4bit_x8);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(type == LLAMBDA_TYPE_MXFP4 ? ll_kvalues_mxfp4 : ll_kvalues_iq4nl)));
    const size_t ybs = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    __m256 sum[4];
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) sum[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const block_4bit_x8 *p = (const block_4bit_x8 *)((const uint8_t *)tile + (size_t)i * bs);
        prefetch_ahead(p, ahead);
        prefetch_ahead((const char *)p + 64, ahead);
        prefetch_ahead((const char *)p + 128, ahead);
        const int8_t *yq[4];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            yq[t] = q8_1 ? ((const block_q8_1 *)((const uint8_t *)x + (size_t)t * x_stride) + i)->qs
                         : ((const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride) + i)->qs;
        __m256i is[4];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) is[t] = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)p->qs[g]);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (!q8_1) { lo = _mm256_shuffle_epi8(table, lo); hi = _mm256_shuffle_epi8(table, hi); }
            if (type == LLAMBDA_TYPE_Q5_1) {   /* the fifth bits */
                __m256i hb = _mm256_loadu_si256((const __m256i *)((const block_q5_1_x8 *)p)->hb), one = _mm256_set1_epi8(1);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * g), one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * g + 1), one), 4));
            }
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                int32_t yl, yh;
                memcpy(&yl, yq[t] + 4 * g, 4);
                memcpy(&yh, yq[t] + 16 + 4 * g, 4);
                if (q8_1) {
                    is[t] = ACC_DOT_U8I8_4(is[t], lo, _mm256_set1_epi32(yl));
                    is[t] = ACC_DOT_U8I8_4(is[t], hi, _mm256_set1_epi32(yh));
                } else {
                    is[t] = _mm256_add_epi32(is[t], dot_i8_groups4(lo, _mm256_set1_epi32(yl)));
                    is[t] = _mm256_add_epi32(is[t], dot_i8_groups4(hi, _mm256_set1_epi32(yh)));
                }
            }
        }
        __m256 d;
        if (type == LLAMBDA_TYPE_MXFP4) {   /* E8M0 exponents widened as ll_mxfp4_scale does */
            __m256i e = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p->d));
            __m256i big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
            __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
            d = _mm256_castsi256_ps(_mm256_blendv_epi8(big, small, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
        } else {
            d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        }
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const uint8_t *yb = (const uint8_t *)x + (size_t)t * x_stride + (size_t)i * ybs;
            uint16_t yd, ys;
            memcpy(&yd, yb, 2);
            __m256 isf = _mm256_cvtepi32_ps(is[t]);
            if (q8_1) {
                memcpy(&ys, yb + 2, 2);
                __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->m));
                __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(LL_FP16(yd))), isf),
                                         _mm256_mul_ps(m, _mm256_set1_ps(LL_FP16(ys))));
                sum[t] = _mm256_add_ps(sum[t], v);
            } else {
                sum[t] = _mm256_add_ps(sum[t], _mm256_mul_ps(isf, _mm256_mul_ps(d, _mm256_set1_ps(LL_FP16(yd)))));
            }
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + (size_t)t * out_stride, sum[t]);
}

static inline __attribute__((always_inline)) void dot_4bit_packed(int type, int64_t n, float *out, size_t out_stride,
                                                                  const void *tile, const void *x, size_t x_stride, int n_tok) {
    switch (n_tok) {
    case 4: packed_4bit_tile(type, n, out, out_stride, tile, x, x_stride, 4); break;
    case 3: packed_4bit_tile(type, n, out, out_stride, tile, x, x_stride, 3); break;
    case 2: packed_4bit_tile(type, n, out, out_stride, tile, x, x_stride, 2); break;
    default: packed_4bit_tile(type, n, out, out_stride, tile, x, x_stride, 1); break;
    }
}
static void dot_q5_1_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
    dot_4bit_packed(LLAMBDA_TYPE_Q5_1, n, out, out_stride, tile, x, x_stride, n_tok);
}
static void dot_q4_1_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
    dot_4bit_packed(LLAMBDA_TYPE_Q4_1, n, out, out_stride, tile, x, x_stride, n_tok);
}
static void dot_iq4_nl_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                              int n_tok) {
    dot_4bit_packed(LLAMBDA_TYPE_IQ4_NL, n, out, out_stride, tile, x, x_stride, n_tok);
}
static void dot_mxfp4_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                             int n_tok) {
    dot_4bit_packed(LLAMBDA_TYPE_MXFP4, n, out, out_stride, tile, x, x_stride, n_tok);
}

/* the 8 six-bit scales and mins of a Q4_K/Q5_K block */
static inline void k4_scales(const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    for (int j = 0; j < 8; j++) ll_get_scale_min_k4(j, q, &sc[j], &mn[j]);
}

/* One Q4_K block against one Q8_K block: the scaled nibble products in 8 int32 lanes
 * (sc: the block's eight 6-bit scales). */
static inline __m256i q4_K_block_sums(const block_q4_K *a, const block_q8_K *b, const uint8_t *sc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i q4 = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * j));
        __m256i ql = _mm256_and_si256(q4, m4), qh = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
        __m256i pl = mul_u8_i8_pairs(ql, _mm256_loadu_si256((const __m256i *)(b->qs + 64 * j)));
        __m256i ph = mul_u8_i8_pairs(qh, _mm256_loadu_si256((const __m256i *)(b->qs + 64 * j + 32)));
        sumi = ACC_MADD16(sumi, pl, _mm256_set1_epi16(sc[2 * j]));
        sumi = ACC_MADD16(sumi, ph, _mm256_set1_epi16(sc[2 * j + 1]));
    }
    return sumi;
}

void ll_avx2_dot_q4_K(int64_t n, float *s, const void *w, const void *x);
void ll_avx2_dot_q4_K(int64_t n, float *s, const void *w, const void *x) {
    const block_q4_K *a = w; const block_q8_K *b = x;
    float acc = 0, accm = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint8_t sc[8], mn[8];
        k4_scales(a[i].scales, sc, mn);
        __m256i sumi = q4_K_block_sums(&a[i], &b[i], sc);
        int msum = 0;
        for (int sb = 0; sb < 8; sb++) msum += mn[sb] * (b[i].bsums[2 * sb] + b[i].bsums[2 * sb + 1]);
        acc = fmaf((float)hsum_i32(sumi), b[i].d * LL_FP16(a[i].d), acc);
        accm = fmaf((float)msum, b[i].d * LL_FP16(a[i].dmin), accm);
    }
    *s = acc - accm;
}

/* Q4_K/Q5_K scales and mins unpacked with 32-bit masks: bytes 0-7 of the result are the
 * eight 6-bit scales, bytes 8-15 the eight 6-bit mins (same values as ll_get_scale_min_k4). */
static inline void k4_unpack(const uint8_t *q, uint32_t u[4]) {
    uint32_t a, b, c;
    memcpy(&a, q, 4); memcpy(&b, q + 4, 4); memcpy(&c, q + 8, 4);
    u[0] = a & 0x3f3f3f3fu;
    u[1] = (c & 0x0f0f0f0fu) | (((a >> 6) & 0x03030303u) << 4);
    u[2] = b & 0x3f3f3f3fu;
    u[3] = ((c >> 4) & 0x0f0f0f0fu) | (((b >> 6) & 0x03030303u) << 4);
}

/* Eight int32 vectors -> one vector of their eight totals (exact). */
static inline __m256i sum8x8(__m256i v[8]) {
    __m256i t01 = _mm256_hadd_epi32(v[0], v[1]), t23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i t45 = _mm256_hadd_epi32(v[4], v[5]), t67 = _mm256_hadd_epi32(v[6], v[7]);
    __m256i u0 = _mm256_hadd_epi32(t01, t23), u1 = _mm256_hadd_epi32(t45, t67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* Eight 4-lane int32 vectors -> one vector of their eight totals (exact). */
static inline __m256i sum4x8(const __m128i v[8]) {
    __m256i m[4];
    for (int k = 0; k < 4; k++) m[k] = _mm256_set_m128i(v[2 * k + 1], v[2 * k]);
    __m256i ma = _mm256_hadd_epi32(m[0], m[1]), mb = _mm256_hadd_epi32(m[2], m[3]);
    return _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(ma, mb), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline __m256 load_d8(const uint8_t *first, size_t stride, size_t off) {
    uint16_t h[8];
    for (int r = 0; r < 8; r++) memcpy(&h[r], first + (size_t)r * stride + off, 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* The 8 x 4 tile through the single-row kernel, one element at a time (rows longer than a
 * tile's precomputed buffers hold). */
static void x8_t4_by_rows(ll_vec_dot_fn dot, int64_t n, float *out, size_t out_stride, const void *w, size_t stride,
                          const void *x, size_t x_stride) {
    for (int t = 0; t < 4; t++)
        for (int r = 0; r < 8; r++)
            dot(n, &out[(size_t)t * out_stride + r], (const uint8_t *)w + (size_t)r * stride, (const uint8_t *)x + (size_t)t * x_stride);
}


/* ------------------------------------------------------------------ Q2_K */

/* scalar.c's dot_q2_K: per block the exact integer sums of scale x (values x activations)
 * and of min x (the activations' 16-group sums), then its one float step. */
static void dot_q2_K(int64_t n, float *s, const void *w, const void *x) {
    const int ahead = stream_ahead();
    const block_q2_K *a = w;
    const block_q8_K *b = x;
    const __m256i m3 = _mm256_set1_epi8(3);
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(a + i, ahead);
        prefetch_ahead((const char *)(a + i) + 64, ahead);
        int msum = 0;
        for (int g = 0; g < 16; g++) msum += b[i].bsums[g] * (a[i].scales[g] >> 4);
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i V = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * h));
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                int c = 4 * h + j;
                __m256i u = _mm256_and_si256(_mm256_srli_epi16(V, 2 * j), m3);
                __m256i pr = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * c)));
                __m256i sc = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(a[i].scales[2 * c] & 0xF)),
                                                     _mm_set1_epi16(a[i].scales[2 * c + 1] & 0xF), 1);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, sc));
            }
        }
        int isum = hsum_i32(acc);
        sum += b[i].d * LL_FP16(a[i].d) * (float)isum - b[i].d * LL_FP16(a[i].dmin) * (float)msum;
    }
    *s = sum;
}

/* Eight Q2_K rows' block, repacked: qs[h][p] holds bytes 32h + 4p .. 32h + 4p + 3 of each
 * row (row r at 4r), whose two-bit fields j are elements 128h + 32j + 4p .. + 3 (the file's
 * own bit layout, so the same bytes); scales and mins unpacked [group][row]. */
typedef struct {
    uint16_t d[8], dmin[8];
    uint8_t sc[16][8], mn[16][8];
    uint8_t qs[2][8][32];
} block_q2_K_x8;

static size_t pack_q2_K_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / QK_K;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q2_K_x8 *p = (block_q2_K_x8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_q2_K *a = (const block_q2_K *)((const uint8_t *)w + (size_t)r * stride) + i;
                p->d[r] = a->d;
                p->dmin[r] = a->dmin;
                for (int g = 0; g < 16; g++) { p->sc[g][r] = a->scales[g] & 0xF; p->mn[g][r] = a->scales[g] >> 4; }
                for (int h = 0; h < 2; h++)
                    for (int q = 0; q < 8; q++) memcpy(&p->qs[h][q][4 * r], a->qs + 32 * h + 4 * q, 4);
            }
        }
    return (size_t)nb * sizeof(block_q2_K_x8);
}

/* The tile against T (1 or 2) tokens: per row and token dot_q2_K's two integer sums
 * (exact, any order) and the same float step per block. */
static inline __attribute__((always_inline)) void q2_K_packed_tile(int64_t n, float *out, size_t out_stride,
                                                                   const block_q2_K_x8 *p, const void *x,
                                                                   size_t x_stride, const int T) {
    const int ahead = stream_ahead();
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 sum[2];
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++) sum[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[2];
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++) y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
        #pragma GCC unroll 13
        for (int l = 0; l < 13; l++)   /* the whole 800-byte block */
            prefetch_ahead((const char *)p + 64 * l, ahead);
        __m256i isum[2], msum[2];
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++) isum[t] = msum[t] = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {   /* 32-element chunk c: groups 2c and 2c + 1 */
            int h = c / 4, j = c % 4;
            __m256i ga[2], gb[2];
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) ga[t] = gb[t] = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int q = 0; q < 8; q++) {
                __m256i u = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)p->qs[h][q]), 2 * j), m3);
                #pragma GCC unroll 2
                for (int t = 0; t < T; t++) {
                    int32_t yq;
                    memcpy(&yq, y[t]->qs + 32 * c + 4 * q, 4);
                    if (q < 4) ga[t] = ACC_DOT_U8I8_4(ga[t], u, _mm256_set1_epi32(yq));
                    else gb[t] = ACC_DOT_U8I8_4(gb[t], u, _mm256_set1_epi32(yq));
                }
            }
            __m256i sa = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p->sc[2 * c]));
            __m256i sb = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p->sc[2 * c + 1]));
            __m256i ma = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p->mn[2 * c]));
            __m256i mb = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p->mn[2 * c + 1]));
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_mullo_epi32(ga[t], sa), _mm256_mullo_epi32(gb[t], sb)));
                msum[t] = _mm256_add_epi32(msum[t], _mm256_add_epi32(_mm256_mullo_epi32(ma, _mm256_set1_epi32(y[t]->bsums[2 * c])),
                                                                     _mm256_mullo_epi32(mb, _mm256_set1_epi32(y[t]->bsums[2 * c + 1]))));
            }
        }
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->dmin));
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            __m256 yd = _mm256_set1_ps(y[t]->d);
            __m256 v = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(yd, d), _mm256_cvtepi32_ps(isum[t])),
                                     _mm256_mul_ps(_mm256_mul_ps(yd, dm), _mm256_cvtepi32_ps(msum[t])));
            sum[t] = _mm256_add_ps(sum[t], v);
        }
    }
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + (size_t)t * out_stride, sum[t]);
}

#ifdef LL_AVX512
/* One token in 512-bit vectors: a chunk's two groups side by side (quant steps q in the
 * low half, q + 4 in the high, the eight rows in each), so each shift, mask, dot product
 * and scale multiply serves both groups; the halves are added once per block. The same
 * exact integer sums as q2_K_packed_tile, then its float step: the same bits. */
static void q2_K_packed_tile_x1(int64_t n, float *out, const block_q2_K_x8 *p, const block_q8_K *y) {
    const int ahead = stream_ahead();
    const __m512i m3 = _mm512_set1_epi8(3);
    __m512i lanes[4];   /* dword q in the low half, q + 4 in the high */
    for (int q = 0; q < 4; q++) lanes[q] = set_halves_epi32(q, q + 4);
    __m256 sum = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++, y++) {
        #pragma GCC unroll 13
        for (int l = 0; l < 13; l++)   /* the whole 800-byte block */
            prefetch_ahead((const char *)p + 64 * l, ahead);
        __m512i V[2][4];   /* [h][q]: steps q | q + 4 of half h */
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
            #pragma GCC unroll 4
            for (int q = 0; q < 4; q++) V[h][q] = pair256(p->qs[h][q], p->qs[h][q + 4]);
        __m512i isum = _mm512_setzero_si512(), msum = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {   /* 32-element chunk c: groups 2c (low half) and 2c + 1 (high) */
            int h = c / 4, j = c % 4;
            __m512i yc = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(y->qs + 32 * c)));
            __m512i g = _mm512_setzero_si512();
            #pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                __m512i u = _mm512_and_si512(_mm512_srli_epi16(V[h][q], 2 * j), m3);
                g = _mm512_dpbusd_epi32(g, u, _mm512_permutexvar_epi32(lanes[q], yc));
            }
            __m512i sc = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)p->sc[2 * c]),
                                                                  _mm_loadl_epi64((const __m128i *)p->sc[2 * c + 1])));
            __m512i mn = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)p->mn[2 * c]),
                                                                  _mm_loadl_epi64((const __m128i *)p->mn[2 * c + 1])));
            __m512i bs = set_halves_epi32(y->bsums[2 * c], y->bsums[2 * c + 1]);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(g, sc));
            msum = _mm512_add_epi32(msum, _mm512_mullo_epi32(mn, bs));
        }
        __m256i is = add_halves_epi32(isum), ms = add_halves_epi32(msum);
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->dmin));
        __m256 yd = _mm256_set1_ps(y->d);
        __m256 v = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(yd, d), _mm256_cvtepi32_ps(is)),
                                 _mm256_mul_ps(_mm256_mul_ps(yd, dm), _mm256_cvtepi32_ps(ms)));
        sum = _mm256_add_ps(sum, v);
    }
    _mm256_storeu_ps(out, sum);
}
#endif

static void dot_q2_K_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
    int t = 0;
#ifdef LL_AVX512
    if (n_tok == 1) { q2_K_packed_tile_x1(n, out, tile, x); return; }
#endif
    for (; t + 2 <= n_tok; t += 2)
        q2_K_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 2);
    for (; t < n_tok; t++)
        q2_K_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1);
}

/* ------------------------------------------------------------------ Q3_K */

/* scalar.c's dot_q3_K: per block the exact integer sum of scale x (values x activations),
 * then one float step. Values are taken as q + 4 (0..7: two low bits, plus 4 where the
 * high bit is set), the 4 x Σy of each 16-group (the activations' bsums) taken off after. */
static void dot_q3_K(int64_t n, float *s, const void *w, const void *x) {
    const int ahead = stream_ahead();
    const block_q3_K *a = w;
    const block_q8_K *b = x;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    float sum = 0;
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(a + i, ahead);
        prefetch_ahead((const char *)(a + i) + 64, ahead);
        int8_t S[16];
        ll_q3_K_scales(a[i].scales, S);
        int ofs = 0;
        for (int g = 0; g < 16; g++) ofs += S[g] * b[i].bsums[g];
        __m256i H = _mm256_loadu_si256((const __m256i *)a[i].hmask), acc = _mm256_setzero_si256();
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i V = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * h));
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                int c = 4 * h + j;
                __m256i lo = _mm256_and_si256(_mm256_srli_epi16(V, 2 * j), m3);
                __m256i hb = _mm256_and_si256(_mm256_srli_epi16(H, c), one);
                __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));   /* q + 4 */
                __m256i pr = _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * c)));
                __m256i sc = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(S[2 * c])), _mm_set1_epi16(S[2 * c + 1]), 1);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pr, sc));
            }
        }
        int isum = hsum_i32(acc) - 4 * ofs;
        sum += LL_FP16(a[i].d) * b[i].d * (float)isum;
    }
    *s = sum;
}

/* Eight Q3_K rows' block, repacked with each value widened to a nibble (q + 4): qs[g][s]
 * holds, for row r at bytes 4r..4r+3, elements 16g + 8s + b in the low nibbles and
 * 16g + 8s + 4 + b in the high ones (b = 0..3); the scales unpacked, less 32,
 * [group][row]. A third more bytes than the file's, for an unpacking as cheap as Q4_0's. */
typedef struct {
    uint16_t d[8];
    int8_t S[16][8];
    uint8_t qs[16][2][32];
} block_q3_K_x8;

static size_t pack_q3_K_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / QK_K;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q3_K_x8 *p = (block_q3_K_x8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_q3_K *a = (const block_q3_K *)((const uint8_t *)w + (size_t)r * stride) + i;
                p->d[r] = a->d;
                int8_t S[16];
                ll_q3_K_scales(a->scales, S);
                uint8_t u[QK_K];
                for (int k = 0; k < QK_K; k++) {
                    int h = k / 128, j = (k % 128) / 32, l = k % 32;
                    u[k] = (uint8_t)(((a->qs[32 * h + l] >> (2 * j)) & 3) | (((a->hmask[l] >> (4 * h + j)) & 1) << 2));
                }
                for (int g = 0; g < 16; g++) {
                    p->S[g][r] = S[g];
                    for (int sh = 0; sh < 2; sh++)
                        for (int bb = 0; bb < 4; bb++)
                            p->qs[g][sh][4 * r + bb] = (uint8_t)(u[16 * g + 8 * sh + bb] | (u[16 * g + 8 * sh + 4 + bb] << 4));
                }
            }
        }
    return (size_t)nb * sizeof(block_q3_K_x8);
}

/* The tile against T (1 or 2) tokens: per row and token dot_q3_K's integer sum (exact, any
 * order: each 16-group's dot starts at -4 x its bsum) and the same float step per block. */
static inline __attribute__((always_inline)) void q3_K_packed_tile(int64_t n, float *out, size_t out_stride,
                                                                   const block_q3_K_x8 *p, const void *x,
                                                                   size_t x_stride, const int T) {
    const int ahead = stream_ahead();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 sum[2];
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++) sum[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[2];
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++) y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
        #pragma GCC unroll 19
        for (int l = 0; l < 19; l++)   /* the whole 1168-byte block */
            prefetch_ahead((const char *)p + 64 * l, ahead);
        __m256i isum[2];
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
        #pragma GCC unroll 16
        for (int g = 0; g < 16; g++) {
            __m256i ga[2];
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) ga[t] = _mm256_set1_epi32(-4 * y[t]->bsums[g]);
            #pragma GCC unroll 2
            for (int sh = 0; sh < 2; sh++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)p->qs[g][sh]);
                __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                #pragma GCC unroll 2
                for (int t = 0; t < T; t++) {
                    int32_t yl, yh;
                    memcpy(&yl, y[t]->qs + 16 * g + 8 * sh, 4);
                    memcpy(&yh, y[t]->qs + 16 * g + 8 * sh + 4, 4);
                    ga[t] = ACC_DOT_U8I8_4(ga[t], lo, _mm256_set1_epi32(yl));
                    ga[t] = ACC_DOT_U8I8_4(ga[t], hi, _mm256_set1_epi32(yh));
                }
            }
            __m256i S = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p->S[g]));
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(ga[t], S));
        }
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++)
            sum[t] = _mm256_add_ps(sum[t], _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(y[t]->d)), _mm256_cvtepi32_ps(isum[t])));
    }
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + (size_t)t * out_stride, sum[t]);
}

static void dot_q3_K_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
    int t = 0;
    for (; t + 2 <= n_tok; t += 2)
        q3_K_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 2);
    for (; t < n_tok; t++)
        q3_K_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1);
}

/* ------------------------------------------------------------------ IQ4_XS */

/* scalar.c's dot_iq4_xs (llama.cpp's AVX2 layout): a sub-block's 32 values looked up from
 * its nibbles (low ones in the first 16 bytes, high ones in the last), lane m = the exact
 * dot of elements 4m..4m+3 times the scale, summed over the block; one fused
 * multiply-add per lane per block, hsum8. */
static void dot_iq4_xs(int64_t n, float *s, const void *w, const void *x) {
    const int ahead = stream_ahead();
    const block_iq4_xs *a = w;
    const block_q8_K *b = x;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ll_kvalues_iq4nl));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        prefetch_ahead(a + i, ahead);
        prefetch_ahead((const char *)(a + i) + 64, ahead);
        prefetch_ahead((const char *)(a + i) + 128, ahead);
        __m256i lane = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            __m128i q = _mm_loadu_si128((const __m128i *)(a[i].qs + 16 * sb));
            __m256i idx = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1), m4);
            __m256i v = _mm256_shuffle_epi8(table, idx);
            __m256i p = dot_i8_groups4(v, _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * sb)));
            lane = _mm256_add_epi32(lane, _mm256_mullo_epi32(p, _mm256_set1_epi32(ll_iq4_xs_scale(&a[i], sb))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(LL_FP16(a[i].d) * b[i].d), _mm256_cvtepi32_ps(lane), acc);
    }
    *s = hsum8(acc);
}

/* Eight IQ4_XS rows' block, repacked: qs[sb][g] holds bytes 4g..4g+3 of sub-block sb of
 * each row (row r at 4r), so one vector's low nibbles are the same four elements of the
 * eight rows (lane g of dot_iq4_xs) and its high nibbles four more (lane 4 + g); the
 * scales are unpacked, less 32, [sub-block][row]. */
typedef struct {
    uint16_t d[8];
    int8_t ls[8][8];
    uint8_t qs[8][4][32];
} block_iq4_xs_x8;

static size_t pack_iq4_xs_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / QK_K;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_iq4_xs_x8 *p = (block_iq4_xs_x8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_iq4_xs *a = (const block_iq4_xs *)((const uint8_t *)w + (size_t)r * stride) + i;
                p->d[r] = a->d;
                for (int sb = 0; sb < 8; sb++) {
                    p->ls[sb][r] = (int8_t)ll_iq4_xs_scale(a, sb);
                    for (int g = 0; g < 4; g++) memcpy(&p->qs[sb][g][4 * r], a->qs + 16 * sb + 4 * g, 4);
                }
            }
        }
    return (size_t)nb * sizeof(block_iq4_xs_x8);
}

/* eight int8 scales as int16 pairs (s, s), one per 32-bit lane (an operand of madd/vpdpwssd
 * that multiplies both int16 halves of a lane by its row's scale) */
static inline __m256i scale_pairs_i8(const int8_t *s8) {
    const __m256i dup = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                         0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
    return _mm256_shuffle_epi8(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)s8)), dup);
}

/* The tile against T (1 or 2) tokens: per row and token the lanes of dot_iq4_xs (exact
 * integers, any order) and the same fused multiply-add per lane per block, in block
 * order, then its hsum8. */
static inline __attribute__((always_inline)) void iq4_xs_packed_tile(int64_t n, float *out, size_t out_stride,
                                                                     const block_iq4_xs_x8 *p, const void *x,
                                                                     size_t x_stride, const int T) {
    const int ahead = stream_ahead();
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ll_kvalues_iq4nl));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[2][8];
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++)
        for (int m = 0; m < 8; m++) acc[t][m] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[2];
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++) y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
        #pragma GCC unroll 18
        for (int l = 0; l < 18; l++)   /* the whole 1104-byte block */
            prefetch_ahead((const char *)p + 64 * l, ahead);
        __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        __m256i ls[8];   /* each sub-block's row scales as int16 pairs (s, s) */
        #pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) ls[sb] = scale_pairs_i8(p->ls[sb]);
        #pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m256i lo[2], hi[2];   /* lanes g and 4 + g of the eight rows */
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int sb = 0; sb < 8; sb++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)p->qs[sb][g]);
                __m256i vl = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
                __m256i vh = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
                __m256i al = _mm256_sign_epi8(vl, vl), ah = _mm256_sign_epi8(vh, vh);
                #pragma GCC unroll 2
                for (int t = 0; t < T; t++) {
                    int32_t yl, yh;
                    memcpy(&yl, y[t]->qs + 32 * sb + 4 * g, 4);
                    memcpy(&yh, y[t]->qs + 32 * sb + 16 + 4 * g, 4);
                    /* pair sums of |v|·(±y) fit int16 (at most 2·127·127); the scale
                     * multiplies both of a lane's pairs as they are added to it */
                    lo[t] = ACC_MADD16(lo[t], _mm256_maddubs_epi16(al, _mm256_sign_epi8(_mm256_set1_epi32(yl), vl)), ls[sb]);
                    hi[t] = ACC_MADD16(hi[t], _mm256_maddubs_epi16(ah, _mm256_sign_epi8(_mm256_set1_epi32(yh), vh)), ls[sb]);
                }
            }
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                __m256 dt = _mm256_mul_ps(d, _mm256_set1_ps(y[t]->d));
                acc[t][g] = _mm256_fmadd_ps(dt, _mm256_cvtepi32_ps(lo[t]), acc[t][g]);
                acc[t][4 + g] = _mm256_fmadd_ps(dt, _mm256_cvtepi32_ps(hi[t]), acc[t][4 + g]);
            }
        }
    }
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++) {   /* hsum8 of each row's eight lanes */
        __m256 r = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][4]), _mm256_add_ps(acc[t][2], acc[t][6])),
                                 _mm256_add_ps(_mm256_add_ps(acc[t][1], acc[t][5]), _mm256_add_ps(acc[t][3], acc[t][7])));
        _mm256_storeu_ps(out + (size_t)t * out_stride, r);
    }
}

#ifdef LL_AVX512
/* One token in 512-bit vectors: one 64-byte load is steps g and g + 1 of a sub-block of the
 * eight rows, whose low nibbles are lanes g and g + 1 of dot_iq4_xs (in the low and high
 * half) and whose high nibbles are lanes 4 + g and 5 + g. The nibbles look up |value|,
 * the sign moves to the activations by a mask read off the nibble's top bit (every
 * negative value has index 0-7), then |v|·(±y) in int16 pairs and the row's scale in one
 * dpwssd: the same integers as the 256-bit tile. Each row lane gets the tile's fused
 * multiply-add per block in its order, and hsum8's brackets follow from the halves.
 * Fifteen instructions a 64-byte load where taking both nibbles of 32 bytes at once took
 * twenty: one thread, a tile resident in L2 (a microbenchmark of dot_packed, 384 rows of
 * 2048): 32 -> 48 GB/s. */
static void iq4_xs_packed_tile_x1(int64_t n, float *out, const block_iq4_xs_x8 *p, const block_q8_K *y) {
    const int ahead = stream_ahead();
    const __m512i table = _mm512_abs_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ll_kvalues_iq4nl)));   /* |value| */
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i b3 = _mm512_set1_epi8(0x08), b7 = _mm512_set1_epi8((char)0x80);
    __m512 acc[2][2];   /* [low or high nibbles][step pair]: row lanes (g, g + 1) side by side */
    for (int h = 0; h < 2; h++) acc[h][0] = acc[h][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++, y++) {
        #pragma GCC unroll 18
        for (int l = 0; l < 18; l++)   /* the whole 1104-byte block */
            prefetch_ahead((const char *)p + 64 * l, ahead);
        __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d)), _mm256_set1_ps(y->d));
        __m512 d2 = dup_halves(d);
        __m512i ls[8], yv[8];
        #pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            ls[sb] = _mm512_broadcast_i64x4(scale_pairs_i8(p->ls[sb]));
            yv[sb] = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(y->qs + 32 * sb)));
        }
        #pragma GCC unroll 2
        for (int gp = 0; gp < 2; gp++) {
            __m512i lane[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            #pragma GCC unroll 8
            for (int sb = 0; sb < 8; sb++) {
                __m512i q = _mm512_loadu_si512(p->qs[sb][2 * gp]);
                ONE_LOAD(q);
                #pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    __m512i v = _mm512_shuffle_epi8(table, _mm512_and_si512(h ? _mm512_srli_epi16(q, 4) : q, m4));
                    __mmask64 neg = _mm512_testn_epi8_mask(q, h ? b7 : b3);
                    __m512i yq = _mm512_permutexvar_epi32(lane_pair(4 * h + 2 * gp), yv[sb]);
                    __m512i ys = _mm512_mask_sub_epi8(yq, neg, _mm512_setzero_si512(), yq);
                    lane[h] = _mm512_dpwssd_epi32(lane[h], _mm512_maddubs_epi16(v, ys), ls[sb]);
                }
            }
            for (int h = 0; h < 2; h++) acc[h][gp] = _mm512_fmadd_ps(d2, _mm512_cvtepi32_ps(lane[h]), acc[h][gp]);
        }
    }
    _mm256_storeu_ps(out, paired_hsum8(acc));
}
#endif

static void dot_iq4_xs_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                              int n_tok) {
    int t = 0;
#ifdef LL_AVX512
    if (n_tok == 1) { iq4_xs_packed_tile_x1(n, out, tile, x); return; }
#endif
    for (; t + 2 <= n_tok; t += 2)
        iq4_xs_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 2);
    for (; t < n_tok; t++)
        iq4_xs_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1);
}

/* Eight Q4_K rows against one activation row: out[r] equals dot_q4_K on row r.
 * Pass 1 walks the rows one after another (one contiguous stream of memory) and parks
 * each block's integer lane sums in an L1-sized buffer; pass 2 reduces them per block and
 * applies the per-row fused multiply-adds, eight rows per vector. */
#define X8_MAX_BLOCKS 64
static void dot_q4_K_x8(int64_t n, float *out, const void *w, size_t stride, const void *x) {
    const int ahead = stream_ahead();
    const uint8_t *wb = w;
    const block_q8_K *b = x;
    int64_t nb = n / QK_K;
    if (nb > X8_MAX_BLOCKS) {
        for (int r = 0; r < 8; r++) ll_avx2_dot_q4_K(n, &out[r], wb + (size_t)r * stride, x);
        return;
    }
    __m256i sums[X8_MAX_BLOCKS][8];
    __m128i mins[X8_MAX_BLOCKS][8];
    for (int r = 0; r < 8; r++) {
        const block_q4_K *a = (const block_q4_K *)(wb + (size_t)r * stride);
        for (int64_t i = 0; i < nb; i++) {
            /* the rows are contiguous: keep the stream ahead of us in flight */
            prefetch_ahead(&a[i], ahead);
            prefetch_ahead((const char *)&a[i] + 64, ahead);
            prefetch_ahead((const char *)&a[i] + 128, ahead);
            uint32_t u[4];
            k4_unpack(a[i].scales, u);
            const uint8_t *sc = (const uint8_t *)u;
            sums[i][r] = q4_K_block_sums(&a[i], &b[i], sc);
            __m128i q8s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)b[i].bsums), _mm_loadu_si128((const __m128i *)(b[i].bsums + 8)));
            mins[i][r] = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(sc + 8))), q8s);
        }
    }
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        size_t off = (size_t)i * sizeof(block_q4_K);
        __m256i mt = sum4x8(mins[i]);
        __m256 yd = _mm256_set1_ps(b[i].d);
        __m256 d = _mm256_mul_ps(yd, load_d8(wb, stride, off));
        __m256 dmin = _mm256_mul_ps(yd, load_d8(wb, stride, off + 2));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum8x8(sums[i])), d, acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), dmin, accm);
    }
    _mm256_storeu_ps(out, _mm256_sub_ps(acc, accm));
}

/* Eight Q4_K rows against four activation rows (prefill): each block's nibbles and
 * scales are unpacked once and used for all four tokens. out[t*out_stride + r] equals
 * dot_q4_K of row r and token t, bit for bit. */
static void dot_q4_K_x8_t4(int64_t n, float *out, size_t out_stride, const void *w, size_t stride,
                           const void *x, size_t x_stride) {
    const uint8_t *wb = w;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[4], accm[4];
    for (int t = 0; t < 4; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        size_t off = (size_t)i * sizeof(block_q4_K);
        const block_q8_K *y[4];
        for (int t = 0; t < 4; t++) y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
        __m256i sums[4][8];
        __m128i mins[4][8], q8s[4];
        for (int t = 0; t < 4; t++)
            q8s[t] = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[t]->bsums), _mm_loadu_si128((const __m128i *)(y[t]->bsums + 8)));
        for (int r = 0; r < 8; r++) {
            const block_q4_K *a = (const block_q4_K *)(wb + (size_t)r * stride + off);
            uint32_t u[4];
            k4_unpack(a->scales, u);
            const uint8_t *sc = (const uint8_t *)u;
            __m128i mn = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(sc + 8)));
            /* four named accumulators: kept in registers (an indexed array spilled to the
             * stack and made every update a store-load chain) */
            __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
            for (int j = 0; j < 4; j++) {
                __m256i q4 = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * j));
                __m256i ql = _mm256_and_si256(q4, m4), qh = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
                __m256i sl = _mm256_set1_epi16(sc[2 * j]), sh = _mm256_set1_epi16(sc[2 * j + 1]);
#define Q4K_TOKEN(acc, t)                                                                                          \
                {                                                                                                  \
                    __m256i pl = mul_u8_i8_pairs(ql, _mm256_loadu_si256((const __m256i *)(y[t]->qs + 64 * j)));     \
                    __m256i ph = mul_u8_i8_pairs(qh, _mm256_loadu_si256((const __m256i *)(y[t]->qs + 64 * j + 32))); \
                    acc = ACC_MADD16(ACC_MADD16(acc, pl, sl), ph, sh);                                            \
                }
                Q4K_TOKEN(s0, 0) Q4K_TOKEN(s1, 1) Q4K_TOKEN(s2, 2) Q4K_TOKEN(s3, 3)
#undef Q4K_TOKEN
            }
            sums[0][r] = s0; sums[1][r] = s1; sums[2][r] = s2; sums[3][r] = s3;
            for (int t = 0; t < 4; t++) mins[t][r] = _mm_madd_epi16(mn, q8s[t]);
        }
        __m256 xd = load_d8(wb, stride, off), xdmin = load_d8(wb, stride, off + 2);
        for (int t = 0; t < 4; t++) {
            __m256i mt = sum4x8(mins[t]);
            __m256 yd = _mm256_set1_ps(y[t]->d);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum8x8(sums[t])), _mm256_mul_ps(yd, xd), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mt), _mm256_mul_ps(yd, xdmin), accm[t]);
        }
    }
    for (int t = 0; t < 4; t++) _mm256_storeu_ps(out + (size_t)t * out_stride, _mm256_sub_ps(acc[t], accm[t]));
}

/* Repacked Q4_K: one block of eight rows, interleaved so that a vector holds the same
 * four quants of all eight rows. A VNNI step then multiplies them with four activations
 * broadcast from one token and leaves each row's sum in its own lane: no horizontal
 * reductions, no scale unpacking, and the nibbles of one load serve every token. */
typedef struct {
    uint16_t d[8], dmin[8];     /* per row */
    uint8_t sc[8][8];           /* [sub-block][row] 6-bit scales */
    uint8_t mn[4][8][2];        /* [sub-block pair][row][2] 6-bit mins: int16 pairs once widened */
    uint8_t qs[4][8][8][4];     /* [64-quant group j][4-byte step g][row]: bytes 32j+4g.. of the row */
} block_q4_K_x8;

/* Eight rows' mins (mn[k][row]: sub-blocks 2k, 2k + 1, as the x8 and r8 tiles store them)
 * against a token's 32-quant activation sums, as int16 pairs: each row's Σ mins·sums,
 * exactly (the integers dot_q4_K and dot_q5_K take their mins with) */
static inline __m256i mins_by_row(const uint8_t mn[4][8][2], const block_q8_K *y) {
    /* the eight 32-quant sums as int16 (|sum| <= 32 x 128 fits), in intrinsics: as a
     * scalar loop GCC vectorized it or not depending on what else the kernel held (with
     * asm prefetches in the four-token tile it did not: llama-3.2-1b Q4_K_M pp512 -28%),
     * and this is faster than its vector code was: 370-385 -> 406-411 t/s, Q5_K_M +3% */
    __m256i sums = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), _mm256_set1_epi16(1));
#ifdef LL_AVX512
    __m128i bs = _mm256_cvtepi32_epi16(sums);
#else
    __m128i bs = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packs_epi32(sums, sums), 0x08));
#endif
    __m256i ms = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++)   /* sums 2k and 2k + 1, one int16 pair in every 32-bit lane */
        ms = ACC_MADD16(ms, _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)mn[k])),
                        _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(bs), _mm256_set1_epi32(k)));
    return ms;
}

/* Row a's block as a tile takes it: its eight scales (bytes 0-7) and mins (8-15), and its
 * quants as 32 words, word k holding quants 8k..8k+7 as nibble pairs (step k % 8 of the
 * 64-quant group k / 8) */
static void q4_K_row_parts(const block_q4_K *a, uint8_t sm[16], uint32_t words[32]) {
    uint32_t u[4];
    k4_unpack(a->scales, u);
    memcpy(sm, u, 16);
    memcpy(words, a->qs, 128);
}

#ifndef LL_AVX512   /* AVX-512 has its own Q4_K layout, below */
static size_t pack_q4_K_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / QK_K;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q4_K_x8 *p = (block_q4_K_x8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_q4_K *a = (const block_q4_K *)((const uint8_t *)w + (size_t)r * stride) + i;
                uint8_t sm[16];
                uint32_t words[32];
                q4_K_row_parts(a, sm, words);
                p->d[r] = a->d;
                p->dmin[r] = a->dmin;
                for (int sb = 0; sb < 8; sb++) { p->sc[sb][r] = sm[sb]; p->mn[sb / 2][r][sb % 2] = sm[8 + sb]; }
                for (int k = 0; k < 32; k++) memcpy(p->qs[k / 8][k % 8][r], &words[k], 4);
            }
        }
    return (size_t)nb * sizeof(block_q4_K_x8);
}

/* The tile against T tokens. Per row and token the integers are those of dot_q4_K (exact,
 * any order) and the floats the same two fused multiply-adds per block, in block order. */
static inline __attribute__((always_inline)) void q4_K_packed_tile(int64_t n, float *out, size_t out_stride,
                                                                   const block_q4_K_x8 *p, const void *x,
                                                                   size_t x_stride, const int T) {
    const int ahead = stream_ahead();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[4], accm[4];
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[4];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
        __m256i tot[4];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) tot[t] = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            #pragma GCC unroll 5
            for (int l = 0; l < 5; l++)   /* the whole 1152-byte block, a quarter per j */
                prefetch_tile((const char *)p + 64 * (5 * j + l), ahead, T);
            __m256i lo[4], hi[4];   /* the two sub-blocks of group j, per token */
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)p->qs[j][g]);
                ONE_LOAD(q);
                __m256i ql = _mm256_and_si256(q, m4), qh = HIGH_NIBBLES(q, m4);
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    int32_t yl, yh;
                    memcpy(&yl, y[t]->qs + 64 * j + 4 * g, 4);
                    memcpy(&yh, y[t]->qs + 64 * j + 32 + 4 * g, 4);
#ifdef NIBBLE_SUMS16
                    lo[t] = _mm256_add_epi16(lo[t], mul_u8_i8_pairs(ql, _mm256_set1_epi32(yl)));
                    hi[t] = _mm256_add_epi16(hi[t], mul_u8_i8_pairs(qh, _mm256_set1_epi32(yh)));
#else
                    lo[t] = ACC_DOT_U8I8_4(lo[t], ql, _mm256_set1_epi32(yl));
                    hi[t] = ACC_DOT_U8I8_4(hi[t], qh, _mm256_set1_epi32(yh));
#endif
                }
            }
            __m256i sl = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p->sc[2 * j]));
            __m256i sh = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p->sc[2 * j + 1]));
#ifdef NIBBLE_SUMS16
            /* each row's scale in both words of its lane: one vpmaddwd scales and adds the pair */
            sl = _mm256_or_si256(sl, _mm256_slli_epi32(sl, 16));
            sh = _mm256_or_si256(sh, _mm256_slli_epi32(sh, 16));
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                tot[t] = _mm256_add_epi32(tot[t], _mm256_add_epi32(_mm256_madd_epi16(lo[t], sl), _mm256_madd_epi16(hi[t], sh)));
#else
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                tot[t] = _mm256_add_epi32(tot[t], _mm256_add_epi32(_mm256_mullo_epi32(lo[t], sl), _mm256_mullo_epi32(hi[t], sh)));
#endif
        }
        __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        __m256 xdmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->dmin));
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            __m256i ms = mins_by_row(p->mn, y[t]);   /* the mins against the 32-quant activation sums */
            __m256 yd = _mm256_set1_ps(y[t]->d);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot[t]), _mm256_mul_ps(yd, xd), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(yd, xdmin), accm[t]);
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + (size_t)t * out_stride, _mm256_sub_ps(acc[t], accm[t]));
}

static void dot_q4_K_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
    if (n_tok == 4) { q4_K_packed_tile(n, out, out_stride, tile, x, x_stride, 4); return; }
    for (int t = 0; t < n_tok; t++)
        q4_K_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1);
}
#else
/* Q4_K for 512-bit registers (block_q4_K_r8): each row's quants eight bytes at a time, so
 * one 64-byte load holds two 4-byte steps of all eight rows, a row's two in adjacent lanes,
 * and one 8-byte broadcast gives each lane its four activations. Half the instructions of
 * the 256-bit tile above for the same bytes, which bound it: one thread from L2 streamed 75
 * GB/s through it, 114 through this, where a core must stream 43 to keep up with its share
 * of this host's ~86 GB/s. A lane's sums over a group's four step pairs fit int16, so lo
 * and hi/16 go into one dpwssd against the row's two sub-block scales; the groups summed
 * and a row's two lanes added give the integers of dot_q4_K, exactly; its float steps
 * follow, as in q4_K_packed_tile. It serves prompts too (four tokens a pass), where the
 * 16-row pair of 256-bit tiles it replaces read two streams: llama-3.2-1b Q4_K_M pp512
 * 371-372 -> 377-381 t/s in three alternations. */
typedef struct {
    uint16_t d[8], dmin[8];     /* per row */
    uint8_t sc2[4][8][2];       /* [64-quant group j][row]: scales of sub-blocks 2j, 2j + 1 */
    uint8_t mn[4][8][2];        /* [sub-block pair][row][2] 6-bit mins, as in block_q4_K_x8 */
    uint8_t qs[4][4][8][8];     /* [group j][step pair][row]: bytes 32j+8s.. of the row */
} block_q4_K_r8;

static size_t pack_q4_K_r8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / QK_K;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q4_K_r8 *p = (block_q4_K_r8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_q4_K *a = (const block_q4_K *)((const uint8_t *)w + (size_t)r * stride) + i;
                uint8_t sm[16];
                uint32_t words[32];
                q4_K_row_parts(a, sm, words);
                p->d[r] = a->d;
                p->dmin[r] = a->dmin;
                for (int sb = 0; sb < 8; sb++) { p->sc2[sb / 2][r][sb % 2] = sm[sb]; p->mn[sb / 2][r][sb % 2] = sm[8 + sb]; }
                for (int k = 0; k < 32; k++) memcpy(&p->qs[k / 8][k % 8 / 2][r][4 * (k % 2)], &words[k], 4);
            }
        }
    return (size_t)nb * sizeof(block_q4_K_r8);
}

/* The permutation that puts 32-bit element r of eight in lanes 2r and 2r + 1: a row's
 * value for both of its lanes in the r8 tiles */
static inline __m512i each_twice(void) { return _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0); }

/* Group j's scales as int16 pairs (sub-block 2j, 2j + 1) by lane: each row's twice */
static inline __m512i scale_pairs_by_lane(const uint8_t sc[8][2]) {
    __m256i pairs = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)sc));
    return _mm512_permutexvar_epi32(each_twice(), _mm512_castsi256_si512(pairs));
}

static inline __attribute__((always_inline)) void q4_K_r8_tile(int64_t n, float *out, size_t out_stride,
                                                               const block_q4_K_r8 *p, const void *x, size_t x_stride,
                                                               const int T) {
    const int ahead = stream_ahead();
    const __m512i m4 = _mm512_set1_epi8(0x0F), lo16 = _mm512_set1_epi32(0xFFFF);
    __m256 acc[4], accm[4];
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[4];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
        __m512i tot[4];   /* per lane: row r's even steps in lane 2r, its odd ones in 2r+1 */
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) tot[t] = _mm512_setzero_si512();
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            /* the whole 1184-byte block, five lines a quarter: one before the quarter and one
             * with each of its four loads. Five in a burst before the loads instead, session
             * 32, each token against a read pass just before it, two threads: llama-3.2-1b
             * Q4_K_M 0.932 / 1.064 / 1.098 / 1.148 / 0.927 / 0.917 of the pass against 0.993 /
             * 1.138 / 1.094 / 1.160 / 0.906 / 0.944, Qwen3-Next (4 layers) 0.886 / 0.881 / 0.817
             * against 0.896 / 0.901 / 0.862 (its tokens 61.1 / 61.9 / 63.0 -> 62.5 / 62.8 / 65.5
             * GB/s at the same passes); a microbenchmark streaming one 384 MB Q4_K matrix on
             * two threads, the variants alternating in one process: this way faster in 48 of
             * 66 runs, medians +3-7%. (Spread the same way, the Q6_K tile's streamed 20% faster
             * there, but tokens of a Q6_K file lost 0.959 / 0.994 -> 0.886 / 0.915: it keeps
             * its bursts.) */
            prefetch_tile((const char *)p + 64 * (5 * j + 4), ahead, T);
            __m512i lo[4], hi[4];
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm512_setzero_si512();
            #pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {   /* steps 2g and 2g+1 */
                prefetch_tile((const char *)p + 64 * (5 * j + g), ahead, T);
                __m512i q = _mm512_loadu_si512(p->qs[j][g]);
                ONE_LOAD(q);
                __m512i ql = _mm512_and_si512(q, m4), qh = _mm512_andnot_si512(m4, q);   /* high nibbles x 16 */
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    int64_t yl, yh;
                    memcpy(&yl, y[t]->qs + 64 * j + 8 * g, 8);
                    memcpy(&yh, y[t]->qs + 64 * j + 32 + 8 * g, 8);
                    lo[t] = _mm512_dpbusd_epi32(lo[t], ql, _mm512_set1_epi64(yl));
                    hi[t] = _mm512_dpbusd_epi32(hi[t], qh, _mm512_set1_epi64(yh));
                }
            }
            /* a lane's sums over four steps fit int16 (|16 * 15 * 128| < 2^15): lo in the low
             * half, hi / 16 in the high, one dpwssd against the scale pair */
            __m512i scp = scale_pairs_by_lane(p->sc2[j]);
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                tot[t] = _mm512_dpwssd_epi32(tot[t], _mm512_ternarylogic_epi32(lo[t], _mm512_slli_epi32(hi[t], 12), lo16, 0xE4), scp);
        }
        __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        __m256 xdmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->dmin));
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            /* a row's two lanes added, the rows packed into eight lanes */
            __m256i rows = _mm512_cvtepi64_epi32(_mm512_add_epi32(tot[t], _mm512_srli_epi64(tot[t], 32)));
            __m256i ms = mins_by_row(p->mn, y[t]);
            __m256 yd = _mm256_set1_ps(y[t]->d);
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), _mm256_mul_ps(yd, xd), acc[t]);
            accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(yd, xdmin), accm[t]);
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + (size_t)t * out_stride, _mm256_sub_ps(acc[t], accm[t]));
}

static void dot_q4_K_r8(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride, int n_tok) {
    if (n_tok == 4) { q4_K_r8_tile(n, out, out_stride, tile, x, x_stride, 4); return; }
    for (int t = 0; t < n_tok; t++)
        q4_K_r8_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1);
}
#endif

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
            sumi = ACC_MADD16(sumi, pl, _mm256_set1_epi16(sc[2 * j]));
            sumi = ACC_MADD16(sumi, ph, _mm256_set1_epi16(sc[2 * j + 1]));
        }
        summs = fmaf(dmin, (float)msum, summs);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum8(acc) + summs;
}

/* The 128 six-bit quants of half h of a Q6_K block, as four vectors of unsigned bytes
 * (0..63) in the order of the activations they multiply. */
static inline void q6_K_unpack_half(const block_q6_K *a, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    __m256i l0 = _mm256_loadu_si256((const __m256i *)(a->ql + 64 * h));
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(a->ql + 64 * h + 32));
    __m256i hb = _mm256_loadu_si256((const __m256i *)(a->qh + 32 * h));
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4));
}

/* The eight int16 scale vectors of a Q6_K block, in the order of q6_K_unpack_half's
 * quants: vector 4h+t has scales[8h+2t] in its low half and scales[8h+2t+1] in its high. */
static inline void q6_K_scales(const int8_t *s, __m256i sc[8]) {
    for (int h = 0; h < 2; h++) {
        __m256i v = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(s + 8 * h))));
        for (int t = 0; t < 4; t++)
            sc[4 * h + t] = _mm256_shuffle_epi8(v, _mm256_set_m128i(_mm_set1_epi16((short)((4 * t + 2) | (4 * t + 3) << 8)),
                                                                    _mm_set1_epi16((short)((4 * t) | (4 * t + 1) << 8))));
    }
}

static void dot_q6_K(int64_t n, float *s, const void *w, const void *x) {
    const int ahead = stream_ahead();
    const block_q6_K *a = w; const block_q8_K *b = x;
    const __m256i m32 = _mm256_set1_epi8(32);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = b[i].d * LL_FP16(a[i].d);
        prefetch_ahead(&a[i], ahead);
        prefetch_ahead((const char *)&a[i] + 64, ahead);
        prefetch_ahead((const char *)&a[i] + 128, ahead);
        prefetch_ahead((const char *)&a[i] + 192, ahead);
        __m256i q[8], sc[8], s0 = _mm256_setzero_si256(), s1 = s0;   /* two chains: halves the latency */
        q6_K_unpack_half(&a[i], 0, q);
        q6_K_unpack_half(&a[i], 1, q + 4);
        q6_K_scales(a[i].scales, sc);
        for (int g = 0; g < 8; g += 2) {
            __m256i y0 = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * g));
            __m256i y1 = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * g + 32));
            s0 = ACC_MADD16(s0, _mm256_sub_epi16(mul_u8_i8_pairs(q[g], y0), mul_u8_i8_pairs(m32, y0)), sc[g]);
            s1 = ACC_MADD16(s1, _mm256_sub_epi16(mul_u8_i8_pairs(q[g + 1], y1), mul_u8_i8_pairs(m32, y1)), sc[g + 1]);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
    }
    *s = hsum8(acc);
}

/* Eight Q6_K rows against four activation rows (prefill). Each (row, token) keeps the
 * 8-lane float accumulator of dot_q6_K and adds d·sumi per block, blocks in order, exactly
 * as it does. Rows are the outer loop so the four token accumulators stay in registers;
 * the 32·y pair sums are computed once for all rows, each weight block unpacked once for
 * the four tokens. */
#define Q6K_MAX_BLOCKS 64     /* rows up to 16384 elements */
static void dot_q6_K_x8_t4(int64_t n, float *out, size_t out_stride, const void *w, size_t stride,
                           const void *x, size_t x_stride) {
    const uint8_t *wb = w;
    const __m256i m32 = _mm256_set1_epi8(32);
    int64_t nb = n / QK_K;
    if (nb > Q6K_MAX_BLOCKS) {
        x8_t4_by_rows(dot_q6_K, n, out, out_stride, w, stride, x, x_stride);
        return;
    }
    const block_q8_K *y[4];
    for (int t = 0; t < 4; t++) y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride);
    static _Thread_local __m256i q8s[Q6K_MAX_BLOCKS][4][8];   /* 32·y pair sums per block, token, 32-group */
    for (int64_t i = 0; i < nb; i++)
        for (int t = 0; t < 4; t++)
            for (int g = 0; g < 8; g++) q8s[i][t][g] = mul_u8_i8_pairs(m32, _mm256_loadu_si256((const __m256i *)(y[t][i].qs + 32 * g)));
    for (int r = 0; r < 8; r++) {
        const block_q6_K *a = (const block_q6_K *)(wb + (size_t)r * stride);
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t i = 0; i < nb; i++) {
            __m256i q[8], sc[8];
            q6_K_unpack_half(&a[i], 0, q);
            q6_K_unpack_half(&a[i], 1, q + 4);
            q6_K_scales(a[i].scales, sc);
            float xd = LL_FP16(a[i].d);
            /* the four tokens' integer sums side by side: four independent chains */
            __m256i sumi[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int g = 0; g < 8; g++)
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    __m256i yv = _mm256_loadu_si256((const __m256i *)(y[t][i].qs + 32 * g));
                    sumi[t] = ACC_MADD16(sumi[t], _mm256_sub_epi16(mul_u8_i8_pairs(q[g], yv), q8s[i][t][g]), sc[g]);
                }
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(y[t][i].d * xd), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
        }
        for (int t = 0; t < 4; t++) out[(size_t)t * out_stride + r] = hsum8(acc[t]);
    }
}

#ifndef LL_AVX512   /* AVX-512 has its own Q6_K layout, below */
/* Q6_K repacked: eight rows interleaved four bytes at a time, as for Q4_K. A step (half h,
 * k = 0..7) loads ql[64h+4k..], ql[64h+32+4k..] and qh[32h+4k..] of the eight rows: four
 * vectors v = 0..3 of quants 128h+32v+4k.. , four per row. In dot_q6_K those four quants
 * are lane k of 32-quant group 4h+v, so the tile keeps eight accumulators per token, one
 * per dot_q6_K lane, each holding the eight rows: the same integers, the same fused
 * multiply-adds, the same final hsum8, for all eight rows at once. */
typedef struct {
    uint16_t d[8];                /* per row */
    int8_t sc[16][8];             /* [sub-block][row] */
    uint8_t ql[2][8][2][8][4];    /* [half][step][ql bytes 0-31 | 32-63][row] */
    uint8_t qh[2][8][8][4];       /* [half][step][row] */
} block_q6_K_x8;

static size_t pack_q6_K_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / QK_K;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q6_K_x8 *p = (block_q6_K_x8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_q6_K *a = (const block_q6_K *)((const uint8_t *)w + (size_t)r * stride) + i;
                p->d[r] = a->d;
                for (int sb = 0; sb < 16; sb++) p->sc[sb][r] = a->scales[sb];
                for (int h = 0; h < 2; h++)
                    for (int k = 0; k < 8; k++) {
                        memcpy(p->ql[h][k][0][r], a->ql + 64 * h + 4 * k, 4);
                        memcpy(p->ql[h][k][1][r], a->ql + 64 * h + 32 + 4 * k, 4);
                        memcpy(p->qh[h][k][r], a->qh + 32 * h + 4 * k, 4);
                    }
            }
        }
    return (size_t)nb * sizeof(block_q6_K_x8);
}

/* The tile against T tokens. Per step and group: maddubs of the quants with four broadcast
 * activations gives each row's two int16 pair sums, from which the 32·y pair sums come off
 * (the -32 of every quant, as in dot_q6_K), and one madd with the row's scale (duplicated
 * into both int16 halves) adds them to the row's lane. */
static inline __attribute__((always_inline)) void q6_K_packed_tile(int64_t n, float *out, size_t out_stride,
                                                                   const block_q6_K_x8 *p, const void *x,
                                                                   size_t x_stride, const int T) {
    const int ahead = stream_ahead();
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256 acc[4][8];
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 8; k++) acc[t][k] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[4];
        __m256 d[4];
        __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
            d[t] = _mm256_mul_ps(_mm256_set1_ps(y[t]->d), xd);
        }
        const __m256i m32 = _mm256_set1_epi8(32);
        __m256i ofs[4][8];   /* 32·y pair sums of each token, by 32-quant group */
        __m256i sc[16];      /* each sub-block's row scales as int16 pairs (s, s) */
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            for (int g = 0; g < 8; g++) ofs[t][g] = mul_u8_i8_pairs(m32, _mm256_loadu_si256((const __m256i *)(y[t]->qs + 32 * g)));
        for (int s = 0; s < 16; s++)
            sc[s] = scale_pairs_i8(p->sc[s]);
        #pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            #pragma GCC unroll 4
            for (int l = 0; l < 4; l++)   /* the whole 1680-byte block: 27 lines, 4 per step */
                prefetch_ahead((const char *)p + 64 * (4 * k + l), ahead);
            __m256i lane[4];   /* lane k of dot_q6_K's sum, for the eight rows */
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) lane[t] = _mm256_setzero_si256();
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i A = _mm256_loadu_si256((const __m256i *)p->ql[h][k][0]);
                __m256i B = _mm256_loadu_si256((const __m256i *)p->ql[h][k][1]);
                __m256i H = _mm256_loadu_si256((const __m256i *)p->qh[h][k]);
                __m256i v[4];
                v[0] = _mm256_or_si256(_mm256_and_si256(A, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
                v[1] = _mm256_or_si256(_mm256_and_si256(B, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
                v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4), _mm256_and_si256(H, m30));
                v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
                #pragma GCC unroll 4
                for (int j = 0; j < 4; j++) {
                    int g = 4 * h + j;
                    #pragma GCC unroll 4
                    for (int t = 0; t < T; t++) {
                        int32_t yq, oq;
                        memcpy(&yq, y[t]->qs + 32 * g + 4 * k, 4);
                        memcpy(&oq, (const int16_t *)&ofs[t][g] + 2 * (k % 4) + 8 * (k / 4), 4);
                        __m256i pr = _mm256_sub_epi16(mul_u8_i8_pairs(v[j], _mm256_set1_epi32(yq)), _mm256_set1_epi32(oq));
                        lane[t] = ACC_MADD16(lane[t], pr, sc[2 * g + k / 4]);
                    }
                }
            }
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) acc[t][k] = _mm256_fmadd_ps(d[t], _mm256_cvtepi32_ps(lane[t]), acc[t][k]);
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) {   /* hsum8 of each row's eight lanes */
        __m256 r = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][4]), _mm256_add_ps(acc[t][2], acc[t][6])),
                                 _mm256_add_ps(_mm256_add_ps(acc[t][1], acc[t][5]), _mm256_add_ps(acc[t][3], acc[t][7])));
        _mm256_storeu_ps(out + (size_t)t * out_stride, r);
    }
}

static void dot_q6_K_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
    /* Four tokens a pass unpack each step's quants once for all four: their 32 float
     * accumulators live in memory, as the two-token pass's 16 did, and the unpacking was a
     * third of that pass's work (pp512 68.0-68.5 -> 75.6-76.5 t/s on llama-3.2-1b Q6_K,
     * alternating) */
    int t = 0;
    for (; t + 4 <= n_tok; t += 4)
        q6_K_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 4);
    for (; t + 2 <= n_tok; t += 2)
        q6_K_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 2);
    for (; t < n_tok; t++)
        q6_K_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1);
}
#endif

#ifdef LL_AVX512
/* Q6_K for 512-bit registers: the eight rows of a tile block by block, each row's quants
 * in their stored order, a row's ql, qh and scales one after another (the order the kernel
 * reads them), the eight d last. Gathered by field instead (eight rows' ql, then their qh,
 * then their scales), a block was read from three places at once: one token, one thread,
 * a Qwen3-Next head (Q6_K, 2048 x 151936) from memory streamed at 34.7-35.6 GB/s, 38.0-38.7
 * this way, and a microbenchmark gained 4-12% in four alternations, the same from L2 (a
 * 64-byte load now starts on a 16-byte boundary, and that cost nothing measurable); the d
 * first instead of last was no faster. A row is then worked like dot_q6_K, two 32-quant groups a
 * register: ql[64h..64h+63] is groups 4h and 4h+1 in its low nibbles and 4h+2, 4h+3 in its
 * high ones, qh[32h..] gives both halves their top bits (shifted by 4 and 2, or 0 and 2),
 * and the activations of two groups are one 64-byte load: no broadcasts. Each lane's sum
 * Σ (q - 32)·y over four quants comes from one dpbusd (the -32·Σy start precomputed per
 * block and token), two groups' sums are paired into int16 halves (groups 4h/4h+2 in the
 * low 256 bits, 4h+1/4h+3 in the high), one dpwssd multiplies them by their sub-block
 * scales, and the two halves added give dot_q6_K's lane integers exactly; its float steps
 * follow. The blocks of a tile stream in order, one read of each byte. */
typedef struct {
    struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t sc[QK_K / 16]; } row[8];
    uint16_t d[8];                /* [row] */
} block_q6_K_r8;

static size_t pack_q6_K_r8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / QK_K;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q6_K_r8 *p = (block_q6_K_r8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_q6_K *a = (const block_q6_K *)((const uint8_t *)w + (size_t)r * stride) + i;
                memcpy(p->row[r].ql, a->ql, sizeof a->ql);
                memcpy(p->row[r].qh, a->qh, sizeof a->qh);
                memcpy(p->row[r].sc, a->scales, sizeof a->scales);
                p->d[r] = a->d;
            }
        }
    return (size_t)nb * sizeof(block_q6_K_r8);
}

/* vgf2p8affineqb: each byte of x through the 8x8 bit matrix a (the qword of its lane; byte
 * 7 - i of it picks the input bits whose parity makes output bit i). Written as asm so the
 * file needs no -mgfni, which would let the compiler use it anywhere: the kernels that do
 * are chosen only where ll_cpu_has_gfni. */
static inline __m512i gf_affine(__m512i x, __m512i a) {
    __m512i r;
    __asm__("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(x), "v"(a));
    return r;
}
/* matrix rows: input bit b to output bit 4 (byte 3), to output bit 5 (byte 2), and input
 * bits 4-7 to output bits 0-3 (bytes 7-4); a matrix is the or of its rows */
#define GF_BIT_TO_4(b) ((1ull << (b)) << 24)
#define GF_BIT_TO_5(b) ((1ull << (b)) << 16)
#define GF_HIGH_NIBBLE_DOWN 0x1020408000000000ull

/* 64-bit matrices a half: a in the low 256 bits, b in the high */
static inline __m512i gf_halves(unsigned long long a, unsigned long long b) {
    return _mm512_inserti64x4(_mm512_set1_epi64((long long)a), _mm256_set1_epi64x((long long)b), 1);
}

/* Half h of a Q6_K row as two vectors of quants (0..63): v01 the low nibbles of L with their
 * top bits from H (qh bits 0-1 for group 4h in the low 256 bits, 2-3 for 4h+1 in the high),
 * v23 the high nibbles with bits 4-5 (group 4h+2) or 6-7 (4h+3). Without GFNI: shifts
 * by lane and masks (seven instructions); with it (gf), affine steps that move the bits
 * and clear the rest, joined by one ternary step and one or (five). Same bytes. */
static inline __attribute__((always_inline)) void q6_K_quants(__m512i L, __m512i H, const int gf, __m512i *v01, __m512i *v23) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    if (gf) {
        *v01 = _mm512_ternarylogic_epi32(
            L, gf_affine(H, gf_halves(GF_BIT_TO_4(0) | GF_BIT_TO_5(1), GF_BIT_TO_4(2) | GF_BIT_TO_5(3))), m4, 0xE4);
        *v23 = _mm512_or_si512(gf_affine(L, _mm512_set1_epi64((long long)GF_HIGH_NIBBLE_DOWN)),
                               gf_affine(H, gf_halves(GF_BIT_TO_4(4) | GF_BIT_TO_5(5), GF_BIT_TO_4(6) | GF_BIT_TO_5(7))));
        return;
    }
    const __m512i up42 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);   /* qh shifts, groups 4h | 4h+1 */
    const __m512i dn02 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);   /* and 4h+2 | 4h+3 */
    *v01 = _mm512_ternarylogic_epi32(_mm512_and_si512(L, m4), _mm512_sllv_epi16(H, up42), m30, 0xF8);
    *v23 = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), _mm512_srlv_epi16(H, dn02), m30, 0xF8);
}

static inline __attribute__((always_inline)) void q6_K_r8_tile(int64_t n, float *out, size_t out_stride,
                                                               const block_q6_K_r8 *p, const void *x, size_t x_stride,
                                                               const int T, const int gf) {
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    /* scale words by lane: low half lane m pairs sub-blocks (8h + m/4, 8h+4 + m/4), high half
     * (8h+2 + m/4, 8h+6 + m/4), for half h */
    static const int16_t scale_word[2][32] = {
        {0, 4, 0, 4, 0, 4, 0, 4, 1, 5, 1, 5, 1, 5, 1, 5, 2, 6, 2, 6, 2, 6, 2, 6, 3, 7, 3, 7, 3, 7, 3, 7},
        {8, 12, 8, 12, 8, 12, 8, 12, 9, 13, 9, 13, 9, 13, 9, 13, 10, 14, 10, 14, 10, 14, 10, 14, 11, 15, 11, 15, 11, 15, 11, 15}};
    const __m512i sidx[2] = {_mm512_loadu_si512(scale_word[0]), _mm512_loadu_si512(scale_word[1])};
    const int q6k_ahead = stream_ahead_far();
    __m256 acc[2][8];
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++)
        for (int r = 0; r < 8; r++) acc[t][r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[2];
        __m256 d[2];
        __m512i nofs[2][4];   /* [token][half, pair]: -32·Σy of four, groups (4h, 4h+1) or (4h+2, 4h+3) */
        const __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
            d[t] = _mm256_mul_ps(_mm256_set1_ps(y[t]->d), xd);
            #pragma GCC unroll 4
            for (int q = 0; q < 4; q++)
                nofs[t][q] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                              _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(32), _mm512_loadu_si512(y[t]->qs + 64 * q)));
        }
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            #pragma GCC unroll 4
            for (int l = 0; l < 4; l++)   /* the 1680-byte block: 27 lines over the rows */
                if (4 * r + l < 27) prefetch_tile((const char *)p + 64 * (4 * r + l), q6k_ahead, T);
            const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p->row[r].sc));
            __m512i lane[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512i L = _mm512_loadu_si512(p->row[r].ql + 64 * h);
                ONE_LOAD(L);
                __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p->row[r].qh + 32 * h)));
                __m512i v01, v23;
                q6_K_quants(L, H, gf, &v01, &v23);
                __m512i scp = _mm512_permutexvar_epi16(sidx[h], _mm512_castsi256_si512(s16));
                #pragma GCC unroll 2
                for (int t = 0; t < T; t++) {
                    __m512i d01 = _mm512_dpbusd_epi32(nofs[t][2 * h], v01, _mm512_loadu_si512(y[t]->qs + 128 * h));
                    __m512i d23 = _mm512_dpbusd_epi32(nofs[t][2 * h + 1], v23, _mm512_loadu_si512(y[t]->qs + 128 * h + 64));
                    __m512i pr = _mm512_ternarylogic_epi32(d01, _mm512_slli_epi32(d23, 16), lo16, 0xE4);
                    lane[t] = _mm512_dpwssd_epi32(lane[t], pr, scp);
                }
            }
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) {
                __m256i sumi = _mm256_add_epi32(_mm512_castsi512_si256(lane[t]), _mm512_extracti64x4_epi64(lane[t], 1));
                acc[t][r] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d[t], _mm256_set1_epi32(r)), _mm256_cvtepi32_ps(sumi), acc[t][r]);
            }
        }
    }
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++)
        for (int r = 0; r < 8; r++) out[(size_t)t * out_stride + r] = hsum8(acc[t][r]);
}

static inline __attribute__((always_inline)) void q6_K_r8_tokens(int64_t n, float *out, size_t out_stride, const void *tile,
                                                                 const void *x, size_t x_stride, int n_tok, const int gf) {
    int t = 0;
    for (; t + 2 <= n_tok; t += 2)
        q6_K_r8_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 2, gf);
    for (; t < n_tok; t++)
        q6_K_r8_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1, gf);
}
static void dot_q6_K_r8(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride, int n_tok) {
    q6_K_r8_tokens(n, out, out_stride, tile, x, x_stride, n_tok, 0);
}
static void dot_q6_K_r8_gfni(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                             int n_tok) {
    q6_K_r8_tokens(n, out, out_stride, tile, x, x_stride, n_tok, 1);
}
#endif

#ifdef LL_AVX512
/* Two adjacent packed tiles (rows 0-7 in the first, 8-15 in the next, n/QK_K blocks later)
 * in 512-bit vectors, one row per lane: each instruction does the work of two 8-row steps
 * (full-width on CPUs with 512-bit datapaths). Every row gets the operations its lane gets
 * in the 8-row kernels above, so the same bits. They serve prompts only (matmul.c gives
 * one token the 8-row kernels, which stream from memory faster), and they prefetch
 * nothing: each 4-token step after an item's first reads the tiles again from L2. (Q4_K
 * had one too, replaced by its own one-stream layout, block_q4_K_r8: its prefetches, made
 * to stay and aimed along the pair's two streams, had not sped a llama-3.2-1b Q4_K_M pp512,
 * and one token through it streamed 0.58-0.75 of a read pass against 0.81-0.93 through the
 * 8-row tile.) */
static inline __m512i load_pair(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)), _mm256_loadu_si256((const __m256i *)b), 1);
}
static inline __m128i load_pair64(const void *a, const void *b) {
    return _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)a), _mm_loadl_epi64((const __m128i *)b));
}
static inline __m512 load_pair_f16(const uint16_t *a, const uint16_t *b) {
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                                   _mm_loadu_si128((const __m128i *)b), 1));
}

/* Two adjacent IQ4_XS tiles (16 rows, one per 32-bit lane of a 512-bit vector) against T
 * (1..4) tokens: each row gets its lane's operations in iq4_xs_packed_tile, so the same
 * bits. There is no 512-bit vpsignb: the activations are negated under a mask where the
 * looked-up value is negative (an index below 8: the table is sorted). */
static inline __attribute__((always_inline)) void iq4_xs_packed_tile16(int64_t n, float *out, size_t out_stride,
                                                                       const block_iq4_xs_x8 *pa, const void *x,
                                                                       size_t x_stride, const int T) {
    const block_iq4_xs_x8 *pb = pa + n / QK_K;
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ll_kvalues_iq4nl));
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    __m512 acc[4][8];
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++)
        for (int m = 0; m < 8; m++) acc[t][m] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; i++, pa++, pb++) {
        const block_q8_K *y[4];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
        __m512 d = load_pair_f16(pa->d, pb->d);
        __m512i ls[8];
        #pragma GCC unroll 8
        for (int sb = 0; sb < 8; sb++) {
            __m512i v = _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)pa->ls[sb]),
                                                                _mm_loadl_epi64((const __m128i *)pb->ls[sb])));
            ls[sb] = _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(v, 16));
        }
        #pragma GCC unroll 4
        for (int g = 0; g < 4; g++) {
            __m512i lo[4], hi[4];
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm512_setzero_si512();
            #pragma GCC unroll 8
            for (int sb = 0; sb < 8; sb++) {
                __m512i q = load_pair(pa->qs[sb][g], pb->qs[sb][g]);
                __m512i il = _mm512_and_si512(q, m4), ih = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
                __m512i al = _mm512_abs_epi8(_mm512_shuffle_epi8(table, il)), ah = _mm512_abs_epi8(_mm512_shuffle_epi8(table, ih));
                __mmask64 nl = _mm512_cmplt_epu8_mask(il, eight), nh = _mm512_cmplt_epu8_mask(ih, eight);
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    int32_t yl, yh;
                    memcpy(&yl, y[t]->qs + 32 * sb + 4 * g, 4);
                    memcpy(&yh, y[t]->qs + 32 * sb + 16 + 4 * g, 4);
                    __m512i bl = _mm512_set1_epi32(yl), bh = _mm512_set1_epi32(yh);
                    bl = _mm512_mask_sub_epi8(bl, nl, _mm512_setzero_si512(), bl);
                    bh = _mm512_mask_sub_epi8(bh, nh, _mm512_setzero_si512(), bh);
                    lo[t] = _mm512_dpwssd_epi32(lo[t], _mm512_maddubs_epi16(al, bl), ls[sb]);
                    hi[t] = _mm512_dpwssd_epi32(hi[t], _mm512_maddubs_epi16(ah, bh), ls[sb]);
                }
            }
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                __m512 dt = _mm512_mul_ps(d, _mm512_set1_ps(y[t]->d));
                acc[t][g] = _mm512_fmadd_ps(dt, _mm512_cvtepi32_ps(lo[t]), acc[t][g]);
                acc[t][4 + g] = _mm512_fmadd_ps(dt, _mm512_cvtepi32_ps(hi[t]), acc[t][4 + g]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        __m512 r = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][4]), _mm512_add_ps(acc[t][2], acc[t][6])),
                                 _mm512_add_ps(_mm512_add_ps(acc[t][1], acc[t][5]), _mm512_add_ps(acc[t][3], acc[t][7])));
        _mm512_storeu_ps(out + (size_t)t * out_stride, r);
    }
}

static void dot_iq4_xs_packed2(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                               int n_tok) {
    switch (n_tok) {
    case 4: iq4_xs_packed_tile16(n, out, out_stride, tile, x, x_stride, 4); break;
    case 3: iq4_xs_packed_tile16(n, out, out_stride, tile, x, x_stride, 3); break;
    case 2: iq4_xs_packed_tile16(n, out, out_stride, tile, x, x_stride, 2); break;
    default: iq4_xs_packed_tile16(n, out, out_stride, tile, x, x_stride, 1); break;
    }
}
#endif

#ifdef LL_AVX512
/* hsum8 of each half of a 512-bit accumulator holding a row pair (low half row r, high
 * half row r + 1): out[0] and out[1] */
static inline void store_pair_sums(float *out, __m512 acc) {
    out[0] = hsum8(_mm512_castps512_ps256(acc));
    out[1] = hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1)));
}
#endif

/* Eight Q8_0 rows against four activation rows (prefill): each (row, token) keeps the
 * 8-lane accumulator of dot_q8_0 (one fma of d_x·d_y per block, blocks in order). Rows are
 * the outer loop so the four token accumulators stay in registers across the blocks; each
 * weight block is loaded and made non-negative once for the four tokens. */
#define Q8_0_MAX_BLOCKS 512   /* rows up to 16384 elements */
static inline __attribute__((always_inline)) void q8_family_x8_t4(int type, ll_vec_dot_fn dot, int64_t n, float *out,
                                                                  size_t out_stride, const void *w, size_t stride, size_t bs,
                                                                  const void *x, size_t x_stride) {
    const uint8_t *wb = w;
    int64_t nb = n / 32;
    if (nb > Q8_0_MAX_BLOCKS) {   /* very long rows: the single-row kernel */
        x8_t4_by_rows(dot, n, out, out_stride, w, stride, x, x_stride);
        return;
    }
    const block_q8_0 *y0 = x, *y1 = (const block_q8_0 *)((const uint8_t *)x + x_stride),
                     *y2 = (const block_q8_0 *)((const uint8_t *)x + 2 * x_stride), *y3 = (const block_q8_0 *)((const uint8_t *)x + 3 * x_stride);
    float yd[4][Q8_0_MAX_BLOCKS];
    for (int64_t i = 0; i < nb; i++) { yd[0][i] = LL_FP16(y0[i].d); yd[1][i] = LL_FP16(y1[i].d); yd[2][i] = LL_FP16(y2[i].d); yd[3][i] = LL_FP16(y3[i].d); }
#ifdef LL_AVX512
    /* rows two at a time in 512-bit vectors (row r in the low half, r+1 in the high): each
     * half gets the 256-bit operations below, so each row keeps its bits */
    for (int r = 0; r < 8; r += 2) {
        const uint8_t *row0 = wb + (size_t)r * stride, *row1 = row0 + stride;
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        const block_q8_0 *yt[4] = {y0, y1, y2, y3};
        for (int64_t i = 0; i < nb; i++) {
            float xd0, xd1;
            __m256i w0 = q8_block_quants(type, row0, bs, i, &xd0), w1 = q8_block_quants(type, row1, bs, i, &xd1);
            __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1), aw = _mm512_abs_epi8(wv);
            __mmask64 neg = _mm512_movepi8_mask(wv);   /* sign_epi8: y negated where w < 0 (w = 0 has |w| = 0) */
            __m512 xd = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(xd0), _mm512_set1_ps(xd1));
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)yt[t][i].qs));
                __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv));
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(xd, _mm512_set1_ps(yd[t][i])), _mm512_cvtepi32_ps(p), acc[t]);
            }
        }
        for (int t = 0; t < 4; t++) store_pair_sums(out + (size_t)t * out_stride + r, acc[t]);
    }
    (void)wb;
    return;
#endif
    /* two rows at a time: each activation block is loaded once for both, and each scale
     * product is one multiply by a broadcast from memory (the same float product as
     * xd * yd). Against one row at a time with a scalar multiply and broadcast: pp512
     * 72.5-78.9 -> 76.4-84.0 t/s on llama-3.2-1b Q8_0, alternating. */
    for (int r = 0; r < 8; r += 2) {
        const uint8_t *row0 = wb + (size_t)r * stride, *row1 = row0 + stride;
        const block_q8_0 *yt[4] = {y0, y1, y2, y3};
        __m256 acc[2][4];
        #pragma GCC unroll 2
        for (int k = 0; k < 2; k++)
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) acc[k][t] = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            float xd0, xd1;
            __m256i w0 = q8_block_quants(type, row0, bs, i, &xd0), w1 = q8_block_quants(type, row1, bs, i, &xd1);
            __m256i aw0 = _mm256_sign_epi8(w0, w0), aw1 = _mm256_sign_epi8(w1, w1);
            __m256 d0 = _mm256_set1_ps(xd0), d1 = _mm256_set1_ps(xd1);
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                __m256i yv = _mm256_loadu_si256((const __m256i *)yt[t][i].qs);
                __m256 yd_t = _mm256_broadcast_ss(&yd[t][i]);
                __m256i p0 = DOT_U8I8_4(aw0, _mm256_sign_epi8(yv, w0)), p1 = DOT_U8I8_4(aw1, _mm256_sign_epi8(yv, w1));
                acc[0][t] = _mm256_fmadd_ps(_mm256_mul_ps(d0, yd_t), _mm256_cvtepi32_ps(p0), acc[0][t]);
                acc[1][t] = _mm256_fmadd_ps(_mm256_mul_ps(d1, yd_t), _mm256_cvtepi32_ps(p1), acc[1][t]);
            }
        }
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            out[(size_t)t * out_stride + r] = hsum8(acc[0][t]);
            out[(size_t)t * out_stride + r + 1] = hsum8(acc[1][t]);
        }
    }
}

static void dot_q8_0_x8_t4(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, const void *x, size_t x_stride) {
    q8_family_x8_t4(LLAMBDA_TYPE_Q8_0, dot_q8_0, n, out, out_stride, w, stride, sizeof(block_q8_0), x, x_stride);
}

static void dot_q5_0_x8_t4(int64_t n, float *out, size_t out_stride, const void *w, size_t stride, const void *x, size_t x_stride) {
    q8_family_x8_t4(LLAMBDA_TYPE_Q5_0, dot_q5_0, n, out, out_stride, w, stride, sizeof(block_q5_0), x, x_stride);
}

/* Q8_0 repacked: the blocks of a tile's eight rows interleaved (block i of rows 0..7,
 * then block i + 1). A tile is then one stream of memory, not eight: two threads read
 * eight row streams at about half the rate of one (measured on a 374 MB output head: 30
 * GB/s unpacked, as fast as Q4_K's tiles once packed). With VNNI the quants are stored
 * unsigned (q + 128) and 128 x each four-activation sum comes off the dot product, which
 * starts from it: the exact integers of dot_q8_0 with one instruction instead of three
 * (no int16 stage that could saturate, so AVX2 without VNNI keeps them signed). */
#ifdef LL_AVX512
/* With AVX-512 each block of a tile's eight rows is their quants (+ 128), 32 bytes a row,
 * then their eight scales: the same 272 bytes in one stream as eight block_q8_0, but a
 * 64-byte load is two rows' quants, one conversion widens the eight scales, and a 512-bit
 * vector holds two rows' accumulators whose scales come from the eight by a permutation
 * (no scalar conversion and broadcast per row). One token: about a third of the
 * instructions of the eight-accumulator kernel kept for AVX2 below. A 4.5 MB matrix held
 * in cache (medians of six): 44 -> 73 GB/s on one thread, 111 -> 153 on two; a 374 MB
 * head streamed from memory: the same within this machine's noise. */
#define Q8_0_PACK_BIAS 0x80
#define Q8_0_X8_QS (8 * 32)                           /* a tile block: the eight rows' quants, */
#define Q8_0_X8_BYTES (Q8_0_X8_QS + 8 * 2)            /* and their scales: 272 bytes */
/* Blocks go four to a group: their quants, then the four blocks' scales on one line, so
 * that every 64-byte load lies on one cache line (272-byte blocks one after another split
 * three loads in four across two lines). A last group of fewer blocks is laid out alike:
 * group g's blocks start at byte g x 272, their scales after their quants. Session 32, two
 * threads, each timed token against a read pass just before it, three and four
 * alternations at 53-80 GB/s: llama-3.2-1b Q8_0 0.796 / 0.807 / 0.804 / 0.845 of the pass
 * -> 1.006 / 0.947 / 0.895 / 0.956 and 0.819 / 0.779 / 0.907 -> 1.026 / 0.912 / 1.167,
 * Nemotron (6 layers, its 374 MB Q8_0 head) 0.769 / 0.805 / 0.869 -> 0.933 / 0.828 /
 * 1.031; one thread from L2 122 -> 127 GB/s. The same grouping of the Q4_K, Q6_K and Q4_0
 * tiles (heads together, bodies on whole lines) gained nothing there: Q6_K 1.018 / 1.147
 * / 1.034 -> 0.998 / 1.039 / 1.002, Q4_0 even or lower. */
#define Q8_0_GROUP 4
static inline int q8_0_group_blocks(int64_t nb, int64_t g) { return nb - g < Q8_0_GROUP ? (int)(nb - g) : Q8_0_GROUP; }
static size_t pack_q8_0_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / 32;
    for (int64_t g = 0; dst && g < nb; g += Q8_0_GROUP) {
        const int kg = q8_0_group_blocks(nb, g);
        uint8_t *qs = (uint8_t *)dst + (size_t)g * Q8_0_X8_BYTES, *d = qs + kg * Q8_0_X8_QS;
        for (int j = 0; j < kg; j++)
            for (int r = 0; r < 8; r++) {
                const block_q8_0 *a = (const block_q8_0 *)((const uint8_t *)w + (size_t)r * stride) + g + j;
                memcpy(d + 16 * j + 2 * r, &a->d, 2);
                for (int k = 0; k < 32; k++) qs[j * Q8_0_X8_QS + 32 * r + k] = (uint8_t)a->qs[k] ^ Q8_0_PACK_BIAS;
            }
    }
    return (size_t)nb * Q8_0_X8_BYTES;
}

/* lanes 0-7 row 2p's scale, 8-15 row 2p + 1's */
static inline __m512 q8_0_pair_scales(__m512 d8, int p) {
    return _mm512_permutexvar_ps(_mm512_set_epi32(2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                                                  2 * p + 1, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p), d8);
}

/* A tile against one activation row: each row dot_q8_0's operations on its eight lanes
 * (scale = row scale x activation scale, as there), so its bits. */
static void q8_0_packed_rows(int64_t n, float *out, const uint8_t *tile, const block_q8_0 *y) {
    const int ahead = stream_ahead();
    const int64_t nb = n / 32;
    __m512 acc[4];
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++) acc[p] = _mm512_setzero_ps();
    /* The weight stream fetched stream_ahead on, as the other one-token kernels do (a
     * block's four lines of quants, a group's line of scales). Session 13 measured the
     * hardware prefetcher alone as faster (llama-3.2-1b Q8_0 tg64 31.6 -> 34.4 t/s); session
     * 17, same machine kind, alternating tg64 with the prefetch and without: llama-3.2-1b
     * Q8_0 eight pairs of nine for it (five-pair medians 29.7 vs 26.5), Nemotron twelve of
     * fifteen (its 374 MB Q8_0 head alone, bench-proj, 50 -> 57 GB/s), after four pairs the
     * other way earlier the same day. The host's state decides; re-measure before changing
     * it back. The fetches go with the row pairs' loads (prefetch_tile), not in a burst
     * before the block. */
    for (int64_t g = 0; g < nb; g += Q8_0_GROUP) {
        const int kg = q8_0_group_blocks(nb, g);
        const uint8_t *qs = tile + (size_t)g * Q8_0_X8_BYTES, *d = qs + kg * Q8_0_X8_QS;
        prefetch_tile(d, ahead, 1);   /* the group's scale line; the quants with their row pairs */
        for (int j = 0; j < kg; j++, qs += Q8_0_X8_QS, d += 16) {
            const block_q8_0 *yi = &y[g + j];
            __m512i yv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)yi->qs));
            __m512i start = _mm512_broadcast_i64x4(dot_start((char)Q8_0_PACK_BIAS, yi->qs));
            __m512 d8 = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d)),
                                                              _mm256_set1_ps(LL_FP16(yi->d))));
            #pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                prefetch_tile(qs + 64 * p, ahead, 1);
                __m512i sum = _mm512_dpbusd_epi32(start, _mm512_loadu_si512(qs + 64 * p), yv);
                acc[p] = _mm512_fmadd_ps(q8_0_pair_scales(d8, p), _mm512_cvtepi32_ps(sum), acc[p]);
            }
        }
    }
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++) store_pair_sums(out + 2 * p, acc[p]);
}

/* The tile against four activation rows: each (row pair, token) the operations of
 * q8_family_x8_t4's AVX-512 path on the same integers (its sign handling replaced by the
 * unsigned start). Blocks outermost, as they lie in memory; the sixteen (row pair, token)
 * accumulators stay in registers. */
static void q8_0_packed_x8_t4(int64_t n, float *out, size_t out_stride, const uint8_t *tile, const void *x, size_t x_stride) {
    const int64_t nb = n / 32;
    const block_q8_0 *y[4];
    for (int t = 0; t < 4; t++) y[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride);
    __m512 acc[4][4];
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++)
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++) acc[p][t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < nb; g += Q8_0_GROUP) {
        const int kg = q8_0_group_blocks(nb, g);
        const uint8_t *qs = tile + (size_t)g * Q8_0_X8_BYTES;
        const uint16_t *d = (const uint16_t *)(qs + kg * Q8_0_X8_QS);
        for (int j = 0; j < kg; j++, qs += Q8_0_X8_QS, d += 8) {
            const int64_t i = g + j;
            __m512i yv[4], start[4];
            __m512 yd[4];
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                yv[t] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[t][i].qs));
                start[t] = _mm512_broadcast_i64x4(dot_start((char)Q8_0_PACK_BIAS, y[t][i].qs));
                yd[t] = _mm512_set1_ps(LL_FP16(y[t][i].d));
            }
            __m512 d8 = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d)));
            #pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m512i wv = _mm512_loadu_si512(qs + 64 * p);
                __m512 xd = q8_0_pair_scales(d8, p);
                #pragma GCC unroll 4
                for (int t = 0; t < 4; t++)
                    acc[p][t] = _mm512_fmadd_ps(_mm512_mul_ps(xd, yd[t]), _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start[t], wv, yv[t])),
                                                acc[p][t]);
            }
        }
    }
    for (int p = 0; p < 4; p++)
        for (int t = 0; t < 4; t++) store_pair_sums(out + (size_t)t * out_stride + 2 * p, acc[p][t]);
}
#else
/* Without AVX-512 the blocks of a tile's eight rows are interleaved whole (block i of
 * rows 0..7, then block i + 1) and the quants stay signed. */
#define Q8_0_PACK_BIAS 0
static size_t pack_q8_0_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / 32;
    if (dst)
        for (int64_t i = 0; i < nb; i++)
            for (int r = 0; r < 8; r++) {
                block_q8_0 *o = (block_q8_0 *)dst + 8 * i + r;
                memcpy(o, (const block_q8_0 *)((const uint8_t *)w + (size_t)r * stride) + i, sizeof(block_q8_0));
            }
    return (size_t)nb * 8 * sizeof(block_q8_0);
}

/* A repacked tile against one activation row: each row dot_q8_0's operations in its own
 * accumulator, so its bits. */
static void q8_0_packed_rows(int64_t n, float *out, const block_q8_0 *p, const block_q8_0 *y) {
    const int ahead = stream_ahead();
    __m256 acc[8];
    for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, p += 8) {
        #pragma GCC unroll 5
        for (int l = 0; l < 5; l++)   /* the 272 bytes of the eight blocks */
            prefetch_ahead((const char *)p + 64 * l, ahead);
        __m256i yq = _mm256_loadu_si256((const __m256i *)y[i].qs);
        float yd = LL_FP16(y[i].d);
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            __m256 d = _mm256_set1_ps(LL_FP16(p[r].d) * yd);
            __m256i wq = _mm256_loadu_si256((const __m256i *)p[r].qs);
            acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8_groups4(wq, yq)), acc[r]);
        }
    }
    for (int r = 0; r < 8; r++) out[r] = hsum8(acc[r]);
}
#endif

static void dot_q8_0_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
#ifdef LL_AVX512
    if (n_tok == 4) {
        q8_0_packed_x8_t4(n, out, out_stride, tile, x, x_stride);
        return;
    }
#else
    if (n_tok == 4 && n / 32 <= Q8_0_MAX_BLOCKS) {   /* the 8 x 4 tile, row r's blocks 8 blocks apart */
        q8_family_x8_t4(LLAMBDA_TYPE_Q8_0, dot_q8_0, n, out, out_stride, tile, sizeof(block_q8_0), 8 * sizeof(block_q8_0),
                        x, x_stride);
        return;
    }
#endif
    for (int t = 0; t < n_tok; t++)
        q8_0_packed_rows(n, out + (size_t)t * out_stride, tile, (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride));
}

/* Q4_0 repacked: eight rows interleaved four bytes at a time (step k: bytes 4k..4k+3 of
 * each row, i.e. elements 4k.. in the low nibbles and 16 + 4k.. in the high ones). The
 * scalar kernel keeps one float per row, fused-multiply-added once per block, so a vector
 * holds the eight rows' accumulators and each row's block integer (its nibbles minus 8
 * against the activations: unsigned nibbles, 8 x the activation sum taken off first) is a
 * lane: the same integers and the same one fma per block, no horizontal sums. */
typedef struct {
    uint16_t d[8];            /* per row */
    uint8_t qs[4][8][4];      /* [step k][row]: bytes 4k..4k+3 */
} block_q4_0_x8;

static size_t pack_q4_0_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / 32;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q4_0_x8 *p = (block_q4_0_x8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_q4_0 *a = (const block_q4_0 *)((const uint8_t *)w + (size_t)r * stride) + i;
                p->d[r] = a->d;
                for (int k = 0; k < 4; k++) memcpy(p->qs[k][r], a->qs + 4 * k, 4);
            }
        }
    return (size_t)nb * sizeof(block_q4_0_x8);
}

static inline __attribute__((always_inline)) void q4_0_packed_tile(int64_t n, float *out, size_t out_stride,
                                                                   const block_q4_0_x8 *p, const void *x,
                                                                   size_t x_stride, const int T) {
    const int ahead = stream_ahead();
    const __m256i m4 = _mm256_set1_epi8(0x0F), b8 = _mm256_set1_epi8(8);
    __m256 acc[4];
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, p++) {
        #pragma GCC unroll 3
        for (int l = 0; l < 3; l++)   /* the 144-byte block */
            prefetch_ahead((const char *)p + 64 * l, ahead);
        const block_q8_0 *y[4];
        __m256i isum[4];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            y[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride) + i;
            isum[t] = _mm256_set1_epi32(-hsum_i32(DOT_U8I8_4(b8, _mm256_loadu_si256((const __m256i *)y[t]->qs))));
        }
#ifdef NIBBLE_SUMS16
        __m256i pairs[4];   /* the block's eight steps as int16 pairs, widened once */
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) pairs[t] = _mm256_setzero_si256();
#endif
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)p->qs[k]);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                int32_t yl, yh;
                memcpy(&yl, y[t]->qs + 4 * k, 4);
                memcpy(&yh, y[t]->qs + 16 + 4 * k, 4);
#ifdef NIBBLE_SUMS16
                pairs[t] = _mm256_add_epi16(pairs[t], mul_u8_i8_pairs(lo, _mm256_set1_epi32(yl)));
                pairs[t] = _mm256_add_epi16(pairs[t], mul_u8_i8_pairs(hi, _mm256_set1_epi32(yh)));
#else
                isum[t] = ACC_DOT_U8I8_4(isum[t], lo, _mm256_set1_epi32(yl));
                isum[t] = ACC_DOT_U8I8_4(isum[t], hi, _mm256_set1_epi32(yh));
#endif
            }
        }
#ifdef NIBBLE_SUMS16
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs[t], _mm256_set1_epi16(1)));
#endif
        __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(_mm256_set1_ps(LL_FP16(y[t]->d)), xd), acc[t]);
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) _mm256_storeu_ps(out + (size_t)t * out_stride, acc[t]);
}

#ifdef LL_AVX512
/* One token in 512-bit vectors: a 64-byte load is steps k and k + 1 of the eight rows (row
 * r in lanes r and 8 + r), whose low nibbles meet activations 4k.. and 4k + 4.. and whose
 * high ones (kept in place, 16 times their value, their sums shifted back) meet 16 + 4k..
 * and 20 + 4k.., each four broadcast to their half by one permute. 8 x the activations
 * come off lane by lane (two more dot products a load, against a hsum of the block's
 * activations before: ten instructions), the halves added are each row's block integer,
 * then q4_0_packed_tile's one fused multiply-add per block: its integers, its bits. One
 * thread, a tile resident in L2 (a microbenchmark of dot_packed, 384 rows of 2048): the
 * 256-bit tile 42 GB/s, this 72. */
static void q4_0_packed_tile_x1(int64_t n, float *out, const block_q4_0_x8 *p, const block_q8_0 *y) {
    const int ahead = stream_ahead();
    const __m512i m4 = _mm512_set1_epi8(0x0F), b8 = _mm512_set1_epi8(8);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, p++, y++) {
        #pragma GCC unroll 3
        for (int l = 0; l < 3; l++)   /* the 144-byte block */
            prefetch_ahead((const char *)p + 64 * l, ahead);
        const __m512i yv = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y->qs));
        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512(), off = _mm512_setzero_si512();
        #pragma GCC unroll 2
        for (int kp = 0; kp < 2; kp++) {
            __m512i q = _mm512_loadu_si512(p->qs[2 * kp]);
            ONE_LOAD(q);
            __m512i yl = _mm512_permutexvar_epi32(lane_pair(2 * kp), yv), yh = _mm512_permutexvar_epi32(lane_pair(4 + 2 * kp), yv);
            lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(q, m4), yl);
            hi = _mm512_dpbusd_epi32(hi, _mm512_andnot_si512(m4, q), yh);
            off = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(off, b8, yl), b8, yh);   /* 8 x the four activations of a lane */
        }
        __m256i isum = add_halves_epi32(_mm512_sub_epi32(_mm512_add_epi32(lo, _mm512_srai_epi32(hi, 4)), off));
        __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(_mm256_set1_ps(LL_FP16(y->d)), xd), acc);
    }
    _mm256_storeu_ps(out, acc);
}
#endif

static void dot_q4_0_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
#ifdef LL_AVX512
    if (n_tok == 1) { q4_0_packed_tile_x1(n, out, tile, x); return; }
#endif
    switch (n_tok) {
    case 4: q4_0_packed_tile(n, out, out_stride, tile, x, x_stride, 4); break;
    case 3: q4_0_packed_tile(n, out, out_stride, tile, x, x_stride, 3); break;
    case 2: q4_0_packed_tile(n, out, out_stride, tile, x, x_stride, 2); break;
    default: q4_0_packed_tile(n, out, out_stride, tile, x, x_stride, 1); break;
    }
}

#ifdef LL_AVX512
/* Two adjacent Q4_0 tiles (16 rows) in 512-bit vectors, for prompts: each row the lane
 * operations of q4_0_packed_tile, so its bits; the activation sums serve 16 rows. */
static inline __attribute__((always_inline)) void q4_0_packed_tile16(int64_t n, float *out, size_t out_stride,
                                                                     const block_q4_0_x8 *pa, const void *x,
                                                                     size_t x_stride, const int T) {
    const block_q4_0_x8 *pb = pa + n / 32;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 acc[4];
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, pa++, pb++) {
        const block_q8_0 *y[4];
        __m512i isum[4];
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            y[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride) + i;
            isum[t] = _mm512_set1_epi32(-hsum_i32(DOT_U8I8_4(_mm256_set1_epi8(8), _mm256_loadu_si256((const __m256i *)y[t]->qs))));
        }
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i q = load_pair(pa->qs[k], pb->qs[k]);
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                int32_t yl, yh;
                memcpy(&yl, y[t]->qs + 4 * k, 4);
                memcpy(&yh, y[t]->qs + 16 + 4 * k, 4);
                isum[t] = _mm512_dpbusd_epi32(isum[t], lo, _mm512_set1_epi32(yl));
                isum[t] = _mm512_dpbusd_epi32(isum[t], hi, _mm512_set1_epi32(yh));
            }
        }
        __m512 xd = load_pair_f16(pa->d, pb->d);
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(_mm512_set1_ps(LL_FP16(y[t]->d)), xd), acc[t]);
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) _mm512_storeu_ps(out + (size_t)t * out_stride, acc[t]);
}

static void dot_q4_0_packed2(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                             int n_tok) {
    switch (n_tok) {
    case 4: q4_0_packed_tile16(n, out, out_stride, tile, x, x_stride, 4); break;
    case 3: q4_0_packed_tile16(n, out, out_stride, tile, x, x_stride, 3); break;
    case 2: q4_0_packed_tile16(n, out, out_stride, tile, x, x_stride, 2); break;
    default: q4_0_packed_tile16(n, out, out_stride, tile, x, x_stride, 1); break;
    }
}
#endif

/* Q5_K repacked. dot_q5_K keeps eight float lanes per row (lane k:
 * elements 4k..4k+3 of every 32-element sub-block) and one float for the mins, so the tile
 * keeps, per token, the eight rows' eight lanes (four 512-bit accumulators, lane 2r + e of
 * accumulator s holding row r's lane 2s + e) and one for their mins. Each row's quants are
 * stored eight bytes at a time, as block_q4_K_r8's: a 64-byte load of qs is steps 2s and
 * 2s + 1 (bytes 32j + 8s..) of all eight rows, a row's two in adjacent lanes, each lane's
 * four activations one 8-byte broadcast, and a 64-byte load of qh gives the same lanes
 * their fifth bits (sub-block 2j's quants in the low nibbles take bit 2j, 2j + 1's in the
 * high ones bit 2j + 1). The two dot products (each under 4 x 31 x 128 < 2^15) are paired
 * into int16 halves and meet the two sub-blocks' scales in one dpwssd. Same integers, same
 * fused multiply-adds, and the lanes summed in dot_q5_K's order: its bits. It replaces a
 * tile of 256-bit steps (four bytes of each row a step; one token paired two steps into a
 * 512-bit vector, each step's activations broadcast by a permute): one thread from L2, one
 * token, 68 -> 74 GB/s; llama-3.2-1b Q5_K_M pp512 149-157 -> 232-237 t/s (three
 * alternations), its prompts' two-token passes now in 512-bit vectors too. (Pairs of
 * vpmaddubsw into two dpwssd, instead of the two dot products packed into one: 72 GB/s.) */
typedef struct {
    uint16_t d[8], dmin[8];       /* per row */
    uint8_t sc[4][8][2];          /* [group j][row]: scales of sub-blocks 2j, 2j + 1 */
    uint8_t mn[4][8][2];          /* [sub-block pair][row]: mins */
    struct {                      /* step pair s, in the order the kernel reads them: */
        uint8_t qh[8][8];         /* [row]: qh bytes 8s..8s+7 */
        uint8_t qs[4][8][8];      /* [group j][row]: qs bytes 32j + 8s.. */
    } s[4];
} block_q5_K_r8;

static size_t pack_q5_K_r8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / QK_K;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q5_K_r8 *p = (block_q5_K_r8 *)dst + i;
            for (int r = 0; r < 8; r++) {
                const block_q5_K *a = (const block_q5_K *)((const uint8_t *)w + (size_t)r * stride) + i;
                p->d[r] = a->d;
                p->dmin[r] = a->dmin;
                uint32_t u[4];
                uint8_t sm[16];
                k4_unpack(a->scales, u);   /* bytes 0-7 scales, 8-15 mins */
                memcpy(sm, u, 16);
                for (int sb = 0; sb < 8; sb++) { p->sc[sb / 2][r][sb % 2] = sm[sb]; p->mn[sb / 2][r][sb % 2] = sm[8 + sb]; }
                for (int st = 0; st < 4; st++) {
                    memcpy(p->s[st].qh[r], a->qh + 8 * st, 8);
                    for (int j = 0; j < 4; j++) memcpy(p->s[st].qs[j][r], a->qs + 32 * j + 8 * st, 8);
                }
            }
        }
    return (size_t)nb * sizeof(block_q5_K_r8);
}

#ifdef LL_AVX512
/* Group j's quants of one step pair with their fifth bits: lo the low nibbles with bit 2j of
 * h (sub-block 2j), hi the high nibbles with bit 2j + 1. Without GFNI: each bit shifted to
 * bit 4 within 16-bit lanes and masked in (seven instructions). With it (gf): lo is the low
 * nibbles with the bit picked out by one affine step; hi is the high nibbles with bits 0-3
 * taken from h (or from hs, h >> 4, for j >= 2, whose bits are 5 and 7), then one affine
 * step moves the nibble down and the bit to 4 (four instructions, and hs once a step pair).
 * Same bytes either way. */
static inline __attribute__((always_inline)) void q5_K_quants(__m512i q, __m512i h, __m512i hs, const int j, const int gf,
                                                              __m512i *lo, __m512i *hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    if (gf) {
        /* ternary logic 0xE4: the first operand where the third is set, else the second */
        *lo = _mm512_ternarylogic_epi32(q, gf_affine(h, _mm512_set1_epi64((long long)GF_BIT_TO_4(2 * j))), m4, 0xE4);
        *hi = gf_affine(_mm512_ternarylogic_epi32(q, j < 2 ? h : hs, m4, 0xD8),   /* 0xD8: the second where the third is set */
                        _mm512_set1_epi64((long long)(GF_HIGH_NIBBLE_DOWN | GF_BIT_TO_4(j % 2 ? 3 : 1))));
        return;
    }
    (void)hs;
    __m512i hl = 2 * j <= 4 ? _mm512_slli_epi16(h, 4 - 2 * j) : _mm512_srli_epi16(h, 2 * j - 4);
    __m512i hh = 2 * j + 1 <= 4 ? _mm512_slli_epi16(h, 3 - 2 * j) : _mm512_srli_epi16(h, 2 * j - 3);
    *lo = _mm512_ternarylogic_epi32(_mm512_and_si512(q, m4), hl, b4, 0xF8);
    *hi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4), hh, b4, 0xF8);
}

static inline __attribute__((always_inline)) void q5_K_r8_tile(int64_t n, float *out, size_t out_stride,
                                                               const block_q5_K_r8 *p, const void *x, size_t x_stride,
                                                               const int T, const int gf) {
    const int ahead = stream_ahead_far();
    const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
    __m512 acc[2][4];
    __m256 accm[2];
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++) {
        accm[t] = _mm256_setzero_ps();
        for (int st = 0; st < 4; st++) acc[t][st] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[2];
        __m512 d[2];   /* row r's d in lanes 2r, 2r + 1 */
        __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        __m256 xdmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->dmin));
        __m512i scp[4];
        for (int j = 0; j < 4; j++) scp[j] = scale_pairs_by_lane(p->sc[j]);
        #pragma GCC unroll 2
        for (int t = 0; t < T; t++) {
            y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
            d[t] = _mm512_permutexvar_ps(each_twice(), _mm512_castps256_ps512(_mm256_mul_ps(_mm256_set1_ps(y[t]->d), xd)));
            __m256i ms = mins_by_row(p->mn, y[t]);   /* the mins against the sub-block activation sums */
            accm[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(-y[t]->d), xdmin), _mm256_cvtepi32_ps(ms), accm[t]);
        }
        #pragma GCC unroll 4
        for (int st = 0; st < 4; st++) {
            #pragma GCC unroll 6
            for (int l = 0; l < 6; l++)   /* the 1440-byte block: 23 lines, 6 per step pair */
                if (6 * st + l < 23) prefetch_tile((const char *)p + 64 * (6 * st + l), ahead, T);
            __m512i h = _mm512_loadu_si512(p->s[st].qh), hs = _mm512_srli_epi16(h, 4);
            __m512i lane[2];
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) lane[t] = _mm512_setzero_si512();
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m512i q = _mm512_loadu_si512(p->s[st].qs[j]);
                ONE_LOAD(q);
                __m512i lo, hi;
                q5_K_quants(q, h, hs, j, gf, &lo, &hi);
                #pragma GCC unroll 2
                for (int t = 0; t < T; t++) {
                    int64_t yl, yh;
                    memcpy(&yl, y[t]->qs + 64 * j + 8 * st, 8);
                    memcpy(&yh, y[t]->qs + 64 * j + 32 + 8 * st, 8);
                    __m512i dl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_set1_epi64(yl));
                    __m512i dh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, _mm512_set1_epi64(yh));
                    __m512i pr = _mm512_ternarylogic_epi32(dl, _mm512_slli_epi32(dh, 16), lo16, 0xE4);
                    lane[t] = _mm512_dpwssd_epi32(lane[t], pr, scp[j]);
                }
            }
            #pragma GCC unroll 2
            for (int t = 0; t < T; t++) acc[t][st] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(lane[t]), acc[t][st]);
        }
    }
    #pragma GCC unroll 2
    for (int t = 0; t < T; t++) {
        /* dot_q5_K's hsum of a row's lanes, ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)): lane 2r holds
         * row r's first bracket, 2r + 1 its second; add them and keep the even lanes */
        __m512 c = _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][2]), _mm512_add_ps(acc[t][1], acc[t][3]));
        __m512 sum = _mm512_add_ps(c, _mm512_castsi512_ps(_mm512_srli_epi64(_mm512_castps_si512(c), 32)));
        __m256 r = _mm256_castsi256_ps(_mm512_cvtepi64_epi32(_mm512_castps_si512(sum)));
        _mm256_storeu_ps(out + (size_t)t * out_stride, _mm256_add_ps(r, accm[t]));
    }
}

#else
/* The same layout in 256-bit registers (the AVX2 build): a 32-byte load of qs is one step
 * pair of four rows (rows 4v..4v+3, v the tile's half), a row's two steps in adjacent
 * lanes, and one 8-byte broadcast still gives each lane its four activations, for both
 * halves. Without VNNI a product is vpmaddubsw (pairs within int16: 31 x 127 x 2) and then
 * vpmaddwd against the sub-block's scale, each row's in the four words of its two lanes:
 * the scaled integers of dot_q5_K's lanes, exactly, then its fused multiply-adds and its
 * hsum, so its bits. It replaces dot_q5_K a row at a time (the scales unpacked per row and
 * block in scalar code): llama-3.2-1b Q5_K_M against llama.cpp's AVX2 build, pp512 0.59x ->
 * 1.60x, tg128 0.88x -> 1.49x (session 28, one compare.sh run each). */
#define W4(b) b, -128, b, -128, b, -128, b, -128
/* [half v][0: sub-block 2j, 1: 2j + 1]: vpshufb picking row 4v + r's scale (bytes 2r + e of
 * a group's sc, in both 128-bit lanes) into the four words of lanes 2r, 2r + 1 */
static const int8_t q5_K_scale_words[2][2][32] = {{{W4(0), W4(2), W4(4), W4(6)}, {W4(1), W4(3), W4(5), W4(7)}},
                                                  {{W4(8), W4(10), W4(12), W4(14)}, {W4(9), W4(11), W4(13), W4(15)}}};
#undef W4

/* bit b of every byte of h moved to bit 4 (within 16-bit shifts; the caller masks bit 4) */
static inline __m256i bit_to_4(__m256i h, int b) {
    return b < 4 ? _mm256_slli_epi16(h, 4 - b) : b > 4 ? _mm256_srli_epi16(h, b - 4) : h;
}

static inline __attribute__((always_inline)) void q5_K_r8_tile(int64_t n, float *out, size_t out_stride,
                                                               const block_q5_K_r8 *p, const void *x, size_t x_stride,
                                                               const int T, const int gf) {
    (void)gf;   /* no GFNI form in 256-bit registers */
    const int ahead = stream_ahead();
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const __m256i half_rows[2] = {_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)};
    __m256 acc[4][4][2], accm[4];   /* [token][step pair][half] */
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        accm[t] = _mm256_setzero_ps();
        for (int st = 0; st < 4; st++) acc[t][st][0] = acc[t][st][1] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / QK_K; i++, p++) {
        const block_q8_K *y[4];
        __m256 d[4][2];   /* half v: row 4v + r's d in lanes 2r, 2r + 1 */
        __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        __m256 xdmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->dmin));
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            y[t] = (const block_q8_K *)((const uint8_t *)x + (size_t)t * x_stride) + i;
            __m256 dt = _mm256_mul_ps(_mm256_set1_ps(y[t]->d), xd);
            d[t][0] = _mm256_permutevar8x32_ps(dt, half_rows[0]);
            d[t][1] = _mm256_permutevar8x32_ps(dt, half_rows[1]);
            __m256i ms = mins_by_row(p->mn, y[t]);   /* the mins against the sub-block activation sums */
            accm[t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(-y[t]->d), xdmin), _mm256_cvtepi32_ps(ms), accm[t]);
        }
        /* Not unrolled: unrolled four times the one-token loop was 4.5 KB of code (its
         * accumulators spill either way), and its speed hung on where the linker put it: one
         * thread from cache 29-32 GB/s, 16-18 after an edit elsewhere in this file moved it,
         * 32 again with the function at a 4 KiB boundary. Rolled it reads 32-33 there and
         * 27-32 at its default place; prompts even (pp512, 93-95 t/s both). */
        #pragma GCC unroll 1
        for (int st = 0; st < 4; st++) {
            #pragma GCC unroll 6
            for (int l = 0; l < 6; l++)   /* the 1440-byte block: 23 lines, 6 per step pair */
                if (6 * st + l < 23) prefetch_tile((const char *)p + 64 * (6 * st + l), ahead, T);
            __m256i h[2] = {_mm256_loadu_si256((const __m256i *)p->s[st].qh[0]), _mm256_loadu_si256((const __m256i *)p->s[st].qh[4])};
            __m256i sum[4][2];
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++) sum[t][0] = sum[t][1] = _mm256_setzero_si256();
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m256i sc = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p->sc[j]));
                __m256i yl[4], yh[4];
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    int64_t l8, h8;
                    memcpy(&l8, y[t]->qs + 64 * j + 8 * st, 8);
                    memcpy(&h8, y[t]->qs + 64 * j + 32 + 8 * st, 8);
                    yl[t] = _mm256_set1_epi64x(l8);
                    yh[t] = _mm256_set1_epi64x(h8);
                }
                #pragma GCC unroll 2
                for (int v = 0; v < 2; v++) {
                    __m256i q = _mm256_loadu_si256((const __m256i *)p->s[st].qs[j][4 * v]);
                    ONE_LOAD(q);
                    /* fifth bits: bit 2j for the low nibbles (sub-block 2j), 2j + 1 for the high ones */
                    __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_and_si256(bit_to_4(h[v], 2 * j), b4));
                    __m256i hi = _mm256_or_si256(HIGH_NIBBLES(q, m4), _mm256_and_si256(bit_to_4(h[v], 2 * j + 1), b4));
                    __m256i sl = _mm256_shuffle_epi8(sc, _mm256_loadu_si256((const __m256i *)q5_K_scale_words[v][0]));
                    __m256i sh = _mm256_shuffle_epi8(sc, _mm256_loadu_si256((const __m256i *)q5_K_scale_words[v][1]));
                    #pragma GCC unroll 4
                    for (int t = 0; t < T; t++) {
                        sum[t][v] = ACC_MADD16(sum[t][v], mul_u8_i8_pairs(lo, yl[t]), sl);
                        sum[t][v] = ACC_MADD16(sum[t][v], mul_u8_i8_pairs(hi, yh[t]), sh);
                    }
                }
            }
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                for (int v = 0; v < 2; v++)
                    acc[t][st][v] = _mm256_fmadd_ps(d[t][v], _mm256_cvtepi32_ps(sum[t][v]), acc[t][st][v]);
        }
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        /* dot_q5_K's hsum of a row's lanes as in the 512-bit tile: the step pairs' brackets,
         * then each row's two lanes (hadd: rows 0, 1, 4, 5 | 2, 3, 6, 7, put back in order) */
        __m256 c[2];
        for (int v = 0; v < 2; v++)
            c[v] = _mm256_add_ps(_mm256_add_ps(acc[t][0][v], acc[t][2][v]), _mm256_add_ps(acc[t][1][v], acc[t][3][v]));
        __m256 r = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_hadd_ps(c[0], c[1])), 0xD8));
        _mm256_storeu_ps(out + (size_t)t * out_stride, _mm256_add_ps(r, accm[t]));
    }
}

#endif

/* either build's tile, two tokens a pass */
static inline __attribute__((always_inline)) void q5_K_r8_tokens(int64_t n, float *out, size_t out_stride, const void *tile,
                                                                 const void *x, size_t x_stride, int n_tok, const int gf) {
    int t = 0;
    for (; t + 2 <= n_tok; t += 2)
        q5_K_r8_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 2, gf);
    for (; t < n_tok; t++)
        q5_K_r8_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1, gf);
}
static void dot_q5_K_r8(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride, int n_tok) {
    q5_K_r8_tokens(n, out, out_stride, tile, x, x_stride, n_tok, 0);
}
#ifdef LL_AVX512
static void dot_q5_K_r8_gfni(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                             int n_tok) {
    q5_K_r8_tokens(n, out, out_stride, tile, x, x_stride, n_tok, 1);
}
#endif

/* Q5_0 repacked: eight rows interleaved four quants at a time. dot_q5_0's lane m holds
 * quants 4m..4m+3 (low nibbles of bytes 4m.. for m < 4, high nibbles of bytes 4(m-4)..
 * after), so a step loads bytes 4k..4k+3 of the eight rows (lanes k and k+4 of every row)
 * and the fifth bits come regrouped one word per lane. Quants are taken unsigned (q + 16)
 * and 16 x the four activations' sum comes off: the exact integers of dot_q5_0, and each
 * row keeps its eight float lanes, so its bits. */
typedef struct {
    uint16_t d[8];            /* per row */
    uint32_t qh[8];           /* [lane m]: bit 4r + l = fifth bit of quant 4m + l of row r */
    uint8_t qs[4][8][4];      /* [step k][row]: bytes 4k..4k+3 */
} block_q5_0_x8;

static size_t pack_q5_0_x8(int64_t n, const void *w, size_t stride, void *dst) {
    int64_t nb = n / 32;
    if (dst)
        for (int64_t i = 0; i < nb; i++) {
            block_q5_0_x8 *p = (block_q5_0_x8 *)dst + i;
            memset(p->qh, 0, sizeof p->qh);
            for (int r = 0; r < 8; r++) {
                const block_q5_0 *a = (const block_q5_0 *)((const uint8_t *)w + (size_t)r * stride) + i;
                uint32_t h;
                memcpy(&h, a->qh, 4);
                p->d[r] = a->d;
                for (int k = 0; k < 4; k++) memcpy(p->qs[k][r], a->qs + 4 * k, 4);
                for (int m = 0; m < 8; m++)
                    for (int l = 0; l < 4; l++) p->qh[m] |= ((h >> (4 * m + l)) & 1u) << (4 * r + l);
            }
        }
    return (size_t)nb * sizeof(block_q5_0_x8);
}

/* The 8-row tile against T (1 or 2) tokens. */
static inline __attribute__((always_inline)) void q5_0_packed_tile(int64_t n, float *out, size_t out_stride,
                                                                   const block_q5_0_x8 *p, const void *x,
                                                                   size_t x_stride, const int T) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(16);
    __m256 acc[2][8];
    for (int t = 0; t < T; t++)
        for (int m = 0; m < 8; m++) acc[t][m] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, p++) {
        const block_q8_0 *y[2];
        int32_t off[2][8];   /* 16 x each four-activation sum, by lane */
        __m256 d[2];
        __m256 xd = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d));
        /* (no software prefetch, as for Q8_0's tiles: Nemotron tg64 65.0 -> 72.7 with both) */
        for (int t = 0; t < T; t++) {
            y[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride) + i;
#ifdef LL_AVX512   /* negated: the dot products start from it */
            _mm256_storeu_si256((__m256i *)off[t], dot_start(16, y[t]->qs));
#else
            _mm256_storeu_si256((__m256i *)off[t], DOT_U8I8_4(b16, _mm256_loadu_si256((const __m256i *)y[t]->qs)));
#endif
            d[t] = _mm256_mul_ps(xd, _mm256_set1_ps(LL_FP16(y[t]->d)));
        }
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)p->qs[k]);
            ONE_LOAD(q);
            __m256i nib[2] = {_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)};
            #pragma GCC unroll 2
            for (int hf = 0; hf < 2; hf++) {
                int m = k + 4 * hf;
#ifdef LL_AVX512   /* the fifth bits as a byte mask: + 16 where set */
                __m256i u = _mm256_mask_add_epi8(nib[hf], _cvtu32_mask32(p->qh[m]), nib[hf], b16);
#else
                __m256i u = _mm256_or_si256(nib[hf], _mm256_and_si256(bytes_from_bits((const uint8_t *)&p->qh[m]), b16));
#endif
                for (int t = 0; t < T; t++) {
                    int32_t yq;
                    memcpy(&yq, y[t]->qs + 4 * m, 4);
#ifdef LL_AVX512
                    __m256i sum = _mm256_dpbusd_epi32(_mm256_set1_epi32(off[t][m]), u, _mm256_set1_epi32(yq));
#else
                    __m256i sum = _mm256_sub_epi32(DOT_U8I8_4(u, _mm256_set1_epi32(yq)), _mm256_set1_epi32(off[t][m]));
#endif
                    acc[t][m] = _mm256_fmadd_ps(d[t], _mm256_cvtepi32_ps(sum), acc[t][m]);
                }
            }
        }
    }
    for (int t = 0; t < T; t++)   /* hsum8 of each row's eight lanes */
        _mm256_storeu_ps(out + (size_t)t * out_stride,
                         _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][4]), _mm256_add_ps(acc[t][2], acc[t][6])),
                                       _mm256_add_ps(_mm256_add_ps(acc[t][1], acc[t][5]), _mm256_add_ps(acc[t][3], acc[t][7]))));
}

#ifdef LL_AVX512
/* One token in 512-bit vectors: a 64-byte load is steps k and k + 1 of the eight rows, whose
 * low nibbles are lanes k and k + 1 of the rows (low half, high half) and whose high ones
 * are lanes 4 + k and 5 + k; their fifth bits are one 64-bit load of qh each (a mask: + 16
 * where set), and each lane group's activations and dot product start one permute apiece.
 * Each row lane gets q5_0_packed_tile's operations in its order, and hsum8's brackets
 * follow from the halves. Fifteen instructions a 64-byte load where a 32-byte step took
 * ten, with scalar work for its mask: one thread, a tile resident in L2 (a microbenchmark
 * of dot_packed, 384 rows of 2048): 45.5 -> 56-58 GB/s. */
static void q5_0_packed_tile_x1(int64_t n, float *out, const block_q5_0_x8 *p, const block_q8_0 *y) {
    const int ahead = stream_ahead();
    const __m512i m4 = _mm512_set1_epi8(0x0F), b16 = _mm512_set1_epi8(16);
    __m512 acc[2][2];   /* [low or high nibbles][step pair]: row lanes (m, m + 1) side by side */
    for (int h = 0; h < 2; h++) acc[h][0] = acc[h][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, p++, y++) {
        /* the 176-byte block's three lines fetched ahead, two with its loads. Without any
         * (as before), session 32, two threads, each token against a read pass just before
         * it: Nemotron (6 layers; its experts are Q5_0) 1.114 / 1.084 / 1.070 / 1.085 of the
         * pass against 1.128 / 1.149 / 1.167 / 1.146 with them, its tokens 61-63 -> 63-65
         * GB/s of weights (three more alternations where the passes differed: tokens 63-67
         * -> 66-69 GB/s) */
        prefetch_tile((const char *)p + 128, ahead, 1);
        __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p->d)), _mm256_set1_ps(LL_FP16(y->d)));
        __m512 d2 = dup_halves(d);
        __m512i yq = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y->qs));
        __m512i start = _mm512_castsi256_si512(dot_start(16, y->qs));
        #pragma GCC unroll 2
        for (int kp = 0; kp < 2; kp++) {
            prefetch_tile((const char *)p + 64 * kp, ahead, 1);
            __m512i q = _mm512_loadu_si512(p->qs[2 * kp]);
            ONE_LOAD(q);
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                uint64_t bits;
                memcpy(&bits, &p->qh[4 * h + 2 * kp], 8);
                __m512i nib = _mm512_and_si512(h ? _mm512_srli_epi16(q, 4) : q, m4);
                __m512i u = _mm512_mask_add_epi8(nib, _cvtu64_mask64(bits), nib, b16);
                __m512i pair = lane_pair(4 * h + 2 * kp);
                __m512i sum = _mm512_dpbusd_epi32(_mm512_permutexvar_epi32(pair, start), u, _mm512_permutexvar_epi32(pair, yq));
                acc[h][kp] = _mm512_fmadd_ps(d2, _mm512_cvtepi32_ps(sum), acc[h][kp]);
            }
        }
    }
    _mm256_storeu_ps(out, paired_hsum8(acc));
}
#endif

static void dot_q5_0_packed(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                            int n_tok) {
    int t = 0;
#ifdef LL_AVX512
    if (n_tok == 1) { q5_0_packed_tile_x1(n, out, tile, x); return; }
#endif
    for (; t + 2 <= n_tok; t += 2)
        q5_0_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 2);
    for (; t < n_tok; t++)
        q5_0_packed_tile(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1);
}

#ifdef LL_AVX512
/* The same over two adjacent tiles in 512-bit vectors (16 rows, one per lane group); the
 * fifth bits become one 64-bit mask per lane. */
static inline __attribute__((always_inline)) void q5_0_packed_tile16(int64_t n, float *out, size_t out_stride,
                                                                     const block_q5_0_x8 *pa, const void *x,
                                                                     size_t x_stride, const int T) {
    const block_q5_0_x8 *pb = pa + n / 32;
    const __m512i m4 = _mm512_set1_epi8(0x0F), b16 = _mm512_set1_epi8(16);
    __m512 acc[2][8];
    for (int t = 0; t < T; t++)
        for (int m = 0; m < 8; m++) acc[t][m] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, pa++, pb++) {
        const block_q8_0 *y[2];
        int32_t off[2][8];
        __m512 d[2];
        __m512 xd = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)pa->d)),
                                                            _mm_loadu_si128((const __m128i *)pb->d), 1));
        for (int t = 0; t < T; t++) {
            y[t] = (const block_q8_0 *)((const uint8_t *)x + (size_t)t * x_stride) + i;
            _mm256_storeu_si256((__m256i *)off[t], dot_start(16, y[t]->qs));   /* the dot products below start from it */
            d[t] = _mm512_mul_ps(xd, _mm512_set1_ps(LL_FP16(y[t]->d)));
        }
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i q = load_pair(pa->qs[k], pb->qs[k]);
            __m512i nib[2] = {_mm512_and_si512(q, m4), _mm512_and_si512(_mm512_srli_epi16(q, 4), m4)};
            #pragma GCC unroll 2
            for (int hf = 0; hf < 2; hf++) {
                int m = k + 4 * hf;
                __mmask64 hb = _cvtu64_mask64((uint64_t)pa->qh[m] | (uint64_t)pb->qh[m] << 32);
                __m512i u = _mm512_mask_add_epi8(nib[hf], hb, nib[hf], b16);
                for (int t = 0; t < T; t++) {
                    int32_t yq;
                    memcpy(&yq, y[t]->qs + 4 * m, 4);
                    __m512i sum = _mm512_dpbusd_epi32(_mm512_set1_epi32(off[t][m]), u, _mm512_set1_epi32(yq));
                    acc[t][m] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(sum), acc[t][m]);
                }
            }
        }
    }
    for (int t = 0; t < T; t++)
        _mm512_storeu_ps(out + (size_t)t * out_stride,
                         _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][4]), _mm512_add_ps(acc[t][2], acc[t][6])),
                                       _mm512_add_ps(_mm512_add_ps(acc[t][1], acc[t][5]), _mm512_add_ps(acc[t][3], acc[t][7]))));
}

static void dot_q5_0_packed2(int64_t n, float *out, size_t out_stride, const void *tile, const void *x, size_t x_stride,
                             int n_tok) {
    int t = 0;
    for (; t + 2 <= n_tok; t += 2)
        q5_0_packed_tile16(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 2);
    for (; t < n_tok; t++)
        q5_0_packed_tile16(n, out + (size_t)t * out_stride, out_stride, tile, (const uint8_t *)x + (size_t)t * x_stride, x_stride, 1);
}
#endif

/* Four 8-lane int32 vectors -> one vector of their four totals (exact). */
static inline __m128i sum8x4(const __m256i v[4]) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Eight Q4_0 rows against four activation rows (prefill). Each (row, token) keeps the
 * scalar accumulation of dot_q4_0 — acc = fma(isum, d_y·d_x, acc), blocks in order — with
 * the four tokens in the four lanes of one SSE register. The integer block sum is taken as
 * Σ nibble·y − 8·Σ y (exact, so the same integer), which lets the unsigned nibbles go
 * straight into maddubs; Σ y and d_y are computed once per token block for all eight rows. */
static void dot_q4_0_x8_t4(int64_t n, float *out, size_t out_stride, const void *w, size_t stride,
                           const void *x, size_t x_stride) {
    const uint8_t *wb = w, *xb = x;
    int64_t nb = n / 32;
    if (nb > Q8_0_MAX_BLOCKS) {   /* very long rows: the single-row kernel */
        x8_t4_by_rows(dot_q4_0, n, out, out_stride, w, stride, x, x_stride);
        return;
    }
    const block_q8_0 *y[4];
    for (int t = 0; t < 4; t++) y[t] = (const block_q8_0 *)(xb + (size_t)t * x_stride);
    static _Thread_local __m128 yd[Q8_0_MAX_BLOCKS];
    static _Thread_local __m128i ysum8[Q8_0_MAX_BLOCKS];
    const __m256i ones8 = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < nb; i++) {
        __m256i s[4];
        for (int t = 0; t < 4; t++)
            s[t] = DOT_U8I8_4(ones8, _mm256_loadu_si256((const __m256i *)y[t][i].qs));
        ysum8[i] = _mm_slli_epi32(sum8x4(s), 3);
        yd[i] = _mm_setr_ps(LL_FP16(y[0][i].d), LL_FP16(y[1][i].d), LL_FP16(y[2][i].d), LL_FP16(y[3][i].d));
    }
    for (int r = 0; r < 8; r++) {
        const block_q4_0 *a = (const block_q4_0 *)(wb + (size_t)r * stride);
        __m128 acc = _mm_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            __m256i q = unpack_nibbles(a[i].qs), p[4];
            for (int t = 0; t < 4; t++)
                p[t] = DOT_U8I8_4(q, _mm256_loadu_si256((const __m256i *)y[t][i].qs));
            __m128i isum = _mm_sub_epi32(sum8x4(p), ysum8[i]);
            __m128 scale = _mm_mul_ps(yd[i], _mm_set1_ps(LL_FP16(a[i].d)));
            acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), scale, acc);
        }
        float v[4];
        _mm_storeu_ps(v, acc);
        for (int t = 0; t < 4; t++) out[(size_t)t * out_stride + r] = v[t];
    }
}

/* Q8_K activations, vectorized: the same signed scale (from the first element of largest
 * magnitude), the same round-half-even of x·iscale, clamped at 127, and the 16-sums. */
static void quantize_row_q8_K(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < QK_K; k += 8) mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)));
        __m128 m = _mm_max_ps(_mm256_extractf128_ps(mx, 1), _mm256_castps256_ps128(mx));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float amax = _mm_cvtss_f32(m);
        if (amax == 0) { memset(&y[i], 0, sizeof y[i]); continue; }
        float max = 0;
        const __m256 vamax = _mm256_set1_ps(amax);
        for (int k = 0; k < QK_K; k += 8) {   /* the first lane at the maximum, eight at a time */
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), vamax, _CMP_EQ_OQ));
            if (hit) { max = x[k + __builtin_ctz((unsigned)hit)]; break; }
        }
        float iscale = -127.f / max;
        __m256 vs = _mm256_set1_ps(iscale);
        __m256i lim = _mm256_set1_epi32(127);
        for (int k = 0; k < QK_K; k += 32) {
            __m256i q[4];
            for (int u = 0; u < 4; u++)
                q[u] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + k + 8 * u))), lim);
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[i].qs + k), p);
        }
        /* the 16-sums: bytes offset by 128 to unsigned, summed in eights (sad), two eights a
         * group, less 16·128 */
        const __m256i bias = _mm256_set1_epi8((char)0x80);
        for (int k = 0; k < QK_K; k += 32) {
            __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(y[i].qs + k)), bias),
                                          _mm256_setzero_si256());
            __m256i t = _mm256_add_epi64(sad, _mm256_srli_si256(sad, 8));
            y[i].bsums[k / 16] = (int16_t)(_mm256_extract_epi16(t, 0) - 2048);
            y[i].bsums[k / 16 + 1] = (int16_t)(_mm256_extract_epi16(t, 8) - 2048);
        }
        y[i].d = 1 / iscale;
    }
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

/* expf as glibc computes it (since 2.28; __expf_fma on x86-64 with FMA): x in double,
 * k = round(x·32/ln 2) by adding 1.5·2^52, r = x·32/ln 2 - k (both fused), 2^(k/32) from
 * a table of 2^(i/32) with k/32's integer part added to the exponent bits, a cubic in r,
 * rounded once to float. Only |x| < 88 (top bits of x below 0x42b) takes this path; other
 * lanes (overflow, underflow, infinities, NaN) call expf itself. The table is made at
 * start-up and the whole path checked against the C library's expf there (vexp_check);
 * if any input differs (another libm), expf_row calls expf for every element. */
static const double vexp_inv_ln2_n = 0x1.71547652b82fep+5, vexp_shift = 0x1.8p+52;
static const double vexp_c0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32, vexp_c1 = 0x1.ebfce50fac4f3p-3 / 32 / 32,
                    vexp_c2 = 0x1.62e42ff0c52d6p-1 / 32;
static uint64_t vexp_table[32];   /* bits of 2^(i/32) less i << 47 */
static int vexp_ok, vtanh_ok;
static pthread_once_t vexp_once = PTHREAD_ONCE_INIT;

/* lanes whose |x| is < 88 (a 1 per lane in the mask's low bits) */
static inline int vexp_plain_lanes(__m256 x) {
    __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20), _mm256_set1_epi32(0x7ff));
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(0x42b), top)));
}

#ifdef LL_AVX512
static inline __m256 vexp8(__m256 x) {
    const __m512i t_lo = _mm512_loadu_si512(vexp_table), t_hi = _mm512_loadu_si512(vexp_table + 8);
    const __m512i t_lo2 = _mm512_loadu_si512(vexp_table + 16), t_hi2 = _mm512_loadu_si512(vexp_table + 24);
    __m512d xd = _mm512_cvtps_pd(x);
    __m512d kd = _mm512_fmadd_pd(_mm512_set1_pd(vexp_inv_ln2_n), xd, _mm512_set1_pd(vexp_shift));
    __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, _mm512_set1_pd(vexp_shift));
    __m512d r = _mm512_fmsub_pd(_mm512_set1_pd(vexp_inv_ln2_n), xd, kd);
    __m512i t0 = _mm512_permutex2var_epi64(t_lo, ki, t_hi), t1 = _mm512_permutex2var_epi64(t_lo2, ki, t_hi2);
    __mmask8 upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(upper, t0, t1), _mm512_slli_epi64(ki, 47));
    __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(vexp_c0), _mm512_set1_pd(vexp_c1));
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(vexp_c2), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_castsi512_pd(t)));
}
#else
static inline __m128 vexp4(__m128 x) {
    __m256d xd = _mm256_cvtps_pd(x);
    __m256d kd = _mm256_fmadd_pd(_mm256_set1_pd(vexp_inv_ln2_n), xd, _mm256_set1_pd(vexp_shift));
    __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, _mm256_set1_pd(vexp_shift));
    __m256d r = _mm256_fmsub_pd(_mm256_set1_pd(vexp_inv_ln2_n), xd, kd);
    __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    __m256i t = _mm256_i64gather_epi64((const long long *)vexp_table, idx, 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(vexp_c0), _mm256_set1_pd(vexp_c1));
    __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(vexp_c2), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, _mm256_castsi256_pd(t)));
}
static inline __m256 vexp8(__m256 x) {
    return _mm256_set_m128(vexp4(_mm256_extractf128_ps(x, 1)), vexp4(_mm256_castps256_ps128(x)));
}
#endif

static void expf_row_vec(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        int plain = vexp_plain_lanes(v);
        _mm256_storeu_ps(y + i, vexp8(v));
        if (plain != 0xff)
            for (int l = 0; l < 8; l++)
                if (!(plain >> l & 1)) y[i + l] = expf(x[i + l]);
    }
    for (; i < n; i++) y[i] = expf(x[i]);
}

static void expf_row(float *y, const float *x, int n) {
    if (vexp_ok) expf_row_vec(y, x, n);
    else ll_expf_row_libm(y, x, n);
}

/* tanhf as glibc computes it (its single-precision tanhf and expm1f, both from fdlibm,
 * plain float operations with no fused step): for 2^-55 <= |x| < 1, tanh x = -t / (t + 2)
 * with t = expm1f(-2|x|), the sign of x put back. expm1f reduces y = -2|x| by k ln 2
 * (k = 0 up to ln2/2, -1 up to 1.5 ln2, else trunc(y / ln2 - 1/2): -2 or -3 here, k ln 2 in
 * a high and a low part, c the reduction's rounding), takes the same rational
 * approximation and rebuilds e^y - 1 as fdlibm does for each k; |y| < 2^-25 is y itself.
 * Lanes outside that range (0, tiny, |x| >= 1, infinities, NaN) call tanhf. Checked against
 * the C library at start-up with expf (vexp_check); if any input differs, tanhf is called
 * for every element. */
static inline __m256i vtanh_in_range(__m256 x) {
    __m256i ix = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(0x24000000), ix),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3f800000), ix));
}

static inline __m256 vtanh8(__m256 x) {
#define F(v) _mm256_set1_ps(v)
#define I(v) _mm256_set1_epi32((int)(v))
#define BITS(u) _mm256_castsi256_ps(I(u))
    const __m256 sign = BITS(0x80000000u);
    const __m256 ln2_hi = BITS(0x3f317180), ln2_lo = BITS(0x3717f7d1), invln2 = BITS(0x3fb8aa3b);
    __m256 y = _mm256_mul_ps(_mm256_andnot_ps(sign, x), F(-2.0f));
    __m256i hy = _mm256_and_si256(_mm256_castps_si256(y), I(0x7fffffff));
    __m256 k0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(I(0x3eb17219), hy));   /* k = 0 */
    __m256 k1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(I(0x3f851592), hy));   /* k = -1 (where not k0) */
    __m256 tiny = _mm256_castsi256_ps(_mm256_cmpgt_epi32(I(0x33000000), hy));
    __m256i kn = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(invln2, y), F(-0.5f)));
    __m256 tk = _mm256_cvtepi32_ps(kn);
    __m256 hi = _mm256_blendv_ps(_mm256_sub_ps(y, _mm256_mul_ps(tk, ln2_hi)), _mm256_add_ps(y, ln2_hi), k1);
    __m256 lo = _mm256_blendv_ps(_mm256_mul_ps(tk, ln2_lo), _mm256_xor_ps(ln2_lo, sign), k1);
    __m256 xr = _mm256_sub_ps(hi, lo);
    __m256 c = _mm256_sub_ps(_mm256_sub_ps(hi, xr), lo);
    xr = _mm256_blendv_ps(xr, y, k0);
    __m256 hfx = _mm256_mul_ps(F(0.5f), xr), hxs = _mm256_mul_ps(xr, hfx);
    __m256 p = _mm256_mul_ps(BITS(0xb457edbb), hxs);
    p = _mm256_mul_ps(_mm256_add_ps(p, BITS(0x36867e54)), hxs);
    p = _mm256_mul_ps(_mm256_add_ps(p, BITS(0xb8a670cd)), hxs);
    p = _mm256_mul_ps(_mm256_add_ps(p, BITS(0x3ad00d01)), hxs);
    p = _mm256_mul_ps(_mm256_add_ps(p, BITS(0xbd088889)), hxs);
    __m256 r1 = _mm256_add_ps(p, F(1.0f));
    __m256 t = _mm256_sub_ps(F(3.0f), _mm256_mul_ps(r1, hfx));
    __m256 e = _mm256_mul_ps(_mm256_div_ps(_mm256_sub_ps(r1, t), _mm256_sub_ps(F(6.0f), _mm256_mul_ps(xr, t))), hxs);
    __m256 res0 = _mm256_sub_ps(xr, _mm256_sub_ps(_mm256_mul_ps(xr, e), hxs));
    __m256 e2 = _mm256_sub_ps(_mm256_sub_ps(_mm256_mul_ps(_mm256_sub_ps(e, c), xr), c), hxs);
    __m256 res1 = _mm256_sub_ps(_mm256_mul_ps(_mm256_sub_ps(xr, e2), F(0.5f)), F(0.5f));
    __m256i yy = _mm256_castps_si256(_mm256_sub_ps(F(1.0f), _mm256_sub_ps(e2, xr)));
    __m256 res2 = _mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(yy, _mm256_slli_epi32(kn, 23))), F(1.0f));
    __m256 em1 = _mm256_blendv_ps(_mm256_blendv_ps(res2, res1, k1), res0, k0);
    em1 = _mm256_blendv_ps(em1, y, tiny);
    __m256 z = _mm256_div_ps(_mm256_xor_ps(em1, sign), _mm256_add_ps(em1, F(2.0f)));
    return _mm256_xor_ps(z, _mm256_and_ps(x, sign));
#undef F
#undef I
#undef BITS
}

/* y[i] = tanhf(x[i]·inv)·cap, the C library's tanhf bits (y may be x) */
static void tanhf_scaled_row_vec(float *y, const float *x, float inv, float cap, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(inv));
        int plain = _mm256_movemask_ps(_mm256_castsi256_ps(vtanh_in_range(v)));
        __m256 r = _mm256_mul_ps(vtanh8(v), _mm256_set1_ps(cap));
        if (plain == 0xff) {
            _mm256_storeu_ps(y + i, r);
            continue;
        }
        float xs[8];
        _mm256_storeu_ps(xs, v);
        _mm256_storeu_ps(y + i, r);
        for (int l = 0; l < 8; l++)
            if (!(plain >> l & 1)) y[i + l] = tanhf(xs[l]) * cap;
    }
    for (; i < n; i++) y[i] = tanhf(x[i] * inv) * cap;
}

/* The table, then the vector path against expf on inputs across the plain range (every
 * table entry, both signs, the ends), and the vector tanhf against tanhf; once
 * (vexp_once), so that a kernel set made again never rewrites the table under a running
 * attention */
static void vexp_check(void) {
    for (int i = 0; i < 32; i++) {
        double v = (double)exp2l((long double)i / 32);
        uint64_t u;
        memcpy(&u, &v, 8);
        vexp_table[i] = u - ((uint64_t)i << 47);
    }
    enum { N = 4096 };
    float x[N], got[N];
    uint32_t u = 0x9e3779b9u;
    for (int i = 0; i < N; i++) {
        u = u * 1664525u + 1013904223u;
        x[i] = i < N / 2 ? -88.0f * (float)(u >> 8) * 0x1p-24f : 88.0f * ((float)(u >> 8) * 0x1p-23f - 1.0f);
    }
    x[0] = 0.0f; x[1] = -0.0f; x[2] = -87.9999f; x[3] = 87.9999f; x[4] = 1e-30f; x[5] = -1e-30f;
    expf_row_vec(got, x, N);
    int ok = 1;
    for (int i = 0; i < N; i++) {
        float want = expf(x[i]);
        ok &= memcmp(&want, &got[i], 4) == 0;
    }
    vexp_ok = ok;
    /* tanhf: random magnitudes over every binade of its vector range and past its ends, both
     * signs, and each side of expm1f's reduction boundaries (|x| = 0x3e317218, 0x3f051592
     * as bits, half of expm1f's) */
    for (int i = 0; i < N; i++) {
        u = u * 1664525u + 1013904223u;
        uint32_t b = (u & 0x80000000u) | (((u >> 23) % 72 + 70) << 23) | (u & 0x7fffff);
        memcpy(&x[i], &b, 4);
    }
    static const uint32_t edges[] = {0x24000000, 0x3e317218, 0x3f051592, 0x3f800000, 0x33000000};
    for (int e = 0; e < (int)(sizeof edges / sizeof edges[0]); e++)
        for (int d = -2; d <= 2; d++) {
            uint32_t b = edges[e] + (uint32_t)d;
            memcpy(&x[e * 5 + d + 2], &b, 4);
        }
    tanhf_scaled_row_vec(got, x, 1.0f, 1.0f, N);
    ok = 1;
    for (int i = 0; i < N; i++) {
        float want = tanhf(x[i]);
        ok &= memcmp(&want, &got[i], 4) == 0;
    }
    vtanh_ok = ok;
}

/* ll_attend_f16_scalar in three passes over chunks of keys, with the same operations per
 * head in the same order: the scores of all heads (independent, so they pipeline), then
 * each head's running max, sum and factors (the libm expf calls of the scalar loop), then
 * the f16 V accumulation, whose fma -> f16 -> f32 chain runs for two heads side by side
 * when they fit the registers. K and V rows are read once per chunk for all the heads. */
#define ATT_CHUNK 64
#define ATT_MAX_HEADS 4

/* acc[b] = f16(acc[b]·ms) when ms is not 1 (the scalar loop's rescale at a new max, which
 * leaves an f16 value unchanged when ms is 1), then acc[b] = f16(v·vs + acc[b]). */
static inline __attribute__((always_inline)) void att_accumulate(float *accf, const uint16_t *V, int W, int first,
                                                                 int ring, int c0, int m, const float *ms,
                                                                 const float *vs, const int nv, const int HP,
                                                                 int stride) {
    __m256 acc[2][32];
    for (int h = 0; h < HP; h++)
        #pragma GCC unroll 32
        for (int b = 0; b < nv; b++) acc[h][b] = _mm256_loadu_ps(accf + (size_t)h * (size_t)stride + 8 * b);
    for (int j = 0; j < m; j++) {
        const uint16_t *v = V + (size_t)ll_ring_cell(first + c0 + j, ring) * W;
        for (int h = 0; h < HP; h++) {
            float msj = ms[h * ATT_CHUNK + j];
            if (msj != 1.0f) {
                __m256 vms = _mm256_set1_ps(msj);
                #pragma GCC unroll 32
                for (int b = 0; b < nv; b++)
                    acc[h][b] = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(acc[h][b], vms), _MM_FROUND_TO_NEAREST_INT));
            }
        }
        #pragma GCC unroll 32
        for (int b = 0; b < nv; b++) {
            __m256 vv = load_f16(v + 8 * b);
            for (int h = 0; h < HP; h++)
                acc[h][b] = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_fmadd_ps(vv, _mm256_set1_ps(vs[h * ATT_CHUNK + j]), acc[h][b]),
                                                            _MM_FROUND_TO_NEAREST_INT));
        }
    }
    for (int h = 0; h < HP; h++)
        #pragma GCC unroll 32
        for (int b = 0; b < nv; b++) _mm256_storeu_ps(accf + (size_t)h * (size_t)stride + 8 * b, acc[h][b]);
}

#ifdef LL_AVX512
/* att_accumulate on 16 lanes a register (nz of them a head, HP heads side by side): the
 * same operations per lane, so the same bits, in half the instructions */
static inline __attribute__((always_inline)) void att_accumulate_zmm(float *accf, const uint16_t *V, int W, int first,
                                                                     int ring, int c0, int m, const float *ms,
                                                                     const float *vs, const int nz, const int HP,
                                                                     int stride) {
    __m512 acc[4][16];
    #pragma GCC unroll 4
    for (int h = 0; h < HP; h++)
        #pragma GCC unroll 16
        for (int b = 0; b < nz; b++) acc[h][b] = _mm512_loadu_ps(accf + (size_t)h * (size_t)stride + 16 * b);
    for (int j = 0; j < m; j++) {
        const uint16_t *v = V + (size_t)ll_ring_cell(first + c0 + j, ring) * W;
        #pragma GCC unroll 4
        for (int h = 0; h < HP; h++) {
            float msj = ms[h * ATT_CHUNK + j];
            if (msj != 1.0f) {
                __m512 vms = _mm512_set1_ps(msj);
                #pragma GCC unroll 16
                for (int b = 0; b < nz; b++)
                    acc[h][b] = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_mul_ps(acc[h][b], vms), _MM_FROUND_TO_NEAREST_INT));
            }
        }
        #pragma GCC unroll 16
        for (int b = 0; b < nz; b++) {
            __m512 vv = load_f16x16(v + 16 * b);
            #pragma GCC unroll 4
            for (int h = 0; h < HP; h++)
                acc[h][b] = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_fmadd_ps(vv, _mm512_set1_ps(vs[h * ATT_CHUNK + j]), acc[h][b]),
                                                            _MM_FROUND_TO_NEAREST_INT));
        }
    }
    #pragma GCC unroll 4
    for (int h = 0; h < HP; h++)
        #pragma GCC unroll 16
        for (int b = 0; b < nz; b++) _mm512_storeu_ps(accf + (size_t)h * (size_t)stride + 16 * b, acc[h][b]);
}

/* dot_x_f16's four 16-lane accumulators of a widened query against nz blocks of a widened
 * key: accumulator j takes blocks j, j + 4, j + 8, ... in order, so a key may come in
 * pieces of whole groups of four blocks (q then points at the piece's queries) */
static inline __attribute__((always_inline)) void qk_lanes_acc(__m512 a[4], const float *q, const __m512 *kz, int nz) {
    #pragma GCC unroll 8
    for (int b = 0; b < nz; b += 4)
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * (b + j)), kz[b + j], a[j]);
}
/* the accumulators' first sums, (a0 + a2) + (a1 + a3) */
static inline __m512 qk_lanes_sum(const __m512 a[4]) { return _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3])); }

/* qk_lanes_acc over a whole key (D a multiple of 64, so no tail) from zero, and its first sums */
static inline __attribute__((always_inline)) __m512 qk_lanes_zmm(const float *q, const __m512 *kz, int nz) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    qk_lanes_acc(a, q, kz, nz);
    return qk_lanes_sum(a);
}

/* dot_x_f16 of a widened query against a widened key: qk_lanes_zmm, then its reduction
 * step for step */
static inline __attribute__((always_inline)) float dot_qk_zmm(const float *q, const __m512 *kz, int nz) {
    __m512 s = qk_lanes_zmm(q, kz, nz);
    __m256 t3 = add_halves(s);
    __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    __m128 r = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* As a key is scored, fetch the key 16 cells on and this cell's value, which the
 * accumulation reads after the chunk's softmax (the rows are W apart: one after another in
 * the head-major cache, see attention.c). bytes: one row's, a multiple of 64. */
#define KV_FETCH_AHEAD 16
static inline __attribute__((always_inline)) void fetch_kv_ahead(const uint16_t *K, const uint16_t *V, int W, int cell,
                                                                 int ring, int bytes) {
    const char *k = (const char *)(K + (size_t)ll_ring_cell(cell + KV_FETCH_AHEAD, ring) * W), *v = (const char *)(V + (size_t)ll_ring_cell(cell, ring) * W);
    for (int b = 0; b < bytes; b += 64) {
        _mm_prefetch(k + b, _MM_HINT_T0);
        _mm_prefetch(v + b, _MM_HINT_T0);
    }
}

/* The scores of m keys against nh widened queries, 16 keys at a time: each key's lanes as
 * dot_qk_zmm makes them (qk_lanes_zmm, the key widened once for all heads), the
 * horizontal sums sixteen at once. sc rows have room for m rounded up to 16. Heads longer
 * than 128 (nz > 8) need nh as a constant at the call. Gemma 4's heads of 256 and 512 this
 * way instead of one horizontal sum per key and head (dot_qk_zmm), with their values widened
 * once for four heads (or two) instead of for each: one thread, 1024 keys of four heads from
 * cache, 79.5-83.3 -> 61.9-64.0 ns a key at 256, 147.7-149.4 -> 115.2-118.8 at 512; two
 * heads 48.7-57.8 -> 37.6-38.2 at 256, 89.6-114.2 -> 75.7-83.5 at 512. */
static inline __attribute__((always_inline)) void qk_scores16_zmm(const uint16_t *K, const uint16_t *V, int W, int first,
                                                                  int ring, int c0, int m, float (*qf)[512], int nh,
                                                                  const int nz, float scale, float (*sc)[ATT_CHUNK]) {
    for (int j0 = 0; j0 < m; j0 += 16) {
        __m512 part[ATT_MAX_HEADS][16];
        int cnt = m - j0 < 16 ? m - j0 : 16;
        for (int jj = 0; jj < cnt; jj++) {
            const uint16_t *kk = K + (size_t)ll_ring_cell(first + c0 + j0 + jj, ring) * W;
            fetch_kv_ahead(K, V, W, first + c0 + j0 + jj, ring, nz * 32);
            if (nz <= 8) {
                __m512 kz[8];
                #pragma GCC unroll 8
                for (int b = 0; b < nz; b++) kz[b] = load_f16x16(kk + 16 * b);
                for (int h = 0; h < nh; h++) part[h][jj] = qk_lanes_zmm(qf[h], kz, nz);
                continue;
            }
            /* longer heads (256, 512): the key widened 128 dims at a time into the heads'
             * accumulators (qk_lanes_acc piece by piece: qk_lanes_zmm's order) */
            __m512 a[ATT_MAX_HEADS][4];   /* nh is a constant here (see the callers): registers */
            #pragma GCC unroll 4
            for (int h = 0; h < nh; h++)
                #pragma GCC unroll 4
                for (int j = 0; j < 4; j++) a[h][j] = _mm512_setzero_ps();
            for (int c = 0; c < nz; c += 8) {
                __m512 kz[8];
                #pragma GCC unroll 8
                for (int b = 0; b < 8; b++) kz[b] = load_f16x16(kk + 16 * (c + b));
                #pragma GCC unroll 4
                for (int h = 0; h < nh; h++) qk_lanes_acc(a[h], qf[h] + 16 * c, kz, 8);
            }
            #pragma GCC unroll 4
            for (int h = 0; h < nh; h++) part[h][jj] = qk_lanes_sum(a[h]);
        }
        for (int h = 0; h < nh; h++)   /* dot_qk_zmm's reduction, sixteen keys at once, times scale */
            _mm512_storeu_ps(&sc[h][j0], _mm512_mul_ps(reduce16_many(part[h], cnt), _mm512_set1_ps(scale)));
    }
}

#endif

#ifndef LL_AVX512
/* reduce_4x16's last steps for eight keys at once, from each key's t3 (reduce_4x16_t3):
 * the high and low 128 bits, then elements 0 + 2 and 1 + 3, then those two, by shuffles
 * across the eight vectors instead of one chain per key. Lane j of the result is key j's
 * sum, bit for bit. */
static inline __m256 reduce8_t3(const __m256 *v) {
    __m256 u[4];   /* [t6 of key 2p | t6 of key 2p + 1] */
    #pragma GCC unroll 4
    for (int p = 0; p < 4; p++)
        u[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31), _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20));
    /* [k0: 0+2, 1+3, k2: 0+2, 1+3 | the same for k1, k3], and for keys 4-7 */
    __m256 w0 = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 w1 = _mm256_add_ps(_mm256_shuffle_ps(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));   /* keys 0 2 4 6 1 3 5 7 in order */
}

/* The scores of m keys against nh widened queries (D a multiple of 64), eight keys at a
 * time: each key's lanes as dot_x_f16 makes them and its reduction (reduce8_t3 for the
 * last steps), times scale. At D = 64 a key is widened once for all heads. */
static inline __attribute__((always_inline)) void qk_scores8_ymm(const uint16_t *K, int W, int first, int ring, int c0,
                                                                 int m, float (*qf)[512], int nh, const int D, float scale,
                                                                 float (*sc)[ATT_CHUNK]) {
    for (int j0 = 0; j0 < m; j0 += 8) {
        __m256 t3[ATT_MAX_HEADS][8];
        int cnt = m - j0 < 8 ? m - j0 : 8;
        for (int jj = 0; jj < 8; jj++) {
            if (jj >= cnt) {
                for (int h = 0; h < nh; h++) t3[h][jj] = _mm256_setzero_ps();
                continue;
            }
            const uint16_t *kk = K + (size_t)ll_ring_cell(first + c0 + j0 + jj, ring) * W;
            __m256 kz[8];
            if (D == 64)
                #pragma GCC unroll 8
                for (int b = 0; b < 8; b++) kz[b] = load_f16(kk + 8 * b);
            for (int h = 0; h < nh; h++) {
                __m256 lo[4], hi[4];
                #pragma GCC unroll 4
                for (int j = 0; j < 4; j++) lo[j] = hi[j] = _mm256_setzero_ps();
                for (int i = 0; i < D; i += 64)
                    #pragma GCC unroll 4
                    for (int j = 0; j < 4; j++) {
                        __m256 k0 = D == 64 ? kz[2 * j] : load_f16(kk + i + 16 * j), k1 = D == 64 ? kz[2 * j + 1] : load_f16(kk + i + 16 * j + 8);
                        lo[j] = _mm256_fmadd_ps(_mm256_loadu_ps(qf[h] + i + 16 * j), k0, lo[j]);
                        hi[j] = _mm256_fmadd_ps(_mm256_loadu_ps(qf[h] + i + 16 * j + 8), k1, hi[j]);
                    }
                t3[h][jj] = reduce_4x16_t3(lo, hi);
            }
        }
        for (int h = 0; h < nh; h++) {
            __m256 r = _mm256_mul_ps(reduce8_t3(t3[h]), _mm256_set1_ps(scale));
            if (cnt == 8) _mm256_storeu_ps(&sc[h][j0], r);
            else {
                float tmp[8];
                _mm256_storeu_ps(tmp, r);
                memcpy(&sc[h][j0], tmp, sizeof(float) * (size_t)cnt);
            }
        }
    }
}
#endif

/* The scalar loop's bookkeeping for NH heads over a chunk of m scores: the expf arguments
 * first (each key against the running max before it), then all the exponentials at once,
 * then its assignments (factors ms, vs and the running sum). Each head's chain keeps its
 * order; the heads go side by side (NH a constant, so their maxima and sums stay in
 * registers), which overlaps the latency of one head's running sum with the others'. */
static inline __attribute__((always_inline)) void att_softmax(const int NH, float (*sc)[ATT_CHUNK], int m, float *M, float *S,
                                                              float (*ms)[ATT_CHUNK], float (*vs)[ATT_CHUNK]) {
    float arg[ATT_MAX_HEADS][ATT_CHUNK], e[ATT_MAX_HEADS][ATT_CHUNK], Mh[ATT_MAX_HEADS], Sh[ATT_MAX_HEADS];
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++) Mh[h] = M[h];
    for (int j = 0; j < m; j++)
        #pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            float s = sc[h][j];
            if (s > Mh[h]) { arg[h][j] = Mh[h] - s; Mh[h] = s; }
            else arg[h][j] = s - Mh[h];
        }
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++) { expf_row(e[h], arg[h], m); Mh[h] = M[h]; Sh[h] = S[h]; }
    for (int j = 0; j < m; j++)
        #pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            float s = sc[h][j], a = 1.0f, b = 1.0f;
            if (s > Mh[h]) { a = e[h][j]; Mh[h] = s; }   /* the same questions, the same answers */
            else b = e[h][j];
            ms[h][j] = a;
            vs[h][j] = b;
            Sh[h] = fmaf(Sh[h], a, b);
        }
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++) { M[h] = Mh[h]; S[h] = Sh[h]; }
}

/* The vector bookkeepings' last step: each head's running sum over the chunk's factors,
 * S = S·ms + vs key by key, the heads side by side, as att_softmax's loop makes it */
static inline __attribute__((always_inline)) void att_running_sums(const int NH, int m, float *S,
                                                                   float (*ms)[ATT_CHUNK], float (*vs)[ATT_CHUNK]) {
    float Sh[ATT_MAX_HEADS];
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++) Sh[h] = S[h];
    for (int j = 0; j < m; j++)
        #pragma GCC unroll 4
        for (int h = 0; h < NH; h++) Sh[h] = fmaf(Sh[h], ms[h][j], vs[h][j]);
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++) S[h] = Sh[h];
}

#ifdef LL_AVX512
/* Lanes moved up by k, the low k from fill */
#define LANES_UP(x, fill, k) _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(x), _mm512_castps_si512(fill), 16 - (k)))

/* The lanes of a 16-key vector that hold keys when left keys remain */
static inline __mmask16 keys_mask16(int left) { return left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1); }

/* The running maximum after each of 16 scores, starting from M: the scalar loop's
 * "if (s > M) M = s" as a scan. max_ps(later, earlier) keeps the earlier when they
 * compare equal (and for +0 against -0), as the loop keeps M, so any order of combining
 * gives the loop's bits, NaN aside (att_softmax16 leaves NaN scores to the loop). */
static inline __m512 running_max16(__m512 s, __m512 M) {
    const __m512 lo = _mm512_set1_ps(-INFINITY);
    s = _mm512_max_ps(s, LANES_UP(s, lo, 1));
    s = _mm512_max_ps(s, LANES_UP(s, lo, 2));
    s = _mm512_max_ps(s, LANES_UP(s, lo, 4));
    s = _mm512_max_ps(s, LANES_UP(s, lo, 8));
    return _mm512_max_ps(s, M);
}

/* att_softmax sixteen keys a vector: each key's comparison with the running maximum
 * before it (running_max16 moved up a lane) and its expf argument as the loop makes
 * them, the factors ms and vs by mask; only the running sums stay a scalar chain, in
 * their order. Returns 0, touching nothing, when a score is NaN (the loop then runs).
 * The loop's bookkeeping was 18% of the samples of a call on llama-3.2-1b's head groups
 * (4 heads of 64); with this, a layer's 8 groups from cache, one thread: 90 keys 18.0 ->
 * 16.3 us, 420 keys 77.1 -> 70.8 us; a token's attention at 400 tokens of context (two
 * threads, the two kernels alternating token by token): 1.20 and 1.08 -> 1.00 and 0.97 ms. */
static inline __attribute__((always_inline)) int att_softmax16(const int NH, float (*sc)[ATT_CHUNK], int m, float *M,
                                                               float *S, float (*ms)[ATT_CHUNK], float (*vs)[ATT_CHUNK]) {
    float arg[ATT_MAX_HEADS][ATT_CHUNK], e[ATT_MAX_HEADS][ATT_CHUNK];
    __mmask16 up[ATT_MAX_HEADS][ATT_CHUNK / 16];   /* keys that raised the maximum */
    const __m512 lo = _mm512_set1_ps(-INFINITY), one = _mm512_set1_ps(1.0f);
    for (int h = 0; h < NH; h++)
        for (int j0 = 0; j0 < m; j0 += 16) {
            __mmask16 k = keys_mask16(m - j0);
            __m512 s = _mm512_maskz_loadu_ps(k, &sc[h][j0]);
            if (_mm512_mask_cmp_ps_mask(k, s, s, _CMP_UNORD_Q)) return 0;
        }
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        __m512 Mv = _mm512_set1_ps(M[h]);
        for (int j0 = 0; j0 < m; j0 += 16) {
            __mmask16 k = keys_mask16(m - j0);
            __m512 s = _mm512_mask_loadu_ps(lo, k, &sc[h][j0]);
            __m512 run = running_max16(s, Mv), before = LANES_UP(run, Mv, 1);
            __mmask16 gt = _mm512_cmp_ps_mask(s, before, _CMP_GT_OQ);
            _mm512_storeu_ps(&arg[h][j0], _mm512_mask_blend_ps(gt, _mm512_sub_ps(s, before), _mm512_sub_ps(before, s)));
            up[h][j0 / 16] = gt;
            Mv = _mm512_permutexvar_ps(_mm512_set1_epi32(31 - __builtin_clz((unsigned)k)), run);   /* the last key's */
        }
        M[h] = _mm512_cvtss_f32(Mv);
        expf_row(e[h], arg[h], m);
        for (int j0 = 0; j0 < m; j0 += 16) {   /* the first m only: e holds no more */
            __mmask16 k = keys_mask16(m - j0);
            __m512 ev = _mm512_maskz_loadu_ps(k, &e[h][j0]);
            _mm512_mask_storeu_ps(&ms[h][j0], k, _mm512_mask_blend_ps(up[h][j0 / 16], one, ev));
            _mm512_mask_storeu_ps(&vs[h][j0], k, _mm512_mask_blend_ps(up[h][j0 / 16], ev, one));
        }
    }
    att_running_sums(NH, m, S, ms, vs);
    return 1;
}
#else
/* Lanes moved up by k (1, 2 or 4; idx the matching permutation), the low k from fill */
#define LANES_UP8(x, fill, k, idx) _mm256_blend_ps(_mm256_permutevar8x32_ps((x), (idx)), (fill), (1 << (k)) - 1)

/* att_softmax16 eight keys a vector, for the AVX2 set: the same scan (max_ps keeps the
 * earlier of equal scores here too), arguments, factors and running sums in order; 0,
 * touching nothing, when a score is NaN. */
static inline __attribute__((always_inline)) int att_softmax16(const int NH, float (*sc)[ATT_CHUNK], int m, float *M,
                                                               float *S, float (*ms)[ATT_CHUNK], float (*vs)[ATT_CHUNK]) {
    float arg[ATT_MAX_HEADS][ATT_CHUNK], e[ATT_MAX_HEADS][ATT_CHUNK];
    __m256 up[ATT_MAX_HEADS][ATT_CHUNK / 8];   /* keys that raised the maximum */
    const __m256 lo = _mm256_set1_ps(-INFINITY), one = _mm256_set1_ps(1.0f);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), idx1 = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6),
                  idx2 = _mm256_setr_epi32(0, 0, 0, 1, 2, 3, 4, 5), idx4 = _mm256_setr_epi32(0, 0, 0, 0, 0, 1, 2, 3);
#define KEYS8(j0) _mm256_cmpgt_epi32(_mm256_set1_epi32(m - (j0)), lane)   /* the lanes that hold keys */
    for (int h = 0; h < NH; h++)
        for (int j0 = 0; j0 < m; j0 += 8) {
            __m256i k = KEYS8(j0);
            __m256 s = _mm256_maskload_ps(&sc[h][j0], k);
            if (_mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(s, s, _CMP_UNORD_Q), _mm256_castsi256_ps(k)))) return 0;
        }
    #pragma GCC unroll 4
    for (int h = 0; h < NH; h++) {
        __m256 Mv = _mm256_set1_ps(M[h]);
        for (int j0 = 0; j0 < m; j0 += 8) {
            __m256i k = KEYS8(j0);
            __m256 s = _mm256_blendv_ps(lo, _mm256_maskload_ps(&sc[h][j0], k), _mm256_castsi256_ps(k));
            __m256 run = _mm256_max_ps(s, LANES_UP8(s, lo, 1, idx1));   /* the running maximum, as a scan */
            run = _mm256_max_ps(run, LANES_UP8(run, lo, 2, idx2));
            run = _mm256_max_ps(_mm256_max_ps(run, LANES_UP8(run, lo, 4, idx4)), Mv);
            __m256 before = LANES_UP8(run, Mv, 1, idx1), gt = _mm256_cmp_ps(s, before, _CMP_GT_OQ);
            _mm256_storeu_ps(&arg[h][j0], _mm256_blendv_ps(_mm256_sub_ps(s, before), _mm256_sub_ps(before, s), gt));
            up[h][j0 / 8] = gt;
            Mv = _mm256_permutevar8x32_ps(run, _mm256_set1_epi32((m - j0 < 8 ? m - j0 : 8) - 1));   /* the last key's */
        }
        M[h] = _mm256_cvtss_f32(Mv);
        expf_row(e[h], arg[h], m);
        for (int j0 = 0; j0 < m; j0 += 8) {   /* the first m only: e holds no more */
            __m256i k = KEYS8(j0);
            __m256 ev = _mm256_maskload_ps(&e[h][j0], k);
            _mm256_maskstore_ps(&ms[h][j0], k, _mm256_blendv_ps(one, ev, up[h][j0 / 8]));
            _mm256_maskstore_ps(&vs[h][j0], k, _mm256_blendv_ps(ev, one, up[h][j0 / 8]));
        }
    }
#undef KEYS8
    att_running_sums(NH, m, S, ms, vs);
    return 1;
}
#endif

static void attend_f16(const uint16_t *q16, const uint16_t *K, const uint16_t *V, int W, int D, int nh, int first,
                       int n, int ring, float scale, uint16_t *acc16, float *out) {
    if (D % 8 || D > 512 || nh > ATT_MAX_HEADS) {
        ll_attend_f16_scalar(q16, K, V, W, D, nh, first, n, ring, scale, acc16, out);
        return;
    }
    float qf[ATT_MAX_HEADS][512], accf[ATT_MAX_HEADS][512];   /* q widened once; f16 accumulators held as f32 */
    float sc[ATT_MAX_HEADS][ATT_CHUNK], ms[ATT_MAX_HEADS][ATT_CHUNK], vs[ATT_MAX_HEADS][ATT_CHUNK];
    float M[ATT_MAX_HEADS], S[ATT_MAX_HEADS];
    int nv = D / 8;
    for (int h = 0; h < nh; h++) {
        for (int b = 0; b < nv; b++) {
            _mm256_storeu_ps(qf[h] + 8 * b, load_f16(q16 + (size_t)h * D + 8 * b));
            _mm256_storeu_ps(accf[h] + 8 * b, _mm256_setzero_ps());
        }
        M[h] = -INFINITY;
        S[h] = 0;
    }
    for (int c0 = 0; c0 < n; c0 += ATT_CHUNK) {
        int m = n - c0 < ATT_CHUNK ? n - c0 : ATT_CHUNK;
        int scored = 1;   /* all the chunk's scores done by a sixteen- or eight-key path below */
#ifdef LL_AVX512
        /* the common sizes: each key in registers for all heads, sums sixteen keys at once */
        if (D == 64) qk_scores16_zmm(K, V, W, first, ring, c0, m, qf, nh, 4, scale, sc);
        else if (D == 128) qk_scores16_zmm(K, V, W, first, ring, c0, m, qf, nh, 8, scale, sc);
        /* longer heads four or two at a time, nh passed as a constant (the accumulators
         * then stay in registers) */
        else if (D == 256 && nh == 4) qk_scores16_zmm(K, V, W, first, ring, c0, m, qf, 4, 16, scale, sc);
        else if (D == 512 && nh == 4) qk_scores16_zmm(K, V, W, first, ring, c0, m, qf, 4, 32, scale, sc);
        else if (D == 256 && nh == 2) qk_scores16_zmm(K, V, W, first, ring, c0, m, qf, 2, 16, scale, sc);
        else if (D == 512 && nh == 2) qk_scores16_zmm(K, V, W, first, ring, c0, m, qf, 2, 32, scale, sc);
        else scored = 0;
#else
        if (D == 64) qk_scores8_ymm(K, W, first, ring, c0, m, qf, nh, 64, scale, sc);
        else if (D % 64 == 0) qk_scores8_ymm(K, W, first, ring, c0, m, qf, nh, D, scale, sc);
        else scored = 0;
#endif
        for (int j = 0; j < m && !scored; j++) {
            const uint16_t *kk = K + (size_t)ll_ring_cell(first + c0 + j, ring) * W;
#ifdef LL_AVX512
            if (D % 64 == 0) {
                __m512 kz[32];
                for (int b = 0; b < D / 16; b++) kz[b] = load_f16x16(kk + 16 * b);
                for (int h = 0; h < nh; h++) sc[h][j] = dot_qk_zmm(qf[h], kz, D / 16) * scale;
                continue;
            }
#endif
            for (int h = 0; h < nh; h++) sc[h][j] = dot_f32w_f16(qf[h], kk, D) * scale;
        }
        /* the heads are independent: a head with a NaN score goes through the loop alone */
        if (nh == 4) {
            if (!att_softmax16(4, sc, m, M, S, ms, vs)) att_softmax(4, sc, m, M, S, ms, vs);
        } else
            for (int h = 0; h < nh; h++)
                if (!att_softmax16(1, sc + h, m, M + h, S + h, ms + h, vs + h)) att_softmax(1, sc + h, m, M + h, S + h, ms + h, vs + h);
        int h = 0;
#ifdef LL_AVX512
        if (D == 64) {
            for (; h + 4 <= nh; h += 4) att_accumulate_zmm(accf[h], V, W, first, ring, c0, m, ms[h], vs[h], 4, 4, 512);
            for (; h + 2 <= nh; h += 2) att_accumulate_zmm(accf[h], V, W, first, ring, c0, m, ms[h], vs[h], 4, 2, 512);
        }
        if (D == 128)
            for (; h + 2 <= nh; h += 2) att_accumulate_zmm(accf[h], V, W, first, ring, c0, m, ms[h], vs[h], 8, 2, 512);
        if (D % 128 == 0 && D > 128) {   /* longer heads: each value widened once for four or two */
            for (; h + 4 <= nh; h += 4)
                for (int b0 = 0; b0 < D; b0 += 64)
                    att_accumulate_zmm(accf[h] + b0, V + b0, W, first, ring, c0, m, ms[h], vs[h], 4, 4, 512);
            for (; h + 2 <= nh; h += 2)
                for (int b0 = 0; b0 < D; b0 += 128)
                    att_accumulate_zmm(accf[h] + b0, V + b0, W, first, ring, c0, m, ms[h], vs[h], 8, 2, 512);
        }
        for (; h < nh && D % 256 == 0; h++)
            for (int b0 = 0; b0 < D; b0 += 256)
                att_accumulate_zmm(accf[h] + b0, V + b0, W, first, ring, c0, m, ms[h], vs[h], 16, 1, 512);
#endif
        if (D == 64)
            for (; h + 2 <= nh; h += 2) att_accumulate(accf[h], V, W, first, ring, c0, m, ms[h], vs[h], 8, 2, 512);
        for (; h < nh; h++) {
            if (D == 64) att_accumulate(accf[h], V, W, first, ring, c0, m, ms[h], vs[h], 8, 1, 512);
            else if (D == 128) att_accumulate(accf[h], V, W, first, ring, c0, m, ms[h], vs[h], 16, 1, 512);
            else if (D == 256) att_accumulate(accf[h], V, W, first, ring, c0, m, ms[h], vs[h], 32, 1, 512);
            else {   /* other sizes: 64 dims a pass, then 8 at a time */
                int b0 = 0;
                for (; b0 + 8 <= nv; b0 += 8)
                    att_accumulate(accf[h] + 8 * b0, V + 8 * b0, W, first, ring, c0, m, ms[h], vs[h], 8, 1, 512);
                for (; b0 < nv; b0++)
                    att_accumulate(accf[h] + 8 * b0, V + 8 * b0, W, first, ring, c0, m, ms[h], vs[h], 1, 1, 512);
            }
        }
    }
    for (int h = 0; h < nh; h++) {
        float inv = S[h] == 0 ? 0 : 1.0f / S[h];
        __m256 vinv = _mm256_set1_ps(inv);
        for (int b = 0; b < nv; b++) _mm256_storeu_ps(out + (size_t)h * D + 8 * b, _mm256_mul_ps(_mm256_loadu_ps(accf[h] + 8 * b), vinv));
    }
}

/* ll_exp_simd of eight lanes: the same operations in the same order (fused multiply-adds
 * are exact-rounded in a vector as in fmaf), so the same bits. Returns 0, computing
 * nothing, when a lane's 2^n is not a normal float: the caller then goes scalar. */
static inline int exp8(__m256 x, __m256 *e) {
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    __m256 nn = _mm256_sub_ps(z, shift);
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(nn, absmask), _mm256_set1_ps(126.0f), _CMP_GT_OQ))) return 0;
    __m256 b = _mm256_fnmadd_ps(nn, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(nn, _mm256_set1_ps(0x1.62e4p-1f), x));
    __m256 uu = _mm256_mul_ps(b, b);
    __m256 hi = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), uu,
                                _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f)));
    __m256 j = _mm256_fmadd_ps(hi, uu, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nn), _mm256_set1_epi32(127)), 23));
    *e = _mm256_mul_ps(j, p2);
    return 1;
}

/* x / (1 + e^-x) of eight lanes (-x exact, by the sign bit), ll_silu's bits */
static inline __m256 silu8(__m256 x) {
    __m256 e;
    if (exp8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)), &e)) return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    float v[8];
    _mm256_storeu_ps(v, x);
    for (int l = 0; l < 8; l++) v[l] = ll_silu_inline(v[l]);
    return _mm256_loadu_ps(v);
}

/* ll_swiglu, eight lanes at a time; the tail past the last 16 as ll_swiglu_scalar takes it. */
static void swiglu(float *g, const float *u, int64_t n) {
    int64_t body = n - n % 16, i = 0;
    for (; i + 8 <= body; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i), e;
        if (!exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv), &e)) {
            for (int l = 0; l < 8; l++) g[i + l] = ll_silu_inline(g[i + l]) * u[i + l];
            continue;
        }
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u + i)));
    }
    ll_swiglu_scalar(g + i, u + i, n - i);
}

static void exp_shifted(float *y, const float *x, float sub, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(sub)), e;
        if (exp8(v, &e)) _mm256_storeu_ps(y + i, e);
        else for (int l = 0; l < 8; l++) y[i + l] = ll_exp_simd_inline(x[i + l] - sub);
    }
    for (; i < n; i++) y[i] = ll_exp_simd_inline(x[i] - sub);
}

static void silu(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = ll_silu_inline(x[i]);
}

/* ll_relu2: max(x, 0) returns its second operand for a NaN or a zero of either sign, so
 * x > 0 ? x : 0 exactly; then the same square. The tail as ll_relu2_scalar takes it. */
static void relu2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 r = _mm256_max_ps(_mm256_loadu_ps(x + i), _mm256_setzero_ps());
        _mm256_storeu_ps(x + i, _mm256_mul_ps(r, r));
    }
    ll_relu2_scalar(x + i, n - i);
}

/* ll_rope's head: adjacent pairs four at a time (x0 and x1 duplicated across each pair,
 * the pair's cos/sin swapped for x1's product, fmaddsub subtracting in the even lanes and
 * adding in the odd), neox halves eight at a time (cos and sin unzipped); the tail as the
 * scalar loop, whose fmaf is what these fused operations compute. */
static void rope_head(float *v, int half, int neox, const float *cs) {
    int i = 0;
    if (neox)
        for (; i + 8 <= half; i += 8) {
            __m256 c0 = _mm256_loadu_ps(cs + 2 * i), c1 = _mm256_loadu_ps(cs + 2 * i + 8);
            __m256 co = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(c0, c1, 0x88)), 0xD8));
            __m256 si = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(c0, c1, 0xDD)), 0xD8));
            __m256 x0 = _mm256_loadu_ps(v + i), x1 = _mm256_loadu_ps(v + i + half);
            _mm256_storeu_ps(v + i, _mm256_fmsub_ps(x0, co, _mm256_mul_ps(x1, si)));
            _mm256_storeu_ps(v + i + half, _mm256_fmadd_ps(x0, si, _mm256_mul_ps(x1, co)));
        }
    else
        for (; i + 4 <= half; i += 4) {
            __m256 x = _mm256_loadu_ps(v + 2 * i), c = _mm256_loadu_ps(cs + 2 * i);
            __m256 t = _mm256_mul_ps(_mm256_movehdup_ps(x), _mm256_permute_ps(c, 0xB1));   /* x1·sin, x1·cos */
            _mm256_storeu_ps(v + 2 * i, _mm256_fmaddsub_ps(_mm256_moveldup_ps(x), c, t));
        }
    for (; i < half; i++) {
        int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        float x0 = v[a], x1 = v[b], co = cs[2 * i], si = cs[2 * i + 1];
        v[a] = fmaf(x0, co, -(x1 * si));
        v[b] = fmaf(x0, si, x1 * co);
    }
}

/* [8 channels][4 taps] to [4 taps][8 channels]: pairs interleaved within lanes, then the
 * channels put back in order (the unpacks leave them 0 2 4 6 | 1 3 5 7). */
static inline void taps_4x8(const float *w, __m256 tap[4]) {
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 a0 = _mm256_loadu_ps(w), a1 = _mm256_loadu_ps(w + 8), a2 = _mm256_loadu_ps(w + 16), a3 = _mm256_loadu_ps(w + 24);
    __m256d l01 = _mm256_castps_pd(_mm256_unpacklo_ps(a0, a1)), h01 = _mm256_castps_pd(_mm256_unpackhi_ps(a0, a1));
    __m256d l23 = _mm256_castps_pd(_mm256_unpacklo_ps(a2, a3)), h23 = _mm256_castps_pd(_mm256_unpackhi_ps(a2, a3));
    tap[0] = _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(l01, l23)), order);
    tap[1] = _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_unpackhi_pd(l01, l23)), order);
    tap[2] = _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(h01, h23)), order);
    tap[3] = _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_unpackhi_pd(h01, h23)), order);
}

/* eight channels at a time: each lane the fmaf chain of scalar.c's conv_silu (weights
 * of other tap counts gathered, K apart), then the bias and SiLU */
static void conv_silu(float *out, const float *const *src, const float *w, int K, const float *bias, int64_t n) {
    int64_t i = 0;
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(K));
    if (K == 4)   /* the usual kernel: eight channels' taps as four loads and a transpose, not gathers */
        for (; i + 8 <= n; i += 8) {
            __m256 tap[4], s = _mm256_setzero_ps();
            taps_4x8(w + (size_t)i * 4, tap);
            for (int k = 0; k < 4; k++) s = _mm256_fmadd_ps(_mm256_loadu_ps(src[k] + i), tap[k], s);
            if (bias) s = _mm256_add_ps(s, _mm256_loadu_ps(bias + i));
            _mm256_storeu_ps(out + i, silu8(s));
        }
    for (; i + 8 <= n; i += 8) {
        __m256 s = _mm256_setzero_ps();
        for (int k = 0; k < K; k++)
            s = _mm256_fmadd_ps(_mm256_loadu_ps(src[k] + i), _mm256_i32gather_ps(w + (size_t)i * K + k, idx, 4), s);
        if (bias) s = _mm256_add_ps(s, _mm256_loadu_ps(bias + i));
        _mm256_storeu_ps(out + i, silu8(s));
    }
    for (; i < n; i++) {
        float s = 0.0f;
        for (int k = 0; k < K; k++) s = fmaf(src[k][i], w[i * K + k], s);
        if (bias) s += bias[i];
        out[i] = ll_silu_inline(s);
    }
}

/* ll_geglu eight lanes at a time: the f16 rounding of x by F16C (round to nearest even,
 * as ll_fp32_to_fp16), the table lookups, and the same products; the range cut-offs as
 * blends. */
static void geglu(float *g, const float *u, int64_t n) {
    const uint16_t *table = ll_gelu_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
        uint16_t h[8], t[8];
        _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        for (int l = 0; l < 8; l++) t[l] = table[h[l]];
        __m256 r = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t)), uv);
        r = _mm256_blendv_ps(r, _mm256_mul_ps(x, uv), _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
        r = _mm256_blendv_ps(r, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
        _mm256_storeu_ps(g + i, r);
    }
    ll_geglu_scalar(g + i, u + i, n - i);
}

static void axpy(float *y, const float *x, float a, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(x + i), va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(x[i], a, y[i]);
}

/* scalar.c's deltanet_rows with dot_f32's accumulators and axpy's fused multiply-add:
 * pass 1 decays the row and reads it against k, pass 2 updates it and reads it against q
 * (the row is still in L1). Tails past the last 64 as dot_f32 and axpy take them. */
#define STATE_ROWS_AHEAD 4   /* recurrent state rows fetched ahead: cold, one token after their last use */
static void deltanet_rows(float *M, const float *k, const float *q, const float *v, float decay, float beta, float scale,
                          float *o, int S) {
    const __m256 vdecay = _mm256_set1_ps(decay);
    int n64 = S & ~63;
    for (int j = 0; j < S; j++) {
        float *row = M + (size_t)j * S;
        for (int i = 0; i < S; i += 16) _mm_prefetch((const char *)(row + (size_t)STATE_ROWS_AHEAD * S + i), _MM_HINT_T0);
        __m256 lo[4], hi[4];
        for (int c = 0; c < 4; c++) lo[c] = hi[c] = _mm256_setzero_ps();
        for (int i = 0; i < n64; i += 64)
            for (int c = 0; c < 4; c++) {
                __m256 r0 = _mm256_mul_ps(_mm256_loadu_ps(row + i + 16 * c), vdecay);
                __m256 r1 = _mm256_mul_ps(_mm256_loadu_ps(row + i + 16 * c + 8), vdecay);
                _mm256_storeu_ps(row + i + 16 * c, r0);
                _mm256_storeu_ps(row + i + 16 * c + 8, r1);
                lo[c] = _mm256_fmadd_ps(r0, _mm256_loadu_ps(k + i + 16 * c), lo[c]);
                hi[c] = _mm256_fmadd_ps(r1, _mm256_loadu_ps(k + i + 16 * c + 8), hi[c]);
            }
        for (int i = n64; i < S; i++) row[i] *= decay;
        double sum = reduce_4x16(lo, hi);
        for (int i = n64; i < S; i++) sum += (double)(row[i] * k[i]);
        float delta = beta * (v[j] - (float)sum);
        const __m256 vdelta = _mm256_set1_ps(delta);
        for (int c = 0; c < 4; c++) lo[c] = hi[c] = _mm256_setzero_ps();
        for (int i = 0; i < n64; i += 64)
            for (int c = 0; c < 4; c++) {
                __m256 r0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 16 * c), vdelta, _mm256_loadu_ps(row + i + 16 * c));
                __m256 r1 = _mm256_fmadd_ps(_mm256_loadu_ps(k + i + 16 * c + 8), vdelta, _mm256_loadu_ps(row + i + 16 * c + 8));
                _mm256_storeu_ps(row + i + 16 * c, r0);
                _mm256_storeu_ps(row + i + 16 * c + 8, r1);
                lo[c] = _mm256_fmadd_ps(r0, _mm256_loadu_ps(q + i + 16 * c), lo[c]);
                hi[c] = _mm256_fmadd_ps(r1, _mm256_loadu_ps(q + i + 16 * c + 8), hi[c]);
            }
        for (int i = n64; i < S; i++) row[i] = fmaf(k[i], delta, row[i]);
        sum = reduce_4x16(lo, hi);
        for (int i = n64; i < S; i++) sum += (double)(row[i] * q[i]);
        o[j] = (float)sum * scale;
    }
}

static float ssm_scan(float *st, const float *B, const float *C, float dA, float xdt, int n) {
    /* the next rows of a head's state follow this one: fetch ahead, as deltanet_rows does */
    for (int i = 0; i < n; i += 16) _mm_prefetch((const char *)(st + (size_t)STATE_ROWS_AHEAD * n + i), _MM_HINT_T0);
    __m256 lo[4], hi[4], vdA = _mm256_set1_ps(dA), vx = _mm256_set1_ps(xdt);
    for (int j = 0; j < 4; j++) lo[j] = hi[j] = _mm256_setzero_ps();
    int np = n & ~63, i = 0;
    for (; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++) {
                int o = i + 16 * j + 8 * h;
                /* the two products rounded, then the add: no contraction here */
                __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(st + o), vdA), _mm256_mul_ps(_mm256_loadu_ps(B + o), vx));
                _mm256_storeu_ps(st + o, v);
                if (h) hi[j] = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + o), hi[j]);
                else lo[j] = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + o), lo[j]);
            }
    float sum = reduce_4x16(lo, hi);
    for (; i < n; i++) {
        float v = st[i] * dA + B[i] * xdt;
        st[i] = v;
        sum = fmaf(v, C[i], sum);
    }
    return sum;
}

/* The set; with_extensions = 0 leaves out the AVX-512 kernels that need AVX512_BF16 or
 * GFNI on top (what a CPU with only F/BW/VL/VNNI, a Cascade Lake, gets), which
 * LLAMBDA_ISA=avx512-base and the tests choose here. */
static void fill_kernels(ll_kernels *k, int with_extensions) {
    k->isa = with_extensions ? ISA_NAME : ISA_NAME "-base";
    k->vec_dot[LLAMBDA_TYPE_F32] = dot_f32;
    k->vec_dot[LLAMBDA_TYPE_F16] = dot_f16;
    k->vec_dot[LLAMBDA_TYPE_Q8_0] = dot_q8_0;
    k->vec_dot[LLAMBDA_TYPE_Q4_0] = dot_q4_0;
    k->vec_dot[LLAMBDA_TYPE_Q5_0] = dot_q5_0;
    k->vec_dot_x8_t4[LLAMBDA_TYPE_Q5_0] = dot_q5_0_x8_t4;
    k->pack_x8[LLAMBDA_TYPE_Q5_0] = pack_q5_0_x8;
    k->dot_packed[LLAMBDA_TYPE_Q5_0] = dot_q5_0_packed;
#ifdef LL_AVX512
    k->dot_packed2[LLAMBDA_TYPE_Q5_0] = dot_q5_0_packed2;
#endif
    k->vec_dot[LLAMBDA_TYPE_Q4_K] = ll_avx2_dot_q4_K;
    k->vec_dot_x8[LLAMBDA_TYPE_Q4_K] = dot_q4_K_x8;
    k->vec_dot_x8_t4[LLAMBDA_TYPE_Q4_K] = dot_q4_K_x8_t4;
#ifndef LL_AVX512
    k->pack_x8[LLAMBDA_TYPE_Q4_K] = pack_q4_K_x8;
    k->dot_packed[LLAMBDA_TYPE_Q4_K] = dot_q4_K_packed;
    k->pack_x8[LLAMBDA_TYPE_Q6_K] = pack_q6_K_x8;
    k->dot_packed[LLAMBDA_TYPE_Q6_K] = dot_q6_K_packed;
#endif
    k->pack_x8[LLAMBDA_TYPE_Q8_0] = pack_q8_0_x8;
    k->dot_packed[LLAMBDA_TYPE_Q8_0] = dot_q8_0_packed;
    k->pack_x8[LLAMBDA_TYPE_Q4_0] = pack_q4_0_x8;
    k->dot_packed[LLAMBDA_TYPE_Q4_0] = dot_q4_0_packed;
    k->vec_dot_x8_t4[LLAMBDA_TYPE_Q6_K] = dot_q6_K_x8_t4;
    k->vec_dot_x8_t4[LLAMBDA_TYPE_Q8_0] = dot_q8_0_x8_t4;
    k->vec_dot_x8_t4[LLAMBDA_TYPE_Q4_0] = dot_q4_0_x8_t4;
    k->vec_dot[LLAMBDA_TYPE_BF16] = dot_bf16;
    k->gemm[LLAMBDA_TYPE_F16] = gemm_f16_ymm;   /* the AVX-512 set replaces both below, BF16 where it can */
    k->gemm_act[LLAMBDA_TYPE_F16] = LL_ACT_F16_PASS;
    k->from_float[LL_ACT_F16_PASS] = pass_row_f16;
    k->gemm[LLAMBDA_TYPE_BF16] = gemm_bf16_ymm;
    k->gemm_act[LLAMBDA_TYPE_BF16] = LL_ACT_BF16_PASS4;
    k->from_float[LL_ACT_BF16_PASS4] = pass4_row_bf16;
    k->pack_x8[LLAMBDA_TYPE_F16] = k->pack_x8[LLAMBDA_TYPE_BF16] = pack_rows16_x8;
    k->dot_packed[LLAMBDA_TYPE_F16] = dot_f16_rows;
    k->dot_packed[LLAMBDA_TYPE_BF16] = dot_bf16_rows;
    k->pack_x8[LLAMBDA_TYPE_F32] = pack_rows32_x8;
    k->dot_packed[LLAMBDA_TYPE_F32] = dot_f32_rows;
#ifdef LL_AVX512
    k->pack_x8[LLAMBDA_TYPE_F16] = pack_f16_tile;
    k->dot_packed[LLAMBDA_TYPE_F16] = dot_f16_tiles;
    k->pack_x8[LLAMBDA_TYPE_Q4_K] = pack_q4_K_r8;
    k->dot_packed[LLAMBDA_TYPE_Q4_K] = dot_q4_K_r8;
    k->dot_packed2[LLAMBDA_TYPE_Q4_0] = dot_q4_0_packed2;
    k->dot_packed2[LLAMBDA_TYPE_IQ4_XS] = dot_iq4_xs_packed2;
    k->pack_x8[LLAMBDA_TYPE_Q6_K] = pack_q6_K_r8;
    k->dot_packed[LLAMBDA_TYPE_Q6_K] = dot_q6_K_r8;
    k->vec_dot_x8[LLAMBDA_TYPE_F16] = dot_f16_x8;
    k->gemm[LLAMBDA_TYPE_F32] = gemm_f32;
    k->gemm[LLAMBDA_TYPE_F16] = gemm_f16;
    k->gemm_tiles[LLAMBDA_TYPE_F16] = gemm_f16_tiles;
    k->gemm_act[LLAMBDA_TYPE_F32] = LLAMBDA_TYPE_F32;   /* F16 keeps the AVX2 set's LL_ACT_F16_PASS */
    if (with_extensions && ll_cpu_has_avx512_bf16()) {   /* else BF16 keeps dot_bf16, the emulation */
        k->vec_dot[LLAMBDA_TYPE_BF16] = dot_bf16_dp;
        k->vec_dot_x8[LLAMBDA_TYPE_BF16] = dot_bf16_x8;
        k->pack_x8[LLAMBDA_TYPE_BF16] = pack_bf16_tile;
        k->dot_packed[LLAMBDA_TYPE_BF16] = dot_bf16_tiles;
        k->gemm[LLAMBDA_TYPE_BF16] = gemm_bf16;
        k->gemm_tiles[LLAMBDA_TYPE_BF16] = gemm_bf16_tiles;
        k->gemm_act[LLAMBDA_TYPE_BF16] = LL_ACT_BF16_PASS;
        k->from_float[LL_ACT_BF16_PASS] = pass_row_bf16;
    }
#endif
    k->vec_dot[LLAMBDA_TYPE_Q5_K] = dot_q5_K;
    k->pack_x8[LLAMBDA_TYPE_Q5_K] = pack_q5_K_r8;
    k->dot_packed[LLAMBDA_TYPE_Q5_K] = dot_q5_K_r8;
#ifdef LL_AVX512
    if (with_extensions && ll_cpu_has_gfni()) {
        k->dot_packed[LLAMBDA_TYPE_Q5_K] = dot_q5_K_r8_gfni;
        k->dot_packed[LLAMBDA_TYPE_Q6_K] = dot_q6_K_r8_gfni;
    }
#endif
    k->vec_dot[LLAMBDA_TYPE_Q6_K] = dot_q6_K;
    k->vec_dot[LLAMBDA_TYPE_Q4_1] = dot_q4_1;
    k->vec_dot[LLAMBDA_TYPE_Q5_1] = dot_q5_1;
    k->vec_dot[LLAMBDA_TYPE_IQ4_NL] = dot_iq4_nl;
    k->vec_dot[LLAMBDA_TYPE_MXFP4] = dot_mxfp4;
    k->vec_dot_x8[LLAMBDA_TYPE_Q4_1] = dot_q4_1_x8;
    k->vec_dot_x8[LLAMBDA_TYPE_Q5_1] = dot_q5_1_x8;
    k->vec_dot_x8[LLAMBDA_TYPE_IQ4_NL] = dot_iq4_nl_x8;
    k->vec_dot_x8[LLAMBDA_TYPE_MXFP4] = dot_mxfp4_x8;
    k->pack_x8[LLAMBDA_TYPE_Q4_1] = pack_q4_1_x8;
    k->dot_packed[LLAMBDA_TYPE_Q4_1] = dot_q4_1_packed;
    k->pack_x8[LLAMBDA_TYPE_Q5_1] = pack_q5_1_x8;
    k->dot_packed[LLAMBDA_TYPE_Q5_1] = dot_q5_1_packed;
    k->pack_x8[LLAMBDA_TYPE_IQ4_NL] = pack_iq4_nl_x8;
    k->dot_packed[LLAMBDA_TYPE_IQ4_NL] = dot_iq4_nl_packed;
    k->pack_x8[LLAMBDA_TYPE_MXFP4] = pack_mxfp4_x8;
    k->dot_packed[LLAMBDA_TYPE_MXFP4] = dot_mxfp4_packed;
    k->vec_dot[LLAMBDA_TYPE_Q2_K] = dot_q2_K;
    k->pack_x8[LLAMBDA_TYPE_Q2_K] = pack_q2_K_x8;
    k->dot_packed[LLAMBDA_TYPE_Q2_K] = dot_q2_K_packed;
    k->vec_dot[LLAMBDA_TYPE_Q3_K] = dot_q3_K;
    k->pack_x8[LLAMBDA_TYPE_Q3_K] = pack_q3_K_x8;
    k->dot_packed[LLAMBDA_TYPE_Q3_K] = dot_q3_K_packed;
    k->vec_dot[LLAMBDA_TYPE_IQ4_XS] = dot_iq4_xs;
    k->pack_x8[LLAMBDA_TYPE_IQ4_XS] = pack_iq4_xs_x8;
    k->dot_packed[LLAMBDA_TYPE_IQ4_XS] = dot_iq4_xs_packed;
    k->dot_f16_f16 = dot_f16_f16;
    k->attend_f16 = attend_f16;
    pthread_once(&vexp_once, vexp_check);
    k->expf_row = vexp_ok ? expf_row_vec : ll_expf_row_libm;
    k->tanhf_scaled_row = vtanh_ok ? tanhf_scaled_row_vec : ll_tanhf_scaled_row_libm;
    k->swiglu = swiglu;
    k->relu2 = relu2;
    k->rope_head = rope_head;
    k->geglu = geglu;
    k->axpy = axpy;
    k->deltanet_rows = deltanet_rows;
    k->exp_shifted = exp_shifted;
    k->silu = silu;
    k->conv_silu = conv_silu;
    k->ssm_scan = ssm_scan;
    k->from_float[LLAMBDA_TYPE_Q8_0] = quantize_row_q8_0;
    k->from_float[LLAMBDA_TYPE_Q8_K] = quantize_row_q8_K;
    k->from_float[LLAMBDA_TYPE_F16] = convert_row_f16;
    k->from_float[LLAMBDA_TYPE_BF16] = convert_row_bf16;
    k->from_float[LL_ACT_F16_AS_F32] = round_row_f16;
}

void ll_kernels_avx2(ll_kernels *k) { fill_kernels(k, 1); }
#ifdef LL_AVX512
void ll_kernels_avx512_base(ll_kernels *k) { fill_kernels(k, 0); }
#endif
