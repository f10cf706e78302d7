/* Every fixture model, quant type and prompt: logits within the fixture README's
 * tolerance of llama.cpp's, the same greedy tokens, and (for text prompts) the same
 * prompt tokens from our tokenizer. */
#include "harness.h"
#include <math.h>
#include <dirent.h>

typedef struct ref { int n_vocab, n_prompt, n_tokens; int32_t tokens[512]; } ref;

static int parse_ref(const char *path, ref *r) {
    char *s = read_file(path, NULL);
    if (!s) return -1;
    char *p = strstr(s, "\"n_vocab\"");
    r->n_vocab = p ? atoi(strchr(p, ':') + 1) : 0;
    p = strstr(s, "\"n_prompt\"");
    r->n_prompt = p ? atoi(strchr(p, ':') + 1) : 0;
    p = strchr(strstr(s, "\"tokens\""), '[') + 1;
    r->n_tokens = 0;
    while (*p && *p != ']') {
        r->tokens[r->n_tokens++] = (int32_t)strtol(p, &p, 10);
        while (*p == ',' || *p == ' ') p++;
    }
    free(s);
    return 0;
}

static double nmse(const float *x, const float *ref, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) { double d = (double)x[i] - ref[i]; num += d * d; den += (double)ref[i] * ref[i]; }
    return den > 0 ? num / den : num;
}
static int argmax(const float *x, int n) { int b = 0; for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i; return b; }

/* kind: 0 = float file (NMSE <= tol every row), 1 = quantized (<= 2e-3, argmax >= 98%) */
static double float_tol = 1e-5;
static void check_model(const char *path, const char *dir_ref, const char *name, int kind, int n_batch) {
    llambda_model *m;
    /* LLAMBDA_TEST_BACKEND=cuda (or onnx, ...): every layer's projections on that backend,
     * held to the same tolerances (bench/gpu-check.sh) */
    const char *backend = getenv("LLAMBDA_TEST_BACKEND");
    llambda_model_params mp = llambda_model_default_params();
    if (backend && *backend) { mp.backends = backend; mp.offload_layers = "all"; }
    if (llambda_model_load(path, &mp, &m)) { CHECK(0, "load %s: %s", name, llambda_last_error()); return; }
    if (backend && *backend) CHECK(llambda_backend_count(m) == 1, "%s: backend '%s' did not load", name, backend);
    for (int pi = 0; pi < 3; pi++) {
        char rp[1024];
        ref r;
        snprintf(rp, sizeof rp, "%s/%s.p%d.json", dir_ref, name, pi);
        if (parse_ref(rp, &r)) continue;
        snprintf(rp, sizeof rp, "%s/%s.p%d.prompt.txt", dir_ref, name, pi);
        char *prompt = read_file(rp, NULL);
        if (strncmp(prompt, "tokens:", 7) != 0) {
            int32_t toks[1024];
            int n = llambda_tokenize(m, prompt, strlen(prompt), toks, 1024, true, true);
            int same = n == r.n_prompt;
            for (int i = 0; same && i < n; i++) same = toks[i] == r.tokens[i];
            CHECK(same, "%s p%d: prompt tokenizes differently (%d vs %d tokens)", name, pi, n, r.n_prompt);
        }
        free(prompt);
        snprintf(rp, sizeof rp, "%s/%s.p%d.logits.f32", dir_ref, name, pi);
        size_t sz = 0;
        float *lref = read_file(rp, &sz);
        int V = r.n_vocab, rows = (int)(sz / 4 / (size_t)V);
        llambda_context_params cp = llambda_context_default_params();
        cp.n_ctx = 1024; cp.logits = LLAMBDA_LOGITS_ALL; cp.n_batch = n_batch; cp.n_threads = 2;
        llambda_context *c;
        if (llambda_context_create(m, &cp, &c)) { CHECK(0, "ctx: %s", llambda_last_error()); free(lref); continue; }
        CHECK(llambda_eval(c, r.tokens, r.n_prompt) == LLAMBDA_OK, "eval: %s", llambda_last_error());
        double worst = 0;
        int agree = 0, within = 0;
        for (int i = 0; i < r.n_prompt; i++) {
            const float *lg = llambda_get_logits(c, i);
            double e = nmse(lg, lref + (size_t)i * V, V);
            if (e > worst) worst = e;
            agree += argmax(lg, V) == argmax(lref + (size_t)i * V, V);
            within += e <= (kind ? 2e-3 : float_tol);
            if (kind == 2 && e > 2e-3) continue;
        }
        /* generation: greedy, compared while tokens agree */
        int gen_ok = 1, g;
        double worst_gen = 0;
        for (g = 0; r.n_prompt + g < r.n_tokens; g++) {
            const float *lg = llambda_get_logits(c, -1);
            int32_t t = argmax(lg, V);
            if (t != r.tokens[r.n_prompt + g]) { gen_ok = 0; break; }
            if (r.n_prompt + g + 1 >= rows) break;
            llambda_eval(c, &t, 1);
            double e = nmse(llambda_get_logits(c, -1), lref + (size_t)(r.n_prompt + g) * V, V);
            if (e > worst_gen) worst_gen = e;
        }
        printf("  %-28s p%d rows %3d  worst NMSE %.2e  gen %.2e  argmax %d/%d  greedy %s (%d)\n", name, pi,
               r.n_prompt, worst, worst_gen, agree, r.n_prompt, gen_ok ? "same" : "DIFFERS", g);
        if (kind == 0) {
            CHECK(worst <= float_tol && worst_gen <= float_tol, "%s p%d: NMSE %.3g / %.3g > %g", name, pi, worst, worst_gen, float_tol);
            CHECK(gen_ok, "%s p%d: greedy tokens differ at step %d", name, pi, g);
        } else if (kind == 2) {
            /* chaotic files (routed experts + recurrent state, per the fixtures README):
             * at least 75% of prompt rows within NMSE 2e-3, argmax on at least 85% */
            CHECK(within * 100 >= 75 * r.n_prompt, "%s p%d: only %d of %d rows within NMSE 2e-3", name, pi, within, r.n_prompt);
            CHECK(agree * 100 >= 85 * r.n_prompt, "%s p%d: argmax agrees on %d of %d rows", name, pi, agree, r.n_prompt);
        } else {
            CHECK(within == r.n_prompt, "%s p%d: %d of %d rows over NMSE 2e-3 (worst %.3g)", name, pi, r.n_prompt - within, r.n_prompt, worst);
            CHECK(agree * 100 >= 98 * r.n_prompt, "%s p%d: argmax agrees on %d of %d rows", name, pi, agree, r.n_prompt);
            CHECK(worst_gen <= 2e-3, "%s p%d: generated rows NMSE %.3g", name, pi, worst_gen);
        }
        llambda_context_free(c);
        free(lref);
    }
    if (backend && *backend && llambda_backend_count(m) == 1) {
        llambda_backend_info bi;
        llambda_backend_info_get(m, 0, &bi);
        printf("  %-28s on %s: %d sessions, %ld runs, %ld failures\n", name, bi.device, bi.sessions, bi.runs, bi.failures);
        CHECK(bi.runs > 0 && bi.failures == 0, "%s: the backend ran %ld times, %ld failed", name, bi.runs, bi.failures);
    }
    llambda_model_free(m);
}

