# tinygpt — `make` builds ./tinygpt; `make test` builds everything under ASan+UBSan and runs the whole suite.
CC      ?= cc
PKGS    := jansson libpcre2-8 zlib libedit libmicrohttpd
LIB_PKGS := jansson libpcre2-8 zlib # what libtinygpt itself needs (libedit and libmicrohttpd are the tool's)
WARN    := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Werror
INC     := -Iinclude -Isrc
DEPS_CFLAGS := $(shell pkg-config --cflags $(PKGS))
DEPS_LIBS   := $(shell pkg-config --libs $(PKGS)) -lm
LIB_DEPS_LIBS := $(shell pkg-config --libs $(LIB_PKGS)) -lm
THREADS := -pthread # one thread team (src/util/thread_pool.c); no OpenMP
# The instruction set the generic code may use: the build machine's by default (-march=native: such a binary may
# stop with "Illegal instruction" on an older CPU). `make ARCH=x86-64` builds one binary for every x86-64 CPU that
# still runs the AVX2 kernels on an AVX2 CPU and the AVX-512 ones where the CPU has them: the kernels are chosen at
# run time (src/util/cpu_features.h, src/kernels/kernels.h; TG_ISA=scalar|avx2|avx512 caps the choice).
ARCH    ?= native
# aarch64 and macOS (the block "aarch64 and macOS" below): Apple clang on arm64 refuses -march=native; there the
# native build is -mcpu=apple-m1 (every Apple silicon CPU has its set); every other compiler takes -march=$(ARCH).
TARGET  := $(shell $(CC) -dumpmachine)
AARCH64 := $(filter aarch64% arm64%,$(TARGET))
DARWIN  := $(findstring darwin,$(TARGET))
MARCH   := $(if $(and $(DARWIN),$(AARCH64),$(filter native,$(ARCH))),-mcpu=apple-m1,-march=$(ARCH))
OPT     := -O3 $(MARCH) -g
SAN     := -O1 $(if $(and $(DARWIN),$(AARCH64)),-mcpu=apple-m1,-march=native) -g -fsanitize=address,undefined \
           -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# Each instruction set's kernel files are compiled with its flags, whatever ARCH is (x86 only; elsewhere they compile
# to nothing): *_avx2.c with AVX2 + FMA + F16C (and never AVX-512, which a table chosen for an AVX2 CPU must not
# use), *_avx512.c with AVX-512. The AVX2 files in AVX512_TWICE are compiled a second time with AVX-512 (objects
# *.avx512.o; src/kernels/isa_avx512_names.h renames their functions), where their code takes its 512-bit paths: the
# AVX-512 tables.
X86     := $(filter x86_64% i686% i386%,$(shell $(CC) -dumpmachine))
ISA_AVX2   := -mavx2 -mfma -mf16c -mno-avx512f
ISA_AVX512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx512vnni \
              -include src/kernels/isa_avx512_names.h
AVX512_TWICE := src/kernels/gemv_avx2.c src/kernels/gemv_q32_avx2.c src/kernels/gemv_kquant_avx2.c \
                src/kernels/matmul_avx2.c src/kernels/kernels_avx2.c src/kvcache/attend_avx2.c \
                src/kvcache/attend_int_avx2.c src/kvcache/attend_table_avx2.c
# $(call isa_flags,SOURCE,OBJECT): the instruction-set flags of one compile
isa_flags = $(if $(X86),$(if $(filter %_avx512.c %.avx512.o,$1 $2),$(ISA_AVX512),$(if $(filter %_avx2.c,$1),\
    $(ISA_AVX2))))
# The release build's instruction-set kernel files keep line tables only (-g1: backtraces and perf's source lines, no
# local variables): tracking the locals of their always-inline kernels was the larger part of their debug
# information's compile time (docs/PERFORMANCE.md, "Build time"). The machine code is the same with either.
ISA_DEBUG := -g1
isa_debug = $(if $(filter %_avx2.c %_avx512.c %_neon.c %_dotprod.c %_i8mm.c,$1),$(ISA_DEBUG))

# src/serve (the HTTP server of `tinygpt serve`, on libmicrohttpd) links into the tool, not the library
LIB_SRC := $(shell find src -name '*.c' -not -path 'src/cli/*' -not -path 'src/serve/*' | sort)
CLI_SRC := $(shell find src/cli src/serve -name '*.c' | sort)

