/* Sampling in place over a preallocated candidate array (llama.cpp's default chain):
 * penalties -> top-k -> top-p -> min-p -> temperature -> draw. And the generate loop. */
#include "model.h"
#include <stdlib.h>

int ll_enter(llambda_context *c);
void ll_leave(llambda_context *c);
llambda_status ll_eval(llambda_context *c, const int32_t *tokens, int n);

/* ------------------------------------------------------------------ RNG: xoshiro256** */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t rng_next(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
}
static double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

static void seed_rng(ll_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

llambda_status ll_sampler_init(ll_sampler *s, int n_vocab, const llambda_sampler_params *p) {
    memset(s, 0, sizeof *s);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
    s->sort_buf = malloc((size_t)n_vocab * sizeof *s->sort_buf);
    if (!s->cand || !s->counts || !s->sort_buf) return LLAMBDA_ERR_NOMEM;
    s->p = *p;
    s->hist_cap = p->repeat_last_n > 0 ? p->repeat_last_n : 0;
    if (s->hist_cap && !(s->history = malloc((size_t)s->hist_cap * sizeof *s->history))) return LLAMBDA_ERR_NOMEM;
    seed_rng(s);
    return LLAMBDA_OK;
}

void ll_sampler_free(ll_sampler *s) { free(s->cand); free(s->counts); free(s->sort_buf); free(s->history); }

void ll_sampler_reset(ll_sampler *s) {
    for (int i = 0; i < s->hist_len; i++) s->counts[s->history[i]] = 0;
    s->hist_len = s->hist_pos = 0;
    seed_rng(s);
}

static void sampler_accept(ll_sampler *s, int32_t tok) {
    if (!s->hist_cap) return;
    if (s->hist_len == s->hist_cap) s->counts[s->history[s->hist_pos]]--;
    else s->hist_len++;
    s->history[s->hist_pos] = tok;
    s->counts[tok]++;
    s->hist_pos = (s->hist_pos + 1) % s->hist_cap;
}

void llambda_context_set_sampler(llambda_context *c, const llambda_sampler_params *p) {
    ll_sampler *s = &c->smp;
    for (int i = 0; i < s->hist_len; i++) s->counts[s->history[i]] = 0;
    int cap = p->repeat_last_n > 0 ? p->repeat_last_n : 0;
    if (cap > s->hist_cap) {
        int32_t *h = realloc(s->history, (size_t)cap * sizeof *h);
        if (!h) cap = s->hist_cap; else s->history = h;
    }
    s->p = *p;
    s->hist_cap = cap;
    s->hist_len = s->hist_pos = 0;
    seed_rng(s);
}

void llambda_sampler_accept(llambda_context *c, const int32_t *tokens, int n) {
    for (int i = 0; i < n; i++)
        if (tokens[i] >= 0 && tokens[i] < c->m->hp.n_vocab) sampler_accept(&c->smp, tokens[i]);
}

/* ------------------------------------------------------------------ the chain */

typedef struct ll_cand cand;

/* The candidates' order, best first: the higher logit, then the lower id. A NaN logit is
 * before nothing and nothing is before it, so every scan below stops at one. */
static inline int cand_before(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

/* Sorting many candidates (a deep top-p nucleus): each becomes one 64-bit key whose
 * unsigned order is cand_before's (the logit's bits made orderable and reversed above, the
 * id below; -0 counted as +0, as cand_before's == does), sorted with inline comparisons and
 * turned back in place: a callback per comparison made qsort three quarters of the
 * sampler's time. */
static uint64_t cand_key(cand x) {
    uint32_t u;
    float f = x.logit + 0.0f;   /* -0 -> +0 */
    memcpy(&u, &f, 4);
    u = u & 0x80000000u ? ~u : u | 0x80000000u;   /* ascending as unsigned */
    return (uint64_t)~u << 32 | (uint32_t)x.id;
}
static cand key_cand(uint64_t k) {
    uint32_t u = ~(uint32_t)(k >> 32);
    u = u & 0x80000000u ? u & 0x7fffffffu : ~u;
    cand x;
    memcpy(&x.logit, &u, 4);
    x.id = (int32_t)(uint32_t)k;
    return x;
}

static void sift_u64(uint64_t *a, int n, int i) {
    for (int l; (l = 2 * i + 1) < n; i = l) {
        if (l + 1 < n && a[l + 1] > a[l]) l++;
        if (a[i] >= a[l]) return;
        uint64_t t = a[i]; a[i] = a[l]; a[l] = t;
    }
}

/* introsort: quicksort (median of three), heapsort past a depth limit, insertion sort
 * for short runs */
static void sort_u64(uint64_t *a, int n, int depth) {
    while (n > 16) {
        if (depth-- == 0) {
            for (int i = n / 2 - 1; i >= 0; i--) sift_u64(a, n, i);
            for (int e = n - 1; e > 0; e--) { uint64_t t = a[0]; a[0] = a[e]; a[e] = t; sift_u64(a, e, 0); }
            return;
        }
        uint64_t x = a[0], y = a[n / 2], z = a[n - 1];
        uint64_t pivot = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y);
        int i = 0, j = n - 1;
        for (;;) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i >= j) break;
            uint64_t t = a[i]; a[i] = a[j]; a[j] = t;
            i++; j--;
        }
        /* [0, j] <= pivot <= [j+1, n): recurse into the smaller side */
        if (j + 1 < n - j - 1) { sort_u64(a, j + 1, depth); a += j + 1; n -= j + 1; }
        else { sort_u64(a + j + 1, n - j - 1, depth); n = j + 1; }
    }
    for (int i = 1; i < n; i++) {
        uint64_t v = a[i];
        int k = i;
        for (; k > 0 && a[k - 1] > v; k--) a[k] = a[k - 1];
        a[k] = v;
    }
}

