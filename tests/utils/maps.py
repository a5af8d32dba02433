"""What the kernel holds, seen through a second handle on a pinned instance (as another process
would see it), compared with what a service's stored intents compile to."""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any, Mapping, Optional

from bench.libbpf import map_fd_by_id
from netapp.core.netns import entered
from netapp.dataplane import binding
from netapp.dataplane.binding import rule_key, rule_value, shape_to_c, struct_bytes
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.handle import fdinfo
from netapp.intents.compiler import compile_intent, order_shapes, shape_maxima
from netapp.intents.models import Intent
from netapp.service.service import rule_id
from netapp.service.store import Store


@contextlib.contextmanager
def pinned_instance(prefix: str, netns: Optional[str] = None) -> Iterator[str]:
    """A pinned instance name of one test; its pins and links go whatever happened. `netns`: where
    its links live (the kernel resolves them in the caller's namespace)."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    try:
        yield name
    finally:
        with entered(netns) if netns else contextlib.nullcontext():
            leftover = Dataplane.open(instance=name)
            leftover.unpin()
            leftover.close()


def second_handle(instance: str) -> binding.DppHandle:
    """Another process's view of the pinned instance, below the facade."""
    return binding.DppHandle.open(binding.load_libdpp(), instance)


def map_rules(instance: str) -> dict[bytes, binding.Rule]:
    """dpp_rules as the kernel holds it: key bytes -> rule (a key dumped twice would be a bug)."""
    handle = second_handle(instance)
    try:
        dumped = handle.rules_dump()
    finally:
        handle.close()
    rules = {struct_bytes(key): rule for key, rule in dumped}
    assert len(rules) == len(dumped), "dpp_rules dumped a key twice"
    return rules


def unlike_the_store(
    rules: Mapping[bytes, binding.Rule], records: list[dict[str, Any]], interfaces: Mapping[str, int]
) -> list[str]:
    """How the maps differ from what the stored intents (REST records) compile to, each named
    `<tenant>/<id>` as the service names it. The stat slot is the service's to choose; everything
    else must be equal, and no two rules may share a slot. Empty: they agree."""
    problems, expected = [], set()
    for record in records:
        intent = Intent.model_validate(record["intent"])
        name = f"{record['tenant']}/{intent.id}"
        rule = compile_intent(intent, dict(interfaces), name)
        key = struct_bytes(rule_key(rule))
        expected.add(key)
        installed = rules.get(key)
        if installed is None:
            problems.append(f"{name}: not in dpp_rules")
        elif struct_bytes(installed) != struct_bytes(rule_value(rule, slot=installed.slot)):
            problems.append(f"{name}: installed with another value")
    problems += [f"a rule nobody stored (slot {rules[key].slot})" for key in rules.keys() - expected]
    slots = [rule.slot for rule in rules.values()]
    if len(set(slots)) != len(slots):
        problems.append("two rules share a stat slot")
    return problems


def compiled_store(
    store: Store, interfaces: Optional[Mapping[str, int]] = None
) -> tuple[set[bytes], list[bytes]]:
    """The rule keys and the published shape set that a store's intents compile to (`interfaces`:
    name -> ifindex, for intents that match on one)."""
    rules = [
        compile_intent(record.intent, dict(interfaces or {}), rule_id(record.tenant, record.intent.id))
        for record in store.all_intents()
    ]
    shapes, maxima = order_shapes(shape_maxima(rules))
    return {struct_bytes(rule_key(rule)) for rule in rules}, [
        struct_bytes(shape_to_c(shape, top)) for shape, top in zip(shapes, maxima, strict=True)
    ]


def assert_maps_hold_the_store(
    service: Any, instance: str, interfaces: Optional[Mapping[str, int]] = None
) -> None:
    """The pinned instance's rules and active shapes, read through a handle of its own, are what
    the service's stored intents compile to, and the service's view agrees."""
    keys, shapes = compiled_store(service.store, interfaces)
    handle = second_handle(instance)
    try:
        assert {struct_bytes(key) for key, _ in handle.rules_dump()} == keys
        active = handle.shapes_get()
        assert [struct_bytes(active.shapes[i]) for i in range(active.count)] == shapes
    finally:
        handle.close()
    stored = {rule_id(r.tenant, r.intent.id) for r in service.store.all_intents()}
    assert set(service.dataplane.installed_intents) == stored


def per_cpu_value(map_fd: int, key: int, value_type: Any) -> list[Any]:
    """Every possible CPU's value of slot `key` of a per-CPU array, as `value_type` objects."""
    import ctypes

    from bench.libbpf import map_lookup

    cpus = binding.possible_cpus()
    values = (value_type * cpus)()
    if not map_lookup(map_fd, ctypes.c_uint32(key), values):
        raise KeyError(key)
    return list(values)


def pipeline_map_fd(dp: Dataplane, name: str) -> int:
    """An fd of the instance's map whose kernel name ends with `name`, found through its clock
    starter program's maps: the clock word (.data.clock, a map of the programs' own: libdpp keeps no
    fd of it) or the timer's (dpp_clock, refused as a table)."""
    start_id = int(fdinfo(dp.program_fd("dpp_clock_start"))["prog_id"])
    shown = json.loads(subprocess.check_output(["bpftool", "-j", "prog", "show", "id", str(start_id)]))
    for map_id in shown["map_ids"]:
        named = json.loads(subprocess.check_output(["bpftool", "-j", "map", "show", "id", str(map_id)]))
        if named["name"].endswith(name):
            return map_fd_by_id(map_id)
    raise AssertionError(f"the pipeline's dpp_clock_start has no {name}")
