/* A minimal protocol-buffers writer: enough to encode ONNX models (varints, 64-bit
 * integers, length-delimited strings, bytes and nested messages). */
#ifndef LLAMBDA_PROTOBUF_H
#define LLAMBDA_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct pb_buf {
    uint8_t *p;
    size_t len, cap;
    int oom;          /* set once an allocation failed; later writes are ignored */
} pb_buf;

void pb_varint_field(pb_buf *b, int field, uint64_t v);          /* wire type 0 */
void pb_bytes_field(pb_buf *b, int field, const void *data, size_t len); /* wire type 2 */
void pb_string_field(pb_buf *b, int field, const char *s);
void pb_message_field(pb_buf *b, int field, const pb_buf *msg);   /* a nested message */
void pb_free(pb_buf *b);

#endif
