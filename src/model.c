/* Model loading: open the GGUF, pick the architecture from general.architecture, let it
 * read its hyperparameters and bind its tensors (shapes and types checked), load the
 * vocabulary. The model is read-only afterwards and shared by all contexts. */
#include "model.h"
#include "backends/backend.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

extern const ll_arch ll_arch_llama, ll_arch_qwen2, ll_arch_gemma4, ll_arch_nemotron_h_moe, ll_arch_nemotron_h, ll_arch_qwen3next;

/* The architecture registry: a new architecture is one file plus one line here. */
static const ll_arch *const arch_registry[] = {&ll_arch_llama, &ll_arch_qwen2, &ll_arch_gemma4,
                                               &ll_arch_nemotron_h_moe, &ll_arch_nemotron_h, &ll_arch_qwen3next, NULL};

static const char *arch_of(const llambda_model *m) { return m->arch_name; }

/* ------------------------------------------------------------------ hparams */

static llambda_status hp_lookup(llambda_model *m, const char *suffix, const llambda_gguf_value **v, char *key, size_t ks) {
    snprintf(key, ks, "%s.%s", arch_of(m), suffix);
    *v = llambda_gguf_get(m->gguf, key);
    return LLAMBDA_OK;
}

llambda_status ll_hp_u32(llambda_model *m, const char *suffix, int required, int def, int *out) {
    char key[160];
    const llambda_gguf_value *v;
    hp_lookup(m, suffix, &v, key, sizeof key);
    if (!v) {
        if (required) return ll_error(LLAMBDA_ERR_FORMAT, "missing required metadata key '%s'", key);
        *out = def;
        return LLAMBDA_OK;
    }
    double val;
    if (v->type == LLAMBDA_GGUF_ARRAY) {
        if (v->count != (uint64_t)m->hp.n_layer || v->elem_type == LLAMBDA_GGUF_STRING || v->elem_type == LLAMBDA_GGUF_ARRAY)
            return ll_error(LLAMBDA_ERR_FORMAT, "metadata key '%s': per-layer array of %llu entries, expected %d integers",
                            key, (unsigned long long)v->count, m->hp.n_layer);
        val = llambda_gguf_arr_num(v, 0);
        for (uint64_t i = 1; i < v->count; i++)
            if (llambda_gguf_arr_num(v, i) != val)
                return ll_error(LLAMBDA_ERR_UNSUPPORTED, "metadata key '%s': per-layer values differ, which %s does not use", key, arch_of(m));
    } else {
        int found;
        int64_t iv = llambda_gguf_get_int(m->gguf, key, 0, &found);
        if (found != 1) return ll_error(LLAMBDA_ERR_FORMAT, "metadata key '%s' has type %s, expected an integer", key, llambda_gguf_vtype_name(v->type));
        val = (double)iv;
    }
    if (val < 0 || val > 1e9) return ll_error(LLAMBDA_ERR_FORMAT, "metadata key '%s' = %.0f is out of range", key, val);
    *out = (int)val;
    return LLAMBDA_OK;
}

llambda_status ll_hp_width(llambda_model *m, const char *what, int64_t a, int64_t b) {
    if (a < 1 || b < 1 || a > (1 << 30) || b > (1 << 30) || a * b > (1 << 30))
        return ll_error(LLAMBDA_ERR_FORMAT, "%s: %s = %lld x %lld is out of range (1..2^30)", arch_of(m), what, (long long)a, (long long)b);
    return LLAMBDA_OK;
}

