/* GGUF reader and writer.
 *
 * The reader maps the file and walks header, metadata and tensor infos once, checking
 * every count, length, offset and size against the file with overflow-safe arithmetic.
 * Allocations are bounded by the file size (each parsed item consumes file bytes), so a
 * hostile header cannot request a huge allocation. Tensor data is never touched. */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define GGUF_MAGIC 0x46554747u
#define GGUF_MAX_DEPTH 4
#define GGUF_MAX_NAME 63

static const int vtype_size[LLAMBDA_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const vtype_names[LLAMBDA_GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

const char *llambda_gguf_vtype_name(int t) {
    return t >= 0 && t < LLAMBDA_GGUF_VTYPE_COUNT ? vtype_names[t] : "?";
}

typedef struct hash_table { int64_t *slots; uint64_t mask; } hash_table;

struct llambda_gguf {
    ll_mapping map;
    const uint8_t *base;
    uint64_t size;
    uint32_t version, alignment;
    uint64_t data_offset;
    int64_t n_kv, n_tensors;
    char **keys;                 /* NUL-terminated copies */
    llambda_gguf_value *vals;
    char **strs;                 /* NUL-terminated copies of string values */
    llambda_gguf_tensor *tensors;
    char **tensor_names;
    uint64_t **indices; int64_t n_indices; /* element indices owned by the handle */
    hash_table key_hash, tensor_hash;
};

/* ------------------------------------------------------------------ hashing */

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) { h ^= (uint8_t)*s; h *= 1099511628211ull; }
    return h;
}

static int hash_init(hash_table *t, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    t->slots = malloc(cap * sizeof *t->slots);
    if (!t->slots) return -1;
    for (uint64_t i = 0; i < cap; i++) t->slots[i] = -1;
    t->mask = cap - 1;
    return 0;
}

/* Returns the index stored for name, or inserts idx and returns -1. */
static int64_t hash_insert(hash_table *t, char *const *names, const char *name, int64_t idx) {
    for (uint64_t h = fnv1a(name) & t->mask;; h = (h + 1) & t->mask) {
        if (t->slots[h] < 0) { t->slots[h] = idx; return -1; }
        if (strcmp(names[t->slots[h]], name) == 0) return t->slots[h];
    }
}

static int64_t hash_find(const hash_table *t, char *const *names, const char *name) {
    if (!t->slots) return -1;
    for (uint64_t h = fnv1a(name) & t->mask;; h = (h + 1) & t->mask) {
        if (t->slots[h] < 0) return -1;
        if (strcmp(names[t->slots[h]], name) == 0) return t->slots[h];
    }
}

/* ------------------------------------------------------------------ parser */

typedef struct parser {
    llambda_gguf *g;
    int v1;             /* GGUF v1: lengths, counts and dims are 32-bit */
    uint64_t pos;
    const char *what;   /* the key or tensor being parsed, for messages */
    llambda_status err;
} parser;

static int fail(parser *p, const char *fmt, ...) LL_PRINTF(2, 3);
static int fail(parser *p, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (p->what) ll_error(LLAMBDA_ERR_FORMAT, "gguf: byte %llu (%s): %s", (unsigned long long)p->pos, p->what, msg);
    else ll_error(LLAMBDA_ERR_FORMAT, "gguf: byte %llu: %s", (unsigned long long)p->pos, msg);
    p->err = LLAMBDA_ERR_FORMAT;
    return -1;
}

static uint64_t remaining(const parser *p) { return p->g->size - p->pos; }

static int need(parser *p, uint64_t n, const char *what) {
    if (n > remaining(p))
        return fail(p, "%s needs %llu bytes, past the end of the file", what, (unsigned long long)n);
    return 0;
}

static int read_bytes(parser *p, void *dst, uint64_t n, const char *what) {
    if (need(p, n, what)) return -1;
    memcpy(dst, p->g->base + p->pos, n);
    p->pos += n;
    return 0;
}

static int read_u32(parser *p, uint32_t *v, const char *w) { return read_bytes(p, v, 4, w); }
static int read_u64(parser *p, uint64_t *v, const char *w) { return read_bytes(p, v, 8, w); }

/* A length or count: u64, or u32 in GGUF v1. */
static int read_len(parser *p, uint64_t *v, const char *w) {
    if (!p->v1) return read_u64(p, v, w);
    uint32_t x;
    if (read_u32(p, &x, w)) return -1;
    *v = x;
    return 0;
}

/* A string: u64 length then bytes. Returns a pointer into the mapping. */
static int read_str(parser *p, const uint8_t **s, uint64_t *len, const char *what) {
    if (read_len(p, len, what)) return -1;
    if (*len > remaining(p)) return fail(p, "%s length %llu runs past the end of the file", what, (unsigned long long)*len);
    *s = p->g->base + p->pos;
    p->pos += *len;
    return 0;
}

