/* Sampling: top-k 1 is greedy, a seed reproduces a run, sampled frequencies follow the
 * softmax of the filtered logits (chi-square), and penalties change exactly the tokens
 * they should. */
#include "harness.h"
#include "model.h"   /* internal: the expert router */
#include <math.h>

#define V 12
static const float logits[V] = {2.0f, 1.5f, 1.0f, 0.5f, 0.2f, 0.0f, -0.3f, -0.5f, -1.0f, -2.0f, -3.0f, 0.9f};

static llambda_sampler_params base(void) {
    llambda_sampler_params p = llambda_sampler_default_params();
    p.top_k = 0; p.top_p = 1.0f; p.min_p = 0; p.temperature = 1.0f; p.seed = 1234;
    p.repeat_penalty = 1.0f;
    return p;
}

/* chi-square statistic of counts against probabilities (cells with expectation >= 5) */
static double chi_square(const int *count, const double *prob, int n, int draws, int *dof) {
    double chi = 0; *dof = -1;
    for (int i = 0; i < n; i++) {
        double e = prob[i] * draws;
        if (e < 5) { CHECK(count[i] <= draws * 0.001 + 5, "token %d drawn %d times, expected ~%.1f", i, count[i], e); continue; }
        chi += (count[i] - e) * (count[i] - e) / e; (*dof)++;
    }
    return chi;
}

static void check_distribution(llambda_sampler_params p, const int *allowed, const char *what) {
    /* expected: softmax(logits / T) over the allowed tokens */
    double prob[V] = {0}, z = 0;
    for (int i = 0; i < V; i++) if (allowed[i]) { prob[i] = exp((double)logits[i] / p.temperature); z += prob[i]; }
    for (int i = 0; i < V; i++) prob[i] /= z;
    llambda_sampler *s = llambda_sampler_new(V, &p);
    int count[V] = {0}, draws = 200000;
    for (int i = 0; i < draws; i++) count[llambda_sampler_sample(s, logits)]++;
    llambda_sampler_free(s);
    int dof;
    double chi = chi_square(count, prob, V, draws, &dof);
    /* 99.9th percentile of chi-square for dof <= 11 is below 32 */
    printf("  %s: chi-square %.2f with %d degrees of freedom\n", what, chi, dof);
    CHECK(chi < 32.0, "%s: chi-square %.2f too large (dof %d)", what, chi, dof);
    for (int i = 0; i < V; i++) CHECK(allowed[i] || count[i] == 0, "%s: filtered token %d drawn %d times", what, i, count[i]);
}

/* The sampler's chain written the plain way (the whole vocabulary sorted by logit, then id;
 * its RNG), for comparing draws one by one: the library selects, sorts only what it needs
 * and sorts by keys, so any difference in the set kept or its order changes a draw. */
typedef struct { float logit; int id; } rc;
static int rc_desc(const void *a, const void *b) {
    const rc *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}
static uint64_t ref_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t ref_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static double ref_uniform(uint64_t *s) {
    uint64_t r = ref_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = ref_rotl(s[3], 45);
    return (double)(r >> 11) * 0x1.0p-53;
}
static int ref_sample(const float *lg, int nv, const llambda_sampler_params *p, uint64_t *rng, rc *c) {
    int n = nv;
    for (int i = 0; i < n; i++) { c[i].logit = lg[i]; c[i].id = i; }
    qsort(c, (size_t)n, sizeof *c, rc_desc);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    if (p->top_p < 1.0f) {
        float mx = c[0].logit, sum = 0, cum = 0;
        for (int i = 0; i < nv; i++) sum += expf(lg[i] - mx);   /* in token order, as the library sums */
        if (p->top_k > 0 && p->top_k < nv) { sum = 0; for (int i = 0; i < n; i++) sum += expf(c[i].logit - mx); }
        int i = 0;
        for (; i < n; i++) { cum += expf(c[i].logit - mx) / sum; if (cum >= p->top_p) break; }
        if (i < n) n = i + 1;
    }
    if (p->min_p > 0) {
        float thr = c[0].logit + logf(p->min_p);
        int k = 0;
        for (int i = 0; i < n; i++) if (c[i].logit >= thr) c[k++] = c[i];
        n = k > 0 ? k : 1;
    }
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) { c[i].logit /= p->temperature; if (c[i].logit > mx) mx = c[i].logit; }
    double total = 0, run = 0;
    for (int i = 0; i < n; i++) total += (double)expf(c[i].logit - mx);
    double u = ref_uniform(rng) * total;
    for (int i = 0; i < n; i++) { run += (double)expf(c[i].logit - mx); if (run >= u) return c[i].id; }
    return c[n - 1].id;
}

