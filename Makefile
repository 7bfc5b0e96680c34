# mkv -- see README.md.  `make` builds bin/mkv and bin/mkv-volume.
#   make run      start a local cluster (3 volumes + master on :3000, data in ./data)
#   make test     unit + integration tests (SANITIZE=1 for ASan+UBSan)
#   make bench    benchmarks against stock nginx (QUICK=1 for a short run)
#   make mutate   mutation testing: tests/mutants.txt, one at a time (MUTANTS=regex)
#   make install  PREFIX=/usr/local, DESTDIR= (staging); make uninstall
#   make deb      mkv_VERSION_ARCH.deb (deploy/debian/); make dist: a tarball

PKGS    := libmicrohttpd gnutls libcurl jansson libssl libcrypto check libsystemd
CC      ?= cc
OPT     ?= -O2
# Deferred (=, not :=): on a fresh machine pkg-config and the libraries
# arrive with `deps`, which runs before anything is compiled.
CFLAGS   = -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Werror -MMD -MP \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# Each program links what it calls: the master all of it, mkv-volume no
# LevelDB or jansson, the tools no LevelDB or libmicrohttpd.
libs     = $(shell pkg-config --libs $(1) 2>/dev/null) -lpthread -lm
LDLIBS   = $(call libs,libmicrohttpd gnutls libcurl jansson libssl libcrypto libsystemd) -lleveldb
VOL_LIBS = $(call libs,libmicrohttpd gnutls libcurl libssl libcrypto libsystemd)
TOOL_LIBS = $(call libs,libcurl libssl libcrypto jansson)
TESTLIBS = $(shell pkg-config --libs check 2>/dev/null)

ifeq ($(SANITIZE),1)
  CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
  B := build-san
else
  B := build
endif
# Test code may leak; the servers it starts must not.  Their ASan quarantine
# is 64 MiB, not 256: the hostile suites bound the servers' RSS at 200 MiB.  The sanitizer run
# hunts memory errors, not scale: check_ops moves 1,500 keys there (5,000 in
# the plain run) and check_tools puts and gets a tree of 500 files (2,000),
# which keeps CI's two runs within its time.
SANENV := $(if $(filter 1,$(SANITIZE)),ASAN_OPTIONS=detect_leaks=0 MKV_CHILD_ASAN_OPTIONS=detect_leaks=1:exitcode=23:quarantine_size_mb=64 MKV_OPS_KEYS=1500 MKV_TOOLS_FILES=500,)
# Binaries (and tools) the tests run: bin/ normally, build-san/bin with
# SANITIZE=1, so that a sanitizer run never replaces what bench/ runs.
BIN := $(if $(filter 1,$(SANITIZE)),$(B)/bin,bin)