static char *dup_str(const uint8_t *s, uint64_t len) {
    char *c = malloc(len + 1);
    if (!c) return NULL;
    memcpy(c, s, len);
    c[len] = 0;
    return c;
}

static uint64_t *add_index(parser *p, uint64_t count) {
    llambda_gguf *g = p->g;
    uint64_t **ni = realloc(g->indices, (size_t)(g->n_indices + 1) * sizeof *ni);
    if (!ni) return NULL;
    g->indices = ni;
    uint64_t *idx = malloc((count ? count : 1) * sizeof *idx);
    if (!idx) return NULL;
    g->indices[g->n_indices++] = idx;
    return idx;
}

static int parse_value(parser *p, int type, int depth, llambda_gguf_value *v, int build_index);

/* Array after its type id: elem_type, count, elements. */
static int parse_array(parser *p, int depth, llambda_gguf_value *v, int build_index) {
    int32_t et;
    uint64_t count;
    if (read_bytes(p, &et, 4, "array element type") || read_len(p, &count, "array length")) return -1;
    if (et < 0 || et >= LLAMBDA_GGUF_VTYPE_COUNT) return fail(p, "bad array element type %llu", (unsigned long long)((uint64_t)(uint32_t)et));
    if (et == LLAMBDA_GGUF_ARRAY && depth >= GGUF_MAX_DEPTH) return fail(p, "arrays nested deeper than %llu", (unsigned long long)(GGUF_MAX_DEPTH));
    v->elem_type = et;
    v->count = count;
    v->data = p->g->base + p->pos;
    if (vtype_size[et]) {
        uint64_t bytes;
        if (__builtin_mul_overflow(count, (uint64_t)vtype_size[et], &bytes) || bytes > remaining(p))
            return fail(p, "array of %llu elements runs past the end of the file", (unsigned long long)(count));
        p->pos += bytes;
        return 0;
    }
    /* strings (>= 8 bytes each) and arrays (>= 12 bytes each): bound the count first */
    uint64_t min_elem = (et == LLAMBDA_GGUF_STRING ? 8 : 12) - (p->v1 ? 4 : 0);
    if (count > remaining(p) / min_elem)
        return fail(p, "array of %llu elements cannot fit in the rest of the file", (unsigned long long)(count));
    uint64_t *idx = NULL;
    if (build_index && !(idx = add_index(p, count))) return p->err = ll_error(LLAMBDA_ERR_NOMEM, "gguf: out of memory"), -1;
    uint64_t start = p->pos;
    for (uint64_t i = 0; i < count; i++) {
        if (idx) idx[i] = p->pos - start;
        if (et == LLAMBDA_GGUF_STRING) {
            const uint8_t *s; uint64_t len;
            if (read_str(p, &s, &len, "array string")) return -1;
        } else {
            llambda_gguf_value sub;
            if (parse_value(p, LLAMBDA_GGUF_ARRAY, depth + 1, &sub, 0)) return -1;
        }
    }
    v->index = idx;
    return 0;
}

static int parse_value(parser *p, int type, int depth, llambda_gguf_value *v, int build_index) {
    memset(v, 0, sizeof *v);
    v->type = type;
    v->len_size = p->v1 ? 4 : 8;
    v->raw = p->g->base + p->pos;
    uint64_t start = p->pos;
    if (type < 0 || type >= LLAMBDA_GGUF_VTYPE_COUNT) return fail(p, "bad value type %llu", (unsigned long long)((uint64_t)(uint32_t)type));
    if (type == LLAMBDA_GGUF_STRING) {
        const uint8_t *s; uint64_t len;
        if (read_str(p, &s, &len, "string value")) return -1;
        v->data = s; v->count = len;
    } else if (type == LLAMBDA_GGUF_ARRAY) {
        if (parse_array(p, depth, v, build_index)) return -1;
    } else {
        if (need(p, (uint64_t)vtype_size[type], "value")) return -1;
        v->data = p->g->base + p->pos;
        p->pos += (uint64_t)vtype_size[type];
    }
    v->raw_bytes = p->pos - start;
    return 0;
}

