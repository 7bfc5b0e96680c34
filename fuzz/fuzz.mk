# fuzz.mk -- libFuzzer targets (included by the top Makefile).
#
#   make fuzz                 build each target and run it FUZZ_SECONDS (30)
#   make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS=path
#   make fuzz-merge           fold new interesting inputs into fuzz/corpus/
#
# Targets live in fuzz/targets_*.c (one function each, see fuzz/targets.h);
# fuzz/main_<target>.c is libFuzzer's entry point.  Each run reads the
# committed seeds in fuzz/corpus/<target>/ and past crashers in
# fuzz/regress/<target>/, and writes what it finds to build-fuzz/ (never to
# the repository).  A crash stops `make fuzz` and leaves
# build-fuzz/crashes/<target>/crash-*: copy it into fuzz/regress/<target>/
# and `make test` replays it (tests/check_fuzz.c, tests/check_volume_fuzz.c)
# without clang.

FUZZ_TARGETS ?= key record query sig vresp range path
FUZZ_SECONDS ?= 30
FUZZ_CC      ?= clang
FZ           := build-fuzz
FUZZ_FLAGS   := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra $(FUZZ_FLAGS) \
                -fsanitize=fuzzer-no-link $(shell pkg-config --cflags $(PKGS) 2>/dev/null)

fz_obj        = $(patsubst %.c,$(FZ)/%.o,$(1))
FUZZ_COMMON  := $(call fz_obj,$(COMMON_SRC))
FUZZ_MASTER  := $(call fz_obj,$(filter-out ops/main.c,$(MASTER_SRC)) fuzz/targets_master.c)
FUZZ_VOLUME  := $(call fz_obj,$(filter-out volume/main.c,$(VOLUME_SRC)) fuzz/targets_volume.c)
fuzz_lib      = $(if $(filter range path,$(1)),$(FUZZ_VOLUME),$(FUZZ_MASTER))

.PHONY: fuzz fuzz-build fuzz-deps fuzz-merge

# clang and its runtimes (libclang-rt-14-dev holds libFuzzer) from Debian.
fuzz-deps:
	@dpkg-query -W -f='$${Status}\n' clang libclang-rt-14-dev 2>/dev/null | \
	  grep -c '^install ok installed' | grep -qx 2 || \
	  { echo "fuzz: installing clang libclang-rt-14-dev"; \
	    apt-get install -y clang libclang-rt-14-dev >/dev/null || \
	    { apt-get update >/dev/null && apt-get install -y clang libclang-rt-14-dev; }; }

$(FZ)/%.o: %.c | fuzz-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
$(FZ)/common/flags.o: $(FZ)/version.h
$(FZ)/common/flags.o: FUZZ_CFLAGS += -I$(FZ)

define fuzz_rule
$(FZ)/fuzz-$(1): $(FZ)/fuzz/main_$(1).o $(call fuzz_lib,$(1)) $(FUZZ_COMMON)
	$$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_FLAGS) $$^ $$(LDLIBS) -o $$@
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz_rule,$(t))))

fuzz-build: $(foreach t,$(FUZZ_TARGETS),$(FZ)/fuzz-$(t))

# Each target runs FUZZ_SECONDS over its corpus; all run, any crash fails.
fuzz: fuzz-build
	@fail=; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FZ)/corpus/$$t $(FZ)/crashes/$$t fuzz/corpus/$$t fuzz/regress/$$t; \
	  echo "== fuzz $$t ($(FUZZ_SECONDS) s)"; \
	  if $(FZ)/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	      -artifact_prefix=$(FZ)/crashes/$$t/ $(FZ)/corpus/$$t fuzz/corpus/$$t \
	      fuzz/regress/$$t 2>$(FZ)/fuzz-$$t.log; then \
	    grep -E '^Done' $(FZ)/fuzz-$$t.log; \
	  else \
	    grep -aE 'property broken|ERROR|SUMMARY' $(FZ)/fuzz-$$t.log | head -n 5; \
	    echo "fuzz $$t: CRASH saved in $(FZ)/crashes/$$t/ (log $(FZ)/fuzz-$$t.log);" \
	         "copy it to fuzz/regress/$$t/"; fail=1; \
	  fi; \
	done; test -z "$$fail"

# Keep the committed corpora small: only inputs that add coverage.
fuzz-merge: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FZ)/corpus/$$t fuzz/corpus/$$t; \
	  $(FZ)/fuzz-$$t -merge=1 fuzz/corpus/$$t $(FZ)/corpus/$$t 2>/dev/null; \
	  echo "fuzz/corpus/$$t: $$(ls fuzz/corpus/$$t | wc -l) files"; \
	done

-include $(shell find $(FZ) -name '*.d' 2>/dev/null)
