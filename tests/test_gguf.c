/* GGUF reader and writer: fixtures open with the right tensors, the writer round-trips
 * every value type, and hostile or truncated files fail with a message naming the
 * problem (never a crash, hang or huge allocation — run under ASan/UBSan in CI). */
#include "harness.h"
#include <dirent.h>
#include <stdint.h>

/* ------------------------------------------------------------------ byte builder */
typedef struct buf { uint8_t *p; size_t n, cap; } buf;
static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) { b->cap = (b->n + n) * 2 + 64; b->p = realloc(b->p, b->cap); }
    memcpy(b->p + b->n, d, n); b->n += n;
}
static void u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void i32(buf *b, int32_t v) { put(b, &v, 4); }
static void u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void str(buf *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void header(buf *b, uint32_t version, int64_t nt, int64_t nkv) { u32(b, 0x46554747); u32(b, version); u64(b, (uint64_t)nt); u64(b, (uint64_t)nkv); }
static void kv_u32(buf *b, const char *k, uint32_t v) { str(b, k); i32(b, 4); u32(b, v); }
static void tinfo(buf *b, const char *name, uint32_t nd, const int64_t *ne, int32_t type, uint64_t off) {
    str(b, name); u32(b, nd); for (uint32_t i = 0; i < nd; i++) u64(b, (uint64_t)ne[i]); i32(b, type); u64(b, off);
}
static void pad(buf *b, size_t a) { uint8_t z = 0; while (b->n % a) put(b, &z, 1); }

/* Open from memory and expect failure whose message contains `want`. */
static void expect_fail(const char *what, buf *b, const char *want) {
    llambda_gguf *g = llambda_gguf_open_memory(b->p, b->n);
    CHECK(!g, "%s: opened but should fail", what);
    if (g) { llambda_gguf_close(g); return; }
    CHECK(strstr(llambda_last_error(), want) != NULL, "%s: message '%s' lacks '%s'", what, llambda_last_error(), want);
}

static void test_hostile(void) {
    buf b = {0};
    int64_t ne2[2] = {32, 2};
#define RESET() (b.n = 0)
    RESET(); put(&b, "GGUX", 4); u32(&b, 3); u64(&b, 0); u64(&b, 0); expect_fail("bad magic", &b, "bad magic");
    RESET(); header(&b, 0, 0, 0); expect_fail("version 0", &b, "version 0");
    RESET(); header(&b, 4, 0, 0); expect_fail("version 4", &b, "version 4");
    RESET(); header(&b, 0x03000000, 0, 0); expect_fail("other byte order", &b, "byte order");
    RESET(); put(&b, "GGUF", 4); expect_fail("short header", &b, "too short");
    RESET(); header(&b, 3, -1, 0); expect_fail("negative tensor count", &b, "negative tensor count");
    RESET(); header(&b, 3, 0, INT64_MAX); expect_fail("absurd kv count", &b, "cannot fit");
    RESET(); header(&b, 3, INT64_MAX / 2, 0); expect_fail("absurd tensor count", &b, "cannot fit");
    RESET(); header(&b, 3, 0, 1); u64(&b, 1ull << 40); u64(&b, 0); expect_fail("key length past EOF", &b, "past the end");
    RESET(); header(&b, 3, 0, 1); str(&b, "k"); i32(&b, 77); u32(&b, 0); expect_fail("bad value type", &b, "bad value type");
    RESET(); header(&b, 3, 0, 1); str(&b, "k"); i32(&b, 8); u64(&b, 1000); expect_fail("string past EOF", &b, "past the end");
    RESET(); header(&b, 3, 0, 1); str(&b, "k"); i32(&b, 9); i32(&b, 4); u64(&b, 1ull << 60); expect_fail("array past EOF", &b, "runs past the end");
    RESET(); header(&b, 3, 0, 1); str(&b, "k"); i32(&b, 9); i32(&b, 8); u64(&b, 1ull << 40); expect_fail("string array count", &b, "cannot fit");
    RESET(); header(&b, 3, 0, 1); str(&b, "k"); i32(&b, 9); i32(&b, 42); u64(&b, 1); expect_fail("bad array elem type", &b, "element type");
    RESET(); header(&b, 3, 0, 1); str(&b, "k"); i32(&b, 9);
    for (int d = 0; d < 8; d++) { i32(&b, 9); u64(&b, 1); } /* 8 levels of arrays */
    i32(&b, 0); u64(&b, 1); u32(&b, 0); expect_fail("arrays nested too deep", &b, "nested deeper");
    RESET(); header(&b, 3, 0, 2); kv_u32(&b, "a.b", 1); kv_u32(&b, "a.b", 2); expect_fail("duplicate key", &b, "duplicate key");
    RESET(); header(&b, 3, 0, 1); str(&b, "general.alignment"); i32(&b, 4); u32(&b, 48); expect_fail("alignment not pow2", &b, "power of two");
    RESET(); header(&b, 3, 0, 1); str(&b, "general.alignment"); i32(&b, 5); i32(&b, 32); expect_fail("alignment wrong type", &b, "must be u32");
    RESET(); header(&b, 3, 1, 0); tinfo(&b, "t", 5, (int64_t[]){1, 1, 1, 1, 1}, 0, 0); expect_fail("5 dims", &b, "dimensions");
    RESET(); header(&b, 3, 1, 0); tinfo(&b, "t", 2, (int64_t[]){-3, 1}, 0, 0); expect_fail("negative dim", &b, "negative dimension");
    RESET(); header(&b, 3, 1, 0); tinfo(&b, "t", 2, ne2, 4, 0); expect_fail("removed type id", &b, "unknown tensor type");
    RESET(); header(&b, 3, 1, 0); tinfo(&b, "t", 2, ne2, 99, 0); expect_fail("unknown type id", &b, "unknown tensor type");
    RESET(); header(&b, 3, 1, 0); tinfo(&b, "t", 2, (int64_t[]){33, 1}, 8, 0); expect_fail("row not multiple of block", &b, "multiple of the block");
    RESET(); header(&b, 3, 1, 0); tinfo(&b, "t", 4, (int64_t[]){1ll << 40, 1ll << 40, 1ll << 40, 4}, 0, 0); expect_fail("dims overflow", &b, "overflows");
    RESET(); header(&b, 3, 1, 0); tinfo(&b, "t", 2, ne2, 0, 0); pad(&b, 32); expect_fail("data outside file", &b, "outside the file");
    RESET(); header(&b, 3, 1, 0); tinfo(&b, "t", 2, ne2, 0, 8); pad(&b, 32); for (int i = 0; i < 80; i++) u32(&b, 0); expect_fail("misaligned offset", &b, "not aligned");
    RESET(); header(&b, 3, 2, 0); tinfo(&b, "t", 2, ne2, 0, 0); tinfo(&b, "t", 2, ne2, 0, 256); pad(&b, 32); for (int i = 0; i < 200; i++) u32(&b, 0); expect_fail("duplicate tensor", &b, "duplicate tensor");
    RESET(); header(&b, 3, 1, 0); { char nm[80]; memset(nm, 'x', 79); nm[79] = 0; tinfo(&b, nm, 2, ne2, 0, 0); } expect_fail("long name", &b, "at most 63");
    /* the messages name where: byte offset and key/tensor */
    RESET(); header(&b, 3, 0, 1); str(&b, "my.key"); i32(&b, 8); u64(&b, 1000);
    llambda_gguf *g = llambda_gguf_open_memory(b.p, b.n);
    CHECK(!g && strstr(llambda_last_error(), "my.key") && strstr(llambda_last_error(), "byte "), "message lacks key and offset: %s", llambda_last_error());
    free(b.p);
}

/* Truncating a real file anywhere before its end must fail cleanly. */
static void test_truncation(void) {
    size_t n;
    uint8_t *f = read_file(fixture("models/tiny-qwen25-Q4_K_M.gguf"), &n);
    CHECK(f != NULL, "fixture missing");
    if (!f) return;
    llambda_gguf *g = llambda_gguf_open_memory(f, n);
    CHECK(g != NULL, "full file must open: %s", llambda_last_error());
    uint64_t data = g ? llambda_gguf_data_offset(g) : 0;
    llambda_gguf_close(g);
    int bad = 0;
    for (uint64_t cut = 0; cut < data + 64; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);   /* exact size so ASan sees any overread */
        memcpy(copy, f, cut);
        llambda_gguf *t = llambda_gguf_open_memory(copy, cut);
        if (t) { bad++; llambda_gguf_close(t); }
        else if (!*llambda_last_error()) bad++;
        free(copy);
    }
    CHECK(bad == 0, "%d truncated prefixes opened or failed silently", bad);
    printf("  truncated tiny-qwen25-Q4_K_M at every offset 0..%llu: all rejected with a message\n", (unsigned long long)data + 63);
    free(f);
}

