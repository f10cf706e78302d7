/* Model, context and architecture internals shared by model.c, context.c, ops/ and arch/. */
#ifndef LLAMBDA_MODEL_H
#define LLAMBDA_MODEL_H

#include "internal.h"
#include "threads.h"
#include "tokenizer/vocab.h"
#include <stdatomic.h>
#include <pthread.h>

/* A weight bound from the file: rows of `cols` elements in its stored type. */
typedef struct ll_weight {
    const char *name;
    int type;
    int64_t cols, rows, n_mat;   /* n_mat > 1 for stacked (expert) tensors */
    size_t row_bytes;
    const uint8_t *data;
    struct ll_bindset *bind;     /* accelerator bindings (n_mat of them), or NULL: CPU only */
    const uint8_t *packed;       /* the CPU kernels' repacked copy: rows / 8 tiles per matrix, */
    size_t packed_tile;          /* packed_tile bytes each (the last rows % 8 stay in data); or NULL */
} ll_weight;

#define LL_MAX_LAYERS 512

/* Routed experts of one layer (ops/moe.c). */
enum { LL_MOE_SOFTMAX = 0, LL_MOE_SIGMOID = 1 };
enum { LL_ACT_SILU = 0, LL_ACT_GELU = 1, LL_ACT_RELU2 = 2 };
typedef struct ll_moe {
    ll_weight router;                  /* [n_embd, X] */
    ll_weight gate_up;                 /* [n_embd, 2*FX, X] fused gate then up, or: */
    ll_weight gate, up;                /* [n_embd, FX, X] each; ReLU² experts (no gate) keep their
                                          single input projection in `gate` and leave `up` empty */
    ll_weight down;                    /* [FX, n_embd, X] */
    const float *down_scale;           /* [X] per-expert output scale, or NULL */
    const float *sel_bias;             /* [X] added to probabilities only to choose, or NULL */
    int n_expert, n_used, n_ff;
    int n_group, n_group_used;         /* group-limited routing when n_group > 1 */
    int gating, act, norm_weights;
    float weight_scale;                /* 0 or 1: none */
} ll_moe;

typedef struct ll_layer {
    ll_weight attn_norm;               /* [n_embd] */
    ll_weight wq, wk, wv, wo;          /* [n_embd, H*D] [n_embd, Hkv*D] x2, [H*D, n_embd] */
    ll_weight bq, bk, bv, bo;          /* optional biases */
    ll_weight q_norm, k_norm;          /* [D] per-head RMSNorm weights (gemma4) */
    ll_weight post_attn_norm;          /* [n_embd] (gemma4) */
    ll_weight ffn_norm;                /* [n_embd] */
    ll_weight w_gate, w_up, w_down;    /* [n_embd, F] x2, [F, n_embd] */
    ll_weight post_ffw_norm;           /* [n_embd] (gemma4) */
    ll_weight inp_gate, proj, post_norm; /* per-layer input: [n_embd, P], [P, n_embd], [n_embd] (gemma4) */
    ll_weight out_scale;               /* [1] layer_output_scale (gemma4) */
    ll_moe moe;                        /* routed experts, when moe.n_expert > 0 */
    ll_weight router_scale;            /* [n_embd] gemma4 router input scale */
    ll_weight pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2; /* gemma4 expert norms */
    ll_weight up_shexp, down_shexp;    /* shared expert [n_embd, Fs], [Fs, n_embd] */
    ll_weight gate_shexp, gate_inp_shexp; /* qwen3next: shared expert gate proj, and its scalar gate [n_embd] */
    /* gated DeltaNet (qwen3next) */
    ll_weight attn_qkv, attn_gate, ssm_ba, ssm_in_legacy;
    /* Mamba-2 */
    ll_weight ssm_in;                  /* [n_embd, 2*d_in + 2*G*N + H] : z, xBC, dt */
    ll_weight ssm_conv;                /* [K, d_in + 2*G*N] */
    ll_weight ssm_conv_b;              /* [d_in + 2*G*N] */
    ll_weight ssm_dt_b, ssm_a, ssm_d;  /* [H] each; ssm_a already -exp(A_log) */
    ll_weight ssm_norm;                /* [d_in / G, G] */
    ll_weight ssm_out;                 /* [d_in, n_embd] */
} ll_layer;

