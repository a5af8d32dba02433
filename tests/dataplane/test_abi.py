"""The C ABI seen from Python: every ctypes mirror, enum and constant in netapp.dataplane.binding
against the BTF of the built BPF object (dataplane/build/dpp.bpf.o, from `make -C dataplane`) and
against the headers; then the conversions between compiled rules and C structs.

Without bpftool or the object these tests skip, except in CI (CI=true), where they fail.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from netapp.dataplane import abi, binding
from netapp.intents import compiler, models
from netapp.intents.compiler import compile_intents
from netapp.intents.models import parse_document, parse_intent
from netapp.steering.models import MAX_CAPACITY_PPS
from tests.utils.btf import Btf, find_bpftool
from tests.utils.intents import INTERFACES, native_intent, paper_message

REPO = Path(__file__).resolve().parents[2]
BPF_OBJECT = REPO / "dataplane" / "build" / "dpp.bpf.o"
LIBDPP = REPO / "dataplane" / "build" / "libdpp.so"
HEADERS = REPO / "dataplane" / "include" / "dpp"
INCLUDE = re.compile(r'^#include "([^"]+)"$', re.M)


def missing(reason: str) -> None:
    """Skip on a developer's machine; in CI the ABI check must run, so fail instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the ABI check must run; build with `make -C dataplane`)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def btf() -> Btf:
    bpftool = find_bpftool()
    if bpftool is None:
        missing("bpftool is not installed")
    if not BPF_OBJECT.exists():
        missing(f"{BPF_OBJECT.relative_to(REPO)} is not built (run `make -C dataplane`)")
    return Btf.of_object(BPF_OBJECT, bpftool)


def header_text(name: str) -> str:
    """A header of include/dpp as the compiler reads it: the project headers it includes inlined,
    each once, so that an umbrella (dpp_consts.h, dpp_structs.h) is the text of its parts."""
    seen: set[Path] = set()

    def read(path: Path) -> str:
        if path in seen:
            return ""
        seen.add(path)
        return INCLUDE.sub(lambda m: read((path.parent / m[1]).resolve()), path.read_text())

    return read((HEADERS / name).resolve())


def ctypes_members(struct) -> list[tuple[str, int]]:
    return [(name, getattr(struct, name).offset) for name, *_ in struct._fields_]


# --- BTF -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mirror", binding.ABI_STRUCTS + binding.KERNEL_STRUCTS, ids=lambda s: s.C_NAME)
def test_every_struct_mirror_matches_btf_size_members_and_offsets(btf, mirror):
    struct = btf.struct(mirror.C_NAME)
    assert struct is not None, f"struct {mirror.C_NAME} is not in the BTF of {BPF_OBJECT.name}"
    assert ctypes.sizeof(mirror) == struct["size"], f"sizeof(struct {mirror.C_NAME})"
    btf_members = [(member.name, member.byte_offset) for member in btf.members(struct)]
    assert ctypes_members(mirror) == btf_members


@pytest.mark.parametrize("mirror", binding.ABI_ENUMS, ids=lambda e: e.C_NAME)
def test_every_enum_mirror_matches_btf_names_and_values(btf, mirror):
    enum = btf.enum(mirror.C_NAME)
    assert enum is not None, f"enum {mirror.C_NAME} is not in the BTF of {BPF_OBJECT.name}"
    expected = {mirror.C_PREFIX + member.name: int(member) for member in mirror.__members__.values()}
    if mirror.C_MAX is not None:
        expected[mirror.C_PREFIX + "MAX"] = mirror.C_MAX
    assert {value["name"]: value["val"] for value in enum["values"]} == expected


# C actions no intent installs, and why: each must be named here or registered.
NOT_FROM_INTENTS = {
    "DPP_ACTION_DEFAULT": "never installed: the outcome of the configured fallback",
    "DPP_ACTION_UPF": "the UPF's outcome: its PDR tables (netapp.upf), not intent rules, match its packets",
    "DPP_ACTION_ATSSS": "a flow's mode within a UE's ATSSS downlink: MTS sessions' flow filters (netapp.atsss.flows)",
    "DPP_ACTION_MAX": "the count",
}


