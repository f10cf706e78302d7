/* Accelerator backends: routing, fallback, rollback, the content-addressed cache, and ONNX
 * Runtime end to end (CPU execution provider) when its library is present.
 *
 * The "test"/"testnpu" backends compute with the CPU kernels, so with them the logits must
 * be bitwise those of the CPU path; a failed run leaves NaN in its output, so a fallback
 * that did not recompute would show. */
#include "harness.h"
#include "../src/backends/backend.h"
#include <math.h>
#include <unistd.h>
#include <sys/stat.h>
#include <dirent.h>

static const int32_t prompt[] = {1, 450, 496, 173, 701, 432, 204, 975, 278, 366, 203, 889};
#define N_PROMPT ((int)(sizeof prompt / sizeof prompt[0]))

static char cache_dir[256];

/* Logits of every prompt row (malloc'd), with the model as given. */
static float *run_logits(llambda_model *m, int *n_vocab) {
    llambda_context_params cp = llambda_context_default_params();
    cp.n_ctx = 64; cp.logits = LLAMBDA_LOGITS_ALL; cp.n_threads = 2;
    llambda_context *c;
    if (llambda_context_create(m, &cp, &c)) { printf("  context: %s\n", llambda_last_error()); return NULL; }
    int nv = llambda_model_n_vocab(m);
    float *out = NULL;
    if (llambda_eval(c, prompt, N_PROMPT) == LLAMBDA_OK) {
        out = malloc((size_t)N_PROMPT * (size_t)nv * sizeof *out);
        for (int i = 0; i < N_PROMPT; i++) memcpy(out + (size_t)i * (size_t)nv, llambda_get_logits(c, i), (size_t)nv * sizeof *out);
    } else printf("  eval: %s\n", llambda_last_error());
    llambda_context_free(c);
    *n_vocab = nv;
    return out;
}

static llambda_model *load(const char *file, const char *backends, const char *layers, const char *roles) {
    llambda_model_params p = llambda_model_default_params();
    p.n_threads = 2;
    p.backends = backends;
    p.offload_layers = layers;
    p.offload_roles = roles;
    llambda_model *m = NULL;
    if (llambda_model_load(fixture(file), &p, &m)) printf("  load: %s\n", llambda_last_error());
    return m;
}

static double max_nmse(const float *a, const float *ref, int rows, int nv) {
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        double num = 0, den = 0;
        for (int i = 0; i < nv; i++) {
            double d = (double)a[(size_t)r * nv + i] - ref[(size_t)r * nv + i];
            num += d * d; den += (double)ref[(size_t)r * nv + i] * ref[(size_t)r * nv + i];
        }
        double e = isnan(num) ? INFINITY : num / (den > 0 ? den : 1);
        if (e > worst) worst = e;
    }
    return worst;
}

static void info(llambda_model *m, int i, llambda_backend_info *bi) { memset(bi, 0, sizeof *bi); llambda_backend_info_get(m, i, bi); }

static void clear_cache(void) {
    DIR *d = opendir(cache_dir);
    if (!d) return;
    struct dirent *e;
    char path[600];
    while ((e = readdir(d))) if (e->d_name[0] != '.') { snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name); unlink(path); }
    closedir(d);
}

