/* The kernel contract (src/internal.h): every multi-row / multi-token variant gives, for each
 * output element, the bits of the single-row vec_dot, and every ISA gives the bits of the
 * scalar kernels. Random rows of every weight type, compared element by element. */
#include "harness.h"
#include "model.h"
#include <stdatomic.h>
#include <math.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) * 0x1.0p-53 * 2 - 1);
}

enum { ROWS = 8, TOKS = 4, COLS = 1024 };

/* rows x cols weights of `type` and TOKS activation rows converted to its vec_dot_type */
static void compare_at(const ll_kernels *ref, const ll_kernels *k, int type, int cols) {
    const llambda_type_traits *t = llambda_type_get(type);
    int vdt = ll_vec_dot_type(type);
    size_t wrow = (size_t)llambda_type_row_bytes(type, cols), xrow = (size_t)ll_act_row_bytes(vdt, cols);
    uint8_t *w = malloc(wrow * 2 * ROWS), *x = malloc(xrow * TOKS);   /* 16 rows: two tiles for the pair kernels */
    float *f = malloc(sizeof(float) * cols);
    for (int r = 0; r < 2 * ROWS; r++) {
        for (int i = 0; i < cols; i++) f[i] = frand() * (i % 61 == 0 ? 6.f : 1.f);
        t->quantize_row(f, w + (size_t)r * wrow, cols);
    }
    for (int s = 0; s < TOKS; s++) {
        for (int i = 0; i < cols; i++) f[i] = frand() * 3.f;
        k->from_float[vdt](f, x + (size_t)s * xrow, cols);
    }
    float want[TOKS][ROWS], got[TOKS][ROWS];
    int bad = 0;
    for (int s = 0; s < TOKS; s++)
        for (int r = 0; r < ROWS; r++) {
            ref->vec_dot[type](cols, &want[s][r], w + (size_t)r * wrow, x + (size_t)s * xrow);
            float v;
            k->vec_dot[type](cols, &v, w + (size_t)r * wrow, x + (size_t)s * xrow);
            bad += memcmp(&v, &want[s][r], sizeof v) != 0;
        }
    CHECK(!bad, "%s: %s vec_dot differs from scalar in %d of %d elements", t->name, k->isa, bad, ROWS * TOKS);
    if (k->vec_dot_x8[type]) {
        bad = 0;
        for (int s = 0; s < TOKS; s++) {
            k->vec_dot_x8[type](cols, got[s], w, wrow, x + (size_t)s * xrow);
            bad += memcmp(got[s], want[s], sizeof got[s]) != 0;
        }
        CHECK(!bad, "%s: %s 8-row kernel differs from the single-row one", t->name, k->isa);
    }
    if (k->vec_dot_x8_t4[type]) {
        memset(got, 0, sizeof got);
        k->vec_dot_x8_t4[type](cols, &got[0][0], ROWS, w, wrow, x, xrow);
        CHECK(memcmp(got, want, sizeof got) == 0, "%s: %s 8-row x 4-token kernel differs from the single-row one",
              t->name, k->isa);
    }
    if (k->pack_x8[type]) {
        size_t size = k->pack_x8[type](cols, w, wrow, NULL);
        uint8_t *packed = malloc(size);
        CHECK(k->pack_x8[type](cols, w, wrow, packed) == size, "%s: packed size changed", t->name);
        for (int nt = 1; nt <= TOKS; nt++) {
            memset(got, 0, sizeof got);
            k->dot_packed[type](cols, &got[0][0], ROWS, packed, x, xrow, nt);
            CHECK(memcmp(got, want, sizeof got[0] * (size_t)nt) == 0, "%s: %s repacked tile (%d tokens) differs from the single-row kernel",
                  t->name, k->isa, nt);
        }
        free(packed);
    }
    if (k->dot_packed2[type]) {   /* two adjacent packed tiles, 16 rows */
        float want2[TOKS][2 * ROWS], got2[TOKS][2 * ROWS];
        for (int s = 0; s < TOKS; s++)
            for (int r = 0; r < 2 * ROWS; r++) ref->vec_dot[type](cols, &want2[s][r], w + (size_t)r * wrow, x + (size_t)s * xrow);
        size_t size = k->pack_x8[type](cols, w, wrow, NULL);
        uint8_t *packed = malloc(2 * size);
        k->pack_x8[type](cols, w, wrow, packed);
        k->pack_x8[type](cols, w + ROWS * wrow, wrow, packed + size);
        for (int nt = 1; nt <= TOKS; nt++) {
            memset(got2, 0, sizeof got2);
            k->dot_packed2[type](cols, &got2[0][0], 2 * ROWS, packed, x, xrow, nt);
            CHECK(memcmp(got2, want2, sizeof got2[0] * (size_t)nt) == 0, "%s: %s pair of repacked tiles (%d tokens) differs from the single-row kernel",
                  t->name, k->isa, nt);
        }
        free(packed);
    }
    free(w); free(x); free(f);
}

/* whole groups of blocks, and a width whose blocks leave a group part-filled (the
 * AVX-512 Q8_0 tile keeps its blocks four to a group) */
static void compare(const ll_kernels *ref, const ll_kernels *k, int type) {
    compare_at(ref, k, type, COLS);
    compare_at(ref, k, type, COLS + 3 * (int)llambda_type_get(type)->block_elems);
}

#ifdef LL_HAVE_AVX2   /* only the x86 sets have prompt kernels for float weights */
/* How many of the first n_rows outputs of each of toks tokens (rows apart) differ in their bits */
static int rows_differing(const float *got, const float *want, int rows, int n_rows, int toks) {
    int bad = 0;
    for (int s = 0; s < toks; s++)
        for (int r = 0; r < n_rows; r++)
            bad += memcmp(&got[(size_t)s * (size_t)rows + (size_t)r], &want[(size_t)s * (size_t)rows + (size_t)r], 4) != 0;
    return bad;
}

/* A float weight type's prompt kernel (gemm) against the scalar single-row kernel, over
 * shapes with leftover rows, tokens and elements. */
static void compare_gemm(const ll_kernels *ref, const ll_kernels *k, int type) {
    if (!k->gemm[type]) return;
    const llambda_type_traits *t = llambda_type_get(type);
    int vdt = ll_vec_dot_type(type), gdt = k->gemm_act[type];
    /* (the wide ones take several blocks of rows, and a tail; every tile shape of the 6 x 4,
     * 4 x 6 and 3 x 4 kernels is among the leftovers; the last is all tail, in a whole tile) */
    const int shapes[][3] = {{1024, 8, 4}, {1000, 13, 13}, {72, 4, 7}, {2048, 17, 64}, {40, 3, 2}, {96, 11, 5},
                             {8192, 31, 6}, {4096 + 3 * 64 + 8, 7, 5}, {160, 6, 9}, {40, 9, 3}};
    const int n_table = (int)(sizeof shapes / sizeof shapes[0]);
    /* then 128 columns (whole 64-element steps, no tail: the F16 and BF16 tiles reduce
     * their outputs sixteen at a time there) at 1-12 rows by 1-7 tokens: every tile shape
     * of both kernels, alone and with others */
    for (int si = 0; si < n_table + 12 * 7; si++) {
        int n = si < n_table ? shapes[si][0] : 128, rows = si < n_table ? shapes[si][1] : 1 + (si - n_table) / 7,
            toks = si < n_table ? shapes[si][2] : 1 + (si - n_table) % 7;
        size_t wrow = (size_t)llambda_type_row_bytes(type, n), xrow = ll_act_row_bytes(vdt, n), grow = ll_act_row_bytes(gdt, n);
        uint8_t *w = malloc(wrow * (size_t)rows), *x = malloc(xrow * (size_t)toks), *gx = malloc(grow * (size_t)toks);
        void *scratch = malloc(ll_gemm_scratch_bytes(n));
        float *f = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)rows * (size_t)toks),
              *got = malloc(sizeof(float) * (size_t)rows * (size_t)toks);
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < n; i++) f[i] = frand() * (i % 61 == 0 ? 6.f : 1.f);
            t->quantize_row(f, w + (size_t)r * wrow, n);
        }
        for (int s = 0; s < toks; s++) {
            for (int i = 0; i < n; i++) f[i] = frand() * 3.f;
            ref->from_float[vdt](f, x + (size_t)s * xrow, n);
            k->from_float[gdt](f, gx + (size_t)s * grow, n);
        }
        for (int s = 0; s < toks; s++)
            for (int r = 0; r < rows; r++)
                ref->vec_dot[type](n, &want[(size_t)s * (size_t)rows + (size_t)r], w + (size_t)r * wrow, x + (size_t)s * xrow);
        memset(got, 0, sizeof(float) * (size_t)rows * (size_t)toks);
        k->gemm[type](n, got, (size_t)rows, w, wrow, rows, gx, grow, toks, scratch, NULL, 0);
        int bad = 0;
        for (int i = 0; i < rows * toks; i++) bad += memcmp(&got[i], &want[i], 4) != 0;
        CHECK(!bad, "%s: %s prompt kernel (%d x %d rows x %d tokens) differs from the single-row one in %d elements",
              t->name, k->isa, n, rows, toks, bad);
        if (k->pack_x8[type] && rows >= 8) {   /* the whole tiles' rows as repacked, their stride, the next rows fetched */
            size_t tile = k->pack_x8[type](n, w, wrow, NULL);
            int tiles = rows / 8;
            uint8_t *packed = malloc(tile * (size_t)tiles);
            for (int i = 0; i < tiles; i++) k->pack_x8[type](n, w + (size_t)i * 8 * wrow, wrow, packed + (size_t)i * tile);
            memset(got, 0, sizeof(float) * (size_t)rows * (size_t)toks);
            ll_gemm_fn gemm = k->gemm_tiles[type] ? k->gemm_tiles[type] : k->gemm[type];   /* as matmul.c picks it */
            gemm(n, got, (size_t)rows, packed, tile / 8, tiles * 8, gx, grow, toks, scratch, w, wrow * (size_t)rows);
            bad = rows_differing(got, want, rows, tiles * 8, toks);
            CHECK(!bad, "%s: %s prompt kernel on repacked rows (%d x %d rows x %d tokens) differs in %d elements", t->name,
                  k->isa, n, tiles * 8, toks, bad);
            /* and the tile kernel (one token at a time: decode) on the same tiles, these widths' tails too */
            memset(got, 0, sizeof(float) * (size_t)rows * (size_t)toks);
            for (int i = 0; i < tiles; i++) k->dot_packed[type](n, got + (size_t)i * 8, (size_t)rows, packed + (size_t)i * tile, x, xrow, toks);
            bad = rows_differing(got, want, rows, tiles * 8, toks);
            CHECK(!bad, "%s: %s tile kernel on repacked rows (%d x %d rows x %d tokens) differs in %d elements", t->name,
                  k->isa, n, tiles * 8, toks, bad);
            free(packed);
        }
        free(w); free(x); free(gx); free(scratch); free(f); free(want); free(got);
    }
}
#endif