static int parse_kvs(parser *p) {
    llambda_gguf *g = p->g;
    /* each record needs at least 8 (key length) + 4 (type) + 1 bytes */
    if ((uint64_t)g->n_kv > remaining(p) / (p->v1 ? 9 : 13)) return fail(p, "metadata count %llu cannot fit in the file", (unsigned long long)((uint64_t)g->n_kv));
    g->keys = calloc((size_t)g->n_kv + 1, sizeof *g->keys);
    g->vals = calloc((size_t)g->n_kv + 1, sizeof *g->vals);
    g->strs = calloc((size_t)g->n_kv + 1, sizeof *g->strs);
    if (!g->keys || !g->vals || !g->strs || hash_init(&g->key_hash, g->n_kv))
        return p->err = ll_error(LLAMBDA_ERR_NOMEM, "gguf: out of memory"), -1;
    for (int64_t i = 0; i < g->n_kv; i++) {
        p->what = NULL;
        const uint8_t *ks; uint64_t klen;
        if (read_str(p, &ks, &klen, "key")) return -1;
        if (klen == 0) return fail(p, "empty key (metadata record %llu)", (unsigned long long)((uint64_t)i));
        if (memchr(ks, 0, klen)) return fail(p, "key with a NUL byte (metadata record %llu)", (unsigned long long)((uint64_t)i));
        if (!(g->keys[i] = dup_str(ks, klen))) return p->err = ll_error(LLAMBDA_ERR_NOMEM, "gguf: out of memory"), -1;
        p->what = g->keys[i];
        if (hash_insert(&g->key_hash, g->keys, g->keys[i], i) >= 0) return fail(p, "duplicate key") , -1;
        int32_t type;
        if (read_bytes(p, &type, 4, "value type")) return -1;
        if (parse_value(p, type, 0, &g->vals[i], 1)) return -1;
        if (type == LLAMBDA_GGUF_STRING && !(g->strs[i] = dup_str(g->vals[i].data, g->vals[i].count)))
            return p->err = ll_error(LLAMBDA_ERR_NOMEM, "gguf: out of memory"), -1;
    }
    p->what = NULL;
    return 0;
}

static int is_pow2(uint32_t a) { return a && !(a & (a - 1)); }

static int parse_tensor_infos(parser *p) {
    llambda_gguf *g = p->g;
    /* name length 8 + n_dims 4 + type 4 + offset 8, at minimum */
    if ((uint64_t)g->n_tensors > remaining(p) / (p->v1 ? 20 : 24)) return fail(p, "tensor count %llu cannot fit in the file", (unsigned long long)((uint64_t)g->n_tensors));
    g->tensors = calloc((size_t)g->n_tensors + 1, sizeof *g->tensors);
    g->tensor_names = calloc((size_t)g->n_tensors + 1, sizeof *g->tensor_names);
    if (!g->tensors || !g->tensor_names || hash_init(&g->tensor_hash, g->n_tensors))
        return p->err = ll_error(LLAMBDA_ERR_NOMEM, "gguf: out of memory"), -1;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        llambda_gguf_tensor *t = &g->tensors[i];
        p->what = NULL;
        const uint8_t *ns; uint64_t nlen;
        if (read_str(p, &ns, &nlen, "tensor name")) return -1;
        if (nlen > GGUF_MAX_NAME) return fail(p, "tensor name of %llu bytes (at most 63)", (unsigned long long)(nlen));
        if (memchr(ns, 0, nlen)) return fail(p, "tensor name with a NUL byte (tensor %llu)", (unsigned long long)((uint64_t)i));
        if (!(g->tensor_names[i] = dup_str(ns, nlen))) return p->err = ll_error(LLAMBDA_ERR_NOMEM, "gguf: out of memory"), -1;
        t->name = g->tensor_names[i];
        p->what = t->name;
        if (hash_insert(&g->tensor_hash, g->tensor_names, t->name, i) >= 0) return fail(p, "duplicate tensor name"), -1;
        uint32_t n_dims;
        if (read_u32(p, &n_dims, "n_dims")) return -1;
        if (n_dims > 4) return fail(p, "tensor has %llu dimensions (at most 4)", (unsigned long long)(n_dims));
        t->n_dims = (int)n_dims;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            uint64_t dim;
            if (read_len(p, &dim, "dimension")) return -1;
            t->ne[d] = (int64_t)dim;
            if (t->ne[d] < 0) return fail(p, "negative dimension %llu", (unsigned long long)((uint64_t)d));
        }
        int32_t type;
        uint64_t off;
        if (read_bytes(p, &type, 4, "tensor type") || read_u64(p, &off, "tensor offset")) return -1;
        const llambda_type_traits *tt = llambda_type_get(type);
        if (!tt) return fail(p, "unknown tensor type id %llu", (unsigned long long)((uint64_t)(uint32_t)type));
        t->type = type;
        t->offset = off;
        if (t->ne[0] % tt->block_elems) return fail(p, "row length is not a multiple of the block size %llu", (unsigned long long)((uint64_t)tt->block_elems));
        uint64_t rows = 1, nbytes;
        for (int d = 1; d < 4; d++)
            if (__builtin_mul_overflow(rows, (uint64_t)t->ne[d], &rows)) return fail(p, "dimension product overflows");
        uint64_t row_bytes;
        if (__builtin_mul_overflow((uint64_t)(t->ne[0] / tt->block_elems), (uint64_t)tt->block_bytes, &row_bytes) ||
            __builtin_mul_overflow(row_bytes, rows, &nbytes) ||
            __builtin_mul_overflow(rows, (uint64_t)t->ne[0], &rows) || rows > (uint64_t)INT64_MAX)
            return fail(p, "dimension product overflows");
        t->nbytes = nbytes;
    }
    p->what = NULL;
    return 0;
}