enum { LL_ROPE_NORM = 0, LL_ROPE_NEOX = 2, LL_ROPE_NONE = -1 };
enum { LL_LAYER_ATTN_FFN = 0, LL_LAYER_MAMBA = 1, LL_LAYER_ATTN = 2, LL_LAYER_FFN = 3, LL_LAYER_DELTANET = 4 };

typedef struct ll_hparams {
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train, n_rot;
    float eps, rope_base, rope_freq_scale, rope_attn_factor;
    int rope_type;
    float attn_scale;                  /* 0: 1/sqrt(head size) */
    float logit_softcap;               /* 0: none */
    int n_swa;                         /* sliding window (keys per query, incl. itself) */
    int n_embd_per_layer;              /* per-layer input width P (gemma4), 0 if none */
    int n_expert, n_expert_used, n_ff_exp; /* routed experts (0: dense) */
    int ssm_n_group_moe, n_group_used_moe; /* expert groups for group-limited routing (0: none) */
    /* Mamba-2 (nemotron_h): conv kernel K, inner size, state size N, groups, heads */
    int ssm_conv_k, ssm_d_inner, ssm_d_state, ssm_n_group, ssm_n_head;
    int kind_l[LL_MAX_LAYERS];         /* LL_LAYER_* */
    /* recurrent state per layer, in floats (0: none): conv window, and the SSM / delta state */
    int rs_conv_l[LL_MAX_LAYERS], rs_state_l[LL_MAX_LAYERS];
    int arch_scratch;                  /* floats per token of c->arch_buf the architecture needs */
    int min_width;                     /* floats per token the shared scratch rows must hold */
    /* per layer (dense architectures fill them uniformly) */
    int head_dim_l[LL_MAX_LAYERS], n_head_kv_l[LL_MAX_LAYERS], n_ff_l[LL_MAX_LAYERS], n_rot_l[LL_MAX_LAYERS];
    int swa_l[LL_MAX_LAYERS];          /* 1: sliding-window layer */
    int kv_src_l[LL_MAX_LAYERS];       /* layer whose KV cache this layer reads (itself if it owns one) */
    float rope_base_l[LL_MAX_LAYERS];
    const float *rope_freqs_l[LL_MAX_LAYERS];  /* per-pair frequency divisors, or NULL */
} ll_hparams;

struct llambda_context;
typedef struct ll_batch ll_batch;

typedef struct ll_arch {
    const char *name;
    llambda_status (*load)(llambda_model *m);
    /* Run n tokens at positions pos..pos+n-1; write logits for rows flagged in want. */
    llambda_status (*forward)(struct llambda_context *c, const int32_t *tokens, int n, int pos,
                              float *logits, const uint8_t *want);
} ll_arch;

struct llambda_model {
    llambda_gguf *gguf;
    const ll_arch *arch;
    ll_hparams hp;
    char name[128];
    char arch_name[64];
    bool vocab_only;
    ll_weight tok_embd, output_norm, output, output_bias;
    ll_weight ple_tok_embd, ple_model_proj, ple_proj_norm;   /* gemma4 per-layer embeddings */
    const float *rope_freqs;           /* [n_rot/2] or NULL */
    ll_layer layers[LL_MAX_LAYERS];
    ll_vocab vocab;
    int n_threads;
    ll_pool *shared_pool;              /* created on first use by a context asking for it */
    pthread_mutex_t pool_once;
    int64_t n_params;
    uint64_t weight_bytes;
    struct ll_backend *backends[4];    /* loaded accelerator backends, in priority order */
    int n_backends;
    struct ll_offload *offload;        /* registered projections and their sessions (backends/registry.c) */
    struct ll_packbuf *packs;          /* repacked weights (ll_weight_repack), freed with the model */
    uint64_t packed_bytes, pack_budget;
};

/* ---------------------------------------------------------------- loading helpers (model.c) */

