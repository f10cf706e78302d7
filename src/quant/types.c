/* The tensor type table: one row of traits per ggml type. Types llambda cannot compute
 * keep their sizes (so files listing them open and `info` shows them) with NULL
 * functions; using such a tensor is a clear error at model load. */
#include "../internal.h"

#define DQ(t) void ll_dequantize_row_##t(const void *, float *, int64_t)
#define QZ(t) void ll_quantize_row_##t(const float *, void *, int64_t)
DQ(f32); DQ(f16); DQ(bf16); DQ(q4_0); DQ(q4_1); DQ(q5_0); DQ(q5_1); DQ(q8_0); DQ(q8_1);
DQ(q2_K); DQ(q3_K); DQ(q4_K); DQ(q5_K); DQ(q6_K); DQ(q8_K); DQ(iq4_nl); DQ(iq4_xs); DQ(mxfp4);
QZ(q4_0); QZ(q4_1); QZ(q5_0); QZ(q5_1); QZ(q8_0_ref); QZ(q2_K); QZ(q3_K); QZ(q4_K); QZ(q5_K);
QZ(q6_K); QZ(iq4_nl); QZ(iq4_xs); QZ(mxfp4);

static void quantize_row_f32(const float *x, void *y, int64_t n) { ll_convert_row_f32(x, y, n); }
static void quantize_row_f16(const float *x, void *y, int64_t n) { ll_convert_row_f16(x, y, n); }
static void quantize_row_bf16(const float *x, void *y, int64_t n) { ll_convert_row_bf16(x, y, n); }

static const llambda_type_traits type_table[LLAMBDA_TYPE_COUNT] = {
    [LLAMBDA_TYPE_F32]     = {0,  "F32",     1,   4,   ll_dequantize_row_f32,    quantize_row_f32},
    [LLAMBDA_TYPE_F16]     = {1,  "F16",     1,   2,   ll_dequantize_row_f16,    quantize_row_f16},
    [LLAMBDA_TYPE_Q4_0]    = {2,  "Q4_0",    32,  18,  ll_dequantize_row_q4_0,   ll_quantize_row_q4_0},
    [LLAMBDA_TYPE_Q4_1]    = {3,  "Q4_1",    32,  20,  ll_dequantize_row_q4_1,   ll_quantize_row_q4_1},
    [LLAMBDA_TYPE_Q5_0]    = {6,  "Q5_0",    32,  22,  ll_dequantize_row_q5_0,   ll_quantize_row_q5_0},
    [LLAMBDA_TYPE_Q5_1]    = {7,  "Q5_1",    32,  24,  ll_dequantize_row_q5_1,   ll_quantize_row_q5_1},
    [LLAMBDA_TYPE_Q8_0]    = {8,  "Q8_0",    32,  34,  ll_dequantize_row_q8_0,   ll_quantize_row_q8_0_ref},
    [LLAMBDA_TYPE_Q8_1]    = {9,  "Q8_1",    32,  36,  ll_dequantize_row_q8_1,   ll_quantize_row_q8_1},
    [LLAMBDA_TYPE_Q2_K]    = {10, "Q2_K",    256, 84,  ll_dequantize_row_q2_K,   ll_quantize_row_q2_K},
    [LLAMBDA_TYPE_Q3_K]    = {11, "Q3_K",    256, 110, ll_dequantize_row_q3_K,   ll_quantize_row_q3_K},
    [LLAMBDA_TYPE_Q4_K]    = {12, "Q4_K",    256, 144, ll_dequantize_row_q4_K,   ll_quantize_row_q4_K},
    [LLAMBDA_TYPE_Q5_K]    = {13, "Q5_K",    256, 176, ll_dequantize_row_q5_K,   ll_quantize_row_q5_K},
    [LLAMBDA_TYPE_Q6_K]    = {14, "Q6_K",    256, 210, ll_dequantize_row_q6_K,   ll_quantize_row_q6_K},
    [LLAMBDA_TYPE_Q8_K]    = {15, "Q8_K",    256, 292, ll_dequantize_row_q8_K,   ll_quantize_row_q8_K},
    [LLAMBDA_TYPE_IQ2_XXS] = {16, "IQ2_XXS", 256, 66,  NULL, NULL},
    [LLAMBDA_TYPE_IQ2_XS]  = {17, "IQ2_XS",  256, 74,  NULL, NULL},
    [LLAMBDA_TYPE_IQ3_XXS] = {18, "IQ3_XXS", 256, 98,  NULL, NULL},
    [LLAMBDA_TYPE_IQ1_S]   = {19, "IQ1_S",   256, 50,  NULL, NULL},
    [LLAMBDA_TYPE_IQ4_NL]  = {20, "IQ4_NL",  32,  18,  ll_dequantize_row_iq4_nl, ll_quantize_row_iq4_nl},
    [LLAMBDA_TYPE_IQ3_S]   = {21, "IQ3_S",   256, 110, NULL, NULL},
    [LLAMBDA_TYPE_IQ2_S]   = {22, "IQ2_S",   256, 82,  NULL, NULL},
    [LLAMBDA_TYPE_IQ4_XS]  = {23, "IQ4_XS",  256, 136, ll_dequantize_row_iq4_xs, ll_quantize_row_iq4_xs},
    [LLAMBDA_TYPE_I8]      = {24, "I8",      1,   1,   NULL, NULL},
    [LLAMBDA_TYPE_I16]     = {25, "I16",     1,   2,   NULL, NULL},
    [LLAMBDA_TYPE_I32]     = {26, "I32",     1,   4,   NULL, NULL},
    [LLAMBDA_TYPE_I64]     = {27, "I64",     1,   8,   NULL, NULL},
    [LLAMBDA_TYPE_F64]     = {28, "F64",     1,   8,   NULL, NULL},
    [LLAMBDA_TYPE_IQ1_M]   = {29, "IQ1_M",   256, 56,  NULL, NULL},
    [LLAMBDA_TYPE_BF16]    = {30, "BF16",    1,   2,   ll_dequantize_row_bf16,   quantize_row_bf16},
    [LLAMBDA_TYPE_TQ1_0]   = {34, "TQ1_0",   256, 54,  NULL, NULL},
    [LLAMBDA_TYPE_TQ2_0]   = {35, "TQ2_0",   256, 66,  NULL, NULL},
    [LLAMBDA_TYPE_MXFP4]   = {39, "MXFP4",   32,  17,  ll_dequantize_row_mxfp4,  ll_quantize_row_mxfp4},
};

const llambda_type_traits *llambda_type_get(int id) {
    if (id < 0 || id >= LLAMBDA_TYPE_COUNT || type_table[id].block_elems == 0) return NULL;
    ll_init_tables();
    return &type_table[id];
}

int64_t llambda_type_row_bytes(int id, int64_t n) {
    const llambda_type_traits *t = llambda_type_get(id);
    return t ? n / t->block_elems * t->block_bytes : -1;
}