/* LSD radix sort, 11 bits a pass, all six histograms counted in one sweep; a digit every
 * key shares costs no pass (the ids' high bits, the logits' sign and exponent mostly).
 * Stable and exact on the whole key, so the same order as any other sort of it: at most
 * six sweeps where a 12k-candidate nucleus took ~14 rounds of compare-and-swap. */
#define RADIX_BITS 11
#define RADIX_PASSES 6   /* 66 bits >= 64 */
static void radix_u64(uint64_t *a, uint64_t *tmp, int n) {
    static _Thread_local uint32_t hist[RADIX_PASSES][1 << RADIX_BITS];   /* 48 KB: off the stack */
    const uint64_t mask = (1u << RADIX_BITS) - 1;
    memset(hist, 0, sizeof hist);
    for (int i = 0; i < n; i++)
        for (int p = 0; p < RADIX_PASSES; p++) hist[p][(a[i] >> (RADIX_BITS * p)) & mask]++;
    uint64_t *src = a, *dst = tmp;
    for (int p = 0; p < RADIX_PASSES; p++) {
        int shift = RADIX_BITS * p;
        uint32_t *h = hist[p];
        if (h[(src[0] >> shift) & mask] == (uint32_t)n) continue;   /* one digit for all */
        uint32_t at = 0;
        for (int d = 0; d <= (int)mask; d++) { uint32_t c = h[d]; h[d] = at; at += c; }
        for (int i = 0; i < n; i++) dst[h[(src[i] >> shift) & mask]++] = src[i];
        uint64_t *t = src; src = dst; dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
}

/* Candidates in best-first order (cand_before's), as 64-bit keys: a radix sort for many
 * (buf: room for n keys, the sampler's), introsort for a few. */
static void sort_cands(cand *c, int n, uint64_t *buf) {
    _Static_assert(sizeof(cand) == sizeof(uint64_t), "a candidate is the size of its key");
    uint64_t *k = (uint64_t *)(void *)c;
    for (int i = 0; i < n; i++) { uint64_t v = cand_key(c[i]); memcpy(&k[i], &v, 8); }
    if (n >= 1024) radix_u64(k, buf, n);
    else {
        int depth = 2;
        for (int m = n; m > 1; m >>= 1) depth += 2;
        sort_u64(k, n, depth);
    }
    for (int i = 0; i < n; i++) { uint64_t v; memcpy(&v, &k[i], 8); c[i] = key_cand(v); }
}

/* Restore the heap below i: c[0..k) with the last in cand_before's order at the root. */
static void sift_worst(cand *c, int k, int i) {
    for (;;) {
        int l = 2 * i + 1, w;
        if (l >= k) return;
        w = l + 1 < k && cand_before(&c[l], &c[l + 1]) ? l + 1 : l;
        if (!cand_before(&c[i], &c[w])) return;
        cand t = c[i]; c[i] = c[w]; c[w] = t;
        i = w;
    }
}

/* Move the k best to the front, then sort them. A few best of many (top-k 40 of a 128k
 * vocabulary, every token by default) keep a heap of the k best so far: nearly every
 * candidate costs one comparison with its root (0.6 ms -> 0.1 ms a token at 128k);
 * otherwise quickselect. Either way the front holds the same k in the same order. */
static void top_k(cand *c, int n, int k, uint64_t *buf) {
    if (k <= 256 && (int64_t)k * 16 <= n) {
        for (int i = k / 2 - 1; i >= 0; i--) sift_worst(c, k, i);
        for (int i = k; i < n; i++)
            if (cand_before(&c[i], &c[0])) { cand t = c[i]; c[i] = c[0]; c[0] = t; sift_worst(c, k, 0); }
        sort_cands(c, k, buf);
        return;
    }
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (cand_before(&c[i], &pivot)) i++;
            while (cand_before(&pivot, &c[j])) j--;
            if (i <= j) { cand t = c[i]; c[i] = c[j]; c[j] = t; i++; j--; }
        }
        if (k - 1 <= j) hi = j; else if (k - 1 >= i) lo = i; else break;
    }
    sort_cands(c, k, buf);
}

