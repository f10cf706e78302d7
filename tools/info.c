/* `llambda info FILE` and `llambda tensor FILE NAME [-o OUT.f32]`. */
#include "cli.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_scalar(const llambda_gguf_value *v) {
    switch (v->type) {
    case LLAMBDA_GGUF_STRING: {
        printf("\"");
        uint64_t n = v->count < 120 ? v->count : 120;
        for (uint64_t i = 0; i < n; i++) {
            unsigned char c = v->data[i];
            if (c == '\n') printf("\\n");
            else if (c == '"') printf("\\\"");
            else if (c < 32) printf("\\x%02x", c);
            else putchar(c);
        }
        printf(v->count > 120 ? "\"... (%llu bytes)" : "\"", (unsigned long long)v->count);
        break;
    }
    case LLAMBDA_GGUF_F32: { float f; memcpy(&f, v->data, 4); printf("%.9g", f); break; }
    case LLAMBDA_GGUF_F64: { double f; memcpy(&f, v->data, 8); printf("%.17g", f); break; }
    case LLAMBDA_GGUF_BOOL: printf("%s", *v->data ? "true" : "false"); break;
    default: {
        /* integers: reuse the array accessor on a one-element view */
        llambda_gguf_value a = {LLAMBDA_GGUF_ARRAY, v->type, 1, v->data, v->raw, v->raw_bytes, NULL, 8};
        double d = llambda_gguf_arr_num(&a, 0);
        if (v->type == LLAMBDA_GGUF_U64) { uint64_t u; memcpy(&u, v->data, 8); printf("%llu", (unsigned long long)u); }
        else if (v->type == LLAMBDA_GGUF_I64) { int64_t u; memcpy(&u, v->data, 8); printf("%lld", (long long)u); }
        else printf("%.0f", d);
    }
    }
}

static void print_array(const llambda_gguf_value *v, int depth) {
    printf("[%s x %llu] ", llambda_gguf_vtype_name(v->elem_type), (unsigned long long)v->count);
    uint64_t show = v->count < 6 ? v->count : 6;
    printf("[");
    for (uint64_t i = 0; i < show; i++) {
        if (i) printf(", ");
        if (v->elem_type == LLAMBDA_GGUF_STRING) {
            llambda_gguf_str s = llambda_gguf_arr_str(v, i);
            llambda_gguf_value sv = {LLAMBDA_GGUF_STRING, 0, s.len, (const uint8_t *)s.ptr, NULL, 0, NULL, 8};
            print_scalar(&sv);
        } else if (v->elem_type == LLAMBDA_GGUF_ARRAY) {
            llambda_gguf_value sub = llambda_gguf_arr_value(v, i);
            if (depth < 3) print_array(&sub, depth + 1); else printf("...");
        } else {
            llambda_gguf_value sv = {v->elem_type, 0, 0, v->data, NULL, 0, NULL, 8};
            uint64_t sz = 0;
            switch (v->elem_type) { case 0: case 1: case 7: sz = 1; break; case 2: case 3: sz = 2; break;
                                    case 4: case 5: case 6: sz = 4; break; default: sz = 8; }
            sv.data = v->data + i * sz;
            print_scalar(&sv);
        }
    }
    printf(v->count > show ? ", ...]" : "]");
}

