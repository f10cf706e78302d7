/* `qwen2` (Qwen2 / 2.5): the llama block with Q/K/V biases, NEOX (half-split) RoPE and
 * an optional output bias. Spec: dense-archs.md §2.2. */
#include "../model.h"
#include "dense.h"

static llambda_status qwen2_load(llambda_model *m) {
    llambda_status st;
    if ((st = ll_load_attention_hparams(m))) return st;
    m->hp.rope_type = LL_ROPE_NEOX;
    if (m->hp.n_head * m->hp.head_dim != m->hp.n_embd)
        return ll_error(LLAMBDA_ERR_FORMAT, "qwen2: head_count x head size (%d x %d) must equal embedding_length %d",
                        m->hp.n_head, m->hp.head_dim, m->hp.n_embd);
    if ((st = ll_bind_dense_globals(m))) return st;
    if ((st = ll_bind(m, &m->output_bias, 0, m->hp.n_vocab, 0, "output.bias"))) return st;
    ll_hparams_uniform(&m->hp, NULL);
    return ll_bind_dense_layers(m, 1 /* Q/K/V biases expected */);
}

const ll_arch ll_arch_qwen2 = {"qwen2", qwen2_load, ll_dense_forward};
