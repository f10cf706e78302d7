/* `llambda serve`: options, then the server in server/. */
#include "cli.h"
#include "../server/server.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_serve(int argc, char **argv) {
    server_options o = {NULL, "127.0.0.1", NULL, 8080, 1, 0, 0, -1, 1, NULL};
    cli_accel accel;
    memset(&accel, 0, sizeof accel);
    const char *usage = "usage: llambda serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [-c CTX] [-t THREADS]\n"
                        "                     [--api-key KEY] [--queue N] [--reasoning-format deepseek|none]\n";
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stderr); fputs(CLI_ACCEL_USAGE, stderr); return 0; }
        int j = i, acc = cli_accel_flag(&accel, argc, argv, &j);
        if (acc < 0) return 2;
        if (acc) { i = j - 1; continue; }
        if (!v) { fprintf(stderr, "llambda serve: '%s' needs a value\n%s", a, usage); return 2; }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.model_path = v;
        else if (!strcmp(a, "--host")) o.host = v;
        else if (!strcmp(a, "--port")) o.port = atoi(v);
        else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) o.parallel = atoi(v);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) o.n_ctx = atoi(v);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) o.n_threads = atoi(v);
        else if (!strcmp(a, "--api-key")) o.api_key = v;
        else if (!strcmp(a, "--queue")) o.queue = atoi(v);
        else if (!strcmp(a, "--reasoning-format")) {
            if (!strcmp(v, "deepseek")) o.reasoning_split = 1;
            else if (!strcmp(v, "none")) o.reasoning_split = 0;
            else { fprintf(stderr, "llambda serve: --reasoning-format deepseek|none\n"); return 2; }
        }
        else { fprintf(stderr, "llambda serve: unknown option '%s'\n%s", a, usage); return 2; }
    }
    if (!o.model_path || o.port <= 0 || o.port > 65535 || o.parallel < 1 || o.parallel > 256 || o.n_ctx < 0) {
        fputs(usage, stderr);
        return 2;
    }
    o.accel = &accel;
    return server_main(&o);
}