static int check_tensor_data(parser *p) {
    llambda_gguf *g = p->g;
    uint64_t a = g->alignment;
    uint64_t data = (p->pos + a - 1) / a * a;
    g->data_offset = data;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        llambda_gguf_tensor *t = &g->tensors[i];
        p->what = t->name;
        if (t->offset % a) return fail(p, "data offset %llu is not aligned", (unsigned long long)(t->offset));
        uint64_t end;
        if (data > g->size || __builtin_add_overflow(data, t->offset, &end) ||
            __builtin_add_overflow(end, t->nbytes, &end) || end > g->size)
            return fail(p, "data (offset %llu) lies outside the file", (unsigned long long)(t->offset));
        t->data = g->base + data + t->offset;
    }
    p->what = NULL;
    return 0;
}

static llambda_gguf *parse(llambda_gguf *g) {
    parser p = {g, 0, 0, NULL, LLAMBDA_OK};
    uint32_t magic, version;
    if (g->size < 24) { fail(&p, "file of %llu bytes is too short for a GGUF header", (unsigned long long)(g->size)); goto bad; }
    read_u32(&p, &magic, "magic");
    if (magic != GGUF_MAGIC) { p.pos = 0; fail(&p, "bad magic 0x%08llx (not a GGUF file)", (unsigned long long)(magic)); goto bad; }
    read_u32(&p, &version, "version");
    if ((version & 0xFFFF) == 0 && version) { p.pos = 4; fail(&p, "version 0x%llx: file has the other byte order", (unsigned long long)(version)); goto bad; }
    if (version < 1 || version > 3) { p.pos = 4; fail(&p, "unsupported GGUF version %llu (1, 2 and 3 are read)", (unsigned long long)(version)); goto bad; }
    g->version = version;
    p.v1 = version == 1;
    if (p.v1) {
        uint32_t nt, nk;
        read_u32(&p, &nt, "tensor count");
        read_u32(&p, &nk, "metadata count");
        g->n_tensors = nt; g->n_kv = nk;
    } else {
        read_bytes(&p, &g->n_tensors, 8, "tensor count");
        read_bytes(&p, &g->n_kv, 8, "metadata count");
    }
    if (g->n_tensors < 0) { p.pos = 8; fail(&p, "negative tensor count"); goto bad; }
    if (g->n_kv < 0) { p.pos = 16; fail(&p, "negative metadata count"); goto bad; }
    if (parse_kvs(&p)) goto bad;
    g->alignment = 32;
    int64_t ai = llambda_gguf_find_key(g, "general.alignment");
    if (ai >= 0) {
        if (g->vals[ai].type != LLAMBDA_GGUF_U32) { p.what = "general.alignment"; fail(&p, "alignment must be u32, not %s", llambda_gguf_vtype_name(g->vals[ai].type)); goto bad; }
        memcpy(&g->alignment, g->vals[ai].data, 4);
        if (!is_pow2(g->alignment)) { p.what = "general.alignment"; fail(&p, "alignment %llu is not a power of two", (unsigned long long)(g->alignment)); goto bad; }
    }
    if (parse_tensor_infos(&p)) goto bad;
    if (check_tensor_data(&p)) goto bad;
    return g;
bad:
    llambda_gguf_close(g);
    return NULL;
}

llambda_gguf *llambda_gguf_open(const char *path) {
    llambda_gguf *g = calloc(1, sizeof *g);
    if (!g) { ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); return NULL; }
    if (ll_map_file(path, 1, &g->map) != LLAMBDA_OK) { free(g); return NULL; }
    g->base = g->map.addr;
    g->size = g->map.size;
    llambda_gguf *r = parse(g);
    if (!r) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: %s", path, llambda_last_error());
        ll_error(LLAMBDA_ERR_FORMAT, "%s", msg);
    }
    return r;
}

int ll_gguf_file_mapped(const llambda_gguf *g, const void *p, size_t n) {
    const uint8_t *a = g->map.addr, *q = p;
    return a && !g->map.owned_heap && q >= a && n <= g->map.size && (size_t)(q - a) <= g->map.size - n;
}

llambda_gguf *llambda_gguf_open_memory(const void *buf, size_t size) {
    llambda_gguf *g = calloc(1, sizeof *g);
    if (!g) { ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); return NULL; }
    g->base = buf;
    g->size = size;
    return parse(g);
}

