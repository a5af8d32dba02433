# DPP NetApp top-level targets. `make demo` and `make test` are the README's two commands; both
# install what they need (Debian packages, a Python virtualenv) and are safe to run again. Their
# setup steps are numbered ([2/5]), say what runs and how long it took (scripts/step); a target made
# on its own shows its steps unnumbered.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# prometheus: the server and promtool the tests and the demo run with configs of their own
# (never the system service its package installs).
APT_PACKAGES := clang llvm libbpf-dev bpftool libxdp-dev iproute2 gcc make pkg-config \
	libelf-dev zlib1g-dev python3 python3-venv python3-pip procps prometheus
# What only the tests and benchmarks need, so the demo does not install it. tshark: Wireshark's
# dissectors judge the frames the data path builds (tests/atsss/tshark.py: DCCP header, options and
# checksum). qemu-system-x86, busybox-static and linux-image-amd64 (Debian 12's kernel, 6.1, in
# /boot: what a Debian 12 machine boots already): tests/dataplane/test_old_kernel.py boots it under
# qemu and loads every program there (bench/kernels); zstd unpacks the veth module of Ubuntu 24.04's
# kernel for it.
TEST_APT_PACKAGES := tshark qemu-system-x86 busybox-static linux-image-amd64 zstd
PYTEST_ARGS ?=
# Options of `netapp demo`, e.g. DEMO_ARGS="--duration 60".
DEMO_ARGS ?=
# InfluxDB 1.8 for the telemetry demo, tests and benchmarks, built from source with `go install`
# (Debian 12's golang-go, Go 1.19, builds it): no binary download, only the Go module proxy. The
# build is kept outside the clone (scripts/influxd: $INFLUXD_CACHE, else ~/.cache/dpp-netapp) and
# .tools/bin/influxd links to it.
INFLUXDB_VERSION := v1.8.10
INFLUXD := .tools/bin/influxd

SETUP_START := $(shell date +%s)
STEPS :=
demo: STEPS := 5
test: STEPS := 6
# $(call step,N): scripts/step, numbered N of $(STEPS) when there are steps to count.
step = scripts/step$(if $(STEPS), -n $(1)/$(STEPS))

.PHONY: all deps system-deps python-runtime python-test python-deps build demo test package bench-dataplane bench-api bench-throughput influxd kernels clean

all: build

deps: system-deps python-deps

# A target-specific value reaches the target's prerequisites: `make test` and `make deps` install the
# test packages too; `make demo`, `make build` and the bench-* targets do not (bench/kernels, which
# boots qemu, has no target: its README section names what it needs).
test deps: APT_PACKAGES += $(TEST_APT_PACKAGES)

# Installs only what is missing, so a second run costs no network round trip.
system-deps:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -z "$$missing" ]; then \
		$(call step,1) "Debian packages: all $(words $(APT_PACKAGES)) installed"; \
	else \
		$(call step,1) -t "a few minutes, once" "installing Debian packages: $$(echo $$missing)" \
			$(SHELL) -c 'apt-get -q update && DEBIAN_FRONTEND=noninteractive apt-get -q install -y "$$@"' \
			apt-get $$missing; \
	fi

# One virtualenv, .venv, holds the package (editable) and what the target at hand needs: the
# runtime dependencies alone for the demo and packaging, the test extra for the tests, test and
# bench for the benchmarks. A stamp per part says it is in: .installed (the runtime), .installed-test.
python-runtime: EXTRAS :=
python-runtime: ESTIMATE := about 30 s, once
python-test: EXTRAS := test
python-test: ESTIMATE := about a minute, once
python-deps: EXTRAS := test,bench
python-deps: ESTIMATE := about a minute and a half, once
comma := ,
stamps = $(VENV)/.installed $(foreach extra,$(subst $(comma), ,$(EXTRAS)),$(VENV)/.installed-$(extra))
python-runtime python-test python-deps: system-deps
	@what="Python packages in $(VENV): dpp-netapp$(if $(EXTRAS),[$(EXTRAS)]) and its dependencies"; \
	stale=; for stamp in $(stamps); do [ -e $$stamp ] && ! [ pyproject.toml -nt $$stamp ] || stale=1; done; \
	if [ -z "$$stale" ]; then \
		$(call step,3) "$$what: up to date"; \
	else \
		$(call step,3) -t "$(ESTIMATE)" "installing $$what" $(SHELL) -c '\
			python3 -m venv $(VENV) && \
			$(PY) -m pip install --upgrade pip && \
			$(PY) -m pip install -e ".$(if $(EXTRAS),[$(EXTRAS)])"' && \
		touch $(stamps); \
	fi

build: system-deps
	@if $(MAKE) --no-print-directory -q -C dataplane; then \
		$(call step,2) "data plane in dataplane/build: up to date"; \
	else \
		$(call step,2) -t "about 10 s" "building the data plane (C and BPF) into dataplane/build" \
			$(MAKE) --no-print-directory -C dataplane; \
	fi

