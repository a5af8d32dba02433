# DPP NetApp top-level targets. `make demo` and `make test` are the README's two commands; both
# install what they need (Debian packages, a Python virtualenv) and are safe to run again.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := clang llvm libbpf-dev bpftool libxdp-dev iproute2 gcc make pkg-config \
	libelf-dev zlib1g-dev python3 python3-venv python3-pip procps
PYTEST_ARGS ?=
# InfluxDB 1.8 for the telemetry demo, tests and benchmarks, built from source with `go install`
# (Debian 12's golang-go, Go 1.19, builds it): no binary download, only the Go module proxy.
INFLUXDB_VERSION := v1.8.10
INFLUXD := .tools/bin/influxd

.PHONY: all deps system-deps python-deps build demo test package bench-dataplane bench-api bench-throughput influxd clean

all: build

deps: system-deps python-deps

# Installs only what is missing, so a second run costs no network round trip.
system-deps:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(VENV)/.installed: pyproject.toml | system-deps
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]'
	touch $@

python-deps: $(VENV)/.installed

build: system-deps
	$(MAKE) -C dataplane

demo: build python-deps influxd
	$(VENV)/bin/netapp demo

test: build python-deps influxd
	$(PY) -m pytest $(PYTEST_ARGS) tests

# dist/: the Juju charm (dpp-netapp.charm) and the OSM packages (dpp-netapp_vnf.tar.gz,
# dpp-netapp_ns.tar.gz); pip downloads the charm's dependencies for its base (Python 3.12).
package: python-deps
	$(PY) -m netapp.packaging --out dist $(if $(IMAGE),--image $(IMAGE))

bench-dataplane: build python-deps
	$(PY) -m bench.dataplane --out bench/results/dataplane.json

# Root: a million rules per instance, every repetition another flow of N (about 10 minutes).
.PHONY: bench-flows
bench-flows: build python-deps
	$(PY) -m bench.flows --out bench/results/flows.json

# Root: steer and forward with the CPUMAP enqueue and the transmit carried out (live frames).
.PHONY: bench-live
bench-live: build python-deps
	$(PY) -m bench.live --out bench/results/live.json

bench-api: build python-deps
	$(PY) -m bench.api --out bench/results/api.json

.PHONY: bench-telemetry
bench-telemetry: build python-deps influxd
	$(PY) -m bench.telemetry --out bench/results/telemetry.json

# Root: network namespaces, XDP, live-frame test runs. Extra options: THROUGHPUT_ARGS="--quick".
bench-throughput: build python-deps
	$(PY) -m bench.throughput --out bench/results/throughput.json $(THROUGHPUT_ARGS)

# Root: the real program against the reference parser and classifier. Size: FUZZ_PACKETS=N.
FUZZ_PACKETS ?= 100000
.PHONY: bench-fuzz
bench-fuzz: build python-deps
	$(PY) -m bench.fuzz --packets $(FUZZ_PACKETS)

# The recipe keeps a second run silent (no "Nothing to be done").
influxd: $(INFLUXD)
	@:

# Uses the first Go found: on PATH, then the official tarball's /usr/local/go; else installs
# golang-go. A build takes about a minute and leaves the modules in Go's cache (~/go/pkg/mod).
$(INFLUXD):
	@set -e; \
	go=$$(command -v go || ls /usr/local/go/bin/go 2>/dev/null || true); \
	if [ -z "$$go" ]; then \
		echo "installing golang-go (Go, to build influxd)"; \
		apt-get update -qq; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go; \
		go=/usr/bin/go; \
	fi; \
	echo "building InfluxDB $(INFLUXDB_VERSION) into $@ with $$($$go version)"; \
	mkdir -p $(@D) && GOBIN=$(abspath $(@D)) $$go install github.com/influxdata/influxdb/cmd/influxd@$(INFLUXDB_VERSION)

clean:
	$(MAKE) -C dataplane clean
	rm -rf $(VENV)