def test_every_c_action_has_one_registered_intent_action_and_back(btf):
    """The action registry (compiler.RULE_ACTIONS) against enum dpp_action: a C action without a
    Python entry fails, and so does an entry naming no C action, unless NOT_FROM_INTENTS says why."""
    enum = btf.enum("dpp_action")
    installable = {value["name"] for value in enum["values"]} - set(NOT_FROM_INTENTS)
    registered = [f"DPP_ACTION_{action.c_action}" for action in compiler.RULE_ACTIONS.values()]
    assert sorted(registered) == sorted(installable)


def test_array_dimensions_match_the_constants(btf):
    members = {m.name: m.type_name for m in btf.members(btf.struct("dpp_shape_set"))}
    assert members["shapes"] == f"dpp_shape[{binding.MAX_SHAPES}]"
    members = {m.name: m.type_name for m in btf.members(btf.struct("dpp_alt_group"))}
    assert members["members"] == f"dpp_alt_member[{binding.MAX_ALT_MEMBERS}]"


SCALARS = {ctypes.c_uint32: "unsigned int", ctypes.c_uint64: "unsigned long long"}  # the BTF names of the scalar values maps hold


def test_every_map_is_declared_once_in_the_binding_with_its_types_and_size(btf):
    maps = btf.maps()
    assert set(maps) == set(binding.MAPS)
    for name, spec in binding.MAPS.items():
        found = maps[name]
        size = spec.max_entries if isinstance(spec.max_entries, int) else binding.CONSTANTS[spec.max_entries]
        assert found["max_entries"] == size, name
        assert found["type"] == spec.type, name
        if spec.value is not None and found.get("value") is not None:
            assert found["value"] == getattr(spec.value, "C_NAME", SCALARS.get(spec.value)), name
        if spec.key is not None and hasattr(spec.key, "C_NAME"):
            assert found["key"] == spec.key.C_NAME, name


# --- Headers ---------------------------------------------------------------------------------------


def test_every_define_of_dpp_consts_h_is_mirrored():
    defines = dict(re.findall(r"^#define (DPP_[A-Z0-9_]+) (\S+)", header_text("dpp_consts.h"), re.M))
    defines.pop("DPP_CONSTS_H", None)
    values = {name: int(value.rstrip("uU"), 0) for name, value in defines.items()}
    assert values == binding.CONSTANTS


def test_every_enum_of_dpp_consts_h_has_a_mirror():
    declared = set(re.findall(r"^enum (dpp_\w+) \{", header_text("dpp_consts.h"), re.M))
    assert declared == {mirror.C_NAME for mirror in binding.ABI_ENUMS}


def test_every_struct_of_dpp_structs_h_has_a_mirror():
    declared = set(re.findall(r"^struct (dpp_\w+) \{", header_text("dpp_structs.h"), re.M))
    assert declared == {mirror.C_NAME for mirror in binding.ABI_STRUCTS}


def test_every_function_of_libdpp_h_has_a_prototype():
    text = re.sub(r"/\*.*?\*/", "", header_text("libdpp.h"), flags=re.S)
    declared = set(re.findall(r"^[a-z].*?\b(dpp_\w+)\(", text, re.M)) - {"dpp_log_fn", "dpp_rule_cb"}
    assert declared == set(binding.PROTOTYPES)


def test_the_schema_limits_are_the_data_plane_limits():
    assert models.MAX_CPUS == binding.MAX_CPUS
    assert models.MAX_ALT_GROUPS == binding.MAX_ALT_GROUPS
    assert models.MAX_ALT_MEMBERS == binding.MAX_ALT_MEMBERS
    assert compiler.MAX_SHAPES == binding.MAX_SHAPES