/* A prefix of the best-first order sure to hold the nucleus, moved to the front unsorted:
 * every candidate within 32 of the best logit counted in buckets 1/64 wide, each bucket's
 * mass taken at its low end (so never over), buckets added from the top until they hold
 * `need` (p times the total) and one more for rounding; then all candidates at or above
 * that bucket go to the front. Returns how many, or 0 when the buckets cannot show it
 * (the caller then widens step by step). */
#define NUCLEUS_PER_UNIT 64                    /* buckets per unit of logit */
#define NUCLEUS_BUCKETS (32 * NUCLEUS_PER_UNIT)
static int nucleus_bound(cand *c, int n, float mx, double need) {
    int count[NUCLEUS_BUCKETS] = {0};
    for (int i = 0; i < n; i++) {
        float d = (mx - c[i].logit) * NUCLEUS_PER_UNIT;
        if (d < NUCLEUS_BUCKETS) count[(int)d]++;   /* NaN and -inf fail the test */
    }
    double mass = 0;
    int b = 0;
    for (; b < NUCLEUS_BUCKETS && mass < need; b++) mass += count[b] * exp(-(double)(b + 1) / NUCLEUS_PER_UNIT);
    if (mass < need || ++b > NUCLEUS_BUCKETS) return 0;
    float cut = mx - (float)b / NUCLEUS_PER_UNIT;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (c[i].logit >= cut) { cand t = c[i]; c[i] = c[m]; c[m++] = t; }
    return m;
}

/* The largest logit (NaN never is). Never inlined: inline, the compiler kept the running
 * maximum on the stack, where its caller holds it across the calls that follow (a store
 * and a load per candidate); that it stayed out of line was the compiler's choice. */
static __attribute__((noinline)) float cand_max(const cand *c, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) if (c[i].logit > mx) mx = c[i].logit;
    return mx;
}

/* y[i] = expf(c[i].logit - mx) for up to EXP_RUN candidates, through the kernels' row
 * exponential (vectorized, the C library's bits): the sums below add the same values in
 * the same order as a plain expf loop would */
#define EXP_RUN 256
static void cand_exps(const cand *c, int n, float mx, float *y) {
    float x[EXP_RUN];
    for (int i = 0; i < n; i++) x[i] = c[i].logit - mx;
    ll_kernels_get()->expf_row(y, x, n);
}

