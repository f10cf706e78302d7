/* `llambda run`, `chat`, `eval`, `tokenize`: thin clients of the library. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
    const char *model, *prompt, *system, *tokens, *logits_out, *format;
    const char *stop[8]; int n_stop;
    int n_predict, n_threads, n_ctx, n_batch, chat, no_bos, kv_f32, verbose, hide_reasoning;
    llambda_sampler_params sp;
    cli_accel accel;
} opts;

static const char *default_model(const char *argv0) {
    static char path[4096];
    const char *env = getenv("LLAMBDA_MODEL");
    if (env && *env) return env;
    if (access("models/stories260K.gguf", R_OK) == 0) return "models/stories260K.gguf";
    /* next to the binary: build/llambda -> ../models */
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
    if (n > 0) {
        path[n] = 0;
        char *slash = strrchr(path, '/');
        if (slash) {
            strcpy(slash, "/../models/stories260K.gguf");
            if (access(path, R_OK) == 0) return path;
            strcpy(slash, "/../share/llambda/stories260K.gguf");
            if (access(path, R_OK) == 0) return path;
        }
    }
    (void)argv0;
    return "models/stories260K.gguf";
}

static int need_arg(int i, int argc, const char *flag) {
    if (i + 1 >= argc) { fprintf(stderr, "llambda: %s needs a value\n", flag); return 0; }
    return 1;
}

/* Returns 0 on success, 2 on a usage error. */
static int parse_opts(int argc, char **argv, opts *o, const char *usage) {
    memset(o, 0, sizeof *o);
    o->n_predict = -2; /* unset */
    o->sp = llambda_sampler_default_params();
    o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define VAL (need_arg(i, argc, a) ? argv[++i] : NULL)
#define IS(x) (!strcmp(a, x))
        const char *v;
        if (IS("-h") || IS("--help")) { fprintf(stderr, "%s" CLI_ACCEL_USAGE, usage); exit(0); }
        int acc = cli_accel_flag(&o->accel, argc, argv, &i);
        if (acc < 0) return 2;
        if (acc) continue;
        else if (IS("-m") || IS("--model")) { if (!(o->model = VAL)) return 2; }
        else if (IS("-p") || IS("--prompt")) { if (!(o->prompt = VAL)) return 2; }
        else if (IS("--system")) { if (!(o->system = VAL)) return 2; }
        else if (IS("--tokens")) { if (!(o->tokens = VAL)) return 2; }
        else if (IS("--logits-out")) { if (!(o->logits_out = VAL)) return 2; }
        else if (IS("--chat-format")) { if (!(o->format = VAL)) return 2; }
        else if (IS("--stop")) { if (!(v = VAL)) return 2; if (o->n_stop < 8) o->stop[o->n_stop++] = v; }
        else if (IS("-n") || IS("--n-predict")) { if (!(v = VAL)) return 2; o->n_predict = atoi(v); }
        else if (IS("-t") || IS("--threads")) { if (!(v = VAL)) return 2; o->n_threads = atoi(v); }
        else if (IS("-c") || IS("--ctx-size")) { if (!(v = VAL)) return 2; o->n_ctx = atoi(v); }
        else if (IS("-b") || IS("--batch-size")) { if (!(v = VAL)) return 2; o->n_batch = atoi(v); }
        else if (IS("--temp")) { if (!(v = VAL)) return 2; o->sp.temperature = (float)atof(v); }
        else if (IS("--top-k")) { if (!(v = VAL)) return 2; o->sp.top_k = atoi(v); }
        else if (IS("--top-p")) { if (!(v = VAL)) return 2; o->sp.top_p = (float)atof(v); }
        else if (IS("--min-p")) { if (!(v = VAL)) return 2; o->sp.min_p = (float)atof(v); }
        else if (IS("--repeat-penalty")) { if (!(v = VAL)) return 2; o->sp.repeat_penalty = (float)atof(v); }
        else if (IS("--repeat-last-n")) { if (!(v = VAL)) return 2; o->sp.repeat_last_n = atoi(v); }
        else if (IS("--frequency-penalty")) { if (!(v = VAL)) return 2; o->sp.frequency_penalty = (float)atof(v); }
        else if (IS("--presence-penalty")) { if (!(v = VAL)) return 2; o->sp.presence_penalty = (float)atof(v); }
        else if (IS("-s") || IS("--seed")) { if (!(v = VAL)) return 2; o->sp.seed = strtoull(v, NULL, 10); }
        else if (IS("--chat")) o->chat = 1;
        else if (IS("--reasoning")) {
            if (!(v = VAL)) return 2;
            if (!strcmp(v, "hide")) o->hide_reasoning = 1;
            else if (strcmp(v, "show")) { fprintf(stderr, "llambda: --reasoning show|hide\n"); return 2; }
        }
        else if (IS("--no-bos")) o->no_bos = 1;
        else if (IS("--kv-f32")) o->kv_f32 = 1;
        else if (IS("-v") || IS("--verbose")) o->verbose = 1;
        else { fprintf(stderr, "llambda: unknown option '%s'\n%s", a, usage); return 2; }
#undef VAL
#undef IS
    }
    if (o->n_ctx < 0 || o->n_threads < 0 || o->n_batch < 0) { fprintf(stderr, "llambda: sizes must not be negative\n"); return 2; }
    return 0;
}

