/*
 * llambda — LLM inference from GGUF files, in C.
 *
 * The one public header. Three layers, each usable alone:
 *   1. GGUF files: open (mmap, validated), read metadata and tensors, write new files.
 *   2. Tensor types: traits of every ggml block type (dequantize, quantize).
 *   3. Models and inference contexts: load a model once (read-only, shareable between
 *      threads), create any number of contexts on it (each owns its KV cache, scratch,
 *      sampler and position), tokenize, evaluate, sample, generate, render chat prompts.
 *
 * Errors: every call that can fail returns an llambda_status (or NULL); the message of
 * the last failure on the calling thread is llambda_last_error().
 */
#ifndef LLAMBDA_H
#define LLAMBDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LLAMBDA_VERSION "0.1.0"

typedef enum {
    LLAMBDA_OK = 0,
    LLAMBDA_ERR_IO,          /* file cannot be opened, mapped or written */
    LLAMBDA_ERR_FORMAT,      /* malformed or hostile GGUF, missing key/tensor, wrong shape */
    LLAMBDA_ERR_UNSUPPORTED, /* valid but not handled: architecture, tensor type, tokenizer */
    LLAMBDA_ERR_NOMEM,
    LLAMBDA_ERR_ARG,         /* invalid argument from the caller */
    LLAMBDA_ERR_CONTEXT_FULL,/* the tokens do not fit in the context */
    LLAMBDA_ERR_BUSY,        /* a context was used from two threads at once */
} llambda_status;

/* Message of the last error on this thread ("" if none). */
const char *llambda_last_error(void);
const char *llambda_status_name(llambda_status s);
/* The kernel set in use: "scalar", "avx2", "avx2-vnni", "avx512" or "avx512-base" (LLAMBDA_ISA
 * overrides the choice). */
const char *llambda_isa(void);

/* ------------------------------------------------------------------ tensor types */

/* ggml type ids as stored in GGUF files. */
enum llambda_type {
    LLAMBDA_TYPE_F32 = 0, LLAMBDA_TYPE_F16 = 1, LLAMBDA_TYPE_Q4_0 = 2, LLAMBDA_TYPE_Q4_1 = 3,
    LLAMBDA_TYPE_Q5_0 = 6, LLAMBDA_TYPE_Q5_1 = 7, LLAMBDA_TYPE_Q8_0 = 8, LLAMBDA_TYPE_Q8_1 = 9,
    LLAMBDA_TYPE_Q2_K = 10, LLAMBDA_TYPE_Q3_K = 11, LLAMBDA_TYPE_Q4_K = 12, LLAMBDA_TYPE_Q5_K = 13,
    LLAMBDA_TYPE_Q6_K = 14, LLAMBDA_TYPE_Q8_K = 15, LLAMBDA_TYPE_IQ2_XXS = 16, LLAMBDA_TYPE_IQ2_XS = 17,
    LLAMBDA_TYPE_IQ3_XXS = 18, LLAMBDA_TYPE_IQ1_S = 19, LLAMBDA_TYPE_IQ4_NL = 20, LLAMBDA_TYPE_IQ3_S = 21,
    LLAMBDA_TYPE_IQ2_S = 22, LLAMBDA_TYPE_IQ4_XS = 23, LLAMBDA_TYPE_I8 = 24, LLAMBDA_TYPE_I16 = 25,
    LLAMBDA_TYPE_I32 = 26, LLAMBDA_TYPE_I64 = 27, LLAMBDA_TYPE_F64 = 28, LLAMBDA_TYPE_IQ1_M = 29,
    LLAMBDA_TYPE_BF16 = 30, LLAMBDA_TYPE_TQ1_0 = 34, LLAMBDA_TYPE_TQ2_0 = 35, LLAMBDA_TYPE_MXFP4 = 39,
    LLAMBDA_TYPE_COUNT = 40
};

typedef struct llambda_type_traits {
    int id;
    const char *name;
    int64_t block_elems;   /* elements per block */
    int64_t block_bytes;   /* bytes per block */
    /* NULL when llambda cannot compute with this type (it can still be listed). */
    void (*dequantize_row)(const void *src, float *dst, int64_t n);
    void (*quantize_row)(const float *src, void *dst, int64_t n);
} llambda_type_traits;