/* An activation format in pass order holds, element for element, the values of the
 * plain rounded one (f16 held as f32, or bf16; NaN, infinities, overflow, subnormals,
 * ties included), whichever kernel set converts. */
static void compare_pass_format(const ll_kernels *ref, const ll_kernels *k, int pass_fmt, int round_fmt, int n_pass) {
    const int ns[] = {1000, 64, 40, 2048 + 32};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        int n = ns[ni];
        float *f = malloc(sizeof(float) * (size_t)n), *r = malloc(ll_act_row_bytes(round_fmt, n));
        uint16_t *p = malloc(ll_act_row_bytes(pass_fmt, n));
        for (int i = 0; i < n; i++) f[i] = frand() * (i % 7 == 0 ? 1e-6f : 8.f);
        f[1] = NAN; f[3] = -INFINITY; f[5] = 70000.f; f[9] = 65519.f; f[11] = 1e-7f; f[13] = -3e-39f;
        f[15] = 1.f + 1.f / 2048.f;   /* a tie in f16 */
        f[17] = 1.f + 1.f / 256.f;    /* a tie in bf16 */
        ref->from_float[round_fmt](f, r, n);
        k->from_float[pass_fmt](f, p, n);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            uint16_t h = p[ll_pass_index(i, n, n_pass)];
            if (round_fmt == LLAMBDA_TYPE_BF16) { bad += h != ((const uint16_t *)r)[i]; continue; }
            float v = ll_fp16_to_fp32(h);
            bad += memcmp(&v, &r[i], 4) != 0;
        }
        CHECK(!bad, "%s: pass-ordered activations (%d elements) differ from the rounded f32 ones in %d", k->isa, n, bad);
        free(f); free(r); free(p);
    }
}

/* bf16 values whose exponent field is drawn from [lo, hi]: low fields give subnormal
 * values and products and sums below FLT_MIN, where vdpbf16ps flushes to zero */
static uint16_t bf16_in(int lo, int hi) {
    uint16_t h;
    do {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        h = (uint16_t)((rng >> 20) & 0x807f);
        h |= (uint16_t)((lo + (int)((rng >> 40) % (uint64_t)(hi - lo + 1))) << 7);
    } while (((h >> 7) & 0xff) == 0xff);
    return h;
}

#ifdef LL_HAVE_AVX2
#include <immintrin.h>
__attribute__((target("avx512f,avx512bf16"))) static void dpbf16_hw(float c[16], const uint16_t a[32], const uint16_t b[32]) {
    _mm512_storeu_ps(c, _mm512_dpbf16_ps(_mm512_loadu_ps(c), (__m512bh)_mm512_loadu_si512(a), (__m512bh)_mm512_loadu_si512(b)));
}
#endif

/* BF16 rows and activations with exponents in [lo, hi] through every kernel a set has,
 * against the scalar kernel's bits */
static void compare_bf16_range(const ll_kernels *ref, const ll_kernels *k, int lo, int hi) {
    enum { N = 1000, R = 13, T = 5 };   /* a tail past the last 64-element step; tiles not full */
    static uint16_t w[R][N], x[T][N];
    static float xf[N], want[T][R], got[T][R];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) w[r][i] = bf16_in(lo, hi);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) x[t][i] = bf16_in(lo, hi);
    int bad = 0;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++) {
            ref->vec_dot[LLAMBDA_TYPE_BF16](N, &want[t][r], w[r], x[t]);
            float v;
            k->vec_dot[LLAMBDA_TYPE_BF16](N, &v, w[r], x[t]);
            bad += memcmp(&v, &want[t][r], 4) != 0;
        }
    CHECK(!bad, "%s: BF16 vec_dot with exponents %d..%d differs from scalar in %d of %d", k->isa, lo, hi, bad, R * T);
    if (k->vec_dot_x8[LLAMBDA_TYPE_BF16]) {
        bad = 0;
        for (int t = 0; t < T; t++) {
            k->vec_dot_x8[LLAMBDA_TYPE_BF16](N, got[t], w, sizeof w[0], x[t]);
            bad += memcmp(got[t], want[t], 8 * sizeof(float)) != 0;
        }
        CHECK(!bad, "%s: BF16 8-row kernel with exponents %d..%d differs from scalar", k->isa, lo, hi);
    }
    if (k->gemm[LLAMBDA_TYPE_BF16]) {
        int gdt = k->gemm_act[LLAMBDA_TYPE_BF16];
        size_t grow = ll_act_row_bytes(gdt, N);
        uint8_t *gx = malloc(grow * T);
        void *scratch = malloc(ll_gemm_scratch_bytes(N));
        for (int t = 0; t < T; t++) {
            for (int i = 0; i < N; i++) xf[i] = ll_bf16_to_fp32(x[t][i]);   /* exact: converts back to x */
            k->from_float[gdt](xf, gx + (size_t)t * grow, N);
        }
        memset(got, 0, sizeof got);
        k->gemm[LLAMBDA_TYPE_BF16](N, &got[0][0], R, w, sizeof w[0], R, gx, grow, T, scratch, NULL, 0);
        CHECK(!memcmp(got, want, sizeof got), "%s: BF16 prompt kernel with exponents %d..%d differs from scalar", k->isa, lo, hi);
        free(gx); free(scratch);
    }
}

/* A pool task that sums its share of numbers, then leaves a prefetch for its idle time. */
typedef struct { const int *v; int n; atomic_long sum; const uint8_t *fetch; size_t fetch_bytes; ll_pool *pool; } sum_task;
static void sum_share(void *arg, int ith, int nth) {
    sum_task *s = arg;
    long sum = 0;
    for (int i = ith; i < s->n; i += nth) sum += s->v[i];
    atomic_fetch_add(&s->sum, sum);
    ll_pool_fetch_while_idle(s->pool, ith, s->fetch + (size_t)ith * s->fetch_bytes, s->fetch_bytes);
}

/* ll_sum_squares (ops/norm.c), the norms' Σx²: every length through a few rounds of its
 * eight sums and its tail, against a sequential long double sum of the same float
 * squares; squares of small integers sum exactly in either order. */
static void test_sum_squares(void) {
    float x[2048];
    uint32_t r = 12345;
    for (int i = 0; i < 2048; i++) { r = r * 1103515245u + 12345u; x[i] = (float)((int)(r >> 8) % 20001 - 10000) * 1e-3f; }
    for (int n = 0; n <= 2048; n = n < 40 ? n + 1 : 2 * n) {
        long double want = 0;
        for (int i = 0; i < n; i++) want += (long double)(x[i] * x[i]);
        double got = ll_sum_squares(x, n);
        CHECK(fabsl((long double)got - want) <= 1e-14L * (want > 1 ? want : 1), "n %d: %.17g against %.17Lg", n, got, want);
    }
    float k[37];
    double exact = 0;
    for (int i = 0; i < 37; i++) { k[i] = (float)(i - 18); exact += (double)(i - 18) * (i - 18); }
    CHECK(ll_sum_squares(k, 37) == exact, "integers: %.17g against %.17g", ll_sum_squares(k, 37), exact);
}

/* RMS norm's scaling and the residual add, four lanes at a time: every element as the
 * scalar loops compute it ((x·scale)·w rounded twice; y + x), at every length 0-40 and
 * 64-2048 (a vector body that skipped or doubled a tail element fails), with and without
 * a weight, and a norm in place (y = x). */
static void test_norm_add_lanes(void) {
    static float x[2048], w[2048], y[2048], z[2048];
    uint32_t r = 777;
    for (int i = 0; i < 2048; i++) {
        r = r * 1103515245u + 12345u; x[i] = (float)((int)(r >> 8) % 20001 - 10000) * 1e-3f;
        r = r * 1103515245u + 12345u; w[i] = (float)((int)(r >> 8) % 2001) * 1e-3f;
    }
    ll_weight wt = {.type = LLAMBDA_TYPE_F32, .cols = 2048, .rows = 1, .n_mat = 1, .row_bytes = 2048 * 4, .data = (const uint8_t *)w};
    for (int n = 0; n <= 2048; n = n < 40 ? n + 1 : 2 * n) {
        for (int with_w = 0; with_w < 2; with_w++) {
            float scale = 1.0f / sqrtf((float)(ll_sum_squares(x, n) / (n ? n : 1)) + 1e-5f);
            for (int i = 0; i < 2048; i++) y[i] = -7.0f;
            if (n) ll_rms_norm_rows(y, x, with_w ? &wt : NULL, n, 1, 1e-5f);
            int bad = -1;
            for (int i = 0; i < n && bad < 0; i++) {
                float want = with_w ? (x[i] * scale) * w[i] : x[i] * scale;
                if (memcmp(&want, &y[i], 4)) bad = i;
            }
            CHECK(bad < 0, "norm n %d weight %d: element %d differs", n, with_w, bad);
            CHECK(y[n] == -7.0f, "norm n %d weight %d wrote past the row", n, with_w);
        }
        for (int i = 0; i < 2048; i++) { y[i] = w[i]; z[i] = w[i] + x[i]; }
        ll_add(y, x, n);
        int bad = -1;
        for (int i = 0; i < 2048 && bad < 0; i++)
            if (memcmp(i < n ? &z[i] : &w[i], &y[i], 4)) bad = i;
        CHECK(bad < 0, "add n %d: element %d differs", n, bad);
    }
    memcpy(y, x, sizeof y);
    memcpy(z, x, sizeof z);
    ll_rms_norm_rows(z, z, &wt, 2048, 1, 1e-5f);
    ll_rms_norm_rows(y, x, &wt, 2048, 1, 1e-5f);
    CHECK(!memcmp(y, z, sizeof y), "a norm in place differs from one into another buffer");
}

