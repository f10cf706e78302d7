/* `llama` (Llama 3.x): RMSNorm, GQA attention with adjacent-pair RoPE (rope_freqs for
 * llama3 scaling), SwiGLU FFN, optional biases, tied or separate LM head.
 * Spec: dense-archs.md §2.1, §3. */
#include "../model.h"
#include "dense.h"

static llambda_status llama_load(llambda_model *m) {
    llambda_status st;
    if ((st = ll_load_attention_hparams(m))) return st;
    m->hp.rope_type = LL_ROPE_NORM;
    if ((st = ll_bind_dense_globals(m))) return st;
    ll_weight rf;
    if ((st = ll_bind(m, &rf, 0, m->hp.n_rot / 2, 0, "rope_freqs.weight"))) return st;
    m->rope_freqs = rf.data ? (const float *)rf.data : NULL;
    ll_hparams_uniform(&m->hp, m->rope_freqs);
    return ll_bind_dense_layers(m, 0 /* biases optional */);
}

const ll_arch ll_arch_llama = {"llama", llama_load, ll_dense_forward};
