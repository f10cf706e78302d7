/* Read bandwidth, the roofline of token generation: threads stream their shares of a
 * buffer much larger than the caches, in several ways (`llambda bench-mem` reports the
 * best pass of the fastest way; `llambda bench --roofline` sets each token against a pass
 * made right before it). Which way wins depends on the machine: on this project's Zen 5
 * host a plain loop of 32- or 64-byte loads (the hardware prefetcher alone) read 60-67
 * GB/s with two threads while the same loop with a software prefetch on every line read
 * 50-57; the kernels need theirs (they compute between loads), so the roofline is the
 * plain loop's. */
#include "cli.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef uint64_t v2u64 __attribute__((vector_size(16)));

enum { MEM_PLAIN16, MEM_PREFETCH16,
#if defined(__x86_64__) && defined(__GNUC__)
       MEM_PLAIN32, MEM_PLAIN64,
#endif
       MEM_WAYS };
static const char *const mem_way_name[] = {"16-byte loads", "16-byte loads, prefetch 4 KiB ahead",
#if defined(__x86_64__) && defined(__GNUC__)
                                           "32-byte loads", "64-byte loads",
#endif
};

static uint64_t read16(const uint8_t *p, size_t n, size_t ahead) {
    v2u64 a = {0, 0}, b = {0, 0}, c = {0, 0}, d = {0, 0};
    for (size_t o = 0; o + 64 <= n; o += 64) {
        if (ahead) __builtin_prefetch(p + o + ahead);
        v2u64 x0, x1, x2, x3;
        memcpy(&x0, p + o, 16); memcpy(&x1, p + o + 16, 16); memcpy(&x2, p + o + 32, 16); memcpy(&x3, p + o + 48, 16);
        a ^= x0; b ^= x1; c ^= x2; d ^= x3;
    }
    a ^= b ^ c ^ d;
    return a[0] ^ a[1];
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read32(const uint8_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a;
    for (size_t o = 0; o + 64 <= n; o += 64) {
        a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p + o)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + o + 32)));
    }
    a = _mm256_xor_si256(a, b);
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
__attribute__((target("avx512f"))) static uint64_t read64(const uint8_t *p, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = a;
    for (size_t o = 0; o + 128 <= n; o += 128) {
        a = _mm512_xor_si512(a, _mm512_loadu_si512(p + o));
        b = _mm512_xor_si512(b, _mm512_loadu_si512(p + o + 64));
    }
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_xor_si512(a, b));
}
#endif

static bool way_available(int way) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (way == MEM_PLAIN32) return __builtin_cpu_supports("avx2");
    if (way == MEM_PLAIN64) return __builtin_cpu_supports("avx512f");
#endif
    (void)way;
    return true;
}

static uint64_t read_way(const uint8_t *p, size_t n, int way) {
    switch (way) {
#if defined(__x86_64__) && defined(__GNUC__)
    case MEM_PLAIN32: return read32(p, n);
    case MEM_PLAIN64: return read64(p, n);
#endif
    case MEM_PREFETCH16: return read16(p, n, 4096);
    default: return read16(p, n, 0);
    }
}

/* The reading threads: the caller is thread 0; helpers sleep on a barrier between passes
 * and spin on `go` inside one, so that the timing runs from one start signal to the last
 * thread done, without thread start-up or wake-ups in it. */
#define MAX_READERS 256
struct mem_bench {
    int n, way;
    uint8_t *buf;
    size_t bytes;
    pthread_t th[MAX_READERS];
    pthread_barrier_t start;
    atomic_int go, done, quit;
    uint64_t sink[MAX_READERS];
};
typedef struct { mem_bench *b; int i; } reader_arg;

static void read_share(mem_bench *b, int i) {
    size_t share = b->bytes / (size_t)b->n;
    b->sink[i] = read_way(b->buf + share * (size_t)i, share, b->way);
}