demo: build python-runtime influxd
	@$(call step,5) -s $(SETUP_START) -x "starting the demo: Ctrl-C stops it and removes what it made" \
		$(VENV)/bin/netapp demo $(DEMO_ARGS)

# The test files run in TEST_WORKERS processes (default: one per CPU), a whole file in one worker, so a
# file's module fixtures (namespaces, pinned instances, servers) are made once; TEST_WORKERS=0 runs
# everything in this process.
TEST_WORKERS ?= $(shell nproc)
test: build python-test influxd kernels
	@$(call step,6) -s $(SETUP_START) -x "running the tests in $(TEST_WORKERS) workers (about 25 minutes on two CPUs; the slowest 25 are listed at the end)" \
		$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25 $(PYTEST_ARGS) tests

# dist/: the Juju charm (dpp-netapp.charm), the OSM packages (dpp-netapp_vnf.tar.gz,
# dpp-netapp_ns.tar.gz) and the SOL004 CSAR for ONAP (dpp-netapp.csar). The charm carries wheels/:
# the NetApp's wheel (setup.py builds libdpp.so and the BPF objects into it) and its dependencies as
# wheels, with a hash-pinned requirements.txt, which the charm installs from without an index. pip
# downloads those and the charm's own venv for its base (ubuntu@24.04: Python 3.12);
# PACKAGE_PYTHON=3.11 builds for another Python. IMAGE=file writes that VM image's SHA-256 and size
# into the packaged VNFD.
PACKAGE_PYTHON ?=
package: python-runtime
	$(PY) -m netapp.packaging --out dist $(if $(IMAGE),--image $(IMAGE)) \
		$(if $(PACKAGE_PYTHON),--python-version $(PACKAGE_PYTHON))

bench-dataplane: build python-deps
	$(PY) -m bench.dataplane --out bench/results/dataplane.json

# Root: a million rules per instance, every repetition another flow of N (about 10 minutes).
.PHONY: bench-flows
bench-flows: build python-deps
	$(PY) -m bench.flows --out bench/results/flows.json

# Root: the UPF's uplink, downlink, N9 and miss at 1 and 1M sessions (about two minutes).
.PHONY: bench-upf
bench-upf: build python-deps
	$(PY) -m bench.upf --out bench/results/upf.json

# Root: the policers, each algorithm passing and dropping, 1 to 1M policers (about five minutes).
.PHONY: bench-qos
bench-qos: build python-deps
	$(PY) -m bench.qos --out bench/results/qos.json

.PHONY: bench-frer
bench-frer: build python-deps
	$(PY) -m bench.frer --out bench/results/frer.json

.PHONY: bench-atsss
bench-atsss: build python-deps
	$(PY) -m bench.atsss --out bench/results/atsss.json
.PHONY: bench-routing
bench-routing: build python-deps
	$(PY) -m bench.routing --out bench/results/routing.json

.PHONY: bench-mec
bench-mec: build python-deps
	$(PY) -m bench.mec --out bench/results/mec.json

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

# Links .tools/bin/influxd to the cached build, building it first when the cache has none.
influxd:
	@$(call step,4) -t "cached, or built once in 1-2 minutes" "InfluxDB $(INFLUXDB_VERSION) for the telemetry" \
		scripts/influxd $(INFLUXDB_VERSION) $(INFLUXD)

# The kernels tests/dataplane/test_old_kernel.py boots under qemu beside Debian 12's own 6.1: Debian
# 12's backported 6.12 (bookworm-backports), Ubuntu 24.04's 6.8 and HWE 6.11, 22.04's HWE 6.5,
# which must take the data path, and 22.04's 5.15 and HWE 5.19, which must be refused (22.04's HWE
# 6.2 is booted only when asked: the test's SLOW_KERNELS). Unpacked into a cache outside the clone
# (scripts/fetch-kernel: $KERNELS_CACHE, else ~/.cache/dpp-netapp/kernels), not installed, no apt
# source added to the machine's.
KERNELS := "debian 6.12 bookworm-backports" "ubuntu 6.11 noble-updates" "ubuntu 6.8 noble-updates" \
	"ubuntu 6.5 jammy-updates" "ubuntu 5.15 jammy-updates" "ubuntu 5.19 jammy-updates"
kernels:
	@$(call step,5) -t "cached, or about 350 MB fetched once" "kernels for the old-kernel test: Debian 12's 6.12, Ubuntu's 6.11, 6.8, 6.5, 5.19 and 5.15" \
		$(SHELL) -c 'for kernel in $(KERNELS); do scripts/fetch-kernel $$kernel || exit; done'

# Leaves the cached influxd (scripts/influxd), so the next setup links it again instead of building.
clean:
	$(MAKE) -C dataplane clean
	rm -rf $(VENV) .tools