static void test_fixtures_open(void) {
    const char *dirs[] = {"models", "real", "tokenizer", "archs/gemma4/models", "archs/qwen3next/models", "archs/nemotron_h_moe/models"};
    int opened = 0;
    for (int d = 0; d < 6; d++) {
        DIR *dir = opendir(fixture(dirs[d]));
        if (!dir) continue;
        struct dirent *e;
        while ((e = readdir(dir))) {
            size_t l = strlen(e->d_name);
            if (l < 5 || strcmp(e->d_name + l - 5, ".gguf")) continue;
            char rel[512];
            snprintf(rel, sizeof rel, "%s/%s", dirs[d], e->d_name);
            llambda_gguf *g = llambda_gguf_open(fixture(rel));
            CHECK(g != NULL, "%s: %s", rel, llambda_last_error());
            if (g) opened++;
            llambda_gguf_close(g);
        }
        closedir(dir);
    }
    printf("  %d fixture GGUF files opened\n", opened);
    CHECK(opened >= 40, "only %d fixtures opened", opened);
    /* shapes and counts of known models */
    struct { const char *f; int n_tensors; const char *t; int64_t ne0, ne1; } cases[] = {
        {"models/tiny-llama31-Q4_K_M.gguf", 31, "blk.2.attn_k.weight", 256, 128},
        {"models/tiny-llama32-tied-F16.gguf", 30, "blk.0.ffn_down.weight", 768, 256},
        {"models/tiny-qwen25-Q8_0.gguf", 38, "blk.1.attn_q.bias", 256, 1},
        {"real/stories260K.gguf", 48, "token_embd.weight", 64, 512},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        llambda_gguf *g = llambda_gguf_open(fixture(cases[i].f));
        if (!g) { CHECK(0, "%s", llambda_last_error()); continue; }
        CHECK(llambda_gguf_n_tensors(g) == cases[i].n_tensors, "%s: %lld tensors", cases[i].f, (long long)llambda_gguf_n_tensors(g));
        const llambda_gguf_tensor *t = llambda_gguf_find_tensor(g, cases[i].t);
        CHECK(t && t->ne[0] == cases[i].ne0 && t->ne[1] == cases[i].ne1, "%s: %s shape", cases[i].f, cases[i].t);
        llambda_gguf_close(g);
    }
}

