/* `llambda quantize`, `synth` and `bench`. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double cli_now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec; }

static bool print_progress(float p, const char *what, void *user) {
    (void)user;
    fprintf(stderr, "\r[%3.0f%%] %-48s", 100.0 * p, what);
    if (p >= 1.0f) fprintf(stderr, "\n");
    return true;
}

/* ------------------------------------------------------------------ quantize */

int cmd_quantize(int argc, char **argv) {
    int threads = 0;
    const char *pos[3] = {0};
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (np < 3) pos[np++] = argv[i];
    }
    if (np != 3) { fprintf(stderr, "usage: llambda quantize IN.gguf OUT.gguf TYPE [-t THREADS]\n  TYPE: Q8_0 Q4_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_XS F16 BF16 F32\n"); return 2; }
    int ft = llambda_ftype_from_name(pos[2]);
    if (ft < 0) { fprintf(stderr, "llambda: unknown type '%s' (Q8_0 Q4_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_XS F16 BF16 F32)\n", pos[2]); return 2; }
    double t0 = cli_now();
    if (llambda_quantize_file(pos[0], pos[1], ft, threads, print_progress, NULL)) {
        fprintf(stderr, "\nllambda: %s\n", llambda_last_error());
        return 1;
    }
    fprintf(stderr, "quantized %s -> %s (%s) in %.1f s\n", pos[0], pos[1], llambda_ftype_name(ft), cli_now() - t0);
    return 0;
}

/* ------------------------------------------------------------------ synth */

typedef struct preset {
    const char *name, *arch;
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, ctx, tied, qkv_bias;
    float rope_base, eps, llama3_factor;   /* llama3_factor > 0: write rope_freqs */
    /* gemma4 */
    int head_dim_swa, n_head_kv_global, swa_period, n_swa, shared_kv, per_layer, double_ff;
    /* gemma4 with experts: routed experts (count, used, ff) beside the dense MLP, and global
     * layers whose V is their K (no attn_v) */
    int n_expert, n_expert_used, n_ff_exp, k_eq_v;
} preset;

static const preset presets[] = {
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256, 131072, 1, 0, 500000.f, 1e-5f, 32.f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"llama-3.1-8b", "llama", 4096, 32, 32, 8, 128, 14336, 128256, 131072, 0, 0, 500000.f, 1e-5f, 8.f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1, 1, 1000000.f, 1e-6f, 0.f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"tiny", "llama", 256, 2, 4, 2, 64, 512, 2048, 4096, 0, 0, 500000.f, 1e-5f, 8.f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"tiny-qwen2", "qwen2", 128, 3, 4, 1, 32, 384, 1024, 4096, 1, 1, 1000000.f, 1e-6f, 0.f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* gemma4: head_dim is the global head size; swa_period p = (p-1) sliding layers then 1 global */
    {"gemma-4-e2b", "gemma4", 1536, 35, 8, 1, 512, 6144, 262144, 131072, 1, 0, 1000000.f, 1e-6f, 0.f, 256, 1, 5, 512, 20, 256, 1, 0, 0, 0, 0},
    {"gemma-4-e4b", "gemma4", 2560, 42, 8, 2, 512, 10240, 262144, 131072, 1, 0, 1000000.f, 1e-6f, 0.f, 256, 2, 6, 512, 18, 256, 0, 0, 0, 0, 0},
    {"tiny-gemma4", "gemma4", 128, 8, 4, 2, 64, 256, 1024, 8192, 1, 0, 1000000.f, 1e-6f, 0.f, 32, 1, 4, 8, 4, 16, 1, 0, 0, 0, 0},
    /* 26B-A4B: 128 experts (8 used, ff 704) beside a dense MLP of 2112 on every layer, K = V
     * on the global layers, no per-layer embeddings; --layers cuts the depth */
    {"gemma-4-26b-a4b", "gemma4", 2816, 30, 16, 8, 512, 2112, 262144, 262144, 1, 0, 1000000.f, 1e-6f, 0.f, 256, 2, 6, 1024, 0, 0, 0, 128, 8, 704, 1},
    {"tiny-gemma4-moe", "gemma4", 256, 6, 4, 2, 64, 256, 1024, 8192, 1, 0, 1000000.f, 1e-6f, 0.f, 32, 1, 6, 8, 0, 0, 0, 16, 4, 64, 1},
};

#define LLAMBDA_MAX_SYNTH_LAYERS 128

/* Hybrid presets: nemotron_h(_moe) pattern letters M (Mamba-2), * (attention), E (experts),
 * - (dense MLP); qwen3next uses full_attention_interval instead. */
typedef struct hybrid {
    const char *name, *arch, *pattern;
    int E, L, H, Hkv, D, n_rot, vocab;
    int d_inner, N, G, Hm, K;           /* Mamba-2 (nemotron) or DeltaNet S=N, Hk=G, Hv=Hm (qwen3next) */
    int X, k, F, Fs, interval;
    float rope_base, eps, w_scale;
} hybrid;

static const hybrid hybrids[] = {
    {"nemotron-3-nano-30b-a3b", "nemotron_h_moe", "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
     2688, 52, 32, 2, 128, 0, 131072, 4096, 128, 8, 64, 4, 128, 6, 1856, 3712, 0, 10000.f, 1e-5f, 2.5f},
    {"tiny-nemotron-h-moe", "nemotron_h_moe", "MEM*EME", 128, 7, 4, 2, 32, 0, 1024, 256, 32, 2, 8, 4, 8, 3, 64, 128, 0, 10000.f, 1e-5f, 2.5f},
    {"tiny-nemotron-h-moe-groups", "nemotron_h_moe", "ME*E", 128, 4, 4, 2, 32, 0, 1024, 256, 32, 2, 8, 4, 16, 4, 32, 64, 0, 10000.f, 1e-5f, 1.f},
    {"tiny-nemotron-h", "nemotron_h", "M-M*-M", 128, 6, 4, 1, 32, 0, 1024, 256, 32, 4, 8, 3, 0, 0, 192, 0, 0, 10000.f, 1e-5f, 0.f},
    {"qwen3-next-80b-a3b", "qwen3next", NULL, 2048, 48, 16, 2, 256, 64, 151936, 4096, 128, 16, 32, 4, 512, 10, 512, 512, 4, 1e7f, 1e-6f, 0.f},
    {"tiny-qwen3next", "qwen3next", NULL, 128, 6, 4, 1, 48, 16, 1024, 192, 32, 2, 6, 4, 10, 3, 64, 32, 3, 1e7f, 1e-6f, 0.f},
};
typedef struct synth {
    const preset *p;
    int dst_type_unused;
    uint64_t seed;
} synth;

static uint64_t hash_name(const char *s, uint64_t seed) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *s; s++) { h ^= (uint8_t)*s; h *= 1099511628211ull; }
    return h;
}

typedef struct fill_ctx { const preset *p; uint64_t seed; int type; int64_t ne0, rows; } fill_ctx;

/* Random weights: uniform with the variance of N(0, 0.02²) for matrices, ones for norms,
 * llama3 factors for rope_freqs, quantized row by row into the tensor's type. */
