/* The backend registry, the projection store and the offload API.
 *
 * Registration order below is the execution priority within a class (GPU before NPU);
 * init_order in each descriptor decides which loads first. */
#include "backend.h"
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>

static const ll_backend_desc *const registry[] = {
#ifdef LL_HAVE_CUDA
    &ll_backend_cuda,
#endif
    &ll_backend_onnx,
    &ll_backend_test,
    &ll_backend_testnpu,
};
#define N_REGISTRY ((int)(sizeof registry / sizeof registry[0]))

/* Registered projections: every weight matrix llambda_offload_register selected. */
typedef struct ll_offload {
    ll_weight **w;
    int n, cap;
    long exports, cache_hits, cache_rebuilds;
} ll_offload;

static void warn(const char *fmt, ...) LL_PRINTF(1, 2);
static void warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("llambda: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const char *llambda_backends_known(void) {
    static char names[256];
    if (!names[0])
        for (int i = 0; i < N_REGISTRY; i++) {
            if (i) strncat(names, ",", sizeof names - strlen(names) - 1);
            strncat(names, registry[i]->name, sizeof names - strlen(names) - 1);
        }
    return names;
}

static int registry_index(const ll_backend_desc *d) {
    for (int i = 0; i < N_REGISTRY; i++) if (registry[i] == d) return i;
    return N_REGISTRY;
}

/* Priority: class first (GPU, NPU), then the registry's order. */
static int priority_of(const ll_backend *b) { return (int)b->desc->klass * 64 + registry_index(b->desc); }

static llambda_status load_one(llambda_model *m, const ll_backend_desc *d, const char *opts) {
    for (int i = 0; i < m->n_backends; i++)
        if (m->backends[i]->desc == d) { warn("backend '%s' is already loaded; '%s:%s' ignored", d->name, d->name, opts); return LLAMBDA_OK; }
    if (m->n_backends == LL_MAX_BACKENDS) return ll_error(LLAMBDA_ERR_ARG, "at most %d backends per model", LL_MAX_BACKENDS);
    ll_backend *b = calloc(1, sizeof *b);
    if (!b) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    b->desc = d;
    snprintf(b->opts, sizeof b->opts, "%s", opts);
    llambda_status st = d->load(b->opts, &b->state);
    if (st == LLAMBDA_OK) {
        st = d->probe(b->state, &b->probe);
        if (st == LLAMBDA_OK && !b->probe.available) st = ll_error(LLAMBDA_ERR_UNSUPPORTED, "no usable device");
        if (st != LLAMBDA_OK) d->unload(b->state);
    }
    if (st == LLAMBDA_ERR_ARG) { free(b); return st; }   /* a malformed option is the caller's error */
    if (st != LLAMBDA_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", llambda_last_error());
        warn("backend '%s' is not available (%s); continuing without it", d->name, why);
        ll_error(st, "backend '%s' is not available: %s", d->name, why);   /* kept for the caller to read */
        free(b);
        return LLAMBDA_OK;
    }
    /* insert in priority order */
    int at = m->n_backends;
    while (at > 0 && priority_of(m->backends[at - 1]) > priority_of(b)) { m->backends[at] = m->backends[at - 1]; at--; }
    m->backends[at] = b;
    m->n_backends++;
    return LLAMBDA_OK;
}

