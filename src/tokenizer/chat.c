/* Chat formatting: recognise the template family from tokenizer.chat_template and render
 * turns exactly as that template does for plain system/user/assistant messages. */
#include "../model.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct sbuf { char *buf; int size, len; } sbuf;

static void sb_put(sbuf *b, const char *s, int n) {
    if (b->len + n < b->size) memcpy(b->buf + b->len, s, (size_t)n);
    else if (b->len < b->size) memcpy(b->buf + b->len, s, (size_t)(b->size - b->len));
    b->len += n;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, (int)strlen(s)); }
static void sb_trim(sbuf *b, const char *s) {
    int n = (int)strlen(s), a = 0;
    while (a < n && isspace((unsigned char)s[a])) a++;
    while (n > a && isspace((unsigned char)s[n - 1])) n--;
    sb_put(b, s + a, n - a);
}

static const char *detect(const char *t) {
    if (!t) return NULL;
    if (strstr(t, "<|im_start|>")) return "chatml";
    if (strstr(t, "<|start_header_id|>") && strstr(t, "<|end_header_id|>")) return "llama3";
    if (strstr(t, "<|turn>")) return "gemma4";
    if (strstr(t, "<start_of_turn>")) return "gemma";
    return NULL;
}

const char *llambda_chat_format_name(const llambda_model *m) { return detect(m->vocab.chat_template); }

static void render_llama3(sbuf *b, const llambda_chat_message *msg, int n, bool gen) {
    for (int i = 0; i < n; i++) {
        sb_str(b, "<|start_header_id|>"); sb_str(b, msg[i].role); sb_str(b, "<|end_header_id|>\n\n");
        sb_trim(b, msg[i].content); sb_str(b, "<|eot_id|>");
    }
    if (gen) sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_chatml(sbuf *b, const llambda_chat_message *msg, int n, bool gen) {
    for (int i = 0; i < n; i++) {
        sb_str(b, "<|im_start|>"); sb_str(b, msg[i].role); sb_str(b, "\n");
        sb_str(b, msg[i].content); sb_str(b, "<|im_end|>\n");
    }
    if (gen) sb_str(b, "<|im_start|>assistant\n");
}

static void render_gemma(sbuf *b, const llambda_chat_message *msg, int n, bool gen) {
    char sys[4096]; sbuf s = {sys, sizeof sys, 0};
    for (int i = 0; i < n; i++) {
        if (!strcmp(msg[i].role, "system")) { sb_trim(&s, msg[i].content); continue; }
        int asst = !strcmp(msg[i].role, "assistant");
        sb_str(b, "<start_of_turn>"); sb_str(b, asst ? "model" : msg[i].role); sb_str(b, "\n");
        if (s.len && !asst) { sb_put(b, sys, s.len < s.size ? s.len : s.size); sb_str(b, "\n\n"); s.len = 0; }
        sb_trim(b, msg[i].content); sb_str(b, "<end_of_turn>\n");
    }
    if (gen) sb_str(b, "<start_of_turn>model\n");
}

static void render_gemma4(sbuf *b, const llambda_chat_message *msg, int n, bool gen) {
    for (int i = 0; i < n; i++) {
        const char *role = !strcmp(msg[i].role, "assistant") ? "model" : msg[i].role;
        if (!strcmp(role, "system") && i != 0) role = "user";
        sb_str(b, "<|turn>"); sb_str(b, role); sb_str(b, "\n");
        sb_trim(b, msg[i].content); sb_str(b, "<turn|>\n");
    }
    if (gen) sb_str(b, "<|turn>model\n<|channel>thought\n<channel|>");
}

int llambda_chat_render(const llambda_model *m, const char *format, const llambda_chat_message *msgs, int n,
                        bool add_generation_prompt, char *buf, int size) {
    const char *f = format ? format : detect(m->vocab.chat_template);
    if (!f) {
        ll_error(LLAMBDA_ERR_UNSUPPORTED, m->vocab.chat_template
                 ? "chat: the model's chat template is not a known format; name one (llama3, chatml, gemma, gemma4)"
                 : "chat: the model has no chat template; name a format (llama3, chatml, gemma, gemma4)");
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) { ll_error(LLAMBDA_ERR_ARG, "chat: message %d lacks role or content", i); return -1; }
    sbuf b = {buf, buf ? size : 0, 0};
    if (!strcmp(f, "llama3")) render_llama3(&b, msgs, n, add_generation_prompt);
    else if (!strcmp(f, "chatml")) render_chatml(&b, msgs, n, add_generation_prompt);
    else if (!strcmp(f, "gemma")) render_gemma(&b, msgs, n, add_generation_prompt);
    else if (!strcmp(f, "gemma4")) render_gemma4(&b, msgs, n, add_generation_prompt);
    else { ll_error(LLAMBDA_ERR_ARG, "chat: unknown format '%s' (llama3, chatml, gemma, gemma4)", f); return -1; }
    if (buf && b.len < size) buf[b.len] = 0;
    return b.len;
}

/* ------------------------------------------------------------------ reasoning */

static int prefix_len(const char *buf, int n, const char *tag) {
    /* longest suffix of buf that is a proper prefix of tag */
    int tl = (int)strlen(tag);
    for (int k = tl - 1 < n ? tl - 1 : n; k > 0; k--)
        if (!memcmp(buf + n - k, tag, (size_t)k)) return k;
    return 0;
}

void llambda_reasoning_feed(llambda_reasoning_split *s, const char *text, int len, bool flush,
                            char *content, int *n_content, char *reasoning, int *n_reasoning) {
    *n_content = *n_reasoning = 0;
    /* work buffer: held bytes + new text */
    char local[512], *buf = local;
    int n = s->n_hold + len;
    if (n > (int)sizeof local && !(buf = malloc((size_t)n))) return;
    memcpy(buf, s->hold, (size_t)s->n_hold);
    if (len > 0) memcpy(buf + s->n_hold, text, (size_t)len);   /* text may be NULL at the final flush */
    s->n_hold = 0;
    int i = 0;
    while (i < n) {
        const char *tag = s->in_think ? "</think>" : "<think>";
        int tl = (int)strlen(tag);
        const char *hit = memmem(buf + i, (size_t)(n - i), tag, (size_t)tl);
        int end = hit ? (int)(hit - buf) : n;
        int keep = hit || flush ? 0 : prefix_len(buf + i, end - i, tag);
        int emit = end - i - keep;
        if (s->in_think) { memcpy(reasoning + *n_reasoning, buf + i, (size_t)emit); *n_reasoning += emit; }
        else { memcpy(content + *n_content, buf + i, (size_t)emit); *n_content += emit; }
        if (hit) { s->in_think = !s->in_think; i = end + tl; continue; }
        memcpy(s->hold, buf + end - keep, (size_t)keep);
        s->n_hold = keep;
        break;
    }
    if (buf != local) free(buf);
}