/* ARCH.<suffix> as an unsigned count; per-layer arrays must be uniform. */
llambda_status ll_hp_u32(llambda_model *m, const char *suffix, int required, int def, int *out);
llambda_status ll_hp_f32(llambda_model *m, const char *suffix, int required, float def, float *out);
/* ARCH.<suffix> as one int per layer: a scalar is copied to every layer; an array must
 * have exactly n_layer integer or bool entries. */
llambda_status ll_hp_layers(llambda_model *m, const char *suffix, int required, int def, int *out);
/* a x b as a width (of a projection, a state, a buffer row): an error naming `what` when
 * it is not positive or too large to address (more than 2^30 elements), so hostile counts
 * cannot overflow the int arithmetic of the forward passes. */
llambda_status ll_hp_width(llambda_model *m, const char *what, int64_t a, int64_t b);
/* Give a bound matrix the CPU kernels' repacked layout when they have one for its type
 * (within the model's memory budget; LLAMBDA_NO_REPACK=1 turns it off). */
void ll_weight_repack(llambda_model *m, ll_weight *w);
/* Bind a tensor: shape [ne0, ne1] (ne1 = 0 for 1-D), a type that can be computed with. */
llambda_status ll_bind(llambda_model *m, ll_weight *w, int required, int64_t ne0, int64_t ne1, const char *fmt, ...) LL_PRINTF(6, 7);
/* Bind the shared dense-model globals: token_embd, output_norm, output (tied when absent). */
llambda_status ll_bind_dense_globals(llambda_model *m);
/* Fill the per-layer hparams from the uniform ones (dense architectures). */
void ll_hparams_uniform(ll_hparams *h, const float *rope_freqs);
/* Common attention hparams (head counts, dims, eps, rope base/scaling). */
llambda_status ll_load_attention_hparams(llambda_model *m);

/* ---------------------------------------------------------------- the context */

typedef struct ll_kv_cache {
    int type;                  /* LLAMBDA_KV_F16 / F32 */
    int n_ctx;
    int *width;                /* per layer: elements per cell (Hkv*D) */
    int *cells;                /* per layer: n_ctx, a ring for sliding layers, 0 for shared */
    uint8_t **k, **v;          /* per layer [kv head][cells][head dim], NULL where the layer reads another's */
} ll_kv_cache;

typedef struct ll_sampler {
    llambda_sampler_params p;
    uint64_t rng[4];           /* xoshiro256** state */
    int32_t *history;          /* ring of the last repeat_last_n tokens */
    int hist_cap, hist_len, hist_pos;
    struct ll_cand { float logit; int32_t id; } *cand;  /* n_vocab candidates */
    uint64_t *sort_buf;        /* n_vocab: the radix sort's other half */
    int *counts;               /* n_vocab, for penalties */
} ll_sampler;

/* One of a token's product sets as decode ran it (ops/matmul.c): where its first
 * product's row tiles are, so that a thread done with the set before fetches its own
 * first rows of this one while it waits. */
typedef struct ll_plan_set {
    const uint8_t *tiles;   /* the first product's 8-row tiles, tile_bytes each */
    size_t tile_bytes;
    int64_t n_tiles;        /* its whole tiles */
    int64_t item_bytes;     /* its work items' bytes (matmul.c's items_of) */
    int64_t own_bytes;      /* each thread's own share of the set (matmul.c) */
    int stable;             /* the same as the token before ran (a token's experts are not) */
} ll_plan_set;
#define LL_PLAN_SETS 1024