llambda_status llambda_backends_load(llambda_model *m, const char *spec) {
    if (!spec || !*spec) return LLAMBDA_OK;
    if (m->vocab_only) return ll_error(LLAMBDA_ERR_ARG, "a vocabulary-only model has no projections to offload");
    /* parse and validate every entry first: a typo loads nothing */
    struct { const ll_backend_desc *d; char opts[128]; } want[8];
    int n = 0;
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[160];
        if (len == 0 || len >= sizeof item) return ll_error(LLAMBDA_ERR_ARG, "backend list '%s': empty or too long entry", spec);
        memcpy(item, p, len); item[len] = 0;
        char *colon = strchr(item, ':');
        if (colon) *colon = 0;
        const ll_backend_desc *d = NULL;
        for (int i = 0; i < N_REGISTRY; i++) if (!strcmp(registry[i]->name, item)) d = registry[i];
        if (!d) return ll_error(LLAMBDA_ERR_ARG, "unknown backend '%s' (this build knows: %s)", item, llambda_backends_known());
        if (n == 8) return ll_error(LLAMBDA_ERR_ARG, "backend list '%s': too many entries", spec);
        want[n].d = d;
        snprintf(want[n].opts, sizeof want[n].opts, "%s", colon ? colon + 1 : "");
        n++;
        p += len + (end ? 1 : 0);
    }
    /* initialise in init_order (stable) */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && want[j - 1].d->init_order > want[j].d->init_order; j--) {
            __typeof__(want[0]) t = want[j]; want[j] = want[j - 1]; want[j - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        llambda_status st = load_one(m, want[i].d, want[i].opts);
        if (st) return st;
    }
    return LLAMBDA_OK;
}

int llambda_backend_count(const llambda_model *m) { return m->n_backends; }

static int live_sessions(const llambda_model *m, const ll_backend *b) {
    int n = 0;
    if (!m->offload) return 0;
    for (int i = 0; i < m->offload->n; i++) {
        const ll_weight *w = m->offload->w[i];
        for (int64_t e = 0; w->bind && e < w->n_mat; e++)
            for (int k = 0; k < w->bind[e].n; k++)
                n += w->bind[e].b[k].be == b && !atomic_load(&w->bind[e].b[k].dead);
    }
    return n;
}

llambda_status llambda_backend_info_get(const llambda_model *m, int i, llambda_backend_info *out) {
    if (i < 0 || i >= m->n_backends) return ll_error(LLAMBDA_ERR_ARG, "no backend %d (the model has %d)", i, m->n_backends);
    const ll_backend *b = m->backends[i];
    memset(out, 0, sizeof *out);
    out->name = b->desc->name;
    out->klass = b->desc->klass == LL_BK_GPU ? "gpu" : "npu";
    memcpy(out->device, b->probe.device, sizeof out->device);
    out->memory_bytes = b->probe.memory_bytes;
    memcpy(out->runtime_version, b->probe.runtime_version, sizeof out->runtime_version);
    out->bridge_version = b->desc->bridge_version;
    out->sessions = live_sessions(m, b);
    out->runs = atomic_load(&((ll_backend *)b)->runs);
    out->failures = atomic_load(&((ll_backend *)b)->failures);
    return LLAMBDA_OK;
}

/* ---------------------------------------------------------------- the hot path */

int ll_bindings_run(const ll_weight *w, const float *x, int n_tok, float *y) {
    struct ll_bindset *s = w->bind;
    for (int i = 0; i < s->n; i++) {
        ll_binding *b = &s->b[i];
        if (atomic_load_explicit(&b->dead, memory_order_relaxed)) continue;
        llambda_status st = b->be->desc->session_run(b->session, x, n_tok, y);
        atomic_fetch_add_explicit(&b->be->runs, 1, memory_order_relaxed);
        if (st == LLAMBDA_OK) return 1;
        atomic_fetch_add_explicit(&b->be->failures, 1, memory_order_relaxed);
        if (!atomic_exchange(&b->dead, 1))
            warn("%s: the '%s' session failed (%s); dropped, the next backend computes it", w->name, b->be->desc->name, llambda_last_error());
    }
    return 0;
}

/* ---------------------------------------------------------------- selecting projections */

typedef struct { const char *role; size_t off; } role_field;
#define ROLE(r, f) { r, offsetof(ll_layer, f) }
static const role_field roles[] = {
    ROLE("q", wq), ROLE("k", wk), ROLE("v", wv), ROLE("o", wo),
    ROLE("gate", w_gate), ROLE("up", w_up), ROLE("down", w_down),
    ROLE("qkv", attn_qkv), ROLE("attn_gate", attn_gate), ROLE("ssm_in", ssm_in), ROLE("ssm_in", ssm_in_legacy),
    ROLE("ssm_out", ssm_out), ROLE("gate_shexp", gate_shexp), ROLE("up_shexp", up_shexp), ROLE("down_shexp", down_shexp),
    ROLE("gate_exps", moe.gate), ROLE("up_exps", moe.up), ROLE("down_exps", moe.down), ROLE("gate_up_exps", moe.gate_up),
};
#define N_ROLES ((int)(sizeof roles / sizeof roles[0]))

