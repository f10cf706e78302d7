/* A driver over llama.cpp's public C API (llama.h), for side-by-side checks only: it is
 * built by bench/crosscheck.sh against a llama.cpp build the user names, never by the
 * Makefile, and nothing of llama.cpp is in this repository.
 *
 *   llama-cpp-logits MODEL.gguf 3,6,9 OUT.f32     feed the tokens one at a time (2 threads)
 *                                                 and write each step's logits, float32 rows
 *   llama-cpp-logits --compare A.f32 B.f32 N_VOCAB
 *                                                 per-row NMSE of A against B, argmax agreement
 *
 * Environment: LLAMA_NO_REPACK=1 loads the weights without llama.cpp's repacked layouts. */
#include "llama.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *read_rows(const char *path, long n_vocab, long *rows) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); return NULL; }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    rewind(f);
    float *x = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (!x || fread(x, 1, (size_t)bytes, f) != (size_t)bytes) { fclose(f); free(x); return NULL; }
    fclose(f);
    *rows = bytes / 4 / n_vocab;
    return x;
}

static long argmax(const float *x, long n) {
    long b = 0;
    for (long i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static int compare(const char *pa, const char *pb, long n_vocab) {
    long ra, rb;
    float *a = read_rows(pa, n_vocab, &ra), *b = read_rows(pb, n_vocab, &rb);
    if (!a || !b || ra == 0) { fprintf(stderr, "llama-cpp-logits: cannot read %s or %s\n", pa, pb); return 1; }
    long rows = ra < rb ? ra : rb, agree = 0, first = -1;
    double worst = 0;
    int identical = ra == rb && memcmp(a, b, (size_t)rows * (size_t)n_vocab * 4) == 0;
    for (long r = 0; r < rows; r++) {
        const float *x = a + r * n_vocab, *y = b + r * n_vocab;
        double num = 0, den = 0;
        for (long i = 0; i < n_vocab; i++) { double d = (double)x[i] - y[i]; num += d * d; den += (double)y[i] * y[i]; }
        double e = den > 0 ? num / den : num;
        if (e > worst) worst = e;
        if (first < 0 && e > 1e-6) first = r;
        agree += argmax(x, n_vocab) == argmax(y, n_vocab);
    }
    printf("rows %ld  %s  worst NMSE %.2e  argmax %ld/%ld", rows, identical ? "byte-identical" : "differ", worst, agree, rows);
    if (first >= 0) printf("  (first row over 1e-6: %ld)", first);
    printf("\n");
    free(a);
    free(b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--compare")) return compare(argv[2], argv[3], atol(argv[4]));
    if (argc != 4) {
        fprintf(stderr, "usage: llama-cpp-logits MODEL.gguf TOKENS(comma-separated) OUT.f32\n"
                        "       llama-cpp-logits --compare A.f32 B.f32 N_VOCAB\n");
        return 2;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    if (getenv("LLAMA_NO_REPACK")) mp.use_extra_bufts = false;
    struct llama_model *m = llama_model_load_from_file(argv[1], mp);
    if (!m) { fprintf(stderr, "llama-cpp-logits: cannot load %s\n", argv[1]); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 1024;
    cp.n_threads = cp.n_threads_batch = 2;
    struct llama_context *c = llama_init_from_model(m, cp);
    FILE *f = c ? fopen(argv[3], "wb") : NULL;
    if (!f) { fprintf(stderr, "llama-cpp-logits: no context or cannot write %s\n", argv[3]); return 1; }
    int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(m)), rc = 0;
    for (char *p = argv[2]; *p && !rc;) {
        llama_token t = (llama_token)strtol(p, &p, 10);
        if (*p == ',') p++;
        if (llama_decode(c, llama_batch_get_one(&t, 1)) != 0) { fprintf(stderr, "llama-cpp-logits: decode failed\n"); rc = 1; break; }
        if (fwrite(llama_get_logits_ith(c, -1), 4, (size_t)n_vocab, f) != (size_t)n_vocab) rc = 1;
    }
    fclose(f);
    llama_free(c);
    llama_model_free(m);
    llama_backend_free();
    return rc;
}