/* Traits for a type id, or NULL for an id that is not a ggml type. */
const llambda_type_traits *llambda_type_get(int type_id);
/* Bytes of n elements (n must be a multiple of the block size). */
int64_t llambda_type_row_bytes(int type_id, int64_t n);

/* ------------------------------------------------------------------ GGUF reading */

enum llambda_gguf_vtype {
    LLAMBDA_GGUF_U8 = 0, LLAMBDA_GGUF_I8 = 1, LLAMBDA_GGUF_U16 = 2, LLAMBDA_GGUF_I16 = 3,
    LLAMBDA_GGUF_U32 = 4, LLAMBDA_GGUF_I32 = 5, LLAMBDA_GGUF_F32 = 6, LLAMBDA_GGUF_BOOL = 7,
    LLAMBDA_GGUF_STRING = 8, LLAMBDA_GGUF_ARRAY = 9, LLAMBDA_GGUF_U64 = 10, LLAMBDA_GGUF_I64 = 11,
    LLAMBDA_GGUF_F64 = 12, LLAMBDA_GGUF_VTYPE_COUNT = 13
};

typedef struct llambda_gguf llambda_gguf;

typedef struct llambda_gguf_str { const char *ptr; uint64_t len; } llambda_gguf_str;

/* A metadata value as it lies in the mapped file.
 *  - scalars: `data` points at the value bytes;
 *  - strings: `data` points at the bytes, `count` is the length (not NUL-terminated);
 *  - arrays: elem_type and count are set, `data` points at the first element; fixed-size
 *    elements are contiguous, strings and nested arrays are reached through
 *    llambda_gguf_arr_str() / llambda_gguf_arr_value().
 * `raw`/`raw_bytes` cover the whole encoding after the type id (used to copy values). */
typedef struct llambda_gguf_value {
    int type;            /* llambda_gguf_vtype */
    int elem_type;       /* for arrays */
    uint64_t count;      /* array length, or string length */
    const uint8_t *data;
    const uint8_t *raw;
    uint64_t raw_bytes;
    const uint64_t *index; /* internal: element offsets from data, for string/nested arrays */
    int len_size;        /* bytes of each length/count field: 8, or 4 in GGUF v1 files */
} llambda_gguf_value;

typedef struct llambda_gguf_tensor {
    const char *name;
    int type;            /* ggml type id */
    int n_dims;
    int64_t ne[4];       /* ne[0] innermost; missing dims are 1 */
    uint64_t offset;     /* relative to the data section */
    uint64_t nbytes;
    const void *data;    /* in the mapping */
} llambda_gguf_tensor;

/* Open and validate a GGUF file. Reads only the header, metadata and tensor infos
 * (tensor data is mapped, never read). NULL on error, see llambda_last_error(). */
llambda_gguf *llambda_gguf_open(const char *path);
/* Same from a memory buffer (not copied; must outlive the handle). */
llambda_gguf *llambda_gguf_open_memory(const void *buf, size_t size);
void llambda_gguf_close(llambda_gguf *g);

uint32_t llambda_gguf_version(const llambda_gguf *g);
uint32_t llambda_gguf_alignment(const llambda_gguf *g);
uint64_t llambda_gguf_data_offset(const llambda_gguf *g);
uint64_t llambda_gguf_file_size(const llambda_gguf *g);

int64_t llambda_gguf_n_kv(const llambda_gguf *g);
const char *llambda_gguf_key(const llambda_gguf *g, int64_t i);
const llambda_gguf_value *llambda_gguf_kv(const llambda_gguf *g, int64_t i);
/* index of key or -1 */
int64_t llambda_gguf_find_key(const llambda_gguf *g, const char *key);
const llambda_gguf_value *llambda_gguf_get(const llambda_gguf *g, const char *key);

/* Typed getters: return def when the key is absent or has another type. The _ex forms
 * report through *found: 1 found, 0 absent, -1 wrong type. */