/* Σ expf(c[i].logit - mx), added in order */
static float cand_exp_sum(const cand *c, int n, float mx) {
    float sum = 0, e[EXP_RUN];
    for (int i0 = 0; i0 < n; i0 += EXP_RUN) {
        int m = n - i0 < EXP_RUN ? n - i0 : EXP_RUN;
        cand_exps(c + i0, m, mx, e);
        for (int i = 0; i < m; i++) sum += e[i];
    }
    return sum;
}

/* How many of the first m sorted candidates the nucleus takes: the first whose running
 * probability reaches p ends it; 0 when none does. */
static int nucleus_end(const cand *c, int m, float mx, float sum, float p) {
    float cum = 0, e[EXP_RUN];
    for (int i0 = 0; i0 < m; i0 += EXP_RUN) {
        int r = m - i0 < EXP_RUN ? m - i0 : EXP_RUN;
        cand_exps(c + i0, r, mx, e);
        for (int i = 0; i < r; i++) {
            cum += e[i] / sum;
            if (cum >= p) return i0 + i + 1;
        }
    }
    return 0;
}

/* Keep the smallest best-first prefix whose probability reaches p. Only that prefix needs
 * sorting: the best 64, 256, ... are selected and sorted until their mass reaches p (a
 * whole vocabulary sorted per token cost ~10 ms at 128k entries). The total is summed in
 * the candidates' order, so the cut does not depend on how much was sorted. */
static int top_p(cand *c, int n, int sorted, float p, uint64_t *buf) {
    float mx = cand_max(c, n), sum = cand_exp_sum(c, n, mx);
    if (!sorted && n > 4096) {
        int m = nucleus_bound(c, n, mx, (double)p * sum);
        if (m > 0) {
            sort_cands(c, m, buf);
            int end = nucleus_end(c, m, mx, sum, p);
            if (end) return end;
        }
    }
    for (int m = sorted ? n : 64;; m *= 4) {
        if (m >= n) m = n;
        if (!sorted) top_k(c, n, m, buf);
        int end = nucleus_end(c, m, mx, sum, p);
        if (end) return end;
        if (m == n) return n;
    }
}

/* banned (optional): tokens that must not be drawn (their logit becomes -inf) */
int32_t ll_sample_logits(ll_sampler *s, const float *logits, int n_vocab, const uint8_t *banned) {
    const llambda_sampler_params *p = &s->p;
    cand *c = s->cand;
    int n = n_vocab, sorted = 0;
    for (int i = 0; i < n; i++) { c[i].logit = banned && banned[i] ? -INFINITY : logits[i]; c[i].id = i; }
    /* penalties over the recent history */
    if (s->hist_len && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0 || p->presence_penalty != 0)) {
        for (int i = 0; i < n; i++) {
            int cnt = s->counts[i];
            if (!cnt) continue;
            if (c[i].logit <= 0) c[i].logit *= p->repeat_penalty; else c[i].logit /= p->repeat_penalty;
            c[i].logit -= (float)cnt * p->frequency_penalty + p->presence_penalty;
        }
    }
    if (p->temperature <= 0) {
        int best = 0;
        for (int i = 1; i < n; i++) if (c[i].logit > c[best].logit) best = i;
        return c[best].id;
    }
    if (p->top_k > 0 && p->top_k < n) { top_k(c, n, p->top_k, s->sort_buf); n = p->top_k; sorted = 1; }
    if (p->top_p < 1.0f) n = top_p(c, n, sorted, p->top_p, s->sort_buf), sorted = 1;
    if (p->min_p > 0) {
        float thr = cand_max(c, n) + logf(p->min_p);
        int k = 0;
        for (int i = 0; i < n; i++) if (c[i].logit >= thr) c[k++] = c[i];
        n = k > 0 ? k : 1;
    }
    for (int i = 0; i < n; i++) c[i].logit /= p->temperature;
    float mx = cand_max(c, n), e[EXP_RUN];
    double total = 0;
    for (int i0 = 0; i0 < n; i0 += EXP_RUN) {
        int m = n - i0 < EXP_RUN ? n - i0 : EXP_RUN;
        cand_exps(c + i0, m, mx, e);
        for (int i = 0; i < m; i++) total += (double)e[i];
    }
    double u = rng_uniform(s->rng) * total, run = 0;
    for (int i0 = 0; i0 < n; i0 += EXP_RUN) {
        int m = n - i0 < EXP_RUN ? n - i0 : EXP_RUN;
        cand_exps(c + i0, m, mx, e);
        for (int i = 0; i < m; i++) {
            run += (double)e[i];
            if (run >= u) return c[i0 + i].id;
        }
    }
    return c[n - 1].id;
}

