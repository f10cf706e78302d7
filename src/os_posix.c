/* The OS layer: file mapping, CPU count, clock. A Windows twin would sit beside it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include "internal.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

llambda_status ll_map_file(const char *path, int use_mmap, ll_mapping *m) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ll_error(LLAMBDA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ll_error(LLAMBDA_ERR_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) { close(fd); return ll_error(LLAMBDA_ERR_FORMAT, "%s: empty file", path); }
    if (use_mmap) {
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (p == MAP_FAILED) return ll_error(LLAMBDA_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        m->addr = p; m->size = size; m->owned_heap = 0;
        return LLAMBDA_OK;
    }
    void *buf = malloc(size);
    if (!buf) { close(fd); return ll_error(LLAMBDA_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, size); }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, (char *)buf + got, size - got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            free(buf); close(fd);
            return ll_error(LLAMBDA_ERR_IO, "%s: read failed at byte %zu", path, got);
        }
        got += (size_t)r;
    }
    close(fd);
    m->addr = buf; m->size = size; m->owned_heap = 1;
    return LLAMBDA_OK;
}

void ll_unmap(ll_mapping *m) {
    if (!m->addr) return;
    if (m->owned_heap) free(m->addr); else munmap(m->addr, m->size);
    m->addr = NULL;
}

int ll_n_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Large zeroed buffers straight from the OS, asking for huge pages (fewer faults and TLB
 * misses for gigabytes of repacked weights). */
void *ll_alloc_large(size_t size) {
    /* a 2 MiB-aligned start, so that every whole 2 MiB of the buffer can be a huge page */
    const uintptr_t align = (uintptr_t)2 << 20;
    size = (size + 4095) & ~(size_t)4095;
    uint8_t *p = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)p + align - 1) & ~(align - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    if (a + size < p + size + align) munmap(a + size, (size_t)(p + size + align - (a + size)));
#ifdef MADV_HUGEPAGE
    madvise(a, size, MADV_HUGEPAGE);
#endif
    return a;
}

void ll_free_large(void *p, size_t size) {
    if (p) munmap(p, size);
}

void ll_release_mapped(const void *p, size_t size) {
#ifdef MADV_DONTNEED
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + page - 1) & ~(page - 1),
              b = ((uintptr_t)p + size) & ~(page - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
#else
    (void)p; (void)size;
#endif
}

/* Linux's MemAvailable (free plus reclaimable page cache), else the free pages. */
uint64_t ll_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return (uint64_t)kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

double ll_time_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
