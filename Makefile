# bitnet toolkit - one Makefile for the library, the tools, the tests, the
# man pages, the demo and the fuzzers.
#
#   make            build lib/libbitnet.a and every tool (into $(BUILD)/)
#   make check      build and run every test (unit + CLI)
#   make demo       convert, quantize and run a real model
#   make fuzz       run each libFuzzer harness for FUZZ_TIME seconds (clang)
#   make torture    the long campaigns: every fault of tests/fault, the fuzzers
#                   for FUZZ_TIME (default 600 s each), valgrind over the CLI tests
#   make install    prefix/PREFIX DESTDIR bindir libdir includedir mandir
#   make SAN=1      build with -fsanitize=address,undefined (into build-san/)
#   V=1             show the commands

CC       ?= cc
PKG_CONFIG ?= pkg-config
prefix   ?= $(if $(PREFIX),$(PREFIX),/usr/local)
exec_prefix ?= $(prefix)
bindir   ?= $(exec_prefix)/bin
libdir   ?= $(exec_prefix)/lib
includedir ?= $(prefix)/include
datarootdir ?= $(prefix)/share
datadir  ?= $(datarootdir)
mandir   ?= $(datarootdir)/man
FUZZ_TIME ?= 30

ifeq ($(SAN),1)
BUILD    ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD    ?= build
SANFLAGS :=
endif

ifeq ($(V),1)
Q :=
else
Q := @
endif

LIB_PKGS  := zlib jansson OpenCL openblas clblast
PKGS      := $(LIB_PKGS) argtable2
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS  := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS := $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null || echo -lcmocka)

OPT      ?= -O2 -g
WARN     := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wvla
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) $(OPT) $(SANFLAGS) -MMD -MP -Ilib $(PKG_CFLAGS)
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS) $(CPPFLAGS)
LIBS     := $(PKG_LIBS) -lpthread -lm
ALL_LDFLAGS = $(SANFLAGS) $(LDFLAGS)