static llambda_status fill(void *user, const char *name, void *dst, uint64_t nbytes) {
    const preset *p = ((fill_ctx *)user)->p;
    uint64_t state = hash_name(name, ((fill_ctx *)user)->seed) | 1;
    const llambda_type_traits *tt = NULL;
    int type = -1;
    int64_t ne0 = 0, rows = 0;
    /* the writer passes one fill_ctx per tensor */
    fill_ctx *fc = user;
    type = fc->type; ne0 = fc->ne0; rows = fc->rows;
    tt = llambda_type_get(type);
    float *row = malloc((size_t)ne0 * sizeof *row);
    if (!row) return LLAMBDA_ERR_NOMEM;
    size_t rb = (size_t)llambda_type_row_bytes(type, ne0);
    int is_norm = strstr(name, "norm") != NULL || strstr(name, "scale") != NULL,   /* scales: ones */
        is_rope = !strcmp(name, "rope_freqs.weight");
    /* Mamba / DeltaNet scalars: A negative (-exp(A_log)), small dt bias, D near 1 */
    int is_a = strstr(name, ".ssm_a") != NULL, is_dtb = strstr(name, "ssm_dt.bias") != NULL, is_d = strstr(name, ".ssm_d") && !is_dtb;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < ne0; i++) {
            if (is_norm) { row[i] = 1.0f; continue; }
            if (is_a || is_dtb || is_d) {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                float u01 = (float)((double)(state >> 11) * 0x1.0p-53);
                row[i] = is_a ? -(1.0f + 7.0f * u01) : is_dtb ? -4.0f + 2.0f * u01 : 0.5f + u01;
                continue;
            }
            if (is_rope && !strcmp(p->arch, "gemma4")) {
                /* proportional RoPE: a quarter of the global pairs rotate, the rest pass */
                row[i] = i < p->head_dim / 8 ? 1.0f : 1e30f;
                continue;
            }
            if (is_rope) {
                /* llama3 scaling: low 1, high 4, original context 8192 */
                double freq = pow(p->rope_base, -2.0 * (double)i / p->head_dim), wl = 2 * M_PI / freq;
                double lo = 8192.0 / 1.0, hi = 8192.0 / 4.0, f = p->llama3_factor;
                if (wl < hi) row[i] = 1.0f;
                else if (wl > lo) row[i] = (float)f;
                else { double sm = (8192.0 / wl - 1.0) / 3.0; row[i] = (float)(1.0 / ((1 - sm) / f + sm)); }
                continue;
            }
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            row[i] = (float)((double)(state >> 11) * 0x1.0p-53 * 2.0 - 1.0) * 0.0346f; /* σ = 0.02 */
        }
        tt->quantize_row(row, (uint8_t *)dst + (size_t)r * rb, ne0);
    }
    (void)nbytes;
    free(row);
    return LLAMBDA_OK;
}

static int add(llambda_gguf_writer *w, fill_ctx *fcs, int *nf, const preset *p, uint64_t seed, int ftype,
               const char *name, int64_t ne0, int64_t ne1, int i_kind, int n_kind) {
    int64_t ne[2] = {ne0, ne1};
    int nd = ne1 ? 2 : 1;
    int type = llambda_quant_tensor_type(ftype, name, nd, ne, LLAMBDA_TYPE_F32, i_kind, n_kind, !p->tied, p->n_expert,
                                         p->n_head_kv ? p->n_head / p->n_head_kv : 1);
    fill_ctx *fc = &fcs[(*nf)++];
    *fc = (fill_ctx){p, seed, type, ne0, ne1 ? ne1 : 1};
    return llambda_gguf_add_tensor_fn(w, name, type, nd, ne, fill, fc) != LLAMBDA_OK;
}

/* Gemma 4 style vocabulary: specials, <0xXX> byte tokens, "▁"-prefixed filler words. */
static void synth_vocab_gemma4(llambda_gguf_writer *w, const preset *p) {
    int n = p->n_vocab;
    char **toks = malloc((size_t)n * sizeof *toks);
    int32_t *types = malloc((size_t)n * sizeof *types);
    const char *sp[] = {"<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_response>"};
    int nsp = 10;
    for (int i = 0; i < n; i++) {
        char buf[32];
        if (i < nsp) { toks[i] = strdup(sp[i]); types[i] = i >= 7 ? 4 : i == 3 ? 2 : 3; continue; }
        if (i < nsp + 256) { snprintf(buf, sizeof buf, "<0x%02X>", i - nsp); toks[i] = strdup(buf); types[i] = 6; continue; }
        snprintf(buf, sizeof buf, "\xe2\x96\x81w%d", i);
        toks[i] = strdup(buf); types[i] = 1;
    }
    llambda_gguf_set_str(w, "tokenizer.ggml.model", "gemma4");
    llambda_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n);
    llambda_gguf_set_arr(w, "tokenizer.ggml.token_type", LLAMBDA_GGUF_I32, types, (uint64_t)n);
    const char *no_merges[1] = {""};
    llambda_gguf_set_arr_str(w, "tokenizer.ggml.merges", no_merges, 0);
    llambda_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 2);
    llambda_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 1);
    llambda_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 3);
    llambda_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 0);
    llambda_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    llambda_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
    llambda_gguf_set_str(w, "tokenizer.chat_template",
        "{{ bos_token }}{% for m in messages %}<|turn>{{ m.role }}\n{{ m.content | trim }}<turn|>\n{% endfor %}<|turn>model\n");
    for (int i = 0; i < n; i++) free(toks[i]);
    free(toks); free(types);
}

static int add3(llambda_gguf_writer *w, fill_ctx *fcs, int *nf, const preset *p, uint64_t seed, int ftype,
                const char *name, int64_t ne0, int64_t ne1, int64_t ne2, int i_kind, int n_kind) {
    int64_t ne[3] = {ne0, ne1, ne2};
    int type = llambda_quant_tensor_type(ftype, name, 3, ne, LLAMBDA_TYPE_F32, i_kind, n_kind, true, (int)ne2,
                                         p->n_head_kv ? p->n_head / p->n_head_kv : 1);
    fill_ctx *fc = &fcs[(*nf)++];
    *fc = (fill_ctx){p, seed, type, ne0, ne1 * ne2};
    return llambda_gguf_add_tensor_fn(w, name, type, 3, ne, fill, fc) != LLAMBDA_OK;
}