def test_the_capacity_bound_keeps_the_meter_count_exact_for_windows_up_to_256_s():
    # A window's count takes METER_TAKEN_BITS, and a share may take METER_SHARE_MAX - 1 past the
    # budget (nf/steer/meter.h, meter_take_share): budgets up to this one count exactly.
    exact = (1 << binding.METER_TAKEN_BITS) - binding.METER_SHARE_MAX
    assert MAX_CAPACITY_PPS * 256 <= exact < (MAX_CAPACITY_PPS + 1) * 256


LAYOUT_PROGRAM = """
#include <stdio.h>
#include <stddef.h>
#include "libdpp.h"
#define M(s, f) printf(#s " " #f " %zu\\n", offsetof(struct s, f));
#define S(s) printf(#s " . %zu\\n", sizeof(struct s));
int main(void)
{
	%s
	printf("DPP_LOG_WARN . %d\\nDPP_LOG_INFO . %d\\nDPP_LOG_DEBUG . %d\\n", DPP_LOG_WARN, DPP_LOG_INFO, DPP_LOG_DEBUG);
	return 0;
}
"""


def test_libdpp_h_structs_match_their_mirrors_as_a_c_compiler_lays_them_out(tmp_path):
    compiler_path = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler_path is None:
        missing("no C compiler to lay out libdpp.h structs")
    offsets = "".join(
        f"S({mirror.C_NAME})" + "".join(f"M({mirror.C_NAME}, {name})" for name, *_ in mirror._fields_)
        for mirror in binding.LIBDPP_STRUCTS
    )
    source = tmp_path / "layout.c"
    source.write_text(LAYOUT_PROGRAM.replace("%s", offsets))
    subprocess.run(
        [compiler_path, "-I", str(HEADERS), "-o", str(tmp_path / "layout"), str(source)], check=True
    )
    printed = subprocess.run([str(tmp_path / "layout")], check=True, capture_output=True, text=True).stdout
    found = {
        (name, field): int(value) for name, field, value in (line.split() for line in printed.splitlines())
    }
    expected = {(mirror.C_NAME, "."): ctypes.sizeof(mirror) for mirror in binding.LIBDPP_STRUCTS}
    expected.update(
        ((mirror.C_NAME, name), getattr(mirror, name).offset)
        for mirror in binding.LIBDPP_STRUCTS
        for name, *_ in mirror._fields_
    )
    expected.update(((binding.LogLevel.C_PREFIX + level.name, "."), int(level)) for level in binding.LogLevel)
    assert found == expected


def test_libdpp_so_exports_every_prototype():
    if not LIBDPP.exists():
        missing(f"{LIBDPP.relative_to(REPO)} is not built (run `make -C dataplane`)")
    library = ctypes.CDLL(str(LIBDPP))
    absent = [name for name in binding.PROTOTYPES if not hasattr(library, name)]
    assert absent == []


# --- Conversions -----------------------------------------------------------------------------------


def words(data: bytes) -> list[int]:
    return binding.address_words(data)


def test_key_fields_cover_the_compiler_vocabulary_with_real_members():
    assert set(binding.KEY_FIELDS) == set(compiler.KEY_FIELD_NAMES)
    members = dict((name, ctype) for name, ctype in binding.FlowKey._fields_)
    for field, spec in binding.KEY_FIELDS.items():
        assert spec.member in members, field
        assert spec.width <= ctypes.sizeof(members[spec.member]) * 8, field


def paper_rule():
    ruleset = compile_intents(parse_document(paper_message()).intents, INTERFACES)
    return ruleset, ruleset.rules[0]


