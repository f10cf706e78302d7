/* A minimal client of the installed library: load a model, render a prompt, stream a
 * greedy continuation. Build: cc generate.c $(pkg-config --cflags --libs llambda)
 * Usage: generate MODEL.gguf [PROMPT] */
#include <llambda.h>
#include <stdio.h>
#include <string.h>

static bool print_piece(int32_t tok, const char *text, int len, void *user) {
    (void)tok; (void)user;
    fwrite(text, 1, (size_t)len, stdout);
    return true;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s MODEL.gguf [PROMPT]\n", argv[0]); return 2; }
    const char *prompt = argc > 2 ? argv[2] : "Once upon a time";
    llambda_model *model;
    if (llambda_model_load(argv[1], NULL, &model) != LLAMBDA_OK) {
        fprintf(stderr, "load: %s\n", llambda_last_error());
        return 1;
    }
    llambda_context_params cp = llambda_context_default_params();
    cp.n_ctx = 256;
    cp.sampling.temperature = 0;   /* greedy */
    llambda_context *ctx;
    if (llambda_context_create(model, &cp, &ctx) != LLAMBDA_OK) {
        fprintf(stderr, "context: %s\n", llambda_last_error());
        llambda_model_free(model);
        return 1;
    }
    int32_t tokens[256];
    int n = llambda_tokenize(model, prompt, strlen(prompt), tokens, 256, true, true);
    if (n < 0 || n > 256) { fprintf(stderr, "tokenize failed\n"); return 1; }
    printf("%s", prompt);
    llambda_generate_result res;
    llambda_status st = llambda_generate(ctx, tokens, n, 48, NULL, 0, print_piece, NULL, &res);
    printf("\n");
    if (st != LLAMBDA_OK) fprintf(stderr, "generate: %s\n", llambda_last_error());
    else fprintf(stderr, "%d prompt tokens, %d generated (llambda %s, %s kernels)\n", res.n_prompt, res.n_generated, LLAMBDA_VERSION, llambda_isa());
    llambda_context_free(ctx);
    llambda_model_free(model);
    return st == LLAMBDA_OK ? 0 : 1;
}