static void synth_vocab(llambda_gguf_writer *w, const preset *p) {
    if (!strcmp(p->arch, "gemma4")) { synth_vocab_gemma4(w, p); return; }
    int n = p->n_vocab, llama = !strcmp(p->arch, "llama");
    if (!llama) llama = 0;
    char **toks = malloc((size_t)n * sizeof *toks);
    int32_t *types = malloc((size_t)n * sizeof *types);
    /* 256 byte tokens in GPT-2's byte-to-unicode form, filler words, then specials */
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        int k = 0;
        if (!printable) for (int i = 0; i < b; i++) k += !((i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE));
        unsigned cp = printable ? (unsigned)b : 0x100u + (unsigned)k;
        char *s = malloc(4);
        if (cp < 0x80) { s[0] = (char)cp; s[1] = 0; }
        else { s[0] = (char)(0xC0 | (cp >> 6)); s[1] = (char)(0x80 | (cp & 0x3F)); s[2] = 0; }
        toks[b] = s; types[b] = 1;
    }
    const char *specials_llama[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>"};
    const char *specials_qwen[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    const char **sp = llama ? specials_llama : specials_qwen;
    int nsp = llama ? 6 : 3;
    for (int i = 256; i < n; i++) {
        char buf[32];
        if (i >= n - nsp) { toks[i] = strdup(sp[i - (n - nsp)]); types[i] = 3; continue; }
        snprintf(buf, sizeof buf, "\xc4\xa0w%d", i);  /* "Ġw123": a space-prefixed word */
        toks[i] = strdup(buf); types[i] = 1;
    }
    llambda_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    llambda_gguf_set_str(w, "tokenizer.ggml.pre", llama ? "llama-bpe" : !strncmp(p->arch, "nemotron", 8) ? "pixtral" : "qwen2");
    llambda_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n);
    llambda_gguf_set_arr(w, "tokenizer.ggml.token_type", LLAMBDA_GGUF_I32, types, (uint64_t)n);
    const char *no_merges[1] = {""};
    llambda_gguf_set_arr_str(w, "tokenizer.ggml.merges", no_merges, 0);
    llambda_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(n - nsp));
    llambda_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(llama ? n - nsp + 1 : n - 1));
    llambda_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", llama);
    llambda_gguf_set_str(w, "tokenizer.chat_template", llama
        ? "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}<|eot_id|>{% endfor %}"
        : "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}");
    for (int i = 0; i < n; i++) free(toks[i]);
    free(toks); free(types);
}

/* Gemma 4 metadata and tensors (gemma4.md §1-§2): per-layer arrays, sliding pattern,
 * two head sizes, shared-KV layers, per-layer embeddings. */
static int synth_gemma4(llambda_gguf_writer *w, fill_ctx *fcs, int *nf, const preset *p, uint64_t seed, int ft) {
    int L = p->n_layer, E = p->n_embd, H = p->n_head, P = p->per_layer, shared = p->shared_kv;
    int32_t ff[LLAMBDA_MAX_SYNTH_LAYERS], kv[LLAMBDA_MAX_SYNTH_LAYERS];
    uint8_t pat[LLAMBDA_MAX_SYNTH_LAYERS];
    if (L > LLAMBDA_MAX_SYNTH_LAYERS) return 1;
    for (int l = 0; l < L; l++) {
        pat[l] = (uint8_t)(l % p->swa_period != p->swa_period - 1);
        ff[l] = p->n_ff * (p->double_ff && l >= L - shared ? 2 : 1);
        kv[l] = pat[l] ? p->n_head_kv : p->n_head_kv_global;
    }
    llambda_gguf_set_arr(w, "gemma4.feed_forward_length", LLAMBDA_GGUF_I32, ff, (uint64_t)L);
    llambda_gguf_set_arr(w, "gemma4.attention.head_count_kv", LLAMBDA_GGUF_I32, kv, (uint64_t)L);
    llambda_gguf_set_arr(w, "gemma4.attention.sliding_window_pattern", LLAMBDA_GGUF_BOOL, pat, (uint64_t)L);
    llambda_gguf_set_u32(w, "gemma4.attention.key_length_swa", (uint32_t)p->head_dim_swa);
    llambda_gguf_set_u32(w, "gemma4.attention.value_length_swa", (uint32_t)p->head_dim_swa);
    llambda_gguf_set_u32(w, "gemma4.rope.dimension_count_swa", (uint32_t)p->head_dim_swa);
    llambda_gguf_set_f32(w, "gemma4.rope.freq_base_swa", 10000.f);
    llambda_gguf_set_u32(w, "gemma4.attention.sliding_window", (uint32_t)p->n_swa);
    llambda_gguf_set_u32(w, "gemma4.attention.shared_kv_layers", (uint32_t)shared);
    llambda_gguf_set_u32(w, "gemma4.embedding_length_per_layer_input", (uint32_t)P);
    llambda_gguf_set_f32(w, "gemma4.final_logit_softcapping", 30.f);
    if (p->n_expert) {
        llambda_gguf_set_u32(w, "gemma4.expert_count", (uint32_t)p->n_expert);
        llambda_gguf_set_u32(w, "gemma4.expert_used_count", (uint32_t)p->n_expert_used);
        llambda_gguf_set_u32(w, "gemma4.expert_feed_forward_length", (uint32_t)p->n_ff_exp);
    }
    int err = 0;
    err |= add(w, fcs, nf, p, seed, ft, "token_embd.weight", E, p->n_vocab, 0, 0);
    err |= add(w, fcs, nf, p, seed, ft, "output_norm.weight", E, 0, 0, 0);
    err |= add(w, fcs, nf, p, seed, ft, "rope_freqs.weight", p->head_dim / 2, 0, 0, 0);
    if (P > 0) {
        err |= add(w, fcs, nf, p, seed, ft, "per_layer_token_embd.weight", (int64_t)P * L, p->n_vocab, 0, 0);
        err |= add(w, fcs, nf, p, seed, ft, "per_layer_model_proj.weight", E, (int64_t)P * L, 0, 0);
        err |= add(w, fcs, nf, p, seed, ft, "per_layer_proj_norm.weight", P, 0, 0, 0);
    }
    for (int l = 0; l < L; l++) {
        char n[64];
        int D = pat[l] ? p->head_dim_swa : p->head_dim;
#define T(suffix, a, b, ik) (snprintf(n, sizeof n, "blk.%d." suffix, l), err |= add(w, fcs, nf, p, seed, ft, n, a, b, ik, L))
#define T3(suffix, a, b, c, ik) (snprintf(n, sizeof n, "blk.%d." suffix, l), err |= add3(w, fcs, nf, p, seed, ft, n, a, b, c, ik, L))
        T("attn_norm.weight", E, 0, 0);
        T("attn_q.weight", E, H * D, 0);
        T("attn_q_norm.weight", D, 0, 0);
        T("attn_k.weight", E, kv[l] * D, 0);
        T("attn_k_norm.weight", D, 0, 0);
        if (pat[l] || !p->k_eq_v) T("attn_v.weight", E, kv[l] * D, l);
        T("attn_output.weight", H * D, E, 0);
        T("post_attention_norm.weight", E, 0, 0);
        T("ffn_norm.weight", E, 0, 0);
        T("ffn_gate.weight", E, ff[l], 0);
        T("ffn_up.weight", E, ff[l], 0);
        T("ffn_down.weight", ff[l], E, l);
        T("post_ffw_norm.weight", E, 0, 0);
        T("layer_output_scale.weight", 1, 0, 0);
        if (P > 0) { T("inp_gate.weight", E, P, 0); T("proj.weight", P, E, 0); T("post_norm.weight", E, 0, 0); }
        if (p->n_expert) {
            int X = p->n_expert, FX = p->n_ff_exp;
            T("ffn_gate_inp.weight", E, X, 0);
            T("ffn_gate_inp.scale", E, 0, 0);
            T("pre_ffw_norm_2.weight", E, 0, 0);
            T("post_ffw_norm_1.weight", E, 0, 0);
            T("post_ffw_norm_2.weight", E, 0, 0);
            T3("ffn_gate_up_exps.weight", E, 2 * FX, X, 0);
            T3("ffn_down_exps.weight", FX, E, X, l);
            T("ffn_down_exps.scale", X, 0, 0);
        }
#undef T
#undef T3
    }
    return err;
}