static void *reader(void *arg) {
    reader_arg a = *(reader_arg *)arg;
    free(arg);
    for (;;) {
        pthread_barrier_wait(&a.b->start);
        if (atomic_load(&a.b->quit)) return NULL;
        while (!atomic_load_explicit(&a.b->go, memory_order_acquire)) relax();
        read_share(a.b, a.i);
        atomic_fetch_add_explicit(&a.b->done, 1, memory_order_release);
    }
}

mem_bench *mem_bench_new(size_t bytes, int threads) {
    if (threads < 1 || threads > MAX_READERS) return NULL;
    mem_bench *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->n = threads;
    b->bytes = bytes;
    /* huge pages where the kernel gives them, like the repacked weights (ll_alloc_large) */
    b->buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b->buf == MAP_FAILED) { free(b); return NULL; }
#ifdef MADV_HUGEPAGE
    madvise(b->buf, bytes, MADV_HUGEPAGE);
#endif
    memset(b->buf, 1, bytes);
    pthread_barrier_init(&b->start, NULL, (unsigned)threads);
    for (int i = 1; i < threads; i++) {
        reader_arg *a = malloc(sizeof *a);
        if (a) *a = (reader_arg){b, i};
        if (!a || pthread_create(&b->th[i], NULL, reader, a)) {
            fprintf(stderr, "llambda: cannot start %d reading threads\n", threads);
            exit(1);   /* the barrier counts on every one of them */
        }
    }
    return b;
}

double mem_bench_pass(mem_bench *b, int way) {
    b->way = way;
    atomic_store(&b->go, 0);
    atomic_store(&b->done, 0);
    pthread_barrier_wait(&b->start);   /* the helpers are up and spinning on go */
    double t0 = cli_now();
    atomic_store_explicit(&b->go, 1, memory_order_release);
    read_share(b, 0);
    while (atomic_load_explicit(&b->done, memory_order_acquire) < b->n - 1) relax();
    return (double)b->bytes / (cli_now() - t0) / 1e9;
}

/* The fastest way on this machine, by the best of `reps` passes each; its GB/s in *gbs. */
int mem_bench_best_way(mem_bench *b, int reps, double *gbs) {
    int best_way = 0;
    *gbs = 0;
    for (int way = 0; way < MEM_WAYS; way++) {
        if (!way_available(way)) continue;
        for (int r = 0; r < reps; r++) {
            double g = mem_bench_pass(b, way);
            if (g > *gbs) { *gbs = g; best_way = way; }
        }
    }
    return best_way;
}

void mem_bench_free(mem_bench *b) {
    if (!b) return;
    atomic_store(&b->quit, 1);
    pthread_barrier_wait(&b->start);
    for (int i = 1; i < b->n; i++) pthread_join(b->th[i], NULL);
    pthread_barrier_destroy(&b->start);
    munmap(b->buf, b->bytes);
    free(b);
}

const char *mem_bench_way_name(int way) { return way >= 0 && way < MEM_WAYS ? mem_way_name[way] : "?"; }

int cmd_bench_mem(int argc, char **argv) {
    int threads = 2, reps = 5;
    size_t mib = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) mib = (size_t)atol(argv[++i]);
        else { fputs("usage: llambda bench-mem [-t THREADS] [-r REPS] [--size MiB]\n", stderr); return 2; }
    }
    if (threads < 1 || threads > MAX_READERS || reps < 1 || mib < 64) { fputs("llambda: bench-mem: bad arguments\n", stderr); return 2; }
    mem_bench *b = mem_bench_new(mib << 20, threads);
    if (!b) { fputs("llambda: bench-mem: out of memory\n", stderr); return 1; }
    int n_ways = 0;
    for (int way = 0; way < MEM_WAYS; way++) n_ways += way_available(way);
    double best;
    int way = mem_bench_best_way(b, reps, &best);
    printf("read bandwidth: %.2f GB/s (%d threads, %zu MiB, best of %d passes each of %d ways: %s)\n", best, threads, mib, reps,
           n_ways, mem_way_name[way]);
    mem_bench_free(b);
    return 0;
}
