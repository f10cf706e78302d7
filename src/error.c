/* Per-thread error messages. */
#include "internal.h"
#include <stdarg.h>
#include <stdio.h>

static _Thread_local char err_msg[1024];

llambda_status ll_error(llambda_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return s;
}

void ll_error_clear(void) { err_msg[0] = 0; }
const char *llambda_last_error(void) { return err_msg; }

const char *llambda_status_name(llambda_status s) {
    switch (s) {
    case LLAMBDA_OK: return "ok";
    case LLAMBDA_ERR_IO: return "io error";
    case LLAMBDA_ERR_FORMAT: return "format error";
    case LLAMBDA_ERR_UNSUPPORTED: return "unsupported";
    case LLAMBDA_ERR_NOMEM: return "out of memory";
    case LLAMBDA_ERR_ARG: return "invalid argument";
    case LLAMBDA_ERR_CONTEXT_FULL: return "context full";
    case LLAMBDA_ERR_BUSY: return "context busy";
    }
    return "unknown status";
}