void llambda_gguf_close(llambda_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv && g->keys; i++) { free(g->keys[i]); if (g->strs) free(g->strs[i]); }
    for (int64_t i = 0; i < g->n_tensors && g->tensor_names; i++) free(g->tensor_names[i]);
    for (int64_t i = 0; i < g->n_indices; i++) free(g->indices[i]);
    free(g->indices); free(g->keys); free(g->vals); free(g->strs);
    free(g->tensors); free(g->tensor_names);
    free(g->key_hash.slots); free(g->tensor_hash.slots);
    ll_unmap(&g->map);
    free(g);
}

/* ------------------------------------------------------------------ queries */

uint32_t llambda_gguf_version(const llambda_gguf *g) { return g->version; }
uint32_t llambda_gguf_alignment(const llambda_gguf *g) { return g->alignment; }
uint64_t llambda_gguf_data_offset(const llambda_gguf *g) { return g->data_offset; }
uint64_t llambda_gguf_file_size(const llambda_gguf *g) { return g->size; }
int64_t llambda_gguf_n_kv(const llambda_gguf *g) { return g->n_kv; }
const char *llambda_gguf_key(const llambda_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? g->keys[i] : NULL; }
const llambda_gguf_value *llambda_gguf_kv(const llambda_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? &g->vals[i] : NULL; }
int64_t llambda_gguf_find_key(const llambda_gguf *g, const char *key) { return hash_find(&g->key_hash, g->keys, key); }

const llambda_gguf_value *llambda_gguf_get(const llambda_gguf *g, const char *key) {
    int64_t i = llambda_gguf_find_key(g, key);
    return i >= 0 ? &g->vals[i] : NULL;
}

static double scalar_num(int type, const uint8_t *p) {
    switch (type) {
    case LLAMBDA_GGUF_U8: return *p;
    case LLAMBDA_GGUF_I8: return (int8_t)*p;
    case LLAMBDA_GGUF_BOOL: return *p != 0;
    case LLAMBDA_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case LLAMBDA_GGUF_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case LLAMBDA_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case LLAMBDA_GGUF_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case LLAMBDA_GGUF_F32: { float v; memcpy(&v, p, 4); return v; }
    case LLAMBDA_GGUF_U64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case LLAMBDA_GGUF_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case LLAMBDA_GGUF_F64: { double v; memcpy(&v, p, 8); return v; }
    }
    return 0;
}

static const llambda_gguf_value *typed(const llambda_gguf *g, const char *key, int type) {
    const llambda_gguf_value *v = llambda_gguf_get(g, key);
    return v && v->type == type ? v : NULL;
}

uint32_t llambda_gguf_get_u32(const llambda_gguf *g, const char *key, uint32_t def) {
    const llambda_gguf_value *v = typed(g, key, LLAMBDA_GGUF_U32);
    if (v) memcpy(&def, v->data, 4);
    return def;
}
int32_t llambda_gguf_get_i32(const llambda_gguf *g, const char *key, int32_t def) {
    const llambda_gguf_value *v = typed(g, key, LLAMBDA_GGUF_I32);
    if (v) memcpy(&def, v->data, 4);
    return def;
}
uint64_t llambda_gguf_get_u64(const llambda_gguf *g, const char *key, uint64_t def) {
    const llambda_gguf_value *v = typed(g, key, LLAMBDA_GGUF_U64);
    if (v) memcpy(&def, v->data, 8);
    return def;
}
float llambda_gguf_get_f32(const llambda_gguf *g, const char *key, float def) {
    const llambda_gguf_value *v = typed(g, key, LLAMBDA_GGUF_F32);
    if (v) memcpy(&def, v->data, 4);
    return def;
}
bool llambda_gguf_get_bool(const llambda_gguf *g, const char *key, bool def) {
    const llambda_gguf_value *v = typed(g, key, LLAMBDA_GGUF_BOOL);
    return v ? *v->data != 0 : def;
}
const char *llambda_gguf_get_str(const llambda_gguf *g, const char *key, const char *def) {
    int64_t i = llambda_gguf_find_key(g, key);
    return i >= 0 && g->strs[i] ? g->strs[i] : def;
}
int64_t llambda_gguf_get_int(const llambda_gguf *g, const char *key, int64_t def, int *found) {
    const llambda_gguf_value *v = llambda_gguf_get(g, key);
    int ok = v && v->type != LLAMBDA_GGUF_STRING && v->type != LLAMBDA_GGUF_ARRAY &&
             v->type != LLAMBDA_GGUF_F32 && v->type != LLAMBDA_GGUF_F64;
    if (found) *found = !v ? 0 : ok ? 1 : -1;
    return ok ? (int64_t)scalar_num(v->type, v->data) : def;
}

static uint64_t load_len(const uint8_t *p, int len_size) {
    if (len_size == 4) { uint32_t x; memcpy(&x, p, 4); return x; }
    uint64_t x; memcpy(&x, p, 8); return x;
}

/* Bytes of the nested array encoded at p (element type, count, elements), each byte
 * visited once; validated at open, so decoded without checks. */