uint32_t llambda_gguf_get_u32(const llambda_gguf *g, const char *key, uint32_t def);
int32_t  llambda_gguf_get_i32(const llambda_gguf *g, const char *key, int32_t def);
uint64_t llambda_gguf_get_u64(const llambda_gguf *g, const char *key, uint64_t def);
float    llambda_gguf_get_f32(const llambda_gguf *g, const char *key, float def);
bool     llambda_gguf_get_bool(const llambda_gguf *g, const char *key, bool def);
/* NUL-terminated copy owned by g; def if absent */
const char *llambda_gguf_get_str(const llambda_gguf *g, const char *key, const char *def);
/* Any integer type, converted; found as above. */
int64_t llambda_gguf_get_int(const llambda_gguf *g, const char *key, int64_t def, int *found);

/* Array access. */
llambda_gguf_str llambda_gguf_arr_str(const llambda_gguf_value *v, uint64_t i);
/* element i of a fixed-size array converted to double (0 on bad index) */
double llambda_gguf_arr_num(const llambda_gguf_value *v, uint64_t i);
/* element i of an array of arrays */
llambda_gguf_value llambda_gguf_arr_value(const llambda_gguf_value *v, uint64_t i);
const char *llambda_gguf_vtype_name(int t);

int64_t llambda_gguf_n_tensors(const llambda_gguf *g);
const llambda_gguf_tensor *llambda_gguf_tensor_at(const llambda_gguf *g, int64_t i);
const llambda_gguf_tensor *llambda_gguf_find_tensor(const llambda_gguf *g, const char *name);
int64_t llambda_tensor_nelements(const llambda_gguf_tensor *t);

/* ------------------------------------------------------------------ GGUF writing */

typedef struct llambda_gguf_writer llambda_gguf_writer;

llambda_gguf_writer *llambda_gguf_writer_new(void);
void llambda_gguf_writer_free(llambda_gguf_writer *w);
void llambda_gguf_writer_set_alignment(llambda_gguf_writer *w, uint32_t alignment);
/* Scalars. A key set twice keeps the last value. */
llambda_status llambda_gguf_set_u32(llambda_gguf_writer *w, const char *key, uint32_t v);
llambda_status llambda_gguf_set_i32(llambda_gguf_writer *w, const char *key, int32_t v);
llambda_status llambda_gguf_set_f32(llambda_gguf_writer *w, const char *key, float v);
llambda_status llambda_gguf_set_bool(llambda_gguf_writer *w, const char *key, bool v);
llambda_status llambda_gguf_set_str(llambda_gguf_writer *w, const char *key, const char *v);
/* Array of fixed-size elements (elem_type not STRING/ARRAY); data is copied. */
llambda_status llambda_gguf_set_arr(llambda_gguf_writer *w, const char *key, int elem_type,
                                    const void *data, uint64_t count);
llambda_status llambda_gguf_set_arr_str(llambda_gguf_writer *w, const char *key,
                                        const char *const *strs, uint64_t count);
/* Any value as read from a file (including nested arrays), copied verbatim. */
llambda_status llambda_gguf_set_value(llambda_gguf_writer *w, const char *key,
                                      const llambda_gguf_value *v);
/* Add a tensor; data (nbytes of the type) is copied. */
llambda_status llambda_gguf_add_tensor(llambda_gguf_writer *w, const char *name, int type,
                                       int n_dims, const int64_t *ne, const void *data);
/* Add a tensor whose bytes are produced at write time (streamed: one tensor in memory at
 * a time). fill writes exactly the tensor's byte size into dst. */
typedef llambda_status (*llambda_tensor_fill_fn)(void *user, const char *name, void *dst, uint64_t nbytes);
llambda_status llambda_gguf_add_tensor_fn(llambda_gguf_writer *w, const char *name, int type, int n_dims,
                                          const int64_t *ne, llambda_tensor_fill_fn fill, void *user);
llambda_status llambda_gguf_writer_write(llambda_gguf_writer *w, const char *path);

/* ------------------------------------------------------------------ quantization */

