/* `llambda serve`: an OpenAI-compatible HTTP server over libmicrohttpd and cJSON.
 *
 * One model, N slots (an inference context each). Each connection runs in its own MHD
 * thread; a request takes a free slot or waits in a bounded queue (503 when full).
 * Streaming responses pull one token per content-reader call, so a client that goes
 * away simply ends the stream: MHD frees the response, which releases the slot. */
#define _POSIX_C_SOURCE 200809L
#include "server.h"
#include "../tools/cli.h"
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BODY (1 << 20)   /* 1 MiB request bodies */
#define MAX_STOP 4
#define TEXT_CHUNK 512

typedef struct slot { llambda_context *ctx; int busy; } slot;

typedef struct server {
    llambda_model *model;
    const char *model_id, *api_key;
    slot *slots;
    int n_slots, n_waiting, max_waiting, n_ctx;
    pthread_mutex_t mu;
    pthread_cond_t freed;
    unsigned long next_id;
    int reasoning_split;
} server;

/* ------------------------------------------------------------------ slots */

static slot *slot_acquire(server *s) {
    pthread_mutex_lock(&s->mu);
    if (s->n_waiting >= s->max_waiting) {
        int any_free = 0;
        for (int i = 0; i < s->n_slots; i++) any_free |= !s->slots[i].busy;
        if (!any_free) { pthread_mutex_unlock(&s->mu); return NULL; }
    }
    s->n_waiting++;
    slot *got = NULL;
    for (;;) {
        for (int i = 0; i < s->n_slots && !got; i++) if (!s->slots[i].busy) got = &s->slots[i];
        if (got) break;
        pthread_cond_wait(&s->freed, &s->mu);
    }
    got->busy = 1;
    s->n_waiting--;
    pthread_mutex_unlock(&s->mu);
    return got;
}

static void slot_release(server *s, slot *sl) {
    pthread_mutex_lock(&s->mu);
    sl->busy = 0;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------------ responses */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned code, const char *type, char *body) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned code, cJSON *j) {
    char *body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!body) return MHD_NO;
    return send_text(c, code, "application/json", body);
}

static const char *error_type(unsigned code) {
    switch (code) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 405: return "method_not_allowed";
    case 413: return "request_too_large";
    case 503: return "server_busy";
    case 500: return "server_error";
    default: return "invalid_request_error";
    }
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(code));
    cJSON_AddNumberToObject(e, "code", code);
    return send_json(c, code, j);
}

/* Replace invalid UTF-8 by U+FFFD so every JSON string we send is valid. */
static char *valid_utf8(const char *s, int n) {
    char *o = malloc((size_t)n * 3 + 1);
    if (!o) return NULL;
    int k = 0;
    for (int i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        int l = ch < 0x80 ? 1 : (ch & 0xE0) == 0xC0 ? 2 : (ch & 0xF0) == 0xE0 ? 3 : (ch & 0xF8) == 0xF0 ? 4 : 0;
        int ok = l > 0 && i + l <= n && !(l == 2 && ch < 0xC2);
        for (int j = 1; ok && j < l; j++) ok = ((unsigned char)s[i + j] & 0xC0) == 0x80;
        if (ok) { memcpy(o + k, s + i, (size_t)l); k += l; i += l; }
        else { memcpy(o + k, "\xEF\xBF\xBD", 3); k += 3; i++; }
    }
    o[k] = 0;
    return o;
}

/* ------------------------------------------------------------------ requests */

typedef struct request {
    int chat, stream, include_usage;
    int32_t *tokens; int n_tokens;
    int max_tokens;
    char *stop[MAX_STOP]; int n_stop;
    llambda_sampler_params sp;
    char id[48];
    long created;
} request;

static void request_free(request *q) {
    free(q->tokens);
    for (int i = 0; i < q->n_stop; i++) free(q->stop[i]);
    free(q);
}

/* Field helpers: absent is fine, a wrong type is an error. */
static int get_number(cJSON *o, const char *k, double lo, double hi, double *out, char *err, size_t es) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v)) { snprintf(err, es, "'%s' must be a number", k); return -1; }
    if (!(v->valuedouble >= lo && v->valuedouble <= hi)) { snprintf(err, es, "'%s' must be between %g and %g", k, lo, hi); return -1; }
    *out = v->valuedouble;
    return 1;
}

