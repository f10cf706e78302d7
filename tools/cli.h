/* The CLI's subcommands: each a thin client of llambda.h. */
#ifndef LLAMBDA_CLI_H
#define LLAMBDA_CLI_H
#include "llambda.h"
int cmd_info(int argc, char **argv);
int cmd_tensor(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench_proj(int argc, char **argv);
int cmd_bench_mem(int argc, char **argv);

/* Seconds on the monotonic clock, for the timings the subcommands print. */
double cli_now(void);

/* Read bandwidth passes (membw.c): `threads` threads (the caller and helpers) read their
 * shares of a buffer of `bytes`, timed from one start signal to the last one done. */
typedef struct mem_bench mem_bench;
mem_bench *mem_bench_new(size_t bytes, int threads);
double mem_bench_pass(mem_bench *b, int way);                 /* GB/s */
int mem_bench_best_way(mem_bench *b, int reps, double *gbs);  /* the fastest way here, and its best GB/s */
const char *mem_bench_way_name(int way);
void mem_bench_free(mem_bench *b);

/* Accelerator options shared by run, chat, eval, serve and bench:
 *   --backend cuda|onnx[:EP][,...]  --offload-tensors NAMES  --offload-layers 0-3
 *   --offload-roles q,k,v  -ngl N (the first N layers, every role; implies --backend cuda) */
typedef struct cli_accel {
    const char *backend, *tensors, *layers, *roles;
    char ngl_layers[32];
} cli_accel;
/* If argv[*i] is one of those options, consume it (and its value) and return 1; return -1
 * when its value is missing, 0 when it is not one of them. */
int cli_accel_flag(cli_accel *a, int argc, char **argv, int *i);
void cli_accel_apply(const cli_accel *a, llambda_model_params *mp);
#define CLI_ACCEL_USAGE "  accelerators: [--backend cuda|onnx[:EP][,...]] [--offload-layers 0-3 [--offload-roles q,k,v]]\n" \
                        "                [--offload-tensors NAMES] [-ngl N]\n"
#endif