int cmd_info(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: llambda info FILE\n"); return 2; }
    llambda_gguf *g = llambda_gguf_open(argv[1]);
    if (!g) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return 1; }
    printf("file: %s\n", argv[1]);
    printf("GGUF version %u, %lld tensors, %lld metadata keys, alignment %u, data at byte %llu, file %llu bytes\n",
           llambda_gguf_version(g), (long long)llambda_gguf_n_tensors(g), (long long)llambda_gguf_n_kv(g),
           llambda_gguf_alignment(g), (unsigned long long)llambda_gguf_data_offset(g),
           (unsigned long long)llambda_gguf_file_size(g));
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < llambda_gguf_n_kv(g); i++) {
        const llambda_gguf_value *v = llambda_gguf_kv(g, i);
        printf("  %-44s %-6s ", llambda_gguf_key(g, i), llambda_gguf_vtype_name(v->type));
        if (v->type == LLAMBDA_GGUF_ARRAY) print_array(v, 0); else print_scalar(v);
        printf("\n");
    }
    printf("\ntensors:\n  %-40s %-7s %-24s %12s %12s\n", "name", "type", "shape", "offset", "bytes");
    uint64_t total_bytes = 0, total_elems = 0;
    for (int64_t i = 0; i < llambda_gguf_n_tensors(g); i++) {
        const llambda_gguf_tensor *t = llambda_gguf_tensor_at(g, i);
        char shape[64] = "";
        int o = 0;
        for (int d = 0; d < (t->n_dims ? t->n_dims : 1); d++)
            o += snprintf(shape + o, sizeof shape - (size_t)o, d ? " x %lld" : "%lld", (long long)t->ne[d]);
        printf("  %-40s %-7s %-24s %12llu %12llu\n", t->name, llambda_type_get(t->type)->name, shape,
               (unsigned long long)t->offset, (unsigned long long)t->nbytes);
        total_bytes += t->nbytes;
        total_elems += (uint64_t)llambda_tensor_nelements(t);
    }
    printf("\ntotal: %lld tensors, %llu elements, %llu bytes, %.3f bits per weight\n",
           (long long)llambda_gguf_n_tensors(g), (unsigned long long)total_elems, (unsigned long long)total_bytes,
           total_elems ? 8.0 * (double)total_bytes / (double)total_elems : 0.0);
    llambda_gguf_close(g);
    return 0;
}

int cmd_tensor(int argc, char **argv) {
    const char *out = NULL, *file = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!file) file = argv[i];
        else if (!name) name = argv[i];
        else { fprintf(stderr, "llambda tensor: unexpected argument '%s'\n", argv[i]); return 2; }
    }
    if (!file || !name) { fprintf(stderr, "usage: llambda tensor FILE NAME [-o OUT.f32]\n"); return 2; }
    llambda_gguf *g = llambda_gguf_open(file);
    if (!g) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return 1; }
    const llambda_gguf_tensor *t = llambda_gguf_find_tensor(g, name);
    if (!t) { fprintf(stderr, "llambda: %s: no tensor named '%s'\n", file, name); llambda_gguf_close(g); return 1; }
    const llambda_type_traits *tt = llambda_type_get(t->type);
    if (!tt->dequantize_row) {
        fprintf(stderr, "llambda: tensor '%s' has type %s, which llambda cannot dequantize\n", name, tt->name);
        llambda_gguf_close(g); return 1;
    }
    int64_t n = llambda_tensor_nelements(t);
    float *buf = malloc((size_t)(n ? n : 1) * sizeof *buf);
    if (!buf) { fprintf(stderr, "llambda: out of memory\n"); llambda_gguf_close(g); return 1; }
    int64_t rows = n / (t->ne[0] ? t->ne[0] : 1), row_bytes = llambda_type_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < rows && t->ne[0]; r++)
        tt->dequantize_row((const uint8_t *)t->data + r * row_bytes, buf + r * t->ne[0], t->ne[0]);
    int rc = 0;
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(buf, sizeof *buf, (size_t)n, f) != (size_t)n) { fprintf(stderr, "llambda: cannot write %s\n", out); rc = 1; }
        if (f && fclose(f)) rc = 1;
    } else {
        double mn = INFINITY, mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < n; i++) { mn = fmin(mn, buf[i]); mx = fmax(mx, buf[i]); sum += buf[i]; }
        printf("%s: %s [", name, tt->name);
        for (int d = 0; d < t->n_dims; d++) printf(d ? ", %lld" : "%lld", (long long)t->ne[d]);
        printf("], %lld elements\nmin %.6g  max %.6g  mean %.6g\nfirst:", (long long)n, mn, mx, n ? sum / (double)n : 0.0);
        for (int64_t i = 0; i < n && i < 8; i++) printf(" %.6g", buf[i]);
        printf("\n");
    }
    free(buf);
    llambda_gguf_close(g);
    return rc;
}
