/* Minimal test harness: CHECK records a failure and continues; each test binary prints
 * "PASS/FAIL name" lines and ends with "N passed, N failed". */
#ifndef LLAMBDA_TEST_HARNESS_H
#define LLAMBDA_TEST_HARNESS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include "llambda.h"

static int h_passed, h_failed, h_cur_failed;
static const char *h_cur;

#define CHECK(cond, ...) do { if (!(cond)) { h_cur_failed = 1; printf("  check failed (%s:%d): ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static inline void test_begin(const char *name) { h_cur = name; h_cur_failed = 0; }
static inline void test_end(void) {
    if (h_cur_failed) { h_failed++; printf("FAIL %s\n", h_cur); } else { h_passed++; printf("PASS %s\n", h_cur); }
    fflush(stdout);
}
#define TEST(name) for (int _once = (test_begin(name), 1); _once; _once = 0, test_end())

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", h_passed, h_failed);
    return h_failed ? 1 : 0;
}

/* Path of the shared fixtures, from LLAMBDA_FIXTURES or ../shared/fixtures. */
static inline const char *fixture(const char *rel) {
    static char buf[8][1024];
    static int k;
    const char *base = getenv("LLAMBDA_FIXTURES");
    char *b = buf[k++ % 8];
    snprintf(b, 1024, "%s/%s", base && *base ? base : "../shared/fixtures", rel);
    return b;
}

static inline void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    if (buf) buf[n] = 0;
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}
#endif
