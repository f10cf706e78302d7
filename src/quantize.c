/* Model quantization: llama.cpp's per-tensor type choices for the common file types
 * (gguf-and-quants.md §6), and a file-to-file quantizer that streams one tensor at a
 * time through the writer. */
#include "internal.h"
#include "threads.h"
#include <stdio.h>
#include <stdlib.h>

/* llama.cpp's file types; those with a base type are the ones the quantizer makes */
static const struct { const char *name; int ftype, base_type; } ftypes[] = {
    {"F32", LLAMBDA_FTYPE_F32, LLAMBDA_TYPE_F32}, {"F16", LLAMBDA_FTYPE_F16, LLAMBDA_TYPE_F16},
    {"BF16", LLAMBDA_FTYPE_BF16, LLAMBDA_TYPE_BF16}, {"Q4_0", LLAMBDA_FTYPE_Q4_0, LLAMBDA_TYPE_Q4_0},
    {"Q8_0", LLAMBDA_FTYPE_Q8_0, LLAMBDA_TYPE_Q8_0}, {"Q4_K_M", LLAMBDA_FTYPE_Q4_K_M, LLAMBDA_TYPE_Q4_K},
    {"Q5_K_M", LLAMBDA_FTYPE_Q5_K_M, LLAMBDA_TYPE_Q5_K}, {"Q6_K", LLAMBDA_FTYPE_Q6_K, LLAMBDA_TYPE_Q6_K},
    {"IQ4_XS", LLAMBDA_FTYPE_IQ4_XS, LLAMBDA_TYPE_IQ4_XS}, {"Q3_K_M", LLAMBDA_FTYPE_Q3_K_M, LLAMBDA_TYPE_Q3_K},
    {"Q2_K", LLAMBDA_FTYPE_Q2_K, LLAMBDA_TYPE_Q2_K},
    {"Q4_1", 3, -1}, {"Q5_0", 8, -1}, {"Q5_1", 9, -1}, {"Q3_K_S", 11, -1},
    {"Q3_K_L", 13, -1}, {"Q4_K_S", 14, -1}, {"Q5_K_S", 16, -1}, {"IQ2_XXS", 19, -1}, {"IQ2_XS", 20, -1},
    {"Q2_K_S", 21, -1}, {"IQ3_XS", 22, -1}, {"IQ3_XXS", 23, -1}, {"IQ1_S", 24, -1}, {"IQ4_NL", 25, -1},
    {"IQ3_S", 26, -1}, {"IQ3_M", 27, -1}, {"IQ2_S", 28, -1}, {"IQ2_M", 29, -1}, {"IQ1_M", 31, -1},
    {"TQ1_0", 36, -1}, {"TQ2_0", 37, -1}, {"MXFP4_MOE", 38, -1},
};
#define N_FTYPES ((int)(sizeof ftypes / sizeof *ftypes))

