/* Reentrant contexts: four threads, each with its own context and prompt on one shared
 * model, run at the same time and give bitwise the same logits and tokens as the same
 * prompts run one after another — with per-context pools and with the model's shared
 * pool. Run under ThreadSanitizer in CI. */
#include "harness.h"
#include <pthread.h>

#define N_WORKERS 4
#define N_GEN 12

typedef struct job {
    llambda_model *m;
    int shared, threads;
    int32_t prompt[16]; int n_prompt;
    int32_t out[N_GEN];
    float *logits;   /* last logits after generation */
    int ok;
} job;

static void *run(void *arg) {
    job *j = arg;
    llambda_context_params p = llambda_context_default_params();
    p.n_ctx = 64; p.n_threads = j->threads; p.shared_pool = j->shared;
    p.sampling.temperature = 0.8f; p.sampling.seed = 7 + (uint64_t)j->prompt[0];
    llambda_context *c;
    if (llambda_context_create(j->m, &p, &c)) return NULL;
    int V = llambda_model_n_vocab(j->m);
    j->ok = llambda_eval(c, j->prompt, j->n_prompt) == LLAMBDA_OK;
    for (int g = 0; g < N_GEN && j->ok; g++) {
        j->out[g] = llambda_sample(c);
        j->ok = llambda_eval(c, &j->out[g], 1) == LLAMBDA_OK;
    }
    j->logits = malloc((size_t)V * 4);
    if (j->ok) memcpy(j->logits, llambda_get_logits(c, -1), (size_t)V * 4);
    llambda_context_free(c);
    return NULL;
}

static void check_with(const char *model, int shared, const char *backends) {
    llambda_model *m;
    llambda_model_params mp = llambda_model_default_params();
    if (backends) { mp.backends = backends; mp.offload_layers = "all"; }
    if (llambda_model_load(fixture(model), &mp, &m)) { CHECK(0, "%s", llambda_last_error()); return; }
    int V = llambda_model_n_vocab(m);
    job seq[N_WORKERS], par[N_WORKERS];
    for (int w = 0; w < N_WORKERS; w++) {
        memset(&seq[w], 0, sizeof seq[w]);
        seq[w].m = m; seq[w].shared = shared; seq[w].threads = 1 + w % 2;
        seq[w].n_prompt = 6 + w;
        for (int i = 0; i < seq[w].n_prompt; i++) seq[w].prompt[i] = (int32_t)((w * 97 + i * 13 + 5) % 1000);
        par[w] = seq[w];
    }
    for (int w = 0; w < N_WORKERS; w++) run(&seq[w]);
    pthread_t th[N_WORKERS];
    for (int w = 0; w < N_WORKERS; w++) pthread_create(&th[w], NULL, run, &par[w]);
    for (int w = 0; w < N_WORKERS; w++) pthread_join(th[w], NULL);
    for (int w = 0; w < N_WORKERS; w++) {
        CHECK(seq[w].ok && par[w].ok, "worker %d failed: %s", w, llambda_last_error());
        CHECK(!memcmp(seq[w].out, par[w].out, sizeof seq[w].out), "worker %d: tokens differ", w);
        CHECK(seq[w].logits && par[w].logits && !memcmp(seq[w].logits, par[w].logits, (size_t)V * 4), "worker %d: logits differ", w);
        free(seq[w].logits); free(par[w].logits);
    }
    if (backends) {
        llambda_backend_info bi;
        CHECK(llambda_backend_info_get(m, 0, &bi) == LLAMBDA_OK && bi.runs > 0 && bi.failures == 0, "the backend ran");
    }
    llambda_model_free(m);
}

static void check(const char *model, int shared) { check_with(model, shared, NULL); }

int main(void) {
    setenv("LLAMBDA_NO_CACHE", "1", 1);
    TEST("concurrency: 4 contexts through shared accelerator sessions, match sequential runs bitwise")
        check_with("models/tiny-llama31-Q8_0.gguf", 0, "test");
    TEST("concurrency: 4 contexts on one model, own pools, match sequential runs bitwise") check("models/tiny-llama31-Q4_K_M.gguf", 0);
    TEST("concurrency: 4 contexts sharing the model's pool, match sequential runs bitwise") check("models/tiny-qwen25-Q8_0.gguf", 1);
    return test_summary();
}