/* nemotron_h(_moe) and qwen3next: metadata and tensors for `layers` blocks of the preset. */
static int synth_hybrid(llambda_gguf_writer *w, fill_ctx *fcs, int *nf, const hybrid *hy, const preset *p, uint64_t seed, int ft, int layers) {
    char key[128];
    const char *a = hy->arch;
    int L = layers, E = hy->E, err = 0, nemo = strncmp(a, "nemotron", 8) == 0;
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    llambda_gguf_set_u32(w, K("context_length"), nemo ? 1048576u : 262144u);
    llambda_gguf_set_u32(w, K("embedding_length"), (uint32_t)E);
    llambda_gguf_set_u32(w, K("block_count"), (uint32_t)L);
    llambda_gguf_set_u32(w, K("attention.head_count"), (uint32_t)hy->H);
    llambda_gguf_set_u32(w, K("attention.key_length"), (uint32_t)hy->D);
    llambda_gguf_set_u32(w, K("attention.value_length"), (uint32_t)hy->D);
    llambda_gguf_set_f32(w, K("attention.layer_norm_rms_epsilon"), hy->eps);
    if (nemo) llambda_gguf_set_f32(w, K("attention.layer_norm_epsilon"), hy->eps);   /* llama.cpp requires both */
    llambda_gguf_set_f32(w, K("rope.freq_base"), hy->rope_base);
    llambda_gguf_set_u32(w, K("ssm.conv_kernel"), (uint32_t)hy->K);
    llambda_gguf_set_u32(w, K("ssm.state_size"), (uint32_t)hy->N);
    llambda_gguf_set_u32(w, K("ssm.group_count"), (uint32_t)hy->G);
    llambda_gguf_set_u32(w, K("ssm.time_step_rank"), (uint32_t)hy->Hm);
    llambda_gguf_set_u32(w, K("ssm.inner_size"), (uint32_t)hy->d_inner);
    if (hy->X) {
        llambda_gguf_set_u32(w, K("expert_count"), (uint32_t)hy->X);
        llambda_gguf_set_u32(w, K("expert_used_count"), (uint32_t)hy->k);
        llambda_gguf_set_u32(w, K("expert_feed_forward_length"), (uint32_t)hy->F);
        llambda_gguf_set_u32(w, K("expert_shared_feed_forward_length"), (uint32_t)hy->Fs);
    }
    int32_t kv[LLAMBDA_MAX_SYNTH_LAYERS], ff[LLAMBDA_MAX_SYNTH_LAYERS];
    char kind[LLAMBDA_MAX_SYNTH_LAYERS];
    for (int l = 0; l < L; l++) {
        kind[l] = nemo ? hy->pattern[l % (int)strlen(hy->pattern)] : ((l + 1) % hy->interval ? 'L' : '*');
        kv[l] = kind[l] == '*' ? hy->Hkv : 0;
        ff[l] = kind[l] == 'E' ? hy->F : kind[l] == '-' ? hy->F : 0;
    }
    if (nemo) {
        llambda_gguf_set_arr(w, K("attention.head_count_kv"), LLAMBDA_GGUF_I32, kv, (uint64_t)L);
        llambda_gguf_set_arr(w, K("feed_forward_length"), LLAMBDA_GGUF_I32, ff, (uint64_t)L);
        if (hy->X) {
            llambda_gguf_set_bool(w, K("expert_weights_norm"), true);
            llambda_gguf_set_f32(w, K("expert_weights_scale"), hy->w_scale);
            /* the "-groups" preset routes within 4 groups, keeping 2 */
            llambda_gguf_set_u32(w, K("expert_group_count"), strstr(hy->name, "groups") ? 4u : 1u);
            llambda_gguf_set_u32(w, K("expert_group_used_count"), strstr(hy->name, "groups") ? 2u : 1u);
        }
    } else {
        llambda_gguf_set_u32(w, K("attention.head_count_kv"), (uint32_t)hy->Hkv);
        llambda_gguf_set_u32(w, K("rope.dimension_count"), (uint32_t)hy->n_rot);
        llambda_gguf_set_u32(w, K("full_attention_interval"), (uint32_t)hy->interval);
    }
#undef K
    err |= add(w, fcs, nf, p, seed, ft, "token_embd.weight", E, hy->vocab, 0, 0);
    err |= add(w, fcs, nf, p, seed, ft, "output_norm.weight", E, 0, 0, 0);
    err |= add(w, fcs, nf, p, seed, ft, "output.weight", E, hy->vocab, 0, 0);
    int d_in = hy->d_inner, N = hy->N, G = hy->G, Hm = hy->Hm, Kc = hy->K, D = hy->D;
    for (int l = 0; l < L; l++) {
        char n[80];
#define T(suffix, x, y) (snprintf(n, sizeof n, "blk.%d." suffix, l), err |= add(w, fcs, nf, p, seed, ft, n, x, y, l, L))
#define T3(suffix, x, y, z) (snprintf(n, sizeof n, "blk.%d." suffix, l), err |= add3(w, fcs, nf, p, seed, ft, n, x, y, z, l, L))
        T("attn_norm.weight", E, 0);
        if (nemo) {
            switch (kind[l]) {
            case 'M':
                T("ssm_in.weight", E, 2 * d_in + 2 * G * N + Hm);
                T("ssm_conv1d.weight", Kc, d_in + 2 * G * N);
                T("ssm_conv1d.bias", d_in + 2 * G * N, 0);
                T("ssm_dt.bias", Hm, 0);
                T("ssm_a", 1, Hm);
                T("ssm_d", 1, Hm);
                T("ssm_norm.weight", d_in / G, G);
                T("ssm_out.weight", d_in, E);
                break;
            case '*':
                T("attn_q.weight", E, hy->H * D); T("attn_k.weight", E, hy->Hkv * D);
                T("attn_v.weight", E, hy->Hkv * D); T("attn_output.weight", hy->H * D, E);
                break;
            case 'E':
                T("ffn_gate_inp.weight", E, hy->X);
                T("exp_probs_b.bias", hy->X, 0);
                T3("ffn_up_exps.weight", E, hy->F, hy->X);
                T3("ffn_down_exps.weight", hy->F, E, hy->X);
                T("ffn_up_shexp.weight", E, hy->Fs);
                T("ffn_down_shexp.weight", hy->Fs, E);
                break;
            default:
                T("ffn_up.weight", E, hy->F);
                T("ffn_down.weight", hy->F, E);
            }
        } else {
            int S = N, kd = G * S, vd = Hm * S;
            T("post_attention_norm.weight", E, 0);
            if (kind[l] == 'L') {
                T("attn_qkv.weight", E, 2 * kd + vd);
                T("attn_gate.weight", E, vd);
                T("ssm_ba.weight", E, 2 * Hm);
                T("ssm_conv1d.weight", Kc, 2 * kd + vd);
                T("ssm_dt.bias", Hm, 0);
                T("ssm_a", Hm, 0);
                T("ssm_norm.weight", S, 0);
                T("ssm_out.weight", vd, E);
            } else {
                T("attn_q.weight", E, 2 * hy->H * D); T("attn_k.weight", E, hy->Hkv * D);
                T("attn_v.weight", E, hy->Hkv * D); T("attn_output.weight", hy->H * D, E);
                T("attn_q_norm.weight", D, 0); T("attn_k_norm.weight", D, 0);
            }
            T("ffn_gate_inp.weight", E, hy->X);
            T3("ffn_gate_exps.weight", E, hy->F, hy->X);
            T3("ffn_up_exps.weight", E, hy->F, hy->X);
            T3("ffn_down_exps.weight", hy->F, E, hy->X);
            T("ffn_gate_inp_shexp.weight", E, 0);
            T("ffn_gate_shexp.weight", E, hy->Fs);
            T("ffn_up_shexp.weight", E, hy->Fs);
            T("ffn_down_shexp.weight", hy->Fs, E);
        }
#undef T
#undef T3
    }
    return err;
}