def test_the_paper_rule_becomes_this_key_and_value():
    ruleset, rule = paper_rule()
    key, value = binding.rule_to_c(rule, slot=5)
    assert (key.ifindex, key.overlay, key.vni, key.teid) == (2, binding.Overlay.VXLAN, 0x445, 0x8894D0D4)
    assert key.flags == binding.KeyFlag.VNI | binding.KeyFlag.GTP, "a VNI and a TEID are present"
    assert (key.family, key.proto, key.sport, key.dport) == (4, 17, 0, 5004)
    assert key.shape == binding.shape_id(rule.shape) != 0, "keys carry their shape's id"
    assert bytes(key)[24:28] == bytes([192, 168, 0, 140]), "IPv4 source in network order in src[0]"
    assert list(key.src)[1:] == [0, 0, 0]
    assert (value.slot, value.priority, value.action, value.flags) == (5, 100, binding.Action.STEER, 0)
    assert (value.arg, value.overflow_group) == (1, binding.NONE), "STEER's argument is the CPU"


def test_the_paper_shape_mask_covers_exactly_its_fields():
    ruleset, rule = paper_rule()
    shape = binding.shape_to_c(rule.shape, ruleset.max_priorities[0])
    mask = shape.mask
    assert shape.max_priority == 100
    assert (mask.ifindex, mask.vni, mask.teid, mask.overlay, mask.family, mask.proto) == (
        0xFFFFFFFF,
        0xFFFFFFFF,
        0xFFFFFFFF,
        0xFF,
        0xFF,
        0xFF,
    )
    flags = binding.KeyFlag
    assert mask.flags == flags.VNI | flags.GTP | flags.FRAGMENT | flags.UPF | flags.ATSSS, (
        "VNI and GTP required, FRAGMENT, UPF and ATSSS must be 0"
    )
    assert (mask.dport, mask.sport, mask.vlan, mask.qfi, mask.dscp) == (0xFFFF, 0, 0, 0, 0)
    assert mask.shape == binding.shape_id(rule.shape), "the mask carries the id the classifier copies"
    assert bytes(mask)[24:40] == b"\xff" * 4 + b"\0" * 12
    assert list(mask.dst) == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("prefix", "mask_bytes"),
    [
        ("10.1.2.0/24", b"\xff\xff\xff\x00" + b"\0" * 12),
        ("10.0.0.0/9", b"\xff\x80\x00\x00" + b"\0" * 12),
        ("1.2.3.4/32", b"\xff" * 4 + b"\0" * 12),
        ("2001:db8::/32", b"\xff" * 4 + b"\0" * 12),
        ("2001:db8::/64", b"\xff" * 8 + b"\0" * 8),
        ("2001:db8::/65", b"\xff" * 8 + b"\x80" + b"\0" * 7),
        ("::1/128", b"\xff" * 16),
    ],
)
def test_prefix_masks_are_the_leading_bits_in_network_order(prefix, mask_bytes):
    rule = compile_intents([parse_intent(native_intent(match={"dst": prefix}))], INTERFACES).rules[0]
    mask = binding.shape_mask(rule.shape)
    assert bytes(mask)[40:56] == mask_bytes
    key = binding.rule_key(rule)
    network = ipaddress.ip_network(prefix)
    assert bytes(key)[40:56] == network.network_address.packed.ljust(16, b"\0")
    assert key.family == network.version and key.shape == binding.shape_id(rule.shape)


@pytest.mark.parametrize(
    ("match", "flags_mask", "flags_value"),
    [
        ({"teid": 1}, binding.KeyFlag.GTP, binding.KeyFlag.GTP),
        (
            {"qfi": 1},
            binding.KeyFlag.GTP | binding.KeyFlag.GTP_QFI,
            binding.KeyFlag.GTP | binding.KeyFlag.GTP_QFI,
        ),
        ({"protocol": "tcp", "dst_port": 80}, binding.KeyFlag.FRAGMENT, 0),
        ({"protocol": "tcp"}, 0, 0),
        ({"dscp": 1}, 0, 0),
    ],
)
def test_flag_fields_become_flag_bits(match, flags_mask, flags_value):
    """Every shape compares the UPF and ATSSS bits too, which no intent's key sets: intents never meet
    the packets the UPF or ATSSS classifies, nor their rules the intents'."""
    rule = compile_intents([parse_intent(native_intent(match=match))], INTERFACES).rules[0]
    assert binding.shape_mask(rule.shape).flags == flags_mask | binding.KeyFlag.UPF | binding.KeyFlag.ATSSS
    assert binding.rule_key(rule).flags == flags_value