/* An array of W arrays of W arrays of W string arrays (3 strings each): every element found
 * where it is, each one's raw bytes ending where the next begins. Sizing an element by
 * walking to it again, as the reader once did, made this (and a fuzzed file) take minutes. */
static void nested_level(buf *b, int depth, int W, int *label) {
    if (depth == 3) {
        i32(b, LLAMBDA_GGUF_STRING); u64(b, 3);
        for (int m = 0; m < 3; m++) { char t[16]; snprintf(t, sizeof t, "s%d", (*label)++); str(b, t); }
        return;
    }
    i32(b, LLAMBDA_GGUF_ARRAY); u64(b, (uint64_t)W);
    for (int k = 0; k < W; k++) nested_level(b, depth + 1, W, label);
}

static void test_nested_wide(void) {
    enum { W = 24 };
    buf b = {0};
    put(&b, "GGUF", 4); u32(&b, 3); u64(&b, 0); u64(&b, 1);
    str(&b, "deep"); i32(&b, LLAMBDA_GGUF_ARRAY);
    int label = 0;
    nested_level(&b, 0, W, &label);
    llambda_gguf *g = llambda_gguf_open_memory(b.p, b.n);
    CHECK(g != NULL, "open: %s", llambda_last_error());
    if (!g) { free(b.p); return; }
    const llambda_gguf_value *top = llambda_gguf_get(g, "deep");
    int bad = 0, want = 0;
    for (uint64_t i = 0; top && i < W && !bad; i++) {
        llambda_gguf_value a = llambda_gguf_arr_value(top, i);
        if (i + 1 < W && a.raw + a.raw_bytes != llambda_gguf_arr_value(top, i + 1).raw) bad = 1;
        for (uint64_t j = 0; j < W && !bad; j++) {
            llambda_gguf_value c = llambda_gguf_arr_value(&a, j);
            if (j + 1 < W && c.raw + c.raw_bytes != llambda_gguf_arr_value(&a, j + 1).raw) bad = 2;
            for (uint64_t k = 0; k < W && !bad; k++) {
                llambda_gguf_value d = llambda_gguf_arr_value(&c, k);
                for (uint64_t m = 0; m < 3 && !bad; m++) {
                    char t[16];
                    snprintf(t, sizeof t, "s%d", want++);
                    llambda_gguf_str sv = llambda_gguf_arr_str(&d, m);
                    if (d.count != 3 || sv.len != strlen(t) || memcmp(sv.ptr, t, sv.len)) bad = 3;
                }
            }
        }
    }
    CHECK(top && top->count == W && !bad && want == label, "nested walk: check %d failed at string %d of %d", bad, want, label);
    if (top) {
        llambda_gguf_value last = llambda_gguf_arr_value(top, W - 1);
        CHECK(last.raw + last.raw_bytes == b.p + b.n, "the last element does not end where the file does");
    }
    llambda_gguf_close(g);
    free(b.p);
}