int main(void) {
    TEST("sampling: draws equal a plain full-sort sampler's (top-k by heap and by select, deep top-p, ties)") {
        /* 20000 logits: Gaussian (sigma 3, a nucleus thousands deep) and, in a second set,
         * rounded to quarters so that thousands tie and the id decides, with some -0 and +0 */
        enum { NV = 20000, DRAWS = 60 };
        static float lg[NV];
        static rc work[NV];
        static const struct { int top_k; float top_p, min_p; } chains[] = {
            {40, 0.95f, 0.05f}, {40, 1.0f, 0}, {3000, 1.0f, 0}, {0, 0.95f, 0}, {0, 0.5f, 0.01f}, {0, 0.999f, 0},
        };
        uint32_t u = 99;
        int same = 1, checked = 0;
        for (int set = 0; set < 2; set++) {
            for (int i = 0; i < NV; i++) {
                u = u * 1664525u + 1013904223u;
                double a = (u >> 8) * 0x1.0p-24 + 1e-9;
                u = u * 1664525u + 1013904223u;
                double b = (u >> 8) * 0x1.0p-24;
                float g = (float)(3.0 * sqrt(-2.0 * log(a)) * cos(6.283185307179586 * b));
                lg[i] = set ? roundf(g * 4) / 4 : g;
                if (set && lg[i] == 0 && (i & 1)) lg[i] = -0.0f;
            }
            for (size_t k = 0; k < sizeof chains / sizeof *chains; k++) {
                llambda_sampler_params p = base();
                p.top_k = chains[k].top_k; p.top_p = chains[k].top_p; p.min_p = chains[k].min_p;
                p.temperature = 1.5f; p.seed = 7 + k;
                llambda_sampler *smp = llambda_sampler_new(NV, &p);
                uint64_t rng[4], x = p.seed;
                for (int i = 0; i < 4; i++) rng[i] = ref_splitmix(&x);
                for (int d = 0; d < DRAWS && same; d++, checked++) {
                    int a = llambda_sampler_sample(smp, lg), b = ref_sample(lg, NV, &p, rng, work);
                    if (a != b) { same = 0; printf("  set %d chain %zu draw %d: %d, the plain sampler %d\n", set, k, d, a, b); }
                }
                llambda_sampler_free(smp);
            }
        }
        printf("  %d draws compared\n", checked);
        CHECK(same, "a draw differs from the full-sort sampler's");
    }
    TEST("sampling: NaN logits neither crash the selection nor draw outside the vocabulary") {
        /* a NaN where quickselect takes its first pivot once read past the array (ASan) */
        enum { NV = 2000 };
        static float lg[NV];
        for (int i = 0; i < NV; i++) lg[i] = (float)(i % 37) * 0.1f;
        lg[999] = NAN; lg[5] = NAN;
        static const struct { int top_k; float top_p; } chains[] = {{1000, 1.0f}, {40, 1.0f}, {0, 0.9f}, {300, 0.5f}};
        for (size_t k = 0; k < sizeof chains / sizeof *chains; k++) {
            llambda_sampler_params p = base();
            p.top_k = chains[k].top_k; p.top_p = chains[k].top_p;
            llambda_sampler *smp = llambda_sampler_new(NV, &p);
            for (int d = 0; d < 20; d++) {
                int t = llambda_sampler_sample(smp, lg);
                CHECK(t >= 0 && t < NV, "chain %zu: drew %d", k, t);
            }
            llambda_sampler_free(smp);
        }
    }
    TEST("sampling: top-k 1 and temperature 0 are greedy") {
        llambda_sampler_params p = base();
        p.top_k = 1;
        llambda_sampler *s = llambda_sampler_new(V, &p);
        int ok = 1;
        for (int i = 0; i < 1000; i++) ok &= llambda_sampler_sample(s, logits) == 0;
        llambda_sampler_free(s);
        p = base(); p.temperature = 0;
        s = llambda_sampler_new(V, &p);
        for (int i = 0; i < 100; i++) ok &= llambda_sampler_sample(s, logits) == 0;
        llambda_sampler_free(s);
        CHECK(ok, "greedy drew something other than the argmax");
    }
    TEST("sampling: top-p over a large vocabulary keeps exactly the nucleus (only a prefix sorted)") {
        /* token of rank r (a shuffled id) has logit -0.002·r: the 0.9 nucleus is ranks 0..1151,
         * past the first sorted prefixes of 64 and 256 */
        enum { NV = 30000 };
        static float lg[NV];
        static int rank_of[NV];
        uint32_t u = 12345;
        for (int i = 0; i < NV; i++) rank_of[i] = i;
        for (int i = NV - 1; i > 0; i--) {
            u = u * 1664525u + 1013904223u;
            int j = (int)(u % (uint32_t)(i + 1)), t = rank_of[i];
            rank_of[i] = rank_of[j]; rank_of[j] = t;
        }
        for (int i = 0; i < NV; i++) lg[i] = -0.002f * (float)rank_of[i];
        int cut = 0;   /* the nucleus, in double: the smallest prefix reaching 0.9 */
        double z = 0, cum = 0;
        for (int r = 0; r < NV; r++) z += exp(-0.002 * r);
        while (cum < 0.9) cum += exp(-0.002 * cut++) / z;
        llambda_sampler_params p = base();
        p.top_p = 0.9f;
        llambda_sampler *smp = llambda_sampler_new(NV, &p);
        int worst = 0, past_1024 = 0;
        for (int d = 0; d < 3000; d++) {
            int r = rank_of[llambda_sampler_sample(smp, lg)];
            if (r > worst) worst = r;
            past_1024 += r >= 1024;
        }
        llambda_sampler_free(smp);
        printf("  nucleus %d tokens; deepest rank drawn %d; %d of 3000 draws past rank 1024\n", cut, worst, past_1024);
        CHECK(worst <= cut, "drew rank %d, outside the %d-token nucleus", worst, cut);
        CHECK(past_1024 > 30, "only %d draws past rank 1024 (expected ~87): the nucleus was cut short", past_1024);
    }
    TEST("sampling: the same seed reproduces, another seed differs") {
        llambda_sampler_params p = base();
        int32_t a[200], b[200], c[200];
        for (int run = 0; run < 3; run++) {
            p.seed = run == 2 ? 99 : 1234;
            llambda_sampler *s = llambda_sampler_new(V, &p);
            for (int i = 0; i < 200; i++) (run == 0 ? a : run == 1 ? b : c)[i] = llambda_sampler_sample(s, logits);
            llambda_sampler_free(s);
        }
        CHECK(!memcmp(a, b, sizeof a), "same seed, different draws");
        CHECK(memcmp(a, c, sizeof a) != 0, "different seeds, same 200 draws");
        /* reset reseeds */
        llambda_sampler *s = llambda_sampler_new(V, &p);
        int32_t x = llambda_sampler_sample(s, logits);
        llambda_sampler_reset(s);
        CHECK(llambda_sampler_sample(s, logits) == x, "reset does not reseed");
        llambda_sampler_free(s);
    }
    TEST("sampling: frequencies match softmax (temperature 1 and 0.7)") {
        int all[V]; for (int i = 0; i < V; i++) all[i] = 1;
        check_distribution(base(), all, "T=1");
        llambda_sampler_params p = base(); p.temperature = 0.7f;
        check_distribution(p, all, "T=0.7");
    }
    TEST("sampling: top-k, top-p and min-p keep exactly the right tokens") {
        llambda_sampler_params p = base(); p.top_k = 3;
        int k3[V] = {1, 1, 1, 0};
        check_distribution(p, k3, "top-k 3");
        /* top-p 0.6: softmax mass of sorted tokens 0,1,2(0.9 at id 11)... keep until cum >= 0.6 */
        double e[V], z = 0; for (int i = 0; i < V; i++) { e[i] = exp(logits[i]); z += e[i]; }
        int order[V]; for (int i = 0; i < V; i++) order[i] = i;
        for (int i = 0; i < V; i++) for (int j = i + 1; j < V; j++) if (logits[order[j]] > logits[order[i]]) { int t = order[i]; order[i] = order[j]; order[j] = t; }
        int keep[V] = {0}; double cum = 0;
        for (int i = 0; i < V; i++) { keep[order[i]] = 1; cum += e[order[i]] / z; if (cum >= 0.6) break; }
        p = base(); p.top_p = 0.6f;
        check_distribution(p, keep, "top-p 0.6");
        /* min-p 0.3: keep p >= 0.3 p_max, i.e. logit >= max + ln 0.3 = 0.796 */
        int mp[V]; for (int i = 0; i < V; i++) mp[i] = logits[i] >= 2.0f + logf(0.3f);
        p = base(); p.min_p = 0.3f;
        check_distribution(p, mp, "min-p 0.3");
    }
    TEST("sampling: penalties change exactly the penalized tokens") {
        /* greedy with repetition penalty: token 0 (logit 2.0) seen -> 2.0/2.5 = 0.8 < 1.5 */
        llambda_sampler_params p = base(); p.temperature = 0; p.repeat_penalty = 2.5f; p.repeat_last_n = 4;
        llambda_sampler *s = llambda_sampler_new(V, &p);
        int32_t hist[1] = {0};
        llambda_sampler_add_history(s, hist, 1);
        CHECK(llambda_sampler_sample(s, logits) == 1, "repeat penalty did not demote token 0");
        llambda_sampler_free(s);
        /* a negative logit is multiplied: token 9 (-2.0) stays below */
        /* window: after 4 other tokens, token 0 leaves the window and wins again */
        s = llambda_sampler_new(V, &p);
        llambda_sampler_add_history(s, hist, 1);
        int32_t others[4] = {5, 6, 7, 8};
        llambda_sampler_add_history(s, others, 4);
        CHECK(llambda_sampler_sample(s, logits) == 0, "token 0 should have left the penalty window");
        llambda_sampler_free(s);
        /* presence and frequency: 2.0 - 3*0.2 - 0.5 = 0.9 < 1.5 -> token 1 */
        p = base(); p.temperature = 0; p.presence_penalty = 0.5f; p.frequency_penalty = 0.2f; p.repeat_last_n = 8;
        s = llambda_sampler_new(V, &p);
        int32_t three[3] = {0, 0, 0};
        llambda_sampler_add_history(s, three, 3);
        CHECK(llambda_sampler_sample(s, logits) == 1, "frequency/presence penalties not applied");
        llambda_sampler_free(s);
        /* penalty 1 / 0 / 0 changes nothing */
        p = base(); p.temperature = 0; p.repeat_last_n = 8;
        s = llambda_sampler_new(V, &p);
        llambda_sampler_add_history(s, three, 3);
        CHECK(llambda_sampler_sample(s, logits) == 0, "neutral penalties changed the choice");
        llambda_sampler_free(s);
    }
    TEST("experts: sigmoid router, selection bias, group-limited top-k, normalised and scaled weights") {
        ll_moe e = {0};
        e.n_expert = 8; e.n_used = 2; e.gating = LL_MOE_SIGMOID; e.norm_weights = 1; e.weight_scale = 2.5f;
        /* groups of 2: {0,1} {2,3} {4,5} {6,7}. Expert 0 is best alone, but group {2,3} and
         * {6,7} have the best pair sums: with 2 of 4 groups, experts come from those. */
        float lg[8] = {3.0f, -4.0f, 2.0f, 2.0f, -4.0f, -4.0f, 1.5f, 1.9f}, probs[8], w[2];
        int32_t sel[2];
        ll_moe_route(&e, lg, 1, probs, sel, w);
        CHECK(sel[0] == 0 && (sel[1] == 2 || sel[1] == 3), "ungrouped picks %d %d", sel[0], sel[1]);
        e.n_group = 4; e.n_group_used = 2;
        ll_moe_route(&e, lg, 1, probs, sel, w);
        CHECK(sel[0] == 2 && sel[1] == 3, "grouped picks %d %d", sel[0], sel[1]);
        CHECK(fabsf(w[0] + w[1] - 2.5f) < 1e-6f && fabsf(w[0] - w[1]) < 1e-6f, "weights %g %g", w[0], w[1]);
        /* the selection bias chooses, but the weights use the unbiased probabilities */
        float bias[8] = {0, 0, 0, 0, 0, 0, 0, 5.0f};
        e.n_group = 0; e.sel_bias = bias;
        ll_moe_route(&e, lg, 1, probs, sel, w);
        CHECK(sel[0] == 7 && sel[1] == 0, "biased picks %d %d", sel[0], sel[1]);
        float p7 = 1.0f / (1.0f + expf(-1.9f)), p0 = 1.0f / (1.0f + expf(-3.0f));
        CHECK(fabsf(w[0] - 2.5f * p7 / (p7 + p0)) < 1e-5f, "biased weight %g", w[0]);
    }
    TEST("experts: the one-pass top-k picks what k passes pick (ties to the lower id, groups, bias, NaN, -inf)") {
        enum { X = 64 };
        float lg[X], probs[X], w[16], bias[X], score[X];
        int32_t sel[16], want[16];
        uint32_t seed = 12345;
        int bad = 0, cases = 0;
        for (int round = 0; round < 400 && !bad; round++) {
            ll_moe e = {0};
            e.n_expert = X; e.n_used = 1 + round % 10; e.gating = round % 2 ? LL_MOE_SIGMOID : LL_MOE_SOFTMAX;
            e.norm_weights = round % 3 == 0;
            if (round % 4 == 1) { e.n_group = 8; e.n_group_used = 2 + round % 3; }   /* 8 experts a group */
            for (int i = 0; i < X; i++) {
                seed = seed * 1664525u + 1013904223u;
                /* few distinct values, so ties are everywhere */
                lg[i] = round % 5 == 0 ? (float)((seed >> 20) % 4) : (float)((int)(seed >> 9) % 2000 - 1000) / 300.f;
                seed = seed * 1664525u + 1013904223u;
                bias[i] = (float)((seed >> 24) % 3) * 0.25f;
            }
            e.sel_bias = round % 7 == 3 ? bias : NULL;
            if (round % 11 == 5) lg[round % X] = -INFINITY;
            if (round % 13 == 6) lg[(round * 7) % X] = NAN;   /* the k passes decide; both paths agree by construction */
            ll_moe_route(&e, lg, 1, probs, sel, w);
            /* the reference: k passes over the scores the router used */
            uint64_t allowed = ~0ull;
            int per = e.n_group > 1 ? X / e.n_group : 0;
            if (per) {
                float gs[8];
                for (int g = 0; g < 8; g++) {
                    float b1 = -INFINITY, b2 = -INFINITY;
                    for (int i = g * per; i < (g + 1) * per; i++) {
                        float v = probs[i] + (e.sel_bias ? e.sel_bias[i] : 0.0f);
                        if (v > b1) { b2 = b1; b1 = v; } else if (v > b2) b2 = v;
                    }
                    gs[g] = b1 + b2;
                }
                allowed = 0;
                for (int k = 0; k < e.n_group_used; k++) {
                    int bg = -1;
                    for (int g = 0; g < 8; g++) if (!(allowed >> g & 1) && (bg < 0 || gs[g] > gs[bg])) bg = g;
                    allowed |= 1ull << bg;
                }
            }
            for (int i = 0; i < X; i++) score[i] = probs[i] + (e.sel_bias ? e.sel_bias[i] : 0.0f);
            for (int k = 0; k < e.n_used; k++) {
                int best = -1;
                for (int i = 0; i < X; i++) {
                    int taken = 0;
                    for (int j = 0; j < k; j++) taken |= want[j] == i;
                    if (taken || (per && !(allowed >> (i / per) & 1))) continue;
                    if (best < 0 || score[i] > score[best]) best = i;
                }
                want[k] = best;
            }
            cases++;
            if (memcmp(sel, want, sizeof(int32_t) * (size_t)e.n_used)) bad = round + 1;
        }
        CHECK(!bad, "round %d: the router's picks differ from k passes' (of %d cases)", bad - 1, cases);
    }
    TEST("chat: <think> reasoning split across arbitrary pieces") {
        const char *pieces[] = {"Hi <thi", "nk>step one", ", step two</th", "i", "nk>The answer", " is <", "b>42</b>", "<think"};
        llambda_reasoning_split rs = {0};
        char content[256] = "", reason[256] = "", c[64], r[64];
        int nc, nr;
        for (int i = 0; i < 8; i++) {
            llambda_reasoning_feed(&rs, pieces[i], (int)strlen(pieces[i]), false, c, &nc, r, &nr);
            strncat(content, c, (size_t)nc); strncat(reason, r, (size_t)nr);
        }
        llambda_reasoning_feed(&rs, "", 0, true, c, &nc, r, &nr);
        strncat(content, c, (size_t)nc); strncat(reason, r, (size_t)nr);
        CHECK(!strcmp(reason, "step one, step two"), "reasoning '%s'", reason);
        CHECK(!strcmp(content, "Hi The answer is <b>42</b><think"), "content '%s'", content);
    }
    return test_summary();
}
