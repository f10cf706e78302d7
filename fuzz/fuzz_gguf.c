/* libFuzzer harness for the GGUF reader: any bytes must open cleanly or fail with a
 * message; an opened file is walked entirely (metadata, arrays, tensors, the vocabulary
 * loader) so every accessor sees hostile data too. */
#include "llambda.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy lets the sanitizers catch any read past the end */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    llambda_gguf *g = llambda_gguf_open_memory(copy, size);
    if (!g) {
        if (!*llambda_last_error()) abort();  /* every failure must say why */
        free(copy);
        return 0;
    }
    volatile double sink = 0;
    for (int64_t i = 0; i < llambda_gguf_n_kv(g); i++) {
        const llambda_gguf_value *v = llambda_gguf_kv(g, i);
        sink += (double)strlen(llambda_gguf_key(g, i));
        if (v->type != LLAMBDA_GGUF_ARRAY) continue;
        for (uint64_t k = 0; k < v->count && k < 64; k++) {
            if (v->elem_type == LLAMBDA_GGUF_STRING) sink += (double)llambda_gguf_arr_str(v, k).len;
            else if (v->elem_type == LLAMBDA_GGUF_ARRAY) {
                llambda_gguf_value e = llambda_gguf_arr_value(v, k);
                sink += (double)e.count;
                if (e.count && e.elem_type == LLAMBDA_GGUF_STRING) sink += (double)llambda_gguf_arr_str(&e, 0).len;
            } else sink += llambda_gguf_arr_num(v, k);
        }
    }
    for (int64_t i = 0; i < llambda_gguf_n_tensors(g); i++) {
        const llambda_gguf_tensor *t = llambda_gguf_tensor_at(g, i);
        if (t->nbytes) sink += ((const uint8_t *)t->data)[t->nbytes - 1];
        if (llambda_gguf_find_tensor(g, t->name) != t) abort();
    }
    (void)sink;
    llambda_gguf_close(g);
    free(copy);
    return 0;
}