static void test_writer_roundtrip(void) {
    llambda_gguf_writer *w = llambda_gguf_writer_new();
    llambda_gguf_writer_set_alignment(w, 64);
    llambda_gguf_set_u32(w, "a.u32", 123456789u);
    llambda_gguf_set_i32(w, "a.i32", -42);
    llambda_gguf_set_f32(w, "a.f32", 3.25f);
    llambda_gguf_set_bool(w, "a.bool", true);
    llambda_gguf_set_str(w, "a.str", "héllo\nworld");
    int16_t i16[3] = {-1, 2, -3};
    llambda_gguf_set_arr(w, "a.arr_i16", LLAMBDA_GGUF_I16, i16, 3);
    double f64[2] = {1.5, -2.25};
    llambda_gguf_set_arr(w, "a.arr_f64", LLAMBDA_GGUF_F64, f64, 2);
    const char *strs[] = {"x", "", "zz"};
    llambda_gguf_set_arr_str(w, "a.arr_str", strs, 3);
    /* a nested array (array of two u8 arrays), written from raw bytes */
    buf nb = {0};
    i32(&nb, LLAMBDA_GGUF_ARRAY); u64(&nb, 2);
    i32(&nb, LLAMBDA_GGUF_U8); u64(&nb, 2); put(&nb, "\x01\x02", 2);
    i32(&nb, LLAMBDA_GGUF_STRING); u64(&nb, 1); str(&nb, "in");
    llambda_gguf_value nv = {LLAMBDA_GGUF_ARRAY, 0, 0, NULL, nb.p, nb.n, NULL, 8};
    llambda_gguf_set_value(w, "a.nested", &nv);
    float data[64 * 3];
    for (int i = 0; i < 64 * 3; i++) data[i] = (float)i * 0.5f - 7;
    uint8_t q8[2 * 34 * 3];
    llambda_type_get(LLAMBDA_TYPE_Q8_0)->quantize_row(data, q8, 64 * 3);
    CHECK(llambda_gguf_add_tensor(w, "t.f32", LLAMBDA_TYPE_F32, 2, (int64_t[]){64, 3}, data) == LLAMBDA_OK, "add f32");
    CHECK(llambda_gguf_add_tensor(w, "t.q8", LLAMBDA_TYPE_Q8_0, 2, (int64_t[]){64, 3}, q8) == LLAMBDA_OK, "add q8");
    CHECK(llambda_gguf_add_tensor(w, "t.q8", LLAMBDA_TYPE_Q8_0, 2, (int64_t[]){64, 3}, q8) != LLAMBDA_OK, "duplicate tensor accepted");
    const char *p1 = "/tmp/llambda_rt1.gguf", *p2 = "/tmp/llambda_rt2.gguf";
    CHECK(llambda_gguf_writer_write(w, p1) == LLAMBDA_OK, "write: %s", llambda_last_error());
    llambda_gguf_writer_free(w);
    llambda_gguf *g = llambda_gguf_open(p1);
    CHECK(g != NULL, "reopen: %s", llambda_last_error());
    if (!g) { free(nb.p); return; }
    CHECK(llambda_gguf_alignment(g) == 64 && llambda_gguf_data_offset(g) % 64 == 0, "alignment");
    CHECK(llambda_gguf_get_u32(g, "a.u32", 0) == 123456789u, "u32");
    CHECK(llambda_gguf_get_i32(g, "a.i32", 0) == -42, "i32");
    CHECK(llambda_gguf_get_f32(g, "a.f32", 0) == 3.25f, "f32");
    CHECK(llambda_gguf_get_bool(g, "a.bool", false), "bool");
    CHECK(!strcmp(llambda_gguf_get_str(g, "a.str", ""), "héllo\nworld"), "str");
    CHECK(llambda_gguf_get_u32(g, "a.i32", 7) == 7, "typed getter must reject wrong type");
    CHECK(llambda_gguf_get_u32(g, "missing", 9) == 9, "default");
    const llambda_gguf_value *a = llambda_gguf_get(g, "a.arr_i16");
    CHECK(a && a->count == 3 && llambda_gguf_arr_num(a, 2) == -3, "i16 array");
    a = llambda_gguf_get(g, "a.arr_f64");
    CHECK(a && llambda_gguf_arr_num(a, 1) == -2.25, "f64 array");
    a = llambda_gguf_get(g, "a.arr_str");
    llambda_gguf_str s2 = llambda_gguf_arr_str(a, 2), s1 = llambda_gguf_arr_str(a, 1);
    CHECK(s2.len == 2 && !memcmp(s2.ptr, "zz", 2) && s1.len == 0, "string array");
    a = llambda_gguf_get(g, "a.nested");
    CHECK(a && a->elem_type == LLAMBDA_GGUF_ARRAY && a->count == 2, "nested array");
    if (a) {
        llambda_gguf_value e0 = llambda_gguf_arr_value(a, 0), e1 = llambda_gguf_arr_value(a, 1);
        CHECK(e0.count == 2 && llambda_gguf_arr_num(&e0, 1) == 2, "nested element 0");
        llambda_gguf_str in = llambda_gguf_arr_str(&e1, 0);
        CHECK(e1.elem_type == LLAMBDA_GGUF_STRING && in.len == 2 && !memcmp(in.ptr, "in", 2), "nested element 1");
    }
    const llambda_gguf_tensor *t = llambda_gguf_find_tensor(g, "t.q8");
    CHECK(t && t->nbytes == sizeof q8 && !memcmp(t->data, q8, sizeof q8), "tensor bytes");
    /* copy everything into a second file: byte-identical */
    llambda_gguf_writer *w2 = llambda_gguf_writer_new();
    for (int64_t i = 0; i < llambda_gguf_n_kv(g); i++) llambda_gguf_set_value(w2, llambda_gguf_key(g, i), llambda_gguf_kv(g, i));
    llambda_gguf_writer_set_alignment(w2, llambda_gguf_alignment(g));
    for (int64_t i = 0; i < llambda_gguf_n_tensors(g); i++) {
        const llambda_gguf_tensor *ti = llambda_gguf_tensor_at(g, i);
        llambda_gguf_add_tensor(w2, ti->name, ti->type, ti->n_dims, ti->ne, ti->data);
    }
    CHECK(llambda_gguf_writer_write(w2, p2) == LLAMBDA_OK, "write copy");
    llambda_gguf_writer_free(w2);
    size_t n1, n2;
    char *b1 = read_file(p1, &n1), *b2 = read_file(p2, &n2);
    CHECK(b1 && b2 && n1 == n2 && !memcmp(b1, b2, n1), "copy differs (%zu vs %zu bytes)", n1, n2);
    free(b1); free(b2);
    llambda_gguf_close(g);
    free(nb.p);
    remove(p1); remove(p2);
}