enum { MAX_SETS = 4 };   /* the vector kernel sets one CPU can have: avx2, avx2-vnni, avx512, avx512-base */
static int vector_sets(ll_kernels sets[MAX_SETS]);   /* below */

/* Every set's repacked tile for type, 1-4 tokens (x_stride apart), against want[token][row]
 * (the scalar kernel's eight rows of w): bits equal at the integer extremes. */
static void check_tiles_at_extremes(int type, int n, const void *w, size_t wrow, const void *xq, size_t x_stride,
                                    const float want[4][8]) {
    ll_kernels kk[MAX_SETS];
    int nk = vector_sets(kk);
    for (int v = 0; v < nk; v++) {
        if (!kk[v].pack_x8[type]) continue;
        size_t size = kk[v].pack_x8[type](n, w, wrow, NULL);
        uint8_t *packed = malloc(size);
        kk[v].pack_x8[type](n, w, wrow, packed);
        for (int nt = 1; nt <= 4; nt++) {
            float got[4][8];
            memset(got, 0, sizeof got);
            kk[v].dot_packed[type](n, &got[0][0], 8, packed, xq, x_stride, nt);
            CHECK(!memcmp(got, want, sizeof got[0] * (size_t)nt), "%s: %s tile (%d tokens) differs at the extremes", kk[v].isa,
                  llambda_type_get(type)->name, nt);
        }
        free(packed);
    }
}

/* The prefetch distance (dispatch.c) follows the rate decode sets stream at, stays within
 * its two ends in whole lines, and only moves when bytes arrive: every kernel gives the
 * same bits at either end and far past its buffers (a prefetch never faults). */
static int ahead_after(double gbs_a_thread) {   /* sets of two threads, a millisecond each */
    for (int i = 0; i < 200; i++) ll_note_stream_rate((int64_t)(gbs_a_thread * 2e6), 1e-3, 2);
    return atomic_load(&ll_stream_ahead_bytes);
}

static void test_stream_ahead(const ll_kernels *scalar) {
    int was = atomic_load(&ll_stream_ahead_bytes);
    int slow = ahead_after(10), mid = ahead_after(28), fast = ahead_after(80), back = ahead_after(10);
    CHECK(slow == 4096 && fast == 6144 && back == 4096, "distance at 10, 80 and 10 GB/s a thread: %d, %d, %d (want 4096, 6144, 4096)",
          slow, fast, back);
    CHECK(mid > slow && mid < fast && mid % 64 == 0, "distance at 28 GB/s a thread: %d, not a line count between the ends", mid);
    ll_note_stream_rate(1 << 20, 0, 2);   /* no time, no threads, absurd rates: ignored */
    ll_note_stream_rate(1 << 20, 1e-3, 0);
    ll_note_stream_rate(INT64_MAX, 1e-9, 1);
    CHECK(atomic_load(&ll_stream_ahead_bytes) == back, "a degenerate timing moved the distance to %d", atomic_load(&ll_stream_ahead_bytes));
    const int types[] = {LLAMBDA_TYPE_Q4_K, LLAMBDA_TYPE_Q5_K, LLAMBDA_TYPE_Q6_K, LLAMBDA_TYPE_Q8_0,
                         LLAMBDA_TYPE_Q4_0, LLAMBDA_TYPE_IQ4_XS, LLAMBDA_TYPE_F16, LLAMBDA_TYPE_BF16};
    const int dists[] = {4096, 6144, 1 << 24};
    ll_kernels sets[MAX_SETS];
    int ns = vector_sets(sets);
    for (int d = 0; d < 3; d++) {
        atomic_store(&ll_stream_ahead_bytes, dists[d]);
        for (int v = 0; v < ns; v++)
            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) compare(scalar, &sets[v], types[t]);
    }
    atomic_store(&ll_stream_ahead_bytes, was);
    printf("  prefetch distance: %d B at 10 GB/s a thread, %d at 28, %d at 80\n", slow, mid, fast);
}

/* Decode's plan (ops/matmul.c): each token's product sets noted in order, the same ones
 * token after token, which is what lets a thread done with one set prefetch its rows of
 * the next; prompts leave it alone. And pool tasks run right while threads prefetch. */
static void test_decode_plan(void) {
    enum { N = 10000 };
    static int v[N];
    for (int i = 0; i < N; i++) v[i] = i % 97 - 40;
    long want = 0;
    for (int i = 0; i < N; i++) want += v[i];
    size_t fb = (size_t)3 << 20;
    uint8_t *buf = malloc(3 * fb);
    memset(buf, 1, 3 * fb);
    ll_pool *pool = ll_pool_create(3);
    for (int r = 0; r < 200 && pool; r++) {
        sum_task s = {v, N, 0, buf, r % 3 ? fb : 64, pool};
        ll_pool_run(pool, sum_share, &s);
        CHECK(atomic_load(&s.sum) == want, "pool task %d with idle prefetches: sum %ld, want %ld", r, atomic_load(&s.sum), want);
    }
    ll_pool_free(pool);
    free(buf);

    llambda_model *m = NULL;
    if (llambda_model_load(fixture("models/tiny-llama31-Q4_K_M.gguf"), NULL, &m)) { CHECK(0, "load: %s", llambda_last_error()); return; }
    llambda_context_params p = llambda_context_default_params();
    p.n_ctx = 64; p.n_threads = 2;
    llambda_context *c = NULL;
    if (llambda_context_create(m, &p, &c)) { CHECK(0, "context: %s", llambda_last_error()); llambda_model_free(m); return; }
    int32_t prompt[5] = {1, 20, 300, 400, 50};
    CHECK(llambda_eval(c, prompt, 5) == LLAMBDA_OK && c->plan_len == 0, "a prompt noted %d sets", c->plan_len);
    for (int i = 0; i < 3; i++) CHECK(llambda_eval(c, &prompt[i], 1) == LLAMBDA_OK, "decode: %s", llambda_last_error());
    int want_sets = m->hp.n_layer * 4 + 1;   /* q/k/v, o, gate/up, down; the head */
    CHECK(c->plan_len == want_sets && c->plan_at == want_sets, "%d and %d sets noted for a token, want %d", c->plan_len, c->plan_at, want_sets);
    for (int i = 0; i < c->plan_at && i < LL_PLAN_SETS; i++) CHECK(c->plan[i].stable, "set %d not the same token after token", i);
    const ll_weight *wq = &m->layers[0].wq, *head = &m->output;
    CHECK(c->plan[0].tiles == (wq->packed ? wq->packed : wq->data), "the first set is not layer 0's q/k/v");
    CHECK(c->plan_at > 0 && c->plan[c->plan_at - 1].tiles == (head->packed ? head->packed : head->data), "the last set is not the head");
    CHECK(llambda_eval(c, prompt, 5) == LLAMBDA_OK && c->plan_len == want_sets, "a prompt after decoding changed the plan (%d sets)", c->plan_len);
    llambda_context_free(c);
    llambda_model_free(m);
}

/* The vector kernel sets this CPU has (none off x86), each over the scalar table as the
 * dispatcher builds them; returns how many. */
static int vector_sets(ll_kernels sets[MAX_SETS]) {
    int n = 0;
#ifdef LL_HAVE_AVX2
    if (ll_cpu_has_avx2()) { ll_kernels_scalar(&sets[n]); ll_kernels_avx2(&sets[n++]); }
    if (ll_cpu_has_avx2() && ll_cpu_has_avx_vnni()) { ll_kernels_scalar(&sets[n]); ll_kernels_avx2_vnni(&sets[n++]); }
    if (ll_cpu_has_avx2() && ll_cpu_has_avx512()) { ll_kernels_scalar(&sets[n]); ll_kernels_avx512(&sets[n++]); }
    if (ll_cpu_has_avx2() && ll_cpu_has_avx512()) { ll_kernels_scalar(&sets[n]); ll_kernels_avx512_base(&sets[n++]); }
#else
    (void)sets;
#endif
    return n;
}