static ll_weight *layer_weight(llambda_model *m, int l, int r) { return (ll_weight *)((char *)&m->layers[l] + roles[r].off); }

/* "q,k,...,output": the role names of the table, for messages */
static const char *role_names(void) {
    static char names[512];
    if (!names[0]) {
        for (int r = 0; r < N_ROLES; r++)
            if (!r || strcmp(roles[r].role, roles[r - 1].role)) {
                strncat(names, roles[r].role, sizeof names - strlen(names) - 1);
                strncat(names, ",", sizeof names - strlen(names) - 1);
            }
        strncat(names, "output", sizeof names - strlen(names) - 1);
    }
    return names;
}

static int is_matrix(const ll_weight *w) { return w->data && w->rows > 1 && w->cols > 1; }

static llambda_status add_weight(ll_offload *o, ll_weight *w) {
    for (int i = 0; i < o->n; i++) if (o->w[i] == w) return LLAMBDA_OK;
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 64;
        ll_weight **nw = realloc(o->w, (size_t)cap * sizeof *nw);
        if (!nw) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
        o->w = nw; o->cap = cap;
    }
    o->w[o->n++] = w;
    return LLAMBDA_OK;
}

/* Every weight matrix of the model that llambda multiplies with, by name. */
static ll_weight *find_weight(llambda_model *m, const char *name) {
    if (is_matrix(&m->output) && !strcmp(m->output.name, name)) return &m->output;
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int r = 0; r < N_ROLES; r++) {
            ll_weight *w = layer_weight(m, l, r);
            if (is_matrix(w) && !strcmp(w->name, name)) return w;
        }
    return NULL;
}

/* "0-3,7" or "all" into a per-layer mask. */
static llambda_status parse_layers(const char *s, int n_layer, unsigned char *mask) {
    memset(mask, 0, (size_t)n_layer);
    if (!strcmp(s, "all")) { memset(mask, 1, (size_t)n_layer); return LLAMBDA_OK; }
    if (!strncmp(s, "first:", 6)) {   /* -ngl N: the first N layers, as many as there are */
        char *e;
        long k = strtol(s + 6, &e, 10);
        if (e == s + 6 || *e || k < 0) return ll_error(LLAMBDA_ERR_ARG, "layers '%s': expected first:N", s);
        memset(mask, 1, (size_t)(k < n_layer ? k : n_layer));
        return LLAMBDA_OK;
    }
    const char *p = s;
    while (*p) {
        char *e;
        long a = strtol(p, &e, 10), b = a;
        if (e == p || a < 0) return ll_error(LLAMBDA_ERR_ARG, "layers '%s': expected a list like 0-3,7", s);
        p = e;
        if (*p == '-') {
            b = strtol(p + 1, &e, 10);
            if (e == p + 1 || b < a) return ll_error(LLAMBDA_ERR_ARG, "layers '%s': bad range", s);
            p = e;
        }
        if (b >= n_layer) return ll_error(LLAMBDA_ERR_ARG, "layers '%s': layer %ld is out of range (the model has %d layers)", s, b, n_layer);
        for (long l = a; l <= b; l++) mask[l] = 1;
        if (*p == ',') p++;
        else if (*p) return ll_error(LLAMBDA_ERR_ARG, "layers '%s': unexpected '%c'", s, *p);
    }
    return LLAMBDA_OK;
}

/* Apply fn to each comma-separated word of s. */
static llambda_status each_word(const char *s, llambda_status (*fn)(const char *word, void *u), void *u) {
    char word[128];
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len >= sizeof word) return ll_error(LLAMBDA_ERR_ARG, "'%.40s…' is too long", s);
        memcpy(word, s, len); word[len] = 0;
        if (len) { llambda_status st = fn(word, u); if (st) return st; }
        s += len + (e ? 1 : 0);
    }
    return LLAMBDA_OK;
}

