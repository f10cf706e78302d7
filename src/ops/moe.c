/* Routed experts, one implementation for every MoE architecture.
 *
 * Router: logits = W_router · r per token; probabilities by softmax (or sigmoid); the
 * top-k experts by probability (optionally chosen with a selection bias); weights =
 * the chosen probabilities, normalised to sum 1 when the model says so, times a scale.
 * Experts: tokens are grouped by expert so each expert's matrices are streamed once per
 * batch; every output element is still one dot product, so results do not depend on the
 * grouping. Each token's expert outputs are summed in slot order (most probable first),
 * as llama.cpp adds them. */
#include "../backends/backend.h"

/* softmax as ggml computes it: 16-wide blocks through the SIMD exp (summed per block,
 * added in double), the tail through expf; then scaled by 1/sum */
static void softmax_ggml(float *p, const float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    double sum = 0;
    int i = 0, body = n - n % 16;
    ll_kernels_get()->exp_shifted(p, x, mx, body);
    for (; i + 16 <= n; i += 16) {
        const float *v = p + i;
        float t8[8], t4[4];
        for (int k = 0; k < 8; k++) t8[k] = v[k + 8] + v[k];
        for (int k = 0; k < 4; k++) t4[k] = t8[k + 4] + t8[k];
        sum += (double)((t4[0] + t4[2]) + (t4[1] + t4[3]));
    }
    for (; i < n; i++) { p[i] = expf(x[i] - mx); sum += (double)p[i]; }
    float inv = (float)(1.0 / sum);
    for (int k = 0; k < n; k++) p[k] *= inv;
}

/* Top-k by (probability + optional selection bias), descending, ties to the lower id, in
 * one pass: the best k so far kept in order, each candidate placed after every one at
 * least as good. Returns 0 on a NaN score, when fewer than k experts are allowed or when k
 * is past TOP_K_MAX; the caller's k passes then decide, as they always did. One pass
 * instead of k: Qwen3-Next's 10 of 512 took 30 us of each layer's token that way. */
enum { TOP_K_MAX = 64 };   /* models use 6-10; more goes to the k passes */
static int top_k_one_pass(const float *p, const float *bias, int X, int K, uint64_t allowed, int per, int32_t *st) {
    float best[TOP_K_MAX];
    int n = 0;
    if (K > TOP_K_MAX) return 0;
    for (int i = 0; i < X; i++) {
        if (per && !(allowed >> (i / per) & 1)) continue;
        float v = p[i] + (bias ? bias[i] : 0.0f);
        if (v != v) return 0;
        if (n == K && !(v > best[K - 1])) continue;
        int at = n < K ? n++ : K - 1;
        for (; at > 0 && v > best[at - 1]; at--) { best[at] = best[at - 1]; st[at] = st[at - 1]; }
        best[at] = v; st[at] = i;
    }
    return n == K;
}

/* The same selection in k passes, each taking the best expert not yet taken (the first of
 * equals): what decides when top_k_one_pass declines. */
static void top_k_passes(const float *p, const float *bias, int X, int K, uint64_t allowed, int per, int32_t *st) {
    for (int k = 0; k < K; k++) {
        int best = -1;
        float bv = -INFINITY;
        for (int i = 0; i < X; i++) {
            int taken = 0;
            for (int j = 0; j < k; j++) taken |= st[j] == i;
            if (taken || (per && !(allowed >> (i / per) & 1))) continue;
            float v = p[i] + (bias ? bias[i] : 0.0f);
            if (best < 0 || v > bv) { best = i; bv = v; }
        }
        st[k] = best;
    }
}

