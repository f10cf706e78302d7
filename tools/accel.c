/* The accelerator options every model-loading subcommand takes. */
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_accel_flag(cli_accel *a, int argc, char **argv, int *i) {
    const char *f = argv[*i];
    const char **dst = !strcmp(f, "--backend") ? &a->backend : !strcmp(f, "--offload-tensors") ? &a->tensors
                     : !strcmp(f, "--offload-layers") ? &a->layers : !strcmp(f, "--offload-roles") ? &a->roles : NULL;
    int ngl = !strcmp(f, "-ngl") || !strcmp(f, "--n-gpu-layers");
    if (!dst && !ngl) return 0;
    if (*i + 1 >= argc) { fprintf(stderr, "llambda: %s needs a value\n", f); return -1; }
    const char *v = argv[++*i];
    if (dst) *dst = v;
    else {
        char *end;
        long n = strtol(v, &end, 10);
        if (end == v || *end || n < 0) { fprintf(stderr, "llambda: -ngl takes a layer count\n"); return -1; }
        snprintf(a->ngl_layers, sizeof a->ngl_layers, "first:%ld", n);
    }
    return 1;
}

void cli_accel_apply(const cli_accel *a, llambda_model_params *mp) {
    mp->backends = a->backend;
    mp->offload_tensors = a->tensors;
    mp->offload_layers = a->layers;
    mp->offload_roles = a->roles;
    if (a->ngl_layers[0] && strcmp(a->ngl_layers, "first:0")) {
        if (!a->layers) mp->offload_layers = a->ngl_layers;
        if (!a->backend) mp->backends = "cuda";   /* -ngl is the GPU's option */
    }
}