typedef struct { llambda_model *m; ll_offload *sel; const unsigned char *mask; } select_ctx;

static llambda_status select_tensor(const char *name, void *u) {
    select_ctx *s = u;
    ll_weight *w = find_weight(s->m, name);
    if (!w) return ll_error(LLAMBDA_ERR_ARG, "no projection named '%s' in this %s model", name, s->m->arch_name);
    return add_weight(s->sel, w);
}

static llambda_status select_role(const char *role, void *u) {
    select_ctx *s = u;
    int known = 0, found = 0;
    if (!strcmp(role, "output")) {
        if (!is_matrix(&s->m->output)) return ll_error(LLAMBDA_ERR_ARG, "this model has no output projection");
        return add_weight(s->sel, &s->m->output);
    }
    for (int r = 0; r < N_ROLES; r++) {
        if (strcmp(roles[r].role, role)) continue;
        known = 1;
        for (int l = 0; l < s->m->hp.n_layer; l++) {
            ll_weight *w = layer_weight(s->m, l, r);
            if (!s->mask[l] || !is_matrix(w)) continue;
            found = 1;
            llambda_status st = add_weight(s->sel, w);
            if (st) return st;
        }
    }
    if (!known) return ll_error(LLAMBDA_ERR_ARG, "unknown role '%s' (roles: %s)", role, role_names());
    if (!found) return ll_error(LLAMBDA_ERR_ARG, "no selected layer of this %s model has a '%s' projection", s->m->arch_name, role);
    return LLAMBDA_OK;
}

static ll_offload *offload_of(llambda_model *m) {
    if (!m->offload) m->offload = calloc(1, sizeof *m->offload);
    return m->offload;
}

llambda_status llambda_offload_register(llambda_model *m, const char *tensors, const char *layers, const char *role_list) {
    if (m->vocab_only) return ll_error(LLAMBDA_ERR_ARG, "a vocabulary-only model has no projections to offload");
    ll_offload *o = offload_of(m), sel = {0};
    if (!o) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    unsigned char *mask = calloc((size_t)m->hp.n_layer + 1, 1);
    if (!mask) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    select_ctx s = {m, &sel, mask};
    llambda_status st = LLAMBDA_OK;
    if (tensors && *tensors) st = each_word(tensors, select_tensor, &s);
    if (!st && layers && *layers) {
        st = parse_layers(layers, m->hp.n_layer, mask);
        if (!st && role_list && *role_list) st = each_word(role_list, select_role, &s);
        else if (!st)   /* no roles named: every projection the selected layers have */
            for (int r = 0; r < N_ROLES; r++)
                for (int l = 0; l < m->hp.n_layer && !st; l++) {
                    ll_weight *w = layer_weight(m, l, r);
                    if (mask[l] && is_matrix(w)) st = add_weight(&sel, w);
                }
    } else if (!st && role_list && *role_list) {
        st = ll_error(LLAMBDA_ERR_ARG, "roles '%s' need layers (e.g. \"0-3\" or \"all\")", role_list);
    }
    for (int i = 0; !st && i < sel.n; i++) st = add_weight(o, sel.w[i]);
    free(sel.w);
    free(mask);
    return st;
}

/* ---------------------------------------------------------------- export and sessions */

llambda_status ll_export_blocks(const ll_weight *w, uint8_t **art, size_t *len) {
    size_t n = (size_t)w->rows * w->row_bytes;
    if (!(*art = malloc(n))) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory exporting '%s'", w->name);
    memcpy(*art, w->data, n);
    *len = n;
    return LLAMBDA_OK;
}

