/* Byte-level BPE (tokenizer.ggml.model = gpt2) and the Gemma 4 BPE variant.
 * Pre-tokenization uses PCRE2 (UTF + UCP) with the regexes of tokenizer.ggml.pre; every
 * match and every gap between matches becomes a word. Words are merged by rank. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "vocab.h"
#include "merge.h"
#include "../internal.h"
#include <pcre2.h>
#include <stdlib.h>

#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
static const char *const re_llama3 =
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const re_qwen2 =
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const re_gpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
static const char *const re_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+", "[0-9][0-9][0-9]"};
static const char *const re_gemma4 = "[^\\n]+|[\\n]+";

static const char *const pre_llama3[] = {"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral",
                                         "midm-2.0", "lfm2", "jina-v5-nano", NULL};
static const char *const pre_llama3_regex_only[] = {"dbrx", "smaug-bpe", NULL};
static const char *const pre_qwen2[] = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", NULL};
static const char *const pre_gpt2[] = {"gpt-2", "phi-2", "mpt", "olmo", "jais", "starcoder", "refact",
                                       "command-r", "stablelm2", "gpt-neox", "codeshell", "bloom", "gpt3-finnish", NULL};

static int in_list(const char *s, const char *const *l) {
    for (; *l; l++) if (!strcmp(s, *l)) return 1;
    return 0;
}

static llambda_status add_regex(ll_vocab *v, const char *re) {
    int err; PCRE2_SIZE off;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (!c) return ll_error(LLAMBDA_ERR_FORMAT, "tokenizer: cannot compile pre-tokenizer regex (error %d at %zu)", err, (size_t)off);
    pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);
    v->regex[v->n_regex++] = c;
    return LLAMBDA_OK;
}

llambda_status ll_bpe_setup(ll_vocab *v, const char *pre) {
    llambda_status st = LLAMBDA_OK;
    if (v->type == LL_VOCAB_GEMMA4) st = add_regex(v, re_gemma4);
    else if (in_list(pre, pre_llama3)) { v->ignore_merges = 1; st = add_regex(v, re_llama3); }
    else if (in_list(pre, pre_llama3_regex_only)) st = add_regex(v, re_llama3);
    else if (in_list(pre, pre_qwen2)) { v->clean_spaces = 0; st = add_regex(v, re_qwen2); }
    else if (in_list(pre, pre_gpt2)) st = add_regex(v, re_gpt2);
    else if (!strcmp(pre, "default") || !*pre) for (int i = 0; i < 4 && !st; i++) st = add_regex(v, re_default[i]);
    else return ll_error(LLAMBDA_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported", pre);
    return st;
}

void ll_bpe_free(ll_vocab *v) {
    for (int i = 0; i < v->n_regex; i++) pcre2_code_free(v->regex[i]);
    v->n_regex = 0;
    if (v->merges) for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->merges); v->merges = NULL;
    ll_strmap_free(&v->merge_map);
}

/* ------------------------------------------------------------------ byte <-> unicode */

static int byte_is_printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

uint32_t ll_byte_to_cp(uint8_t b) {
    if (byte_is_printable(b)) return b;
    int k = 0;
    for (int i = 0; i < b; i++) k += !byte_is_printable(i);
    return 0x100 + (uint32_t)k;
}

int ll_cp_to_byte(uint32_t cp) {
    if (cp < 0x100 && byte_is_printable((int)cp)) return (int)cp;
    if (cp >= 0x100 && cp < 0x100 + 68) {
        int k = (int)(cp - 0x100);
        for (int b = 0; b < 256; b++) if (!byte_is_printable(b) && k-- == 0) return b;
    }
    return -1;
}

int ll_utf8_encode(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) { o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F)); return 3; }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F)); o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Replace invalid UTF-8 by U+FFFD, one byte at a time (as llama.cpp's decoder does). */
static char *sanitize_utf8(const char *s, size_t len, size_t *out_len) {
    char *o = malloc(len * 3 + 1);
    if (!o) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint8_t c = (uint8_t)s[i];
        int l = ll_utf8_len(c), ok = 1;
        if (l == 1 && c >= 0x80) ok = 0;
        if (i + (size_t)l > len) ok = 0;
        uint32_t cp = 0;
        if (ok && l > 1) {
            cp = c & (l == 2 ? 0x1f : l == 3 ? 0x0f : 0x07);
            for (int k = 1; k < l; k++) {
                uint8_t cc = (uint8_t)s[i + (size_t)k];
                if ((cc & 0xC0) != 0x80) { ok = 0; break; }
                cp = (cp << 6) | (cc & 0x3f);
            }
            if (ok && ((l == 2 && cp < 0x80) || (l == 3 && cp < 0x800) || (l == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                       (cp >= 0xD800 && cp <= 0xDFFF))) ok = 0;
        }
        if (ok) { memcpy(o + n, s + i, (size_t)l); n += (size_t)l; i += (size_t)l; }
        else { o[n++] = (char)0xEF; o[n++] = (char)0xBF; o[n++] = (char)0xBD; i++; }
    }
    *out_len = n;
    return o;
}

/* ------------------------------------------------------------------ pre-tokenization */

typedef struct span { size_t off, len; } span;
typedef struct spans { span *a; int n, cap; } spans;

static void spans_push(spans *s, size_t off, size_t len) {
    if (!len) return;
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        span *na = realloc(s->a, (size_t)nc * sizeof *na);
        if (!na) return;
        s->a = na; s->cap = nc;
    }
    s->a[s->n++] = (span){off, len};
}