int cmd_synth(int argc, char **argv) {
    const char *arch = NULL, *pname = NULL, *out = NULL, *type = "Q4_K_M";
    uint64_t seed = 1;
    int layers = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arch") && i + 1 < argc) arch = argv[++i];
        else if (!strcmp(argv[i], "--preset") && i + 1 < argc) pname = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--type") && i + 1 < argc) type = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
        else { fprintf(stderr, "llambda synth: unknown option '%s'\n", argv[i]); return 2; }
    }
    const preset *p = NULL;
    const hybrid *hy = NULL;
    static preset hp_as_preset;
    for (size_t i = 0; pname && i < sizeof presets / sizeof *presets; i++) if (!strcmp(presets[i].name, pname)) p = &presets[i];
    for (size_t i = 0; pname && !p && i < sizeof hybrids / sizeof *hybrids; i++)
        if (!strcmp(hybrids[i].name, pname)) {
            hy = &hybrids[i];
            memset(&hp_as_preset, 0, sizeof hp_as_preset);
            hp_as_preset.name = hy->name; hp_as_preset.arch = hy->arch; hp_as_preset.n_vocab = hy->vocab;
            hp_as_preset.n_embd = hy->E; hp_as_preset.n_layer = hy->L; hp_as_preset.rope_base = hy->rope_base;
            p = &hp_as_preset;
        }
    if (layers < 0 || layers > LLAMBDA_MAX_SYNTH_LAYERS) { fprintf(stderr, "llambda synth: --layers must be 1..%d\n", LLAMBDA_MAX_SYNTH_LAYERS); return 2; }
    static preset cut;   /* a non-hybrid preset with --layers: the same shapes, fewer blocks */
    if (p && !hy && layers) {
        if (layers <= p->shared_kv) { fprintf(stderr, "llambda synth: %s needs more than %d layers (its shared-KV layers)\n", p->name, p->shared_kv); return 2; }
        cut = *p;
        cut.n_layer = layers;
        p = &cut;
    }
    if (!p || !out) {
        fprintf(stderr, "usage: llambda synth [--arch ARCH] --preset NAME -o OUT.gguf [--type Q4_K_M] [--seed N] [--layers N]\n  presets:");
        for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) fprintf(stderr, " %s", presets[i].name);
        for (size_t i = 0; i < sizeof hybrids / sizeof *hybrids; i++) fprintf(stderr, " %s", hybrids[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    if (arch && strcmp(arch, p->arch)) { fprintf(stderr, "llambda: preset %s is a %s model, not %s\n", p->name, p->arch, arch); return 2; }
    int ft = llambda_ftype_from_name(type);
    if (ft < 0) { fprintf(stderr, "llambda: unknown type '%s'\n", type); return 2; }
    llambda_gguf_writer *w = llambda_gguf_writer_new();
    char key[128];
#define K(suffix) (snprintf(key, sizeof key, "%s.%s", p->arch, suffix), key)
    llambda_gguf_set_str(w, "general.architecture", p->arch);
    char name[96];
    snprintf(name, sizeof name, "synthetic %s (random weights)", p->name);
    llambda_gguf_set_str(w, "general.name", name);
    llambda_gguf_set_u32(w, "general.file_type", (uint32_t)ft);
    llambda_gguf_set_u32(w, K("context_length"), (uint32_t)p->ctx);
    llambda_gguf_set_u32(w, K("embedding_length"), (uint32_t)p->n_embd);
    llambda_gguf_set_u32(w, K("block_count"), (uint32_t)p->n_layer);
    llambda_gguf_set_u32(w, K("feed_forward_length"), (uint32_t)p->n_ff);
    llambda_gguf_set_u32(w, K("attention.head_count"), (uint32_t)p->n_head);
    llambda_gguf_set_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_head_kv);
    llambda_gguf_set_u32(w, K("attention.key_length"), (uint32_t)p->head_dim);
    llambda_gguf_set_u32(w, K("attention.value_length"), (uint32_t)p->head_dim);
    llambda_gguf_set_u32(w, K("rope.dimension_count"), (uint32_t)p->head_dim);
    llambda_gguf_set_f32(w, K("rope.freq_base"), p->rope_base);
    llambda_gguf_set_f32(w, K("attention.layer_norm_rms_epsilon"), p->eps);
    synth_vocab(w, p);
    int d = p->n_embd, qd = p->n_head * p->head_dim, kvd = p->n_head_kv * p->head_dim, L = p->n_layer;
    fill_ctx *fcs = calloc((size_t)(24 * L + 8), sizeof *fcs);
    int nf = 0, err = 0;
    if (!strcmp(p->arch, "gemma4")) {
        err = synth_gemma4(w, fcs, &nf, p, seed, ft);
        goto write;
    }
    if (hy) {
        free(fcs);
        int Lh = layers ? layers : hy->L;
        fcs = calloc((size_t)(24 * Lh + 8), sizeof *fcs);
        err = synth_hybrid(w, fcs, &nf, hy, p, seed, ft, Lh);
        goto write;
    }
    err |= add(w, fcs, &nf, p, seed, ft, "token_embd.weight", d, p->n_vocab, 0, 0);
    err |= add(w, fcs, &nf, p, seed, ft, "output_norm.weight", d, 0, 0, 0);
    if (!p->tied) err |= add(w, fcs, &nf, p, seed, ft, "output.weight", d, p->n_vocab, 0, 0);
    if (p->llama3_factor > 0) err |= add(w, fcs, &nf, p, seed, ft, "rope_freqs.weight", p->head_dim / 2, 0, 0, 0);
    for (int l = 0; l < L; l++) {
        char n[64];
#define T(suffix, a, b, ik) (snprintf(n, sizeof n, "blk.%d." suffix, l), err |= add(w, fcs, &nf, p, seed, ft, n, a, b, ik, L))
        T("attn_norm.weight", d, 0, 0);
        T("attn_q.weight", d, qd, 0);
        T("attn_k.weight", d, kvd, 0);
        T("attn_v.weight", d, kvd, l);
        T("attn_output.weight", qd, d, 0);
        if (p->qkv_bias) { T("attn_q.bias", qd, 0, 0); T("attn_k.bias", kvd, 0, 0); T("attn_v.bias", kvd, 0, 0); }
        T("ffn_norm.weight", d, 0, 0);
        T("ffn_gate.weight", d, p->n_ff, 0);
        T("ffn_up.weight", d, p->n_ff, 0);
        T("ffn_down.weight", p->n_ff, d, l);
#undef T
    }
write:;
    double t0 = cli_now();
    llambda_status st = err ? LLAMBDA_ERR_ARG : llambda_gguf_writer_write(w, out);
    llambda_gguf_writer_free(w);
    free(fcs);
    if (st) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return 1; }
    fprintf(stderr, "wrote %s: %s, %s, in %.1f s\n", out, p->name, llambda_ftype_name(ft), cli_now() - t0);
    return 0;
}

