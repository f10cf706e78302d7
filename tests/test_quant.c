/* The tensor type table: exact binary16 conversions, quantized fixture tensors agree with
 * the F32 originals within each type's quantization error, and quantize→dequantize of
 * random data meets per-type error bounds. */
#include "harness.h"
#include <math.h>

static uint64_t rng = 88172645463325252ull;
static double urand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (double)(rng >> 11) * 0x1.0p-53; }
static float gauss(void) { double u = urand() + 1e-12, v = urand(); return (float)(sqrt(-2 * log(u)) * cos(2 * M_PI * v)); }

/* NMSE of quantize→dequantize for gaussian values with a few 8σ outliers. Bounds follow
 * from the step size: uniform rounding noise is step²/12, with step ≈ 2·amax/levels and
 * amax ≈ 3σ for a 32-block of gaussians (more for 256-blocks with outliers); the bounds
 * below are that estimate with about 1.5x headroom. */
static void roundtrip(int type, double bound) {
    const llambda_type_traits *t = llambda_type_get(type);
    int64_t n = 256 * 64;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    uint8_t *q = malloc((size_t)llambda_type_row_bytes(type, n));
    for (int64_t i = 0; i < n; i++) x[i] = gauss() * (i % 997 == 0 ? 8.f : 1.f);
    t->quantize_row(x, q, n);
    t->dequantize_row(q, y, n);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) { num += (double)(x[i] - y[i]) * (x[i] - y[i]); den += (double)x[i] * x[i]; }
    printf("  %-7s quantize/dequantize NMSE %.3e (bound %.1e)\n", t->name, num / den, bound);
    CHECK(num / den <= bound, "%s: NMSE %.3g > %.3g", t->name, num / den, bound);
    /* zeros stay zeros */
    memset(x, 0, 256 * 4);
    t->quantize_row(x, q, 256);
    t->dequantize_row(q, y, 256);
    int zero = 1;
    for (int i = 0; i < 256; i++) zero &= y[i] == 0;
    CHECK(zero, "%s: zero block does not round-trip to zeros", t->name);
    free(x); free(y); free(q);
}

static void fp16_exhaustive(void) {
    extern float ll_fp16_to_fp32(uint16_t);   /* not public: checked through F16 rows */
    int bad = 0;
    const llambda_type_traits *t = llambda_type_get(LLAMBDA_TYPE_F16);
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t hv = (uint16_t)h, back;
        float f;
        t->dequantize_row(&hv, &f, 1);
        if (isnan(f)) continue;
        t->quantize_row(&f, &back, 1);
        if (back != hv) bad++;
    }
    CHECK(bad == 0, "%d binary16 values do not round-trip", bad);
    /* round to nearest even at the midpoint between 1 and 1+2^-10 */
    float mid = 1.0f + 0x1p-11f, up = 1.0f + 0x1p-11f + 0x1p-20f;
    uint16_t a, b;
    t->quantize_row(&mid, &a, 1);
    t->quantize_row(&up, &b, 1);
    CHECK(a == 0x3C00 && b == 0x3C01, "fp16 rounding: %04x %04x", a, b);
    /* bf16 */
    const llambda_type_traits *bt = llambda_type_get(LLAMBDA_TYPE_BF16);
    float v = 1.00390625f; uint16_t bv; float r;
    bt->quantize_row(&v, &bv, 1); bt->dequantize_row(&bv, &r, 1);
    CHECK(bv == 0x3F80 && r == 1.0f, "bf16 ties to even: %04x", bv);
}

static void q8_K_activations(void) {
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = gauss();
    x[17] = -5.f; /* the signed extreme sets the scale: it maps to -127, d takes the other sign */
    uint8_t blk[292];
    const llambda_type_traits *t = llambda_type_get(LLAMBDA_TYPE_Q8_K);
    t->quantize_row(x, blk, 256);
    float d; memcpy(&d, blk, 4);
    const int8_t *qs = (const int8_t *)(blk + 4);
    int16_t bs[16]; memcpy(bs, blk + 4 + 256, 32);
    CHECK(d > 0, "d must carry the opposite sign of the extreme (d = %g)", d);
    CHECK(qs[17] == -127, "extreme maps to -127, got %d", qs[17]);
    int ok = 1;
    for (int g = 0; g < 16; g++) { int s = 0; for (int k = 0; k < 16; k++) s += qs[16 * g + k]; ok &= s == bs[g]; }
    CHECK(ok, "bsums are the 16-element sums");
    float y[256];
    t->dequantize_row(blk, y, 256);
    float worst = 0;
    for (int i = 0; i < 256; i++) worst = fmaxf(worst, fabsf(x[i] - y[i]));
    CHECK(worst <= fabsf(d) * 0.5f + 1e-6f, "error %g above half a step %g", worst, fabsf(d) / 2);
}

