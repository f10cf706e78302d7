/* CUDA backend, per-projection mode: each offloaded weight is uploaded once in its GGUF
 * blocks (no conversion, so nothing to cache) and multiplied by a kernel that dequantizes
 * as it reads (cuda_kernels.cu). Built with `make CUDA=1`; without it this file is not
 * compiled and the registry does not list "cuda".
 *
 * Options after "cuda:": device=N (default 0).
 *
 * Runs are serialised per backend (one staging buffer pair on the device, grown under the
 * lock): the GPU executes one projection at a time anyway. */
#include "backend.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

int llcu_device_count(int *n);
int llcu_device_info(int dev, char *name, size_t name_size, uint64_t *memory, int *runtime_version);
int llcu_set_device(int dev);
int llcu_upload(const void *host, size_t len, void **dev);
int llcu_alloc(size_t len, void **dev);
void llcu_free(void *dev);
int llcu_type_supported(int type);
int llcu_matmul(int type, const void *w, size_t row_bytes, int64_t rows, int64_t cols, const float *x, int n_tok,
                float *y, void *dx, void *dy);
const char *llcu_error_string(int err);

typedef struct cuda_state {
    int device;
    pthread_mutex_t lock;
    void *dx, *dy;              /* staging buffers */
    size_t dx_len, dy_len;
} cuda_state;

typedef struct cuda_session {
    cuda_state *s;
    void *w;
    int type;
    size_t row_bytes;
    int64_t rows, cols;
} cuda_session;

/* cudaError_t -> llambda status, with the runtime's words */
static llambda_status cuda_status(int err, const char *what) {
    if (err == 0) return LLAMBDA_OK;
    llambda_status st = err == 2 /* cudaErrorMemoryAllocation */ ? LLAMBDA_ERR_NOMEM : LLAMBDA_ERR_UNSUPPORTED;
    return ll_error(st, "CUDA: %s: %s", what, llcu_error_string(err));
}

static llambda_status cuda_load(const char *opts, void **state) {
    cuda_state *s = calloc(1, sizeof *s);
    if (!s) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    if (*opts) {
        if (strncmp(opts, "device=", 7) || atoi(opts + 7) < 0) { free(s); return ll_error(LLAMBDA_ERR_ARG, "cuda backend: unknown option '%s' (device=N)", opts); }
        s->device = atoi(opts + 7);
    }
    int n = 0;
    llambda_status st = cuda_status(llcu_device_count(&n), "counting devices");
    if (!st && s->device >= n) st = ll_error(LLAMBDA_ERR_UNSUPPORTED, "CUDA: no device %d (%d found)", s->device, n);
    if (!st) st = cuda_status(llcu_set_device(s->device), "selecting the device");
    if (st) { free(s); return st; }
    pthread_mutex_init(&s->lock, NULL);
    *state = s;
    return LLAMBDA_OK;
}

static void cuda_unload(void *state) {
    cuda_state *s = state;
    if (!s) return;
    llcu_free(s->dx);
    llcu_free(s->dy);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static llambda_status cuda_probe(void *state, ll_backend_probe *out) {
    cuda_state *s = state;
    memset(out, 0, sizeof *out);
    int rt = 0;
    llambda_status st = cuda_status(llcu_device_info(s->device, out->device, sizeof out->device, &out->memory_bytes, &rt), "device properties");
    if (st) return st;
    snprintf(out->runtime_version, sizeof out->runtime_version, "cudart %d.%d", rt / 1000, (rt % 1000) / 10);
    out->available = true;
    return LLAMBDA_OK;
}

static ll_weight_format cuda_format(void *state) { (void)state; return LL_WFMT_BLOCKS; }

/* The artifact is the tensor's own blocks: nothing to convert. */
static llambda_status cuda_export(void *state, const ll_weight *w, uint8_t **art, size_t *len) {
    (void)state;
    if (!llcu_type_supported(w->type))
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "CUDA backend: %s weights are not supported ('%s')", llambda_type_get(w->type)->name, w->name);
    return ll_export_blocks(w, art, len);
}

static llambda_status cuda_create(void *state, const ll_weight *w, const uint8_t *art, size_t len, void **session) {
    cuda_state *s = state;
    cuda_session *cs = calloc(1, sizeof *cs);
    if (!cs) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    llambda_status st = cuda_status(llcu_upload(art, len, &cs->w), w->name);
    if (st) { free(cs); return st; }
    cs->s = s; cs->type = w->type; cs->row_bytes = w->row_bytes; cs->rows = w->rows; cs->cols = w->cols;
    *session = cs;
    return LLAMBDA_OK;
}

static llambda_status grow(void **buf, size_t *have, size_t need) {
    if (*have >= need) return LLAMBDA_OK;
    llcu_free(*buf);
    *buf = NULL; *have = 0;
    llambda_status st = cuda_status(llcu_alloc(need, buf), "staging buffer");
    if (!st) *have = need;
    return st;
}

static llambda_status cuda_run(void *session, const float *x, int n_tok, float *y) {
    cuda_session *cs = session;
    cuda_state *s = cs->s;
    pthread_mutex_lock(&s->lock);
    llambda_status st = grow(&s->dx, &s->dx_len, (size_t)n_tok * (size_t)cs->cols * sizeof(float));
    if (!st) st = grow(&s->dy, &s->dy_len, (size_t)n_tok * (size_t)cs->rows * sizeof(float));
    if (!st) st = cuda_status(llcu_matmul(cs->type, cs->w, cs->row_bytes, cs->rows, cs->cols, x, n_tok, y, s->dx, s->dy), "matmul");
    pthread_mutex_unlock(&s->lock);
    return st;
}

static void cuda_free(void *session) {
    cuda_session *cs = session;
    if (!cs) return;
    llcu_free(cs->w);
    free(cs);
}

const ll_backend_desc ll_backend_cuda = {
    .name = "cuda", .klass = LL_BK_GPU, .init_order = 10, .bridge_version = "cuda-matvec-1",
    .exporter_version = "blocks-1", .cache_artifacts = false,
    .load = cuda_load, .unload = cuda_unload, .probe = cuda_probe, .weight_format = cuda_format,
    .export_weight = cuda_export, .session_create = cuda_create, .session_run = cuda_run, .session_free = cuda_free,
};