static uint64_t nested_bytes(const uint8_t *p, int ls) {
    int32_t et;
    memcpy(&et, p, 4);
    uint64_t n = load_len(p + 4, ls), off = 4 + (uint64_t)ls;
    if (vtype_size[et]) return off + n * (uint64_t)vtype_size[et];
    for (uint64_t k = 0; k < n; k++)
        off += et == LLAMBDA_GGUF_STRING ? (uint64_t)ls + load_len(p + off, ls) : nested_bytes(p + off, ls);
    return off;
}

/* Offset of element i of a string/nested array from v->data (walks when unindexed, once:
 * sizing each element by asking for it again made nested arrays of arrays cost a power of
 * their length, and a fuzzed 64 KiB file ran for minutes). */
static uint64_t elem_offset(const llambda_gguf_value *v, uint64_t i) {
    if (v->index) return v->index[i];
    uint64_t off = 0;
    for (uint64_t k = 0; k < i; k++)
        off += v->elem_type == LLAMBDA_GGUF_STRING ? (uint64_t)v->len_size + load_len(v->data + off, v->len_size)
                                                   : nested_bytes(v->data + off, v->len_size);
    return off;
}

llambda_gguf_str llambda_gguf_arr_str(const llambda_gguf_value *v, uint64_t i) {
    llambda_gguf_str s = {NULL, 0};
    if (!v || v->type != LLAMBDA_GGUF_ARRAY || v->elem_type != LLAMBDA_GGUF_STRING || i >= v->count) return s;
    const uint8_t *p = v->data + elem_offset(v, i);
    s.len = load_len(p, v->len_size);
    s.ptr = (const char *)p + v->len_size;
    return s;
}

double llambda_gguf_arr_num(const llambda_gguf_value *v, uint64_t i) {
    if (!v || v->type != LLAMBDA_GGUF_ARRAY || i >= v->count || !vtype_size[v->elem_type]) return 0;
    return scalar_num(v->elem_type, v->data + i * (uint64_t)vtype_size[v->elem_type]);
}

/* The nested array was validated at open, so its header can be decoded without checks. */
llambda_gguf_value llambda_gguf_arr_value(const llambda_gguf_value *v, uint64_t i) {
    llambda_gguf_value r;
    memset(&r, 0, sizeof r);
    if (!v || v->type != LLAMBDA_GGUF_ARRAY || v->elem_type != LLAMBDA_GGUF_ARRAY || i >= v->count) return r;
    const uint8_t *p = v->data + (i == 0 ? 0 : elem_offset(v, i));
    int ls = v->len_size;
    r.type = LLAMBDA_GGUF_ARRAY;
    r.len_size = ls;
    r.raw = p;
    int32_t et; memcpy(&et, p, 4);
    r.count = load_len(p + 4, ls);
    r.elem_type = et;
    r.data = p + 4 + ls;
    r.raw_bytes = nested_bytes(p, ls);
    return r;
}

int64_t llambda_gguf_n_tensors(const llambda_gguf *g) { return g->n_tensors; }
const llambda_gguf_tensor *llambda_gguf_tensor_at(const llambda_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
const llambda_gguf_tensor *llambda_gguf_find_tensor(const llambda_gguf *g, const char *name) {
    int64_t i = hash_find(&g->tensor_hash, g->tensor_names, name);
    return i >= 0 ? &g->tensors[i] : NULL;
}
int64_t llambda_tensor_nelements(const llambda_gguf_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

/* ------------------------------------------------------------------ writer */

typedef struct wkv { char *key; int type; uint8_t *raw; uint64_t raw_bytes; } wkv;
typedef struct wtensor {
    char name[64]; int type, n_dims; int64_t ne[4]; uint8_t *data; uint64_t nbytes;
    llambda_tensor_fill_fn fill; void *user;   /* lazy tensors: data produced at write time */
} wtensor;

struct llambda_gguf_writer {
    wkv *kvs; int64_t n_kv;
    wtensor *tensors; int64_t n_tensors;
    uint32_t alignment;
};

llambda_gguf_writer *llambda_gguf_writer_new(void) {
    llambda_gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->alignment = 32;
    return w;
}

void llambda_gguf_writer_free(llambda_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) { free(w->kvs[i].key); free(w->kvs[i].raw); }
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].data);
    free(w->kvs); free(w->tensors); free(w);
}

void llambda_gguf_writer_set_alignment(llambda_gguf_writer *w, uint32_t a) {
    if (is_pow2(a)) { w->alignment = a; llambda_gguf_set_u32(w, "general.alignment", a); }
}