llambda_status ll_hp_layers(llambda_model *m, const char *suffix, int required, int def, int *out) {
    char key[160];
    const llambda_gguf_value *v;
    hp_lookup(m, suffix, &v, key, sizeof key);
    int L = m->hp.n_layer;
    if (!v) {
        if (required) return ll_error(LLAMBDA_ERR_FORMAT, "missing required metadata key '%s'", key);
        for (int l = 0; l < L; l++) out[l] = def;
        return LLAMBDA_OK;
    }
    if (v->type == LLAMBDA_GGUF_ARRAY) {
        if (v->count != (uint64_t)L || v->elem_type == LLAMBDA_GGUF_STRING || v->elem_type == LLAMBDA_GGUF_ARRAY ||
            v->elem_type == LLAMBDA_GGUF_F32 || v->elem_type == LLAMBDA_GGUF_F64)
            return ll_error(LLAMBDA_ERR_FORMAT, "metadata key '%s': array of %llu entries, expected %d integers (one per layer)",
                            key, (unsigned long long)v->count, L);
        for (int l = 0; l < L; l++) out[l] = (int)llambda_gguf_arr_num(v, (uint64_t)l);
        return LLAMBDA_OK;
    }
    int found;
    int64_t x = llambda_gguf_get_int(m->gguf, key, 0, &found);
    if (found != 1) return ll_error(LLAMBDA_ERR_FORMAT, "metadata key '%s' has type %s, expected an integer", key, llambda_gguf_vtype_name(v->type));
    for (int l = 0; l < L; l++) out[l] = (int)x;
    return LLAMBDA_OK;
}

llambda_status ll_hp_f32(llambda_model *m, const char *suffix, int required, float def, float *out) {
    char key[160];
    const llambda_gguf_value *v;
    hp_lookup(m, suffix, &v, key, sizeof key);
    if (!v) {
        if (required) return ll_error(LLAMBDA_ERR_FORMAT, "missing required metadata key '%s'", key);
        *out = def;
        return LLAMBDA_OK;
    }
    if (v->type != LLAMBDA_GGUF_F32) return ll_error(LLAMBDA_ERR_FORMAT, "metadata key '%s' has type %s, expected f32", key, llambda_gguf_vtype_name(v->type));
    memcpy(out, v->data, 4);
    if (!isfinite(*out)) return ll_error(LLAMBDA_ERR_FORMAT, "metadata key '%s' is not finite", key);
    return LLAMBDA_OK;
}

/* ------------------------------------------------------------------ tensors */

llambda_status ll_bind(llambda_model *m, ll_weight *w, int required, int64_t ne0, int64_t ne1, const char *fmt, ...) {
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    memset(w, 0, sizeof *w);
    const llambda_gguf_tensor *t = llambda_gguf_find_tensor(m->gguf, name);
    if (!t) return required ? ll_error(LLAMBDA_ERR_FORMAT, "missing tensor '%s'", name) : LLAMBDA_OK;
    int want_dims = ne1 ? 2 : 1;
    if ((t->n_dims != want_dims && !(t->n_dims == 1 && !ne1)) || t->ne[0] != ne0 || (ne1 && t->ne[1] != ne1) || t->ne[2] != 1 || t->ne[3] != 1) {
        if (ne1) return ll_error(LLAMBDA_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld]", name,
                                 (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)ne0, (long long)ne1);
        return ll_error(LLAMBDA_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld], expected [%lld]", name,
                        (long long)t->ne[0], (long long)t->ne[1], (long long)ne0);
    }
    const llambda_type_traits *tt = llambda_type_get(t->type);
    if (!ne1 && t->type != LLAMBDA_TYPE_F32)
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "tensor '%s' is a vector of type %s; llambda expects F32", name, tt->name);
    if (ne1 && (!tt->dequantize_row || ll_vec_dot_type(t->type) < 0))
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "tensor '%s' has type %s, which llambda cannot compute with", name, tt->name);
    w->name = t->name;
    w->type = t->type;
    w->cols = t->ne[0];
    w->rows = ne1 ? t->ne[1] : 1;
    w->n_mat = 1;
    w->row_bytes = (size_t)llambda_type_row_bytes(t->type, t->ne[0]);
    w->data = t->data;
    m->n_params += llambda_tensor_nelements(t);
    m->weight_bytes += t->nbytes;
    /* embedding tables are only looked up by row (a tied output head is repacked when tied) */
    if (ne1 && strcmp(name, "token_embd.weight") && strcmp(name, "per_layer_token_embd.weight")) ll_weight_repack(m, w);
    return LLAMBDA_OK;
}

