/* libFuzzer harness for the model loaders: a fixture model of each architecture with its
 * header (metadata and tensor directory) edited by the input, loaded and, when it loads,
 * run for a few tokens. Any edit must load and run, or fail with a message; never crash,
 * never read out of bounds, never leak.
 *
 * The input picks a base file (first byte) and then XORs bytes of its header: each 4-byte
 * record is a 24-bit offset (modulo the header size) and the value to XOR there. The
 * tensor data is left alone: it is numbers, and the loaders validate structure. The file
 * lives in a memfd holding the base, so an input costs a few pwrites, not a copy. Fixture
 * directory: $LLAMBDA_FIXTURES or ../shared/fixtures. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "llambda.h"
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const base_names[] = {
    "models/tiny-llama31-Q4_K_M.gguf",
    "models/tiny-qwen25-Q8_0.gguf",
    "models/tiny-llama32-tied-Q4_0.gguf",
    "archs/gemma4/models/tiny-gemma4-moe-Q4_K_M.gguf",
    "archs/qwen3next/models/tiny-qwen3next-Q4_K_M.gguf",
    "archs/qwen3next/models/tiny-qwen3next-legacy-Q8_0.gguf",
    "archs/nemotron_h_moe/models/tiny-nemotron-h-moe-Q4_K_M.gguf",
};
enum { N_BASES = sizeof base_names / sizeof base_names[0], MAX_EDITS = 16 };

static struct {
    uint8_t *bytes;      /* the original file */
    size_t size, header; /* header: bytes before the first tensor's data */
    int fd;              /* memfd holding the file */
    char path[64];
} base[N_BASES];

static void die(const char *what, const char *name) {
    fprintf(stderr, "fuzz_model: %s: %s\n", what, name);
    exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    const char *dir = getenv("LLAMBDA_FIXTURES");
    if (!dir) dir = "../shared/fixtures";
    setenv("LLAMBDA_NO_CACHE", "1", 1);
    for (int b = 0; b < N_BASES; b++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, base_names[b]);
        FILE *f = fopen(path, "rb");
        if (!f) die("cannot open", path);
        fseek(f, 0, SEEK_END);
        base[b].size = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        base[b].bytes = malloc(base[b].size);
        if (!base[b].bytes || fread(base[b].bytes, 1, base[b].size, f) != base[b].size) die("cannot read", path);
        fclose(f);
        llambda_gguf *g = llambda_gguf_open_memory(base[b].bytes, base[b].size);
        if (!g) die("not a GGUF", path);
        size_t header = base[b].size;
        for (int64_t i = 0; i < llambda_gguf_n_tensors(g); i++) {
            size_t off = (size_t)((const uint8_t *)llambda_gguf_tensor_at(g, i)->data - base[b].bytes);
            if (off < header) header = off;
        }
        llambda_gguf_close(g);
        base[b].header = header;
        base[b].fd = memfd_create("fuzz_model", 0);
        if (base[b].fd < 0 || pwrite(base[b].fd, base[b].bytes, base[b].size, 0) != (ssize_t)base[b].size) die("memfd", path);
        snprintf(base[b].path, sizeof base[b].path, "/proc/self/fd/%d", base[b].fd);
    }
    return 0;
}

/* Load the edited file; when it loads, evaluate three tokens and read the logits. */
static void load_and_run(const char *path) {
    llambda_model_params mp = llambda_model_default_params();
    mp.n_threads = 1;
    llambda_model *m = NULL;
    if (llambda_model_load(path, &mp, &m) != LLAMBDA_OK) {
        if (!*llambda_last_error()) abort();   /* every failure must say why */
        return;
    }
    llambda_context_params cp = llambda_context_default_params();
    cp.n_ctx = 16;
    cp.n_threads = 1;
    llambda_context *c = NULL;
    if (llambda_context_create(m, &cp, &c) == LLAMBDA_OK) {
        int nv = llambda_model_n_vocab(m);
        int32_t toks[3] = {1 % nv, 2 % nv, (nv - 1) % nv};
        if (llambda_eval(c, toks, 3) == LLAMBDA_OK) {
            const float *lg = llambda_get_logits(c, -1);
            volatile float sink = 0;
            for (int i = 0; lg && i < nv; i++) sink += lg[i];
            (void)sink;
        } else if (!*llambda_last_error()) abort();
        llambda_context_free(c);
    } else if (!*llambda_last_error()) abort();
    llambda_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int b = data[0] % N_BASES;
    size_t n = (size - 1) / 4;
    if (n > MAX_EDITS) n = MAX_EDITS;
    size_t offs[MAX_EDITS];
    for (size_t e = 0; e < n; e++) {
        const uint8_t *r = data + 1 + 4 * e;
        size_t off = ((size_t)r[0] | (size_t)r[1] << 8 | (size_t)r[2] << 16) % base[b].header;
        uint8_t cur;
        if (pread(base[b].fd, &cur, 1, (off_t)off) != 1) abort();
        cur ^= r[3];
        if (pwrite(base[b].fd, &cur, 1, (off_t)off) != 1) abort();
        offs[e] = off;
    }
    load_and_run(base[b].path);
    for (size_t e = 0; e < n; e++)   /* restore the base */
        if (pwrite(base[b].fd, base[b].bytes + offs[e], 1, (off_t)offs[e]) != 1) abort();
    return 0;
}
