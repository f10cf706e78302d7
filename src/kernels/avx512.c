/* The AVX-512 kernel set: avx2.c compiled again with AVX-512 F/BW/VL/VNNI, so each kernel
 * keeps its lane layout and float order (and so its bits) and only the integer steps
 * change instruction (see DOT_U8I8_4 and ACC_MADD16 there). Compiled with
 * -mavx512f -mavx512bw -mavx512vl -mavx512vnni on top of the AVX2 flags. */
#define LL_AVX512 1
#define ll_kernels_avx2 ll_kernels_avx512
#define ll_avx2_dot_q4_K ll_avx512_dot_q4_K
#include "avx2.c"