/* Choose and weight the experts of n tokens from router logits [n][X]. */
void ll_moe_route(const ll_moe *e, const float *logits, int n, float *probs, int32_t *sel, float *w) {
    int X = e->n_expert, K = e->n_used;
    for (int t = 0; t < n; t++) {
        const float *lg = logits + (size_t)t * X;
        float *p = probs + (size_t)t * X;
        if (e->gating == LL_MOE_SIGMOID) ll_sigmoid_row(p, lg, X);
        else softmax_ggml(p, lg, X);
        int32_t *st = sel + (size_t)t * K;
        float *wt = w + (size_t)t * K;
        /* group-limited routing: score each group of consecutive experts by the sum of its
         * two best selection scores, keep the best n_group_used groups, mask the rest */
        uint64_t allowed = ~0ull;
        int per = e->n_group > 1 ? X / e->n_group : 0;   /* experts a group */
        if (e->n_group > 1) {
            float gs[64];
            for (int g = 0; g < e->n_group; g++) {
                float b1 = -INFINITY, b2 = -INFINITY;
                for (int i = g * per; i < (g + 1) * per; i++) {
                    float v = p[i] + (e->sel_bias ? e->sel_bias[i] : 0.0f);
                    if (v > b1) { b2 = b1; b1 = v; } else if (v > b2) b2 = v;
                }
                gs[g] = b1 + (per > 1 ? b2 : 0.0f);
            }
            allowed = 0;
            for (int k = 0; k < e->n_group_used; k++) {
                int bg = -1;
                for (int g = 0; g < e->n_group; g++)
                    if (!(allowed >> g & 1) && (bg < 0 || gs[g] > gs[bg])) bg = g;
                allowed |= 1ull << bg;
            }
        }
        if (!top_k_one_pass(p, e->sel_bias, X, K, allowed, per, st)) top_k_passes(p, e->sel_bias, X, K, allowed, per, st);
        for (int k = 0; k < K; k++) wt[k] = p[st[k]];
        if (e->norm_weights) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)wt[k];
            float sum = (float)s;
            if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
            for (int k = 0; k < K; k++) wt[k] = wt[k] / sum;
        }
        if (e->weight_scale != 0 && e->weight_scale != 1.0f)
            for (int k = 0; k < K; k++) wt[k] *= e->weight_scale;
    }
}

static void activate(int act, float *g, const float *u, int64_t n) {
    switch (act) {
    case LL_ACT_GELU: ll_geglu(g, u, n); break;
    case LL_ACT_SILU: ll_swiglu(g, u, n); break;
    case LL_ACT_RELU2: ll_relu2(g, n); break;
    }
}

