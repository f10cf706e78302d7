/* libFuzzer harness for the tokenizers, the detokenizers and the chat templates: any
 * bytes (invalid UTF-8, special-token text, NULs) must tokenize into ids of the
 * vocabulary, detokenize, stream and render without a crash. The vocabularies: the
 * bundled stories260K (SentencePiece) and, when the fixtures are there
 * ($LLAMBDA_FIXTURES or ../shared/fixtures), the byte-level BPE, SentencePiece and
 * Gemma 4 ones of tokenizer/. The first input byte picks the vocabulary and the flags. */
#include "llambda.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MODELS 8
static llambda_model *models[MAX_MODELS];
static int n_models;

static void load(const char *path) {
    llambda_model_params p = llambda_model_default_params();
    p.vocab_only = true;
    llambda_model *m = NULL;
    if (n_models < MAX_MODELS && llambda_model_load(path, &p, &m) == LLAMBDA_OK) models[n_models++] = m;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    load("models/stories260K.gguf");
    const char *fx = getenv("LLAMBDA_FIXTURES");
    const char *names[] = {"llama-bpe", "llama-spm", "qwen2", "gpt-2", "gemma4-tiny", "phi-3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-%s.gguf", fx ? fx : "../shared/fixtures", names[i]);
        load(path);
    }
    if (!n_models) { fprintf(stderr, "fuzz_tokenizer: no vocabulary loaded (run from the repository root)\n"); abort(); }
    fprintf(stderr, "fuzz_tokenizer: %d vocabularies\n", n_models);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const llambda_model *m = models[data[0] % n_models];
    bool add_special = data[0] & 0x10, parse_special = data[0] & 0x20;
    /* an exact-size copy, so the sanitizers catch a read past the end of the text */
    size_t len = size - 1;
    char *text = malloc(len ? len : 1);
    memcpy(text, data + 1, len);
    int n_vocab = llambda_model_n_vocab(m);
    int cap = 64;
    int32_t *tok = malloc(sizeof *tok * (size_t)cap);
    int n = llambda_tokenize(m, text, len, tok, cap, add_special, parse_special);
    if (n > cap) {   /* the count needed: the second call must fit exactly */
        cap = n;
        tok = realloc(tok, sizeof *tok * (size_t)cap);
        if (llambda_tokenize(m, text, len, tok, cap, add_special, parse_special) != n) abort();
    }
    if (n < 0) abort();
    for (int i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= n_vocab) abort();
    /* detokenize: a size query, then the text itself */
    int need = llambda_detokenize(m, tok, n, NULL, 0, data[0] & 1, data[0] & 2);
    if (need < 0) abort();
    char *out = malloc((size_t)need + 1);
    if (llambda_detokenize(m, tok, n, out, need + 1, data[0] & 1, data[0] & 2) != need) abort();
    char piece[64], stream_out[256 + 8];
    llambda_detok_stream st = {0};
    for (int i = 0; i < n; i++) {
        int k = llambda_token_to_piece(m, tok[i], piece, sizeof piece, data[0] & 4);
        if (k < 0) {   /* too long for the buffer: the size it asked for must be exact */
            char *big = malloc((size_t)-k);
            if (llambda_token_to_piece(m, tok[i], big, -k, data[0] & 4) != -k) abort();
            free(big);
        }
        if (llambda_detok_stream_push(m, &st, tok[i], stream_out, sizeof stream_out) < 0) abort();
    }
    /* the detokenized text through the <think> splitter, in pieces of 1..8 bytes */
    llambda_reasoning_split rs = {0};
    char *content_out = malloc((size_t)need + 32), *reasoning_out = malloc((size_t)need + 32);
    int n_content = 0, n_reasoning = 0;
    for (int at = 0; at < need;) {
        int step = 1 + (at + data[0]) % 8;
        if (step > need - at) step = need - at;
        int nc = 0, nr = 0;
        llambda_reasoning_feed(&rs, out + at, step, false, content_out + n_content, &nc, reasoning_out + n_reasoning, &nr);
        n_content += nc; n_reasoning += nr;
        if (nc < 0 || nr < 0 || n_content + n_reasoning > at + step) abort();
        at += step;
    }
    int nc = 0, nr = 0;
    llambda_reasoning_feed(&rs, NULL, 0, true, content_out + n_content, &nc, reasoning_out + n_reasoning, &nr);
    if (n_content + nc + n_reasoning + nr > need) abort();
    free(content_out); free(reasoning_out);
    /* the text as the user turn of every chat format (NUL-terminated: it is a C string) */
    char *content = malloc(len + 1);
    memcpy(content, text, len);
    content[len] = 0;
    llambda_chat_message msgs[2] = {{"system", "Be brief."}, {"user", content}};
    const char *formats[] = {NULL, "llama3", "chatml", "gemma"};
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        int r = llambda_chat_render(m, formats[f], msgs, 2, true, NULL, 0);
        if (r < 0) continue;   /* no template of its own and none named */
        char *buf = malloc((size_t)r + 1);
        if (llambda_chat_render(m, formats[f], msgs, 2, true, buf, r + 1) != r) abort();
        free(buf);
    }
    free(content); free(out); free(tok); free(text);
    return 0;
}
