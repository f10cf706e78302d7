/* The HTTP server behind `llambda serve`. */
#ifndef LLAMBDA_SERVER_H
#define LLAMBDA_SERVER_H
#include "llambda.h"
#include <arpa/inet.h>
typedef struct server_options {
    const char *model_path, *host, *api_key;
    int port, parallel, n_ctx, n_threads, queue;
    int reasoning_split;     /* 1: <think> text goes to reasoning_content (default) */
    const struct cli_accel *accel;   /* accelerator options, or NULL */
} server_options;
int server_main(const server_options *o);
#endif