struct llambda_context {
    llambda_model *m;
    llambda_context_params p;
    int n_ctx, n_batch, pos;
    ll_kv_cache kv;
    ll_pool *pool;
    bool owns_pool;
    atomic_int busy;
    /* scratch, sized at creation for n_batch tokens */
    float *x, *xb, *xb2, *q, *k, *v, *att, *hb, *hb2;
    float *ple;                /* [n_batch][n_layer * P] per-layer inputs (gemma4) */
    /* MoE scratch (ops/moe.c), sized from the model's expert counts */
    float *moe_logits, *moe_probs, *moe_w, *moe_out, *moe_in, *moe_h, *moe_u, *moe_d;
    int32_t *moe_sel;
    int *moe_rows;
    float *rope_cs, *rope_cs2; /* [n_batch][n_rot/2][2]: two RoPE tables (e.g. sliding and global) */
    float *scores;             /* per-thread attention scratch, scores_stride floats each */
    size_t scores_stride;
    uint8_t *qbuf;             /* quantized activations, n_batch rows of the widest input */
    size_t qbuf_row;
    uint8_t *gemm_scratch;     /* the prompt kernels' scratch, one slice per pool thread */
    size_t gemm_scratch_stride;
    ll_plan_set *plan;         /* [LL_PLAN_SETS]: the last decoded token's product sets, in order */
    int plan_len, plan_at;     /* how many it ran; this forward's count so far (-1: not a decode) */
    uint8_t *want;             /* [n_batch] logits flags */
    float *logits;             /* [n_ctx or 1][n_vocab] */
    int n_logits_rows, logits_first;  /* rows held; position of row 0 relative to last eval */
    int last_eval_n;
    ll_sampler smp;
    float **conv_state, **ssm_state;   /* per recurrent layer (hp.rs_conv_l / rs_state_l floats) */
    float *arch_buf;                   /* [n_batch][hp.arch_scratch] */
    struct ll_stream {                 /* step-wise generation state (llambda_stream_*) */
        int active, n_predict, n_done, finished, pending_token;
        const char *const *stop; int n_stop;
        llambda_detok_stream ds;
        char hold[600]; int n_hold;
        llambda_generate_result res;
        double t_start;
    } st;
};

/* ---------------------------------------------------------------- ops (src/ops) */

/* y[t][r] = W[r] · x[t] (+ bias) for t < n_tok; activations converted as the type wants. */
void ll_matmul(struct llambda_context *c, const ll_weight *w, const float *x, int n_tok, float *y);
/* Several products y = W·x as one pool task (one barrier for all), e.g. a token's experts. */
typedef struct ll_matmul_op { const ll_weight *w; const float *x; int n_tok; float *y; } ll_matmul_op;
void ll_matmul_many(struct llambda_context *c, const ll_matmul_op *ops, int n_ops);
/* Matrix e of a stacked (expert) weight as a 2-D weight, with its own bindings. */
ll_weight ll_weight_matrix(const ll_weight *w, int64_t e);
void ll_add_bias(float *y, const ll_weight *b, int n_tok);
void ll_rms_norm(float *y, const float *x, const ll_weight *w, int n, float eps);
/* Fetch a small weight (a norm's vector) into cache ahead of its use */
void ll_prefetch_small(const ll_weight *w);
/* The norm the block after layer l opens with: layer l + 1's attn_norm, or the output norm */
static inline const ll_weight *ll_next_layer_norm(const struct llambda_model *m, int l) {
    return l + 1 < m->hp.n_layer ? &m->layers[l + 1].attn_norm : &m->output_norm;
}
void ll_embed(const ll_weight *emb, int32_t tok, float *out);
/* cos/sin for positions pos0.. and n_rot dims: cs[t][i] = (cos, sin) of pos·base^(-2i/n_rot)/freqs[i] */
void ll_rope_cache(struct llambda_context *c, float *cs, int n_tok, int pos0, int n_rot, float base, const float *freqs);
/* Rotate the first n_rot dims of each head (head size D, row stride `stride` floats). */
void ll_rope(const ll_hparams *h, float *x, int n_tok, int n_heads, int D, int stride, int n_rot, const float *cs);
void ll_kv_store(struct llambda_context *c, int layer, const float *k, const float *v, int n_tok, int pos0);
/* Causal GQA attention of `layer` (its head size, KV heads, window and KV source) for
 * n_tok queries at pos0..; out [n_tok][H*D]. */
void ll_attention(struct llambda_context *c, int layer, const float *q, int n_tok, int pos0, float *out);
/* y = x / sqrt(mean(x^2) + eps), optionally times w, over rows of n (in place allowed) */
void ll_rms_norm_rows(float *y, const float *x, const ll_weight *w, int n, int rows, float eps);
/* Σ x² in double, squares rounded to float, in a fixed order (norm.c) */
double ll_sum_squares(const float *x, int64_t n);
/* Scalar activations as llama.cpp evaluates them: silu through the SIMD exp of its
 * vector path; softplus and sigmoid through libm expf. */
