/* ONNX Runtime backend: the route to NPUs (VitisAI, OpenVINO) and DirectML-class GPUs, as
 * ONNX Runtime execution providers.
 *
 * libonnxruntime is opened at run time with dlopen ($LLAMBDA_ORT_LIB, else the usual
 * library names), never linked. Its C API is a table of function pointers whose order is
 * fixed across releases (entries are only ever appended), so we name the few entries we
 * call by their index instead of depending on the runtime's header.
 *
 * Each projection becomes a small ONNX model, written by our own protobuf encoder:
 *   x[n, cols] (float) -> MatMul(x, W^T) -> y[n, rows] (float)
 * with W^T an initializer in F32, or in BF16 followed by a Cast to float (half the memory).
 * The batch dimension is symbolic, so one session serves decode and prefill, and stays
 * alive across tokens.
 *
 * Options after "onnx:" separated by ':': the execution provider name (CPU, CUDA, ROCm,
 * OpenVINO, VitisAI, DirectML; default CPU), format=f32|bf16, threads=N (intra-op). */
#include "backend.h"
#include "protobuf.h"
#include <dlfcn.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ the runtime's C API */

typedef struct OrtStatus OrtStatus;
typedef struct OrtEnv OrtEnv;
typedef struct OrtSession OrtSession;
typedef struct OrtSessionOptions OrtSessionOptions;
typedef struct OrtMemoryInfo OrtMemoryInfo;
typedef struct OrtValue OrtValue;

typedef struct OrtApiBase {
    const void *(*GetApi)(uint32_t version);
    const char *(*GetVersionString)(void);
} OrtApiBase;

enum { ORT_API_VERSION_WANTED = 16 };   /* every entry below exists from this version on */
/* positions in the OrtApi table */
enum {
    API_CreateStatus = 0, API_GetErrorCode = 1, API_GetErrorMessage = 2, API_CreateEnv = 3,
    API_CreateSessionFromArray = 8, API_Run = 9, API_CreateSessionOptions = 10,
    API_SetSessionGraphOptimizationLevel = 23, API_SetIntraOpNumThreads = 24, API_SetInterOpNumThreads = 25,
    API_CreateTensorWithDataAsOrtValue = 49, API_CreateCpuMemoryInfo = 69,
    API_ReleaseEnv = 92, API_ReleaseStatus = 93, API_ReleaseMemoryInfo = 94, API_ReleaseSession = 95,
    API_ReleaseValue = 96, API_ReleaseSessionOptions = 100,
    API_SessionOptionsAppendExecutionProvider = 216,   /* by provider name, with key/value options */
};
enum { ORT_LOGGING_LEVEL_ERROR = 3, ORT_ENABLE_ALL = 99, ORT_TENSOR_FLOAT = 1 };
enum { ORT_ARENA_ALLOCATOR = 1, ORT_MEM_TYPE_DEFAULT = 0 };
enum { ONNX_FLOAT = 1, ONNX_BFLOAT16 = 16, ONNX_ATTR_INT = 2 };

#define API(s, idx, type) ((type)((void *const *)(s)->api)[idx])
typedef OrtStatus *(*fn_CreateStatus)(int code, const char *msg);
typedef int (*fn_GetErrorCode)(const OrtStatus *);
typedef const char *(*fn_GetErrorMessage)(const OrtStatus *);
typedef OrtStatus *(*fn_CreateEnv)(int level, const char *logid, OrtEnv **out);
typedef OrtStatus *(*fn_CreateSessionFromArray)(const OrtEnv *, const void *, size_t, const OrtSessionOptions *, OrtSession **);
typedef OrtStatus *(*fn_Run)(OrtSession *, const void *run_options, const char *const *in_names, const OrtValue *const *in,
                             size_t n_in, const char *const *out_names, size_t n_out, OrtValue **out);
