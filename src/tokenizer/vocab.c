/* Vocabulary loading (tokenizer.ggml.*), special tokens and the end-of-generation set,
 * token pieces, and the top-level tokenize with special-token partitioning. */
#include "vocab.h"
#include "../internal.h"
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------ string -> id map */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)s[i]; h *= 1099511628211ull; }
    return h;
}

int ll_strmap_init(ll_strmap *m, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return -1;
    for (uint64_t i = 0; i < cap; i++) m->slots[i] = -1;
    m->mask = cap - 1;
    return 0;
}
void ll_strmap_free(ll_strmap *m) { free(m->slots); m->slots = NULL; }

/* Insert id for strs[id]; keeps the first id on duplicates. */
static void strmap_put(ll_strmap *m, char *const *strs, const int *lens, int64_t id) {
    size_t n = (size_t)lens[id];
    for (uint64_t h = hash_bytes(strs[id], n) & m->mask;; h = (h + 1) & m->mask) {
        int64_t s = m->slots[h];
        if (s < 0) { m->slots[h] = id; return; }
        if ((size_t)lens[s] == n && memcmp(strs[s], strs[id], n) == 0) return;
    }
}

static int64_t strmap_get(const ll_strmap *m, char *const *strs, const int *lens, const char *t, size_t n) {
    if (!m->slots) return -1;
    for (uint64_t h = hash_bytes(t, n) & m->mask;; h = (h + 1) & m->mask) {
        int64_t s = m->slots[h];
        if (s < 0) return -1;
        if ((size_t)lens[s] == n && memcmp(strs[s], t, n) == 0) return s;
    }
}

int32_t ll_vocab_find(const ll_vocab *v, const char *text, size_t len) {
    return (int32_t)strmap_get(&v->tok_map, v->text, v->len, text, len);
}

int ll_tokbuf_push(ll_tokbuf *b, int32_t id) {
    if (b->n == b->cap) {
        int nc = b->cap ? b->cap * 2 : 64;
        int32_t *n = realloc(b->ids, (size_t)nc * sizeof *n);
        if (!n) return -1;
        b->ids = n; b->cap = nc;
    }
    b->ids[b->n++] = id;
    return 0;
}

/* ------------------------------------------------------------------ loading */

static int32_t special_id(const llambda_gguf *g, const char *key, int32_t def, int n_vocab) {
    int found;
    int64_t v = llambda_gguf_get_int(g, key, def, &found);
    if (found != 1) return def;
    return v >= 0 && v < n_vocab ? (int32_t)v : -1;
}

static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", NULL};
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
    "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>", NULL};

static int32_t find_text(const ll_vocab *v, const char *t) { return ll_vocab_find(v, t, strlen(t)); }

static void mark_eog(ll_vocab *v, int32_t id) {
    if (id < 0) return;
    v->is_eog[id] = 1;
    v->attr[id] = (v->attr[id] & ~(LL_ATTR_NORMAL | LL_ATTR_USER_DEFINED)) | LL_ATTR_CONTROL;
}

static void build_eog(ll_vocab *v, const llambda_gguf *g) {
    if (v->eot < 0)
        for (int i = 0; eot_texts[i]; i++) if ((v->eot = find_text(v, eot_texts[i])) >= 0) break;
    if (v->eom < 0) v->eom = find_text(v, "<|eom_id|>");
    int has_tool_resp = find_text(v, "<|tool_response>") >= 0;
    int drop_end = (find_text(v, "<|return|>") >= 0 && find_text(v, "<|call|>") >= 0) ||
                   (find_text(v, "<|calls|>") >= 0 && find_text(v, "<|flush|>") >= 0);
    for (int i = 0; eog_texts[i]; i++) {
        if (!strcmp(eog_texts[i], "<|end|>") && drop_end) continue;
        if (!strcmp(eog_texts[i], "</s>") && has_tool_resp) {
            int32_t id = find_text(v, "</s>");
            if (id >= 0) v->attr[id] = LL_ATTR_NORMAL;
            continue;
        }
        mark_eog(v, find_text(v, eog_texts[i]));
    }
    static const char *const fim_keys[] = {"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id",
                                           "tokenizer.ggml.fim_sep_token_id", NULL};
    for (int i = 0; fim_keys[i]; i++) mark_eog(v, special_id(g, fim_keys[i], -1, v->n_vocab));
    static const char *const fim_texts[] = {"<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<fim-pad>", NULL};
    for (int i = 0; fim_texts[i]; i++) mark_eog(v, find_text(v, fim_texts[i]));
    mark_eog(v, v->eos); mark_eog(v, v->eot); mark_eog(v, v->eom);
    if (has_tool_resp) { int32_t id = find_text(v, "</s>"); if (id >= 0) v->is_eog[id] = 0; }
}