void ll_moe_forward(struct llambda_context *c, const ll_moe *e, const float *router_in, const float *x, int n, float *out,
                    const ll_matmul_op *with, int n_with, const ll_moe_shared *shared) {
    const ll_hparams *h = &c->m->hp;
    int E = h->n_embd, X = e->n_expert, K = e->n_used, FX = e->n_ff;
    float *logits = c->moe_logits, *probs = c->moe_probs, *w = c->moe_w, *eo = c->moe_out;
    int32_t *sel = c->moe_sel;
    enum { MAX_WITH = 4 };
    ll_matmul_op first[1 + MAX_WITH] = {{&e->router, router_in, n, logits}};
    int k_with = n_with < MAX_WITH ? n_with : MAX_WITH;
    for (int i = 0; i < k_with; i++) first[1 + i] = with[i];
    ll_matmul_many(c, first, 1 + k_with);   /* the router and the caller's products: one task */
    if (n_with > k_with) ll_matmul_many(c, with + k_with, n_with - k_with);   /* any beyond: a task of their own */
    ll_moe_route(e, logits, n, probs, sel, w);
    /* the shared expert's activation now, so that its down product joins the experts' own:
     * one pool task fewer a layer */
    for (int t = 0; shared && t < n; t++) {
        size_t at = (size_t)t * (size_t)shared->n_ff;
        activate(shared->act, shared->g + at, shared->u ? shared->u + at : NULL, shared->n_ff);
    }
    float *xg = c->moe_in, *hg = c->moe_h, *ug = c->moe_u, *dg = c->moe_d;
    int *rows = c->moe_rows;
    /* gather the (token, slot) pairs by expert: expert ex's m rows start at row `first` */
    enum { CHUNK = 64 };   /* experts per round of products */
    int ex = 0, total = 0, shared_down = shared != NULL;
    while (ex < X) {
        int used[CHUNK], first[CHUNK], cnt[CHUNK], ne = 0, base = total;
        for (; ex < X && ne < CHUNK; ex++) {
            int m = 0;
            for (int t = 0; t < n; t++)
                for (int k = 0; k < K; k++)
                    if (sel[(size_t)t * K + k] == ex) {
                        rows[total + m] = t * K + k;
                        if (n > 1) memcpy(xg + (size_t)(total + m) * E, x + (size_t)t * E, (size_t)E * 4);
                        m++;
                    }
            if (!m) continue;
            used[ne] = ex; first[ne] = total; cnt[ne] = m; ne++;
            total += m;
        }
        if (!ne) continue;
        /* gate and up of every expert of the round: one task */
        ll_matmul_op ops[2 * CHUNK + 1];
        ll_weight mats[2 * CHUNK];
        int no = 0;
        for (int i = 0; i < ne; i++) {
            /* one token: every expert reads x itself, so its conversion is shared (ll_matmul_many) */
            const float *xi = n == 1 ? x : xg + (size_t)first[i] * E;
            if (e->gate_up.data) {
                mats[no] = ll_weight_matrix(&e->gate_up, used[i]);
                ops[no] = (ll_matmul_op){&mats[no], xi, cnt[i], hg + (size_t)first[i] * 2 * FX}; no++;   /* gate then up */
            } else {
                mats[no] = ll_weight_matrix(&e->gate, used[i]);
                ops[no] = (ll_matmul_op){&mats[no], xi, cnt[i], hg + (size_t)first[i] * FX}; no++;
                if (e->up.data) {
                    mats[no] = ll_weight_matrix(&e->up, used[i]);
                    ops[no] = (ll_matmul_op){&mats[no], xi, cnt[i], ug + (size_t)first[i] * FX}; no++;
                }
            }
        }
        ll_matmul_many(c, ops, no);
        if (e->gate_up.data)   /* split [2FX] rows into gate (compacted in place, rows in order) and up */
            for (int r = base; r < total; r++) {
                float *row = hg + (size_t)r * 2 * FX;
                memcpy(ug + (size_t)r * FX, row + FX, (size_t)FX * 4);
                memmove(hg + (size_t)r * FX, row, (size_t)FX * 4);
            }
        if (e->act == LL_ACT_RELU2 && !e->up.data && !e->gate_up.data) {
            ll_relu2(hg + (size_t)base * FX, (int64_t)(total - base) * FX);
        } else
            for (int r = base; r < total; r++) activate(e->act, hg + (size_t)r * FX, ug + (size_t)r * FX, FX);
        /* down of every expert of the round (and the shared expert's, in the first): one task */
        for (int i = 0; i < ne; i++) {
            mats[i] = ll_weight_matrix(&e->down, used[i]);
            ops[i] = (ll_matmul_op){&mats[i], hg + (size_t)first[i] * FX, cnt[i], dg + (size_t)first[i] * E};
        }
        int nd = ne;
        if (shared_down) ops[nd++] = (ll_matmul_op){shared->down, shared->g, n, shared->out};
        shared_down = 0;
        ll_matmul_many(c, ops, nd);
        for (int i = 0; i < ne; i++) {
            float s = e->down_scale ? e->down_scale[used[i]] : 1.0f;
            for (int r = first[i]; r < first[i] + cnt[i]; r++) {
                float *o = eo + (size_t)rows[r] * E, *dr = dg + (size_t)r * E;
                float wt = w[rows[r]];
                if (e->down_scale) for (int j = 0; j < E; j++) o[j] = (dr[j] * s) * wt;
                else for (int j = 0; j < E; j++) o[j] = dr[j] * wt;
            }
        }
    }
    if (shared_down) ll_matmul(c, shared->down, shared->g, n, shared->out);   /* no routed rows ran */
    /* sum each token's experts in slot order */
    for (int t = 0; t < n; t++) {
        float *o = out + (size_t)t * E;
        memcpy(o, eo + (size_t)t * K * E, (size_t)E * 4);
        for (int k = 1; k < K; k++) ll_add(o, eo + ((size_t)t * K + k) * E, E);
    }
}