typedef OrtStatus *(*fn_CreateSessionOptions)(OrtSessionOptions **);
typedef OrtStatus *(*fn_SetInt)(OrtSessionOptions *, int);
typedef OrtStatus *(*fn_CreateTensorWithData)(const OrtMemoryInfo *, void *, size_t, const int64_t *, size_t, int, OrtValue **);
typedef OrtStatus *(*fn_CreateCpuMemoryInfo)(int alloc_type, int mem_type, OrtMemoryInfo **);
typedef void (*fn_Release)(void *);
typedef OrtStatus *(*fn_AppendEP)(OrtSessionOptions *, const char *name, const char *const *keys, const char *const *values, size_t n);

typedef struct onnx_state {
    void *lib;
    const void *api;
    const OrtApiBase *base;
    OrtEnv *env;
    OrtMemoryInfo *cpu_mem;
    char ep[32];
    const char *ep_ort;  /* the provider's name in ONNX Runtime, NULL for the CPU */
    char version[32];
    int format;         /* LL_WFMT_F32 or LL_WFMT_BF16 */
    int threads;
} onnx_state;

typedef struct onnx_session {
    onnx_state *s;
    OrtSession *session;
    int64_t rows, cols;
} onnx_session;

/* Translate an OrtStatus (NULL = success) into an llambda status with the runtime's message. */
static llambda_status ort_status(onnx_state *s, OrtStatus *o, const char *what) {
    if (!o) return LLAMBDA_OK;
    int code = API(s, API_GetErrorCode, fn_GetErrorCode)(o);
    llambda_status st = code == 7 /* ORT_NO_MODEL */ || code == 3 /* NO_SUCHFILE */ ? LLAMBDA_ERR_IO
                      : code == 2 /* INVALID_ARGUMENT */ || code == 10 /* INVALID_GRAPH */ ? LLAMBDA_ERR_FORMAT
                      : code == 9 /* NOT_IMPLEMENTED */ ? LLAMBDA_ERR_UNSUPPORTED : LLAMBDA_ERR_UNSUPPORTED;
    st = ll_error(st, "ONNX Runtime: %s: %s", what, API(s, API_GetErrorMessage, fn_GetErrorMessage)(o));
    API(s, API_ReleaseStatus, fn_Release)(o);
    return st;
}

/* ------------------------------------------------------------------ load */

static void *open_runtime(char *tried, size_t size) {
    const char *env = getenv("LLAMBDA_ORT_LIB");
    const char *names[] = {env, "libonnxruntime.so.1", "libonnxruntime.so", "/usr/local/lib/libonnxruntime.so",
                           "/opt/onnxruntime/lib/libonnxruntime.so"};
    tried[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!names[i] || !*names[i]) continue;
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        if (env && names[i] == env) return NULL;   /* an explicit path that fails is the answer */
        size_t used = strlen(tried);
        snprintf(tried + used, size - used, "%s%s", used ? ", " : "", names[i]);
    }
    return NULL;
}

static const struct { const char *name, *ort; } providers[] = {
    {"CPU", NULL}, {"CUDA", "CUDA"}, {"ROCm", "ROCM"}, {"OpenVINO", "OpenVINO"},
    {"VitisAI", "VitisAI"}, {"DirectML", "DML"}, {"QNN", "QNN"},
};

static void onnx_unload(void *state);

