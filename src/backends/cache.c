/* Content-addressed cache of exported weights.
 *
 * An entry is named by the SHA-256 of everything that decides its bytes (see
 * ll_cache_key_fields), so a changed tensor, exporter or runtime can never reuse an old
 * artifact. Each file carries its own length and SHA-256, so a truncated or corrupt entry is
 * detected and rebuilt. Entries are written to a temporary file and renamed into place. */
#include "backend.h"
#include <openssl/evp.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "LLAMBDA-ARTIFACT1"   /* 17 bytes + NUL */
enum { HEADER = 18 + 8 + 32 };

static int sha256(const void *parts[], const size_t lens[], int n, uint8_t out[32]) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    for (int i = 0; ok && i < n; i++) ok = EVP_DigestUpdate(c, parts[i], lens[i]);
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(c, out, &len) && len == 32;
    EVP_MD_CTX_free(c);
    return ok;
}

static void hex32(const uint8_t d[32], char hex[65]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) { hex[2 * i] = digits[d[i] >> 4]; hex[2 * i + 1] = digits[d[i] & 15]; }
    hex[64] = 0;
}

llambda_status ll_cache_key(const ll_cache_key_fields *f, char hex[65]) {
    /* fixed-width numbers, and each string with its terminating NUL, so fields cannot run
     * into one another */
    int64_t nums[3] = {f->rows, f->cols, f->type};
    const char *strs[4] = {f->backend, f->bridge_version, f->exporter_version, f->runtime_version};
    const void *parts[6] = {f->tensor, nums};
    size_t lens[6] = {f->tensor_len, sizeof nums};
    for (int i = 0; i < 4; i++) {
        const char *s = strs[i] ? strs[i] : "";
        parts[2 + i] = s;
        lens[2 + i] = strlen(s) + 1;
    }
    uint8_t d[32];
    if (!sha256(parts, lens, 6, d)) return ll_error(LLAMBDA_ERR_UNSUPPORTED, "SHA-256 is not available from libcrypto");
    hex32(d, hex);
    return LLAMBDA_OK;
}

llambda_status ll_cache_dir(char *out, size_t size) {
    const char *dir = getenv("LLAMBDA_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (dir && *dir) n = snprintf(out, size, "%s", dir);
    else if (xdg && *xdg) n = snprintf(out, size, "%s/llambda", xdg);
    else if (home && *home) n = snprintf(out, size, "%s/.cache/llambda", home);
    else return ll_error(LLAMBDA_ERR_IO, "no cache folder: set LLAMBDA_CACHE_DIR, XDG_CACHE_HOME or HOME");
    if (n < 0 || (size_t)n >= size) return ll_error(LLAMBDA_ERR_IO, "cache folder path too long");
    return LLAMBDA_OK;
}

/* mkdir -p */
static llambda_status make_dirs(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') { *s = 0; if (mkdir(p, 0755) && errno != EEXIST) goto fail; *s = '/'; }
    if (mkdir(p, 0755) && errno != EEXIST) goto fail;
    return LLAMBDA_OK;
fail:
    return ll_error(LLAMBDA_ERR_IO, "cannot create cache folder '%s': %s", p, strerror(errno));
}

static llambda_status entry_path(const char *key, char *out, size_t size) {
    char dir[4000];
    llambda_status st = ll_cache_dir(dir, sizeof dir);
    if (st) return st;
    if ((size_t)snprintf(out, size, "%s/%s.art", dir, key) >= size) return ll_error(LLAMBDA_ERR_IO, "cache path too long");
    return LLAMBDA_OK;
}

int ll_cache_get(const char *key, uint8_t **data, size_t *len) {
    char path[4096];
    *data = NULL; *len = 0;
    if (entry_path(key, path, sizeof path)) return 0;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint8_t h[HEADER], d[32];
    uint64_t n = 0;
    uint8_t *buf = NULL;
    int ok = fread(h, 1, HEADER, f) == HEADER && !memcmp(h, MAGIC, 18);
    if (ok) { memcpy(&n, h + 18, 8); ok = n < ((uint64_t)1 << 40) && (buf = malloc(n ? n : 1)) != NULL; }
    if (ok) ok = fread(buf, 1, n, f) == n && fgetc(f) == EOF;
    if (ok) {
        const void *parts[1] = {buf};
        size_t lens[1] = {n};
        ok = sha256(parts, lens, 1, d) && !memcmp(d, h + 26, 32);
    }
    fclose(f);
    if (!ok) { free(buf); unlink(path); return -1; }
    *data = buf; *len = n;
    return 1;
}

llambda_status ll_cache_put(const char *key, const uint8_t *data, size_t len) {
    char dir[4000], path[4096], tmp[4200];
    llambda_status st = ll_cache_dir(dir, sizeof dir);
    if (st || (st = make_dirs(dir)) || (st = entry_path(key, path, sizeof path))) return st;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%p", path, (long)getpid(), (const void *)data);
    uint8_t h[HEADER];
    memcpy(h, MAGIC, 18);
    uint64_t n = len;
    memcpy(h + 18, &n, 8);
    const void *parts[1] = {data};
    size_t lens[1] = {len};
    if (!sha256(parts, lens, 1, h + 26)) return ll_error(LLAMBDA_ERR_UNSUPPORTED, "SHA-256 is not available from libcrypto");
    FILE *f = fopen(tmp, "wb");
    if (!f) return ll_error(LLAMBDA_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    int ok = fwrite(h, 1, HEADER, f) == HEADER && fwrite(data, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path)) {
        unlink(tmp);
        return ll_error(LLAMBDA_ERR_IO, "cannot write the cache entry '%s'", path);
    }
    return LLAMBDA_OK;
}
