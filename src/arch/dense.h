/* The pre-norm dense transformer block that llama and qwen2 share. */
#ifndef LLAMBDA_DENSE_H
#define LLAMBDA_DENSE_H
#include "../model.h"
llambda_status ll_bind_dense_layers(llambda_model *m, int qkv_bias);
llambda_status ll_dense_forward(struct llambda_context *c, const int32_t *tokens, int n, int pos, float *logits, const uint8_t *want);
#endif
