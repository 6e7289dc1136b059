# tinygpt — `make` builds ./tinygpt; `make test` builds everything under ASan+UBSan and runs the whole suite.
CC      ?= cc
PKGS    := jansson libpcre2-8 libedit
WARN    := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Werror
INC     := -Iinclude -Isrc
DEPS_CFLAGS := $(shell pkg-config --cflags $(PKGS))
DEPS_LIBS   := $(shell pkg-config --libs $(PKGS)) -lm
THREADS := -pthread # one thread team (src/util/thread_pool.c); no OpenMP
OPT     := -O3 -march=native -g
SAN     := -O1 -march=native -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

LIB_SRC := $(shell find src -name '*.c' -not -path 'src/cli/*' | sort)
CLI_SRC := $(shell find src/cli -name '*.c' | sort)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/unit/*.c))

REL := build/release
ASN := build/asan

REL_LIB_OBJ := $(LIB_SRC:%.c=$(REL)/%.o)
REL_CLI_OBJ := $(CLI_SRC:%.c=$(REL)/%.o)
ASN_LIB_OBJ := $(LIB_SRC:%.c=$(ASN)/%.o)
ASN_CLI_OBJ := $(CLI_SRC:%.c=$(ASN)/%.o)
ASN_SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(ASN)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(ASN)/tests/%)

.PHONY: all test clean unit-tests tools check-generic
all: tinygpt

tinygpt: $(REL_CLI_OBJ) $(REL)/libtinygpt.a
	$(CC) $(OPT) $(THREADS) -o $@ $^ $(DEPS_LIBS)

$(REL)/libtinygpt.a: $(REL_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(REL)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(OPT) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

# --- sanitizer build for the tests ---
$(ASN)/libtinygpt.a: $(ASN_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(ASN)/tinygpt: $(ASN_CLI_OBJ) $(ASN)/libtinygpt.a
	$(CC) $(SAN) $(THREADS) -o $@ $^ $(DEPS_LIBS)

$(ASN)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

$(ASN)/tests/%: tests/unit/%.c $(ASN_SUPPORT_OBJ) $(ASN)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(THREADS) $(INC) -Itests/unit $(DEPS_CFLAGS) -o $@ $< $(ASN_SUPPORT_OBJ) $(ASN)/libtinygpt.a \
	    $(DEPS_LIBS) -lcmocka

# --- tools/*.c: stand-alone programs on the release library (bench/compare-llamacpp builds them) ---
TOOL_BIN := $(patsubst tools/%.c,$(REL)/tools/%,$(wildcard tools/*.c))
tools: $(TOOL_BIN)

$(REL)/tools/%: tools/%.c $(REL)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(OPT) $(THREADS) $(INC) $(DEPS_CFLAGS) -o $@ $< $(REL)/libtinygpt.a $(DEPS_LIBS)

# the random-weight model writer, the GGUF decoder dump and greedy_logits under the sanitizers, for
# tests/cli/test_ggml_types.sh and tests/cli/test_kquant_llamacpp.sh
$(ASN)/tools/%: tools/%.c $(ASN)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(THREADS) $(INC) $(DEPS_CFLAGS) -o $@ $< $(ASN)/libtinygpt.a $(DEPS_LIBS)

unit-tests: $(TEST_BIN) $(ASN)/tinygpt $(ASN)/tools/gen_random_gguf $(ASN)/tools/gguf_dequant $(ASN)/tools/greedy_logits

test: check-generic unit-tests tinygpt
	@tests/run.sh $(ASN)

# Every source compiled without -march=native: the scalar paths that a machine without AVX2 (and the fuzz build)
# compiles must stay warning-free too. Syntax only: a few seconds.
check-generic:
	@for f in $(LIB_SRC) $(CLI_SRC); do $(CC) $(WARN) -O1 $(THREADS) $(INC) $(DEPS_CFLAGS) -fsyntax-only $$f || exit 1; done

# --- memcheck of the reader tests: a plain build (no sanitizers, no AVX-512, which valgrind cannot run) ---
VG := build/valgrind
VG_FLAGS := -O1 -g -mavx2 -mfma -mf16c
VG_TESTS := $(filter $(TEST_BIN:$(ASN)/tests/%=%),test_gguf test_safetensors test_model test_tokenizer \
            test_tokenizer_vocab test_tokenizer_golden test_regress)
VG_LIB_OBJ := $(LIB_SRC:%.c=$(VG)/%.o)
VG_SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(VG)/%.o)
.SECONDARY: $(VG_SUPPORT_OBJ)

.PHONY: test-valgrind
test-valgrind: $(VG_TESTS:%=$(VG)/tests/%)
	@fail=0; for t in $(VG_TESTS); do \
	    if valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	        --suppressions=tests/valgrind.supp $(VG)/tests/$$t >$(VG)/$$t.log 2>&1; then echo "valgrind $$t: ok"; \
	    else echo "valgrind $$t: FAILED"; tail -40 $(VG)/$$t.log; fail=1; fi; \
	done; exit $$fail

$(VG)/libtinygpt.a: $(VG_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(VG)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(VG_FLAGS) $(THREADS) $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

$(VG)/tests/%: tests/unit/%.c $(VG_SUPPORT_OBJ) $(VG)/libtinygpt.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(VG_FLAGS) $(THREADS) $(INC) -Itests/unit $(DEPS_CFLAGS) -o $@ $< $(VG_SUPPORT_OBJ) $(VG)/libtinygpt.a \
	    $(DEPS_LIBS) -lcmocka

# docs/RESULTS.md and docs/results/*.svg: the cache's cost in quality on the bundled model (tools/results.sh;
# about 30 minutes on 2 cores; `tools/results.sh --quick` is a smoke run of the pipeline)
.PHONY: results
results: tinygpt
	tools/results.sh

clean:
	rm -rf build tinygpt fuzz/build

# libFuzzer harnesses: `make fuzz` (fuzz/README.md)
include fuzz/fuzz.mk

-include $(shell find build -name '*.d' 2>/dev/null)