/* Each quantized fixture tensor against the same tensor of the F32 file. */
static void fixture_tensors(const char *model, const char *quant) {
    char pq[256], pf[256];
    snprintf(pq, sizeof pq, "models/%s-%s.gguf", model, quant);
    snprintf(pf, sizeof pf, "models/%s-F32.gguf", model);
    llambda_gguf *gq = llambda_gguf_open(fixture(pq)), *gf = llambda_gguf_open(fixture(pf));
    CHECK(gq && gf, "open: %s", llambda_last_error());
    if (!gq || !gf) { llambda_gguf_close(gq); llambda_gguf_close(gf); return; }
    /* bound on NMSE by type: about 4^-(bits-1) for these random-normal weights */
    static const struct { int type; double bound; } bounds[] = {
        {LLAMBDA_TYPE_F32, 0}, {LLAMBDA_TYPE_F16, 1e-6}, {LLAMBDA_TYPE_Q8_0, 2e-4}, {LLAMBDA_TYPE_Q6_K, 1.5e-3},
        {LLAMBDA_TYPE_Q5_K, 5e-3}, {LLAMBDA_TYPE_Q5_0, 5e-3}, {LLAMBDA_TYPE_Q4_K, 1.5e-2}, {LLAMBDA_TYPE_Q4_0, 2e-2}};
    int checked = 0;
    for (int64_t i = 0; i < llambda_gguf_n_tensors(gq); i++) {
        const llambda_gguf_tensor *tq = llambda_gguf_tensor_at(gq, i), *tf = llambda_gguf_find_tensor(gf, tq->name);
        CHECK(tf != NULL, "%s missing in F32 file", tq->name);
        if (!tf) continue;
        int64_t n = llambda_tensor_nelements(tq);
        float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
        llambda_type_get(tq->type)->dequantize_row(tq->data, a, n);
        llambda_type_get(tf->type)->dequantize_row(tf->data, b, n);
        double num = 0, den = 0;
        for (int64_t k = 0; k < n; k++) { num += (double)(a[k] - b[k]) * (a[k] - b[k]); den += (double)b[k] * b[k]; }
        double e = den > 0 ? num / den : num, bound = -1;
        for (size_t k = 0; k < sizeof bounds / sizeof *bounds; k++) if (bounds[k].type == tq->type) bound = bounds[k].bound;
        CHECK(bound >= 0, "%s: unexpected type %s", tq->name, llambda_type_get(tq->type)->name);
        CHECK(e <= bound, "%s-%s %s (%s): NMSE %.3g > %.3g", model, quant, tq->name, llambda_type_get(tq->type)->name, e, bound);
        free(a); free(b);
        checked++;
    }
    printf("  %s-%s: %d tensors within their type's bound\n", model, quant, checked);
    llambda_gguf_close(gq); llambda_gguf_close(gf);
}