#define MODEL "models/tiny-llama31-Q8_0.gguf"

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/llambda-test-cache-%d", (int)getpid());
    setenv("LLAMBDA_CACHE_DIR", cache_dir, 1);
    int nv = 0;
    llambda_model *cpu = load(MODEL, NULL, NULL, NULL);
    if (!cpu) return 1;
    float *ref = run_logits(cpu, &nv);
    int n_layer = llambda_model_n_layer(cpu);

    TEST("cache key: every field counts") {
        uint8_t t1[64] = {1}, t2[64] = {1};
        t2[63] = 1;
        ll_cache_key_fields base = {t1, sizeof t1, 4, 16, 8, "onnx", "b1", "e1", "r1"};
        char k0[65], k[65];
        CHECK(ll_cache_key(&base, k0) == LLAMBDA_OK && strlen(k0) == 64, "key");
        ll_cache_key_fields f;
        f = base; CHECK(ll_cache_key(&f, k) == 0 && !strcmp(k, k0), "same fields, same key");
        f = base; f.tensor = t2; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "tensor bytes");
        f = base; f.tensor_len = 63; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "tensor length");
        f = base; f.rows = 8; f.cols = 8; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "dims");
        f = base; f.type = 2; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "type");
        f = base; f.backend = "cuda"; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "backend");
        f = base; f.bridge_version = "b2"; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "bridge version");
        f = base; f.exporter_version = "e2"; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "exporter version");
        f = base; f.runtime_version = "r2"; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "runtime version");
        /* fields cannot run into one another */
        f = base; f.bridge_version = "b1e"; f.exporter_version = "1"; ll_cache_key(&f, k); CHECK(strcmp(k, k0), "field boundaries");
    }

    TEST("cache: store, hit, corrupt and truncated entries are detected") {
        const char *key = "00000000000000000000000000000000000000000000000000000000000000aa";
        uint8_t data[1000];
        for (int i = 0; i < 1000; i++) data[i] = (uint8_t)(i * 7);
        CHECK(ll_cache_put(key, data, sizeof data) == LLAMBDA_OK, "put: %s", llambda_last_error());
        uint8_t *got = NULL; size_t len = 0;
        CHECK(ll_cache_get(key, &got, &len) == 1 && len == 1000 && !memcmp(got, data, 1000), "hit");
        free(got);
        char path[600];
        snprintf(path, sizeof path, "%s/%s.art", cache_dir, key);
        FILE *f = fopen(path, "r+b");
        if (f) { fseek(f, 500, SEEK_SET); fputc(0x55, f); fclose(f); }
        CHECK(ll_cache_get(key, &got, &len) == -1 && got == NULL, "a flipped byte is detected");
        CHECK(access(path, F_OK) != 0, "the corrupt entry is removed");
        ll_cache_put(key, data, sizeof data);
        CHECK(truncate(path, 700) == 0, "truncate");
        CHECK(ll_cache_get(key, &got, &len) == -1, "a truncated entry is detected");
        CHECK(ll_cache_get("ffff", &got, &len) == 0, "a miss");
        clear_cache();
    }

    TEST("test backend takes every projection; logits bitwise the CPU's") {
        llambda_model *m = load(MODEL, "test", "all", NULL);
        CHECK(m && llambda_backend_count(m) == 1, "one backend");
        if (m) {
            llambda_offload_stats s;
            llambda_offload_stats_get(m, &s);
            CHECK(s.registered == 7 * n_layer && s.bound == s.registered, "bound %d of %d (expected %d)", s.bound, s.registered, 7 * n_layer);
            CHECK(s.exports == s.registered && s.cache_hits == 0, "first load exports (%ld exports, %ld hits)", s.exports, s.cache_hits);
            float *got = run_logits(m, &nv);
            CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits differ from the CPU path");
            llambda_backend_info bi;
            info(m, 0, &bi);
            CHECK(bi.runs >= 7 * n_layer && bi.failures == 0 && bi.sessions == 7 * n_layer, "runs %ld failures %ld sessions %d", bi.runs, bi.failures, bi.sessions);
            free(got);
            llambda_model_free(m);
        }
    }

    TEST("cache: the second load reuses every artifact; a new runtime version does not") {
        llambda_model *m = load(MODEL, "test", "all", NULL);
        llambda_offload_stats s = {0};
        if (m) llambda_offload_stats_get(m, &s);
        CHECK(s.exports == 0 && s.cache_hits == 7 * n_layer, "second load: %ld exports, %ld hits", s.exports, s.cache_hits);
        llambda_model_free(m);
        m = load(MODEL, "test:runtime=reference-2", "all", NULL);
        if (m) llambda_offload_stats_get(m, &s);
        CHECK(s.exports == 7 * n_layer && s.cache_hits == 0, "runtime changed: %ld exports, %ld hits", s.exports, s.cache_hits);
        llambda_model_free(m);
        /* corrupt every entry: all rebuilt, logits unchanged */
        DIR *d = opendir(cache_dir);
        struct dirent *e;
        char path[600];
        int n = 0;
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.') { snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name); truncate(path, 40); n++; }
        if (d) closedir(d);
        CHECK(n >= 7 * n_layer, "%d cache files", n);
        m = load(MODEL, "test", "all", NULL);
        if (m) llambda_offload_stats_get(m, &s);
        CHECK(s.cache_rebuilds == 7 * n_layer && s.exports == 7 * n_layer, "rebuilds %ld exports %ld", s.cache_rebuilds, s.exports);
        float *got = m ? run_logits(m, &nv) : NULL;
        CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits after a rebuild");
        free(got);
        llambda_model_free(m);
    }

    TEST("a backend failing to load warns and the CPU computes") {
        llambda_model *m = load(MODEL, "test:fail=load", "all", NULL);
        CHECK(m && llambda_backend_count(m) == 0, "no backend");
        float *got = m ? run_logits(m, &nv) : NULL;
        CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits");
        free(got);
        llambda_model_free(m);
        m = load(MODEL, "test:fail=probe", "all", NULL);
        CHECK(m && llambda_backend_count(m) == 0, "probe failure: no backend");
        llambda_model_free(m);
    }

    TEST("session creation failing rolls back that backend only; the next one takes over") {
        llambda_model *m = load(MODEL, "test:fail=create@5,testnpu", "all", NULL);
        CHECK(m && llambda_backend_count(m) == 2, "two backends");
        if (m) {
            llambda_backend_info gpu, npu;
            info(m, 0, &gpu); info(m, 1, &npu);
            CHECK(!strcmp(gpu.name, "test") && !strcmp(npu.name, "testnpu"), "priority: gpu class first (%s, %s)", gpu.name, npu.name);
            CHECK(gpu.sessions == 0, "test kept %d sessions after its rollback", gpu.sessions);
            CHECK(npu.sessions == 7 * n_layer, "testnpu has %d sessions", npu.sessions);
            float *got = run_logits(m, &nv);
            CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits");
            info(m, 0, &gpu); info(m, 1, &npu);
            CHECK(gpu.runs == 0 && npu.runs >= 7 * n_layer, "runs: test %ld, testnpu %ld", gpu.runs, npu.runs);
            free(got);
            llambda_model_free(m);
        }
        /* a backend failing later never removes another backend's working sessions */
        m = load(MODEL, "testnpu", "all", NULL);
        CHECK(m && llambda_backends_load(m, "test:fail=create@2") == LLAMBDA_OK && llambda_backend_count(m) == 2, "load test");
        if (m) {
            CHECK(llambda_offload_enable(m) == LLAMBDA_OK, "enable: testnpu still serves");
            llambda_backend_info a, b;
            info(m, 0, &a); info(m, 1, &b);
            CHECK(!strcmp(a.name, "test") && a.sessions == 0 && b.sessions == 7 * n_layer, "%s %d, %s %d", a.name, a.sessions, b.name, b.sessions);
            float *got = run_logits(m, &nv);
            CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits");
            free(got);
            llambda_model_free(m);
        }
    }

    TEST("priority: the GPU-class backend runs, the NPU-class one waits") {
        llambda_model *m = load(MODEL, "testnpu,test", "0", "q,k");
        if (m) {
            llambda_backend_info a, b;
            float *got = run_logits(m, &nv);
            info(m, 0, &a); info(m, 1, &b);
            CHECK(!strcmp(a.name, "test") && a.runs > 0 && b.runs == 0, "%s %ld, %s %ld", a.name, a.runs, b.name, b.runs);
            CHECK(a.sessions == 2 && b.sessions == 2, "sessions %d %d", a.sessions, b.sessions);
            CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits");
            free(got);
            llambda_model_free(m);
        }
    }

    TEST("a run failing drops that session; the same projection is recomputed") {
        llambda_model *m = load(MODEL, "test:fail=run@5", "all", NULL);
        if (m) {
            float *got = run_logits(m, &nv);
            llambda_backend_info bi;
            info(m, 0, &bi);
            CHECK(bi.failures == 1 && bi.sessions == 7 * n_layer - 1, "failures %ld sessions %d", bi.failures, bi.sessions);
            CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits (NaN would mean no recompute)");
            llambda_offload_stats s;
            llambda_offload_stats_get(m, &s);
            CHECK(s.bound == s.registered - 1, "bound %d of %d", s.bound, s.registered);
            free(got);
            /* with a second backend, the failed projection goes to it */
            llambda_model_free(m);
            m = load(MODEL, "test:fail=run@3,testnpu", "all", NULL);
            got = m ? run_logits(m, &nv) : NULL;
            llambda_backend_info npu;
            info(m, 1, &npu);
            CHECK(npu.runs >= 1, "testnpu ran %ld times", npu.runs);
            CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits");
            free(got);
            llambda_model_free(m);
        }
    }

    TEST("selections are validated against the architecture") {
        llambda_model *m = load(MODEL, "test", NULL, NULL);
        CHECK(llambda_offload_register(m, NULL, "0-1", "q,zz") == LLAMBDA_ERR_ARG && strstr(llambda_last_error(), "unknown role 'zz'"), "%s", llambda_last_error());
        CHECK(llambda_offload_register(m, NULL, "0-99", "q") == LLAMBDA_ERR_ARG && strstr(llambda_last_error(), "out of range"), "%s", llambda_last_error());
        CHECK(llambda_offload_register(m, NULL, "0-99", NULL) == LLAMBDA_ERR_ARG && strstr(llambda_last_error(), "out of range"), "all roles: %s", llambda_last_error());
        CHECK(llambda_offload_register(m, NULL, "1-0", NULL) == LLAMBDA_ERR_ARG, "a backwards range");
        CHECK(llambda_offload_register(m, NULL, "x", NULL) == LLAMBDA_ERR_ARG, "not a number");
        CHECK(llambda_offload_register(m, NULL, "0", "ssm_in") == LLAMBDA_ERR_ARG && strstr(llambda_last_error(), "ssm_in"), "%s", llambda_last_error());
        CHECK(llambda_offload_register(m, "blk.0.attn_q.weight,nope.weight", NULL, NULL) == LLAMBDA_ERR_ARG &&
              strstr(llambda_last_error(), "nope.weight"), "%s", llambda_last_error());
        CHECK(llambda_offload_register(m, NULL, NULL, "q") == LLAMBDA_ERR_ARG, "roles without layers");
        llambda_offload_stats s;
        llambda_offload_stats_get(m, &s);
        CHECK(s.registered == 0, "a failed selection registers nothing (%d)", s.registered);
        CHECK(llambda_offload_register(m, "blk.0.attn_q.weight,output.weight", NULL, NULL) == LLAMBDA_OK, "%s", llambda_last_error());
        CHECK(llambda_offload_enable(m) == LLAMBDA_OK, "enable");
        llambda_offload_stats_get(m, &s);
        CHECK(s.registered == 2 && s.bound == 2, "%d %d", s.registered, s.bound);
        llambda_offload_clear(m);
        llambda_offload_stats_get(m, &s);
        CHECK(s.registered == 0 && s.bound == 0, "cleared");
        CHECK(llambda_backends_load(m, "warp") == LLAMBDA_ERR_ARG && strstr(llambda_last_error(), "unknown backend 'warp'"), "%s", llambda_last_error());
        llambda_model_free(m);
        llambda_model_params p = llambda_model_default_params();
        p.offload_layers = "all";
        CHECK(llambda_model_load(fixture(MODEL), &p, &m) == LLAMBDA_ERR_ARG, "offload without a backend");
    }

    TEST("experts: each expert matrix is its own projection") {
        const char *file = "archs/qwen3next/models/tiny-qwen3next-Q8_0.gguf";
        llambda_model *e = load(file, NULL, NULL, NULL);
        CHECK(e != NULL, "the expert fixture");
        float *eref = e ? run_logits(e, &nv) : NULL;
        llambda_model_free(e);
        e = load(file, "test", "all", "down_exps,up_exps");
        llambda_offload_stats s = {0};
        if (e) llambda_offload_stats_get(e, &s);
        CHECK(s.registered > 4 && s.bound == s.registered, "expert matrices %d bound %d", s.registered, s.bound);
        float *got = e ? run_logits(e, &nv) : NULL;
        CHECK(got && eref && !memcmp(got, eref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "expert logits");
        llambda_backend_info bi;
        info(e, 0, &bi);
        CHECK(bi.runs > 0, "expert sessions ran");
        free(got); free(eref);
        llambda_model_free(e);
    }

    TEST("ONNX Runtime (CPU execution provider): every projection offloaded") {
        const char *lib = getenv("LLAMBDA_ORT_LIB");
        if (!lib || access(lib, R_OK) != 0) {
            printf("  ONNX Runtime library not found (LLAMBDA_ORT_LIB=%s): ONNX checks not run\n", lib ? lib : "unset");
        } else {
            llambda_model *m = load(MODEL, "onnx:CPU", "all", NULL);
            CHECK(m && llambda_backend_count(m) == 1, "onnx loaded: %s", llambda_last_error());
            if (m && llambda_backend_count(m) == 1) {
                llambda_backend_info bi;
                info(m, 0, &bi);
                printf("  %s\n", bi.device);
                llambda_offload_stats s;
                llambda_offload_stats_get(m, &s);
                CHECK(s.bound == 7 * n_layer && s.exports == 7 * n_layer, "bound %d exports %ld", s.bound, s.exports);
                float *got = run_logits(m, &nv);
                double e = got ? max_nmse(got, ref, N_PROMPT, nv) : INFINITY;
                printf("  max NMSE vs the CPU path: %.3g\n", e);
                CHECK(e <= 2e-3, "NMSE %.3g", e);
                info(m, 0, &bi);
                CHECK(bi.runs >= 7 * n_layer && bi.failures == 0, "runs %ld failures %ld", bi.runs, bi.failures);
                free(got);
                llambda_model_free(m);
                m = load(MODEL, "onnx:CPU", "all", NULL);
                if (m) llambda_offload_stats_get(m, &s);
                CHECK(s.cache_hits == 7 * n_layer && s.exports == 0, "second run: %ld hits %ld exports", s.cache_hits, s.exports);
                got = m ? run_logits(m, &nv) : NULL;
                CHECK(got && max_nmse(got, ref, N_PROMPT, nv) <= 2e-3, "cached artifacts give the same answer");
                free(got);
                llambda_model_free(m);
                m = load(MODEL, "onnx:CPU:format=bf16", "all", NULL);
                if (m) llambda_offload_stats_get(m, &s);
                CHECK(s.exports == 7 * n_layer && s.cache_hits == 0, "bf16 is another artifact: %ld exports", s.exports);
                got = m ? run_logits(m, &nv) : NULL;
                e = got ? max_nmse(got, ref, N_PROMPT, nv) : INFINITY;
                printf("  BF16 weights: max NMSE %.3g\n", e);
                CHECK(e <= 2e-3, "bf16 NMSE %.3g", e);
                free(got);
                llambda_model_free(m);
                /* F32 weights: the CPU path multiplies in F32 too, so the float tolerance holds */
                llambda_model *f = load("models/tiny-llama31-F32.gguf", NULL, NULL, NULL);
                int nvf = 0;
                float *fref = f ? run_logits(f, &nvf) : NULL;
                llambda_model_free(f);
                f = load("models/tiny-llama31-F32.gguf", "onnx:CPU", "all", NULL);
                float *fgot = f ? run_logits(f, &nvf) : NULL;
                e = fgot && fref ? max_nmse(fgot, fref, N_PROMPT, nvf) : INFINITY;
                printf("  F32 file, every projection on ONNX Runtime: max NMSE %.3g\n", e);
                CHECK(e <= 1e-5, "F32 NMSE %.3g", e);
                free(fref); free(fgot);
                llambda_model_free(f);
                m = load(MODEL, "onnx:NoSuchEP", NULL, NULL);
                CHECK(!m && strstr(llambda_last_error(), "NoSuchEP"), "unknown provider: %s", llambda_last_error());
                m = load(MODEL, "onnx:VitisAI", "all", NULL);
                CHECK(m && llambda_backend_count(m) == 0, "a provider this runtime lacks: warning, CPU");
                llambda_model_free(m);
            }
        }
        setenv("LLAMBDA_ORT_LIB", "/nonexistent/libonnxruntime.so", 1);
        llambda_model *m = load(MODEL, "onnx", "all", NULL);
        CHECK(m && llambda_backend_count(m) == 0, "missing runtime: warning, CPU only");
        float *got = m ? run_logits(m, &nv) : NULL;
        CHECK(got && !memcmp(got, ref, (size_t)N_PROMPT * (size_t)nv * sizeof *got), "logits");
        free(got);
        llambda_model_free(m);
    }

    clear_cache();
    rmdir(cache_dir);
    free(ref);
    llambda_model_free(cpu);
    return test_summary();
}