/* File types (general.file_type, llama.cpp's llama_ftype ids). */
enum llambda_ftype {
    LLAMBDA_FTYPE_F32 = 0, LLAMBDA_FTYPE_F16 = 1, LLAMBDA_FTYPE_Q4_0 = 2, LLAMBDA_FTYPE_Q8_0 = 7, LLAMBDA_FTYPE_Q2_K = 10,
    LLAMBDA_FTYPE_Q3_K_M = 12,
    LLAMBDA_FTYPE_Q4_K_M = 15, LLAMBDA_FTYPE_Q5_K_M = 17, LLAMBDA_FTYPE_Q6_K = 18, LLAMBDA_FTYPE_IQ4_XS = 30,
    LLAMBDA_FTYPE_BF16 = 32,
};
/* "Q4_K_M" -> 15 etc. for the file types llambda_quantize_file makes; -1 if unknown. */
int llambda_ftype_from_name(const char *name);
/* The name of any of llama.cpp's file types ("IQ2_XXS", ...), NULL if unknown. */
const char *llambda_ftype_name(int ftype);
/* The type llama.cpp's quantizer gives a tensor for a file type. i_kind/n_kind: index and
 * count of this tensor among its kind (attn_v-like or ffn_down tensors; the layer index
 * and layer count for dense models); has_output: the model has output.weight; n_gqa:
 * query heads per KV head. */
int llambda_quant_tensor_type(int ftype, const char *name, int n_dims, const int64_t *ne, int src_type,
                              int i_kind, int n_kind, bool has_output, int n_expert, int n_gqa);
typedef bool (*llambda_progress_fn)(float progress, const char *what, void *user);
/* Quantize a F32/F16/BF16 GGUF to ftype; metadata copied, general.file_type set. */
llambda_status llambda_quantize_file(const char *in, const char *out, int ftype, int n_threads,
                                     llambda_progress_fn progress, void *user);

/* ------------------------------------------------------------------ models */

typedef struct llambda_model llambda_model;
typedef struct llambda_context llambda_context;

typedef struct llambda_model_params {
    int n_threads;           /* default threads for contexts (0 = all cores) */
    bool use_mmap;           /* true: run weights in place; false: read into memory */
    bool vocab_only;         /* load only the tokenizer (no weights, no contexts) */
    /* called with progress 0..1 while loading; return false to cancel */
    bool (*progress)(float progress, void *user);
    void *progress_user;
    /* Accelerator backends to load, comma-separated "name[:options]" in any order, e.g.
     * "onnx:CPU" or "cuda,onnx:VitisAI" (NULL or "": CPU only). See llambda_backends_load. */
    const char *backends;
    /* Projections to offload right after loading (see llambda_offload_register); NULL for none. */
    const char *offload_tensors;  /* comma-separated tensor names */
    const char *offload_layers;   /* "0-3,7", "all", or "first:N" (the first N layers, at most all) */
    const char *offload_roles;    /* "q,k,v,o,gate,up,down" (NULL with layers: all of them) */
} llambda_model_params;

llambda_model_params llambda_model_default_params(void);
llambda_status llambda_model_load(const char *path, const llambda_model_params *params,
                                  llambda_model **out);
void llambda_model_free(llambda_model *m);

const char *llambda_model_arch(const llambda_model *m);
const char *llambda_model_name(const llambda_model *m);
int llambda_model_n_vocab(const llambda_model *m);
int llambda_model_n_ctx_train(const llambda_model *m);
int llambda_model_n_embd(const llambda_model *m);
int llambda_model_n_layer(const llambda_model *m);
int64_t llambda_model_n_params(const llambda_model *m);
uint64_t llambda_model_size_bytes(const llambda_model *m);
/* Bytes of weights the CPU kernels repacked into their own layout at load (0 when none
 * was, e.g. with LLAMBDA_NO_REPACK=1 or kernels without a repacked layout). */
uint64_t llambda_model_repacked_bytes(const llambda_model *m);
int32_t llambda_token_bos(const llambda_model *m);  /* -1 when none */
int32_t llambda_token_eos(const llambda_model *m);
bool llambda_token_is_eog(const llambda_model *m, int32_t tok);
const char *llambda_model_chat_template(const llambda_model *m); /* NULL if none */
/* Access to the underlying file (metadata, tensors). */
const llambda_gguf *llambda_model_gguf(const llambda_model *m);

/* Diagnostics: time the projection `tensor` (a 2-D weight) applied to n_tok random
 * activation rows, on the CPU (backend NULL or "cpu", n_threads threads) or through one
 * loaded accelerator backend (by name). Export and session setup happen before timing;
 * `warmup` untimed runs precede `reps` timed ones, and the best time is reported, with the
 * largest absolute difference from the CPU's result. */
