/* The reference backend: computes on the CPU with the same kernels as ll_matmul (so its
 * results are bitwise those of the CPU path), from an artifact that is a copy of the
 * weight's blocks. It exists to test routing, fallback, rollback and the cache without
 * any device, so it can be told to fail:
 *   fail=load | fail=probe | fail=export   that step fails
 *   fail=create@N                          the N-th session creation fails (1-based)
 *   fail=run@N                             the N-th session run fails (its output is NaN)
 *   runtime=TEXT                           the runtime version it reports (a cache key field)
 * Options are separated by ':', e.g. "test:fail=run@5:runtime=2". */
#include "backend.h"
#include <stdio.h>
#include <stdlib.h>

typedef struct test_state {
    char fail[16];
    long fail_at;
    char runtime[32];
    atomic_long creates, runs;
} test_state;

typedef struct test_session {
    test_state *st;
    ll_weight w;
    uint8_t *blocks;
} test_session;

static llambda_status test_load(const char *opts, void **state) {
    test_state *s = calloc(1, sizeof *s);
    if (!s) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    snprintf(s->runtime, sizeof s->runtime, "reference-1");
    char buf[128];
    snprintf(buf, sizeof buf, "%s", opts);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
        if (!strncmp(tok, "fail=", 5)) {
            char *at = strchr(tok + 5, '@');
            if (at) { *at = 0; s->fail_at = atol(at + 1); }
            snprintf(s->fail, sizeof s->fail, "%s", tok + 5);
        } else if (!strncmp(tok, "runtime=", 8)) snprintf(s->runtime, sizeof s->runtime, "%s", tok + 8);
        else { free(s); return ll_error(LLAMBDA_ERR_ARG, "test backend: unknown option '%s'", tok); }
    }
    if (!strcmp(s->fail, "load")) { free(s); return ll_error(LLAMBDA_ERR_UNSUPPORTED, "test backend: injected load failure"); }
    *state = s;
    return LLAMBDA_OK;
}

static void test_unload(void *state) { free(state); }

static llambda_status test_probe(void *state, ll_backend_probe *out) {
    test_state *s = state;
    if (!strcmp(s->fail, "probe")) return ll_error(LLAMBDA_ERR_UNSUPPORTED, "test backend: injected probe failure");
    memset(out, 0, sizeof *out);
    out->available = true;
    snprintf(out->device, sizeof out->device, "reference (CPU kernels)");
    snprintf(out->runtime_version, sizeof out->runtime_version, "%s", s->runtime);
    return LLAMBDA_OK;
}

static ll_weight_format test_format(void *state) { (void)state; return LL_WFMT_BLOCKS; }

static llambda_status test_export(void *state, const ll_weight *w, uint8_t **art, size_t *len) {
    test_state *s = state;
    if (!strcmp(s->fail, "export")) return ll_error(LLAMBDA_ERR_IO, "test backend: injected export failure");
    return ll_export_blocks(w, art, len);
}

static llambda_status test_create(void *state, const ll_weight *w, const uint8_t *art, size_t len, void **session) {
    test_state *s = state;
    long k = atomic_fetch_add(&s->creates, 1) + 1;
    if (!strcmp(s->fail, "create") && k == s->fail_at)
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "test backend: injected failure creating session %ld", k);
    if (len != (size_t)w->rows * w->row_bytes) return ll_error(LLAMBDA_ERR_FORMAT, "test backend: artifact of %zu bytes for '%s'", len, w->name);
    test_session *t = calloc(1, sizeof *t);
    if (!t || !(t->blocks = malloc(len))) { free(t); return ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); }
    memcpy(t->blocks, art, len);
    t->st = s;
    t->w = *w;
    t->w.data = t->blocks;
    *session = t;
    return LLAMBDA_OK;
}

static llambda_status test_run(void *session, const float *x, int n_tok, float *y) {
    test_session *t = session;
    const ll_weight *w = &t->w;
    long k = atomic_fetch_add(&t->st->runs, 1) + 1;
    if (!strcmp(t->st->fail, "run") && k == t->st->fail_at) {
        for (size_t i = 0; i < (size_t)n_tok * (size_t)w->rows; i++) y[i] = NAN;   /* leave garbage behind */
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "test backend: injected failure in run %ld", k);
    }
    static _Thread_local uint8_t xq[1 << 17];   /* one quantized activation row, no heap */
    const ll_kernels *kn = ll_kernels_get();
    int vdt = ll_vec_dot_type(w->type);
    if ((size_t)ll_act_row_bytes(vdt, w->cols) > sizeof xq)
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "test backend: rows of %lld elements are too wide", (long long)w->cols);
    for (int i = 0; i < n_tok; i++) {
        kn->from_float[vdt](x + (size_t)i * (size_t)w->cols, xq, w->cols);
        for (int64_t r = 0; r < w->rows; r++)
            kn->vec_dot[w->type](w->cols, &y[(size_t)i * (size_t)w->rows + (size_t)r], w->data + (size_t)r * w->row_bytes, xq);
    }
    return LLAMBDA_OK;
}

static void test_free(void *session) {
    test_session *t = session;
    if (t) free(t->blocks);
    free(t);
}

#define TEST_DESC(ident, nm, cls) \
    const ll_backend_desc ident = { \
        .name = nm, .klass = cls, .init_order = 90, .bridge_version = "1", .exporter_version = "blocks-1", \
        .cache_artifacts = true, .load = test_load, .unload = test_unload, .probe = test_probe, \
        .weight_format = test_format, .export_weight = test_export, .session_create = test_create, \
        .session_run = test_run, .session_free = test_free, \
    };
TEST_DESC(ll_backend_test, "test", LL_BK_GPU)
TEST_DESC(ll_backend_testnpu, "testnpu", LL_BK_NPU)