static int get_bool(cJSON *o, const char *k, int *out, char *err, size_t es) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) { snprintf(err, es, "'%s' must be a boolean", k); return -1; }
    *out = cJSON_IsTrue(v);
    return 1;
}

static int tokenize_all(llambda_model *m, const char *text, int add_bos, int32_t **out) {
    size_t len = strlen(text);
    int cap = (int)(len < 1000000 ? len : 1000000) + 8;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t) return -1;
    int n = llambda_tokenize(m, text, len, t, cap, add_bos, true);
    if (n > cap) {
        int32_t *nt = realloc(t, (size_t)n * sizeof *t);
        if (!nt) { free(t); return -1; }
        t = nt;
        n = llambda_tokenize(m, text, len, t, n, add_bos, true);
    }
    if (n < 0) { free(t); return -1; }
    *out = t;
    return n;
}

/* Parse and validate a completion request; on error fills err and returns the status. */
static unsigned parse_request(server *s, const char *body, size_t len, int chat, request **out, char *err, size_t es) {
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!j) { snprintf(err, es, "malformed JSON body"); return 400; }
    unsigned code = 400;
    request *q = calloc(1, sizeof *q);
    char *prompt = NULL;
    if (!q) { code = 500; snprintf(err, es, "out of memory"); goto fail; }
    if (!cJSON_IsObject(j)) { snprintf(err, es, "the body must be a JSON object"); goto fail; }
    q->chat = chat;
    q->sp = llambda_sampler_default_params();
    q->sp.seed = (uint64_t)time(NULL);
    q->max_tokens = -1;
    double v;
    int r;
    if ((r = get_number(j, "temperature", 0, 100, &v, err, es)) < 0) goto fail; else if (r) q->sp.temperature = (float)v;
    if ((r = get_number(j, "top_p", 0, 1, &v, err, es)) < 0) goto fail; else if (r) q->sp.top_p = (float)v;
    if ((r = get_number(j, "top_k", 0, 1e9, &v, err, es)) < 0) goto fail; else if (r) q->sp.top_k = (int)v;
    if ((r = get_number(j, "min_p", 0, 1, &v, err, es)) < 0) goto fail; else if (r) q->sp.min_p = (float)v;
    if ((r = get_number(j, "presence_penalty", -2, 2, &v, err, es)) < 0) goto fail; else if (r) q->sp.presence_penalty = (float)v;
    if ((r = get_number(j, "frequency_penalty", -2, 2, &v, err, es)) < 0) goto fail; else if (r) q->sp.frequency_penalty = (float)v;
    if ((r = get_number(j, "repeat_penalty", 0, 10, &v, err, es)) < 0) goto fail; else if (r) q->sp.repeat_penalty = (float)v;
    if ((r = get_number(j, "repetition_penalty", 0, 10, &v, err, es)) < 0) goto fail; else if (r) q->sp.repeat_penalty = (float)v;
    if ((r = get_number(j, "seed", -9.2e18, 9.2e18, &v, err, es)) < 0) goto fail; else if (r) q->sp.seed = (uint64_t)(int64_t)v;
    const char *mt = cJSON_GetObjectItemCaseSensitive(j, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if ((r = get_number(j, mt, 0, 1e9, &v, err, es)) < 0) goto fail; else if (r) q->max_tokens = (int)v;
    if (get_bool(j, "stream", &q->stream, err, es) < 0) goto fail;
    int ignore_eos = 0;
    if (get_bool(j, "ignore_eos", &ignore_eos, err, es) < 0) goto fail;
    q->sp.ignore_eos = ignore_eos;
    cJSON *so = cJSON_GetObjectItemCaseSensitive(j, "stream_options");
    if (so && cJSON_IsObject(so) && get_bool(so, "include_usage", &q->include_usage, err, es) < 0) goto fail;
    cJSON *stop = cJSON_GetObjectItemCaseSensitive(j, "stop");
    if (stop && !cJSON_IsNull(stop)) {
        if (cJSON_IsString(stop)) {
            if (*stop->valuestring) q->stop[q->n_stop++] = strdup(stop->valuestring);
        } else if (cJSON_IsArray(stop)) {
            cJSON *e;
            cJSON_ArrayForEach(e, stop) {
                if (!cJSON_IsString(e)) { snprintf(err, es, "'stop' must be a string or an array of strings"); goto fail; }
                if (q->n_stop == MAX_STOP) { snprintf(err, es, "'stop' takes at most %d strings", MAX_STOP); goto fail; }
                if (*e->valuestring) q->stop[q->n_stop++] = strdup(e->valuestring);
            }
        } else { snprintf(err, es, "'stop' must be a string or an array of strings"); goto fail; }
        for (int i = 0; i < q->n_stop; i++)
            if (strlen(q->stop[i]) > 256) { snprintf(err, es, "a stop string is longer than 256 bytes"); goto fail; }
    }
    if (chat) {
        cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
        if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) { snprintf(err, es, "'messages' must be a non-empty array"); goto fail; }
        int n = cJSON_GetArraySize(msgs);
        llambda_chat_message *cm = calloc((size_t)n, sizeof *cm);
        if (!cm) { code = 500; snprintf(err, es, "out of memory"); goto fail; }
        int i = 0;
        cJSON *m;
        cJSON_ArrayForEach(m, msgs) {
            cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role"), *content = cJSON_GetObjectItemCaseSensitive(m, "content");
            if (!cJSON_IsObject(m) || !cJSON_IsString(role)) { free(cm); snprintf(err, es, "messages[%d]: 'role' must be a string", i); goto fail; }
            if (strcmp(role->valuestring, "system") && strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant") &&
                strcmp(role->valuestring, "developer")) {
                free(cm); snprintf(err, es, "messages[%d]: unknown role '%.40s'", i, role->valuestring); goto fail;
            }
            if (!cJSON_IsString(content)) { free(cm); snprintf(err, es, "messages[%d]: 'content' must be a string", i); goto fail; }
            cm[i].role = !strcmp(role->valuestring, "developer") ? "system" : role->valuestring;
            cm[i].content = content->valuestring;
            i++;
        }
        int need = llambda_chat_render(s->model, NULL, cm, n, true, NULL, 0);
        if (need < 0) {
            /* no usable template: fall back to ChatML rather than refusing every chat */
            need = llambda_chat_render(s->model, "chatml", cm, n, true, NULL, 0);
        }
        prompt = need >= 0 ? malloc((size_t)need + 1) : NULL;
        if (!prompt) { free(cm); code = 500; snprintf(err, es, "cannot render the chat: %s", llambda_last_error()); goto fail; }
        if (llambda_chat_render(s->model, NULL, cm, n, true, prompt, need + 1) < 0)
            llambda_chat_render(s->model, "chatml", cm, n, true, prompt, need + 1);
        free(cm);
    } else {
        cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt");
        if (!cJSON_IsString(p)) { snprintf(err, es, "'prompt' must be a string"); goto fail; }
        prompt = strdup(p->valuestring);
    }
    q->n_tokens = tokenize_all(s->model, prompt, 1, &q->tokens);
    if (q->n_tokens <= 0) { snprintf(err, es, "the prompt is empty or cannot be tokenized"); goto fail; }
    if (q->n_tokens >= s->n_ctx) {
        snprintf(err, es, "the prompt has %d tokens, more than the context of %d", q->n_tokens, s->n_ctx);
        goto fail;
    }
    free(prompt);
    cJSON_Delete(j);
    unsigned long id = __atomic_add_fetch(&s->next_id, 1, __ATOMIC_RELAXED);
    snprintf(q->id, sizeof q->id, "%s-%lu", chat ? "chatcmpl" : "cmpl", id);
    q->created = (long)time(NULL);
    *out = q;
    return 200;
