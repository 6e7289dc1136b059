# fuzz.mk — `make fuzz` builds the libFuzzer harnesses fuzz/fuzz_*.c with clang (ASan + UBSan + libFuzzer) into
# fuzz/build/; fuzz/run.sh runs them. Included by the top-level Makefile, whose LIB_SRC, WARN, INC and DEPS_* it uses.
FUZZ_CC    ?= clang-14
FUZZ_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZ        := fuzz/build
FUZZ_SRC   := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_BIN   := $(FUZZ_SRC:fuzz/%.c=$(FUZ)/%)
FUZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZ)/obj/%.o) $(VARIANT_SRC:%.c=$(FUZ)/obj/%.avx512.o)
FUZ_CLI_OBJ := $(FUZ)/obj/src/cli/args.o $(FUZ)/obj/src/cli/text.o $(FUZ)/obj/src/serve/request.o \
               $(FUZ)/obj/src/serve/openai.o
.SECONDARY: $(FUZ_CLI_OBJ)

.PHONY: fuzz
fuzz: $(FUZZ_BIN)

$(FUZ)/libtinygpt.a: $(FUZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZ)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(WARN) $(FUZZ_FLAGS) $(call isa_flags,$<,$@) -fsanitize=fuzzer-no-link -pthread $(INC) $(DEPS_CFLAGS) \
	    -MMD -MP -c $< -o $@

$(FUZ)/obj/%.avx512.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(WARN) $(FUZZ_FLAGS) $(call isa_flags,$<,$@) -fsanitize=fuzzer-no-link -pthread $(INC) $(DEPS_CFLAGS) \
	    -MMD -MP -c $< -o $@

$(FUZ)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZ_CLI_OBJ) $(FUZ)/libtinygpt.a
	$(FUZZ_CC) $(WARN) $(FUZZ_FLAGS) -fsanitize=fuzzer -pthread $(INC) $(DEPS_CFLAGS) -o $@ $< $(FUZ_CLI_OBJ) \
	    $(FUZ)/libtinygpt.a $(DEPS_LIBS)

-include $(shell find $(FUZ)/obj -name '*.d' 2>/dev/null)