static llambda_status artifact_for(ll_offload *o, ll_backend *b, const ll_weight *w, uint8_t **art, size_t *len) {
    const ll_backend_desc *d = b->desc;
    char key[65];
    const char *nc = getenv("LLAMBDA_NO_CACHE");
    int use_cache = d->cache_artifacts && !(nc && *nc && strcmp(nc, "0"));
    if (use_cache) {
        ll_cache_key_fields f = {w->data, (size_t)w->rows * w->row_bytes, w->rows, w->cols, w->type,
                                 d->name, d->bridge_version, d->exporter_version, b->probe.runtime_version};
        char fmt_tag[96];
        /* the weight format is part of what the exporter produces */
        snprintf(fmt_tag, sizeof fmt_tag, "%s/format=%d", d->exporter_version, (int)d->weight_format(b->state));
        f.exporter_version = fmt_tag;
        llambda_status st = ll_cache_key(&f, key);
        if (st) return st;
        int r = ll_cache_get(key, art, len);
        if (r == 1) { o->cache_hits++; return LLAMBDA_OK; }
        if (r == -1) o->cache_rebuilds++;
    }
    llambda_status st = d->export_weight(b->state, w, art, len);
    if (st) return st;
    o->exports++;
    if (use_cache && ll_cache_put(key, *art, *len) != LLAMBDA_OK)
        warn("could not store the %s artifact of '%s' in the cache (%s)", d->name, w->name, llambda_last_error());
    return LLAMBDA_OK;
}

llambda_status llambda_offload_ensure(llambda_model *m) {
    ll_offload *o = m->offload;
    if (!o || !o->n) return LLAMBDA_OK;
    if (!m->n_backends) return ll_error(LLAMBDA_ERR_ARG, "no accelerator backend is loaded");
    for (int bi = 0; bi < m->n_backends; bi++)
        for (int i = 0; i < o->n; i++)
            for (int64_t e = 0; e < o->w[i]->n_mat; e++) {
                ll_weight v = ll_weight_matrix(o->w[i], e);
                uint8_t *art = NULL; size_t len = 0;
                llambda_status st = artifact_for(o, m->backends[bi], &v, &art, &len);
                free(art);
                if (st) return st;
            }
    return LLAMBDA_OK;
}

static int has_binding(const struct ll_bindset *s, const ll_backend *b) {
    for (int k = 0; k < s->n; k++) if (s->b[k].be == b) return 1;
    return 0;
}

static void insert_binding(struct ll_bindset *s, ll_backend *b, void *session) {
    int at = s->n;
    while (at > 0 && priority_of(s->b[at - 1].be) > priority_of(b)) { s->b[at] = s->b[at - 1]; at--; }
    s->b[at].be = b;
    s->b[at].session = session;
    atomic_store(&s->b[at].dead, 0);
    s->n++;
}

/* Remove backend b's bindings of weight w, freeing their sessions. */
static void remove_bindings(ll_weight *w, const ll_backend *b) {
    if (!w->bind) return;
    for (int64_t e = 0; e < w->n_mat; e++) {
        struct ll_bindset *s = &w->bind[e];
        int o = 0;
        for (int k = 0; k < s->n; k++) {
            if (s->b[k].be == b) { b->desc->session_free(s->b[k].session); continue; }
            s->b[o++] = s->b[k];
        }
        s->n = o;
    }
}

/* Bind every registered projection to backend b; on any failure undo what this call added. */
static llambda_status enable_on(llambda_model *m, ll_backend *b) {
    ll_offload *o = m->offload;
    unsigned char *added = calloc((size_t)o->n, 1);
    if (!added) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    llambda_status st = LLAMBDA_OK;
    for (int i = 0; i < o->n && !st; i++) {
        ll_weight *w = o->w[i];
        if (!w->bind && !(w->bind = calloc((size_t)w->n_mat, sizeof *w->bind))) { st = ll_error(LLAMBDA_ERR_NOMEM, "out of memory"); break; }
        if (has_binding(&w->bind[0], b)) continue;
        added[i] = 1;
        for (int64_t e = 0; e < w->n_mat && !st; e++) {
            ll_weight v = ll_weight_matrix(w, e);
            uint8_t *art = NULL; size_t len = 0;
            void *session = NULL;
            st = artifact_for(o, b, &v, &art, &len);
            if (!st) st = b->desc->session_create(b->state, &v, art, len, &session);
            free(art);
            if (!st) insert_binding(&w->bind[e], b, session);
            else {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", llambda_last_error());
                st = ll_error(st, "%s: %s", w->name, msg);
            }
        }
    }
    if (st)
        for (int i = 0; i < o->n; i++) if (added[i]) remove_bindings(o->w[i], b);
    free(added);
    return st;
}