llambda_status ll_bind3(llambda_model *m, ll_weight *w, int required, int64_t ne0, int64_t ne1, int64_t ne2, const char *fmt, ...) {
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    memset(w, 0, sizeof *w);
    const llambda_gguf_tensor *t = llambda_gguf_find_tensor(m->gguf, name);
    if (!t) return required ? ll_error(LLAMBDA_ERR_FORMAT, "missing tensor '%s'", name) : LLAMBDA_OK;
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1)
        return ll_error(LLAMBDA_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
                        (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)ne0, (long long)ne1, (long long)ne2);
    const llambda_type_traits *tt = llambda_type_get(t->type);
    if (!tt->dequantize_row || ll_vec_dot_type(t->type) < 0)
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "tensor '%s' has type %s, which llambda cannot compute with", name, tt->name);
    w->name = t->name; w->type = t->type; w->cols = ne0; w->rows = ne1; w->n_mat = ne2;
    w->row_bytes = (size_t)llambda_type_row_bytes(t->type, ne0);
    w->data = t->data;
    m->n_params += llambda_tensor_nelements(t);
    m->weight_bytes += t->nbytes;
    ll_weight_repack(m, w);
    return LLAMBDA_OK;
}

/* Repacked weights live in large 2 MiB-aligned chunks, each tensor's tiles placed right
 * after the last one's: every 2 MiB of them can be a huge page. With one mapping per
 * tensor, the kernel merged the mappings, but the 2 MiB around each tensor's ends,
 * touched before its neighbour existed, stayed in 4 KiB pages: llama-3.2-1b Q4_K_M had
 * 608 of its 843 MB resident in huge pages (most small attention matrices were not), now
 * 797. */
struct ll_packbuf { struct ll_packbuf *next; uint8_t *data; size_t size, used; };
#define PACK_CHUNK ((size_t)256 << 20)   /* address space; pages are only taken as they are touched */
#define HUGE_PAGE ((size_t)2 << 20)

static uint8_t *pack_alloc(llambda_model *m, size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    struct ll_packbuf *b = m->packs;
    if (!b || b->size - b->used < bytes) {
        size_t size = bytes > PACK_CHUNK ? (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1) : PACK_CHUNK;
        if (!(b = malloc(sizeof *b))) return NULL;
        if (!(b->data = ll_alloc_large(size))) { free(b); return NULL; }
        b->size = size;
        b->used = 0;
        b->next = m->packs;
        m->packs = b;
    }
    uint8_t *p = b->data + b->used;
    b->used += bytes;
    return p;
}

static int repack_disabled(void) {
    const char *v = getenv("LLAMBDA_NO_REPACK");
    return v && *v && strcmp(v, "0");
}

typedef struct pack_job {
    ll_pack_x8_fn pack;
    const ll_weight *w;
    uint8_t *dst;
    size_t tile;
    int64_t tiles, first, last;   /* the (matrix, tile) range [first, last) of this thread */
} pack_job;

static void *pack_range(void *arg) {
    pack_job *j = arg;
    for (int64_t k = j->first; k < j->last; k++) {
        int64_t e = k / j->tiles, r = k % j->tiles;
        j->pack(j->w->cols, j->w->data + ((size_t)e * (size_t)j->w->rows + (size_t)r * 8) * j->w->row_bytes, j->w->row_bytes,
                j->dst + (size_t)k * j->tile);
    }
    return NULL;
}

void ll_weight_repack(llambda_model *m, ll_weight *w) {
    const ll_kernels *k = ll_kernels_get();
    ll_pack_x8_fn pack = k->pack_x8[w->type];
    if (!pack || w->packed || w->rows < 8 || repack_disabled()) return;
    size_t tile = pack(w->cols, w->data, w->row_bytes, NULL);
    int64_t tiles = w->rows / 8, total = tiles * w->n_mat;
    uint64_t bytes = (uint64_t)tile * (uint64_t)total;
    if (m->packed_bytes + bytes > m->pack_budget) return;   /* the rest runs from the mapped file */
    uint8_t *dst = pack_alloc(m, bytes);
    if (!dst) return;
    /* big tensors are packed by several threads (the page faults of the new memory too) */
    enum { MAX_PACKERS = 8 };
    int nt = bytes < (32u << 20) ? 1 : ll_n_cpus();
    if (nt > MAX_PACKERS) nt = MAX_PACKERS;
    pack_job jobs[MAX_PACKERS];
    pthread_t th[MAX_PACKERS];
    int started[MAX_PACKERS] = {0};
    for (int i = 0; i < nt; i++) {
        jobs[i] = (pack_job){pack, w, dst, tile, tiles, total * i / nt, total * (i + 1) / nt};
        if (i > 0) started[i] = pthread_create(&th[i], NULL, pack_range, &jobs[i]) == 0;
    }
    pack_range(&jobs[0]);
    for (int i = 1; i < nt; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else pack_range(&jobs[i]);   /* no thread: do its share here */
    }
    m->packed_bytes += bytes;
    w->packed = dst;
    w->packed_tile = tile;
    /* The file's bytes of this tensor were just read once, mapping them into the process;
     * from now on the packed copy serves (the file only for an odd last rows' tile, an
     * embedding row, an accelerator's upload), so let them go: without this the process
     * held every repacked model twice (a 4.4 GB file: 8.4 GB resident). */
    size_t src_bytes = (size_t)w->rows * w->row_bytes * (size_t)w->n_mat;
    if (ll_gguf_file_mapped(m->gguf, w->data, src_bytes)) ll_release_mapped(w->data, src_bytes);
}