struct llambda_sampler { ll_sampler s; int n_vocab; };

llambda_sampler *llambda_sampler_new(int n_vocab, const llambda_sampler_params *p) {
    if (n_vocab <= 0 || !p) { ll_error(LLAMBDA_ERR_ARG, "sampler: bad vocabulary size %d", n_vocab); return NULL; }
    llambda_sampler *s = calloc(1, sizeof *s);
    if (!s || ll_sampler_init(&s->s, n_vocab, p)) {
        if (s) ll_sampler_free(&s->s);
        free(s);
        ll_error(LLAMBDA_ERR_NOMEM, "sampler: out of memory");
        return NULL;
    }
    s->n_vocab = n_vocab;
    return s;
}
void llambda_sampler_free(llambda_sampler *s) { if (s) { ll_sampler_free(&s->s); free(s); } }
int32_t llambda_sampler_sample(llambda_sampler *s, const float *logits) {
    int32_t t = ll_sample_logits(&s->s, logits, s->n_vocab, NULL);
    sampler_accept(&s->s, t);
    return t;
}
void llambda_sampler_add_history(llambda_sampler *s, const int32_t *tokens, int n) {
    for (int i = 0; i < n; i++) if (tokens[i] >= 0 && tokens[i] < s->n_vocab) sampler_accept(&s->s, tokens[i]);
}
void llambda_sampler_reset(llambda_sampler *s) { ll_sampler_reset(&s->s); }

int32_t llambda_sample(llambda_context *c) {
    if (ll_enter(c)) return -1;
    const float *lg = llambda_get_logits(c, -1);
    int32_t t = -1;
    if (!lg) ll_error(LLAMBDA_ERR_ARG, "sample: no logits (evaluate tokens first)");
    else { t = ll_sample_logits(&c->smp, lg, c->m->hp.n_vocab, c->smp.p.ignore_eos ? c->m->vocab.is_eog : NULL); sampler_accept(&c->smp, t); }
    ll_leave(c);
    return t;
}

/* ------------------------------------------------------------------ generate */

#define STOP_MAX 256

/* Length of the longest suffix of s[0..n) that is a proper prefix of a stop string. */
static int partial_stop(const char *s, int n, const char *const *stop, int n_stop) {
    int best = 0;
    for (int i = 0; i < n_stop; i++) {
        int sl = (int)strlen(stop[i]);
        for (int k = sl - 1 < n ? sl - 1 : n; k > best; k--)
            if (!memcmp(s + n - k, stop[i], (size_t)k)) { best = k; break; }
    }
    return best;
}

llambda_status llambda_stream_begin(llambda_context *c, const int32_t *prompt, int n_prompt, int n_predict,
                                    const char *const *stop, int n_stop) {
    for (int i = 0; i < n_stop; i++)
        if (!stop[i] || !*stop[i] || strlen(stop[i]) > STOP_MAX) return ll_error(LLAMBDA_ERR_ARG, "generate: stop strings must be 1..%d bytes", STOP_MAX);
    if (ll_enter(c)) return LLAMBDA_ERR_BUSY;
    struct ll_stream *st = &c->st;
    memset(st, 0, sizeof *st);
    st->t_start = ll_time_seconds();
    st->res.n_prompt = n_prompt;
    llambda_status r = LLAMBDA_OK;
    if (n_prompt > 0) {
        r = ll_eval(c, prompt, n_prompt);
        if (!r) llambda_sampler_accept(c, prompt, n_prompt);
    } else if (!llambda_get_logits(c, -1)) r = ll_error(LLAMBDA_ERR_ARG, "generate: empty prompt and no previous logits");
    if (r) { ll_leave(c); return r; }
    st->res.prompt_seconds = ll_time_seconds() - st->t_start;
    st->t_start = ll_time_seconds();
    st->active = 1;
    st->n_predict = n_predict;
    st->stop = stop;
    st->n_stop = n_stop;
    st->pending_token = -1;
    st->res.stop_reason = 1;
    return LLAMBDA_OK;
}

