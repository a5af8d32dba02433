# DPP NetApp top-level targets. `make demo` and `make test` are the README's two commands; both
# install what they need (Debian packages, a Python virtualenv) and are safe to run again.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
APT_PACKAGES := clang llvm libbpf-dev bpftool libxdp-dev iproute2 gcc make pkg-config \
	libelf-dev zlib1g-dev python3 python3-venv python3-pip procps
PYTEST_ARGS ?=

.PHONY: all deps system-deps python-deps build demo test bench-dataplane bench-api clean

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

demo: build python-deps
	$(VENV)/bin/netapp demo

test: build python-deps
	$(PY) -m pytest $(PYTEST_ARGS) tests

bench-dataplane: build python-deps
	$(PY) -m bench.dataplane --out bench/results/dataplane.json

bench-api: build python-deps
	$(PY) -m bench.api --out bench/results/api.json

clean:
	$(MAKE) -C dataplane clean
	rm -rf $(VENV)