# The Vulkan backend (src/backend/vulkan/): built when glslc and the Vulkan headers are there (VULKAN=auto; VULKAN=1
# or 0 to force), else src/backend/vulkan_absent.c says so when asked for. glslc compiles its shaders to SPIR-V and
# tools/spv_embed.sh embeds them as C arrays (build/gen/vk_shaders.c); the loader is opened at run time (dlopen), so
# nothing links against libvulkan.
VULKAN  ?= auto
ifeq ($(VULKAN),auto)
override VULKAN := $(if $(and $(shell pkg-config --exists vulkan && echo y),$(shell command -v glslc)),1,0)
endif
VK_SHADERS := $(sort $(wildcard src/backend/vulkan/shaders/*.comp))
VK_GEN := build/gen/vk_shaders.c
LIB_SRC := $(filter-out $(if $(filter 1,$(VULKAN)),src/backend/vulkan_absent.c,src/backend/vulkan/%),$(LIB_SRC)) \
           $(if $(filter 1,$(VULKAN)),$(VK_GEN))
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/unit/*.c))

REL := build/release
ASN := build/asan

VARIANT_SRC := $(if $(X86),$(AVX512_TWICE))
REL_LIB_OBJ := $(LIB_SRC:%.c=$(REL)/%.o) $(VARIANT_SRC:%.c=$(REL)/%.avx512.o)
REL_CLI_OBJ := $(CLI_SRC:%.c=$(REL)/%.o)
ASN_LIB_OBJ := $(LIB_SRC:%.c=$(ASN)/%.o) $(VARIANT_SRC:%.c=$(ASN)/%.avx512.o)
ASN_CLI_OBJ := $(CLI_SRC:%.c=$(ASN)/%.o)
ASN_SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(ASN)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(ASN)/tests/%)

# The library's version (from include/tinygpt.h) and the shared library's names: libtinygpt.so.MAJOR is the SONAME.
VERSION := $(shell sed -n 's/^\#define TG_VERSION_STRING "\(.*\)"/\1/p' include/tinygpt.h)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libtinygpt.so.$(SOMAJOR)
SOFILE  := libtinygpt.so.$(VERSION)

.PHONY: all test clean unit-tests tools check-generic lib install examples
all: tinygpt

tinygpt: $(REL_CLI_OBJ) $(REL)/libtinygpt.a
	$(CC) $(OPT) $(THREADS) -o $@ $^ $(DEPS_LIBS)

lib: $(REL)/libtinygpt.a $(REL)/$(SOFILE)

$(REL)/libtinygpt.a: $(REL_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library exports only what include/tinygpt.h marks TG_API (the objects are compiled with
# -fvisibility=hidden); the static library is made of the same objects.
$(REL)/$(SOFILE): $(REL_LIB_OBJ)
	$(CC) $(OPT) $(THREADS) -shared $(SO_LDFLAGS) -o $@ $^ $(LIB_DEPS_LIBS)

$(REL_LIB_OBJ): LIB_CFLAGS := -fPIC -fvisibility=hidden

# Objects depend on the flags that built them: a stamp file rewritten only when the compile command changes (an ARCH
# or CFLAGS change, a new flag in this Makefile), so a changed flag rebuilds everything instead of mixing objects.
REL_FLAGS := $(CC) $(WARN) $(OPT) $(ISA_DEBUG) $(ISA_AVX2) $(ISA_AVX512) -fPIC -fvisibility=hidden $(THREADS) $(INC) $(DEPS_CFLAGS)
ASN_FLAGS := $(CC) $(WARN) $(SAN) $(ISA_AVX2) $(ISA_AVX512) $(THREADS) $(INC) $(DEPS_CFLAGS)
.PHONY: force-flags
$(REL)/.flags $(ASN)/.flags: force-flags
	@mkdir -p $(dir $@)
	@echo '$(if $(filter $(REL)/%,$@),$(REL_FLAGS),$(ASN_FLAGS))' | cmp -s - $@ || \
	    echo '$(if $(filter $(REL)/%,$@),$(REL_FLAGS),$(ASN_FLAGS))' >$@

$(REL)/%.o: %.c $(REL)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(OPT) $(call isa_debug,$<) $(call isa_flags,$<,$@) $(LIB_CFLAGS) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

$(REL)/%.avx512.o: %.c $(REL)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(OPT) $(call isa_debug,$<) $(call isa_flags,$<,$@) $(LIB_CFLAGS) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

# --- the Vulkan backend's shaders: GLSL -> SPIR-V (glslc) -> C arrays ---
build/gen/spv/%.spv: src/backend/vulkan/shaders/%.comp $(wildcard src/backend/vulkan/shaders/*.glsl)
	@mkdir -p $(dir $@)
	glslc --target-env=vulkan1.1 -O -o $@ $<

$(VK_GEN): $(VK_SHADERS:src/backend/vulkan/shaders/%.comp=build/gen/spv/%.spv) tools/spv_embed.sh
	tools/spv_embed.sh $@ $(filter %.spv,$^)

# the Vulkan test built without sanitizers, to run on a GPU machine: `make build/release/tests/test_vulkan`
$(REL)/tests/test_vulkan: tests/unit/test_vulkan.c $(TEST_SUPPORT) $(REL)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(OPT) $(THREADS) $(INC) -Itests/unit $(DEPS_CFLAGS) -o $@ $< $(TEST_SUPPORT) $(REL)/libtinygpt.a \
	    $(DEPS_LIBS) -lcmocka

# --- make install PREFIX=/usr/local DESTDIR= : the tool, both libraries, the header and tinygpt.pc ---
PREFIX  ?= /usr/local
DESTDIR ?=
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR  ?= $(PREFIX)/bin

install: tinygpt lib
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 755 tinygpt $(DESTDIR)$(BINDIR)/tinygpt
	install -m 644 $(REL)/libtinygpt.a $(DESTDIR)$(LIBDIR)/libtinygpt.a
	install -m 755 $(REL)/$(SOFILE) $(DESTDIR)$(LIBDIR)/$(SOFILE)
	ln -sf $(SOFILE) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libtinygpt.so
	install -m 644 include/tinygpt.h $(DESTDIR)$(INCLUDEDIR)/tinygpt.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' -e 's|@REQUIRES_PRIVATE@|$(strip $(LIB_PKGS))|g' tinygpt.pc.in \
	    >$(DESTDIR)$(LIBDIR)/pkgconfig/tinygpt.pc

# --- examples/*.c, built through pkg-config alone against a staged install (tests/cli/test_examples.sh runs them) ---
STAGE := $(abspath build/stage)
EX_SRC := $(sort $(wildcard examples/*.c))
EX_BIN := $(EX_SRC:examples/%.c=build/examples/%) $(EX_SRC:examples/%.c=build/examples/%-static)
STAGE_PC := PKG_CONFIG_PATH=$(STAGE)/lib/pkgconfig

examples: $(EX_BIN)

build/stage/.installed: tinygpt lib tinygpt.pc.in include/tinygpt.h Makefile
	$(MAKE) --no-print-directory install PREFIX=$(STAGE) DESTDIR=
	@touch $@

build/examples/%: examples/%.c build/stage/.installed
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O2 -o $@ $< $$($(STAGE_PC) pkg-config --cflags --libs tinygpt) -Wl,-rpath,$(STAGE)/lib

# fully static: libtinygpt.a and the static libraries its Requires.private / Libs.private name
build/examples/%-static: examples/%.c build/stage/.installed
	@mkdir -p $(dir $@)
	$(CC) $(WARN) -O2 -static -o $@ $< $$($(STAGE_PC) pkg-config --static --cflags --libs tinygpt)

# --- sanitizer build for the tests ---
$(ASN)/libtinygpt.a: $(ASN_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(ASN)/tinygpt: $(ASN_CLI_OBJ) $(ASN)/libtinygpt.a
	$(CC) $(SAN) $(THREADS) -o $@ $^ $(DEPS_LIBS)

$(ASN)/%.o: %.c $(ASN)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(call isa_flags,$<,$@) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

$(ASN)/%.avx512.o: %.c $(ASN)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(call isa_flags,$<,$@) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

$(ASN)/tests/%: tests/unit/%.c $(ASN_SUPPORT_OBJ) $(ASN)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(THREADS) $(INC) -Itests/unit $(DEPS_CFLAGS) -o $@ $< $(ASN_SUPPORT_OBJ) \
	    $(addprefix $(ASN)/,$(TOOL_PARTS_$*)) $(ASN)/libtinygpt.a $(DEPS_LIBS) -lcmocka

# Tests of the tool's own parts link their objects (src/cli and src/serve are the tool's, not the library's), and
# tests that replay a fuzz harness link it, compiled once with its libFuzzer entry points renamed
# (regress_<name>_one / regress_<name>_init): TOOL_PARTS_<test> lists them, built under each build folder.
REGRESS_HARNESSES := gguf hf folder tokenizer_json tokenizer_text tokenize args cli_text
TOOL_PARTS_test_regress := $(REGRESS_HARNESSES:%=fuzz/regress_%.o) src/cli/args.o src/cli/text.o
TOOL_PARTS_test_cli_text := src/cli/text.o
TOOL_PARTS_test_serve_parts := src/serve/admission.o src/serve/request.o src/serve/openai.o src/serve/watchdog.o
TOOL_PARTS_test_chat_template := fuzz/regress_chat_template.o
TOOL_PARTS_TESTS := test_regress test_cli_text test_serve_parts test_chat_template
REGRESS_NAMES = -DLLVMFuzzerTestOneInput=regress_$*_one -DLLVMFuzzerInitialize=regress_$*_init
$(foreach t,$(TOOL_PARTS_TESTS),$(eval $(ASN)/tests/$(t): $(addprefix $(ASN)/,$(TOOL_PARTS_$(t)))))

$(ASN)/fuzz/regress_%.o: fuzz/fuzz_%.c $(ASN)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(THREADS) $(INC) $(DEPS_CFLAGS) $(REGRESS_NAMES) -MMD -MP -c $< -o $@

# --- tools/*.c: stand-alone programs on the release library (bench/compare-llamacpp builds them) ---
TOOL_BIN := $(patsubst tools/%.c,$(REL)/tools/%,$(wildcard tools/*.c))
tools: $(TOOL_BIN)

$(REL)/tools/%: tools/%.c $(REL)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(OPT) $(THREADS) $(INC) $(DEPS_CFLAGS) -o $@ $< $(REL)/libtinygpt.a $(DEPS_LIBS)

# --- bench/*.c: measuring programs on the release library. `make bench-programs` builds them (decode_ab: both sides
# from this tree, through bench/decode-ab.sh --build-only); tests/cli/test_bench_programs.sh runs each at tiny sizes,
# built under the sanitizers. ---
BENCH_MAIN := $(filter-out bench/decode_ab.c bench/decode_ab_side.c,$(wildcard bench/*.c))
BENCH_BIN := $(BENCH_MAIN:bench/%.c=$(REL)/bench/%) $(REL)/bench/decode_ab
.PHONY: bench-programs
bench-programs: $(BENCH_BIN)

$(REL)/bench/%: bench/%.c $(REL)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(OPT) $(THREADS) $(INC) $(DEPS_CFLAGS) -o $@ $< $(REL)/libtinygpt.a $(DEPS_LIBS)

$(ASN)/bench/%: bench/%.c $(ASN)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(THREADS) $(INC) $(DEPS_CFLAGS) -o $@ $< $(ASN)/libtinygpt.a $(DEPS_LIBS)

$(REL)/bench/decode_ab: bench/decode_ab.c bench/decode_ab_side.c bench/decode-ab.sh $(REL)/libtinygpt.a
	@mkdir -p $(dir $@)
	+bench/decode-ab.sh --build-only . . && cp build/decode-ab/decode_ab $@

# the random-weight model writer, the GGUF decoder dump and greedy_logits under the sanitizers, for
# tests/cli/test_ggml_types.sh and tests/cli/test_kquant_llamacpp.sh
$(ASN)/tools/%: tools/%.c $(ASN)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(THREADS) $(INC) $(DEPS_CFLAGS) -o $@ $< $(ASN)/libtinygpt.a $(DEPS_LIBS)

unit-tests: $(TEST_BIN) $(ASN)/tinygpt $(ASN)/tools/gen_random_gguf $(ASN)/tools/gguf_dequant $(ASN)/tools/greedy_logits \
    $(TOOL_BIN:$(REL)/%=$(ASN)/%) $(BENCH_MAIN:bench/%.c=$(ASN)/bench/%)

test: check-generic unit-tests tinygpt examples $(REL)/bench/decode_ab
	@tests/run.sh $(ASN)

# Every source compiled without -march=native: the scalar paths that a machine without AVX2 (and the fuzz build)
# compiles must stay warning-free too. Syntax only: a few seconds.
check-generic: $(if $(filter 1,$(VULKAN)),$(VK_GEN))
	@for f in $(LIB_SRC) $(CLI_SRC); do $(CC) $(WARN) -O1 $(THREADS) $(INC) $(DEPS_CFLAGS) -fsyntax-only $$f || exit 1; done

# --- memcheck of the reader tests: a plain build (no sanitizers), run with TG_ISA=avx2: valgrind cannot run AVX-512 ---
VG := build/valgrind
VG_FLAGS := -O1 -g
VG_TESTS := $(filter $(TEST_BIN:$(ASN)/tests/%=%),test_gguf test_safetensors test_model test_tokenizer \
            test_tokenizer_vocab test_tokenizer_golden test_regress)
VG_LIB_OBJ := $(LIB_SRC:%.c=$(VG)/%.o) $(VARIANT_SRC:%.c=$(VG)/%.avx512.o)
VG_SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(VG)/%.o)
.SECONDARY: $(VG_SUPPORT_OBJ)

.PHONY: test-valgrind
test-valgrind: $(VG_TESTS:%=$(VG)/tests/%)
	@fail=0; for t in $(VG_TESTS); do \
	    if TG_ISA=avx2 valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	        --suppressions=tests/valgrind.supp $(VG)/tests/$$t >$(VG)/$$t.log 2>&1; then echo "valgrind $$t: ok"; \
	    else echo "valgrind $$t: FAILED"; tail -40 $(VG)/$$t.log; fail=1; fi; \
	done; exit $$fail

$(VG)/libtinygpt.a: $(VG_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(VG)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(VG_FLAGS) $(call isa_flags,$<,$@) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

$(VG)/%.avx512.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(VG_FLAGS) $(call isa_flags,$<,$@) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

$(VG)/tests/%: tests/unit/%.c $(VG_SUPPORT_OBJ) $(VG)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(VG_FLAGS) $(THREADS) $(INC) -Itests/unit $(DEPS_CFLAGS) -o $@ $< $(VG_SUPPORT_OBJ) \
	    $(addprefix $(VG)/,$(TOOL_PARTS_$*)) $(VG)/libtinygpt.a $(DEPS_LIBS) -lcmocka
$(foreach t,$(TOOL_PARTS_TESTS),$(eval $(VG)/tests/$(t): $(addprefix $(VG)/,$(TOOL_PARTS_$(t)))))

$(VG)/fuzz/regress_%.o: fuzz/fuzz_%.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(VG_FLAGS) $(THREADS) $(INC) $(DEPS_CFLAGS) $(REGRESS_NAMES) -MMD -MP -c $< -o $@

# --- ThreadSanitizer: the tests whose sessions run a thread team of 2 (the step scheduler's hand-offs between
# threads; a thread the OS holds back catches up through finished steps: src/forward/sched.h), side by side. Any
# report fails. ---
TSAN := build/tsan
TSAN_TESTS := test_families test_forward test_yoco test_attention_meter
.PHONY: test-tsan
test-tsan:
	@$(MAKE) --no-print-directory ASN=$(TSAN) SAN='-O1 -g -fsanitize=thread' $(TSAN_TESTS:%=$(TSAN)/tests/%)
	@for t in $(TSAN_TESTS); do \
	    (TSAN_OPTIONS='halt_on_error=1 exitcode=66' $(TSAN)/tests/$$t >$(TSAN)/$$t.log 2>&1; echo $$? >$(TSAN)/$$t.rc) & \
	done; wait; fail=0; for t in $(TSAN_TESTS); do \
	    if [ "$$(cat $(TSAN)/$$t.rc)" = 0 ]; then echo "tsan $$t: ok"; \
	    else echo "tsan $$t: FAILED"; grep -A40 -m1 'ThreadSanitizer' $(TSAN)/$$t.log || tail -40 $(TSAN)/$$t.log; \
	    fail=1; fi; \
	done; exit $$fail

# docs/RESULTS.md and docs/results/*.svg: the cache's cost in quality on the bundled model (tools/results.sh;
# about 30 minutes on 2 cores; `tools/results.sh --quick` is a smoke run of the pipeline)
.PHONY: results
results: tinygpt
	tools/results.sh

# --- aarch64 and macOS ---
# aarch64: the kernel files of each Arm instruction set are compiled with its flags whatever ARCH is: *_neon.c with
# the base set (Advanced SIMD is part of every aarch64 CPU), *_dotprod.c with ARMv8.2 dotprod (sdot/udot),
# *_i8mm.c with i8mm (smmla) on top; the tables are chosen at run time (src/util/cpu_features.h; TG_ISA=scalar|neon|
# dotprod|i8mm caps the choice).
ISA_DOTPROD := -march=armv8.2-a+dotprod
ISA_I8MM    := -march=armv8.2-a+dotprod+i8mm
ifneq ($(AARCH64),)
isa_flags = $(if $(filter %_dotprod.c,$1),$(ISA_DOTPROD),$(if $(filter %_i8mm.c,$1),$(ISA_I8MM)))
endif
# macOS: Apple's linker names a shared library by its install name (no -soname, no --no-undefined).
comma := ,
SO_LDFLAGS = $(if $(DARWIN),-Wl$(comma)-install_name$(comma)$(LIBDIR)/$(SONAME),-Wl$(comma)-soname$(comma)$(SONAME) \
             -Wl$(comma)--no-undefined)

# make check-posix: every source compiled (syntax only) as for a POSIX system that is not Linux, the nearest this
# machine comes to a macOS compile: __linux__ undefined (the Linux-only branches off), each file's _GNU_SOURCE /
# _DEFAULT_SOURCE / _POSIX_C_SOURCE lines removed and POSIX.1-2008 with XSI (_XOPEN_SOURCE=700, as macOS) set for
# all, so that glibc declares POSIX alone, plus the few macOS extensions of tests/posix/darwin_ext.h. An unguarded
# Linux-only call fails it.
POSIX_CHECK := -U__linux__ -U__linux -Ulinux -U__gnu_linux__ -D_POSIX_C_SOURCE=200809L -D_XOPEN_SOURCE=700 \
               -include tests/posix/darwin_ext.h
.PHONY: check-posix
check-posix:
	@for f in $(LIB_SRC) $(CLI_SRC); do \
	    sed -e '/^#define _GNU_SOURCE/d' -e '/^#define _DEFAULT_SOURCE/d' -e '/^#define _POSIX_C_SOURCE/d' $$f | \
	    $(CC) $(WARN) $(POSIX_CHECK) $(THREADS) $(INC) $(DEPS_CFLAGS) -x c -fsyntax-only - || \
	    { echo "check-posix: $$f"; exit 1; }; done; echo "check-posix: $(words $(LIB_SRC) $(CLI_SRC)) files ok"

# make test-aarch64: the library, the tool and a chosen set of unit tests cross-compiled for aarch64 Linux (Debian's
# gcc-aarch64-linux-gnu, the arm64 -dev packages through multiarch: .ci/run installs them) under UBSan (ASan does not
# run under qemu-user), then run under qemu-user on three CPU models: `max` (dotprod and i8mm), `neoverse-n1`
# (dotprod, no i8mm), `cortex-a53` (ARMv8.0: the NEON table), with tests/aarch64.sh (the unit tests, the bundled
# model's greedy golden, bench's kernel line). Objects under build/aarch64; the x86 build is untouched.
A64_CC   ?= aarch64-linux-gnu-gcc
A64      := build/aarch64
A64_PKG  := /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
A64_SAN  := -O2 -g -fsanitize=undefined -fno-sanitize-recover=undefined -static-libubsan
A64_CPUS := max neoverse-n1 cortex-a53
# the kernels, the cache's kernels, the readers and the forward pass on small models (tests/aarch64.sh runs one test
# of test_forward); the slow whole-model tests are left out
A64_UNIT := test_kernels test_isa test_kernels_ops test_ggml_blocks test_repack test_types test_attend_group \
            test_attend_int test_kivi test_kv_precision test_forward test_thread_pool test_gguf
.PHONY: test-aarch64 aarch64-build
aarch64-build:
	PKG_CONFIG_LIBDIR=$(A64_PKG) $(MAKE) --no-print-directory CC=$(A64_CC) ARCH=armv8-a REL=$(A64)/release \
	    ASN=$(A64)/test SAN='$(A64_SAN)' $(A64)/test/tinygpt $(A64_UNIT:%=$(A64)/test/tests/%)
test-aarch64: aarch64-build
	@tests/aarch64.sh $(A64)/test "$(A64_CPUS)" $(A64_UNIT)

clean:
	rm -rf build tinygpt fuzz/build

# libFuzzer harnesses: `make fuzz` (fuzz/README.md)
include fuzz/fuzz.mk

-include $(shell find build -name '*.d' 2>/dev/null)
