/* Accelerator backends: the descriptor every backend implements, the loaded instances a
 * model holds, and the bindings that route one projection to them.
 *
 * The CPU is not a backend here: it is what ll_matmul does when no binding takes a
 * projection, so it is always last in the priority order and never fails.
 *
 * A backend is one file under src/backends/ defining one const ll_backend_desc, plus one
 * line in the table of registry.c. */
#ifndef LLAMBDA_BACKEND_H
#define LLAMBDA_BACKEND_H

#include "../model.h"
#include <stdatomic.h>

/* Execution priority classes: a projection tries its GPU bindings, then NPU-class ones,
 * then the CPU. */
typedef enum { LL_BK_GPU = 0, LL_BK_NPU = 1 } ll_backend_class;

/* What the backend consumes: the blocks as stored, or a float format it converts to. */
typedef enum { LL_WFMT_BLOCKS = 0, LL_WFMT_F32, LL_WFMT_F16, LL_WFMT_BF16 } ll_weight_format;

typedef struct ll_backend_probe {
    bool available;
    char device[128];              /* what it runs on, e.g. "CPU execution provider" */
    uint64_t memory_bytes;         /* device memory, 0 when not known */
    char runtime_version[64];      /* the runtime's own version ("1.30.0"), part of the cache key */
} ll_backend_probe;

typedef struct ll_backend_desc {
    const char *name;              /* as written after --backend */
    ll_backend_class klass;
    int init_order;                /* lower initialises first (independent of priority) */
    const char *bridge_version;    /* version of llambda's side of the bridge */
    const char *exporter_version;  /* changes whenever the exported artifact would change */
    bool cache_artifacts;          /* artifacts go through the content-addressed cache */
    /* Open the runtime. `opts` is the text after "name:" (may be ""). */
    llambda_status (*load)(const char *opts, void **state);
    void (*unload)(void *state);
    llambda_status (*probe)(void *state, ll_backend_probe *out);
    ll_weight_format (*weight_format)(void *state);
    /* Export one 2-D weight (rows x cols in its stored type) into the backend's artifact:
     * malloc'd bytes the caller frees. */
    llambda_status (*export_weight)(void *state, const ll_weight *w, uint8_t **art, size_t *len);
    /* A session computes y[n_tok][rows] = x[n_tok][cols] . W^T for any n_tok >= 1. It may be
     * run from several threads at once and must not allocate on llambda's heap while running. */
    llambda_status (*session_create)(void *state, const ll_weight *w, const uint8_t *art, size_t len, void **session);
    llambda_status (*session_run)(void *session, const float *x, int n_tok, float *y);
    void (*session_free)(void *session);
} ll_backend_desc;

/* A backend loaded for one model. */
typedef struct ll_backend {
    const ll_backend_desc *desc;
    void *state;
    char opts[128];
    ll_backend_probe probe;
    atomic_long runs, failures;    /* session runs, and those that failed */
    int n_sessions;                /* live sessions (changed only while no context runs) */
} ll_backend;

#define LL_MAX_BACKENDS 4

typedef struct ll_binding {
    ll_backend *be;
    void *session;
    atomic_int dead;               /* set when a run failed: skipped from then on */
} ll_binding;

/* The enabled bindings of one weight matrix, in priority order. */
struct ll_bindset {
    int n;
    ll_binding b[LL_MAX_BACKENDS];
};

/* Run y = W x through the first binding that succeeds; 0 when none did (the CPU computes). */
int ll_bindings_run(const ll_weight *w, const float *x, int n_tok, float *y);

/* A session of the loaded backend `name` for one weight, outside the projection store
 * (bench-proj): artifact from the cache or exported, then created. */
llambda_status ll_backend_session(llambda_model *m, const char *name, const ll_weight *w, ll_backend **be, void **session);
llambda_status ll_backend_session_run(ll_backend *be, void *session, const float *x, int n_tok, float *y);
void ll_backend_session_free(ll_backend *be, void *session);

/* The artifact of a backend that takes the blocks as stored: a copy of the matrix's bytes. */
llambda_status ll_export_blocks(const ll_weight *w, uint8_t **art, size_t *len);

/* Free every session and backend of a model (model.c calls it from llambda_model_free). */
void ll_backends_free(llambda_model *m);

/* ---------------------------------------------------------------- content-addressed cache */

typedef struct ll_cache_key_fields {
    const uint8_t *tensor; size_t tensor_len;  /* the packed tensor bytes */
    int64_t rows, cols;
    int type;                                   /* ggml type id */
    const char *backend, *bridge_version, *exporter_version, *runtime_version;
} ll_cache_key_fields;

/* SHA-256 over every key field, as 64 hex digits (+ NUL). */
llambda_status ll_cache_key(const ll_cache_key_fields *f, char hex[65]);
/* The cache folder: $LLAMBDA_CACHE_DIR, else $XDG_CACHE_HOME/llambda, else ~/.cache/llambda. */
llambda_status ll_cache_dir(char *out, size_t size);
/* Read an artifact: 1 on a hit (malloc'd *data), 0 on a miss, -1 on a corrupt or truncated
 * entry (removed, to be rebuilt). */
int ll_cache_get(const char *key, uint8_t **data, size_t *len);
/* Store an artifact: a temporary file renamed into place once complete. */
llambda_status ll_cache_put(const char *key, const uint8_t *data, size_t len);

/* ---------------------------------------------------------------- the backends */

extern const ll_backend_desc ll_backend_test;     /* fault-injecting reference backend */
extern const ll_backend_desc ll_backend_testnpu;  /* the same, in the NPU class */
extern const ll_backend_desc ll_backend_onnx;     /* ONNX Runtime, dlopen'ed */
#ifdef LL_HAVE_CUDA
extern const ll_backend_desc ll_backend_cuda;
#endif

#endif
