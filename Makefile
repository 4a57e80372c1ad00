# hookstamp: `make run` to try it, `make test` to test everything.
SHELL := /bin/bash
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
PYTEST := python3 -m pytest

.PHONY: all help setup build wasm image lint fmt check test test-native test-e2e run bench bench-native bench-envoy fuzz fuzz-short soak soak-short soak-attack soak-attack-short clean

all: build wasm

help:                  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):[^#]*## /  make \1\t/' | expand -t 24

setup:                 ## install what a fresh machine lacks (toolchain, Envoy, test tools)
	scripts/setup.sh

build:                 ## the native harness: target/release/hookstamp
	cargo build --release

wasm: setup            ## the filter: target/hookstamp.wasm
	scripts/build-wasm.sh

fmt:                   ## rustfmt over every crate
	cargo fmt
	cd fuzz && cargo fmt
	cd benches/noop-filter && cargo fmt

lint: setup            ## rustfmt, and clippy with warnings denied (native and wasm glue)
	cargo fmt --check
	cd fuzz && cargo fmt --check
	cd benches/noop-filter && cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	scripts/build-wasm.sh clippy

test-native:           ## the core, the case table and the config error table
	cargo test

test-e2e: wasm         ## the same case table through a real Envoy with the built .wasm, and the attacks
	scripts/build-wasm.sh crash
	cargo build
	cd tests/e2e && $(PYTEST) -q -p no:cacheprovider

test: lint test-native fuzz-short soak-short soak-attack-short test-e2e   ## everything; fails if Envoy is missing

check: lint test-native test-e2e   ## the quick local loop: lint and both suites, without fuzz and soak

run: wasm              ## build, then start the demo upstream and Envoy on 127.0.0.1:10000
	scripts/run.sh

image: wasm            ## target/oci: an OCI image of the filter (one layer, plugin.wasm), built with umoci
	scripts/image.sh

bench: bench-native bench-envoy   ## both benchmark tables, in one command

bench-native:          ## the core vs a full serde_json decode, side by side
	cargo bench --bench core

bench-envoy: wasm      ## Envoy without a filter, with an empty one and with hookstamp: wrk and callgrind
	scripts/build-wasm.sh noop
	command -v wrk >/dev/null && command -v valgrind >/dev/null || \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq wrk valgrind; }
	cd tests/e2e && python3 bench_envoy.py

fuzz:                  ## each fuzz target for FUZZ_SECONDS (default 60), seeded from the case tables
	scripts/fuzz.sh $(or $(FUZZ_SECONDS),60)

fuzz-short:            ## the short fuzz run that make test includes
	scripts/fuzz.sh 10

soak: wasm             ## 200 000 mixed requests at 64 connections through Envoy: nothing lost
	cargo build
	cd tests/e2e && python3 soak.py --requests $(or $(SOAK_REQUESTS),200000) --conns 64

soak-short: wasm       ## the short soak that make test includes
	cargo build
	cd tests/e2e && python3 soak.py --requests 20000 --conns 64

soak-attack: wasm      ## deliveries while an attacker mix holds several budgets: >= 99 % stamped first try
	cargo build
	cd tests/e2e && python3 soak_attack.py --seconds $(or $(SOAK_SECONDS),60)

soak-attack-short: wasm   ## the short adversarial soak that make test includes
	cd tests/e2e && python3 soak_attack.py --seconds 20

clean:                 ## remove the build outputs
	cargo clean
	cd benches/noop-filter && cargo clean
