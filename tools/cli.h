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
#endif