typedef struct llambda_proj_bench {
    double seconds;               /* best wall time per run */
    int64_t rows, cols;
    uint64_t weight_bytes;
    double max_drift;             /* max |y - y_cpu| */
} llambda_proj_bench;
llambda_status llambda_bench_projection(llambda_model *m, const char *tensor, const char *backend, int n_tok, int n_threads,
                                        int reps, int warmup, llambda_proj_bench *out);
/* The CPU path, run by run: before each of `reps` runs, before(arg) is called (NULL: none;
 * e.g. a read pass of memory, which also evicts the weights), then seconds[k] gets run k's
 * wall time. One untimed run precedes them. */
llambda_status llambda_bench_projection_runs(llambda_model *m, const char *tensor, int n_tok, int n_threads, int reps,
                                             void (*before)(void *arg), void *arg, double *seconds);

/* ------------------------------------------------------------------ accelerator backends
 *
 * The CPU computes every projection unless an accelerator backend takes it. Backends are
 * loaded per model (llambda_model_params.backends or llambda_backends_load); projections
 * are then registered (by tensor name, or by layers x roles), their weights exported into
 * each backend's format (kept in a content-addressed cache, see below), and sessions
 * created. Each matrix product tries its bindings in priority order (GPU backends, then
 * NPU-class ones) and falls back to the CPU:
 *  - a backend that fails to load or set up prints one warning and is skipped;
 *  - enabling rolls back every session a backend added in that call if any one of them
 *    fails, leaving other backends' sessions alone;
 *  - a session that fails at run time is dropped (one warning), and the next binding, at
 *    last the CPU, recomputes that projection for the same tokens.
 * Change backends and offloads only while no context of the model is evaluating.
 *
 * Backends: "onnx[:EP]" (ONNX Runtime loaded with dlopen from $LLAMBDA_ORT_LIB or the
 * usual library paths; EP one of CPU, CUDA, ROCm, OpenVINO, VitisAI, DirectML; further
 * options after ':' as key=value: "onnx:CPU:format=bf16:threads=2"), "cuda" (when built
 * with CUDA), "test" and "testnpu" (reference backends computing on the CPU, with fault
 * injection for tests: "test:fail=load|probe|export|create:N|run:N").
 *
 * Cache: converted weights live under $LLAMBDA_CACHE_DIR, else $XDG_CACHE_HOME/llambda,
 * else ~/.cache/llambda, named by the SHA-256 of the tensor bytes, its dims and type, the
 * backend name and bridge version, the exporter version and the runtime version.
 * LLAMBDA_NO_CACHE=1 turns it off. */

/* Names of the backends this build knows, comma-separated. */
const char *llambda_backends_known(void);
/* Load more backends into a model. Unknown names and malformed options are an error; a
 * backend that fails to load prints a warning and is left out (llambda_backend_count tells,
 * and llambda_last_error() says why). */
llambda_status llambda_backends_load(llambda_model *m, const char *spec);
int llambda_backend_count(const llambda_model *m);

typedef struct llambda_backend_info {
    const char *name;
    const char *klass;            /* "gpu" or "npu" */
    char device[128];
    uint64_t memory_bytes;
    char runtime_version[64];
    const char *bridge_version;
    int sessions;                 /* live sessions */
    long runs, failures;          /* session runs so far, and failed ones */
} llambda_backend_info;
/* Backend i of the model, in priority order. */
llambda_status llambda_backend_info_get(const llambda_model *m, int i, llambda_backend_info *out);

/* Register projections for offloading: tensor names, or layers x roles. Roles: q k v o
 * gate up down, qkv (fused attention input), attn_gate, ssm_in, ssm_out, gate_shexp
 * up_shexp down_shexp, gate_exps up_exps down_exps gate_up_exps (every expert matrix),
 * output. Validated against the model: an unknown tensor, a layer out of range or a role
 * no selected layer has is an error and registers nothing. */
llambda_status llambda_offload_register(llambda_model *m, const char *tensors, const char *layers, const char *roles);
/* Export the registered projections for every loaded backend into the cache (no sessions). */
llambda_status llambda_offload_ensure(llambda_model *m);
/* Create the sessions of every registered projection on every loaded backend. Returns OK
 * when at least one backend took all of them (or nothing is registered); otherwise the
 * last backend's error, with the model left running on its previous bindings. */