/* Store key = (type, raw encoding); takes ownership of raw. */
static llambda_status put_raw(llambda_gguf_writer *w, const char *key, int type, uint8_t *raw, uint64_t n) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kvs[i].key, key) == 0) {
            free(w->kvs[i].raw);
            w->kvs[i].type = type; w->kvs[i].raw = raw; w->kvs[i].raw_bytes = n;
            return LLAMBDA_OK;
        }
    wkv *nk = realloc(w->kvs, (size_t)(w->n_kv + 1) * sizeof *nk);
    char *k = strdup(key);
    if (!nk || !k) { free(raw); free(k); if (nk) w->kvs = nk; return ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); }
    w->kvs = nk;
    w->kvs[w->n_kv++] = (wkv){k, type, raw, n};
    return LLAMBDA_OK;
}

static llambda_status put_copy(llambda_gguf_writer *w, const char *key, int type, const void *src, uint64_t n) {
    uint8_t *raw = malloc(n ? n : 1);
    if (!raw) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    memcpy(raw, src, n);
    return put_raw(w, key, type, raw, n);
}

llambda_status llambda_gguf_set_u32(llambda_gguf_writer *w, const char *k, uint32_t v) { return put_copy(w, k, LLAMBDA_GGUF_U32, &v, 4); }
llambda_status llambda_gguf_set_i32(llambda_gguf_writer *w, const char *k, int32_t v) { return put_copy(w, k, LLAMBDA_GGUF_I32, &v, 4); }
llambda_status llambda_gguf_set_f32(llambda_gguf_writer *w, const char *k, float v) { return put_copy(w, k, LLAMBDA_GGUF_F32, &v, 4); }
llambda_status llambda_gguf_set_bool(llambda_gguf_writer *w, const char *k, bool v) { uint8_t b = v; return put_copy(w, k, LLAMBDA_GGUF_BOOL, &b, 1); }

llambda_status llambda_gguf_set_str(llambda_gguf_writer *w, const char *k, const char *s) {
    uint64_t len = strlen(s);
    uint8_t *raw = malloc(8 + len);
    if (!raw) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    memcpy(raw, &len, 8);
    memcpy(raw + 8, s, len);
    return put_raw(w, k, LLAMBDA_GGUF_STRING, raw, 8 + len);
}

llambda_status llambda_gguf_set_arr(llambda_gguf_writer *w, const char *k, int et, const void *data, uint64_t count) {
    if (et < 0 || et >= LLAMBDA_GGUF_VTYPE_COUNT || !vtype_size[et]) return ll_error(LLAMBDA_ERR_ARG, "set_arr: element type %d is not fixed-size", et);
    uint64_t bytes = count * (uint64_t)vtype_size[et];
    uint8_t *raw = malloc(12 + bytes);
    if (!raw) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    int32_t e = et;
    memcpy(raw, &e, 4); memcpy(raw + 4, &count, 8);
    if (bytes) memcpy(raw + 12, data, bytes);
    return put_raw(w, k, LLAMBDA_GGUF_ARRAY, raw, 12 + bytes);
}

llambda_status llambda_gguf_set_arr_str(llambda_gguf_writer *w, const char *k, const char *const *strs, uint64_t count) {
    uint64_t bytes = 12;
    for (uint64_t i = 0; i < count; i++) bytes += 8 + strlen(strs[i]);
    uint8_t *raw = malloc(bytes), *p = raw;
    if (!raw) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    int32_t e = LLAMBDA_GGUF_STRING;
    memcpy(p, &e, 4); memcpy(p + 4, &count, 8); p += 12;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t len = strlen(strs[i]);
        memcpy(p, &len, 8); memcpy(p + 8, strs[i], len); p += 8 + len;
    }
    return put_raw(w, k, LLAMBDA_GGUF_ARRAY, raw, bytes);
}

llambda_status llambda_gguf_set_value(llambda_gguf_writer *w, const char *k, const llambda_gguf_value *v) {
    if (v->len_size == 4 && (v->type == LLAMBDA_GGUF_STRING || v->type == LLAMBDA_GGUF_ARRAY))
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "set_value '%s': strings and arrays of GGUF v1 files are not copied verbatim", k);
    return put_copy(w, k, v->type, v->raw, v->raw_bytes);
}