def test_vlan_and_qfi_and_dscp_masks_are_their_widths():
    rule = compile_intents(
        [parse_intent(native_intent(match={"vlan": 4094, "qfi": 63, "dscp": 63}))], INTERFACES
    ).rules[0]
    mask = binding.shape_mask(rule.shape)
    assert (mask.vlan, mask.qfi, mask.dscp) == (0x0FFF, 0x3F, 0x3F)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"action": {"type": "drop"}}, (binding.Action.DROP, 0, binding.NONE, binding.NONE)),
        ({"action": {"type": "forward", "alternative": 4}}, (binding.Action.FORWARD, 0, 4, binding.NONE)),
        ({"action": {"type": "redirect", "interface": "ens5"}}, (binding.Action.REDIRECT, 0, 7, binding.NONE)),
        (
            {"action": {"type": "pass"}, "traffic_class": "best-effort", "alternative": 2},
            (binding.Action.PASS, binding.RuleFlag.BEST_EFFORT, binding.NONE, 2),
        ),
        ({"action": {"type": "steer", "cpu": 0}}, (binding.Action.STEER, 0, 0, binding.NONE)),
        ({"action": {"type": "steer", "cpu": 3}, "alternative": 5}, (binding.Action.STEER, 0, 3, 5)),
    ],
)
def test_rule_values_carry_an_argument_index_and_an_overflow_group(fields, expected):
    rule = compile_intents([parse_intent(native_intent(**fields))], INTERFACES).rules[0]
    value = binding.rule_value(rule, slot=1)
    assert (value.action, value.flags, value.arg, value.overflow_group) == expected


def test_each_function_s_reasons_lie_in_its_own_range():
    ranges = {
        "core": range(abi.REASON_BASE_CORE, abi.REASON_BASE_CORE + 2 * abi.REASON_RANGE),
        "steer": range(abi.REASON_BASE_STEER, abi.REASON_BASE_STEER + abi.REASON_RANGE),
        "forward": range(abi.REASON_BASE_FORWARD, abi.REASON_BASE_FORWARD + abi.REASON_RANGE),
        "redirect": range(abi.REASON_BASE_REDIRECT, abi.REASON_BASE_REDIRECT + abi.REASON_RANGE),
        "upf": range(abi.upf_abi.REASON_BASE_UPF, abi.upf_abi.REASON_BASE_UPF + abi.REASON_RANGE),
        "qos": range(abi.qos_abi.REASON_BASE_QOS, abi.qos_abi.REASON_BASE_QOS + abi.REASON_RANGE),
        "routing": range(
            abi.routing_abi.REASON_BASE_ROUTING, abi.routing_abi.REASON_BASE_ROUTING + abi.REASON_RANGE
        ),
        "frer": range(abi.frer_abi.REASON_BASE_FRER, abi.frer_abi.REASON_BASE_FRER + abi.REASON_RANGE),
        "tunnel": range(abi.tunnel_abi.REASON_BASE_TUNNEL, abi.tunnel_abi.REASON_BASE_TUNNEL + abi.REASON_RANGE),
    }
    owner = {
        binding.Reason.CPU_UNAVAILABLE: "steer",
        binding.Reason.CPU_OVERLOADED: "steer",
        binding.Reason.NO_ALTERNATIVE: "forward",
        binding.Reason.PORT_UNAVAILABLE: "redirect",
        **{reason: "upf" for reason in binding.Reason if reason.name.startswith("UPF_")},
        **{reason: "qos" for reason in binding.Reason if reason.name.startswith("QOS_")},
        **{reason: "routing" for reason in binding.Reason if reason.name.startswith("ROUTING_")},
        **{reason: "frer" for reason in binding.Reason if reason.name.startswith("FRER_")},
        **{reason: "tunnel" for reason in binding.Reason if reason.name.startswith("TUNNEL_")},
    }
    for reason in binding.Reason:
        assert reason in ranges[owner.get(reason, "core")], reason
    assert max(binding.Reason) < binding.REASON_MAX == binding.MAPS["dpp_reasons"].max_entries