/* ------------------------------------------------------------------ bench */

static void stats(const double *v, int n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

/* Bytes of weights one generated token reads: routed-expert stacks count for the share of
 * experts a token uses, and an embedding table that is not also the output head for one
 * row only. The roofline of generation is this over the read bandwidth. */
static uint64_t active_bytes(const llambda_model *m) {
    const llambda_gguf *g = llambda_model_gguf(m);
    char key[96];
    snprintf(key, sizeof key, "%s.expert_count", llambda_model_arch(m));
    uint32_t X = llambda_gguf_get_u32(g, key, 0);
    snprintf(key, sizeof key, "%s.expert_used_count", llambda_model_arch(m));
    uint32_t K = llambda_gguf_get_u32(g, key, 0);
    int untied = llambda_gguf_find_tensor(g, "output.weight") != NULL;
    double sum = 0;
    for (int64_t i = 0; i < llambda_gguf_n_tensors(g); i++) {
        const llambda_gguf_tensor *t = llambda_gguf_tensor_at(g, i);
        double b = (double)t->nbytes;
        if ((untied && !strcmp(t->name, "token_embd.weight")) || !strcmp(t->name, "per_layer_token_embd.weight"))
            b /= (double)t->ne[1];
        else if (X > 1 && K && t->n_dims == 3 && t->ne[2] == X)
            b = b * K / X;
        sum += b;
    }
    return (uint64_t)sum;
}

static const char bench_usage[] =
    "usage: llambda bench -m MODEL [-p 512] [-n 128] [-d DEPTH] [-t THREADS] [-r REPS] [-o md|json] [--roofline]\n"
    "  -d: tokens already in the context when each test starts (evaluated untimed), as llama-bench's -d\n"
    "  --roofline: then -n read passes (512 MiB, as many threads), each followed by one untimed token and\n"
    "              one timed: the ratio of that token's weight bytes per second to the pass's bandwidth,\n"
    "              median and quartiles\n";

/* Put DEPTH tokens in the context before a timed test: evaluated once and rewound to for
 * each test where the model can rewind, evaluated again where a recurrent state cannot. */
static llambda_status bench_depth(llambda_context *c, const int32_t *toks, int depth) {
    if (!depth) { llambda_context_reset(c); return LLAMBDA_OK; }
    if (llambda_context_pos(c) >= depth && !llambda_context_truncate(c, depth)) return LLAMBDA_OK;
    llambda_context_reset(c);
    return llambda_eval(c, toks, depth);
}

/* The roofline in step with the tokens. This host's read bandwidth drifts by tens of
 * percent within minutes, so a bandwidth measured at another time than the tokens (the
 * best of a run's `bench-mem` passes, say) can be far from what the tokens had. Here a
 * read pass by as many threads (the pool's workers asleep by then, not competing with the
 * readers) is followed by a token untimed and one timed, whose weight bytes per second are
 * set against that pass. */
typedef struct {
    double ratio, p25, p75, pass_gbs;
    double work_gbs;   /* the tokens' (bench) or the runs' (bench-proj) weight bytes per second, median */
    const char *way;
    int pairs;
} roofline;

static int cmp_double(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

/* Before a read pass: the pool's workers stop spinning and sleep, not competing with the
 * readers (without this nap a pass after a run read 46 instead of 55 GB/s) */
static void nap_before_pass(void) {
    struct timespec nap = {0, 15 * 1000 * 1000};
    nanosleep(&nap, NULL);
}

/* The medians and quartiles of n pairs (each array sorted in place) */
static roofline roofline_of(double *ratio, double *pass, double *work, int n, int way) {
    qsort(ratio, (size_t)n, sizeof *ratio, cmp_double);
    qsort(pass, (size_t)n, sizeof *pass, cmp_double);
    qsort(work, (size_t)n, sizeof *work, cmp_double);
    return (roofline){ratio[n / 2], ratio[n / 4], ratio[3 * n / 4], pass[n / 2], work[n / 2], mem_bench_way_name(way), n};
}

/* 0, a failed evaluation's status, or -1 (said why) */
static int bench_roofline(llambda_context *c, const int32_t *toks, int depth, int n, int V, uint64_t bytes, roofline *out) {
    mem_bench *b = mem_bench_new((size_t)512 << 20, llambda_context_n_threads(c));
    double *ratio = malloc((size_t)n * sizeof *ratio), *pass = malloc((size_t)n * sizeof *pass), *tok = malloc((size_t)n * sizeof *tok);
    if (!b || !ratio || !pass || !tok) {
        fputs("llambda: bench --roofline: out of memory for the read passes\n", stderr);
        mem_bench_free(b);
        free(ratio); free(pass); free(tok);
        return -1;
    }
    double best;
    int way = mem_bench_best_way(b, 2, &best);
    llambda_status st = bench_depth(c, toks, depth);
    int32_t t = toks[depth];
    for (int i = 0; i < n && !st; i++) {
        nap_before_pass();
        pass[i] = mem_bench_pass(b, way);
        /* one token untimed brings back what generation runs in: the pool's workers
         * spinning, the recurrent state and the activations in cache (the pass evicted them) */
        st = llambda_eval(c, &t, 1);
        t = (t * 31 + 7) % V;
        double t0 = cli_now();
        if (!st) st = llambda_eval(c, &t, 1);
        tok[i] = (double)bytes / (cli_now() - t0) / 1e9;
        ratio[i] = tok[i] / pass[i];
        t = (t * 31 + 7) % V;
    }
    if (!st) *out = roofline_of(ratio, pass, tok, n, way);
    mem_bench_free(b);
    free(ratio); free(pass); free(tok);
    return st;
}

int cmd_bench(int argc, char **argv) {
    const char *model = NULL, *fmt = "md";
    int pp = 512, tg = 128, depth = 0, threads = 0, reps = 5, roof = 0;
    cli_accel accel;
    memset(&accel, 0, sizeof accel);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "-p") && i + 1 < argc) pp = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) tg = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) depth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) fmt = argv[++i];
        else if (!strcmp(argv[i], "--roofline")) roof = 1;
        else {
            int acc = cli_accel_flag(&accel, argc, argv, &i);
            if (acc <= 0) { fputs(bench_usage, stderr); fputs(CLI_ACCEL_USAGE, stderr); return 2; }
        }
    }
    if (!model || reps < 1 || pp < 0 || tg < 0 || depth < 0 || depth > 1 << 20) { fputs(bench_usage, stderr); return 2; }
    llambda_model_params mp = llambda_model_default_params();
    mp.n_threads = threads;
    cli_accel_apply(&accel, &mp);
    llambda_model *m;
    if (llambda_model_load(model, &mp, &m)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return 1; }
    llambda_context_params cp = llambda_context_default_params();
    cp.n_ctx = depth + pp + (roof ? 2 : 1) * tg + 1; cp.n_threads = threads;   /* --roofline: two tokens a pass */
    llambda_context *c;
    if (llambda_context_create(m, &cp, &c)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); llambda_model_free(m); return 1; }
    int V = llambda_model_n_vocab(m);
    int n_toks = depth + (pp > 1 ? pp : 1);
    int32_t *toks = malloc((size_t)n_toks * sizeof *toks);
    uint64_t r = 42;
    for (int i = 0; i < n_toks; i++) { r = r * 6364136223846793005ull + 1442695040888963407ull; toks[i] = (int32_t)((r >> 33) % (uint64_t)V); }
    double *pps = calloc((size_t)reps, sizeof *pps), *tgs = calloc((size_t)reps, sizeof *tgs);
    /* warm-up, as llama-bench does it: one untimed prompt of the same size (an MoE file's
     * experts are all touched, not just those 16 tokens would pick), then one token */
    llambda_status st = llambda_eval(c, toks, pp > 0 ? pp : 1);
    if (!st && tg > 0) { llambda_context_reset(c); st = llambda_eval(c, toks, 1); }
    if (!st && depth) llambda_context_reset(c);
    for (int k = 0; k < reps && !st; k++) {
        if (pp > 0 && !(st = bench_depth(c, toks, depth))) {
            double t0 = cli_now();
            st = llambda_eval(c, toks + depth, pp);
            pps[k] = pp / (cli_now() - t0);
        }
        if (tg > 0 && !st && !(st = bench_depth(c, toks, depth))) {
            int32_t t = toks[depth];
            double t0 = cli_now();
            for (int i = 0; i < tg && !st; i++) { st = llambda_eval(c, &t, 1); t = (t * 31 + 7) % V; }
            tgs[k] = tg / (cli_now() - t0);
        }
    }
    roofline rl = {0};
    if (!st && roof && tg > 0) {
        int rs = bench_roofline(c, toks, depth, tg, V, active_bytes(m), &rl);
        if (rs < 0) { free(pps); free(tgs); free(toks); llambda_context_free(c); llambda_model_free(m); return 1; }
        st = (llambda_status)rs;
    }
    if (st) {
        fprintf(stderr, "llambda: bench: %s\n", llambda_last_error());
        free(pps); free(tgs); free(toks); llambda_context_free(c); llambda_model_free(m);
        return 1;
    }
    double pm, ps, tm, ts;
    stats(pps, reps, &pm, &ps);
    stats(tgs, reps, &tm, &ts);
    double size_mib = (double)llambda_model_size_bytes(m) / (1024.0 * 1024.0), params_b = (double)llambda_model_n_params(m) / 1e9;
    const char *ft = llambda_ftype_name((int)llambda_gguf_get_u32(llambda_model_gguf(m), "general.file_type", 0));
    if (!strcmp(fmt, "json")) {
        printf("[\n");
        int first = 1;
        for (int pass = 0; pass < 2; pass++) {
            int np = pass == 0 ? pp : 0, ng = pass == 0 ? 0 : tg;
            if ((pass == 0 && !pp) || (pass == 1 && !tg)) continue;
            printf("%s  {\"model_filename\": \"%s\", \"model_type\": \"%s %s\", \"model_size\": %llu, \"model_n_params\": %lld, "
                   "\"n_threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"avg_ts\": %.6f, \"stddev_ts\": %.6f, \"isa\": \"%s\", "
                   "\"active_bytes\": %llu",
                   first ? "" : ",\n", model, llambda_model_arch(m), ft ? ft : "?", (unsigned long long)llambda_model_size_bytes(m),
                   (long long)llambda_model_n_params(m), threads, np, ng, depth, pass == 0 ? pm : tm, pass == 0 ? ps : ts, llambda_isa(),
                   (unsigned long long)active_bytes(m));
            if (pass == 1 && rl.pairs)
                printf(", \"roofline_ratio\": %.4f, \"roofline_p25\": %.4f, \"roofline_p75\": %.4f, \"roofline_pass_gbs\": %.3f, "
                       "\"roofline_token_gbs\": %.3f, \"roofline_pairs\": %d",
                       rl.ratio, rl.p25, rl.p75, rl.pass_gbs, rl.work_gbs, rl.pairs);
            printf("}");
            first = 0;
        }
        printf("\n]\n");
    } else {
        printf("| model | size | params | isa | threads | test | t/s |\n|---|---:|---:|---|---:|---:|---:|\n");
        char at[32] = "";
        if (depth) snprintf(at, sizeof at, " @ d%d", depth);
        if (pp) printf("| %s %s | %.2f MiB | %.2f B | %s | %d | pp%d%s | %.2f ± %.2f |\n", llambda_model_arch(m), ft ? ft : "?", size_mib, params_b, llambda_isa(), threads, pp, at, pm, ps);
        if (tg) printf("| %s %s | %.2f MiB | %.2f B | %s | %d | tg%d%s | %.2f ± %.2f |\n", llambda_model_arch(m), ft ? ft : "?", size_mib, params_b, llambda_isa(), threads, tg, at, tm, ts);
        if (rl.pairs)
            printf("\nroofline: %d read passes (%s), each followed by an untimed token and a timed one: the timed token's %.1f MB of "
                   "weights at %.2f GB/s against the pass's %.2f (medians); ratio median %.3f, quartiles %.3f-%.3f\n",
                   rl.pairs, rl.way, (double)active_bytes(m) / 1e6, rl.work_gbs, rl.pass_gbs, rl.ratio, rl.p25, rl.p75);
    }
    free(pps); free(tgs); free(toks);
    llambda_context_free(c);
    llambda_model_free(m);
    return 0;
}