fail:
    free(prompt);
    if (q) request_free(q);
    cJSON_Delete(j);
    return code;
}

static const char *finish_reason(int stop_reason) { return stop_reason == 1 || stop_reason == 4 ? "length" : "stop"; }

static void add_usage(cJSON *o, const llambda_generate_result *r) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", r->n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + r->n_generated);
}

static cJSON *envelope(server *s, const request *q, int chunk) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", q->id);
    cJSON_AddStringToObject(o, "object", q->chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)q->created);
    cJSON_AddStringToObject(o, "model", s->model_id);
    return o;
}

/* Begin generation on a slot: set the request's sampler and evaluate the prompt. */
static llambda_status start(slot *sl, request *q) {
    llambda_context_reset(sl->ctx);
    llambda_context_set_sampler(sl->ctx, &q->sp);
    return llambda_stream_begin(sl->ctx, q->tokens, q->n_tokens, q->max_tokens, (const char *const *)q->stop, q->n_stop);
}

static enum MHD_Result complete_blocking(server *s, struct MHD_Connection *c, request *q) {
    slot *sl = slot_acquire(s);
    if (!sl) return send_error(c, 503, "all %d slots are busy and the queue is full; retry later", s->n_slots);
    llambda_status st = start(sl, q);
    if (st) { slot_release(s, sl); return send_error(c, 500, "generation failed: %s", llambda_last_error()); }
    size_t cap = 4096, n = 0;
    char *text = malloc(cap), piece[TEXT_CHUNK];
    int len, more;
    while ((more = llambda_stream_next(sl->ctx, piece, sizeof piece, &len, NULL)) > 0 || len > 0) {
        if (n + (size_t)len + 1 > cap) { char *nt = realloc(text, cap *= 2); if (!nt) break; text = nt; }
        memcpy(text + n, piece, (size_t)len);
        n += (size_t)len;
        if (more <= 0) break;
    }
    llambda_generate_result res;
    llambda_stream_end(sl->ctx, &res);
    slot_release(s, sl);
    char *reason = NULL;
    if (q->chat && s->reasoning_split) {
        /* <think> ... </think> goes to reasoning_content */
        llambda_reasoning_split rs = {0};
        char *ctext = malloc(n + 32), *rtext = malloc(n + 32);
        int nc = 0, nr = 0, a, b;
        if (ctext && rtext) {
            llambda_reasoning_feed(&rs, text, (int)n, true, ctext, &a, rtext, &b);
            nc = a; nr = b;
            memcpy(text, ctext, (size_t)nc);
            n = (size_t)nc;
            if (nr > 0) reason = valid_utf8(rtext, nr);
        }
        free(ctext); free(rtext);
    }
    char *clean = valid_utf8(text, (int)n);
    free(text);
    cJSON *o = envelope(s, q, 0), *choices = cJSON_AddArrayToObject(o, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", 0);
    if (q->chat) {
        cJSON *msg = cJSON_AddObjectToObject(ch, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        cJSON_AddStringToObject(msg, "content", clean ? clean : "");
        if (reason) cJSON_AddStringToObject(msg, "reasoning_content", reason);
    } else cJSON_AddStringToObject(ch, "text", clean ? clean : "");
    free(reason);
    cJSON_AddStringToObject(ch, "finish_reason", finish_reason(res.stop_reason));
    add_usage(o, &res);
    free(clean);
    return send_json(c, 200, o);
}

/* ------------------------------------------------------------------ streaming */

typedef struct stream_state {
    server *s;
    slot *sl;
    request *q;
    char *buf; size_t len, off, cap;
    int phase;   /* 0 role chunk, 1 tokens, 2 final chunk queued, 3 done */
    llambda_reasoning_split rs;
    llambda_generate_result res;
} stream_state;

static void out_append(stream_state *st, const char *data, size_t n) {
    if (st->len + n > st->cap) {
        size_t nc = (st->len + n) * 2;
        char *nb = realloc(st->buf, nc);
        if (!nb) return;
        st->buf = nb; st->cap = nc;
    }
    memcpy(st->buf + st->len, data, n);
    st->len += n;
}

static void out_event(stream_state *st, cJSON *o) {
    char *js = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!js) return;
    out_append(st, "data: ", 6);
    out_append(st, js, strlen(js));
    out_append(st, "\n\n", 2);
    free(js);
}

static void event_delta_r(stream_state *st, const char *role, const char *content, const char *reasoning, const char *finish) {
    cJSON *o = envelope(st->s, st->q, 1), *choices = cJSON_AddArrayToObject(o, "choices"), *ch = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", 0);
    if (st->q->chat) {
        cJSON *d = cJSON_AddObjectToObject(ch, "delta");
        if (role) cJSON_AddStringToObject(d, "role", role);
        if (content) cJSON_AddStringToObject(d, "content", content);
        if (reasoning) cJSON_AddStringToObject(d, "reasoning_content", reasoning);
    } else cJSON_AddStringToObject(ch, "text", content ? content : "");
    if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
    else cJSON_AddNullToObject(ch, "finish_reason");
    out_event(st, o);
}

static void event_delta(stream_state *st, const char *role, const char *content, const char *finish) {
    event_delta_r(st, role, content, NULL, finish);
}

/* text of one step: split off the reasoning when asked, then send what is complete */
static void event_text(stream_state *st, const char *piece, int len, int flush) {
    if (!(st->q->chat && st->s->reasoning_split)) {
        if (len > 0) { char *clean = valid_utf8(piece, len); if (clean) event_delta(st, NULL, clean, NULL); free(clean); }
        return;
    }
    char c[TEXT_CHUNK + 48], r[TEXT_CHUNK + 48];
    int nc, nr;
    llambda_reasoning_feed(&st->rs, piece, len, flush, c, &nc, r, &nr);
    char *cc = nc ? valid_utf8(c, nc) : NULL, *rr = nr ? valid_utf8(r, nr) : NULL;
    if (cc || rr) event_delta_r(st, NULL, cc, rr, NULL);
    free(cc); free(rr);
}

static void stream_finish_events(stream_state *st) {
    llambda_stream_end(st->sl->ctx, &st->res);
    slot_release(st->s, st->sl);
    st->sl = NULL;
    event_delta(st, NULL, NULL, finish_reason(st->res.stop_reason));
    if (st->q->include_usage) {
        cJSON *o = envelope(st->s, st->q, 1);
        cJSON_AddArrayToObject(o, "choices");
        add_usage(o, &st->res);
        out_event(st, o);
    }
    out_append(st, "data: [DONE]\n\n", 14);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *out, size_t max) {
    stream_state *st = cls;
    (void)pos;
    while (st->off == st->len) {
        st->off = st->len = 0;
        if (st->phase == 3) return MHD_CONTENT_READER_END_OF_STREAM;
        if (st->phase == 0) { if (st->q->chat) event_delta(st, "assistant", "", NULL); st->phase = 1; continue; }
        if (st->phase == 2) { st->phase = 3; continue; }
        char piece[TEXT_CHUNK];
        int len, more = llambda_stream_next(st->sl->ctx, piece, sizeof piece, &len, NULL);
        event_text(st, piece, len, more <= 0);
        if (more <= 0) { stream_finish_events(st); st->phase = 2; }
    }
    size_t n = st->len - st->off < max ? st->len - st->off : max;
    memcpy(out, st->buf + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

/* Called by MHD when the response is done or the client went away. */
static void stream_free(void *cls) {
    stream_state *st = cls;
    if (st->sl) {
        llambda_stream_end(st->sl->ctx, NULL);
        slot_release(st->s, st->sl);
    }
    request_free(st->q);
    free(st->buf);
    free(st);
}

static enum MHD_Result complete_streaming(server *s, struct MHD_Connection *c, request *q) {
    slot *sl = slot_acquire(s);
    if (!sl) { request_free(q); return send_error(c, 503, "all %d slots are busy and the queue is full; retry later", s->n_slots); }
    if (start(sl, q)) {
        slot_release(s, sl);
        request_free(q);
        return send_error(c, 500, "generation failed: %s", llambda_last_error());
    }
    stream_state *st = calloc(1, sizeof *st);
    if (!st) { llambda_stream_end(sl->ctx, NULL); slot_release(s, sl); request_free(q); return MHD_NO; }
    st->s = s; st->sl = sl; st->q = q;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, st, stream_free);
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* ------------------------------------------------------------------ routing */

typedef struct conn_state { char *body; size_t len; int too_large; } conn_state;

static int authorized(server *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, s->api_key);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    server *s = cls;
    (void)version;
    conn_state *cs = *con_cls;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        return MHD_YES;
    }
    if (*upload_size) {
        if (cs->len + *upload_size > MAX_BODY) cs->too_large = 1;
        else {
            char *nb = realloc(cs->body, cs->len + *upload_size + 1);
            if (!nb) return MHD_NO;
            cs->body = nb;
            memcpy(cs->body + cs->len, upload, *upload_size);
            cs->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    int is_get = !strcmp(method, "GET"), is_post = !strcmp(method, "POST");
    int chat = !strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions");
    int compl = !strcmp(url, "/v1/completions") || !strcmp(url, "/completions");
    if (!strcmp(method, "OPTIONS")) return send_text(c, 204, "text/plain", strdup(""));
    if (!strcmp(url, "/health")) {
        if (!is_get) return send_error(c, 405, "%s %s: use GET", method, url);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "ok");
        return send_json(c, 200, o);
    }
    if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) {
        if (!is_get) return send_error(c, 405, "%s %s: use GET", method, url);
        if (!authorized(s, c)) return send_error(c, 401, "missing or wrong API key");
        cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "object", "list");
        cJSON_AddItemToArray(data, m);
        cJSON_AddStringToObject(m, "id", s->model_id);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", 0);
        cJSON_AddStringToObject(m, "owned_by", "llambda");
        return send_json(c, 200, o);
    }
    if (!chat && !compl) return send_error(c, 404, "no route %s %.100s", method, url);
    if (!is_post) return send_error(c, 405, "%s %s: use POST", method, url);
    if (!authorized(s, c)) return send_error(c, 401, "missing or wrong API key");
    if (cs->too_large) return send_error(c, 413, "request body larger than %d bytes", MAX_BODY);
    char err[512];
    request *q = NULL;
    unsigned code = parse_request(s, cs->body ? cs->body : "", cs->len, chat, &q, err, sizeof err);
    if (code != 200) return send_error(c, code, "%s", err);
    if (q->stream) return complete_streaming(s, c, q);
    enum MHD_Result r = complete_blocking(s, c, q);
    request_free(q);
    return r;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls; (void)c; (void)toe;
    conn_state *cs = *con_cls;
    if (cs) { free(cs->body); free(cs); }
    *con_cls = NULL;
}