/* Re-split every current span with regex re: matches and gaps both become spans. */
static void split_with(const pcre2_code *re, const char *text, spans *in, spans *out) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    for (int i = 0; i < in->n; i++) {
        size_t start = in->a[i].off, end = start + in->a[i].len, pos = start;
        while (pos < end) {
            int rc = pcre2_match(re, (PCRE2_SPTR)text, end, pos, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc < 0) break;
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            size_t ms = ov[0], me = ov[1];
            if (me == ms) { /* empty match: step one character */
                size_t l = (size_t)ll_utf8_len((uint8_t)text[pos]);
                pos += l;
                continue;
            }
            spans_push(out, pos, ms - pos);
            spans_push(out, ms, me - ms);
            pos = me;
        }
        spans_push(out, pos, end - pos);
    }
    pcre2_match_data_free(md);
}

/* ------------------------------------------------------------------ merging */

static int64_t merge_rank(const ll_vocab *v, const char *a, int la, const char *b, int lb) {
    char stack[256], *key = stack;
    size_t n = (size_t)la + 1 + (size_t)lb;
    if (n > sizeof stack && !(key = malloc(n))) return -1;
    memcpy(key, a, (size_t)la); key[la] = ' '; memcpy(key + la + 1, b, (size_t)lb);
    int64_t r = -1;
    if (v->merge_map.slots) r = ll_merge_lookup(v, key, n);
    if (key != stack) free(key);
    return r;
}

static void try_pair(const ll_vocab *v, const char *s, const ll_sym *sym, int l, int r, ll_heap *h) {
    if (l < 0 || r < 0) return;
    int64_t rank = merge_rank(v, s + sym[l].start, sym[l].len, s + sym[r].start, sym[r].len);
    if (rank < 0) return;
    heap_push(h, (ll_pair){(double)rank, l, r, sym[l].len + sym[r].len});
}

static void emit(const ll_vocab *v, const char *s, int len, ll_tokbuf *out) {
    int32_t id = ll_vocab_find(v, s, (size_t)len);
    if (id >= 0) { ll_tokbuf_push(out, id); return; }
    if (v->byte_encode) {
        /* each character of a byte-level symbol is one byte's token */
        for (int i = 0; i < len;) {
            int l = ll_utf8_len((uint8_t)s[i]);
            if (i + l > len) l = len - i;
            int32_t t = ll_vocab_find(v, s + i, (size_t)l);
            if (t >= 0) ll_tokbuf_push(out, t);
            i += l;
        }
    } else {
        for (int i = 0; i < len; i++) {
            int32_t t = v->byte_tokens[(uint8_t)s[i]];
            if (t >= 0) ll_tokbuf_push(out, t);
        }
    }
}

static void bpe_word(const ll_vocab *v, const char *w, int len, ll_tokbuf *out) {
    if (v->ignore_merges) {
        int32_t id = ll_vocab_find(v, w, (size_t)len);
        if (id >= 0) { ll_tokbuf_push(out, id); return; }
    }
    if (v->type == LL_VOCAB_GEMMA4) {
        int all_nl = 1;
        for (int i = 0; i < len; i++) if (w[i] != '\n') { all_nl = 0; break; }
        int32_t id = all_nl ? ll_vocab_find(v, w, (size_t)len) : -1;
        if (id >= 0) { ll_tokbuf_push(out, id); return; }
    }
    ll_sym *sym = malloc((size_t)(len + 1) * sizeof *sym);
    if (!sym) return;
    int n = 0;
    for (int i = 0; i < len;) {
        int l = ll_utf8_len((uint8_t)w[i]);
        if (i + l > len) l = len - i;
        sym[n] = (ll_sym){i, l, n - 1, -1};
        if (n > 0) sym[n - 1].next = n;
        n++;
        i += l;
    }
    ll_heap h = {0};
    for (int i = 0; i + 1 < n; i++) try_pair(v, w, sym, i, i + 1, &h);
    while (h.n) {
        ll_pair p = heap_pop(&h);
        if (sym[p.left].len == 0 || sym[p.right].len == 0 || sym[p.left].len + sym[p.right].len != p.size ||
            sym[p.left].next != p.right) continue;
        sym[p.left].len += sym[p.right].len;
        sym[p.right].len = 0;
        sym[p.left].next = sym[p.right].next;
        if (sym[p.right].next >= 0) sym[sym[p.right].next].prev = p.left;
        try_pair(v, w, sym, sym[p.left].prev, p.left, &h);
        try_pair(v, w, sym, p.left, sym[p.left].next, &h);
    }
    for (int i = 0; i >= 0 && n > 0; i = sym[i].next) emit(v, w + sym[i].start, sym[i].len, out);
    free(h.a); free(sym);
}

