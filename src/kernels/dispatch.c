/* Chooses the kernel set once: the best ISA the CPU has, or LLAMBDA_ISA=scalar|avx2|avx512. */
#include "../internal.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static ll_kernels kernels;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void choose(void) {
    ll_init_tables();
    const char *want = getenv("LLAMBDA_ISA");
    ll_kernels_scalar(&kernels);
#ifdef LL_HAVE_AVX2
    int avx2 = ll_cpu_has_avx2(), avx512 = avx2 && ll_cpu_has_avx512();
    if (want && *want && strcmp(want, "scalar") && strcmp(want, "avx2") && strcmp(want, "avx512"))
        fprintf(stderr, "llambda: LLAMBDA_ISA=%s unknown (scalar, avx2, avx512); using the best available\n", want);
    if (want && !strcmp(want, "scalar")) return;
    if (want && !strcmp(want, "avx512") && !avx512)
        fprintf(stderr, "llambda: this CPU lacks AVX-512 F/BW/VL/VNNI; using %s kernels\n", avx2 ? "avx2" : "scalar");
    if (want && !strcmp(want, "avx2") && !avx2) fprintf(stderr, "llambda: this CPU lacks AVX2; using scalar kernels\n");
    if (avx512 && !(want && !strcmp(want, "avx2"))) ll_kernels_avx512(&kernels);
    else if (avx2) ll_kernels_avx2(&kernels);
#else
    (void)want;
#endif
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
    if (vdt == LL_ACT_F16_PASS || vdt == LL_ACT_BF16_PASS) return (size_t)n * 2 + 64;
    return (size_t)llambda_type_row_bytes(vdt, n);
}

const char *llambda_isa(void) { return ll_kernels_get()->isa; }