static llambda_status onnx_load(const char *opts, void **state) {
    onnx_state *s = calloc(1, sizeof *s);
    if (!s) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    snprintf(s->ep, sizeof s->ep, "CPU");
    s->format = LL_WFMT_F32;
    s->threads = 1;
    char buf[128], *save = NULL;
    snprintf(buf, sizeof buf, "%s", opts);
    llambda_status st = LLAMBDA_OK;
    for (char *tok = strtok_r(buf, ":", &save); tok && !st; tok = strtok_r(NULL, ":", &save)) {
        if (!strcmp(tok, "format=f32")) s->format = LL_WFMT_F32;
        else if (!strcmp(tok, "format=bf16")) s->format = LL_WFMT_BF16;
        else if (!strncmp(tok, "threads=", 8) && atoi(tok + 8) > 0) s->threads = atoi(tok + 8);
        else {
            int found = 0;
            for (size_t i = 0; i < sizeof providers / sizeof providers[0]; i++)
                if (!strcasecmp(tok, providers[i].name)) {
                    snprintf(s->ep, sizeof s->ep, "%s", providers[i].name);
                    s->ep_ort = providers[i].ort;
                    found = 1;
                }
            if (!found) st = ll_error(LLAMBDA_ERR_ARG, "onnx backend: unknown option or execution provider '%s' "
                                      "(providers: CPU, CUDA, ROCm, OpenVINO, VitisAI, DirectML, QNN; format=f32|bf16; threads=N)", tok);
        }
    }
    if (st) { free(s); return st; }
    char tried[512];
    if (!(s->lib = open_runtime(tried, sizeof tried))) {
        const char *env = getenv("LLAMBDA_ORT_LIB");
        st = env && *env ? ll_error(LLAMBDA_ERR_IO, "cannot load ONNX Runtime from LLAMBDA_ORT_LIB=%s: %s", env, dlerror())
                         : ll_error(LLAMBDA_ERR_IO, "ONNX Runtime not found (tried %s; set LLAMBDA_ORT_LIB)", tried);
        free(s);
        return st;
    }
    const OrtApiBase *(*get_base)(void) = (const OrtApiBase *(*)(void))dlsym(s->lib, "OrtGetApiBase");
    if (!get_base || !(s->base = get_base())) { onnx_unload(s); return ll_error(LLAMBDA_ERR_UNSUPPORTED, "the library has no OrtGetApiBase: not ONNX Runtime"); }
    snprintf(s->version, sizeof s->version, "%s", s->base->GetVersionString());
    if (!(s->api = s->base->GetApi(ORT_API_VERSION_WANTED))) {
        st = ll_error(LLAMBDA_ERR_UNSUPPORTED, "ONNX Runtime %s is too old (API version %d needed)", s->version, ORT_API_VERSION_WANTED);
        onnx_unload(s);
        return st;
    }
    if ((st = ort_status(s, API(s, API_CreateEnv, fn_CreateEnv)(ORT_LOGGING_LEVEL_ERROR, "llambda", &s->env), "creating the environment")) ||
        (st = ort_status(s, API(s, API_CreateCpuMemoryInfo, fn_CreateCpuMemoryInfo)(ORT_ARENA_ALLOCATOR, ORT_MEM_TYPE_DEFAULT, &s->cpu_mem), "memory info"))) {
        onnx_unload(s);
        return st;
    }
    *state = s;
    return LLAMBDA_OK;
}

static void onnx_unload(void *state) {
    onnx_state *s = state;
    if (!s) return;
    if (s->cpu_mem) API(s, API_ReleaseMemoryInfo, fn_Release)(s->cpu_mem);
    if (s->env) API(s, API_ReleaseEnv, fn_Release)(s->env);
    /* the library stays mapped: runtimes keep threads and atexit handlers of their own */
    free(s);
}

/* Session options as every session gets them: threads, and the execution provider. The
 * caller releases *so (also on failure). */
static llambda_status session_options(onnx_state *s, OrtSessionOptions **so) {
    llambda_status st = ort_status(s, API(s, API_CreateSessionOptions, fn_CreateSessionOptions)(so), "session options");
    if (!st) st = ort_status(s, API(s, API_SetIntraOpNumThreads, fn_SetInt)(*so, s->threads), "intra-op threads");
    if (!st) st = ort_status(s, API(s, API_SetInterOpNumThreads, fn_SetInt)(*so, 1), "inter-op threads");
    if (!st && s->ep_ort)
        st = ort_status(s, API(s, API_SessionOptionsAppendExecutionProvider, fn_AppendEP)(*so, s->ep_ort, NULL, NULL, 0), s->ep);
    return st;
}