static llambda_model *load(const opts *o, const char *argv0, double *secs) {
    const char *path = o->model ? o->model : default_model(argv0);
    llambda_model_params mp = llambda_model_default_params();
    mp.n_threads = o->n_threads;
    cli_accel_apply(&o->accel, &mp);
    double t0 = cli_now();
    llambda_model *m;
    if (llambda_model_load(path, &mp, &m)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return NULL; }
    if (secs) *secs = cli_now() - t0;
    return m;
}

static llambda_context *make_ctx(llambda_model *m, const opts *o, int logits) {
    llambda_context_params cp = llambda_context_default_params();
    cp.n_ctx = o->n_ctx; cp.n_threads = o->n_threads; cp.logits = logits;
    if (o->n_batch) cp.n_batch = o->n_batch;
    cp.kv_type = o->kv_f32 ? LLAMBDA_KV_F32 : LLAMBDA_KV_F16;
    cp.sampling = o->sp;
    llambda_context *c;
    if (llambda_context_create(m, &cp, &c)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return NULL; }
    if (o->verbose || logits == LLAMBDA_LOGITS_LAST)
        fprintf(stderr, "llambda: %s (%s), context %d tokens, KV cache %.2f MiB, recurrent state %.2f MiB, %s kernels\n",
                llambda_model_name(m), llambda_model_arch(m), llambda_context_n_ctx(c), (double)llambda_context_kv_bytes(c) / (1024.0 * 1024.0),
                (double)llambda_context_state_bytes(c) / (1024.0 * 1024.0), llambda_isa());
    return c;
}

/* Tokenize text with BOS per the model (unless no_bos) and special tokens parsed. */
static int32_t *tokenize(llambda_model *m, const char *text, int add_bos, int *n) {
    size_t len = strlen(text);
    int cap = (int)len + 8;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t) return NULL;
    int k = llambda_tokenize(m, text, len, t, cap, add_bos, true);
    if (k < 0) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); free(t); return NULL; }
    if (k > cap) {
        int32_t *nt = realloc(t, (size_t)k * sizeof *t);
        if (!nt) { free(t); return NULL; }
        t = nt;
        llambda_tokenize(m, text, len, t, k, add_bos, true);
    }
    *n = k;
    return t;
}

static bool print_token(int32_t tok, const char *text, int len, void *user) {
    (void)tok; (void)user;
    fwrite(text, 1, (size_t)len, stdout);
    fflush(stdout);
    return true;
}

static char *render_chat(llambda_model *m, const char *fmt, const llambda_chat_message *msgs, int n) {
    int need = llambda_chat_render(m, fmt, msgs, n, true, NULL, 0);
    if (need < 0) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); return NULL; }
    char *buf = malloc((size_t)need + 1);
    if (buf) llambda_chat_render(m, fmt, msgs, n, true, buf, need + 1);
    return buf;
}