int main(void) {
    ll_kernels scalar, active;
    ll_kernels_scalar(&scalar);
    active = *ll_kernels_get();
    printf("  active kernels: %s\n", active.isa);
#ifdef LL_HAVE_AVX2
    printf("  this CPU: avx2 %s, avx512 (F/BW/VL/VNNI) %s\n", ll_cpu_has_avx2() ? "yes" : "no",
           ll_cpu_has_avx2() && ll_cpu_has_avx512() ? "yes" : "no");
#endif
    int n = 0;
    for (int type = 0; type < LLAMBDA_TYPE_COUNT; type++) {
        const llambda_type_traits *t = llambda_type_get(type);
        if (!t || !t->quantize_row || ll_vec_dot_type(type) < 0 || !scalar.vec_dot[type]) continue;
        if (type == LLAMBDA_TYPE_Q8_K) continue;   /* an activation type, never a weight */
        char name[96];
        snprintf(name, sizeof name, "kernels: %s variants and ISA give the scalar bits", t->name);
        TEST(name) {
            compare(&scalar, &scalar, type);
            compare(&scalar, &active, type);
            if (type == LLAMBDA_TYPE_F16) compare_pass_format(&scalar, &scalar, LL_ACT_F16_PASS, LL_ACT_F16_AS_F32, 4);
            if (type == LLAMBDA_TYPE_BF16) compare_pass_format(&scalar, &scalar, LL_ACT_BF16_PASS, LLAMBDA_TYPE_BF16, 2);
            if (type == LLAMBDA_TYPE_BF16) compare_pass_format(&scalar, &scalar, LL_ACT_BF16_PASS4, LLAMBDA_TYPE_BF16, 4);
#ifdef LL_HAVE_AVX2
            /* every ISA this CPU has, whichever one is active */
            ll_kernels k2 = scalar, k512 = scalar;
            if (ll_cpu_has_avx2()) {
                ll_kernels_avx2(&k2);
                compare(&scalar, &k2, type);
                compare_gemm(&scalar, &k2, type);
                if (type == LLAMBDA_TYPE_F16) compare_pass_format(&scalar, &k2, LL_ACT_F16_PASS, LL_ACT_F16_AS_F32, 4);
                if (type == LLAMBDA_TYPE_BF16) {
                    compare_pass_format(&scalar, &k2, LL_ACT_BF16_PASS4, LLAMBDA_TYPE_BF16, 4);
                    CHECK(k2.gemm_act[type] == LL_ACT_BF16_PASS4, "avx2: BF16 prompts take %d, not the 4-pass bf16 rows", k2.gemm_act[type]);
                }
                if (type == LLAMBDA_TYPE_F16 || type == LLAMBDA_TYPE_BF16)
                    CHECK(k2.gemm[type] != NULL, "avx2: no prompt kernel for %s", t->name);
            }
            if (ll_cpu_has_avx2() && ll_cpu_has_avx512()) {
                ll_kernels_avx512(&k512);
                compare(&scalar, &k512, type);
                compare_gemm(&scalar, &k512, type);
                if (type == LLAMBDA_TYPE_F16) compare_pass_format(&scalar, &k512, LL_ACT_F16_PASS, LL_ACT_F16_AS_F32, 4);
                if (type == LLAMBDA_TYPE_BF16 && ll_cpu_has_avx512_bf16())
                    compare_pass_format(&scalar, &k512, LL_ACT_BF16_PASS, LLAMBDA_TYPE_BF16, 2);
                if (type == LLAMBDA_TYPE_F32 || type == LLAMBDA_TYPE_F16 || (type == LLAMBDA_TYPE_BF16 && ll_cpu_has_avx512_bf16()))
                    CHECK(k512.gemm[type] != NULL, "avx512: no prompt kernel for %s", t->name);
            }
#endif
        }
        n++;
    }
    TEST("kernels: BF16 follows vdpbf16ps to the bit, subnormals and underflow included") {
        /* the scalar lane against the instruction, where this CPU has it */
#ifdef LL_HAVE_AVX2
        int lane_bad = 0, lanes = 0, flushed = 0;
        if (ll_cpu_has_avx512_bf16()) {
            const int ranges[][2] = {{0, 254}, {0, 12}, {55, 70}, {110, 140}};
            for (int ri = 0; ri < 4; ri++)
                for (int it = 0; it < 20000; it++) {
                    uint16_t a[32], b[32], cu[32];
                    float c[16], hw[16];
                    for (int i = 0; i < 32; i++) { a[i] = bf16_in(ranges[ri][0], ranges[ri][1]); b[i] = bf16_in(ranges[ri][0], ranges[ri][1]); }
                    for (int i = 0; i < 32; i++) cu[i] = bf16_in(0, ranges[ri][1]);
                    for (int l = 0; l < 16; l++) {   /* accumulators: any float, subnormals too */
                        uint32_t u = ((uint32_t)cu[2 * l] << 16) | cu[2 * l + 1];
                        memcpy(&c[l], &u, 4);
                    }
                    memcpy(hw, c, sizeof c);
                    dpbf16_hw(hw, a, b);
                    for (int l = 0; l < 16; l++) {
                        float want = ll_dpbf16_lane(ll_ftz(c[l]), a + 2 * l, b + 2 * l);
                        float plain = fmaf(ll_bf16_to_fp32(a[2 * l]), ll_bf16_to_fp32(b[2 * l]),
                                           fmaf(ll_bf16_to_fp32(a[2 * l + 1]), ll_bf16_to_fp32(b[2 * l + 1]), c[l]));
                        lane_bad += memcmp(&want, &hw[l], 4) != 0;
                        flushed += memcmp(&plain, &hw[l], 4) != 0;
                        lanes++;
                    }
                }
            CHECK(!lane_bad, "ll_dpbf16_lane differs from vdpbf16ps in %d of %d lanes", lane_bad, lanes);
            CHECK(flushed > 1000, "only %d of %d lanes exercised the flushing (plain FMAs agreed elsewhere)", flushed, lanes);
            printf("  vdpbf16ps: %d lanes, %d where plain FMAs would differ, all matched\n", lanes, flushed);
        } else
            printf("  this CPU has no AVX512_BF16: the lane is checked against the kernels only\n");
#endif
        /* every kernel set this CPU has, against the scalar bits, in ordinary and tiny ranges */
        ll_kernels sets[1 + MAX_SETS] = {scalar};
        int ns = 1 + vector_sets(sets + 1);
        const int ranges[][2] = {{100, 150}, {0, 10}, {56, 66}, {0, 254}};
        for (int v = 0; v < ns; v++)
            for (int ri = 0; ri < 4; ri++) compare_bf16_range(&scalar, &sets[v], ranges[ri][0], ranges[ri][1]);
        /* the rounding edge of the flush: a lane at 2^-126 (2^-63·2^-63) takes -2^-150, tiny
         * after rounding to 24 bits, so 0 on the instruction; -2^-151 rounds back to 2^-126 */
        for (int e = 0; e < 2; e++) {
            uint16_t a[64] = {0}, b[64] = {0};
            a[1] = b[1] = ll_fp32_to_bf16(ldexpf(1, -63));
            a[0] = ll_fp32_to_bf16(-ldexpf(1, -75));
            b[0] = ll_fp32_to_bf16(ldexpf(1, e ? -76 : -75));
            float want = e ? ldexpf(1, -126) : 0.f;
            CHECK(!memcmp(&(float){ll_dpbf16_lane(0.f, a, b)}, &want, 4), "the lane at the flush's rounding edge (%d)", e);
#ifdef LL_HAVE_AVX2
            if (ll_cpu_has_avx512_bf16()) {
                float hw[16] = {0};
                uint16_t a32[32] = {0}, b32[32] = {0};
                memcpy(a32, a, 4); memcpy(b32, b, 4);
                dpbf16_hw(hw, a32, b32);
                CHECK(!memcmp(&hw[0], &want, 4), "vdpbf16ps at the flush's rounding edge (%d) gave %a", e, (double)hw[0]);
            }
#endif
            for (int v = 0; v < ns; v++) {
                float got = -1;
                sets[v].vec_dot[LLAMBDA_TYPE_BF16](64, &got, a, b);
                CHECK(!memcmp(&got, &want, 4), "%s: BF16 dot at the flush's rounding edge (%d) is %a", sets[v].isa, e, (double)got);
                if (sets[v].gemm[LLAMBDA_TYPE_BF16]) {   /* and the prompt kernel, in its activation format */
                    int gdt = sets[v].gemm_act[LLAMBDA_TYPE_BF16];
                    uint8_t gx[256];
                    float f[64], g2[2] = {-1, -1};
                    for (int i = 0; i < 64; i++) f[i] = ll_bf16_to_fp32(b[i]);
                    sets[v].from_float[gdt](f, gx, 64);
                    void *scratch = malloc(ll_gemm_scratch_bytes(64));
                    uint16_t w2[2][64];
                    memcpy(w2[0], a, sizeof a); memcpy(w2[1], a, sizeof a);
                    sets[v].gemm[LLAMBDA_TYPE_BF16](64, g2, 2, w2, sizeof w2[0], 2, gx, ll_act_row_bytes(gdt, 64), 1, scratch, NULL, 0);
                    free(scratch);
                    CHECK(!memcmp(&g2[0], &want, 4) && !memcmp(&g2[1], &want, 4), "%s: BF16 prompt kernel at the flush's rounding edge (%d) is %a",
                          sets[v].isa, e, (double)g2[0]);
                }
            }
        }
    }
    TEST("kernels: the norms' sum of squares, every length, against a sequential sum") test_sum_squares();
    TEST("kernels: the norms' scaling and the residual add in lanes give the scalar loops' bits, every length") test_norm_add_lanes();
    TEST("kernels: the prefetch distance follows the decode stream rate within its ends, the bits do not") test_stream_ahead(&scalar);
    TEST("kernels: decode notes each token's product sets in order; pool tasks run right while threads prefetch") test_decode_plan();
    TEST("kernels: large buffers for repacked weights start on a 2 MiB boundary, zeroed and writable") {
        size_t sizes[] = {(size_t)5 << 20 | 123, 4096, (size_t)2 << 20};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            uint8_t *p = ll_alloc_large(sizes[i]);
            CHECK(p != NULL, "ll_alloc_large(%zu) failed", sizes[i]);
            if (!p) continue;
            CHECK(((uintptr_t)p & (((uintptr_t)2 << 20) - 1)) == 0, "ll_alloc_large(%zu) = %p, not 2 MiB-aligned", sizes[i], (void *)p);
            CHECK(p[0] == 0 && p[sizes[i] - 1] == 0, "ll_alloc_large(%zu) not zeroed", sizes[i]);
            memset(p, 0xab, sizes[i]);
            ll_free_large(p, sizes[i]);
        }
    }
    TEST("kernels: every ISA's expf gives the C library's bits (a sweep of all floats)") {
        enum { N = 4096 };
        static float x[N], want[N], got[N];
        ll_kernels kk[1 + MAX_SETS] = {scalar};
        int nk = 1 + vector_sets(kk + 1);
#if defined(LL_HAVE_AVX2) && defined(__GLIBC__)
        for (int v = 1; v < nk; v++)   /* this libm is the one the vector path follows: it must be on */
            CHECK(kk[v].expf_row != ll_expf_row_libm, "%s: vector expf disabled by its start-up check", kk[v].isa);
#endif
        long bad = 0, total = 0;
        for (uint64_t b0 = 0; b0 < (1ull << 32); b0 += (uint64_t)N * 997) {
            for (int i = 0; i < N; i++) {
                uint32_t u = (uint32_t)(b0 + (uint64_t)i * 997);
                memcpy(&x[i], &u, 4);
            }
            for (int i = 0; i < N; i++) want[i] = expf(x[i]);
            for (int v = 0; v < nk; v++) {
                kk[v].expf_row(got, x, N - (int)(b0 % 7));   /* and tails of every length */
                for (int i = 0; i < N - (int)(b0 % 7); i++) bad += memcmp(&got[i], &want[i], 4) != 0 && !(isnan(got[i]) && isnan(want[i]));
                total += N - (int)(b0 % 7);
            }
        }
        CHECK(!bad, "expf_row differs from expf in %ld of %ld values", bad, total);
    }
    TEST("kernels: every ISA's soft-capping tanhf gives the C library's bits (a sweep of all floats, scaled and in place)") {
        enum { N = 4096 };
        static float x[N], want[N], got[N];
        ll_kernels kk[1 + MAX_SETS] = {scalar};
        int nk = 1 + vector_sets(kk + 1);
#if defined(LL_HAVE_AVX2) && defined(__GLIBC__)
        for (int v = 1; v < nk; v++)   /* this libm is the one the vector path follows: it must be on */
            CHECK(kk[v].tanhf_scaled_row != ll_tanhf_scaled_row_libm, "%s: vector tanhf disabled by its start-up check", kk[v].isa);
#endif
        long bad = 0, total = 0;
        /* every 997th float, then every 3rd one of the binades the vector path computes */
        for (int pass = 0; pass < 2; pass++) {
            uint64_t lo = pass ? 0x24000000u : 0, hi = pass ? 0x3f800000u : 1ull << 32, step = pass ? 3 : 997;
            for (uint64_t b0 = lo; b0 < hi; b0 += (uint64_t)N * step) {
                for (int i = 0; i < N; i++) {
                    uint32_t u = (uint32_t)(b0 + (uint64_t)i * step) ^ (uint32_t)(i & 1) << 31;
                    memcpy(&x[i], &u, 4);
                }
                int n = N - (int)(b0 / step % 7);   /* and tails of every length */
                for (int i = 0; i < n; i++) want[i] = tanhf(x[i]);
                for (int v = 0; v < nk; v++) {
                    kk[v].tanhf_scaled_row(got, x, 1.0f, 1.0f, n);
                    for (int i = 0; i < n; i++) bad += memcmp(&got[i], &want[i], 4) != 0 && !(isnan(got[i]) && isnan(want[i]));
                    total += n;
                }
            }
        }
        /* soft-capping itself, in place: logits of every size against tanhf(x / 30) * 30 */
        for (int i = 0; i < N; i++) x[i] = frand() * (i % 61 == 0 ? 400.f : 40.f);
        for (int i = 0; i < N; i++) want[i] = tanhf(x[i] * (1.0f / 30.f)) * 30.f;
        for (int v = 0; v < nk; v++) {
            memcpy(got, x, sizeof got);
            kk[v].tanhf_scaled_row(got, got, 1.0f / 30.f, 30.f, N - 3);
            for (int i = 0; i < N - 3; i++) bad += memcmp(&got[i], &want[i], 4) != 0;
            bad += memcmp(&got[N - 3], &x[N - 3], 12) != 0;   /* nothing past n */
            total += N - 3;
        }
        CHECK(!bad, "tanhf_scaled_row differs from tanhf in %ld of %ld values", bad, total);
    }
    TEST("kernels: vector SwiGLU gives the scalar bits") {
        enum { N = 1000 };   /* not a multiple of 16: the libm tail too */
        float g[N], u[N], want[N];
        for (int i = 0; i < N; i++) { g[i] = frand() * (i % 97 == 0 ? 120.f : 12.f); u[i] = frand() * 4.f; }
        memcpy(want, g, sizeof g);
        ll_swiglu_scalar(want, u, N);
        CHECK(isfinite(want[0]) && want[1] != g[1], "scalar SwiGLU did nothing");
#ifdef LL_HAVE_AVX2
        float got[N];
        ll_kernels kk[MAX_SETS];
        int nk = vector_sets(kk);
        for (int v = 0; v < nk; v++) {
            memcpy(got, g, sizeof g);
            kk[v].swiglu(got, u, N);
            int bad = 0;
            for (int i = 0; i < N; i++) bad += memcmp(&got[i], &want[i], 4) != 0;
            CHECK(!bad, "%s SwiGLU differs from scalar in %d of %d", kk[v].isa, bad, N);
        }
#endif
    }
    TEST("kernels: every ISA's activation conversions give the scalar bytes") {
        enum { N = 515 };
        float x[N];
        for (int i = 0; i < N; i++) x[i] = frand() * (i % 5 == 0 ? 1e-6f : i % 7 == 0 ? 7e4f : 40.f);
        x[3] = NAN; x[9] = INFINITY; x[10] = -INFINITY; x[11] = 65520.f; x[12] = 5.96e-8f; x[13] = -0.0f;
        x[14] = 1.f + 1.f / 256.f; x[15] = -(1.f + 3.f / 256.f); x[16] = 3.3961e38f;   /* bf16 ties; rounds up to infinity */
#ifdef LL_HAVE_AVX2
        ll_kernels kk[MAX_SETS];
        int nk = vector_sets(kk);
        const int types[] = {LLAMBDA_TYPE_F16, LL_ACT_F16_AS_F32, LLAMBDA_TYPE_BF16, LLAMBDA_TYPE_Q8_0, LLAMBDA_TYPE_Q8_K};
        const char *names[] = {"f16", "f16 held as f32", "bf16", "Q8_0", "Q8_K"};
        for (int v = 0; v < nk; v++)
            for (int ti = 0; ti < 5; ti++) {
                int quant = types[ti] == LLAMBDA_TYPE_Q8_0 || types[ti] == LLAMBDA_TYPE_Q8_K;
                int n = quant ? 512 : N;
                if (quant) x[3] = 0.5f, x[9] = 3.f, x[10] = -2.f;   /* quantizers need finite input */
                size_t bytes = ll_act_row_bytes(types[ti], n);
                for (int pass = 0; pass < (quant ? 1 : 2); pass++) {   /* float formats: with a NaN, and without */
                    float xx[N];
                    memcpy(xx, x, sizeof xx);
                    if (pass) xx[3] = 0.25f;
                    uint8_t *a = calloc(1, bytes), *b = calloc(1, bytes);
                    scalar.from_float[types[ti]](xx, a, n);
                    kk[v].from_float[types[ti]](xx, b, n);
                    CHECK(!memcmp(a, b, bytes), "%s: %s conversion differs from scalar (%s NaN)", kk[v].isa, names[ti],
                          pass ? "without" : "with");
                    free(a); free(b);
                }
            }
        /* Q8_K's scale is signed by the first element of largest magnitude: ties of either
         * sign in either order, the maximum in the last lane, an all-zero block, and sums
         * near the 16-sums' extremes */
        float t[4 * 256];
        for (int i = 0; i < 4 * 256; i++) t[i] = frand() * 20.f;
        t[200] = -50.f; t[210] = 50.f;              /* block 0: the negative one first */
        t[256 + 5] = 50.f; t[256 + 6] = -50.f;      /* block 1: the positive one first */
        for (int i = 0; i < 256; i++) t[512 + i] = i < 128 ? -0.0f : 0.0f;   /* block 2: zeros */
        for (int i = 0; i < 256; i++) t[768 + i] = i < 64 ? -30.f : 10.f;   /* block 3: clamped runs, max last */
        t[1023] = 60.f;
        for (int v = 0; v < nk; v++) {
            size_t bytes = ll_act_row_bytes(LLAMBDA_TYPE_Q8_K, 1024);
            uint8_t *a = calloc(1, bytes), *b = calloc(1, bytes);
            scalar.from_float[LLAMBDA_TYPE_Q8_K](t, a, 1024);
            kk[v].from_float[LLAMBDA_TYPE_Q8_K](t, b, 1024);
            CHECK(!memcmp(a, b, bytes), "%s: Q8_K conversion of tied maxima, zeros or a last-lane maximum differs from scalar", kk[v].isa);
            free(a); free(b);
        }
#else
        (void)x;   /* no other kernel set to compare on this CPU */
#endif
        CHECK(scalar.from_float[LLAMBDA_TYPE_F16] != NULL, "no scalar f16 conversion");
    }
    TEST("kernels: vector GeGLU gives the scalar bits") {
        enum { N = 1003 };
        float g[N], u[N], want[N];
        for (int i = 0; i < N; i++) {
            float m = i % 7 == 0 ? 14.f : i % 11 == 0 ? 1e-6f : 3.f;   /* past the cut-offs, f16 subnormals */
            g[i] = frand() * m; u[i] = frand() * 2.f;
        }
        g[5] = -10.0f; g[6] = 10.0f; g[7] = 9.9999f;
        memcpy(want, g, sizeof g);
        ll_geglu_scalar(want, u, N);
#ifdef LL_HAVE_AVX2
        if (ll_cpu_has_avx2()) {
            float got[N];
            ll_kernels k2;
            ll_kernels_avx2(&k2);
            memcpy(got, g, sizeof g);
            k2.geglu(got, u, N);
            int bad = 0;
            for (int i = 0; i < N; i++) bad += memcmp(&got[i], &want[i], 4) != 0;
            CHECK(!bad, "GeGLU differs from scalar in %d of %d", bad, N);
        }
#endif
        CHECK(want[5] == 0.0f && want[6] == 10.0f * u[6], "scalar GeGLU cut-offs");
    }
    TEST("kernels: vector axpy and Mamba-2 scan give the scalar bits") {
        enum { N = 200 };
        float st0[N], st1[N], B[N], C[N], y0[N], y1[N], x[N];
        for (int i = 0; i < N; i++) { st0[i] = st1[i] = frand(); B[i] = frand(); C[i] = frand(); y0[i] = y1[i] = frand(); x[i] = frand(); }
#ifdef LL_HAVE_AVX2
        if (ll_cpu_has_avx2()) {
            ll_kernels k2;
            ll_kernels_avx2(&k2);
            for (int n = 128; n <= N; n += 72) {   /* whole 64-blocks, and a tail */
                float a = scalar.ssm_scan(st0, B, C, 0.93f, 0.37f, n), b = k2.ssm_scan(st1, B, C, 0.93f, 0.37f, n);
                CHECK(!memcmp(&a, &b, 4) && !memcmp(st0, st1, sizeof st0), "ssm_scan (n %d) differs from scalar", n);
            }
            scalar.axpy(y0, x, 0.77f, N);
            k2.axpy(y1, x, 0.77f, N);
            CHECK(!memcmp(y0, y1, sizeof y0), "axpy differs from scalar");
        }
#else
        /* no vector set on this CPU: the scalar scan and axpy, run twice, repeat their bits */
        float a = scalar.ssm_scan(st0, B, C, 0.93f, 0.37f, N), b = scalar.ssm_scan(st1, B, C, 0.93f, 0.37f, N);
        scalar.axpy(y0, x, 0.77f, N);
        scalar.axpy(y1, x, 0.77f, N);
        CHECK(isfinite(a) && !memcmp(&a, &b, 4) && !memcmp(st0, st1, sizeof st0) && !memcmp(y0, y1, sizeof y0),
              "scalar ssm_scan / axpy are not deterministic");
#endif
    }
    TEST("kernels: vector exp, SiLU and conv+SiLU give the scalar bits (ranges, tails, 4 taps and 3)") {
        enum { N = 203, K = 4 };
        static float x[N], w[N * K], b[N], src[K][N], y0[N], y1[N];
        for (int i = 0; i < N; i++) {
            /* mostly ordinary values, some past the range where 2^n is a normal float */
            x[i] = frand() * (i % 17 == 0 ? 200.f : 12.f);
            b[i] = frand();
            for (int k = 0; k < K; k++) { src[k][i] = frand() * 4.f; w[i * K + k] = frand(); }
        }
        const float *srcp[K] = {src[0], src[1], src[2], src[3]};
        for (int i = 0; i < N; i++) {   /* the scalar kernels are ll_exp_simd and ll_silu */
            float e = ll_exp_simd(x[i] - 0.5f), si = x[i] / (1.0f + ll_exp_simd(-x[i]));
            scalar.exp_shifted(y0, x + i, 0.5f, 1);
            scalar.silu(y1, x + i, 1);
            CHECK(!memcmp(&e, y0, 4) && !memcmp(&si, y1, 4), "scalar exp/silu differ from ll_exp_simd at %d", i);
        }
        ll_kernels ks[MAX_SETS];
        int nk = vector_sets(ks);
        for (int q = 0; q < nk; q++)
            for (int n = 1; n <= N; n += 29) {   /* lengths with and without a tail */
                scalar.exp_shifted(y0, x, 0.5f, n);
                ks[q].exp_shifted(y1, x, 0.5f, n);
                CHECK(!memcmp(y0, y1, sizeof(float) * n), "%s exp_shifted (n %d) differs from scalar", ks[q].isa, n);
                scalar.silu(y0, x, n);
                ks[q].silu(y1, x, n);
                CHECK(!memcmp(y0, y1, sizeof(float) * n), "%s silu (n %d) differs from scalar", ks[q].isa, n);
                for (int taps = K - 1; taps <= K; taps++)   /* 4: the transposing path; 3: the gathers */
                    for (int bias = 0; bias < 2; bias++) {
                        scalar.conv_silu(y0, srcp, w, taps, bias ? b : NULL, n);
                        ks[q].conv_silu(y1, srcp, w, taps, bias ? b : NULL, n);
                        CHECK(!memcmp(y0, y1, sizeof(float) * n), "%s conv_silu (n %d, %d taps, bias %d) differs from scalar",
                              ks[q].isa, n, taps, bias);
                    }
            }
    }
    TEST("kernels: exp, SiLU and SwiGLU take NaN and infinities (NaN stays NaN, in every ISA)") {
        /* a model with NaN weights, or a hostile file, must not reach undefined behaviour
         * (the sanitizer builds run this); NaN must come out as NaN */
        enum { N = 37 };
        static float x[N], g[N], u[N], y[N];
        for (int i = 0; i < N; i++) { x[i] = frand() * 8.f; u[i] = frand(); }
        x[3] = NAN; x[17] = -NAN; x[20] = INFINITY; x[33] = -INFINITY; x[36] = NAN;
        CHECK(isnan(ll_exp_simd(NAN)) && isnan(ll_exp_simd(-NAN)), "ll_exp_simd(NaN) is not NaN");
        CHECK(ll_exp_simd(INFINITY) == INFINITY && ll_exp_simd(-INFINITY) == 0.0f, "ll_exp_simd(+-inf) is not inf, 0");
        ll_kernels ks[1 + MAX_SETS] = {scalar};
        int nk = 1 + vector_sets(ks + 1);
        for (int q = 0; q < nk; q++) {
            ks[q].exp_shifted(y, x, 0.5f, N);
            CHECK(isnan(y[3]) && isnan(y[17]) && isnan(y[36]) && y[20] == INFINITY && y[33] == 0.0f, "%s exp_shifted: NaN or inf mishandled", ks[q].isa);
            ks[q].silu(y, x, N);
            CHECK(isnan(y[3]) && isnan(y[17]) && isnan(y[36]), "%s silu: NaN did not stay NaN", ks[q].isa);
            memcpy(g, x, sizeof g);
            if (ks[q].swiglu) ks[q].swiglu(g, u, N);
            else ll_swiglu_scalar(g, u, N);
            CHECK(isnan(g[3]) && isnan(g[17]) && isnan(g[36]), "%s swiglu: NaN did not stay NaN", ks[q].isa);
        }
    }
    TEST("kernels: squared ReLU gives max(x, 0)^2 bit for bit in every ISA (NaN, -0, inf, subnormals, tails)") {
        enum { N = 77 };
        float x[N], want[N], got[N];
        for (int i = 0; i < N; i++) x[i] = frand() * 8.f;   /* about half negative */
        x[1] = NAN; x[2] = -NAN; x[5] = -0.0f; x[6] = 0.0f; x[9] = INFINITY; x[10] = -INFINITY;
        x[12] = 1e-40f; x[13] = -1e-40f; x[14] = 3e-20f; x[70] = NAN;   /* subnormal in, out; NaN in the tail */
        for (int i = 0; i < N; i++) { float r = x[i] > 0 ? x[i] : 0.0f; want[i] = r * r; }
        CHECK(want[1] == 0 && !signbit(want[5]) && want[9] == INFINITY && want[10] == 0 && want[12] == 0 && want[14] > 0,
              "the reference squared ReLU is off");
        ll_kernels ks[1 + MAX_SETS] = {scalar};
        int nk = 1 + vector_sets(ks + 1);
        for (int q = 0; q < nk; q++)
            for (int n = 0; n <= N; n += 11) {   /* with and without a tail */
                memcpy(got, x, sizeof got);
                if (ks[q].relu2) ks[q].relu2(got, n);
                else ll_relu2(got, n);
                CHECK(!memcmp(got, want, sizeof(float) * n) && !memcmp(got + n, x + n, sizeof(float) * (N - n)),
                      "%s relu2 (n %d) differs from max(x, 0)^2", ks[q].isa, n);
            }
        memcpy(got, x, sizeof got);
        ll_relu2(got, N);   /* the dispatched one */
        CHECK(!memcmp(got, want, sizeof got), "ll_relu2 differs from max(x, 0)^2");
    }
    TEST("kernels: the sigmoid row gives ll_sigmoid's bits (chunks, tails, extremes, NaN, in place)") {
        enum { N = 611 };
        float x[N], y[N];
        for (int i = 0; i < N; i++) x[i] = frand() * (i % 9 == 0 ? 120.f : 9.f);
        x[0] = 0.0f; x[1] = -0.0f; x[2] = INFINITY; x[3] = -INFINITY; x[4] = NAN; x[5] = 88.8f; x[6] = -104.f; x[300] = 1e-30f;
        ll_sigmoid_row(y, x, N);
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++) {
            float w = ll_sigmoid(x[i]);
            if (memcmp(&w, &y[i], 4) && !(isnan(w) && isnan(y[i]))) bad = i;
        }
        CHECK(bad < 0, "ll_sigmoid_row differs from ll_sigmoid at %d (x %g)", bad, bad < 0 ? 0.0 : (double)x[bad]);
        memcpy(y, x, sizeof y);
        ll_sigmoid_row(y, y, 257);   /* in place, one chunk and one more */
        for (int i = 0; i < 257 && bad < 0; i++) {
            float w = ll_sigmoid(x[i]);
            if (memcmp(&w, &y[i], 4) && !(isnan(w) && isnan(y[i]))) bad = i;
        }
        CHECK(bad < 0 && !memcmp(y + 257, x + 257, sizeof(float) * (N - 257)), "in place: differs at %d or past the end", bad);
    }
    TEST("kernels: RoPE heads (pairs and neox halves) give the fused scalar bits in every ISA, tails included") {
        enum { HMAX = 80 };
        float v0[2 * HMAX], v1[2 * HMAX], want[2 * HMAX], cs[2 * HMAX];
        const int halves[] = {32, 64, 16, 3, 13, 20, 36};
        ll_kernels ks[MAX_SETS];
        int nk = vector_sets(ks), bad = 0;
        for (int hi = 0; hi < 7; hi++)
            for (int neox = 0; neox < 2; neox++) {
                int half = halves[hi];
                for (int i = 0; i < 2 * half; i++) { v0[i] = frand() * 3.f; cs[i] = frand(); }
                memcpy(want, v0, sizeof v0);
                for (int i = 0; i < half; i++) {   /* the reference: fmaf (a libm call here), the other product rounded */
                    int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
                    float x0 = v0[a], x1 = v0[b];
                    want[a] = fmaf(x0, cs[2 * i], -(x1 * cs[2 * i + 1]));
                    want[b] = fmaf(x0, cs[2 * i + 1], x1 * cs[2 * i]);
                }
                for (int q = 0; q < nk; q++) {
                    memcpy(v1, v0, sizeof v0);
                    ks[q].rope_head(v1, half, neox, cs);
                    if (memcmp(v1, want, sizeof(float) * 2 * (size_t)half)) { bad = 1; printf("  %s half %d neox %d\n", ks[q].isa, half, neox); }
                }
                ll_hparams hp = {0};
                hp.rope_type = neox ? LL_ROPE_NEOX : LL_ROPE_NORM;
                memcpy(v1, v0, sizeof v0);
                ll_rope(&hp, v1, 1, 1, 2 * half, 2 * half, 2 * half, cs);   /* the dispatched path */
                if (memcmp(v1, want, sizeof(float) * 2 * (size_t)half)) { bad = 1; printf("  ll_rope half %d neox %d\n", half, neox); }
            }
        CHECK(!bad, "a RoPE head differs from the fused scalar formula");
    }
    TEST("kernels: the fused DeltaNet head step gives the bits of decay, dot, axpy, dot") {
        enum { SMAX = 200 };
        static float M0[SMAX * SMAX], M1[SMAX * SMAX], M2[SMAX * SMAX];
        float k[SMAX], q[SMAX], v[SMAX], o0[SMAX], o1[SMAX];
        const int sizes[] = {16, 64, 128, 96, 200};
        for (int si = 0; si < 5; si++) {
            int S = sizes[si];
            for (int i = 0; i < S * S; i++) M0[i] = M1[i] = M2[i] = frand();
            for (int i = 0; i < S; i++) { k[i] = frand() * 0.2f; q[i] = frand() * 0.2f; v[i] = frand(); }
            /* the reference: the separate calls the mixer made before the fused step */
            for (int j = 0; j < S; j++) {
                float *row = M0 + (size_t)j * S, pred, rd;
                for (int i = 0; i < S; i++) row[i] *= 0.91f;
                scalar.vec_dot[LLAMBDA_TYPE_F32](S, &pred, row, k);
                scalar.axpy(row, k, 0.6f * (v[j] - pred), S);
                scalar.vec_dot[LLAMBDA_TYPE_F32](S, &rd, row, q);
                o0[j] = rd * 0.125f;
            }
            scalar.deltanet_rows(M1, k, q, v, 0.91f, 0.6f, 0.125f, o1, S);   /* M2 keeps the start state */
            CHECK(!memcmp(M0, M1, sizeof(float) * S * S) && !memcmp(o0, o1, sizeof(float) * S),
                  "scalar deltanet_rows (S %d) differs from its parts", S);
#ifdef LL_HAVE_AVX2
            float o2[SMAX];
            if (ll_cpu_has_avx2()) {
                ll_kernels k2;
                ll_kernels_avx2(&k2);
                k2.deltanet_rows(M2, k, q, v, 0.91f, 0.6f, 0.125f, o2, S);
                CHECK(!memcmp(M0, M2, sizeof(float) * S * S) && !memcmp(o0, o2, sizeof(float) * S),
                      "AVX2 deltanet_rows (S %d) differs from scalar", S);
            }
            if (ll_cpu_has_avx2() && ll_cpu_has_avx512()) {
                ll_kernels k5;
                ll_kernels_avx512(&k5);
                for (int i = 0; i < S * S; i++) M2[i] = M1[i];
                /* M1 moved on; replay both from the same state */
                scalar.deltanet_rows(M1, k, q, v, 0.91f, 0.6f, 0.125f, o1, S);
                k5.deltanet_rows(M2, k, q, v, 0.91f, 0.6f, 0.125f, o2, S);
                CHECK(!memcmp(M1, M2, sizeof(float) * S * S) && !memcmp(o1, o2, sizeof(float) * S),
                      "AVX-512 deltanet_rows (S %d) differs from scalar", S);
            }
#endif
        }
    }
    TEST("kernels: grouped f16 attention gives the scalar bits per head") {
        /* heads sharing one KV head, head sizes with and without a register-resident path,
         * key counts across the chunk edge, a ring that wraps, and keys past the running max */
        enum { RING = 150, WMAX = 2 * 512 };
        static uint16_t K[RING * WMAX], V[RING * WMAX], q16[4 * 512], acc16[512];
        static float want[4 * 512];
        for (int i = 0; i < RING * WMAX; i++) {
            K[i] = ll_fp32_to_fp16(frand() * (i % 37 == 0 ? 4.f : 1.f));
            V[i] = ll_fp32_to_fp16(frand() * 2.f);
        }
        const int dims[] = {64, 128, 256, 512, 40, 32, 200};
        const int counts[] = {1, 63, 64, 65, 150};
        int cases = 0, bad = 0;
        for (int di = 0; di < 7; di++)
            for (int nh = 1; nh <= 4; nh++)
                for (int ci = 0; ci < 5; ci++) {
                    int D = dims[di], W = 2 * D, n = counts[ci], first = ci == 4 ? 0 : 120;
                    for (int i = 0; i < nh * D; i++) q16[i] = ll_fp32_to_fp16(frand() * 3.f);
                    ll_attend_f16_scalar(q16, K + D, V + D, W, D, nh, first, n, RING, 0.125f, acc16, want);
                    CHECK(isfinite(want[0]), "scalar attention gave %g", want[0]);
#ifdef LL_HAVE_AVX2
                    static float got[4 * 512];
                    ll_kernels kk[MAX_SETS];
                    int nk = vector_sets(kk);
                    for (int v = 0; v < nk; v++) {
                        kk[v].attend_f16(q16, K + D, V + D, W, D, nh, first, n, RING, 0.125f, acc16, got);
                        bad += memcmp(got, want, sizeof(float) * (size_t)(nh * D)) != 0;
                        cases++;
                    }
#endif
                }
        CHECK(!bad, "%d of %d grouped attention cases differ from the scalar heads", bad, cases);
    }
    TEST("kernels: grouped f16 attention keeps the scalar bits on tied, signed-zero, outlying and NaN scores") {
        /* the vector softmax's running maximum is a scan: equal scores (zero keys give +0 or
         * -0 by the query's signs, repeated keys give exact ties) must keep the earlier
         * maximum as the loop does; one huge score flushes the others' factors to zero; a
         * NaN score sends its head through the loop */
        enum { RING = 200, D = 64, W = 2 * D };
        static uint16_t K[RING * W], V[RING * W], q16[4 * D], acc16[512];
        static float want[4 * D], got[4 * D];
        int cases = 0, bad = 0;
        for (int kind = 0; kind < 4; kind++) {
            for (int c = 0; c < RING; c++)
                for (int i = 0; i < W; i++) {
                    float k = frand();
                    if (kind == 0 && c % 3 == 0) k = 0.f;                /* +0 and -0 scores */
                    if (kind == 1) k = c % 5 == 0 ? frand() : 0.5f;    /* long runs of ties */
                    if (kind == 2 && c == 70) k = 65504.f;             /* a score far above the rest */
                    K[c * W + i] = ll_fp32_to_fp16(k);
                    V[c * W + i] = ll_fp32_to_fp16(frand());
                }
            if (kind == 3) K[90 * W + D + 5] = 0x7E00;   /* a NaN key: one head's scores NaN */
            for (int nh = 1; nh <= 4; nh++)
                for (int n = 1; n <= RING; n += 37) {
                    for (int i = 0; i < nh * D; i++) q16[i] = ll_fp32_to_fp16(i % 7 == 0 ? 0.f : frand() * 3.f);
                    ll_attend_f16_scalar(q16, K + D, V + D, W, D, nh, 7, n, RING, 0.125f, acc16, want);
#ifdef LL_HAVE_AVX2
                    ll_kernels kk[MAX_SETS];
                    int nk = vector_sets(kk);
                    for (int v = 0; v < nk; v++) {
                        kk[v].attend_f16(q16, K + D, V + D, W, D, nh, 7, n, RING, 0.125f, acc16, got);
                        bad += memcmp(got, want, sizeof(float) * (size_t)(nh * D)) != 0;
                        cases++;
                    }
#else
                    (void)got;
#endif
                }
        }
        CHECK(!bad, "%d of %d attention cases with special scores differ from the scalar heads", bad, cases);
    }
    TEST("kernels: MXFP4 tiles read every E8M0 exponent as the single-row kernel does (0, 1, 2, 127, 254)") {
        enum { NB = 8, NN = NB * 32 };
        block_mxfp4 w[8][NB];
        float f[NN];
        for (int i = 0; i < NN; i++) f[i] = frand() * 3.f;
        uint8_t xq[NN + 64];
        scalar.from_float[LLAMBDA_TYPE_Q8_0](f, xq, NN);
        const uint8_t exps[5] = {0, 1, 2, 127, 254};
        for (int r = 0; r < 8; r++)
            for (int b = 0; b < NB; b++) {
                w[r][b].e = r < 3 ? exps[r] : exps[(r + b) % 5];   /* rows 0-2: one exponent throughout */
                for (int j = 0; j < 16; j++) w[r][b].qs[j] = (uint8_t)(r * 37 + b * 11 + j * 7);
            }
        float want[8], got[8];
        for (int r = 0; r < 8; r++) scalar.vec_dot[LLAMBDA_TYPE_MXFP4](NN, &want[r], w[r], xq);
        ll_kernels kk = active;
        if (kk.pack_x8[LLAMBDA_TYPE_MXFP4]) {
            size_t size = kk.pack_x8[LLAMBDA_TYPE_MXFP4](NN, w, sizeof w[0], NULL);
            uint8_t *packed = malloc(size);
            kk.pack_x8[LLAMBDA_TYPE_MXFP4](NN, w, sizeof w[0], packed);
            kk.dot_packed[LLAMBDA_TYPE_MXFP4](NN, got, 8, packed, xq, 0, 1);
            CHECK(!memcmp(got, want, sizeof got), "%s: MXFP4 tile differs at edge exponents", kk.isa);
            free(packed);
        }
        if (kk.vec_dot_x8[LLAMBDA_TYPE_MXFP4]) {
            kk.vec_dot_x8[LLAMBDA_TYPE_MXFP4](NN, got, w, sizeof w[0], xq);
            CHECK(!memcmp(got, want, sizeof got), "%s: MXFP4 8-row kernel differs at edge exponents", kk.isa);
        }
    }
    TEST("kernels: Q4_K and Q5_K tiles at the integer extremes (every quant at its top, scales and mins 63, activations -128 and 127)") {
        /* the AVX-512 tiles hold a lane's sums as int16: 16 x 15 x 128 (Q4_K, four steps) and 4 x 31 x 128 (Q5_K) at most */
        enum { NB = 4, NN = NB * QK_K };
        block_q8_K xq[4][NB];
        for (int t = 0; t < 4; t++)
            for (int b = 0; b < NB; b++) {
                xq[t][b].d = 1.0f;
                for (int i = 0; i < QK_K; i++)   /* all -128, all 127, runs of each, or alternating */
                    xq[t][b].qs[i] = (int8_t)(t == 0 ? -128 : t == 1 ? 127 : t == 2 ? ((i / 8) % 2 ? 127 : -128) : (i % 2 ? -128 : 127));
                for (int g = 0; g < 16; g++) {
                    int sum = 0;
                    for (int i = 0; i < 16; i++) sum += xq[t][b].qs[16 * g + i];
                    xq[t][b].bsums[g] = (int16_t)sum;
                }
            }
        for (int ti = 0; ti < 2; ti++) {
            int type = ti ? LLAMBDA_TYPE_Q5_K : LLAMBDA_TYPE_Q4_K, top = ti ? 31 : 15;
            block_q4_K w4[8][NB];
            block_q5_K w5[8][NB];
            for (int r = 0; r < 8; r++)   /* rows 0-3 at the top throughout, 4-7 mixed */
                for (int b = 0; b < NB; b++) {
                    uint16_t *d = ti ? &w5[r][b].d : &w4[r][b].d, *dmin = ti ? &w5[r][b].dmin : &w4[r][b].dmin;
                    uint8_t *sc = ti ? w5[r][b].scales : w4[r][b].scales, *qs = ti ? w5[r][b].qs : w4[r][b].qs;
                    *d = *dmin = 0x3C00;   /* 1.0 */
                    memset(sc, r < 4 ? 0xFF : (int)(0x3F + 0x40 * (b & 1)), 12);
                    for (int j = 0; j < 128; j++) qs[j] = r < 4 ? 0xFF : (uint8_t)(j % 3 ? 0xFF : 0x0F * (r & 1));
                    if (ti) for (int j = 0; j < 32; j++) w5[r][b].qh[j] = r < 4 ? 0xFF : (uint8_t)(0x5A ^ (j * r));
                }
            const void *w = ti ? (const void *)w5 : (const void *)w4;
            size_t wrow = ti ? sizeof w5[0] : sizeof w4[0];
            float want[4][8];
            for (int t = 0; t < 4; t++)
                for (int r = 0; r < 8; r++) scalar.vec_dot[type](NN, &want[t][r], (const uint8_t *)w + r * wrow, xq[t]);
            check_tiles_at_extremes(type, NN, w, wrow, xq, sizeof xq[0], want);
            CHECK(want[0][0] == -(float)(63 * top * 128 * NN) - -(float)(63 * 128 * NN), "%s: the extreme row's dot is %g",
                  llambda_type_get(type)->name, (double)want[0][0]);
        }
    }
    TEST("kernels: Q4_0 tiles at the integer extremes (every nibble 15, activations -128 and 127)") {
        /* the AVX2 set holds a block's eight steps as int16 pairs: 8 x 2 x 15 x 128 = 30720 at most */
        enum { NB = 8, NN = NB * 32 };
        block_q8_0 xq[4][NB];
        for (int t = 0; t < 4; t++)
            for (int b = 0; b < NB; b++) {
                xq[t][b].d = 0x3C00;
                for (int i = 0; i < 32; i++)
                    xq[t][b].qs[i] = (int8_t)(t == 0 ? -128 : t == 1 ? 127 : t == 2 ? ((i / 4) % 2 ? 127 : -128) : (i % 2 ? -128 : 127));
            }
        block_q4_0 w[8][NB];
        for (int r = 0; r < 8; r++)   /* rows 0-3 at the top throughout, 4-7 mixed */
            for (int b = 0; b < NB; b++) {
                w[r][b].d = 0x3C00;
                for (int j = 0; j < 16; j++) w[r][b].qs[j] = r < 4 ? 0xFF : (uint8_t)(j % 3 ? 0xFF : 0x0F * (r & 1));
            }
        float want[4][8];
        for (int t = 0; t < 4; t++)
            for (int r = 0; r < 8; r++) scalar.vec_dot[LLAMBDA_TYPE_Q4_0](NN, &want[t][r], w[r], xq[t]);
        check_tiles_at_extremes(LLAMBDA_TYPE_Q4_0, NN, w, sizeof w[0], xq, sizeof xq[0], want);
        CHECK(want[0][0] == -(float)(7 * 128 * NN), "Q4_0: the extreme row's dot is %g", (double)want[0][0]);
    }
    TEST("kernels: the prefill tiles exist for the main quant types") {
        CHECK(n >= 10, "only %d weight types tested", n);
#ifdef LL_HAVE_AVX2
        if (ll_cpu_has_avx2()) {   /* the AVX2 set, whichever one LLAMBDA_ISA made active */
            ll_kernels k2 = scalar;
            ll_kernels_avx2(&k2);
            const int tiled[] = {LLAMBDA_TYPE_Q4_0, LLAMBDA_TYPE_Q4_K, LLAMBDA_TYPE_Q6_K, LLAMBDA_TYPE_Q8_0};
            for (int i = 0; i < 4; i++)
                CHECK(k2.vec_dot_x8_t4[tiled[i]], "%s has no 8x4 tile", llambda_type_get(tiled[i])->name);
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q4_K] && k2.dot_packed[LLAMBDA_TYPE_Q4_K], "Q4_K has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q6_K] && k2.dot_packed[LLAMBDA_TYPE_Q6_K], "Q6_K has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q5_K] && k2.dot_packed[LLAMBDA_TYPE_Q5_K], "Q5_K has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q8_0] && k2.dot_packed[LLAMBDA_TYPE_Q8_0], "Q8_0 has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q4_0] && k2.dot_packed[LLAMBDA_TYPE_Q4_0], "Q4_0 has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_IQ4_XS] && k2.dot_packed[LLAMBDA_TYPE_IQ4_XS], "IQ4_XS has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q3_K] && k2.dot_packed[LLAMBDA_TYPE_Q3_K], "Q3_K has no repacked kernel");
            CHECK(k2.vec_dot[LLAMBDA_TYPE_Q3_K] != scalar.vec_dot[LLAMBDA_TYPE_Q3_K], "Q3_K has no vector kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q2_K] && k2.dot_packed[LLAMBDA_TYPE_Q2_K], "Q2_K has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q4_1] && k2.dot_packed[LLAMBDA_TYPE_Q4_1], "Q4_1 has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_IQ4_NL] && k2.dot_packed[LLAMBDA_TYPE_IQ4_NL], "IQ4_NL has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_MXFP4] && k2.dot_packed[LLAMBDA_TYPE_MXFP4], "MXFP4 has no repacked kernel");
            CHECK(k2.pack_x8[LLAMBDA_TYPE_Q5_1] && k2.dot_packed[LLAMBDA_TYPE_Q5_1], "Q5_1 has no repacked kernel");
            const int vect[] = {LLAMBDA_TYPE_Q2_K, LLAMBDA_TYPE_Q4_1, LLAMBDA_TYPE_Q5_1, LLAMBDA_TYPE_IQ4_NL, LLAMBDA_TYPE_MXFP4};
            for (int i = 0; i < 5; i++)
                CHECK(k2.vec_dot[vect[i]] != scalar.vec_dot[vect[i]], "%s has no vector kernel", llambda_type_get(vect[i])->name);
            CHECK(k2.vec_dot[LLAMBDA_TYPE_IQ4_XS] != scalar.vec_dot[LLAMBDA_TYPE_IQ4_XS], "IQ4_XS has no vector kernel");
        }
        if (ll_cpu_has_avx2() && ll_cpu_has_avx512()) {
            ll_kernels k512 = scalar;
            ll_kernels_avx512(&k512);
            CHECK(k512.pack_x8[LLAMBDA_TYPE_Q4_K] && k512.dot_packed[LLAMBDA_TYPE_Q4_K], "Q4_K has no AVX-512 repacked kernel");
            CHECK(k512.pack_x8[LLAMBDA_TYPE_Q6_K] && k512.dot_packed[LLAMBDA_TYPE_Q6_K], "Q6_K has no AVX-512 repacked kernel");
            CHECK(k512.pack_x8[LLAMBDA_TYPE_Q5_K] && k512.dot_packed[LLAMBDA_TYPE_Q5_K], "Q5_K has no repacked VNNI kernel");
            CHECK(k512.dot_packed2[LLAMBDA_TYPE_IQ4_XS], "IQ4_XS has no 16-row AVX-512 tile");
            ll_kernels base = scalar;
            ll_kernels_avx512_base(&base);
            CHECK(!strcmp(base.isa, "avx512-base") && base.dot_packed[LLAMBDA_TYPE_Q5_K], "the base AVX-512 set is %s", base.isa);
            CHECK((k512.dot_packed[LLAMBDA_TYPE_Q5_K] != base.dot_packed[LLAMBDA_TYPE_Q5_K]) == ll_cpu_has_gfni(),
                  "the Q5_K tile %s GFNI where the CPU %s it", k512.dot_packed[LLAMBDA_TYPE_Q5_K] != base.dot_packed[LLAMBDA_TYPE_Q5_K] ? "uses" : "skips",
                  ll_cpu_has_gfni() ? "has" : "lacks");
            for (int t = 0; t < 3; t++) {
                int ft = (const int[]){LLAMBDA_TYPE_F32, LLAMBDA_TYPE_F16, LLAMBDA_TYPE_BF16}[t];
                CHECK(k512.gemm[ft], "%s has no AVX-512 prompt kernel", llambda_type_get(ft)->name);
            }
        }
#endif
    }
    return test_summary();
}