COMMON_SRC := $(wildcard common/*.c)
MASTER_SRC := $(wildcard master/*.c s3/*.c ops/*.c)
VOLUME_SRC := $(wildcard volume/*.c)
TEST_SRC   := $(wildcard tests/check_*.c)
TOOL_SRC   := $(wildcard tools/*.c)

obj = $(patsubst %.c,$(B)/%.o,$(1))
COMMON_OBJ := $(call obj,$(COMMON_SRC))
MASTER_LIB := $(call obj,$(filter-out ops/main.c,$(MASTER_SRC)))
VOLUME_LIB := $(call obj,$(filter-out volume/main.c volume/interpose.c,$(VOLUME_SRC)))
# The front and what only it uses: not in the tools.
FRONT_OBJ  := $(call obj,common/front.c common/reqstats.c common/accesslog.c common/metrics.c common/page.c)
TESTS      := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRC))
TOOLS      := $(patsubst tools/%.c,$(BIN)/%,$(TOOL_SRC))
MANS       := $(B)/man/mkv.1.gz $(B)/man/mkv-volume.1.gz

.PHONY: all deps run test test-hosts layers valgrind bench clean install uninstall deb dist mutate FORCE
all: deps $(BIN)/mkv $(BIN)/mkv-volume $(TOOLS) $(MANS)

deps:
	@tools/deps.sh

# Order-only on deps: with -j, nothing compiles before the headers are installed.
$(B)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The version -version prints (tools/version.sh): the header is rewritten
# only when it changes, so only flags.o is rebuilt, and only then.  One per
# build directory (build, build-san, build-fuzz).
%/version.h: FORCE
	@mkdir -p $(dir $@)
	@tools/version.sh header >$@.new && if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi
$(B)/common/flags.o: $(B)/version.h
$(B)/common/flags.o: CFLAGS += -I$(B)

$(BIN)/mkv: $(B)/ops/main.o $(MASTER_LIB) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BIN)/mkv-volume: $(B)/volume/main.o $(B)/volume/interpose.o $(VOLUME_LIB) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(VOL_LIBS) -o $@

$(BIN)/%: $(B)/tools/%.o $(filter-out $(FRONT_OBJ),$(COMMON_OBJ))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(TOOL_LIBS) -o $@

# mkindex writes LevelDB tables itself (bench's scale rows).
$(BIN)/mkindex: $(B)/tools/mkindex.o $(filter-out $(FRONT_OBJ),$(COMMON_OBJ))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(TOOL_LIBS) -lleveldb -o $@

# Suites named check_volume* link the volume's code; the others the master's.
$(B)/tests/check_volume%: $(B)/tests/check_volume%.o $(B)/tests/harness.o $(VOLUME_LIB) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(TESTLIBS) $(VOL_LIBS) -o $@

$(B)/tests/%: $(B)/tests/%.o $(B)/tests/harness.o $(MASTER_LIB) $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(TESTLIBS) $(LDLIBS) -o $@

$(B)/tests/harness.o: tests/harness.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# A disk that fails on request (check_index_faults), preloaded into the
# master: never built with the sanitizer (libasan must come first).
$(B)/tests/faultfs.so: tests/faultfs.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -Wall -Wextra -Werror -shared -fPIC $< -o $@ -ldl

# Run each suite in $(1), the command $(2) before it: all run even if one
# fails, any failure fails.  Each says how long it took, and a table at the
# end lists them all.
define run_suites
	@fail=0; table=; t0=$$(date +%s); for t in $(1); do \
	  echo "== $$t"; s=$$(date +%s); \
	  if $(2) $$t; then r=passed; else r=FAILED; fail=1; fi; \
	  line="$$t: $$(($$(date +%s) - s)) s, $$r"; echo "== $$line"; table="$$table$$line|"; \
	done; echo "== suites ($$(($$(date +%s) - t0)) s in all):"; \
	echo "$$table" | tr '|' '\n' | sed '/^$$/d; s/^/   /'; exit $$fail
endef

# The layers keep to their includes (docs/architecture.md).
layers:
	@tests/layers.sh

# tests/crashloop.py: kill -9 at random under load, 8 seeded rounds.
# tests/check_install.sh: make install/uninstall, make deb, lintian;
# tests/check_docs.py: the shell examples of README.md and docs/, as written.
test: layers all $(TESTS) $(B)/tests/faultfs.so
	$(call run_suites,$(TESTS) tests/crashloop.py tests/check_install.sh tests/check_docs.py,MKV_BIN=$(CURDIR)/$(BIN) MKV_ROOT=$(CURDIR) $(SANENV))

# Mutation testing (docs/testing.md): each mutant of tests/mutants.txt
# in a copy of the tree, its suites run; the kill rate and the survivors.
# Long: not part of test.  MUTANTS=regex runs some.
mutate:
	@tools/mutate.py

# The multi-host bed (tests/hosts/bed.sh): network namespaces, as root
# (skipped without); SCENARIOS="s2_cut_host ..." runs only those.
$(B)/tests/hosts/relay: $(B)/tests/hosts/relay.o
	$(CC) $(LDFLAGS) $^ -o $@
test-hosts: all $(B)/tests/hosts/relay
	MKV_BIN=$(CURDIR)/$(BIN) MKV_ROOT=$(CURDIR) MKV_RELAY=$(CURDIR)/$(B)/tests/hosts/relay $(SANENV) \
	  tests/hosts/bed.sh run 5 python3 tests/hosts/scenarios.py $(SCENARIOS)

# The unit suites (no servers) under valgrind's memcheck, in-process.
VALGRIND_SUITES := check_placement check_handlers check_fuzz check_volume_fuzz check_auth
valgrind: all $(patsubst %,$(B)/tests/%,$(VALGRIND_SUITES))
	$(call run_suites,$(patsubst %,$(B)/tests/%,$(VALGRIND_SUITES)),CK_FORK=no CK_EXCLUDE_TAGS=big \
	  MKV_ROOT=$(CURDIR) valgrind -q --error-exitcode=9 --leak-check=full \
	  --errors-for-leak-kinds=definite --show-possibly-lost=no)

# A local cluster: three volumes (mkv-volume, or VOLUMES=nginx) and a master.
VOLUMES ?= mkv
run: all
	@tools/run-cluster.sh $(VOLUMES)

bench: all
	@bench/run.sh $(if $(QUICK),--quick)

# Installing: GNU's variables.  The units name /usr/local's paths
# (deploy/systemd/) and are rewritten to these.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
DATADIR ?= $(PREFIX)/share
DOCDIR  ?= $(DATADIR)/doc/mkv
MANDIR  ?= $(DATADIR)/man
SYSTEMDUNITDIR ?= $(LIBDIR)/systemd/system
UNITS := mkv.service mkv-volume@.service mkv-nginx-volume@.service
# The docs keep the checkout's tree (README.md beside docs/), so that the
# README's links resolve where they are installed; mkvread.py (the
# training jobs' reader) goes in DATADIR/mkv, as Debian keeps a package's
# private Python.
DOCS  := $(wildcard docs/*.md)
# Every file install puts there: what uninstall removes.
INSTALLED := $(BINDIR)/mkv $(BINDIR)/mkv-volume $(LIBDIR)/mkv/mkv-nginx-volume \
	$(LIBDIR)/mkv/nginx.conf.in $(addprefix $(SYSTEMDUNITDIR)/,$(UNITS)) \
	$(MANDIR)/man1/mkv.1.gz $(MANDIR)/man1/mkv-volume.1.gz $(DATADIR)/mkv/mkvread.py \
	$(DOCDIR)/README.md $(addprefix $(DOCDIR)/,$(DOCS))
INSTALLDIRS := $(BINDIR) $(LIBDIR)/mkv $(SYSTEMDUNITDIR) $(MANDIR)/man1 $(DATADIR)/mkv $(DOCDIR)/docs
D := $(DESTDIR)
# The units and man pages name /usr/local's paths: rewritten to these.
SUBST := sed -e 's|/usr/local/bin/|$(BINDIR)/|g' -e 's|/usr/local/lib/mkv/|$(LIBDIR)/mkv/|g' \
	-e 's|/usr/local/share/doc/mkv/|$(DOCDIR)/|g' -e 's|/usr/local/share/mkv/|$(DATADIR)/mkv/|g'

$(B)/man/%.1.gz: man/%.1
	@mkdir -p $(dir $@)
	gzip -9n <$< >$@

# Directories first: an unwritable PREFIX stops before any file is copied.
install: $(BIN)/mkv $(BIN)/mkv-volume $(MANS)
	@for d in $(INSTALLDIRS); do { install -d "$(D)$$d" && [ -w "$(D)$$d" ]; } 2>/dev/null || { \
	  echo "make install: cannot write $(D)$$d: set PREFIX (or DESTDIR) to a directory you may write, or run it as root" >&2; exit 1; }; done
	@set -e; trap 'echo "make install: stopped part way: make uninstall with the same variables removes what it put there" >&2' EXIT; \
	install -m 755 $(BIN)/mkv $(BIN)/mkv-volume "$(D)$(BINDIR)/"; \
	install -m 755 deploy/nginx/mkv-nginx-volume "$(D)$(LIBDIR)/mkv/"; \
	install -m 644 deploy/nginx/nginx.conf.in "$(D)$(LIBDIR)/mkv/"; \
	for u in $(UNITS); do $(SUBST) deploy/systemd/$$u >"$(D)$(SYSTEMDUNITDIR)/$$u"; \
	  chmod 644 "$(D)$(SYSTEMDUNITDIR)/$$u"; done; \
	for m in mkv mkv-volume; do $(SUBST) man/$$m.1 | gzip -9n >"$(D)$(MANDIR)/man1/$$m.1.gz"; \
	  chmod 644 "$(D)$(MANDIR)/man1/$$m.1.gz"; done; \
	install -m 755 tools/mkvread.py "$(D)$(DATADIR)/mkv/"; \
	install -m 644 README.md "$(D)$(DOCDIR)/"; \
	install -m 644 $(DOCS) "$(D)$(DOCDIR)/docs/"; \
	trap - EXIT; echo "installed in $(D)$(PREFIX) (units in $(D)$(SYSTEMDUNITDIR))"

# The files, then the directories only mkv uses; in a staging DESTDIR
# also every directory install made that is left empty.
uninstall:
	rm -f $(addprefix $(D),$(INSTALLED))
	@$(if $(D),cd "$(D)" && for d in $(patsubst /%,%,$(INSTALLDIRS)); do \
	  [ ! -d "$$d" ] || rmdir -p --ignore-fail-on-non-empty "$$d"; done,:)
	@rmdir "$(D)$(LIBDIR)/mkv" "$(D)$(DATADIR)/mkv" "$(D)$(DOCDIR)/docs" "$(D)$(DOCDIR)" 2>/dev/null || true

# The Debian package, from a staging install under /usr (Debian 12 keeps
# units in /lib/systemd/system), made by deploy/debian/mkdeb.sh, into DEBDIR.
DEBDIR ?= .
deb: all
	@command -v dpkg-deb >/dev/null || { echo "make deb: no dpkg-deb in PATH (Debian's dpkg package has it)" >&2; exit 1; }
	rm -rf $(B)/deb
	@umask 022 && $(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(B)/deb/debian/mkv PREFIX=/usr SYSTEMDUNITDIR=/lib/systemd/system >/dev/null
	deploy/debian/mkdeb.sh $(B)/deb $(DEBDIR)

# A source tarball that knows its version without git (VERSION).
dist:
	@set -- $$(tools/version.sh); v=$${1%+dirty}; git archive --prefix=mkv-$$v/ \
	  --add-virtual-file=mkv-$$v/VERSION:"$$v $$2" -o mkv-$$v.tar.gz HEAD && echo mkv-$$v.tar.gz

clean:
	rm -rf build build-san bin mkv_*.deb mkv-*.tar.gz

# libFuzzer targets: `make fuzz` (rules in fuzz/fuzz.mk).
-include fuzz/fuzz.mk

-include $(shell find build build-san -name '*.d' 2>/dev/null)
