/* Chooses the kernel set once: the best ISA the CPU has, or
 * LLAMBDA_ISA=scalar|avx2|avx2-vnni|avx512|avx512-base. */
#include "../internal.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static ll_kernels kernels;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The kernel sets, widest first, each with what the CPU must have for it. LLAMBDA_ISA names
 * where to start (a set the CPU lacks falls to the next one it has); without it the first
 * the CPU has wins, except avx512-base (the AVX-512 set without its AVX512_BF16 and GFNI
 * kernels, what a Cascade Lake gets), which only its name chooses. */
typedef struct {
    const char *name, *needs;
    int (*has)(void);
    void (*fill)(ll_kernels *k);   /* over the scalar set; NULL: the scalar set itself */
    int by_name_only;              /* never the default, only LLAMBDA_ISA chooses it */
} kernel_set;

static int has_always(void) { return 1; }
#ifdef LL_HAVE_AVX2
static int has_avx512(void) { return ll_cpu_has_avx2() && ll_cpu_has_avx512(); }
static int has_avx2_vnni(void) { return ll_cpu_has_avx2() && ll_cpu_has_avx_vnni(); }
#endif

static const kernel_set sets[] = {
#ifdef LL_HAVE_AVX2
    {"avx512", "AVX-512 F/BW/VL/VNNI", has_avx512, ll_kernels_avx512, 0},
    {"avx512-base", "AVX-512 F/BW/VL/VNNI", has_avx512, ll_kernels_avx512_base, 1},
    {"avx2-vnni", "AVX-VNNI", has_avx2_vnni, ll_kernels_avx2_vnni, 0},
    {"avx2", "AVX2", ll_cpu_has_avx2, ll_kernels_avx2, 0},
#endif
    {"scalar", "", has_always, NULL, 0},
};

static void choose(void) {
    ll_init_tables();
    ll_kernels_scalar(&kernels);
    const char *want = getenv("LLAMBDA_ISA");
    int n = (int)(sizeof sets / sizeof sets[0]), from = -1;
    for (int i = 0; want && *want && i < n; i++)
        if (!strcmp(want, sets[i].name)) from = i;
    if (want && *want && from < 0) {   /* the names this build knows, from the table */
        char names[128] = "";
        for (int i = n - 1; i >= 0; i--)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i < n - 1 ? ", " : "", sets[i].name);
        fprintf(stderr, "llambda: LLAMBDA_ISA=%s unknown (%s); using the best available\n", want, names);
    }
    for (int i = from < 0 ? 0 : from; i < n; i++) {
        if ((from < 0 && sets[i].by_name_only) || !sets[i].has()) continue;
        if (from >= 0 && i != from)
            fprintf(stderr, "llambda: this CPU lacks %s; using %s kernels\n", sets[from].needs, sets[i].name);
        if (sets[i].fill) sets[i].fill(&kernels);
        return;
    }
}

/* The vector kernels fetch the weight stream ahead of their loads: far enough that the
 * bytes in flight cover the memory's latency at the rate a thread streams (Little's law),
 * and no further. The best fixed distance moved with this shared host's bandwidth level.
 * Session 24, llama-3.2-1b Q4_K_M, two threads, per-token alternation in one process (each
 * timed token against a read pass just before it, binned by that pass): where passes read
 * 45-50 and 50-55 GB/s, 4 KiB (the Q6_K tile 6) kept 0.885 and 0.875 of the pass, 6 KiB
 * (Q6_K 9, the fixed distances before) 0.868 and 0.855; where they read over 78, 0.776
 * against 0.793. So a thread's recent decode rate sets the distance, rate x
 * STREAM_LATENCY_NS within the two measured ends (the Q6_K and Q5_K tiles fetch half as far
 * again): 4 KiB at about 23 GB/s a thread or less, 6 KiB at 34 or more. Against the fixed
 * 6 KiB, two runs of 400 and 500 tokens a variant: 0.907 and 0.904 against 0.896 and 0.890
 * at 45-50 GB/s, 0.897 and 0.893 against 0.865 and 0.881 at 50-55, 0.805 and 0.807 against
 * 0.810 and 0.802 over 78; a llama-3.2-1b Q6_K file 0.940 and 0.924 against 0.902 and 0.899
 * at 45-50, 0.852 and 0.850 against 0.854 and 0.847 over 78. A latency of 220 ns instead of
 * 180 fell between the two. */
#define STREAM_LATENCY_NS 180
#define STREAM_AHEAD_MIN 4096
#define STREAM_AHEAD_MAX 6144
atomic_int ll_stream_ahead_bytes = STREAM_AHEAD_MAX;
static atomic_int stream_rate;   /* bytes per microsecond a thread, a running mean; 0 before any */

void ll_note_stream_rate(int64_t bytes, double seconds, int n_threads) {
    if (!(seconds > 0) || n_threads < 1) return;
    double now = (double)bytes / seconds / n_threads * 1e-6;
    if (!(now < 1e7)) return;
    int mean = atomic_load_explicit(&stream_rate, memory_order_relaxed);
    mean = mean ? mean + (int)((now - mean) / 8) : (int)now;   /* about the last eight sets */
    atomic_store_explicit(&stream_rate, mean, memory_order_relaxed);
    long ahead = (long)mean * STREAM_LATENCY_NS / 1000 / 64 * 64;
    ahead = ahead < STREAM_AHEAD_MIN ? STREAM_AHEAD_MIN : ahead > STREAM_AHEAD_MAX ? STREAM_AHEAD_MAX : ahead;
    atomic_store_explicit(&ll_stream_ahead_bytes, (int)ahead, memory_order_relaxed);
}

const ll_kernels *ll_kernels_get(void) {
    pthread_once(&once, choose);
    return &kernels;
}

int ll_vec_dot_type(int t) {
    switch (t) {
    case LLAMBDA_TYPE_F32: return t;
    case LLAMBDA_TYPE_F16: return LL_ACT_F16_AS_F32;
    case LLAMBDA_TYPE_BF16: return LLAMBDA_TYPE_BF16;
    case LLAMBDA_TYPE_Q4_0: case LLAMBDA_TYPE_Q5_0: case LLAMBDA_TYPE_Q8_0:
    case LLAMBDA_TYPE_IQ4_NL: case LLAMBDA_TYPE_MXFP4: return LLAMBDA_TYPE_Q8_0;
    case LLAMBDA_TYPE_Q4_1: case LLAMBDA_TYPE_Q5_1: return LLAMBDA_TYPE_Q8_1;
    case LLAMBDA_TYPE_Q2_K: case LLAMBDA_TYPE_Q3_K: case LLAMBDA_TYPE_Q4_K: case LLAMBDA_TYPE_Q5_K:
    case LLAMBDA_TYPE_Q6_K: case LLAMBDA_TYPE_IQ4_XS: return LLAMBDA_TYPE_Q8_K;
    }
    return -1;
}

size_t ll_act_row_bytes(int vdt, int64_t n) {
    if (vdt == LL_ACT_F16_AS_F32) return (size_t)n * 4 + 64;
    if (vdt == LL_ACT_F16_PASS || vdt == LL_ACT_BF16_PASS || vdt == LL_ACT_BF16_PASS4) return (size_t)n * 2 + 64;
    return (size_t)llambda_type_row_bytes(vdt, n);
}

const char *llambda_isa(void) { return ll_kernels_get()->isa; }
