# llambda build. `make` builds the library, the CLI and the tests; `make test` runs them.
CC ?= cc
PREFIX ?= /usr/local
BUILD ?= build
OPT ?= -O2
SAN ?=
# the x86 kernel files' sanitizers (default: SAN's); see .ci/run
KERNEL_SAN ?= $(SAN)
CFLAGS_COMMON = -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Isrc $(OPT) -g -pthread -fPIC
CFLAGS_BASE = $(CFLAGS_COMMON) $(SAN)
LDLIBS = -lm -lpthread -lpcre2-8 -lcrypto -ldl
ARCH := $(shell uname -m)

LIB_SRC = src/error.c src/os_posix.c src/gguf.c src/quant/float.c src/quant/quants.c src/quant/types.c \
          src/kernels/scalar.c src/kernels/dispatch.c $(wildcard src/ops/*.c) $(wildcard src/arch/*.c) \
          $(wildcard src/tokenizer/*.c) $(wildcard src/backends/*.c) $(filter-out src/error.c src/os_posix.c src/gguf.c,$(wildcard src/*.c))
ifeq ($(ARCH),x86_64)
LIB_SRC += src/kernels/avx2.c src/kernels/avx2vnni.c src/kernels/avx512.c
CFLAGS_COMMON += -DLL_HAVE_AVX2
endif
# The CUDA backend: `make CUDA=1` (nvcc from PATH or $(CUDA_HOME)); the default build has none.
CUDA ?= 0
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo $(CUDA_HOME)/bin/nvcc)
CU_OBJ =
ifeq ($(CUDA),1)
CFLAGS_COMMON += -DLL_HAVE_CUDA
CU_OBJ = $(BUILD)/src/backends/cuda_kernels.o
LDLIBS += -L$(CUDA_HOME)/lib64 -lcudart_static -lrt -lstdc++
else
LIB_SRC := $(filter-out src/backends/cuda.c,$(LIB_SRC))
endif
LIB_SRC := $(sort $(LIB_SRC))
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_OBJ)
TOOLS = $(BUILD)/llambda
TEST_SRC = $(wildcard tests/test_*.c)
TESTS = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

all: $(BUILD)/libllambda.a $(BUILD)/libllambda.so $(TOOLS) $(TESTS)

$(BUILD)/%.o: %.c include/llambda.h src/internal.h $(wildcard src/*/*.h) $(wildcard src/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -c $< -o $@

$(BUILD)/src/kernels/avx2.o: src/kernels/avx2.c include/llambda.h src/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(KERNEL_SAN) $(CFLAGS) -mavx2 -mfma -mf16c -c $< -o $@

$(BUILD)/src/kernels/avx2vnni.o: src/kernels/avx2vnni.c src/kernels/avx2.c include/llambda.h src/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(KERNEL_SAN) $(CFLAGS) -mavx2 -mfma -mf16c -mavxvnni -c $< -o $@

$(BUILD)/src/kernels/avx512.o: src/kernels/avx512.c src/kernels/avx2.c include/llambda.h src/internal.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_COMMON) $(KERNEL_SAN) $(CFLAGS) -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -c $< -o $@

$(BUILD)/src/backends/cuda_kernels.o: src/backends/cuda_kernels.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -Xcompiler -fPIC,-Wall,-Wextra,-Werror -Werror all-warnings -c $< -o $@

$(BUILD)/libllambda.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libllambda.so: $(LIB_OBJ)
	$(CC) $(CFLAGS_BASE) -shared -Wl,-soname,libllambda.so.0 -o $@ $^ $(LDLIBS)

$(BUILD)/llambda: tools/llambda.c $(wildcard tools/*.c tools/*.h server/*.c server/*.h) $(BUILD)/libllambda.a
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $(filter %.c,$^) $(BUILD)/libllambda.a $(LDLIBS) -lmicrohttpd -lcjson

$(BUILD)/tests/%: tests/%.c tests/harness.h $(BUILD)/libllambda.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -o $@ $< $(BUILD)/libllambda.a $(LDLIBS)

test: all
	@sh tests/run.sh $(BUILD)

# Installs the static and shared library, the header, a pkg-config file, the CLI and the
# default model under $(DESTDIR)$(PREFIX).
install: $(BUILD)/libllambda.a $(BUILD)/libllambda.so $(BUILD)/llambda
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/llambda
	install -m 644 $(BUILD)/libllambda.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libllambda.so $(DESTDIR)$(PREFIX)/lib/libllambda.so.0
	ln -sf libllambda.so.0 $(DESTDIR)$(PREFIX)/lib/libllambda.so
	install -m 644 include/llambda.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/llambda $(DESTDIR)$(PREFIX)/bin/
	install -m 644 models/stories260K.gguf models/README.md $(DESTDIR)$(PREFIX)/share/llambda/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(shell sed -n 's/#define LLAMBDA_VERSION "\(.*\)"/\1/p' include/llambda.h)|' \
	    llambda.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/llambda.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libllambda.a $(DESTDIR)$(PREFIX)/lib/libllambda.so $(DESTDIR)$(PREFIX)/lib/libllambda.so.0 \
	      $(DESTDIR)$(PREFIX)/include/llambda.h $(DESTDIR)$(PREFIX)/bin/llambda $(DESTDIR)$(PREFIX)/lib/pkgconfig/llambda.pc
	rm -rf $(DESTDIR)$(PREFIX)/share/llambda

clean:
	rm -rf $(BUILD)

.PHONY: all test clean install uninstall