static llambda_status onnx_probe(void *state, ll_backend_probe *out) {
    onnx_state *s = state;
    memset(out, 0, sizeof *out);
    snprintf(out->runtime_version, sizeof out->runtime_version, "%s", s->version);
    snprintf(out->device, sizeof out->device, "ONNX Runtime %s, %s execution provider", s->version, s->ep);
    /* creating session options with the provider is the real check that it exists */
    OrtSessionOptions *so = NULL;
    llambda_status st = session_options(s, &so);
    if (so) API(s, API_ReleaseSessionOptions, fn_Release)(so);
    out->available = st == LLAMBDA_OK;
    return st;
}

static ll_weight_format onnx_format(void *state) { return (ll_weight_format)((onnx_state *)state)->format; }

/* ------------------------------------------------------------------ export: the ONNX model */

static void value_info(pb_buf *graph, int field, const char *name, int64_t n_cols) {
    pb_buf dim_n = {0}, dim_c = {0}, shape = {0}, tensor = {0}, type = {0}, vi = {0};
    pb_string_field(&dim_n, 2, "n");                 /* dim_param: the batch is symbolic */
    pb_varint_field(&dim_c, 1, (uint64_t)n_cols);    /* dim_value */
    pb_message_field(&shape, 1, &dim_n);
    pb_message_field(&shape, 1, &dim_c);
    pb_varint_field(&tensor, 1, ONNX_FLOAT);         /* elem_type */
    pb_message_field(&tensor, 2, &shape);
    pb_message_field(&type, 1, &tensor);             /* tensor_type */
    pb_string_field(&vi, 1, name);
    pb_message_field(&vi, 2, &type);
    pb_message_field(graph, field, &vi);
    pb_free(&dim_n); pb_free(&dim_c); pb_free(&shape); pb_free(&tensor); pb_free(&type); pb_free(&vi);
}

static void node(pb_buf *graph, const char *op, const char *in0, const char *in1, const char *out, int cast_to) {
    pb_buf n = {0}, attr = {0};
    pb_string_field(&n, 1, in0);
    if (in1) pb_string_field(&n, 1, in1);
    pb_string_field(&n, 2, out);
    pb_string_field(&n, 3, out);                     /* node name */
    pb_string_field(&n, 4, op);
    if (cast_to) {
        pb_string_field(&attr, 1, "to");
        pb_varint_field(&attr, 3, (uint64_t)cast_to);
        pb_varint_field(&attr, 20, ONNX_ATTR_INT);
        pb_message_field(&n, 5, &attr);
    }
    pb_message_field(graph, 1, &n);
    pb_free(&n); pb_free(&attr);
}

static llambda_status onnx_export(void *state, const ll_weight *w, uint8_t **art, size_t *len) {
    onnx_state *s = state;
    int64_t rows = w->rows, cols = w->cols;
    int bf16 = s->format == LL_WFMT_BF16;
    size_t esz = bf16 ? 2 : 4, n = (size_t)rows * (size_t)cols;
    uint8_t *wt = malloc(n * esz);
    float *row = malloc((size_t)cols * sizeof *row);
    if (!wt || !row) { free(wt); free(row); return ll_error(LLAMBDA_ERR_NOMEM, "out of memory exporting '%s'", w->name); }
    const llambda_type_traits *tt = llambda_type_get(w->type);
    /* transpose into [cols][rows] so that MatMul(x, W^T) gives y */
    for (int64_t r = 0; r < rows; r++) {
        tt->dequantize_row(w->data + (size_t)r * w->row_bytes, row, cols);
        for (int64_t c = 0; c < cols; c++) {
            size_t at = (size_t)c * (size_t)rows + (size_t)r;
            if (bf16) { uint16_t h = ll_fp32_to_bf16(row[c]); memcpy(wt + at * 2, &h, 2); }
            else memcpy(wt + at * 4, &row[c], 4);
        }
    }
    free(row);
    pb_buf init = {0}, graph = {0}, opset = {0}, model = {0};
    pb_varint_field(&init, 1, (uint64_t)cols);       /* dims */
    pb_varint_field(&init, 1, (uint64_t)rows);
    pb_varint_field(&init, 2, bf16 ? ONNX_BFLOAT16 : ONNX_FLOAT);
    pb_string_field(&init, 8, "w");
    pb_bytes_field(&init, 9, wt, n * esz);            /* raw_data, little-endian */
    free(wt);
    if (bf16) node(&graph, "Cast", "w", NULL, "w_f32", ONNX_FLOAT);
    node(&graph, "MatMul", "x", bf16 ? "w_f32" : "w", "y", 0);
    pb_string_field(&graph, 2, w->name);
    pb_message_field(&graph, 5, &init);
    pb_free(&init);
    value_info(&graph, 11, "x", cols);
    value_info(&graph, 12, "y", rows);
    pb_varint_field(&model, 1, 8);                   /* ir_version */
    pb_string_field(&model, 2, "llambda");
    pb_string_field(&model, 3, LLAMBDA_VERSION);
    pb_message_field(&model, 7, &graph);
    pb_string_field(&opset, 1, "");
    pb_varint_field(&opset, 2, 17);
    pb_message_field(&model, 8, &opset);
    pb_free(&graph); pb_free(&opset);
    if (model.oom) { pb_free(&model); return ll_error(LLAMBDA_ERR_NOMEM, "out of memory exporting '%s'", w->name); }
    *art = model.p;
    *len = model.len;
    return LLAMBDA_OK;
}

