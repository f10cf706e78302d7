/* SentencePiece-style tokenizer (tokenizer.ggml.model = llama): spaces become U+2581,
 * adjacent symbols merge while their concatenation is a token, highest score first;
 * symbols that are not tokens fall back to <0xXX> byte tokens. */
#include "vocab.h"
#include "merge.h"
#include "../internal.h"

int ll_utf8_len(uint8_t c) {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 1;
}

static void try_pair(const ll_vocab *v, const char *s, const ll_sym *sym, int l, int r, ll_heap *h) {
    if (l < 0 || r < 0) return;
    int size = sym[l].len + sym[r].len;
    int32_t id = ll_vocab_find(v, s + sym[l].start, (size_t)size);
    if (id < 0) return;
    heap_push(h, (ll_pair){-(double)v->scores[id], l, r, size});
}

static void emit_symbol(const ll_vocab *v, const char *s, int len, ll_tokbuf *out) {
    int32_t id = ll_vocab_find(v, s, (size_t)len);
    if (id >= 0) { ll_tokbuf_push(out, id); return; }
    for (int i = 0; i < len; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t bt = v->byte_tokens[b];
        if (bt < 0) bt = ll_vocab_find(v, (const char *)&s[i], 1);
        if (bt < 0) bt = v->unk;
        if (bt >= 0) ll_tokbuf_push(out, bt);
    }
}

void ll_spm_tokenize(const ll_vocab *v, const char *text, size_t len, ll_tokbuf *out) {
    /* escape spaces */
    size_t n_sp = 0;
    for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
    size_t elen = len + 2 * n_sp;
    char *s = malloc(elen + 1);
    ll_sym *sym = malloc((elen + 1) * sizeof *sym);
    if (!s || !sym) { free(s); free(sym); return; }
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') { s[o++] = (char)0xE2; s[o++] = (char)0x96; s[o++] = (char)0x81; }
        else s[o++] = text[i];
    }
    int n = 0;
    for (size_t i = 0; i < elen;) {
        int l = ll_utf8_len((uint8_t)s[i]);
        if (i + (size_t)l > elen) l = (int)(elen - i);
        sym[n] = (ll_sym){(int)i, l, n - 1, -1};
        if (n > 0) sym[n - 1].next = n;
        n++;
        i += (size_t)l;
    }
    ll_heap h = {0};
    for (int i = 0; i + 1 < n; i++) try_pair(v, s, sym, i, i + 1, &h);
    while (h.n) {
        ll_pair p = heap_pop(&h);
        if (sym[p.left].len == 0 || sym[p.right].len == 0 || sym[p.left].len + sym[p.right].len != p.size) continue;
        sym[p.left].len += sym[p.right].len;
        sym[p.right].len = 0;
        sym[p.left].next = sym[p.right].next;
        if (sym[p.right].next >= 0) sym[sym[p.right].next].prev = p.left;
        try_pair(v, s, sym, sym[p.left].prev, p.left, &h);
        try_pair(v, s, sym, p.left, sym[p.left].next, &h);
    }
    for (int i = 0; i >= 0 && n > 0; i = sym[i].next) emit_symbol(v, s + sym[i].start, sym[i].len, out);
    free(h.a); free(s); free(sym);
}