static int by_len_desc(const void *a, const void *b, void *vv) {
    const ll_vocab *v = vv;
    int la = v->len[*(const int32_t *)a], lb = v->len[*(const int32_t *)b];
    if (la != lb) return lb - la;
    return *(const int32_t *)a - *(const int32_t *)b;
}

static llambda_status vocab_fail(ll_vocab *v, const char *msg, const char *key) {
    ll_vocab_free(v);
    return ll_error(LLAMBDA_ERR_FORMAT, "tokenizer: %s (%s)", msg, key);
}

llambda_status ll_vocab_load(ll_vocab *v, const llambda_gguf *g) {
    memset(v, 0, sizeof *v);
    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = -1;
    const char *model = llambda_gguf_get_str(g, "tokenizer.ggml.model", NULL);
    if (!model) return LLAMBDA_OK; /* no tokenizer: ids only */
    const llambda_gguf_value *toks = llambda_gguf_get(g, "tokenizer.ggml.tokens");
    if (!toks || toks->type != LLAMBDA_GGUF_ARRAY || toks->elem_type != LLAMBDA_GGUF_STRING || toks->count == 0)
        return vocab_fail(v, "missing or malformed token list", "tokenizer.ggml.tokens");
    if (toks->count > (1u << 24)) return vocab_fail(v, "token list too long", "tokenizer.ggml.tokens");
    int n = v->n_vocab = (int)toks->count;
    v->text = calloc((size_t)n, sizeof *v->text);
    v->len = calloc((size_t)n, sizeof *v->len);
    v->scores = calloc((size_t)n, sizeof *v->scores);
    v->attr = calloc((size_t)n, sizeof *v->attr);
    v->is_eog = calloc((size_t)n, 1);
    if (!v->text || !v->len || !v->scores || !v->attr || !v->is_eog || ll_strmap_init(&v->tok_map, n))
        return vocab_fail(v, "out of memory", "tokenizer.ggml.tokens");
    const llambda_gguf_value *sc = llambda_gguf_get(g, "tokenizer.ggml.scores");
    const llambda_gguf_value *tt = llambda_gguf_get(g, "tokenizer.ggml.token_type");
    if (sc && (sc->type != LLAMBDA_GGUF_ARRAY || sc->count != (uint64_t)n)) return vocab_fail(v, "scores length differs from the token count", "tokenizer.ggml.scores");
    if (tt && (tt->type != LLAMBDA_GGUF_ARRAY || tt->count != (uint64_t)n)) return vocab_fail(v, "token_type length differs from the token count", "tokenizer.ggml.token_type");
    for (int i = 0; i < n; i++) {
        llambda_gguf_str s = llambda_gguf_arr_str(toks, (uint64_t)i);
        char tmp[32];
        if (s.len == 0) { snprintf(tmp, sizeof tmp, "[EMPTY_%d]", i); s.ptr = tmp; s.len = strlen(tmp); }
        if (s.len > (1u << 20)) return vocab_fail(v, "token text too long", "tokenizer.ggml.tokens");
        v->text[i] = malloc(s.len + 1);
        if (!v->text[i]) return vocab_fail(v, "out of memory", "tokenizer.ggml.tokens");
        memcpy(v->text[i], s.ptr, s.len);
        v->text[i][s.len] = 0;
        v->len[i] = (int)s.len;
        v->scores[i] = sc ? (float)llambda_gguf_arr_num(sc, (uint64_t)i) : 0.f;
        int type = tt ? (int)llambda_gguf_arr_num(tt, (uint64_t)i) : 1;
        switch (type) {
        case 2: v->attr[i] = LL_ATTR_UNKNOWN; break;
        case 3: v->attr[i] = LL_ATTR_CONTROL; break;
        case 4: v->attr[i] = LL_ATTR_USER_DEFINED; break;
        case 5: v->attr[i] = LL_ATTR_UNUSED; break;
        case 6: v->attr[i] = LL_ATTR_BYTE; break;
        case 0: v->attr[i] = 0; break;
        default: v->attr[i] = LL_ATTR_NORMAL;
        }
        strmap_put(&v->tok_map, v->text, v->len, i);
    }
    snprintf(v->pre, sizeof v->pre, "%s", llambda_gguf_get_str(g, "tokenizer.ggml.pre", "default"));
    if (!strcmp(model, "llama")) {
        v->type = LL_VOCAB_SPM;
        v->bos = 1; v->eos = 2; v->unk = 0;
        v->add_bos = 1; v->add_space_prefix = 1;
    } else if (!strcmp(model, "gpt2")) {
        v->type = LL_VOCAB_BPE;
        v->bos = v->eos = 11;
        v->byte_encode = 1; v->clean_spaces = 1;
    } else if (!strcmp(model, "gemma4")) {
        v->type = LL_VOCAB_GEMMA4;
        v->escape_ws = 1; v->add_bos = 1;
        snprintf(v->pre, sizeof v->pre, "gemma4");
    } else {
        ll_vocab_free(v);
        return ll_error(LLAMBDA_ERR_UNSUPPORTED, "tokenizer: model '%s' is not supported (llama, gpt2, gemma4)", model);
    }
    if (v->type != LL_VOCAB_SPM) {
        llambda_status st = ll_bpe_setup(v, v->pre);
        if (!st) st = ll_bpe_load_merges(v, g);
        if (st) { ll_vocab_free(v); return st; }
    }
    v->bos = special_id(g, "tokenizer.ggml.bos_token_id", v->bos < n ? v->bos : -1, n);
    v->eos = special_id(g, "tokenizer.ggml.eos_token_id", v->eos < n ? v->eos : -1, n);
    v->eot = special_id(g, "tokenizer.ggml.eot_token_id", -1, n);
    v->eom = special_id(g, "tokenizer.ggml.eom_token_id", -1, n);
    v->unk = special_id(g, "tokenizer.ggml.unknown_token_id", v->unk < n ? v->unk : -1, n);
    v->pad = special_id(g, "tokenizer.ggml.padding_token_id", -1, n);
    v->add_bos = llambda_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", v->add_bos);
    v->add_eos = llambda_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", v->add_eos);
    v->add_space_prefix = llambda_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);
    if (v->type == LL_VOCAB_GEMMA4) v->add_bos = 1;
    for (int b = 0; b < 256; b++) {
        char t[8];
        snprintf(t, sizeof t, "<0x%02X>", b);
        v->byte_tokens[b] = find_text(v, t);
    }
    build_eog(v, g);
    /* special-token candidates: control, user-defined, unknown; longest first */
    v->special = malloc((size_t)n * sizeof *v->special);
    if (!v->special) return vocab_fail(v, "out of memory", "tokenizer.ggml.tokens");
    for (int i = 0; i < n; i++)
        if (v->attr[i] & (LL_ATTR_CONTROL | LL_ATTR_USER_DEFINED | LL_ATTR_UNKNOWN)) v->special[v->n_special++] = i;
    qsort_r(v->special, (size_t)v->n_special, sizeof *v->special, by_len_desc, v);
    const char *tmpl = llambda_gguf_get_str(g, "tokenizer.chat_template", NULL);
    if (tmpl && !(v->chat_template = strdup(tmpl))) return vocab_fail(v, "out of memory", "tokenizer.chat_template");
    return LLAMBDA_OK;
}