int llambda_ftype_from_name(const char *name) {
    for (int i = 0; i < N_FTYPES; i++)
        if (ftypes[i].base_type >= 0 && !strcasecmp(name, ftypes[i].name)) return ftypes[i].ftype;
    return -1;
}
const char *llambda_ftype_name(int ftype) {
    for (int i = 0; i < N_FTYPES; i++) if (ftypes[i].ftype == ftype) return ftypes[i].name;
    return NULL;
}
static int base_type(int ftype) {
    for (int i = 0; i < N_FTYPES; i++) if (ftypes[i].ftype == ftype) return ftypes[i].base_type;
    return -1;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers, and every third between */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int is_quantizable(const char *name, int n_dims) {
    if (n_dims < 2 || !ends_with(name, "weight")) return 0;
    if (strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp.weight") || strstr(name, "pos_embd") ||
        strstr(name, "token_types") || strstr(name, "conv1d") || strstr(name, "rope_freqs")) return 0;
    return 1;
}

/* A type whose blocks do not fit the row falls back like llama.cpp does. */
static int fallback(int type, int64_t ne0) {
    const llambda_type_traits *t = llambda_type_get(type);
    if (ne0 % t->block_elems == 0) return type;
    switch (type) {
    case LLAMBDA_TYPE_Q4_K: type = LLAMBDA_TYPE_Q5_0; break;
    case LLAMBDA_TYPE_Q5_K: type = LLAMBDA_TYPE_Q5_1; break;
    case LLAMBDA_TYPE_Q6_K: type = LLAMBDA_TYPE_Q8_0; break;
    case LLAMBDA_TYPE_Q2_K: case LLAMBDA_TYPE_Q3_K: type = LLAMBDA_TYPE_Q4_0; break;
    case LLAMBDA_TYPE_IQ4_XS: type = LLAMBDA_TYPE_IQ4_NL; break;
    default: break;
    }
    return ne0 % llambda_type_get(type)->block_elems == 0 ? type : LLAMBDA_TYPE_F16;
}

int llambda_quant_tensor_type(int ftype, const char *name, int n_dims, const int64_t *ne, int src_type,
                              int i_kind, int n_kind, bool has_output, int n_expert, int n_gqa) {
    int type = base_type(ftype);
    if (type < 0) return -1;
    if (!is_quantizable(name, n_dims)) return src_type;
    if (ftype == LLAMBDA_FTYPE_F32 || ftype == LLAMBDA_FTYPE_F16 || ftype == LLAMBDA_FTYPE_BF16) return type;
    int k_mix = ftype == LLAMBDA_FTYPE_Q4_K_M || ftype == LLAMBDA_FTYPE_Q5_K_M, iq4 = ftype == LLAMBDA_FTYPE_IQ4_XS;
    int q3m = ftype == LLAMBDA_FTYPE_Q3_K_M, q2 = ftype == LLAMBDA_FTYPE_Q2_K;
    int mixed = k_mix || iq4 || q3m || q2;   /* the file types whose mix bumps 8-expert attention to Q8_0 */
    if (!strcmp(name, "output.weight") || (!has_output && !strcmp(name, "token_embd.weight"))) {
        if (ne[0] % QK_K != 0) type = LLAMBDA_TYPE_Q8_0;
        else if (type != LLAMBDA_TYPE_Q8_0) type = LLAMBDA_TYPE_Q6_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        /* unchanged */
    } else if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight")) {
        if (k_mix && use_more_bits(i_kind, n_kind)) type = LLAMBDA_TYPE_Q6_K;
        if (iq4 && n_gqa >= 4) type = LLAMBDA_TYPE_Q5_K;
        if (q3m) type = i_kind < 2 ? LLAMBDA_TYPE_Q5_K : LLAMBDA_TYPE_Q4_K;
        if (q2) type = n_gqa >= 4 ? LLAMBDA_TYPE_Q4_K : LLAMBDA_TYPE_Q3_K;
        if (n_expert == 8 && mixed) type = LLAMBDA_TYPE_Q8_0;
    } else if (strstr(name, "attn_k.weight")) {
        if (n_expert == 8 && mixed) type = LLAMBDA_TYPE_Q8_0;
    } else if (strstr(name, "ffn_down")) {
        if (k_mix && use_more_bits(i_kind, n_kind)) type = LLAMBDA_TYPE_Q6_K;
        if (iq4 && i_kind < n_kind / 8) type = LLAMBDA_TYPE_Q5_K;   /* (without an importance matrix) */
        if (q3m) type = i_kind < n_kind / 16 ? LLAMBDA_TYPE_Q5_K : LLAMBDA_TYPE_Q4_K;
        if (q2) type = LLAMBDA_TYPE_Q3_K;
    } else if (strstr(name, "attn_output.weight")) {
        if ((ftype == LLAMBDA_FTYPE_Q4_K_M || iq4 || q3m || q2) && n_expert == 8) type = LLAMBDA_TYPE_Q5_K;
        else if (q3m) type = LLAMBDA_TYPE_Q4_K;
        else if (q2) type = LLAMBDA_TYPE_Q3_K;
    }
    return fallback(type, ne[0]);
}

/* ------------------------------------------------------------------ the file quantizer */

typedef struct qjob {
    const llambda_gguf_tensor *t;
    int dst_type;
    uint8_t *dst;
    int64_t rows;
} qjob;

static void quantize_rows(void *arg, int ith, int nth) {
    qjob *j = arg;
    const llambda_gguf_tensor *t = j->t;
    const llambda_type_traits *src = llambda_type_get(t->type), *dst = llambda_type_get(j->dst_type);
    int64_t ne0 = t->ne[0], r0 = j->rows * ith / nth, r1 = j->rows * (ith + 1) / nth;
    size_t src_row = (size_t)llambda_type_row_bytes(t->type, ne0), dst_row = (size_t)llambda_type_row_bytes(j->dst_type, ne0);
    float *buf = malloc((size_t)ne0 * sizeof *buf);
    if (!buf) return;
    for (int64_t r = r0; r < r1; r++) {
        src->dequantize_row((const uint8_t *)t->data + (size_t)r * src_row, buf, ne0);
        dst->quantize_row(buf, j->dst + (size_t)r * dst_row, ne0);
    }
    free(buf);
}

typedef struct qfile {
    llambda_gguf *g;
    int *types;
    ll_pool *pool;
    llambda_progress_fn progress;
    void *user;
    int64_t done;
} qfile;

static llambda_status fill_tensor(void *user, const char *name, void *dst, uint64_t nbytes) {
    qfile *q = user;
    const llambda_gguf_tensor *t = llambda_gguf_find_tensor(q->g, name);
    int64_t idx = t - llambda_gguf_tensor_at(q->g, 0);
    if (q->types[idx] == t->type) memcpy(dst, t->data, nbytes);
    else {
        qjob j = {t, q->types[idx], dst, llambda_tensor_nelements(t) / (t->ne[0] ? t->ne[0] : 1)};
        ll_pool_run(q->pool, quantize_rows, &j);
    }
    q->done++;
    if (q->progress && !q->progress((float)q->done / (float)llambda_gguf_n_tensors(q->g), name, q->user))
        return ll_error(LLAMBDA_ERR_ARG, "quantize: cancelled");
    return LLAMBDA_OK;
}

