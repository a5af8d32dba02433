"""Maps of another layout pinned in place of an instance's, as a build with another ABI left them: a
hand-written object declaring one map (a struct of the ABI headers, edited) is compiled and loaded by
bpftool, which creates the map with the object's BTF, and its map is pinned where the instance's
was. Its values are written through the pin, as the build that created it would have."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from netapp.dataplane import abi
from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane

PIN_ROOT = Path(abi.PIN_ROOT)
DATAPLANE = Path(__file__).resolve().parents[2] / "dataplane"
INCLUDE = DATAPLANE / "include" / "dpp"

# One array map of a struct, and an XDP program that uses it (bpftool loads a map with a program).
HAND_MAP_C = """\
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {NAME}_other {{{BODY}}};

struct {{
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, {ENTRIES});
	__uint(map_flags, {FLAGS});
	__type(key, __u32);
	__type(value, struct {NAME}_other);
}} {NAME} SEC(".maps");

SEC("xdp")
int uses_the_map(struct xdp_md *ctx)
{{
	__u32 key = 0;

	return bpf_map_lookup_elem(&{NAME}, &key) ? XDP_PASS : XDP_DROP;
}}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
"""


def struct_body(header: str, struct: str) -> str:
    """The members of `struct <struct> { ... };` in dataplane/include/dpp/<header>."""
    text = (INCLUDE / header).read_text()
    return re.search(rf"^struct {struct} \{{(.*?)^\}};", text, re.S | re.M).group(1)


def header_define(header: str, name: str) -> str:
    return re.search(rf"#define {name} (\w+)", (INCLUDE / header).read_text()).group(1)


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is needed to pin a map of another layout")
    return found


def pin_hand_map(instance: str, tmp_path: Path, name: str, body: str, entries: int | str = 1,
                 flags: str = "0") -> None:
    """Compile an object whose map `name` holds `struct { body }` and put that map where the
    instance's `name` is pinned, with its BTF, which may be all that tells it apart."""
    clang, bpftool = tool("clang"), tool("bpftool")
    source = tmp_path / f"{name}.bpf.c"
    source.write_text(HAND_MAP_C.format(NAME=name, BODY=body, ENTRIES=entries, FLAGS=flags))
    obj = tmp_path / f"{name}.bpf.o"
    multiarch = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True, check=True)
    subprocess.run(
        [clang, "-O2", "-g", "-target", "bpf", f"-I/usr/include/{multiarch.stdout.strip()}",
         "-c", str(source), "-o", str(obj)],
        check=True,
        capture_output=True,
    )
    loaded = PIN_ROOT / f"{instance}-{name}"
    pin = PIN_ROOT / instance / "maps" / name
    try:
        subprocess.run([bpftool, "prog", "loadall", str(obj), str(loaded), "pinmaps", str(loaded)],
                       check=True, capture_output=True)
        pin.unlink()
        subprocess.run([bpftool, "map", "pin", "pinned", str(loaded / name), str(pin)],
                       check=True, capture_output=True)
    finally:
        shutil.rmtree(loaded, ignore_errors=True)


def write_pinned(instance: str, name: str, key: bytes, value: bytes) -> None:
    """One element of the instance's pinned map `name`, written as raw bytes."""
    subprocess.run([tool("bpftool"), "map", "update", "pinned", str(PIN_ROOT / instance / "maps" / name),
                    "key", "hex", *key.hex(" ").split(), "value", "hex", *value.hex(" ").split()],
                   check=True, capture_output=True)


def refused_on_reopen_and_upgrade(instance: str) -> tuple[DataplaneError, subprocess.CompletedProcess]:
    """The instance opened (refused: the error) and upgraded by `dppctl upgrade` (its run), then
    unpinned, as the refusal asks."""
    with pytest.raises(DataplaneError) as refused:
        Dataplane.open(instance=instance)
    upgrade = subprocess.run([str(DATAPLANE / "build" / "dppctl"), "-n", instance, "upgrade"], capture_output=True,
                             text=True, check=False, env={**os.environ, "LC_ALL": "C"})
    shutil.rmtree(PIN_ROOT / instance)  # pinned_instance then unpins what a new load leaves
    return refused.value, upgrade