static int stream_finish(struct ll_stream *st, int reason) {
    st->res.stop_reason = reason;
    st->finished = 1;
    return 0;
}

int llambda_stream_next(llambda_context *c, char *text, int size, int *len, int32_t *token) {
    struct ll_stream *st = &c->st;
    *len = 0;
    if (token) *token = -1;
    if (!st->active) { ll_error(LLAMBDA_ERR_ARG, "stream: not started"); return -1; }
    if (st->finished) return 0;
    /* feed the token sampled last time (its logits are needed to sample the next) */
    if (st->pending_token >= 0) {
        if (c->pos >= c->n_ctx) return stream_finish(st, 4);
        llambda_status r = ll_eval(c, &st->pending_token, 1);
        st->pending_token = -1;
        if (r) { st->finished = 1; return -1; }
    }
    if (st->n_predict >= 0 && st->n_done >= st->n_predict) return stream_finish(st, 1);
    int32_t tok = ll_sample_logits(&c->smp, llambda_get_logits(c, -1), c->m->hp.n_vocab,
                                   c->smp.p.ignore_eos ? c->m->vocab.is_eog : NULL);
    sampler_accept(&c->smp, tok);
    if (token) *token = tok;
    if (llambda_token_is_eog(c->m, tok)) return stream_finish(st, 0);
    st->n_done++;
    st->res.n_generated++;
    char piece[300];
    int k = llambda_detok_stream_push(c->m, &st->ds, tok, piece, sizeof piece);
    memcpy(st->hold + st->n_hold, piece, (size_t)k);
    st->n_hold += k;
    int stop_at = -1;
    for (int i = 0; i < st->n_stop && stop_at < 0; i++) {
        char *hit = memmem(st->hold, (size_t)st->n_hold, st->stop[i], strlen(st->stop[i]));
        if (hit) stop_at = (int)(hit - st->hold);
    }
    int emit = stop_at >= 0 ? stop_at : st->n_hold - partial_stop(st->hold, st->n_hold, st->stop, st->n_stop);
    if (emit > size) emit = size;
    memcpy(text, st->hold, (size_t)emit);
    *len = emit;
    memmove(st->hold, st->hold + emit, (size_t)(st->n_hold - emit));
    st->n_hold -= emit;
    if (stop_at >= 0) { stream_finish(st, 3); return 1; }
    st->pending_token = tok;
    if (st->n_predict >= 0 && st->n_done >= st->n_predict) { stream_finish(st, 1); return 1; }
    return 1;
}

void llambda_stream_end(llambda_context *c, llambda_generate_result *res) {
    struct ll_stream *st = &c->st;
    if (!st->active) { if (res) memset(res, 0, sizeof *res); return; }
    /* a token sampled but not yet evaluated is dropped: the context ends at the last
     * evaluated token, like llama.cpp after a stop */
    st->res.gen_seconds = ll_time_seconds() - st->t_start;
    if (res) *res = st->res;
    st->active = 0;
    ll_leave(c);
}

llambda_status llambda_generate(llambda_context *c, const int32_t *prompt, int n_prompt, int n_predict,
                                const char *const *stop, int n_stop, llambda_token_cb cb, void *user,
                                llambda_generate_result *res) {
    llambda_status st = llambda_stream_begin(c, prompt, n_prompt, n_predict, stop, n_stop);
    if (st) return st;
    char text[320];
    int len, more;
    int32_t tok;
    llambda_status err = LLAMBDA_OK;
    while ((more = llambda_stream_next(c, text, sizeof text - 1, &len, &tok)) != 0) {
        if (more < 0) { err = LLAMBDA_ERR_ARG; break; }
        text[len] = 0;
        if (cb && !cb(tok, text, len, user)) { c->st.res.stop_reason = 2; break; }
        if (c->st.finished) break;
    }
    llambda_stream_end(c, res);
    return err;
}