int main(int argc, char **argv) {
    int n_batch = argc > 1 ? atoi(argv[1]) : 512;
    static const char *models[] = {"tiny-llama31", "tiny-llama32-tied", "tiny-qwen25"};
    static const char *types[] = {"F32", "F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"};
    char dm[1024], dr[1024];
    snprintf(dm, sizeof dm, "%s", fixture("models"));
    snprintf(dr, sizeof dr, "%s", fixture("ref"));
    for (int i = 0; i < 3; i++)
        for (int t = 0; t < 7; t++) {
            char name[128], tn[160];
            snprintf(name, sizeof name, "%s-%s", models[i], types[t]);
            snprintf(tn, sizeof tn, "fixture logits %s", name);
            char path[1200];
            snprintf(path, sizeof path, "%s/%s.gguf", dm, name);
            TEST(tn) check_model(path, dr, name, t >= 2, n_batch);
        }
    char rm[1024], rr[1024];
    snprintf(rm, sizeof rm, "%s", fixture("real"));
    snprintf(rr, sizeof rr, "%s", fixture("real/ref"));
    TEST("fixture logits stories260K (real weights)") {
        /* ref files are named stories260K-F32; the model file is stories260K.gguf */
        char path[1200];
        snprintf(path, sizeof path, "%s/stories260K.gguf", rm);
        check_model(path, rr, "stories260K-F32", 0, n_batch);
    }
    /* gemma4 (archs/gemma4): F16 tolerance 3e-5 per the fixtures README */
    float_tol = 3e-5;
    static const char *g4[] = {"tiny-gemma4-F16", "tiny-gemma4-moe-F16", "tiny-gemma4-Q8_0", "tiny-gemma4-Q4_K_M", "tiny-gemma4-moe-Q4_K_M"};
    for (int i = 0; i < 5; i++) {
        char path[1200], tn[160], dir_ref[1024];
        snprintf(path, sizeof path, "%s/%s.gguf", fixture("archs/gemma4/models"), g4[i]);
        snprintf(dir_ref, sizeof dir_ref, "%s", fixture("archs/gemma4/ref"));
        snprintf(tn, sizeof tn, "fixture logits %s", g4[i]);
        TEST(tn) check_model(path, dir_ref, g4[i], i > 1, n_batch);
    }
    /* nemotron_h_moe: F16 strict (3e-5), quantized with experts: the chaotic criteria */
    static const char *nh[] = {"tiny-nemotron-h-moe-F16", "tiny-nemotron-h-moe-Q8_0", "tiny-nemotron-h-moe-Q4_K_M", "tiny-nemotron-h-moe-Q6_K"};
    for (int i = 0; i < 4; i++) {
        char path[1200], tn[160], dir_ref[1024];
        snprintf(path, sizeof path, "%s/%s.gguf", fixture("archs/nemotron_h_moe/models"), nh[i]);
        snprintf(dir_ref, sizeof dir_ref, "%s", fixture("archs/nemotron_h_moe/ref"));
        snprintf(tn, sizeof tn, "fixture logits %s", nh[i]);
        TEST(tn) check_model(path, dir_ref, nh[i], i > 0 ? 2 : 0, n_batch);
    }
    /* qwen3next: F16 strict (3e-5); quantized with experts and recurrent state: chaotic criteria */
    static const char *q3[] = {"tiny-qwen3next-F16", "tiny-qwen3next-Q8_0", "tiny-qwen3next-Q4_K_M", "tiny-qwen3next-Q6_K", "tiny-qwen3next-legacy-Q8_0"};
    for (int i = 0; i < 5; i++) {
        char path[1200], tn[160], dir_ref[1024];
        snprintf(path, sizeof path, "%s/%s.gguf", fixture("archs/qwen3next/models"), q3[i]);
        snprintf(dir_ref, sizeof dir_ref, "%s", fixture("archs/qwen3next/ref"));
        snprintf(tn, sizeof tn, "fixture logits %s", q3[i]);
        TEST(tn) check_model(path, dir_ref, q3[i], i > 0 ? 2 : 0, n_batch);
    }
    return test_summary();
}