#define LL_MAX_CONV_K 16   /* the longest causal conv kernel accepted (real models: 4) */
static inline float ll_silu(float x) { return x / (1.0f + ll_exp_simd(-x)); }
static inline float ll_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }   /* as ggml: 1 + e rounded first */
static inline float ll_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
/* g = gelu(g) ⊙ u over one row, GELU through llama.cpp's f16 table */
void ll_geglu(float *g, const float *u, int64_t n);
/* Router alone: probabilities [n][X], chosen experts and weights [n][n_used]. */
void ll_moe_route(const ll_moe *e, const float *logits, int n, float *probs, int32_t *sel, float *w);
/* out[n][E] = the routed experts' contribution; router_in feeds the router, x the experts */
/* with: other products to run in the router's pool task (e.g. a shared expert's input
 * projections; the first 4 share it, any more run just after); none may write what the
 * experts read */
/* shared: a shared expert whose input products are among `with` (g its gate's or single
 * input's output, u its up's or NULL): g = act(g) ⊙ u (relu²(g) for LL_ACT_RELU2) once
 * they are done, and out = down·g runs in the routed experts' down task; NULL for none */
typedef struct ll_moe_shared { int act; float *g; const float *u; int64_t n_ff; const ll_weight *down; float *out; } ll_moe_shared;
void ll_moe_forward(struct llambda_context *c, const ll_moe *e, const float *router_in, const float *x, int n, float *out,
                    const ll_matmul_op *with, int n_with, const ll_moe_shared *shared);
/* Mamba-2 mixer for n tokens of normalised input u [n][E]; out [n][E]; state advances. */
void ll_mamba2(struct llambda_context *c, const ll_layer *Y, int layer, const float *u, int n, float *out);
/* the recurrent mixers' causal conv + SiLU over a run of tokens (src/ops/ssm.c) */
void ll_conv_silu(struct llambda_context *c, const float *x, size_t x_stride, const float *w, const float *bias, float *cs,
                  float *co, int n, int K, int C, int unit, int n_norm, float eps);
/* Gated DeltaNet mixer (qwen3next) for n tokens of normalised input u; out [n][E]. */
void ll_deltanet(struct llambda_context *c, const ll_layer *Y, int layer, const float *u, int n, float *out);
/* Bind a stacked [ne0, ne1, ne2] tensor (experts). */
llambda_status ll_bind3(llambda_model *m, ll_weight *w, int required, int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt, ...) LL_PRINTF(7, 8);
void ll_swiglu(float *g, const float *u, int64_t n);   /* one row */
void ll_relu2(float *x, int64_t n);                    /* x = max(x, 0)², NaN to 0 */
void ll_sigmoid_row(float *y, const float *x, int64_t n);   /* y = ll_sigmoid(x), y may be x */
void ll_add(float *y, const float *x, int64_t n);
/* Row-wise steps over n tokens of a prompt, on every pool thread from 32 tokens up (each
 * token alone: the same bits as the one-token calls): fn(arg, t0, t1) for shares of [0, n). */
typedef void (*ll_range_fn)(void *arg, int t0, int t1);
void ll_for_tokens(struct llambda_context *c, int n, ll_range_fn fn, void *arg);
void ll_rms_norm_tokens(struct llambda_context *c, float *y, const float *x, const ll_weight *w, int d, int n, float eps);
/* ll_rms_norm_rows over rows_per_token rows of each of n tokens, on every pool thread for a prompt */
void ll_rms_norm_rows_tokens(struct llambda_context *c, float *y, const float *x, const ll_weight *w, int d,
                             int rows_per_token, int n, float eps);
void ll_swiglu_tokens(struct llambda_context *c, float *g, const float *u, int64_t f, int n);
void ll_add_tokens(struct llambda_context *c, float *y, const float *x, int64_t d, int n);
void ll_rope_tokens(struct llambda_context *c, float *x, int n_tok, int n_heads, int D, int stride, int n_rot, const float *cs);
/* final norm + LM head for flagged rows; logits rows packed in order */
void ll_output_head(struct llambda_context *c, int n, float *logits, const uint8_t *want);

#endif