ARCH := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq ($(filter x86_64%,$(ARCH)),)
SIMD_AVX2   := -mavx2 -mfma -mf16c
SIMD_AVXVNNI := $(SIMD_AVX2) -mavxvnni
SIMD_AVX512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq
SIMD_VNNI   := $(SIMD_AVX512) -mavx512vnni
SIMD_AMX    := $(SIMD_VNNI) -mamx-tile -mamx-int8
LIB_SRC  := $(wildcard lib/*.c lib/cpu/*.c lib/opencl/*.c)
else
LIB_SRC  := $(filter-out %_avx2.c %_avxvnni.c %_avx512.c %_vnni.c %_amx.c,$(wildcard lib/*.c lib/cpu/*.c lib/opencl/*.c))
endif

KERNELS  := $(sort $(wildcard kernels/*.cl))
GEN_SRC  := $(BUILD)/gen/kernels_embed.c
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/kernels_embed.o
LIB_A    := $(BUILD)/lib/libbitnet.a
# The test variant: the same objects, but lib/testhooks.c built with
# -DBITNET_TEST_HOOKS (BITNET_TEST_PERTURB / BITNET_TEST_FAIL read from the
# environment).  Only the unit tests and the test copies of the tools
# ($(BUILD)/test-bin/) link it; nothing installed does.
LIB_TEST_A := $(BUILD)/lib/libbitnet-test.a
LIB_TEST_OBJ := $(filter-out $(BUILD)/lib/testhooks.o,$(LIB_OBJ)) $(BUILD)/lib/testhooks-test.o

TOOL_SRC := $(wildcard tools/bitnet-*.c)
TOOLS    := $(TOOL_SRC:tools/%.c=$(BUILD)/bin/%)
TEST_TOOLS := $(TOOL_SRC:tools/%.c=$(BUILD)/test-bin/%)
TOOL_COMMON := $(filter-out $(TOOL_SRC),$(wildcard tools/*.c))
TOOL_COMMON_OBJ := $(TOOL_COMMON:%.c=$(BUILD)/%.o)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_HELPER := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
UNIT_HELPER_OBJ := $(UNIT_HELPER:%.c=$(BUILD)/%.o)

MANPAGES := $(wildcard man/*.[157])

.PHONY: FORCE fuzz-lib torture all lib tools tests check check-unit check-cli demo fuzz install uninstall clean lint-man device deps
all: lib tools tests

lib: $(LIB_A)
tools: $(TOOLS)
FAULT_SHIM := $(BUILD)/tests/fault/shim.so
tests: $(UNIT_BIN) $(TEST_TOOLS) $(FAULT_SHIM)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(EXTRA_CFLAGS) -c $< -o $@

# Per-file SIMD flags: the file name says the instruction set.
$(BUILD)/lib/cpu/%_avx2.o: EXTRA_CFLAGS := $(SIMD_AVX2)
$(BUILD)/lib/cpu/%_avxvnni.o: EXTRA_CFLAGS := $(SIMD_AVXVNNI)
$(BUILD)/lib/cpu/%_avx512.o: EXTRA_CFLAGS := $(SIMD_AVX512)
$(BUILD)/lib/cpu/%_vnni.o: EXTRA_CFLAGS := $(SIMD_VNNI)
$(BUILD)/lib/cpu/%_amx.o: EXTRA_CFLAGS := $(SIMD_AMX)

# OpenCL sources are embedded as byte arrays (C has no raw strings).
$(GEN_SRC): $(KERNELS) kernels/embed.sh
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  EMBED   kernels/*.cl")
	$(Q)sh kernels/embed.sh $(KERNELS) > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/kernels_embed.o: $(GEN_SRC)
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIB_A): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/testhooks-test.o: lib/testhooks.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $< (test hooks)")
	$(Q)$(CC) $(ALL_CFLAGS) -DBITNET_TEST_HOOKS -c $< -o $@

$(LIB_TEST_A): $(LIB_TEST_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

# A tool is tools/NAME.c, plus tools/NAME/*.c when it needs more than one file.
# (No % in the secondary expansion: make replaces it with the stem first.)
.SECONDEXPANSION:
.SECONDARY:
$(BUILD)/bin/%: $(BUILD)/tools/%.o $$(addprefix $(BUILD)/,$$(subst .c,.o,$$(wildcard tools/$$*/*.c))) $(TOOL_COMMON_OBJ) $(LIB_A)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/test-bin/%: $(BUILD)/tools/%.o $$(addprefix $(BUILD)/,$$(subst .c,.o,$$(wildcard tools/$$*/*.c))) $(TOOL_COMMON_OBJ) $(LIB_TEST_A)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# The fault-injection shim (LD_PRELOAD) is never sanitized: it forwards the
# allocations to the sanitizer's.
$(FAULT_SHIM): tests/fault/shim.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) -std=c11 -D_GNU_SOURCE $(WARN) -O1 -g -fno-omit-frame-pointer -shared -fPIC $(PKG_CFLAGS) -o $@ $< -ldl

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(UNIT_HELPER_OBJ) $(LIB_TEST_A)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CMOCKA_LIBS) $(LIBS)

# The AVX-VNNI kernels' EVEX twins: the same source built with AVX-512 VL +
# VNNI, which test_bitlinear_cpu compares with plain sums on CPUs that have
# AVX-512 VNNI but not AVX-VNNI (nothing installed links them).
ifneq ($(filter x86_64%,$(ARCH)),)
AVXVNNI_EVEX_OBJ := $(BUILD)/tests/bitlinear_avxvnni_evex.o
$(AVXVNNI_EVEX_OBJ): lib/cpu/bitlinear_avxvnni.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $< (EVEX twins)")
	$(Q)$(CC) $(ALL_CFLAGS) $(SIMD_VNNI) -DBN_AVXVNNI_EVEX -c $< -o $@
$(BUILD)/tests/test_bitlinear_cpu: $(AVXVNNI_EVEX_OBJ)
endif

# ---- tests ---------------------------------------------------------------
# `make check` and `make demo` first install missing Debian packages, then
# build in a sub-make (which sees the packages' pkg-config data).
deps:
	$(Q)sh tools/install-deps.sh

check: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) sh tests/run.sh

check-unit: all
	$(Q)BUILD=$(BUILD) sh tests/run.sh unit

check-cli: all
	$(Q)BUILD=$(BUILD) sh tests/run.sh cli

lint-man:
	$(Q)for m in $(MANPAGES); do mandoc -Tlint -Wwarning $$m || exit 1; done

# ---- demo ------------------------------------------------------------------
demo: deps
	$(Q)$(MAKE) --no-print-directory tools
	$(Q)BUILD=$(BUILD) sh tests/demo.sh

# ---- fuzzing (clang + libFuzzer) ---------------------------------------------
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -Ilib $(PKG_CFLAGS)
# The library is built once with clang, the sanitizers and fuzzer coverage
# (all SIMD variants included: the dispatchers call them), then each harness
# links against it.
FUZZ_LIB := build-fuzz/obj/lib/libbitnet.a
fuzz-lib:
	$(Q)$(MAKE) --no-print-directory BUILD=build-fuzz/obj CC=clang SAN=1 OPT='-g -O1 -fsanitize=fuzzer-no-link' lib

build-fuzz/%: tests/fuzz/%.c fuzz-lib
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIB) $(LIBS)

fuzz: $(FUZZ_BIN)
	$(Q)FUZZ_TIME=$(FUZZ_TIME) sh tests/fuzz/run.sh $(FUZZ_BIN)

# ---- torture: long campaigns (by hand; CI runs it with small budgets) ----------
# CAMPAIGN_TIME bounds the full fault campaign (seconds), TORTURE_FUZZ_TIME
# each fuzzer, FUZZ_GROW=1 merges new coverage into tests/fuzz/corpus/,
# VALGRIND=0 skips memcheck, VALGRIND_TIME bounds it (seconds; 0, the default: no bound).  Every harness tests/fuzz/fuzz_*.c
# is run, new ones included.
TORTURE_FUZZ_TIME ?= 600
CAMPAIGN_TIME ?= 600
VALGRIND ?= 1
VALGRIND_TIME ?= 0
FUZZ_GROW ?= 1
torture:
	$(Q)sh tools/install-deps.sh --ci
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory SAN=1 all
	$(Q)$(MAKE) --no-print-directory $(FUZZ_BIN)
	$(Q)BUILD=$(BUILD) CAMPAIGN_TIME=$(CAMPAIGN_TIME) FUZZ_TIME=$(TORTURE_FUZZ_TIME) FUZZ_GROW=$(FUZZ_GROW) VALGRIND=$(VALGRIND) VALGRIND_TIME=$(VALGRIND_TIME) \
	  sh tests/torture.sh $(FUZZ_BIN)

# ---- install -----------------------------------------------------------------
FORCE:
# Written at every install: it records the prefix given then.
$(BUILD)/bitnet.pc: FORCE
	@mkdir -p $(dir $@)
	$(Q)printf '%s\n' 'prefix=$(prefix)' 'libdir=$(libdir)' 'includedir=$(includedir)' '' \
	  'Name: bitnet' 'Description: ternary (BitNet b1.58) weights: file format, quantization, kernels' \
	  'Version: $(shell sed -n 's/^#define BITNET_VERSION_STRING "\(.*\)"/\1/p' lib/bitnet.h)' \
	  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lbitnet' \
	  'Libs.private: -lpthread -lm' 'Requires.private: $(LIB_PKGS)' > $@

install: all $(BUILD)/bitnet.pc
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(libdir)/pkgconfig $(DESTDIR)$(includedir) \
	  $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(mandir)/man5 $(DESTDIR)$(mandir)/man7 $(DESTDIR)$(datadir)/bitnet
	install -m 755 $(TOOLS) $(DESTDIR)$(bindir)/
	install -m 644 $(LIB_A) $(DESTDIR)$(libdir)/
	install -m 644 lib/bitnet.h $(DESTDIR)$(includedir)/
	install -m 644 $(BUILD)/bitnet.pc $(DESTDIR)$(libdir)/pkgconfig/
	for m in $(filter %.1,$(MANPAGES)); do install -m 644 $$m $(DESTDIR)$(mandir)/man1/; done
	for m in $(filter %.5,$(MANPAGES)); do install -m 644 $$m $(DESTDIR)$(mandir)/man5/; done
	for m in $(filter %.7,$(MANPAGES)); do install -m 644 $$m $(DESTDIR)$(mandir)/man7/; done
	if [ -f share/convert.mk ]; then install -m 644 share/convert.mk $(DESTDIR)$(datadir)/bitnet/; fi

uninstall:
	rm -f $(addprefix $(DESTDIR)$(bindir)/,$(notdir $(TOOLS))) $(DESTDIR)$(libdir)/libbitnet.a \
	  $(DESTDIR)$(includedir)/bitnet.h $(DESTDIR)$(libdir)/pkgconfig/bitnet.pc
	rm -rf $(DESTDIR)$(datadir)/bitnet

# ---- the GPU machine: binaries and test programs to carry ----------------------
device: all
	$(Q)sh tests/device/stage.sh $(BUILD)

clean:
	rm -rf build build-san build-fuzz build-pocl-cache

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

