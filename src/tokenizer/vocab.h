/* Vocabulary and tokenizers (SPM, byte-level BPE, Gemma 4 BPE). */
#ifndef LLAMBDA_VOCAB_H
#define LLAMBDA_VOCAB_H
#include <stdint.h>
#include <stddef.h>
#include "llambda.h"

enum ll_vocab_type { LL_VOCAB_NONE = 0, LL_VOCAB_SPM, LL_VOCAB_BPE, LL_VOCAB_GEMMA4 };

/* token attributes (bit set), as llama.cpp maps token_type */
enum {
    LL_ATTR_UNKNOWN = 1 << 0, LL_ATTR_UNUSED = 1 << 1, LL_ATTR_NORMAL = 1 << 2, LL_ATTR_CONTROL = 1 << 3,
    LL_ATTR_USER_DEFINED = 1 << 4, LL_ATTR_BYTE = 1 << 5,
};

typedef struct ll_strmap { int64_t *slots; uint64_t mask; } ll_strmap;

typedef struct ll_vocab {
    int type;
    int n_vocab;
    char **text; int *len;       /* token texts (NUL-terminated copies) */
    float *scores;
    int *attr;
    uint8_t *is_eog;
    ll_strmap tok_map;           /* text -> id */
    char **merges; int n_merges; /* "LEFT RIGHT" */
    ll_strmap merge_map;         /* merge text -> rank */
    int32_t bos, eos, eot, eom, unk, pad;
    int add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges, byte_encode, escape_ws;
    int32_t byte_tokens[256];    /* <0xXX> tokens, or -1 */
    int32_t *special;            /* special-token candidates, longest first */
    int n_special;
    void *regex[4]; int n_regex; /* compiled pcre2 pre-tokenizer regexes */
    char pre[64];
    char *chat_template;
} ll_vocab;

llambda_status ll_vocab_load(ll_vocab *v, const llambda_gguf *g);
void ll_vocab_free(ll_vocab *v);
int32_t ll_vocab_find(const ll_vocab *v, const char *text, size_t len);

/* Tokenize; returns count needed or -1 */
int ll_tokenize(const ll_vocab *v, const char *text, size_t len, int32_t *out, int max, int add_special, int parse_special);
int ll_token_to_piece(const ll_vocab *v, int32_t tok, char *buf, int size, int special);

/* token growth buffer used by the algorithms */
typedef struct ll_tokbuf { int32_t *ids; int n, cap; } ll_tokbuf;
int ll_tokbuf_push(ll_tokbuf *b, int32_t id);
void ll_spm_tokenize(const ll_vocab *v, const char *text, size_t len, ll_tokbuf *out);
void ll_bpe_tokenize(const ll_vocab *v, const char *text, size_t len, ll_tokbuf *out);
llambda_status ll_bpe_setup(ll_vocab *v, const char *pre);
void ll_bpe_free(ll_vocab *v);
llambda_status ll_bpe_load_merges(ll_vocab *v, const llambda_gguf *g);
int64_t ll_merge_lookup(const ll_vocab *v, const char *key, size_t n);
/* GPT-2 byte <-> unicode code point maps */
uint32_t ll_byte_to_cp(uint8_t b);
int ll_cp_to_byte(uint32_t cp);
int ll_utf8_len(uint8_t lead);
int ll_utf8_encode(uint32_t cp, char *out);
/* ll_strmap helpers */
int ll_strmap_init(ll_strmap *m, int64_t n);
void ll_strmap_free(ll_strmap *m);
#endif