/* ------------------------------------------------------------------ sessions */

static llambda_status onnx_create(void *state, const ll_weight *w, const uint8_t *art, size_t len, void **session) {
    onnx_state *s = state;
    OrtSessionOptions *so = NULL;
    onnx_session *os = calloc(1, sizeof *os);
    if (!os) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    llambda_status st = session_options(s, &so);
    if (!st) st = ort_status(s, API(s, API_CreateSessionFromArray, fn_CreateSessionFromArray)(s->env, art, len, so, &os->session), w->name);
    if (so) API(s, API_ReleaseSessionOptions, fn_Release)(so);
    if (st) { free(os); return st; }
    os->s = s;
    os->rows = w->rows;
    os->cols = w->cols;
    *session = os;
    return LLAMBDA_OK;
}

static llambda_status onnx_run(void *session, const float *x, int n_tok, float *y) {
    onnx_session *os = session;
    onnx_state *s = os->s;
    int64_t xs[2] = {n_tok, os->cols}, ys[2] = {n_tok, os->rows};
    OrtValue *in = NULL, *out = NULL;
    fn_CreateTensorWithData make = API(s, API_CreateTensorWithDataAsOrtValue, fn_CreateTensorWithData);
    /* both tensors wrap our buffers: the runtime reads x and writes y in place */
    llambda_status st = ort_status(s, make(s->cpu_mem, (void *)x, (size_t)n_tok * (size_t)os->cols * 4, xs, 2, ORT_TENSOR_FLOAT, &in), "input");
    if (!st) st = ort_status(s, make(s->cpu_mem, y, (size_t)n_tok * (size_t)os->rows * 4, ys, 2, ORT_TENSOR_FLOAT, &out), "output");
    if (!st) {
        const char *in_names[] = {"x"}, *out_names[] = {"y"};
        const OrtValue *ins[] = {in};
        st = ort_status(s, API(s, API_Run, fn_Run)(os->session, NULL, in_names, ins, 1, out_names, 1, &out), "run");
    }
    if (in) API(s, API_ReleaseValue, fn_Release)(in);
    if (out) API(s, API_ReleaseValue, fn_Release)(out);
    return st;
}

static void onnx_free(void *session) {
    onnx_session *os = session;
    if (!os) return;
    API(os->s, API_ReleaseSession, fn_Release)(os->session);
    free(os);
}

const ll_backend_desc ll_backend_onnx = {
    .name = "onnx", .klass = LL_BK_NPU, .init_order = 20, .bridge_version = "ort-c-api-16",
    .exporter_version = "onnx-matmul-1", .cache_artifacts = true,
    .load = onnx_load, .unload = onnx_unload, .probe = onnx_probe, .weight_format = onnx_format,
    .export_weight = onnx_export, .session_create = onnx_create, .session_run = onnx_run, .session_free = onnx_free,
};