llambda_status llambda_offload_enable(llambda_model *m);
/* Drop every session and registration: the CPU computes everything again. */
void llambda_offload_clear(llambda_model *m);

typedef struct llambda_offload_stats {
    int registered;               /* projections (weight matrices; each expert counts) */
    int bound;                    /* of those, with at least one live binding */
    long exports;                 /* artifacts exported (cache misses) */
    long cache_hits;
    long cache_rebuilds;          /* corrupt entries found and rebuilt */
} llambda_offload_stats;
void llambda_offload_stats_get(const llambda_model *m, llambda_offload_stats *out);

/* ------------------------------------------------------------------ tokenizer */

/* Tokenize text. add_special: add BOS/EOS as the model says; parse_special: turn
 * special-token text into its id. Writes at most max tokens; returns the count needed
 * (so a larger count than max means the buffer was too small), or -1 on error. */
int llambda_tokenize(const llambda_model *m, const char *text, size_t len, int32_t *tokens,
                     int max, bool add_special, bool parse_special);
/* Text of one token (special tokens rendered when `special`). Returns bytes written
 * (not NUL-terminated), or the negated size needed when buf is too small. */
int llambda_token_to_piece(const llambda_model *m, int32_t tok, char *buf, int size, bool special);
/* Detokenize a sequence; returns bytes needed (writes at most size, NUL-terminates if room). */
int llambda_detokenize(const llambda_model *m, const int32_t *tokens, int n, char *buf,
                       int size, bool remove_special, bool unparse_special);

/* Streaming detokenizer: holds back incomplete UTF-8 sequences. */
typedef struct llambda_detok_stream { char pending[8]; int n_pending; } llambda_detok_stream;
/* Appends the piece of tok; writes the complete UTF-8 prefix to out (NUL-terminated),
 * returns its length. out must hold at least 256 + 8 bytes. */
int llambda_detok_stream_push(const llambda_model *m, llambda_detok_stream *s, int32_t tok,
                              char *out, int out_size);

/* ------------------------------------------------------------------ chat */

typedef struct llambda_chat_message { const char *role; const char *content; } llambda_chat_message;

/* Render messages with the model's template (or `format` when not NULL: "llama3",
 * "chatml", "gemma"). add_generation_prompt appends the assistant header. Returns the
 * length needed (writes at most size, NUL-terminated if room), or -1 on error
 * (unknown template and no format named). */
int llambda_chat_render(const llambda_model *m, const char *format, const llambda_chat_message *msgs,
                        int n_msgs, bool add_generation_prompt, char *buf, int size);
/* Name of the detected built-in format for the model's template, or NULL. */
const char *llambda_chat_format_name(const llambda_model *m);

/* Streaming split of generated text into reasoning (inside <think>...</think>) and answer.
 * Tags may arrive cut across pieces; a possible partial tag is held back until resolved.
 * Each call appends to content / reasoning (each buffer needs len + 16 bytes of room) and
 * sets their lengths. Call with len = 0 and flush = true at the end. */
typedef struct llambda_reasoning_split { int in_think; char hold[16]; int n_hold; } llambda_reasoning_split;
void llambda_reasoning_feed(llambda_reasoning_split *s, const char *text, int len, bool flush,
                            char *content, int *n_content, char *reasoning, int *n_reasoning);

/* ------------------------------------------------------------------ sampling */

typedef struct llambda_sampler_params {
    float temperature;       /* <= 0: greedy */
    int top_k;               /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off */
    int repeat_last_n;       /* window of the penalties */
    float frequency_penalty;
    float presence_penalty;
    uint64_t seed;
    bool ignore_eos;         /* contexts only: never sample end-of-generation tokens */
} llambda_sampler_params;

llambda_sampler_params llambda_sampler_default_params(void);

/* A standalone sampler over any logits vector (contexts embed one). Allocates once at
 * creation; sampling allocates nothing. */
typedef struct llambda_sampler llambda_sampler;
llambda_sampler *llambda_sampler_new(int n_vocab, const llambda_sampler_params *p);
void llambda_sampler_free(llambda_sampler *s);
/* Apply the chain to logits (not modified) and draw a token; the token enters the
 * penalty history. */
int32_t llambda_sampler_sample(llambda_sampler *s, const float *logits);
void llambda_sampler_add_history(llambda_sampler *s, const int32_t *tokens, int n);
void llambda_sampler_reset(llambda_sampler *s);