llambda_status llambda_offload_enable(llambda_model *m) {
    ll_offload *o = m->offload;
    if (!o || !o->n) return LLAMBDA_OK;
    if (!m->n_backends) return ll_error(LLAMBDA_ERR_ARG, "no accelerator backend is loaded");
    llambda_status last = LLAMBDA_OK;
    int ok = 0;
    char msg[512] = "";
    for (int bi = 0; bi < m->n_backends; bi++) {
        llambda_status st = enable_on(m, m->backends[bi]);
        if (st == LLAMBDA_OK) { ok++; continue; }
        snprintf(msg, sizeof msg, "backend '%s': %s", m->backends[bi]->desc->name, llambda_last_error());
        warn("%s; its sessions were rolled back, the next backend takes over", msg);
        last = st;
    }
    if (!ok) return ll_error(last, "%s", msg);
    return LLAMBDA_OK;
}

llambda_status ll_backend_session(llambda_model *m, const char *name, const ll_weight *w, ll_backend **be, void **session) {
    char base[64];
    snprintf(base, sizeof base, "%.*s", (int)strcspn(name, ":"), name);
    ll_backend *b = NULL;
    for (int i = 0; i < m->n_backends; i++) if (!strcmp(m->backends[i]->desc->name, base)) b = m->backends[i];
    if (!b) return ll_error(LLAMBDA_ERR_UNSUPPORTED, "backend '%s' is not loaded", base);
    ll_offload *o = offload_of(m);
    if (!o) return ll_error(LLAMBDA_ERR_NOMEM, "out of memory");
    uint8_t *art = NULL; size_t len = 0;
    llambda_status st = artifact_for(o, b, w, &art, &len);
    if (!st) st = b->desc->session_create(b->state, w, art, len, session);
    free(art);
    if (!st) *be = b;
    return st;
}

llambda_status ll_backend_session_run(ll_backend *be, void *session, const float *x, int n_tok, float *y) {
    return be->desc->session_run(session, x, n_tok, y);
}

void ll_backend_session_free(ll_backend *be, void *session) { be->desc->session_free(session); }

void llambda_offload_clear(llambda_model *m) {
    ll_offload *o = m->offload;
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        ll_weight *w = o->w[i];
        for (int bi = 0; bi < m->n_backends; bi++) remove_bindings(w, m->backends[bi]);
        free(w->bind);
        w->bind = NULL;
    }
    free(o->w);
    o->w = NULL;
    o->n = o->cap = 0;
}

void llambda_offload_stats_get(const llambda_model *m, llambda_offload_stats *out) {
    memset(out, 0, sizeof *out);
    const ll_offload *o = m->offload;
    if (!o) return;
    for (int i = 0; i < o->n; i++)
        for (int64_t e = 0; e < o->w[i]->n_mat; e++) {
            out->registered++;
            const struct ll_bindset *s = o->w[i]->bind ? &o->w[i]->bind[e] : NULL;
            int live = 0;
            for (int k = 0; s && k < s->n; k++) live |= !atomic_load(&s->b[k].dead);
            out->bound += live;
        }
    out->exports = o->exports;
    out->cache_hits = o->cache_hits;
    out->cache_rebuilds = o->cache_rebuilds;
}

void ll_backends_free(llambda_model *m) {
    llambda_offload_clear(m);
    free(m->offload);
    m->offload = NULL;
    for (int i = 0; i < m->n_backends; i++) {
        m->backends[i]->desc->unload(m->backends[i]->state);
        free(m->backends[i]);
    }
    m->n_backends = 0;
}
