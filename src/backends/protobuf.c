/* Protocol-buffers encoding: each field is a key (field number << 3 | wire type) then the
 * value, a base-128 varint or a length-prefixed byte string. */
#include "protobuf.h"
#include <stdlib.h>
#include <string.h>

static void put(pb_buf *b, const void *data, size_t len) {
    if (b->oom) return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p; b->cap = cap;
    }
    if (len) memcpy(b->p + b->len, data, len);
    b->len += len;
}

static void put_varint(pb_buf *b, uint64_t v) {
    uint8_t tmp[10];
    int n = 0;
    do { tmp[n] = (uint8_t)(v & 0x7f); v >>= 7; if (v) tmp[n] |= 0x80; n++; } while (v);
    put(b, tmp, (size_t)n);
}

void pb_varint_field(pb_buf *b, int field, uint64_t v) {
    put_varint(b, (uint64_t)field << 3 | 0);
    put_varint(b, v);
}

void pb_bytes_field(pb_buf *b, int field, const void *data, size_t len) {
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, len);
    put(b, data, len);
}

void pb_string_field(pb_buf *b, int field, const char *s) { pb_bytes_field(b, field, s, strlen(s)); }

void pb_message_field(pb_buf *b, int field, const pb_buf *msg) {
    if (msg->oom) { b->oom = 1; return; }
    pb_bytes_field(b, field, msg->p, msg->len);
}

void pb_free(pb_buf *b) { free(b->p); b->p = NULL; b->len = b->cap = 0; }