llambda_status ll_bind_dense_globals(llambda_model *m) {
    ll_hparams *h = &m->hp;
    llambda_status st;
    if ((st = ll_bind(m, &m->tok_embd, 1, h->n_embd, h->n_vocab, "token_embd.weight"))) return st;
    if ((st = ll_bind(m, &m->output_norm, 1, h->n_embd, 0, "output_norm.weight"))) return st;
    if ((st = ll_bind(m, &m->output, 0, h->n_embd, h->n_vocab, "output.weight"))) return st;
    if (!m->output.data) { m->output = m->tok_embd; ll_weight_repack(m, &m->output); } /* tied embeddings */
    return LLAMBDA_OK;
}

void ll_hparams_uniform(ll_hparams *h, const float *rope_freqs) {
    for (int l = 0; l < h->n_layer; l++) {
        h->head_dim_l[l] = h->head_dim; h->n_head_kv_l[l] = h->n_head_kv; h->n_ff_l[l] = h->n_ff;
        h->n_rot_l[l] = h->n_rot; h->swa_l[l] = 0; h->kv_src_l[l] = l;
        h->rope_base_l[l] = h->rope_base; h->rope_freqs_l[l] = rope_freqs;
    }
}

llambda_status ll_load_attention_hparams(llambda_model *m) {
    ll_hparams *h = &m->hp;
    llambda_status st;
    if ((st = ll_hp_u32(m, "context_length", 1, 0, &h->n_ctx_train)) ||
        (st = ll_hp_u32(m, "embedding_length", 1, 0, &h->n_embd)) ||
        (st = ll_hp_u32(m, "block_count", 1, 0, &h->n_layer))) return st;
    if (h->n_layer < 1 || h->n_layer > LL_MAX_LAYERS)
        return ll_error(LLAMBDA_ERR_FORMAT, "%s.block_count = %d is out of range (1..%d)", arch_of(m), h->n_layer, LL_MAX_LAYERS);
    if (h->n_embd < 1) return ll_error(LLAMBDA_ERR_FORMAT, "%s.embedding_length must be positive", arch_of(m));
    if ((st = ll_hp_u32(m, "feed_forward_length", 1, 0, &h->n_ff)) ||
        (st = ll_hp_u32(m, "attention.head_count", 1, 0, &h->n_head))) return st;
    if (h->n_head < 1) return ll_error(LLAMBDA_ERR_FORMAT, "%s.attention.head_count must be positive", arch_of(m));
    if ((st = ll_hp_u32(m, "attention.head_count_kv", 0, h->n_head, &h->n_head_kv))) return st;
    if (h->n_head_kv < 1 || h->n_head % h->n_head_kv)
        return ll_error(LLAMBDA_ERR_FORMAT, "%s.attention.head_count_kv = %d does not divide head_count = %d", arch_of(m), h->n_head_kv, h->n_head);
    int kl, vl;
    if ((st = ll_hp_u32(m, "attention.key_length", 0, h->n_embd / h->n_head, &kl)) ||
        (st = ll_hp_u32(m, "attention.value_length", 0, h->n_embd / h->n_head, &vl))) return st;
    if (kl != vl || kl < 2 || kl % 2)
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "%s: key_length %d and value_length %d must be equal and even", arch_of(m), kl, vl);
    h->head_dim = kl;
    if ((st = ll_hp_width(m, "head_count x key_length", h->n_head, kl)) ||
        (st = ll_hp_width(m, "embedding_length x feed_forward_length", h->n_embd, h->n_ff > 0 ? h->n_ff : 1))) return st;
    if ((st = ll_hp_u32(m, "rope.dimension_count", 0, kl, &h->n_rot))) return st;
    if (h->n_rot != kl) return ll_error(LLAMBDA_ERR_FORMAT, "%s.rope.dimension_count = %d differs from the head size %d", arch_of(m), h->n_rot, kl);
    if ((st = ll_hp_f32(m, "attention.layer_norm_rms_epsilon", 1, 0, &h->eps)) ||
        (st = ll_hp_f32(m, "rope.freq_base", 0, 10000.f, &h->rope_base)) ||
        (st = ll_hp_f32(m, "rope.scaling.attn_factor", 0, 1.f, &h->rope_attn_factor))) return st;
    float factor = 0;
    if ((st = ll_hp_f32(m, "rope.scaling.factor", 0, 0.f, &factor))) return st;
    if (factor == 0 && (st = ll_hp_f32(m, "rope.scale_linear", 0, 0.f, &factor))) return st;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch_of(m));
    const char *stype = llambda_gguf_get_str(m->gguf, key, "linear");
    if (!strcmp(stype, "none")) factor = 0;
    else if (strcmp(stype, "linear") != 0)
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "%s = '%s': only linear RoPE scaling is implemented", key, stype);
    h->rope_freq_scale = factor > 0 ? 1.f / factor : 1.f;
    /* the vocabulary decides n_vocab */
    h->n_vocab = m->vocab.n_vocab;
    if (h->n_vocab <= 0) {
        const llambda_gguf_tensor *t = llambda_gguf_find_tensor(m->gguf, "token_embd.weight");
        if (!t) return ll_error(LLAMBDA_ERR_FORMAT, "missing tensor 'token_embd.weight'");
        h->n_vocab = (int)t->ne[1];
    }
    return LLAMBDA_OK;
}