static llambda_status add_tensor(llambda_gguf_writer *w, const char *name, int type, int n_dims,
                                 const int64_t *ne, const void *data, llambda_tensor_fill_fn fill, void *user) {
    const llambda_type_traits *tt = llambda_type_get(type);
    if (!tt) return ll_error(LLAMBDA_ERR_ARG, "add_tensor %s: unknown type %d", name, type);
    if (strlen(name) > GGUF_MAX_NAME) return ll_error(LLAMBDA_ERR_ARG, "add_tensor: name '%s' longer than 63 bytes", name);
    if (n_dims < 1 || n_dims > 4) return ll_error(LLAMBDA_ERR_ARG, "add_tensor %s: %d dims", name, n_dims);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0) return ll_error(LLAMBDA_ERR_ARG, "add_tensor: duplicate tensor '%s'", name);
    wtensor t;
    memset(&t, 0, sizeof t);
    strcpy(t.name, name);
    t.type = type; t.n_dims = n_dims;
    uint64_t rows = 1;
    for (int d = 0; d < 4; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    if (t.ne[0] % tt->block_elems) return ll_error(LLAMBDA_ERR_ARG, "add_tensor %s: row of %lld not a multiple of %lld", name, (long long)t.ne[0], (long long)tt->block_elems);
    for (int d = 1; d < 4; d++) rows *= (uint64_t)t.ne[d];
    t.nbytes = (uint64_t)(t.ne[0] / tt->block_elems) * (uint64_t)tt->block_bytes * rows;
    t.fill = fill; t.user = user;
    if (!fill) {
        t.data = malloc(t.nbytes ? t.nbytes : 1);
        if (!t.data) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
        if (t.nbytes) memcpy(t.data, data, t.nbytes);
    }
    wtensor *nt = realloc(w->tensors, (size_t)(w->n_tensors + 1) * sizeof *nt);
    if (!nt) { free(t.data); return ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); }
    w->tensors = nt;
    w->tensors[w->n_tensors++] = t;
    return LLAMBDA_OK;
}

llambda_status llambda_gguf_add_tensor(llambda_gguf_writer *w, const char *name, int type, int n_dims,
                                       const int64_t *ne, const void *data) {
    return add_tensor(w, name, type, n_dims, ne, data, NULL, NULL);
}

llambda_status llambda_gguf_add_tensor_fn(llambda_gguf_writer *w, const char *name, int type, int n_dims,
                                          const int64_t *ne, llambda_tensor_fill_fn fill, void *user) {
    if (!fill) return ll_error(LLAMBDA_ERR_ARG, "add_tensor_fn %s: no fill function", name);
    return add_tensor(w, name, type, n_dims, ne, NULL, fill, user);
}

static int put_zeros(FILE *f, uint64_t n) {
    static const uint8_t z[64];
    while (n) { uint64_t k = n < 64 ? n : 64; if (fwrite(z, 1, k, f) != k) return -1; n -= k; }
    return 0;
}

llambda_status llambda_gguf_writer_write(llambda_gguf_writer *w, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return ll_error(LLAMBDA_ERR_IO, "%s: cannot create", path);
    uint32_t magic = GGUF_MAGIC, version = 3;
    int64_t nt = w->n_tensors, nk = w->n_kv;
    int ok = fwrite(&magic, 4, 1, f) && fwrite(&version, 4, 1, f) && fwrite(&nt, 8, 1, f) && fwrite(&nk, 8, 1, f);
    uint64_t pos = 24;
    for (int64_t i = 0; ok && i < nk; i++) {
        uint64_t len = strlen(w->kvs[i].key);
        int32_t type = w->kvs[i].type;
        ok = fwrite(&len, 8, 1, f) && fwrite(w->kvs[i].key, 1, len, f) == len && fwrite(&type, 4, 1, f) &&
             fwrite(w->kvs[i].raw, 1, w->kvs[i].raw_bytes, f) == w->kvs[i].raw_bytes;
        pos += 8 + len + 4 + w->kvs[i].raw_bytes;
    }
    uint64_t a = w->alignment, off = 0;
    for (int64_t i = 0; ok && i < nt; i++) {
        wtensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        uint32_t nd = (uint32_t)t->n_dims;
        int32_t type = t->type;
        ok = fwrite(&len, 8, 1, f) && fwrite(t->name, 1, len, f) == len && fwrite(&nd, 4, 1, f) &&
             fwrite(t->ne, 8, nd, f) == nd && fwrite(&type, 4, 1, f) && fwrite(&off, 8, 1, f);
        pos += 8 + len + 4 + 8 * nd + 4 + 8;
        off += (t->nbytes + a - 1) / a * a;
    }
    if (ok && nt) ok = put_zeros(f, (pos + a - 1) / a * a - pos) == 0;
    llambda_status st = LLAMBDA_OK;
    for (int64_t i = 0; ok && i < nt; i++) {
        wtensor *t = &w->tensors[i];
        uint8_t *data = t->data;
        if (t->fill) {
            if (!(data = malloc(t->nbytes ? t->nbytes : 1))) { st = ll_error(LLAMBDA_ERR_NOMEM, "%s: out of memory for tensor %s", path, t->name); break; }
            if ((st = t->fill(t->user, t->name, data, t->nbytes))) { free(data); break; }
        }
        ok = fwrite(data, 1, t->nbytes, f) == t->nbytes && put_zeros(f, (t->nbytes + a - 1) / a * a - t->nbytes) == 0;
        if (t->fill) free(data);
    }
    if (fclose(f) != 0) ok = 0;
    if (st) return st;
    return ok ? LLAMBDA_OK : ll_error(LLAMBDA_ERR_IO, "%s: write failed", path);
}
