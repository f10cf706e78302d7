/* The AVX2 kernel set for CPUs with AVX-VNNI but not AVX-512 (Intel since Alder Lake, among
 * others): avx2.c compiled again with -mavxvnni, its dot products' integer steps one
 * vpdpbusd or vpdpwssd each instead of two or three instructions (see DOT_U8I8_4 there).
 * The same integers and the same float steps as the AVX2 set: the same bits. */
#define LL_AVX_VNNI 1
#define ll_kernels_avx2 ll_kernels_avx2_vnni
#define ll_avx2_dot_q4_K ll_avx2_vnni_dot_q4_K
#include "avx2.c"
