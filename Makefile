# gridnode build. Everything is found by wildcard, so adding a source file, a unit
# test (tests/unit/test_*.c), a benchmark (bench/*.c, bench/*.sh) or a fuzz target
# (fuzz/fuzz_*.c) needs no change here.
#
#   make            build/gridnode (-Wall -Wextra -Werror)
#   make test       unit + system tests, plain and ASan/UBSan builds, and tests/net
#   make net        tests/net only (network namespaces: needs root)
#   make demo       install what is missing, build, run a local grid demo
#   make bench      benchmarks, one JSON line each
#   make fuzz       bounded libFuzzer run of the wire decoder
#   make install    binary, man pages, example configs and docs under $(DESTDIR)$(PREFIX)
#   make man        man pages (build/man) generated from the --help texts
#   make format-check   clang-format, checked in make test
#   make layers         the layer rule (scripts/layers.py), checked in make test
#   make docs           docs/*.svg redrawn from their Graphviz sources (docs/*.dot)

BUILD   ?= build
PREFIX  ?= /usr/local
PKGS    := libzmq msgpack lmdb inih jansson zlib libmicrohttpd libsodium
DEP_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# Link flags (process start-up is most of a user tool's run time, see docs/perf.md):
# libzmq is not linked but loaded on first use (daemon/zmqdl.c); the small libraries
# are linked statically (their .a files come with the -dev packages), so a tool
# maps only libc, libm and the binary itself (libsodium: the tools' own CURVE client,
# cmd/zmtp_curve.c). libmicrohttpd (stats.http) is not linked
# either: daemon/httpstats.c loads it when a role starts its statistics server (it pulls
# GnuTLS and a dozen more libraries; only its header is needed to build).
STATIC_PKGS := msgpack lmdb inih jansson zlib libsodium
DEP_LIBS   := -Wl,-O1,--as-needed -Wl,-Bstatic $(shell pkg-config --libs $(STATIC_PKGS) \
              2>/dev/null) -Wl,-Bdynamic -ldl -lm
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)
WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-missing-field-initializers
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
           -DGRIDNODE_WIRE_CHECK
CFLAGS  ?= -O2 -g
XCFLAGS := -std=c11 -D_GNU_SOURCE -pthread $(WARN) $(CFLAGS) $(DEP_CFLAGS) -I. -MMD -MP
PYTEST  := /usr/bin/python3 -m pytest

