"""An instance pinned by a build whose dpp_config still had its `reserved` word where this build has
the functions' word (enum dpp_functions) is reopened and upgraded in place: the BTF compare lets a
member named reserved... be taken at the same bit offset as an int of the same size, and nothing else
(a member renamed that was not reserved is still refused). libdpp sets the word from the functions'
maps on the reopen and again before the upgrade's switch, so that a frame the gated function must see
reaches it under the new program. The pinned config is replaced by a hand-made map of the earlier
layout (tests/utils/hand_maps.py), holding the instance's values, with the word 0 as that build's
libdpp wrote it."""

from __future__ import annotations

import errno
import json
import re
import subprocess
from ctypes import c_uint32
from pathlib import Path
from typing import NamedTuple

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.dataplane.abi import Config, Function, Prog
from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.frer.abi import Gate
from netapp.testbed import netns
from tests.utils.hand_maps import PIN_ROOT, pin_hand_map, refused_on_reopen_and_upgrade, struct_body, tool, write_pinned
from tests.utils.kernel import require_kernel, veth_namespace
from tests.utils.maps import pinned_instance

FUNCTIONS_MEMBER = re.compile(r"\t__u32 functions;[^\n]*\n")
IFACE, PEER = "v1", "v0"  # the instance's link is on v1
DCCP = 33  # IP protocol: a plain DCCP frame is ATSSS's (nf/atsss/stage.h atsss_mine)


class Gated(NamedTuple):
    """A function behind a bit of the word: its gate map and the value that opens it, a frame it
    must see, its slot of dpp_prog_stats and its bit."""

    gate: str
    opened: int
    frame: bytes
    slot: Prog
    bit: Function


GATED = {
    "frer": Gated("dpp_frer_gate", int(Gate.IP), bytes(Ether() / IP(src="10.30.0.1", dst="10.30.0.2") /
                                                      UDP(sport=4000, dport=5000) / (b"x" * 18)),
                  Prog.FRER, Function.FRER),
    "atsss": Gated("dpp_atsss_gate", 1, bytes(Ether() / IP(src="10.31.0.1", dst="10.31.0.2", proto=DCCP) /
                                              (b"\0" * 24)),
                   Prog.ATSSS, Function.ATSSS),
}


def stage_runs(dp: Dataplane, slot: Prog) -> int:
    """Frames the entry handed to a function's stage (its slot of dpp_prog_stats, over the CPUs)."""
    return sum(cpu.packets for cpu in dp.table("dpp_prog_stats").get(c_uint32(slot)))


def config_with(body_edit, config: Config, instance: str, tmp_path: Path) -> None:
    """The instance's dpp_config pinned as a map whose struct is the header's edited by body_edit,
    holding `config`'s bytes."""
    pin_hand_map(instance, tmp_path, "dpp_config", body_edit(struct_body("core/structs.h", "dpp_config")))
    write_pinned(instance, "dpp_config", bytes(c_uint32(0)), bytes(config))


def reserved_word(body: str) -> str:
    """dpp_config as a build before the functions' word declared it."""
    edited, found = FUNCTIONS_MEMBER.subn("\t__u32 reserved;\n", body)
    assert found == 1, "dpp_config has no `__u32 functions;` member"
    return edited


def pinned_map_id(instance: str, name: str) -> int:
    shown = subprocess.run([tool("bpftool"), "-j", "map", "show", "pinned", str(PIN_ROOT / instance / "maps" / name)],
                           capture_output=True, text=True, check=True)
    return json.loads(shown.stdout)["id"]


def instance_with_gate_open(instance: str, gated: Gated) -> Config:
    """A new instance with the function's gate open; its config as left."""
    first = Dataplane.open(instance=instance)
    try:
        first.table(gated.gate).update({0: gated.opened})
        config = Config(**first.config())
    finally:
        first.close()
    config.functions = 0  # the reserved word: the earlier libdpp wrote 0 and its programs never wrote it
    return config


@pytest.mark.parametrize("gated", GATED.values(), ids=GATED.keys())
def test_an_instance_whose_config_has_the_reserved_word_is_reopened_and_upgraded_in_place(gated, tmp_path):
    require_kernel()
    with pinned_instance("reserved") as instance:
        config = instance_with_gate_open(instance, gated)
        config_with(reserved_word, config, instance, tmp_path)
        pinned = pinned_map_id(instance, "dpp_config")
        dp = Dataplane.open(instance=instance)  # refused before the reserved word could be taken
        try:
            assert Function(dp.config()["functions"]) == gated.bit, "set on the reopen"
            write_pinned(instance, "dpp_config", bytes(c_uint32(0)), bytes(config))  # clear again
            dp.reload()
            before = stage_runs(dp, gated.slot)
            dp.test_run(gated.frame)
            assert stage_runs(dp, gated.slot) == before + 1, "the frame skipped the function's stage"
            assert Function(dp.config()["functions"]) == gated.bit, "set by the upgrade"
            assert pinned_map_id(instance, "dpp_config") == pinned, "the config map kept, not replaced"
            assert dp.config()["meter_window_ns"] == config.meter_window_ns
        finally:
            dp.close()


def test_an_upgrade_sets_the_word_before_any_link_switches(tmp_path):
    """A handle whose entry another process has replaced meanwhile has its switch refused (the link
    runs another program than the one it names): its upgrade has set the word already, as it does
    before every switch, so that no frame of the new entry finds it clear."""
    require_kernel()
    with veth_namespace("dpp-rsv", IFACE, PEER) as ns, pinned_instance("order", netns=ns) as instance, \
            netns.entered(ns):
        config = instance_with_gate_open(instance, GATED["frer"])
        config_with(reserved_word, config, instance, tmp_path)
        stale = Dataplane.open(instance=instance)
        try:
            stale.attach(IFACE, "native")
            other = Dataplane.open(instance=instance)
            try:
                other.reload()
            finally:
                other.close()
            write_pinned(instance, "dpp_config", bytes(c_uint32(0)), bytes(config))  # the word clear
            with pytest.raises(DataplaneError):
                stale.reload()
            assert Function(stale.config()["functions"]) == Function.FRER
        finally:
            stale.close()


def renamed(body: str) -> str:
    """dpp_config with a member that is not reserved named otherwise, at its bit offset and size."""
    assert "\t__u32 tunnel_ends;" in body
    return body.replace("\t__u32 tunnel_ends;", "\t__u32 tunnel_count;")


def test_a_config_whose_member_named_otherwise_was_not_reserved_is_still_refused(tmp_path, caplog):
    require_kernel()
    with pinned_instance("renamed") as instance:
        config = instance_with_gate_open(instance, GATED["frer"])
        config_with(renamed, config, instance, tmp_path)
        refused, upgrade = refused_on_reopen_and_upgrade(instance)
    assert refused.errno == errno.EPROTO
    assert "map dpp_config: the value has no member 'tunnel_ends'" in caplog.text, caplog.text
    assert "unpin the instance and load it again" in caplog.text
    assert upgrade.returncode != 0 and "no member 'tunnel_ends'" in upgrade.stderr