/* ------------------------------------------------------------------ load / free */

llambda_model_params llambda_model_default_params(void) {
    llambda_model_params p = {0};
    p.use_mmap = true;
    return p;
}

/* Backends and offloads asked for at load: an unavailable backend or a failed setup is a
 * warning (the CPU computes), a malformed request an error. */
static llambda_status load_accelerators(llambda_model *m, const llambda_model_params *p) {
    llambda_status st = llambda_backends_load(m, p->backends);
    if (st) return st;
    int want = (p->offload_tensors && *p->offload_tensors) || (p->offload_layers && *p->offload_layers);
    if (!want) return LLAMBDA_OK;
    if (!(p->backends && *p->backends)) return ll_error(LLAMBDA_ERR_ARG, "offloading projections needs an accelerator backend (--backend)");
    if ((st = llambda_offload_register(m, p->offload_tensors, p->offload_layers, p->offload_roles))) return st;
    if (m->n_backends) llambda_offload_enable(m);   /* failures were reported; the CPU computes */
    return LLAMBDA_OK;
}

llambda_status llambda_model_load(const char *path, const llambda_model_params *params, llambda_model **out) {
    *out = NULL;
    llambda_model_params p = params ? *params : llambda_model_default_params();
    ll_init_tables();
    llambda_model *m = calloc(1, sizeof *m);
    if (!m) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&m->pool_once, NULL);
    if (p.progress && !p.progress(0.f, p.progress_user)) { free(m); return ll_error(LLAMBDA_ERR_ARG, "load cancelled"); }
    m->gguf = llambda_gguf_open(path);
    if (!m->gguf) { free(m); return LLAMBDA_ERR_FORMAT; }
    const char *arch = llambda_gguf_get_str(m->gguf, "general.architecture", NULL);
    llambda_status st;
    if (!arch) { st = ll_error(LLAMBDA_ERR_FORMAT, "%s: missing required metadata key 'general.architecture'", path); goto fail; }
    snprintf(m->arch_name, sizeof m->arch_name, "%s", arch);
    snprintf(m->name, sizeof m->name, "%s", llambda_gguf_get_str(m->gguf, "general.name", arch));
    for (int i = 0; arch_registry[i]; i++) if (!strcmp(arch_registry[i]->name, arch)) m->arch = arch_registry[i];
    if (p.vocab_only) {
        m->vocab_only = true;
        if ((st = ll_vocab_load(&m->vocab, m->gguf))) goto fail_path;
        if (m->vocab.type == LL_VOCAB_NONE) { st = ll_error(LLAMBDA_ERR_FORMAT, "%s: no tokenizer (tokenizer.ggml.model)", path); goto fail; }
        m->hp.n_vocab = m->vocab.n_vocab;
        *out = m;
        return LLAMBDA_OK;
    }
    if (!m->arch) { st = ll_error(LLAMBDA_ERR_UNSUPPORTED, "%s: unknown architecture '%s'", path, arch); goto fail; }
    if ((st = ll_vocab_load(&m->vocab, m->gguf))) goto fail_path;
    uint64_t avail = ll_mem_available();
    m->pack_budget = avail ? avail / 2 : UINT64_MAX;   /* repacked copies never push the machine into swap */
    if ((st = m->arch->load(m))) goto fail_path;
    if (m->vocab.n_vocab && m->vocab.n_vocab != m->hp.n_vocab) {
        st = ll_error(LLAMBDA_ERR_FORMAT, "vocabulary has %d tokens but the embedding has %d rows", m->vocab.n_vocab, m->hp.n_vocab);
        goto fail_path;
    }
    m->n_threads = p.n_threads > 0 ? p.n_threads : ll_n_cpus();
    if ((st = load_accelerators(m, &p))) goto fail;
    if (!p.use_mmap) {
        /* copy-in mode: touch every page now so the weights are resident */
        volatile uint8_t sink = 0;
        for (int64_t i = 0; i < llambda_gguf_n_tensors(m->gguf); i++) {
            const llambda_gguf_tensor *t = llambda_gguf_tensor_at(m->gguf, i);
            for (uint64_t o = 0; o < t->nbytes; o += 4096) sink ^= ((const uint8_t *)t->data)[o];
        }
        (void)sink;
    }
    if (p.progress) p.progress(1.f, p.progress_user);
    *out = m;
    return LLAMBDA_OK;