LIB_SRC := $(sort $(wildcard lib/*.c wire/*.c store/*.c daemon/*.c roles/*/*.c roles/*/*/*.c \
              cmd/*.c))
LIB_SRC := $(filter-out cmd/main.c,$(LIB_SRC))
UNIT    := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
BENCHES := $(patsubst bench/%.c,%,$(wildcard bench/*.c))

OBJ      := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))
ASAN_OBJ := $(patsubst %.c,$(BUILD)/asan/obj/%.o,$(LIB_SRC))

all: $(BUILD)/gridnode

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) -c -o $@ $<
$(BUILD)/asan/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(SAN) -c -o $@ $<

$(BUILD)/libgridnode.a: $(OBJ)
	rm -f $@; ar rcs $@ $^
$(BUILD)/asan/libgridnode.a: $(ASAN_OBJ)
	rm -f $@; ar rcs $@ $^

$(BUILD)/gridnode: $(BUILD)/obj/cmd/main.o $(BUILD)/libgridnode.a
	$(CC) $(XCFLAGS) -o $@ $^ $(DEP_LIBS)
$(BUILD)/asan/gridnode: $(BUILD)/asan/obj/cmd/main.o $(BUILD)/asan/libgridnode.a
	$(CC) $(XCFLAGS) $(SAN) -o $@ $^ $(DEP_LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libgridnode.a
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) -o $@ $^ $(DEP_LIBS) $(CMOCKA_LIBS)
$(BUILD)/asan/tests/%: $(BUILD)/asan/obj/tests/unit/%.o $(BUILD)/asan/libgridnode.a
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) $(SAN) -o $@ $^ $(DEP_LIBS) $(CMOCKA_LIBS)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BUILD)/libgridnode.a
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) -o $@ $^ $(DEP_LIBS)

# The user-space link emulator of tests/net (standalone: no library code).
$(BUILD)/net/linkemu: tests/net/linkemu.c
	@mkdir -p $(dir $@)
	$(CC) $(XCFLAGS) -o $@ $<

# Fuzz targets link only the code they exercise (the wire codec and its text helpers).
$(BUILD)/fuzz/%: fuzz/%.c $(wildcard wire/*.c) lib/text.c lib/constraint.c
	@mkdir -p $(dir $@)
	clang -std=c11 -D_GNU_SOURCE $(WARN) -O1 -g $(DEP_CFLAGS) -I. \
	    -fsanitize=fuzzer,address,undefined -o $@ $^ $(DEP_LIBS)

unit: $(addprefix $(BUILD)/tests/,$(UNIT)) $(addprefix $(BUILD)/asan/tests/,$(UNIT))
	@set -e; for t in $(UNIT); do \
	    echo "== $$t"; $(BUILD)/tests/$$t 2>&1; \
	    echo "== $$t (asan)"; $(BUILD)/asan/tests/$$t 2>&1; done

# The plain and the sanitizer run go at once (scripts/system.sh says why).
system: $(BUILD)/gridnode $(BUILD)/asan/gridnode
	BUILD=$(BUILD) bash scripts/system.sh

# tests/net: the grid across network namespaces joined by emulated links (root only;
# skipped with the reason otherwise). Plain binary only: they are about timing.
net: $(BUILD)/gridnode $(BUILD)/net/linkemu
	GRIDNODE_BIN=$(abspath $(BUILD)/gridnode) $(PYTEST) -q -p no:cacheprovider -rs tests/net

# The layer rule (docs/architecture.md): every include points down, and the pure folders
# (roles/*/engine, sim, emulate) call no socket, store or daemon code.
layers: all
	/usr/bin/python3 scripts/layers.py --objects $(BUILD)/obj

check: all layers format-check unit system net

# The README's test command: installs missing packages first (pkg-config must see
# them when make parses this file, hence the second make).
test:
	bash scripts/deps.sh
	$(MAKE) check

deps:
	bash scripts/deps.sh

# make demo DEMO_PORT=7600: the demo's first port (cluster managers P, P+1; batch roles
# P+100, P+101; meta P+200); each demo's results are kept in run/demo-<timestamp>/.
DEMO_PORT ?= 7300
demo: deps
	$(MAKE) all
	DEMO_PORT=$(DEMO_PORT) bash scripts/demo.sh

bench: all $(addprefix $(BUILD)/bench/,$(BENCHES)) $(BUILD)/net/linkemu
	@BUILD=$(BUILD) bash bench/run.sh

fuzz: $(BUILD)/fuzz/fuzz_wire
	@mkdir -p $(BUILD)/fuzz/corpus
	$(BUILD)/fuzz/fuzz_wire -max_total_time=$${FUZZ_SECONDS:-30} -rss_limit_mb=1024 \
	    $(BUILD)/fuzz/corpus fuzz/seeds

# Every C file of the tree: sources, headers, unit tests, benchmarks, fuzz targets.
FORMAT_MORE = $(wildcard */*.h roles/*/*.h roles/*/*/*.h tests/unit/*.[ch] bench/*.c fuzz/*.c)
format:
	clang-format -i $(LIB_SRC) cmd/main.c $(FORMAT_MORE)
format-check:
	clang-format --dry-run --Werror $(LIB_SRC) cmd/main.c $(FORMAT_MORE)

# The pictures of docs/architecture.md are drawn from their sources, docs/*.dot. The SVGs
# are committed, so only whoever changes a picture needs Graphviz (apt-get install graphviz).
DOCS_DOT := $(wildcard docs/*.dot)
docs:
	@if command -v dot >/dev/null 2>&1; then \
	    for f in $(DOCS_DOT); do dot -Tsvg $$f -o $${f%.dot}.svg && echo "docs: $${f%.dot}.svg"; \
	    done; \
	else \
	    echo "docs: Graphviz (dot) is not installed: the committed docs/*.svg are left as they are"; \
	fi

# Man pages come from the binary's own help texts (scripts/mkman.sh), so they are
# regenerated whenever the binary changes.
$(BUILD)/man/gridnode.1: $(BUILD)/gridnode scripts/mkman.sh
	rm -rf $(BUILD)/man
	bash scripts/mkman.sh $(BUILD)/gridnode $(BUILD)/man
man: $(BUILD)/man/gridnode.1

# make install [PREFIX=/usr/local] [DESTDIR=]: the binary, its man pages, the example
# configurations and the documentation; `make uninstall` removes exactly those.
DOCDIR = $(DESTDIR)$(PREFIX)/share/doc/gridnode
install: all man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DOCDIR)/examples
	install -m 0755 $(BUILD)/gridnode $(DESTDIR)$(PREFIX)/bin/gridnode
	install -m 0644 $(BUILD)/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 configs/*.ini $(DOCDIR)/examples/
	install -m 0644 README.md docs/*.md docs/*.svg $(DOCDIR)/
	@echo "installed gridnode in $(DESTDIR)$(PREFIX) (try: man gridnode, gridnode help)"
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/gridnode $(DESTDIR)$(PREFIX)/share/man/man1/gridnode.1 \
	    $(DESTDIR)$(PREFIX)/share/man/man1/gridnode-*.1
	rm -rf $(DOCDIR)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
.PHONY: all layers unit system net check test deps demo bench fuzz format format-check clean man install uninstall \
    docs
.SECONDARY:
