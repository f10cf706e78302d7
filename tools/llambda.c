/* llambda command line: dispatches to the subcommands. */
#include "cli.h"
#include <stdio.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr,
        "llambda " LLAMBDA_VERSION " — LLM inference from GGUF files\n\n"
        "usage: llambda COMMAND [options]\n\n"
        "  run      [-m MODEL] [-p PROMPT] [-n N] ...   generate text (default model: models/stories260K.gguf)\n"
        "  chat     -m MODEL [--system TEXT]            interactive multi-turn chat\n"
        "  serve    -m MODEL [--port 8080] [--parallel N] OpenAI-compatible HTTP server\n"
        "  eval     -m MODEL (--tokens 1,2|-p TEXT) [-n N] --logits-out FILE\n"
        "  tokenize -m MODEL -p TEXT [--no-bos]\n"
        "  info     FILE                                GGUF header, metadata and tensors\n"
        "  tensor   FILE NAME [-o OUT.f32]               dequantize one tensor\n"
        "  quantize IN.gguf OUT.gguf TYPE               Q8_0 Q4_0 Q2_K Q3_K_M Q4_K_M Q5_K_M Q6_K IQ4_XS F16 BF16\n"
        "  synth    --preset NAME -o OUT.gguf [--type T] random-weight model with real shapes\n"
        "  bench    -m MODEL [-p 512] [-n 128] [-t T] [-r R] [-o md|json]\n"
        "  bench-proj -m MODEL TENSOR [--backends cpu,onnx,...] [-n TOKENS] [-t T] [-r R] [--roofline]\n"
        "                                   time one projection per backend\n"
        "  bench-mem [-t T]                  measure the read bandwidth (the tg roofline)\n\n"
        "run 'llambda COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) { usage(); return argc < 2 ? 2 : 0; }
    const char *c = argv[1];
    if (!strcmp(c, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(c, "tensor")) return cmd_tensor(argc - 1, argv + 1);
    if (!strcmp(c, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(c, "chat")) return cmd_chat(argc - 1, argv + 1);
    if (!strcmp(c, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(c, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(c, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(c, "synth")) return cmd_synth(argc - 1, argv + 1);
    if (!strcmp(c, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(c, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(c, "bench-proj")) return cmd_bench_proj(argc - 1, argv + 1);
    if (!strcmp(c, "bench-mem")) return cmd_bench_mem(argc - 1, argv + 1);
    if (!strcmp(c, "--version")) { printf("llambda %s\n", LLAMBDA_VERSION); return 0; }
    fprintf(stderr, "llambda: unknown command '%s'\n", c);
    usage();
    return 2;
}