static const char *const run_usage =
    "usage: llambda run [-m MODEL] [-p PROMPT] [-n N] [-t THREADS] [-c CTX] [--temp T] [--top-k K]\n"
    "                   [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--seed S]\n"
    "                   [--system TEXT] [--chat] [--chat-format NAME] [--stop TEXT] [--no-bos]\n"
    "default model: models/stories260K.gguf; default prompt: \"Once upon a time\"\n";

int cmd_run(int argc, char **argv) {
    opts o;
    if (parse_opts(argc, argv, &o, run_usage)) return 2;
    double load_s;
    llambda_model *m = load(&o, argv[0], &load_s);
    if (!m) return 1;
    llambda_context *c = make_ctx(m, &o, LLAMBDA_LOGITS_LAST);
    if (!c) { llambda_model_free(m); return 1; }
    const char *prompt = o.prompt ? o.prompt : "Once upon a time";
    char *rendered = NULL;
    if (o.chat || o.system) {
        llambda_chat_message msgs[2];
        int n = 0;
        if (o.system) msgs[n++] = (llambda_chat_message){"system", o.system};
        msgs[n++] = (llambda_chat_message){"user", prompt};
        if (!(rendered = render_chat(m, o.format, msgs, n))) { llambda_context_free(c); llambda_model_free(m); return 1; }
        prompt = rendered;
    }
    int n_prompt = 0, rc = 0;
    int32_t *toks = tokenize(m, prompt, !o.no_bos, &n_prompt);
    if (!toks) { rc = 1; goto out; }
    if (n_prompt > llambda_context_n_ctx(c)) {
        fprintf(stderr, "llambda: the prompt has %d tokens, more than the context of %d (use -c)\n", n_prompt, llambda_context_n_ctx(c));
        rc = 1; goto out;
    }
    if (!o.chat && !o.system) { fputs(prompt, stdout); fflush(stdout); }
    int n_predict = o.n_predict == -2 ? 256 : o.n_predict;
    llambda_generate_result r;
    llambda_status st = llambda_generate(c, toks, n_prompt, n_predict, o.stop, o.n_stop, print_token, NULL, &r);
    printf("\n");
    if (st) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); rc = 1; }
    if (r.stop_reason == 4) fprintf(stderr, "llambda: stopped: the context of %d tokens is full\n", llambda_context_n_ctx(c));
    fprintf(stderr, "\nload: %.3f s | prompt: %d tokens, %.1f tok/s | generation: %d tokens, %.1f tok/s | threads %d\n",
            load_s, r.n_prompt, r.prompt_seconds > 0 ? r.n_prompt / r.prompt_seconds : 0.0, r.n_generated,
            r.gen_seconds > 0 ? r.n_generated / r.gen_seconds : 0.0, o.n_threads ? o.n_threads : 0);
out:
    free(toks); free(rendered);
    llambda_context_free(c);
    llambda_model_free(m);
    return rc;
}

/* ------------------------------------------------------------------ chat */

typedef struct reply { char *text; size_t len, cap; int hide; llambda_reasoning_split rs; } reply;

/* The answer (without <think> blocks) is kept for the history; the reasoning is printed
 * unless hidden. */
static bool collect_token(int32_t tok, const char *raw, int rlen, void *user) {
    reply *r = user;
    (void)tok;
    char text[600], reason[600];
    int len, nr;
    llambda_reasoning_feed(&r->rs, raw, rlen, false, text, &len, reason, &nr);
    if (nr > 0 && !r->hide) { fwrite(reason, 1, (size_t)nr, stdout); fflush(stdout); }
    if (r->len + (size_t)len + 1 > r->cap) {
        size_t nc = (r->cap + (size_t)len + 1) * 2;
        char *nt = realloc(r->text, nc);
        if (!nt) return false;
        r->text = nt; r->cap = nc;
    }
    memcpy(r->text + r->len, text, (size_t)len);
    r->len += (size_t)len;
    r->text[r->len] = 0;
    fwrite(text, 1, (size_t)len, stdout);
    fflush(stdout);
    return true;
}