static int layer_of(const char *name) { return strncmp(name, "blk.", 4) ? -1 : atoi(name + 4); }

llambda_status llambda_quantize_file(const char *in, const char *out, int ftype, int n_threads,
                                     llambda_progress_fn progress, void *user) {
    if (base_type(ftype) < 0) return ll_error(LLAMBDA_ERR_ARG, "quantize: unsupported file type %d", ftype);
    llambda_gguf *g = llambda_gguf_open(in);
    if (!g) return LLAMBDA_ERR_FORMAT;
    int64_t nt = llambda_gguf_n_tensors(g);
    int *types = calloc((size_t)(nt ? nt : 1), sizeof *types);
    llambda_gguf_writer *w = llambda_gguf_writer_new();
    llambda_status st = LLAMBDA_OK;
    if (!types || !w) { st = ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); goto done; }
    const char *arch = llambda_gguf_get_str(g, "general.architecture", "");
    char key[128];
    snprintf(key, sizeof key, "%s.expert_count", arch);
    int n_expert = (int)llambda_gguf_get_int(g, key, 0, NULL);
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    int64_t n_head = llambda_gguf_get_int(g, key, 1, NULL);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    int64_t n_head_kv = llambda_gguf_get_int(g, key, n_head, NULL);   /* (a per-layer array reads as the default) */
    int n_gqa = n_head_kv > 0 ? (int)(n_head / n_head_kv) : 1;
    int has_output = llambda_gguf_find_tensor(g, "output.weight") != NULL;
    /* counters over attn_v-like and ffn_down tensors, in layer order */
    int n_v = 0, n_down = 0;
    for (int64_t i = 0; i < nt; i++) {
        const char *nm = llambda_gguf_tensor_at(g, i)->name;
        if (strstr(nm, "attn_v.weight") || strstr(nm, "attn_qkv.weight") || strstr(nm, "attn_kv_b.weight")) n_v++;
        if (strstr(nm, "ffn_down")) n_down++;
    }
    for (int64_t i = 0; i < nt; i++) {
        const llambda_gguf_tensor *t = llambda_gguf_tensor_at(g, i);
        if (t->type != LLAMBDA_TYPE_F32 && t->type != LLAMBDA_TYPE_F16 && t->type != LLAMBDA_TYPE_BF16) {
            st = ll_error(LLAMBDA_ERR_UNSUPPORTED, "quantize: tensor '%s' is %s; the input must be F32, F16 or BF16",
                          t->name, llambda_type_get(t->type)->name);
            goto done;
        }
        int is_v = strstr(t->name, "attn_v.weight") || strstr(t->name, "attn_qkv.weight") || strstr(t->name, "attn_kv_b.weight");
        int is_down = strstr(t->name, "ffn_down") != NULL, i_kind = 0;
        if (is_v || is_down) {
            /* position among same-kind tensors ordered by layer */
            int L = layer_of(t->name);
            for (int64_t k = 0; k < nt; k++) {
                const char *o = llambda_gguf_tensor_at(g, k)->name;
                int same = is_v ? (strstr(o, "attn_v.weight") || strstr(o, "attn_qkv.weight") || strstr(o, "attn_kv_b.weight")) : strstr(o, "ffn_down") != NULL;
                if (same && (layer_of(o) < L || (layer_of(o) == L && strcmp(o, t->name) < 0))) i_kind++;
            }
        }
        types[i] = llambda_quant_tensor_type(ftype, t->name, t->n_dims, t->ne, t->type, i_kind, is_v ? n_v : n_down,
                                             has_output, n_expert, n_gqa);
    }
    for (int64_t i = 0; i < llambda_gguf_n_kv(g); i++) {
        const char *k = llambda_gguf_key(g, i);
        if (!strcmp(k, "general.file_type") || !strcmp(k, "general.quantization_version")) continue;
        if ((st = llambda_gguf_set_value(w, k, llambda_gguf_kv(g, i)))) goto done;
    }
    llambda_gguf_set_u32(w, "general.quantization_version", 2);
    llambda_gguf_set_u32(w, "general.file_type", (uint32_t)ftype);
    llambda_gguf_writer_set_alignment(w, llambda_gguf_alignment(g));
    qfile q = {g, types, ll_pool_create(n_threads > 0 ? n_threads : ll_n_cpus()), progress, user, 0};
    if (!q.pool) { st = ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); goto done; }
    for (int64_t i = 0; i < nt && !st; i++) {
        const llambda_gguf_tensor *t = llambda_gguf_tensor_at(g, i);
        st = llambda_gguf_add_tensor_fn(w, t->name, types[i], t->n_dims, t->ne, fill_tensor, &q);
    }
    if (!st) st = llambda_gguf_writer_write(w, out);
    ll_pool_free(q.pool);
done:
    llambda_gguf_writer_free(w);
    free(types);
    llambda_gguf_close(g);
    return st;
}