void ll_vocab_free(ll_vocab *v) {
    if (v->text) for (int i = 0; i < v->n_vocab; i++) free(v->text[i]);
    free(v->text); free(v->len); free(v->scores); free(v->attr); free(v->is_eog); free(v->special);
    free(v->chat_template);
    ll_strmap_free(&v->tok_map);
    ll_bpe_free(v);
    memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------------ pieces */

static int put(char *buf, int size, int o, const char *s, int n) {
    if (o + n <= size) memcpy(buf + o, s, (size_t)n);
    return o + n;
}

/* Returns bytes written, or -needed when buf is too small. */
int ll_token_to_piece(const ll_vocab *v, int32_t tok, char *buf, int size, int special) {
    if (tok < 0 || tok >= v->n_vocab) return 0;
    int attr = v->attr[tok], o = 0;
    const char *t = v->text[tok];
    int n = v->len[tok];
    if (attr & (LL_ATTR_CONTROL | LL_ATTR_UNKNOWN)) {
        if (special) o = put(buf, size, o, t, n);
    } else if (attr & LL_ATTR_USER_DEFINED) {
        o = put(buf, size, o, t, n);
    } else if (attr & LL_ATTR_BYTE) {
        unsigned b = 0;
        if (sscanf(t, "<0x%02X>", &b) == 1) { char c = (char)b; o = put(buf, size, o, &c, 1); }
    } else if (v->type == LL_VOCAB_BPE) {
        for (int i = 0; i < n;) {
            int l = ll_utf8_len((uint8_t)t[i]);
            if (i + l > n) l = n - i;
            uint32_t cp = (uint8_t)t[i] & (l == 1 ? 0x7f : l == 2 ? 0x1f : l == 3 ? 0x0f : 0x07);
            for (int k = 1; k < l; k++) cp = (cp << 6) | ((uint8_t)t[i + k] & 0x3f);
            int b = ll_cp_to_byte(cp);
            if (b >= 0) { char c = (char)b; o = put(buf, size, o, &c, 1); }
            else { char u[32]; int k = snprintf(u, sizeof u, "[UNK_BYTE_0x%02x]", (uint8_t)t[i]); o = put(buf, size, o, u, k); }
            i += l;
        }
    } else {
        /* SentencePiece style: U+2581 is a space */
        for (int i = 0; i < n;) {
            if (i + 2 < n && (uint8_t)t[i] == 0xE2 && (uint8_t)t[i + 1] == 0x96 && (uint8_t)t[i + 2] == 0x81) {
                o = put(buf, size, o, " ", 1); i += 3;
            } else { o = put(buf, size, o, t + i, 1); i++; }
        }
    }
    return o <= size ? o : -o;
}

/* ------------------------------------------------------------------ tokenize */

typedef struct frag { int32_t id; size_t off, len; } frag; /* id >= 0: token; else raw text */

static int frag_push(frag **f, int *n, int *cap, frag x) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        frag *nf = realloc(*f, (size_t)nc * sizeof *nf);
        if (!nf) return -1;
        *f = nf; *cap = nc;
    }
    (*f)[(*n)++] = x;
    return 0;
}