/* The checked-in corpus (fuzz/corpus): bad_* must be rejected with a message, good_* open. */
static void test_corpus(void) {
    DIR *dir = opendir("fuzz/corpus");
    CHECK(dir != NULL, "fuzz/corpus missing (run from the project root)");
    if (!dir) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.') continue;
        char path[600];
        snprintf(path, sizeof path, "fuzz/corpus/%s", e->d_name);
        size_t sz = 0;
        uint8_t *b = read_file(path, &sz);
        uint8_t *copy = malloc(sz ? sz : 1);
        memcpy(copy, b, sz);
        llambda_gguf *g = llambda_gguf_open_memory(copy, sz);
        if (!strncmp(e->d_name, "bad_", 4)) CHECK(!g && *llambda_last_error(), "%s: accepted", e->d_name);
        else CHECK(g != NULL, "%s: %s", e->d_name, llambda_last_error());
        llambda_gguf_close(g);
        free(copy); free(b);
        n++;
    }
    closedir(dir);
    printf("  %d corpus files checked\n", n);
    CHECK(n >= 20, "corpus has only %d files", n);
}

int main(void) {
    TEST("gguf: the malformed corpus is rejected, the good seeds open") test_corpus();
    TEST("gguf: every fixture opens with the expected tensors") test_fixtures_open();
    TEST("gguf: arrays nested four deep and wide are read element by element (contents, sizes, in linear time)") test_nested_wide();
    TEST("gguf: writer round trip of every value type, nested arrays, alignment") test_writer_roundtrip();
    TEST("gguf: hostile headers fail with a message naming the problem") test_hostile();
    TEST("gguf: a fixture truncated at every header offset is rejected") test_truncation();
    return test_summary();
}