/* ------------------------------------------------------------------ bench-proj */

static const char bench_proj_usage[] =
    "usage: llambda bench-proj -m MODEL TENSOR [--backends cpu,onnx[:EP],test,...] [-n TOKENS] [-t THREADS]\n"
    "                          [-r REPS] [--warmup N] [-o md|json] [--roofline]\n"
    "  --roofline: then REPS read passes (512 MiB, as many threads), each followed by one timed CPU run,\n"
    "              each run's weight bytes per second set against its pass (for tensors much larger than\n"
    "              the caches)\n";

/* The projection's streaming in step with the memory, as bench --roofline does it for
 * tokens: a read pass right before each run. */
typedef struct { mem_bench *mb; int way; double *pass; int k; } proj_pass;

static void proj_pass_before(void *arg) {
    proj_pass *p = arg;
    nap_before_pass();
    p->pass[p->k++] = mem_bench_pass(p->mb, p->way);
}

/* 0 with *out filled, or 1 (said why) */
static int bench_proj_roofline(llambda_model *m, const char *tensor, int ntok, int threads, int reps, uint64_t bytes,
                               roofline *out) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = threads > 0 ? threads : cpus > 0 ? (int)cpus : 1;   /* as many readers as the pool has threads */
    proj_pass pp = {mem_bench_new((size_t)512 << 20, nth), 0, malloc((size_t)reps * sizeof(double)), 0};
    double *sec = malloc((size_t)reps * sizeof *sec), *ratio = malloc((size_t)reps * sizeof *ratio),
           *run = malloc((size_t)reps * sizeof *run);
    int rc = 1;
    if (!pp.mb || !pp.pass || !sec || !ratio || !run) fputs("llambda: bench-proj --roofline: out of memory for the read passes\n", stderr);
    else {
        double best;
        pp.way = mem_bench_best_way(pp.mb, 2, &best);
        if (llambda_bench_projection_runs(m, tensor, ntok, threads, reps, proj_pass_before, &pp, sec))
            fprintf(stderr, "llambda: %s\n", llambda_last_error());
        else {
            for (int k = 0; k < reps; k++) { run[k] = (double)bytes / sec[k] / 1e9; ratio[k] = run[k] / pp.pass[k]; }
            *out = roofline_of(ratio, pp.pass, run, reps, pp.way);
            rc = 0;
        }
    }
    mem_bench_free(pp.mb);
    free(pp.pass); free(sec); free(ratio); free(run);
    return rc;
}