int cmd_chat(int argc, char **argv) {
    opts o;
    if (parse_opts(argc, argv, &o, "usage: llambda chat -m MODEL [--system TEXT] [--chat-format NAME] [--reasoning show|hide] [-c CTX] [sampling options]\n")) return 2;
    llambda_model *m = load(&o, argv[0], NULL);
    if (!m) return 1;
    llambda_context *c = make_ctx(m, &o, LLAMBDA_LOGITS_LAST);
    if (!c) { llambda_model_free(m); return 1; }
    int n_msgs = 0, cap_msgs = 16;
    llambda_chat_message *msgs = malloc((size_t)cap_msgs * sizeof *msgs);
    char **owned = calloc((size_t)cap_msgs, sizeof *owned);
    int32_t *hist = NULL;  /* tokens currently in the KV cache */
    int n_hist = 0, rc = 0;
    if (o.system) { msgs[n_msgs] = (llambda_chat_message){"system", o.system}; owned[n_msgs++] = NULL; }
    int n_predict = o.n_predict == -2 ? -1 : o.n_predict;
    char *line = NULL;
    size_t lcap = 0;
    int tty = isatty(0);
    for (;;) {
        if (tty) { fprintf(stderr, "> "); fflush(stderr); }
        ssize_t got = getline(&line, &lcap, stdin);
        if (got < 0) break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
        if (!got) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (n_msgs + 2 > cap_msgs) {
            cap_msgs *= 2;
            msgs = realloc(msgs, (size_t)cap_msgs * sizeof *msgs);
            owned = realloc(owned, (size_t)cap_msgs * sizeof *owned);
        }
        owned[n_msgs] = strdup(line);
        msgs[n_msgs] = (llambda_chat_message){"user", owned[n_msgs]};
        n_msgs++;
        char *prompt = render_chat(m, o.format, msgs, n_msgs);
        if (!prompt) { rc = 1; break; }
        int n = 0;
        int32_t *toks = tokenize(m, prompt, 1, &n);
        free(prompt);
        if (!toks) { rc = 1; break; }
        /* reuse the cached prefix; evaluate only what is new */
        int keep = 0;
        while (keep < n_hist && keep < n - 1 && hist[keep] == toks[keep]) keep++;
        /* a recurrent model cannot rewind: it restarts and replays the conversation */
        if (llambda_context_truncate(c, keep) != LLAMBDA_OK) { llambda_context_truncate(c, 0); keep = 0; }
        if (n >= llambda_context_n_ctx(c)) {
            fprintf(stderr, "\nllambda: the conversation (%d tokens) no longer fits the context of %d; start again with a larger -c\n", n, llambda_context_n_ctx(c));
            free(toks); rc = 1; break;
        }
        reply r = {0};
        r.hide = o.hide_reasoning;
        llambda_generate_result res;
        llambda_status st = llambda_generate(c, toks + keep, n - keep, n_predict, o.stop, o.n_stop, collect_token, &r, &res);
        printf("\n");
        fflush(stdout);
        free(hist);
        hist = toks;
        n_hist = keep == n ? n : n; /* generated tokens are re-derived from the text next turn */
        n_hist = llambda_context_pos(c) < n ? llambda_context_pos(c) : n;
        if (st) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); free(r.text); rc = 1; break; }
        if (res.stop_reason == 4) fprintf(stderr, "llambda: the context is full\n");
        owned[n_msgs] = r.text ? r.text : strdup("");
        msgs[n_msgs] = (llambda_chat_message){"assistant", owned[n_msgs]};
        n_msgs++;
    }
    free(line); free(hist);
    for (int i = 0; i < n_msgs; i++) free(owned[i]);
    free(owned); free(msgs);
    llambda_context_free(c);
    llambda_model_free(m);
    return rc;
}

/* ------------------------------------------------------------------ eval */