int main(void) {
    TEST("types: binary16/bfloat16 conversions exact, ties to even") fp16_exhaustive();
    TEST("types: Q8_K activation blocks (signed scale, bsums, half-step error)") q8_K_activations();
    TEST("types: quantize round trip Q8_0") roundtrip(LLAMBDA_TYPE_Q8_0, 6e-5);
    TEST("types: quantize round trip Q6_K") roundtrip(LLAMBDA_TYPE_Q6_K, 6e-4);
    TEST("types: quantize round trip Q5_K") roundtrip(LLAMBDA_TYPE_Q5_K, 2.5e-3);
    TEST("types: quantize round trip Q5_0") roundtrip(LLAMBDA_TYPE_Q5_0, 2.5e-3);
    TEST("types: quantize round trip Q5_1") roundtrip(LLAMBDA_TYPE_Q5_1, 2.5e-3);
    TEST("types: quantize round trip Q4_K") roundtrip(LLAMBDA_TYPE_Q4_K, 6e-3);
    TEST("types: quantize round trip Q4_0") roundtrip(LLAMBDA_TYPE_Q4_0, 1e-2);
    TEST("types: quantize round trip Q4_1") roundtrip(LLAMBDA_TYPE_Q4_1, 1e-2);
    TEST("types: quantize round trip IQ4_NL") roundtrip(LLAMBDA_TYPE_IQ4_NL, 8e-3);
    TEST("types: quantize round trip IQ4_XS") roundtrip(LLAMBDA_TYPE_IQ4_XS, 8e-3);
    TEST("types: quantize round trip Q3_K") roundtrip(LLAMBDA_TYPE_Q3_K, 3e-2);
    TEST("types: quantize round trip Q2_K") roundtrip(LLAMBDA_TYPE_Q2_K, 1.2e-1);
    TEST("types: quantize round trip MXFP4") roundtrip(LLAMBDA_TYPE_MXFP4, 3e-2);
    TEST("types: quantize round trip Q8_K") roundtrip(LLAMBDA_TYPE_Q8_K, 2e-4);
    TEST("types: unknown and removed ids have no traits") {
        CHECK(!llambda_type_get(4) && !llambda_type_get(31) && !llambda_type_get(-1) && !llambda_type_get(1000), "removed ids");
        CHECK(llambda_type_row_bytes(LLAMBDA_TYPE_Q4_K, 512) == 288, "row bytes");
    }
    TEST("types: IQ4_XS files mix types as llama.cpp does (Q5_K attn_v at GQA >= 4, first eighth of ffn_down)") {
        int64_t sq[2] = {2048, 2048}, kv[2] = {2048, 512}, down[2] = {8192, 2048}, head[2] = {2048, 128256}, odd[2] = {96, 64};
        int F = LLAMBDA_FTYPE_IQ4_XS, F32 = LLAMBDA_TYPE_F32;
        CHECK(llambda_ftype_from_name("iq4_xs") == F && !strcmp(llambda_ftype_name(F), "IQ4_XS"), "name");
        CHECK(llambda_ftype_from_name("IQ2_XXS") < 0 && !strcmp(llambda_ftype_name(19), "IQ2_XXS"), "named but not made");
        CHECK(llambda_quant_tensor_type(F, "blk.3.attn_q.weight", 2, sq, F32, 3, 16, true, 0, 4) == LLAMBDA_TYPE_IQ4_XS, "attn_q");
        CHECK(llambda_quant_tensor_type(F, "blk.3.attn_v.weight", 2, kv, F32, 3, 16, true, 0, 4) == LLAMBDA_TYPE_Q5_K, "attn_v gqa 4");
        CHECK(llambda_quant_tensor_type(F, "blk.3.attn_v.weight", 2, kv, F32, 3, 16, true, 0, 2) == LLAMBDA_TYPE_IQ4_XS, "attn_v gqa 2");
        CHECK(llambda_quant_tensor_type(F, "blk.1.ffn_down.weight", 2, down, F32, 1, 16, true, 0, 4) == LLAMBDA_TYPE_Q5_K, "ffn_down 1/16");
        CHECK(llambda_quant_tensor_type(F, "blk.2.ffn_down.weight", 2, down, F32, 2, 16, true, 0, 4) == LLAMBDA_TYPE_IQ4_XS, "ffn_down 2/16");
        CHECK(llambda_quant_tensor_type(F, "output.weight", 2, head, F32, 0, 0, true, 0, 4) == LLAMBDA_TYPE_Q6_K, "output");
        CHECK(llambda_quant_tensor_type(F, "token_embd.weight", 2, head, F32, 0, 0, true, 0, 4) == LLAMBDA_TYPE_IQ4_XS, "token_embd");
        CHECK(llambda_quant_tensor_type(F, "token_embd.weight", 2, head, F32, 0, 0, false, 0, 4) == LLAMBDA_TYPE_Q6_K, "tied token_embd");
        CHECK(llambda_quant_tensor_type(F, "blk.0.attn_q.weight", 2, odd, F32, 0, 1, true, 0, 1) == LLAMBDA_TYPE_IQ4_NL, "96-wide rows");
    }
    TEST("types: Q3_K_M files mix types as llama.cpp does (attn_v Q5_K then Q4_K, ffn_down and attn_output Q4_K)") {
        int64_t sq[2] = {2048, 2048}, kv[2] = {2048, 512}, down[2] = {8192, 2048}, head[2] = {2048, 128256};
        int F = LLAMBDA_FTYPE_Q3_K_M, F32 = LLAMBDA_TYPE_F32;
        CHECK(llambda_ftype_from_name("Q3_K_M") == F, "name");
        CHECK(llambda_quant_tensor_type(F, "blk.3.attn_q.weight", 2, sq, F32, 3, 16, true, 0, 4) == LLAMBDA_TYPE_Q3_K, "attn_q");
        CHECK(llambda_quant_tensor_type(F, "blk.3.ffn_up.weight", 2, down, F32, 3, 16, true, 0, 4) == LLAMBDA_TYPE_Q3_K, "ffn_up");
        CHECK(llambda_quant_tensor_type(F, "blk.1.attn_v.weight", 2, kv, F32, 1, 16, true, 0, 4) == LLAMBDA_TYPE_Q5_K, "attn_v 1");
        CHECK(llambda_quant_tensor_type(F, "blk.2.attn_v.weight", 2, kv, F32, 2, 16, true, 0, 4) == LLAMBDA_TYPE_Q4_K, "attn_v 2");
        CHECK(llambda_quant_tensor_type(F, "blk.0.ffn_down.weight", 2, down, F32, 0, 16, true, 0, 4) == LLAMBDA_TYPE_Q5_K, "ffn_down 0");
        CHECK(llambda_quant_tensor_type(F, "blk.1.ffn_down.weight", 2, down, F32, 1, 16, true, 0, 4) == LLAMBDA_TYPE_Q4_K, "ffn_down 1");
        CHECK(llambda_quant_tensor_type(F, "blk.1.attn_output.weight", 2, sq, F32, 1, 16, true, 0, 4) == LLAMBDA_TYPE_Q4_K, "attn_output");
        CHECK(llambda_quant_tensor_type(F, "output.weight", 2, head, F32, 0, 0, true, 0, 4) == LLAMBDA_TYPE_Q6_K, "output");
    }
    TEST("types: Q2_K files mix types as llama.cpp does (attn_v Q4_K at GQA >= 4, ffn_down and attn_output Q3_K)") {
        int64_t sq[2] = {2048, 2048}, kv[2] = {2048, 512}, down[2] = {8192, 2048};
        int F = LLAMBDA_FTYPE_Q2_K, F32 = LLAMBDA_TYPE_F32;
        CHECK(llambda_ftype_from_name("Q2_K") == F, "name");
        CHECK(llambda_quant_tensor_type(F, "blk.3.ffn_gate.weight", 2, down, F32, 3, 16, true, 0, 4) == LLAMBDA_TYPE_Q2_K, "ffn_gate");
        CHECK(llambda_quant_tensor_type(F, "blk.3.attn_v.weight", 2, kv, F32, 3, 16, true, 0, 4) == LLAMBDA_TYPE_Q4_K, "attn_v gqa 4");
        CHECK(llambda_quant_tensor_type(F, "blk.3.attn_v.weight", 2, kv, F32, 3, 16, true, 0, 2) == LLAMBDA_TYPE_Q3_K, "attn_v gqa 2");
        CHECK(llambda_quant_tensor_type(F, "blk.0.ffn_down.weight", 2, down, F32, 0, 16, true, 0, 4) == LLAMBDA_TYPE_Q3_K, "ffn_down");
        CHECK(llambda_quant_tensor_type(F, "blk.0.attn_output.weight", 2, sq, F32, 0, 16, true, 0, 4) == LLAMBDA_TYPE_Q3_K, "attn_output");
    }
    const char *models[] = {"tiny-llama31", "tiny-qwen25"};
    const char *quants[] = {"F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"};
    for (int m = 0; m < 2; m++)
        for (int q = 0; q < 6; q++) {
            char name[128];
            snprintf(name, sizeof name, "types: %s-%s tensors match F32 within type error", models[m], quants[q]);
            TEST(name) fixture_tensors(models[m], quants[q]);
        }
    return test_summary();
}
