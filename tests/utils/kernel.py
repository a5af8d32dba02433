"""What kernel-backed tests need, and how they skip when it is missing.

Tests that load BPF programs or build network namespaces need root. Outside CI they skip with the
reason; under CI (CI=true, which runs as root) a missing requirement is a failure, so a green CI
always means they ran.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest

from netapp.dataplane import binding
from netapp.testbed import netns
from netapp.testbed.topology import EdgeSite


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (BPF_PROG_TEST_RUN, XDP attach, network namespaces)"
    try:
        binding.find_libdpp()
    except binding.LibraryNotFoundError as exc:
        return f"libdpp is not built: {exc.hint}"
    if not shutil.which("ip"):
        return "needs iproute2 (`ip`)"
    return None


def require_kernel() -> None:
    reason = _missing()
    if reason is not None:
        skip_or_fail(reason)


def skip_or_fail(reason: str, what: str = "run kernel tests") -> None:
    """A skip with `reason` outside CI; a failure under CI, which installs what every test needs."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must {what}, but: {reason}")
    pytest.skip(reason)


def build_artifact(name: str) -> Path:
    """A file built by `make -C dataplane` (BPF objects, tools), next to libdpp.so."""
    path = Path(binding.find_libdpp()).parent / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make -C dataplane`")
    return path


@contextlib.contextmanager
def veth_namespace(prefix: str, ifname: str, peer: str, indexes: Optional[tuple[int, int]] = None) -> Iterator[str]:
    """A namespace of its own holding the veth pair ifname <-> peer, both up (`indexes`: their
    ifindexes, else the kernel's choice); removed (with everything attached to the pair) whatever the
    block did."""
    require_kernel()
    name = f"{prefix}-{secrets.token_hex(3)}"
    given = (["index", str(indexes[0])], ["index", str(indexes[1])]) if indexes is not None else ([], [])
    try:
        netns.add_namespace(name)
        netns.run(["ip", "-n", name, "link", "add", ifname, *given[0], "type", "veth", "peer", "name", peer, *given[1]])
        for end in (ifname, peer):
            netns.run(["ip", "-n", name, "link", "set", end, "up"])
        yield name
    finally:
        netns.delete_namespace(name)


@contextlib.contextmanager
def addresses_namespace(prefix: str, addresses: list[str]) -> Iterator[str]:
    """A namespace of its own whose interface `access` (a veth's end: the kernel may lack the dummy
    device) holds `addresses` (IPv4 and IPv6): a node's own addresses, for a service given it as
    its netns (what a path's local or a tunnel's source may be); removed whatever the block did."""
    require_kernel()
    name = f"{prefix}-{secrets.token_hex(3)}"
    try:
        netns.add_namespace(name)
        netns.sysctl(name, "net.ipv6.conf.all.disable_ipv6", 0)
        netns.sysctl(name, "net.ipv6.conf.default.disable_ipv6", 0)
        netns.run(["ip", "link", "add", "access", "type", "veth", "peer", "name", "accessp"], netns=name)
        netns.run(["ip", "link", "set", "access", "up"], netns=name)
        for address in addresses:
            length = 32 if "." in address else 128
            netns.run(["ip", "addr", "add", f"{address}/{length}", "dev", "access", "nodad"], netns=name)
        yield name
    finally:
        netns.delete_namespace(name)


@contextlib.contextmanager
def edge_site_with_alternative() -> Iterator[EdgeSite]:
    """A built edge site (netapp.testbed.topology) whose alternative node receives what the node
    forwards to it: frames redirected into a veth are only received when its peer runs XDP, so alt0
    runs xdp_pass. Removed, namespaces and all, whatever the block did."""
    require_kernel()
    with EdgeSite() as site:
        netns.attach_xdp_object(site.ns("alt"), site.alt0.ifname, str(build_artifact("xdp_pass.bpf.o")))
        yield site


def xdp_program_on(netns: str, ifname: str) -> Optional[int]:
    """The id of the XDP program attached to `ifname` in `netns` as `ip link` reports it; None: none."""
    import json

    from netapp.testbed import netns as ns

    (link,) = json.loads(ns.run(["ip", "-j", "-d", "link", "show", "dev", ifname], netns=netns))
    xdp = link.get("xdp") or {}
    prog = xdp.get("prog") or next(iter(xdp.get("attached", [])), {})
    return prog.get("id")


def pin_dir(instance: str) -> Path:
    """Where a named instance keeps its pins (program, maps, links)."""
    return Path(binding.PIN_ROOT) / instance


@pytest.fixture
def one_cpu():
    """This thread on one CPU: the route cache is per CPU, and a test run runs on the caller's."""
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cpus)