fail_path: {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: %s", path, llambda_last_error());
        ll_error(st, "%s", msg);
    }
fail:
    llambda_model_free(m);
    return st;
}

void llambda_model_free(llambda_model *m) {
    if (!m) return;
    ll_backends_free(m);
    for (struct ll_packbuf *b = m->packs, *nb; b; b = nb) { nb = b->next; ll_free_large(b->data, b->size); free(b); }
    ll_pool_free(m->shared_pool);
    pthread_mutex_destroy(&m->pool_once);
    ll_vocab_free(&m->vocab);
    llambda_gguf_close(m->gguf);
    free(m);
}

const char *llambda_model_arch(const llambda_model *m) { return m->arch_name; }
const char *llambda_model_name(const llambda_model *m) { return m->name; }
int llambda_model_n_vocab(const llambda_model *m) { return m->hp.n_vocab; }
int llambda_model_n_ctx_train(const llambda_model *m) { return m->hp.n_ctx_train; }
int llambda_model_n_embd(const llambda_model *m) { return m->hp.n_embd; }
int llambda_model_n_layer(const llambda_model *m) { return m->hp.n_layer; }
int64_t llambda_model_n_params(const llambda_model *m) { return m->n_params; }
uint64_t llambda_model_size_bytes(const llambda_model *m) { return m->weight_bytes; }
uint64_t llambda_model_repacked_bytes(const llambda_model *m) { return m->packed_bytes; }
int32_t llambda_token_bos(const llambda_model *m) { return m->vocab.bos; }
int32_t llambda_token_eos(const llambda_model *m) { return m->vocab.eos; }
bool llambda_token_is_eog(const llambda_model *m, int32_t t) { return t >= 0 && t < m->vocab.n_vocab && m->vocab.is_eog[t]; }
const char *llambda_model_chat_template(const llambda_model *m) { return m->vocab.chat_template; }
const llambda_gguf *llambda_model_gguf(const llambda_model *m) { return m->gguf; }

