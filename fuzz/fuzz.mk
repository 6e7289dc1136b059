# fuzz.mk — `make fuzz` builds the libFuzzer harnesses fuzz/fuzz_*.c with clang (ASan + UBSan + libFuzzer) into
# fuzz/build/; fuzz/run.sh runs them. Included by the top-level Makefile, whose LIB_SRC, WARN, INC and DEPS_* it uses.
FUZZ_CC    ?= clang-14
FUZZ_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZ        := fuzz/build
FUZZ_SRC   := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_BIN   := $(FUZZ_SRC:fuzz/%.c=$(FUZ)/%)
FUZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZ)/obj/%.o) $(VARIANT_SRC:%.c=$(FUZ)/obj/%.avx512.o)
FUZ_CLI_OBJ := $(FUZ)/obj/src/cli/args.o $(FUZ)/obj/src/cli/text.o \
               $(patsubst %.c,$(FUZ)/obj/%.o,$(sort $(wildcard src/serve/*.c)))
.SECONDARY: $(FUZ_CLI_OBJ)
# The arithmetic (matrix products, attention kernels, the device backend) is built plain: -O2, no sanitizers, no
# coverage. The harnesses fuzz readers, parsers, templates and the request path, not arithmetic, and these are the
# slow compiles (under ASan, minutes on a loaded machine); everything else is built once, instrumented.
FUZZ_PLAIN := $(filter src/kernels/% src/kvcache/attend% src/backend/% build/gen/%,$(LIB_SRC))
FUZ_PLAIN_OBJ := $(FUZZ_PLAIN:%.c=$(FUZ)/obj/%.o)
FUZ_PLAIN_VARIANT_OBJ := $(filter $(FUZZ_PLAIN:%.c=$(FUZ)/obj/%.avx512.o),$(VARIANT_SRC:%.c=$(FUZ)/obj/%.avx512.o))

.PHONY: fuzz
fuzz: $(FUZZ_BIN)

$(FUZ)/libtinygpt.a: $(FUZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZ_PLAIN_OBJ): $(FUZ)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(WARN) -O2 -g $(call isa_flags,$<,$@) -pthread $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

$(FUZ_PLAIN_VARIANT_OBJ): $(FUZ)/obj/%.avx512.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(WARN) -O2 -g $(call isa_flags,$<,$@) -pthread $(INC) $(DEPS_CFLAGS) -MMD -MP -c $< -o $@

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
