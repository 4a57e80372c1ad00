# hookstamp: `make run` to try it, `make test` to test everything.
SHELL := /bin/bash
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
PYTEST := python3 -m pytest

.PHONY: all help setup setup-run build wasm dynamic-module image lint fmt check test test-native test-e2e run bench bench-native bench-flood bench-envoy noop fuzz fuzz-short soak soak-short soak-attack soak-attack-short clean

all: build wasm

help:                  ## this list
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9-]+):[^#]*## /\1\t/' | \
	  awk -F '\t' '{ printf "  make %-18s %s\n", $$1, $$2 }'
	@echo
	@echo "make run reads (see scripts/run.sh):"
	@echo "  HOOKSTAMP_CONFIG=FILE   your plugin configuration (JSON or YAML) or a whole Envoy bootstrap,"
	@echo "                          checked with hookstamp check first (envoy/examples/verified.yaml)"
	@echo "  secrets                 each {\"env\": NAME} of a verify or seal: export NAME; the VM gets it"
	@echo "                          through host_env_keys, so no value is in the bootstrap"
	@echo "  HOOKSTAMP_ENV_KEYS=A,B  more variables for the VM"
	@echo "  HOOKSTAMP_BOOTSTRAP=P   where the generated bootstrap goes (target/run/envoy.yaml);"
	@echo "                          scripts/run.sh --print prints it and starts nothing"
	@echo "  HOOKSTAMP_PORT, HOOKSTAMP_ADMIN_PORT, HOOKSTAMP_UPSTREAM_PORT   10000, 9901, 8080"
	@echo "make image reads SOURCE_DATE_EPOCH (default 0): the same module gives the same digest."

setup:                 ## install what a fresh machine lacks: the toolchain, Envoy and every test tool
	scripts/setup.sh test

setup-run:             ## install only what make run needs: the wasm toolchain, Envoy, PyYAML
	scripts/setup.sh run

build:                 ## the native harness: target/release/hookstamp
	cargo build --release

wasm: setup-run        ## the filter: target/hookstamp.wasm
	scripts/build-wasm.sh

dynamic-module:        ## the filter as an Envoy dynamic module (1.38-1.40): target/libhookstamp.so
	@# Linked with identical code folding (rust-lld, the toolchain's linker
	@# here): about 67 KiB of the .so is functions that generics made the
	@# same; BENCHMARKS.md has the size each way.
	cargo rustc --profile dynmod --lib --crate-type cdylib --features dynamic-module -- -C link-arg=-Wl,--icf=all
	@# A new file renamed into place: an Envoy that has the old one loaded keeps it.
	cp target/dynmod/libhookstamp.so target/libhookstamp.so.new
	mv target/libhookstamp.so.new target/libhookstamp.so
	@echo "built target/libhookstamp.so ($$(stat -c %s target/libhookstamp.so) bytes)"

fmt:                   ## rustfmt over every crate
	cargo fmt
	cd fuzz && cargo fmt
	cd benches/noop-filter && cargo fmt

lint: setup            ## rustfmt, and clippy with warnings denied (native, dynamic module and wasm glue)
	cargo fmt --check
	cd fuzz && cargo fmt --check
	cd benches/noop-filter && cargo fmt --check && cargo clippy --lib -- -D warnings
	cargo clippy --all-targets -- -D warnings
	cargo clippy --lib --features dynamic-module -- -D warnings
	cargo clippy --features dynamic-module --test dynmod_life -- -D warnings
	scripts/build-wasm.sh clippy

test-native:           ## the core, the case table and the config error table
	cargo test
	cargo test --features dynamic-module --test dynmod_life

test-e2e: setup wasm dynamic-module noop   ## the same case table through a real Envoy with the built .wasm and .so, and the attacks
	scripts/build-wasm.sh crash
	cargo build
	cargo build --release --bin hookstamp   # the binary the docs' examples run (tests/e2e/test_docs.py)
	cd tests/e2e && $(PYTEST) -q -p no:cacheprovider

test: lint test-native fuzz-short soak-short soak-attack-short test-e2e   ## everything; fails if Envoy is missing

check: lint test-native test-e2e   ## the quick local loop: lint and both suites, without fuzz and soak

run: wasm              ## build, then start the demo upstream and Envoy on 127.0.0.1:10000 (HOOKSTAMP_CONFIG=FILE: yours)
	scripts/run.sh

image: wasm            ## target/oci: an OCI image of the filter (one layer, plugin.wasm), reproducible, built with umoci
	scripts/setup.sh image
	scripts/image.sh

bench: bench-native bench-flood bench-envoy   ## every benchmark table, in one command

bench-native:          ## the core vs a full serde_json decode, side by side
	cargo bench --bench core

bench-flood:           ## forged requests one worker's core refuses a second per scheme, beside valid ones
	cargo bench --bench requests -- flood $(or $(FLOOD_REQUESTS),5000)

noop:                  ## the empty filter, .wasm and .so (benches/noop-filter): the bench's floors and (c)'s twins
	scripts/build-wasm.sh noop
	cd benches/noop-filter && cargo build --release --lib && cp target/release/libnoop_filter.so ../../target/libnoop.so

bench-envoy: setup wasm dynamic-module noop   ## Envoy without a filter, with an empty one, with hookstamp's .wasm and .so: wrk and callgrind
	command -v wrk >/dev/null && command -v valgrind >/dev/null || \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq wrk valgrind; }
	cd tests/e2e && python3 bench_envoy.py

fuzz:                  ## each fuzz target for FUZZ_SECONDS (default 60), seeded from the case tables
	scripts/fuzz.sh $(or $(FUZZ_SECONDS),60)

fuzz-short:            ## the short fuzz run that make test includes
	scripts/fuzz.sh 10

soak: setup wasm       ## 200 000 mixed requests at 64 connections through Envoy: nothing lost
	cargo build
	cd tests/e2e && python3 soak.py --requests $(or $(SOAK_REQUESTS),200000) --conns 64

soak-short: setup wasm dynamic-module   ## the short soak that make test includes, with the .wasm and the .so
	cargo build
	cd tests/e2e && python3 soak.py --requests 20000 --conns 64
	cd tests/e2e && HOOKSTAMP_BUILD=dynmod python3 soak.py --requests 20000 --conns 64

soak-attack: setup wasm   ## deliveries while an attacker mix holds several budgets: >= 99 % stamped first try
	cargo build
	cd tests/e2e && python3 soak_attack.py --seconds $(or $(SOAK_SECONDS),60)

soak-attack-short: setup wasm   ## the short adversarial soak that make test includes
	cd tests/e2e && python3 soak_attack.py --seconds 20

clean:                 ## remove the build outputs
	cargo clean
	cd benches/noop-filter && cargo clean