/* ------------------------------------------------------------------ contexts */

enum llambda_logits_policy { LLAMBDA_LOGITS_LAST = 0, LLAMBDA_LOGITS_ALL = 1, LLAMBDA_LOGITS_NONE = 2 };
enum llambda_kv_type { LLAMBDA_KV_F16 = 0, LLAMBDA_KV_F32 = 1 };

typedef struct llambda_context_params {
    int n_ctx;               /* 0: min(model's train context, 4096) */
    int n_threads;           /* 0: the model's default */
    int n_batch;             /* max tokens per forward chunk (0: 512) */
    int logits;              /* llambda_logits_policy for llambda_eval */
    int kv_type;             /* llambda_kv_type */
    bool shared_pool;        /* use the model's thread pool (contexts take turns) instead of
                                owning n_threads workers */
    llambda_sampler_params sampling;
} llambda_context_params;

llambda_context_params llambda_context_default_params(void);
llambda_status llambda_context_create(llambda_model *m, const llambda_context_params *p,
                                      llambda_context **out);
void llambda_context_free(llambda_context *c);
/* Clear the request state (position, KV, sampler history); keep allocations. */
void llambda_context_reset(llambda_context *c);
int llambda_context_n_ctx(const llambda_context *c);
int llambda_context_pos(const llambda_context *c);
int llambda_context_n_threads(const llambda_context *c);   /* its pool's threads, the caller's included */
/* Rewind to pos (<= the current position): later KV cells are forgotten. */
llambda_status llambda_context_truncate(llambda_context *c, int pos);
uint64_t llambda_context_kv_bytes(const llambda_context *c);
/* Bytes of recurrent state (Mamba / DeltaNet conv and state buffers), 0 for attention-only models. */
uint64_t llambda_context_state_bytes(const llambda_context *c);
/* Set the sampler (also reseeds). */
void llambda_context_set_sampler(llambda_context *c, const llambda_sampler_params *p);

/* Evaluate tokens at the current position (appending to the KV cache). With policy
 * LAST the logits of the final token are available; with ALL, of every token. */
llambda_status llambda_eval(llambda_context *c, const int32_t *tokens, int n);
/* Logits of row i of the last eval (i = -1: last row); NULL if not computed. */
const float *llambda_get_logits(const llambda_context *c, int i);
/* Sample from the last logits with the context's sampler; accepts the token into the
 * penalty history. */
int32_t llambda_sample(llambda_context *c);
/* Add tokens to the penalty history without evaluating (e.g. the prompt). */
void llambda_sampler_accept(llambda_context *c, const int32_t *tokens, int n);

/* Generation: called per generated token with its text (complete UTF-8); return false
 * to stop. */
typedef bool (*llambda_token_cb)(int32_t tok, const char *text, int len, void *user);

typedef struct llambda_generate_result {
    int n_prompt, n_generated;
    int stop_reason;         /* 0 eog, 1 length (n_predict), 2 callback, 3 stop string, 4 context full */
    double prompt_seconds, gen_seconds;
} llambda_generate_result;

/* Step-by-step generation, the loop llambda_generate runs (servers pull it one piece at a
 * time). begin evaluates the prompt and claims the context until end; stop strings must
 * stay valid until end. next samples and evaluates one token and writes its text (whole
 * UTF-8 characters, stop strings held back) to text: returns 1 if generation goes on,
 * 0 when it has finished (see the result), -1 on error. */
llambda_status llambda_stream_begin(llambda_context *c, const int32_t *prompt, int n_prompt, int n_predict,
                                    const char *const *stop, int n_stop);
int llambda_stream_next(llambda_context *c, char *text, int size, int *len, int32_t *token);
void llambda_stream_end(llambda_context *c, llambda_generate_result *res);

/* Evaluate prompt tokens, then sample up to n_predict tokens (< 0: until the context is
 * full). Stops at an end-of-generation token, a stop string, or when cb returns false. */
llambda_status llambda_generate(llambda_context *c, const int32_t *prompt, int n_prompt, int n_predict,
                                const char *const *stop, int n_stop, llambda_token_cb cb, void *user,
                                llambda_generate_result *res);

#ifdef __cplusplus
}
#endif
#endif
