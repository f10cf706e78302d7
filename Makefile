# llambda build. `make` builds the library, the CLI and the tests; `make test` runs them.
CC ?= cc
PREFIX ?= /usr/local
BUILD ?= build
OPT ?= -O2
SAN ?=
CFLAGS_BASE = -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Isrc $(OPT) -g -pthread -fPIC $(SAN)
LDLIBS = -lm -lpthread -lpcre2-8
ARCH := $(shell uname -m)

LIB_SRC = src/error.c src/os_posix.c src/gguf.c src/quant/float.c src/quant/quants.c src/quant/types.c \
          src/kernels/scalar.c src/kernels/dispatch.c $(wildcard src/ops/*.c) $(wildcard src/arch/*.c) \
          $(wildcard src/tokenizer/*.c) $(filter-out src/error.c src/os_posix.c src/gguf.c,$(wildcard src/*.c))
ifeq ($(ARCH),x86_64)
LIB_SRC += src/kernels/avx2.c
CFLAGS_BASE += -DLL_HAVE_AVX2
endif
LIB_SRC := $(sort $(LIB_SRC))
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o)
TOOLS = $(BUILD)/llambda
TEST_SRC = $(wildcard tests/test_*.c)
TESTS = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

all: $(BUILD)/libllambda.a $(BUILD)/libllambda.so $(TOOLS) $(TESTS)

$(BUILD)/%.o: %.c include/llambda.h src/internal.h $(wildcard src/*/*.h) $(wildcard src/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -c $< -o $@

$(BUILD)/src/kernels/avx2.o: src/kernels/avx2.c include/llambda.h src/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -mavx2 -mfma -mf16c -c $< -o $@

$(BUILD)/libllambda.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libllambda.so: $(LIB_OBJ)
	$(CC) $(CFLAGS_BASE) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/llambda: tools/llambda.c $(wildcard tools/*.c tools/*.h) $(BUILD)/libllambda.a
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $(filter %.c,$^) $(BUILD)/libllambda.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/harness.h $(BUILD)/libllambda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $< $(BUILD)/libllambda.a $(LDLIBS)

test: all
	@sh tests/run.sh $(BUILD)

clean:
	rm -rf $(BUILD)

.PHONY: all test clean