/* Split raw fragments at every occurrence of each special token, longest tokens first. */
static int partition(const ll_vocab *v, const char *text, size_t len, int parse_special, frag **out, int *nout) {
    frag *f = NULL; int n = 0, cap = 0;
    if (len && frag_push(&f, &n, &cap, (frag){-1, 0, len})) return -1;
    for (int s = 0; s < v->n_special; s++) {
        int32_t id = v->special[s];
        if (!parse_special && !(v->attr[id] & LL_ATTR_USER_DEFINED)) continue;
        const char *st = v->text[id];
        size_t sl = (size_t)v->len[id];
        for (int i = 0; i < n; i++) {
            if (f[i].id >= 0 || f[i].len < sl) continue;
            const char *base = text + f[i].off;
            const char *hit = memmem(base, f[i].len, st, sl);
            if (!hit) continue;
            size_t lo = (size_t)(hit - base), rest_off = f[i].off + lo + sl, rest_len = f[i].len - lo - sl;
            frag left = {-1, f[i].off, lo}, tok = {id, 0, 0}, right = {-1, rest_off, rest_len};
            /* replace f[i] by [left] tok [right]; continue scanning in right */
            int add = (lo ? 1 : 0) + 1 + (rest_len ? 1 : 0) - 1;
            for (int k = 0; k < add; k++) if (frag_push(&f, &n, &cap, (frag){0, 0, 0})) { free(f); return -1; }
            memmove(&f[i + 1 + add], &f[i + 1], (size_t)(n - add - i - 1) * sizeof *f);
            int j = i;
            if (lo) f[j++] = left;
            f[j++] = tok;
            if (rest_len) f[j] = right;
            i = j - 1; /* loop increments to the right part */
        }
    }
    *out = f; *nout = n;
    return 0;
}

int ll_tokenize(const ll_vocab *v, const char *text, size_t len, int32_t *out, int max, int add_special, int parse_special) {
    if (v->type == LL_VOCAB_NONE) { ll_error(LLAMBDA_ERR_UNSUPPORTED, "model has no tokenizer"); return -1; }
    frag *f = NULL; int nf = 0;
    if (partition(v, text, len, parse_special, &f, &nf)) { ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); return -1; }
    ll_tokbuf b = {0};
    int prev_special = 1;
    if (add_special && v->add_bos && v->bos >= 0) ll_tokbuf_push(&b, v->bos);
    char *tmp = NULL;
    for (int i = 0; i < nf; i++) {
        if (f[i].id >= 0) { ll_tokbuf_push(&b, f[i].id); prev_special = 1; continue; }
        if (v->type == LL_VOCAB_SPM) {
            const char *s = text + f[i].off;
            size_t l = f[i].len;
            if (v->add_space_prefix && prev_special) {
                char *t = realloc(tmp, l + 1);
                if (!t) break;
                tmp = t; tmp[0] = ' '; memcpy(tmp + 1, s, l);
                s = tmp; l++;
            }
            ll_spm_tokenize(v, s, l, &b);
        } else ll_bpe_tokenize(v, text + f[i].off, f[i].len, &b);
        prev_special = 0;
    }
    if (add_special && v->add_eos && v->eos >= 0) ll_tokbuf_push(&b, v->eos);
    free(tmp); free(f);
    for (int i = 0; i < b.n && i < max; i++) out[i] = b.ids[i];
    int n = b.n;
    free(b.ids);
    return n;
}