static int32_t *parse_token_list(const char *s, int *n) {
    int cap = 16, k = 0;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    while (t && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX) { fprintf(stderr, "llambda: bad token list near '%s'\n", s); free(t); return NULL; }
        if (k == cap) { int32_t *nt = realloc(t, (size_t)(cap *= 2) * sizeof *t); if (!nt) { free(t); return NULL; } t = nt; }
        t[k++] = (int32_t)v;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    *n = k;
    return t;
}

int cmd_eval(int argc, char **argv) {
    opts o;
    if (parse_opts(argc, argv, &o, "usage: llambda eval -m MODEL (--tokens 1,2,3 | -p TEXT) [-n N] [-b BATCH] [--kv-f32] --logits-out FILE\n")) return 2;
    if (!o.model || (!o.tokens == !o.prompt) || !o.logits_out) {
        fprintf(stderr, "usage: llambda eval -m MODEL (--tokens 1,2,3 | -p TEXT) [-n N] [-b BATCH] --logits-out FILE\n");
        return 2;
    }
    llambda_model *m = load(&o, argv[0], NULL);
    if (!m) return 1;
    int n = 0, rc = 0;
    int32_t *toks = o.tokens ? parse_token_list(o.tokens, &n) : tokenize(m, o.prompt, !o.no_bos, &n);
    int n_gen = o.n_predict == -2 ? 0 : o.n_predict;
    if (o.n_ctx == 0) o.n_ctx = n + n_gen + 1;
    llambda_context *c = toks && n > 0 ? make_ctx(m, &o, LLAMBDA_LOGITS_ALL) : NULL;
    FILE *f = c ? fopen(o.logits_out, "wb") : NULL;
    if (!toks || n == 0) { fprintf(stderr, "llambda: empty prompt\n"); rc = 1; goto out; }
    if (!c) { rc = 1; goto out; }
    if (!f) { fprintf(stderr, "llambda: cannot write %s\n", o.logits_out); rc = 1; goto out; }
    int V = llambda_model_n_vocab(m);
    int32_t *all = malloc((size_t)(n + (n_gen > 0 ? n_gen : 0)) * sizeof *all);
    memcpy(all, toks, (size_t)n * sizeof *all);
    if (llambda_eval(c, toks, n)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); rc = 1; free(all); goto out; }
    for (int i = 0; i < n; i++) fwrite(llambda_get_logits(c, i), 4, (size_t)V, f);
    int total = n;
    for (int g = 0; g < n_gen; g++) {
        const float *lg = llambda_get_logits(c, -1);
        int best = 0;
        for (int i = 1; i < V; i++) if (lg[i] > lg[best]) best = i;
        all[total++] = best;
        if (g + 1 == n_gen) break;
        if (llambda_eval(c, &all[total - 1], 1)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); rc = 1; break; }
        fwrite(llambda_get_logits(c, -1), 4, (size_t)V, f);
    }
    /* the fixture layout also holds the logits after the last generated token */
    if (!rc && n_gen > 0) {
        if (llambda_eval(c, &all[total - 1], 1)) { fprintf(stderr, "llambda: %s\n", llambda_last_error()); rc = 1; }
        else fwrite(llambda_get_logits(c, -1), 4, (size_t)V, f);
    }
    printf("{\"n_vocab\":%d,\"n_prompt\":%d,\"tokens\":[", V, n);
    for (int i = 0; i < total; i++) printf(i ? ",%d" : "%d", all[i]);
    printf("]}\n");
    free(all);
out:
    if (f && fclose(f)) rc = 1;
    free(toks);
    llambda_context_free(c);
    llambda_model_free(m);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    opts o;
    if (parse_opts(argc, argv, &o, "usage: llambda tokenize -m MODEL -p TEXT [--no-bos]\n")) return 2;
    if (!o.model || !o.prompt) { fprintf(stderr, "usage: llambda tokenize -m MODEL -p TEXT [--no-bos]\n"); return 2; }
    llambda_model *m = load(&o, argv[0], NULL);
    if (!m) return 1;
    int n = 0;
    int32_t *t = tokenize(m, o.prompt, !o.no_bos, &n);
    if (!t) { llambda_model_free(m); return 1; }
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", t[i]);
    printf("\n");
    free(t);
    llambda_model_free(m);
    return 0;
}
