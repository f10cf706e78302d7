/* llama.cpp's tokenizer test vectors: every vocabulary, every string, token for token
 * (add_special = false, parse_special = false), and decoding gives the input back where
 * the tokenizer is lossless. */
#include "harness.h"

static void run_vocab(const char *name, int check_roundtrip) {
    char base[512];
    snprintf(base, sizeof base, "tokenizer/ggml-vocab-%s.gguf", name);
    const char *path = fixture(base);
    llambda_model *m = NULL;
    llambda_model_params mp = llambda_model_default_params();
    mp.vocab_only = true;
    if (llambda_model_load(path, &mp, &m)) { CHECK(0, "%s: %s", name, llambda_last_error()); return; }
    char p_inp[600], p_out[600];
    snprintf(p_inp, sizeof p_inp, "%s.inp", path);
    snprintf(p_out, sizeof p_out, "%s.out", path);
    size_t ni, no;
    char *inp = read_file(p_inp, &ni), *out = read_file(p_out, &no);
    CHECK(inp && out, "%s: missing .inp/.out", name);
    if (!inp || !out) { llambda_model_free(m); free(inp); free(out); return; }
    const char *sep = "\n__ggml_vocab_test__\n";
    char *ip = inp, *op = out;
    int n_tests = 0, n_ok = 0, n_rt = 0, n_rt_ok = 0;
    while (ip && *op) {
        char *next = strstr(ip, sep);
        size_t len = next ? (size_t)(next - ip) : strlen(ip);
        char *eol = strchr(op, '\n');
        if (!eol) eol = op + strlen(op);
        /* expected ids */
        int32_t want[4096]; int nw = 0;
        for (char *q = op; q < eol;) {
            while (q < eol && *q == ' ') q++;
            if (q >= eol) break;
            want[nw++] = (int32_t)strtol(q, &q, 10);
        }
        int32_t got[4096];
        int ng = llambda_tokenize(m, ip, len, got, 4096, false, false);
        int same = ng == nw;
        for (int i = 0; same && i < ng; i++) same = got[i] == want[i];
        n_tests++;
        if (same) n_ok++;
        else {
            printf("  %s: test %d \"%.*s\": got", name, n_tests, (int)(len < 40 ? len : 40), ip);
            for (int i = 0; i < ng && i < 12; i++) printf(" %d", got[i]);
            printf(" | want");
            for (int i = 0; i < nw && i < 12; i++) printf(" %d", want[i]);
            printf("\n");
        }
        if (check_roundtrip && same && ng > 0) {
            char buf[8192];
            int k = llambda_detokenize(m, got, ng, buf, sizeof buf, false, false);
            n_rt++;
            if (k == (int)len && !memcmp(buf, ip, len)) n_rt_ok++;
        }
        op = *eol ? eol + 1 : eol;
        if (!next) break;
        ip = next + strlen(sep);
        if (!*ip) break;
    }
    printf("  %s: %d/%d strings tokenized as llama.cpp; %d/%d decode back to the input\n", name, n_ok, n_tests, n_rt_ok, n_rt);
    CHECK(n_tests >= 40, "%s: only %d tests read", name, n_tests);
    CHECK(n_ok == n_tests, "%s: %d of %d strings differ", name, n_tests - n_ok, n_tests);
    if (check_roundtrip) CHECK(n_rt_ok * 10 >= n_rt * 9, "%s: only %d of %d round trips exact", name, n_rt_ok, n_rt);
    free(inp); free(out);
    llambda_model_free(m);
}

int main(void) {
    TEST("tokenizer llama-bpe (Llama 3)") run_vocab("llama-bpe", 1);
    TEST("tokenizer qwen2") run_vocab("qwen2", 1);
    TEST("tokenizer gpt-2") run_vocab("gpt-2", 1);
    TEST("tokenizer llama-spm (SentencePiece)") run_vocab("llama-spm", 1);
    TEST("tokenizer phi-3 (SentencePiece)") run_vocab("phi-3", 1);
    TEST("tokenizer gemma4") run_vocab("gemma4-tiny", 1);
    return test_summary();
}