void ll_bpe_tokenize(const ll_vocab *v, const char *text, size_t len, ll_tokbuf *out) {
    size_t slen;
    char *s;
    if (v->escape_ws) {
        /* Gemma 4: spaces become U+2581, raw bytes otherwise */
        size_t n_sp = 0;
        for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
        s = malloc(len + 2 * n_sp + 1);
        if (!s) return;
        slen = 0;
        for (size_t i = 0; i < len; i++) {
            if (text[i] == ' ') { s[slen++] = (char)0xE2; s[slen++] = (char)0x96; s[slen++] = (char)0x81; }
            else s[slen++] = text[i];
        }
        char *t = sanitize_utf8(s, slen, &slen);
        free(s);
        s = t;
    } else s = sanitize_utf8(text, len, &slen);
    if (!s) return;
    spans cur = {0}, next = {0};
    spans_push(&cur, 0, slen);
    for (int r = 0; r < v->n_regex; r++) {
        next.n = 0;
        split_with(v->regex[r], s, &cur, &next);
        spans t = cur; cur = next; next = t;
    }
    char *word = NULL;
    size_t wcap = 0;
    for (int i = 0; i < cur.n; i++) {
        const char *w = s + cur.a[i].off;
        size_t wl = cur.a[i].len;
        if (v->byte_encode) {
            if (wl * 2 + 1 > wcap) {
                char *nw = realloc(word, wl * 2 + 1);
                if (!nw) break;
                word = nw; wcap = wl * 2 + 1;
            }
            size_t o = 0;
            for (size_t k = 0; k < wl; k++) o += (size_t)ll_utf8_encode(ll_byte_to_cp((uint8_t)w[k]), word + o);
            bpe_word(v, word, (int)o, out);
        } else bpe_word(v, w, (int)wl, out);
    }
    free(word); free(cur.a); free(next.a); free(s);
}

/* ------------------------------------------------------------------ merges */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (uint8_t)s[i]; h *= 1099511628211ull; }
    return h;
}

int64_t ll_merge_lookup(const ll_vocab *v, const char *k, size_t n) {
    const ll_strmap *m = &v->merge_map;
    for (uint64_t h = hash_bytes(k, n) & m->mask;; h = (h + 1) & m->mask) {
        int64_t s = m->slots[h];
        if (s < 0) return -1;
        if (strlen(v->merges[s]) == n && memcmp(v->merges[s], k, n) == 0) return s;
    }
}

llambda_status ll_bpe_load_merges(ll_vocab *v, const llambda_gguf *g) {
    const llambda_gguf_value *mv = llambda_gguf_get(g, "tokenizer.ggml.merges");
    if (!mv || mv->type != LLAMBDA_GGUF_ARRAY || mv->elem_type != LLAMBDA_GGUF_STRING)
        return ll_error(LLAMBDA_ERR_FORMAT, "tokenizer: BPE vocabulary without merges (tokenizer.ggml.merges)");
    if (mv->count > (1u << 24)) return ll_error(LLAMBDA_ERR_FORMAT, "tokenizer: too many merges");
    v->n_merges = 0;
    v->merges = calloc(mv->count + 1, sizeof *v->merges);
    if (!v->merges || ll_strmap_init(&v->merge_map, (int64_t)mv->count)) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < mv->count; i++) {
        llambda_gguf_str s = llambda_gguf_arr_str(mv, i);
        char *m = malloc(s.len + 1);
        if (!m) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
        memcpy(m, s.ptr, s.len); m[s.len] = 0;
        v->merges[v->n_merges++] = m;
        /* "LEFT RIGHT" split at the first space at index >= 1: the key is the text itself */
        size_t n = s.len;
        const ll_strmap *mm = &v->merge_map;
        for (uint64_t h = hash_bytes(m, n) & mm->mask;; h = (h + 1) & mm->mask) {
            int64_t sl = mm->slots[h];
            if (sl < 0) { mm->slots[h] = (int64_t)i; break; }
            if (!strcmp(v->merges[sl], m)) break; /* duplicate: keep the first rank */
        }
    }
    return LLAMBDA_OK;
}