def test_a_key_read_back_is_readable():
    _, rule = paper_rule()
    readable = binding.key_from_c(binding.rule_key(rule))
    assert readable["overlay"] == "vxlan"
    assert readable["src"] == ipaddress.IPv4Address("192.168.0.140")
    assert readable["dst"] == ipaddress.IPv4Address("0.0.0.0")
    assert readable["flags"] == ["gtp", "vni"]
    assert (readable["protocol"], readable["dst_port"]) == (17, 5004)
    assert readable["shape"] == binding.shape_id(rule.shape)


def test_an_ipv6_key_reads_back_as_ipv6():
    rule = compile_intents([parse_intent(native_intent(match={"src": "2001:db8::7"}))], INTERFACES).rules[0]
    assert binding.key_from_c(binding.rule_key(rule))["src"] == ipaddress.IPv6Address("2001:db8::7")


def test_alternative_groups_carry_macs_and_addresses_in_network_order():
    member = compiler.CompiledAltMember(
        mac="02:00:00:00:00:09",
        source_mac=None,
        ifindex=3,
        ip4=ipaddress.IPv4Address("10.0.0.9"),
        ip6=ipaddress.IPv6Address("2001:db8::9"),
    )
    group = binding.alt_group_to_c([member, compiler.CompiledAltMember(mac="02:00:00:00:00:0a")])
    assert group.count == 2
    first = bytes(group.members[0])
    assert first[0:6] == bytes.fromhex("020000000009") and first[6:12] == bytes(6)
    assert (group.members[0].ifindex, group.members[0].has_ip4, group.members[0].has_ip6) == (3, 1, 1)
    assert first[20:24] == bytes([10, 0, 0, 9])
    assert first[28:44] == ipaddress.IPv6Address("2001:db8::9").packed
    assert (group.members[1].has_ip4, group.members[1].has_ip6, group.members[1].ifindex) == (0, 0, 0)
    with pytest.raises(ValueError):
        binding.alt_group_to_c([member] * (binding.MAX_ALT_MEMBERS + 1))


def test_every_rule_key_is_already_masked_by_its_shape():
    intents = [
        native_intent("a", match={"src": "10.1.2.3/8", "protocol": "udp", "src_port": 9}),
        native_intent("b", match={"dst": "2001:db8::1/33", "dscp": 7}),
        native_intent("c", match={"teid": 0xFFFFFFFF, "qfi": 5, "vlan": 4094, "interface": "eth1"}),
        native_intent("d", match={"overlay": "gre", "vni": 0xFFFFFFFF}),
    ]
    ruleset = compile_intents(parse_document(intents).intents, INTERFACES)
    for rule in ruleset.rules:
        key = bytes(binding.rule_key(rule))
        mask = bytes(binding.shape_mask(rule.shape))
        assert bytes(k & m for k, m in zip(key, mask, strict=True)) == key, rule.intent_id


def test_shape_ids_follow_the_mask_not_the_position():
    from netapp.intents.compiler import RuleShape

    a = RuleShape(frozenset({"teid", "gtp"}), 0, 0, 0)
    b = RuleShape(frozenset({"vni", "overlay"}), 0, 0, 0)
    c = RuleShape(frozenset({"src", "family"}), 24, 0, 4)
    d = RuleShape(frozenset({"src", "family"}), 16, 0, 4)
    ids = [binding.shape_id(shape) for shape in (a, b, c, d)]
    assert len(set(ids)) == 4 and 0 not in ids
    assert binding.shape_id(RuleShape(frozenset({"gtp", "teid"}), 0, 0, 0)) == ids[0]