/* ------------------------------------------------------------------ tokenizer API */

int llambda_tokenize(const llambda_model *m, const char *text, size_t len, int32_t *tokens, int max, bool add_special, bool parse_special) {
    return ll_tokenize(&m->vocab, text, len, tokens, max, add_special, parse_special);
}

int llambda_token_to_piece(const llambda_model *m, int32_t tok, char *buf, int size, bool special) {
    return ll_token_to_piece(&m->vocab, tok, buf, size, special);
}

/* Remove the spaces SentencePiece-free BPE decoders drop around punctuation. */
static int clean_spaces(char *s, int n) {
    int o = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] == ' ' && i + 1 < n) {
            char c = s[i + 1];
            if (c == '?' || c == '!' || c == '.' || c == ',') continue;
            if (c == '\'' && i + 2 < n && s[i + 2] == ' ' && o > 0 && s[o - 1] != ' ') {
                /* lone ' between spaces: drop both spaces */
                s[o++] = '\''; i += 2; continue;
            }
            if (c == '\'' && i + 2 < n) {
                char d = s[i + 2], e = i + 3 < n ? s[i + 3] : 0;
                if (d == 's' || d == 'm' || (d == 'r' && e == 'e') || (d == 'v' && e == 'e')) continue;
            }
        }
        s[o++] = s[i];
    }
    return o;
}

int llambda_detokenize(const llambda_model *m, const int32_t *tokens, int n, char *buf, int size, bool remove_special, bool unparse_special) {
    const ll_vocab *v = &m->vocab;
    int cap = 256, o = 0;
    char *tmp = malloc((size_t)cap);
    if (!tmp) return -1;
    int first = 0, last = n;
    if (remove_special && v->add_bos && n > 0 && tokens[0] == v->bos) first = 1;
    if (remove_special && v->add_eos && last > first && tokens[last - 1] == v->eos) last--;
    int strip = v->add_space_prefix && v->type == LL_VOCAB_SPM && first == 0; /* a dropped BOS cancels the strip */
    for (int i = first; i < last; i++) {
        int k;
        while ((k = ll_token_to_piece(v, tokens[i], tmp + o, cap - o, unparse_special)) < 0) {
            char *nt = realloc(tmp, (size_t)cap * 2);
            if (!nt) { free(tmp); return -1; }
            tmp = nt; cap *= 2;
        }
        if (strip) {
            /* only the first piece may lose its leading space */
            if (k > 0 && tmp[o] == ' ') { memmove(tmp + o, tmp + o + 1, (size_t)k - 1); k--; }
            strip = 0;
        }
        o += k;
    }
    if (v->clean_spaces && v->type == LL_VOCAB_BPE) o = clean_spaces(tmp, o);
    if (buf && size > 0) {
        memcpy(buf, tmp, (size_t)(o < size ? o : size));
        if (o < size) buf[o] = 0;
    }
    free(tmp);
    return o;
}

int llambda_detok_stream_push(const llambda_model *m, llambda_detok_stream *s, int32_t tok, char *out, int out_size) {
    char piece[256];
    int k = ll_token_to_piece(&m->vocab, tok, piece, sizeof piece, false);
    if (k < 0) k = 0; /* longer than 256 bytes: not in practice */
    char all[8 + 256];
    memcpy(all, s->pending, (size_t)s->n_pending);
    memcpy(all + s->n_pending, piece, (size_t)k);
    int n = s->n_pending + k;
    /* keep back an incomplete UTF-8 sequence at the end */
    int keep = 0;
    for (int i = n - 1; i >= 0 && i >= n - 4; i--) {
        uint8_t c = (uint8_t)all[i];
        if ((c & 0xC0) == 0x80) continue;
        int l = ll_utf8_len(c);
        if (c >= 0xC0 && n - i < l) keep = n - i;
        break;
    }
    int emit = n - keep;
    if (emit > out_size - 1) emit = out_size - 1;
    memcpy(out, all, (size_t)emit);
    out[emit] = 0;
    s->n_pending = n - emit;
    if (s->n_pending > 7) s->n_pending = 0;
    memmove(s->pending, all + emit, (size_t)s->n_pending);
    return emit;
}