/* ------------------------------------------------------------------ main */

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

int server_main(const server_options *o) {
    server s;
    memset(&s, 0, sizeof s);
    s.api_key = o->api_key;
    s.reasoning_split = o->reasoning_split;
    llambda_model_params mp = llambda_model_default_params();
    mp.n_threads = o->n_threads;
    if (o->accel) cli_accel_apply(o->accel, &mp);
    if (llambda_model_load(o->model_path, &mp, &s.model)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return 1; }
    const char *slash = strrchr(o->model_path, '/');
    s.model_id = slash ? slash + 1 : o->model_path;
    s.n_slots = o->parallel > 0 ? o->parallel : 1;
    s.max_waiting = o->queue >= 0 ? o->queue : 4 * s.n_slots;
    s.slots = calloc((size_t)s.n_slots, sizeof *s.slots);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.freed, NULL);
    for (int i = 0; i < s.n_slots; i++) {
        llambda_context_params cp = llambda_context_default_params();
        cp.n_ctx = o->n_ctx;
        cp.n_threads = o->n_threads;
        cp.shared_pool = true;   /* slots take turns on one pool: no oversubscription */
        if (llambda_context_create(s.model, &cp, &s.slots[i].ctx)) {
            fprintf(stderr, "llambda: slot %d: %s\n", i, llambda_last_error());
            return 1;
        }
    }
    s.n_ctx = llambda_context_n_ctx(s.slots[0].ctx);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &addr.sin_addr) != 1) { fprintf(stderr, "llambda: bad --host '%s' (an IPv4 address)\n", o->host); return 2; }
    signal(SIGPIPE, SIG_IGN);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                                            (uint16_t)o->port, NULL, NULL, handle, &s,
                                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                            MHD_OPTION_NOTIFY_COMPLETED, completed, &s,
                                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)(4 * s.n_slots + s.max_waiting + 16),
                                            MHD_OPTION_END);
    if (!d) { fprintf(stderr, "llambda: cannot listen on %s:%d\n", o->host, o->port); return 1; }
    fprintf(stderr, "llambda: serving %s on http://%s:%d with %d slot(s) of %d tokens, %s kernels\n",
            s.model_id, o->host, o->port, s.n_slots, s.n_ctx, llambda_isa());
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stop_flag) sleep(1);
    fprintf(stderr, "llambda: shutting down\n");
    MHD_stop_daemon(d);
    for (int i = 0; i < s.n_slots; i++) llambda_context_free(s.slots[i].ctx);
    free(s.slots);
    llambda_model_free(s.model);
    return 0;
}