/* Per backend: ms/run, GFLOP/s, GB/s of weights, speedup over the CPU and max |drift| from
 * the CPU's result. A backend that is not available gets its row with the error. */
int cmd_bench_proj(int argc, char **argv) {
    const char *model = NULL, *tensor = NULL, *list = "cpu", *fmt = "md";
    int threads = 0, reps = 20, ntok = 1, warmup = 3, roof = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) ntok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--backends") && i + 1 < argc) list = argv[++i];
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) fmt = argv[++i];
        else if (!strcmp(argv[i], "--roofline")) roof = 1;
        else if (!tensor && argv[i][0] != '-') tensor = argv[i];
        else { tensor = NULL; break; }
    }
    if (!model || !tensor || (strcmp(fmt, "md") && strcmp(fmt, "json"))) { fputs(bench_proj_usage, stderr); return 2; }
    char names[16][128];
    int n = 0;
    for (const char *p = list; *p && n < 16;) {
        size_t len = strcspn(p, ",");
        snprintf(names[n], sizeof names[n], "%.*s", (int)len, p);
        if (len) n++;
        p += len + (p[len] == ',');
    }
    llambda_model_params mp = llambda_model_default_params();
    mp.n_threads = threads;
    llambda_model *m;
    if (llambda_model_load(model, &mp, &m)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return 1; }
    /* each accelerator on its own, so that one missing leaves its row with the reason */
    static char load_err[16][512];
    for (int i = 0; i < n; i++) {
        load_err[i][0] = 0;
        if (!strcmp(names[i], "cpu")) continue;
        int before = llambda_backend_count(m);
        if (llambda_backends_load(m, names[i]) != LLAMBDA_OK || llambda_backend_count(m) == before)
            snprintf(load_err[i], sizeof load_err[i], "%s", llambda_last_error());
    }
    llambda_proj_bench cpu;
    if (llambda_bench_projection(m, tensor, NULL, ntok, threads, reps, warmup, &cpu)) {
        fprintf(stderr, "llambda: %s\n", llambda_last_error());
        llambda_model_free(m);
        return 1;
    }
    roofline rl = {0};
    if (roof && bench_proj_roofline(m, tensor, ntok, threads, reps, cpu.weight_bytes, &rl)) {
        llambda_model_free(m);
        return 1;
    }
    if (!strcmp(fmt, "json")) printf("[\n");
    else printf("%s [%lld x %lld], %d token(s), %s kernels, %d threads (-1: all cores)\n\n| backend | ms/run | GFLOP/s | GB/s | speedup | max drift | error |\n|---|---:|---:|---:|---:|---:|---|\n",
                tensor, (long long)cpu.cols, (long long)cpu.rows, ntok, llambda_isa(), threads ? threads : -1);
    for (int i = 0; i < n; i++) {
        llambda_proj_bench r = cpu;
        const char *err = NULL;
        char errbuf[512];
        if (load_err[i][0]) err = load_err[i];
        else if (strcmp(names[i], "cpu") && llambda_bench_projection(m, tensor, names[i], ntok, threads, reps, warmup, &r)) {
            snprintf(errbuf, sizeof errbuf, "%s", llambda_last_error());
            err = errbuf;
        }
        double ms = r.seconds * 1e3, gflops = 2.0 * (double)r.rows * (double)r.cols * ntok / r.seconds / 1e9,
               gbps = (double)r.weight_bytes / r.seconds / 1e9, speedup = cpu.seconds / r.seconds;
        if (!strcmp(fmt, "json")) {
            printf("%s  {\"backend\": \"%s\", \"tensor\": \"%s\", \"n_tokens\": %d, ", i ? ",\n" : "", names[i], tensor, ntok);
            if (err) {
                printf("\"ms\": null, \"gflops\": null, \"gbps\": null, \"speedup\": null, \"max_drift\": null, \"error\": \"");
                for (const char *q = err; *q; q++) { if (*q == '"' || *q == '\\') putchar('\\'); if ((unsigned char)*q >= 32) putchar(*q); }
                printf("\"}");
            } else {
                printf("\"ms\": %.6f, \"gflops\": %.4f, \"gbps\": %.4f, \"speedup\": %.4f, \"max_drift\": %.6g, \"error\": null",
                       ms, gflops, gbps, speedup, r.max_drift);
                if (rl.pairs && !strcmp(names[i], "cpu"))
                    printf(", \"roofline_ratio\": %.4f, \"roofline_p25\": %.4f, \"roofline_p75\": %.4f, \"roofline_pass_gbs\": %.3f, "
                           "\"roofline_run_gbs\": %.3f, \"roofline_pairs\": %d",
                           rl.ratio, rl.p25, rl.p75, rl.pass_gbs, rl.work_gbs, rl.pairs);
                printf("}");
            }
        } else if (err) printf("| %s | - | - | - | - | - | %s |\n", names[i], err);
        else printf("| %s | %.3f | %.2f | %.2f | %.2fx | %.3g | |\n", names[i], ms, gflops, gbps, speedup, r.max_drift);
    }
    if (!strcmp(fmt, "json")) printf("\n]\n");
    else if (rl.pairs)
        printf("\nroofline: %d read passes (%s), each followed by one timed CPU run: the run's %.1f MB of weights at %.2f GB/s "
               "against the pass's %.2f (medians); ratio median %.3f, quartiles %.3f-%.3f\n",
               rl.pairs, rl.way, (double)cpu.weight_bytes / 1e6, rl.work_gbs, rl.pass_gbs, rl.ratio, rl.p25, rl.p75);
    llambda_model_free(m);
    return 0;
}
