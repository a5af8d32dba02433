"""dpp_config.functions, the one word the entry tests before it hands a frame to FRER's stage, the
GTP-U dispatcher or ATSSS's stage (libdpp's functions.c keeps it from those functions' own maps), in
the kernel: each function's map sets its bit while it has work and clears it when emptied; a frame
reaches FRER's stage only while the bit is set; the set-call leaves the word as it is; and an
instance reopened with the word cleared (as a build without it leaves the config) has it again."""

from __future__ import annotations

from collections.abc import Iterator
from ctypes import c_uint32

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.dataplane.abi import Config, Function, Prog
from netapp.dataplane.binding import DppHandle, load_libdpp
from netapp.dataplane.facade import Dataplane
from netapp.frer.abi import Gate
from netapp.qos.rss_abi import MAX_RSS_IFACES, RssIface
from tests.utils.hand_maps import write_pinned
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance

DISPATCHING = 7  # an ifindex: a dispatcher interface's slot is ifindex % MAX_RSS_IFACES
FRAME = bytes(Ether() / IP(src="10.30.0.1", dst="10.30.0.2") / UDP(sport=4000, dport=5000) / (b"x" * 18))


@pytest.fixture(scope="module")
def handle() -> Iterator[DppHandle]:
    """One anonymous instance for the module: loading verifies the programs, seconds on a loaded
    machine."""
    require_kernel()
    opened = DppHandle.open(load_libdpp())
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def dp(handle: DppHandle) -> Iterator[Dataplane]:
    """The instance, every function's map emptied after the test."""
    dataplane = Dataplane(handle)
    yield dataplane
    dataplane.table("dpp_frer_gate").update({0: 0})
    dataplane.table("dpp_atsss_gate").update({0: 0})
    dataplane.table("dpp_rss_ifaces").update({DISPATCHING % MAX_RSS_IFACES: RssIface()})


def functions(dp: Dataplane) -> Function:
    return Function(dp.config()["functions"])


def frer_stage_runs(dp: Dataplane) -> int:
    """Frames the entry handed to FRER's stage (its slot of dpp_prog_stats, over the CPUs)."""
    return sum(cpu.packets for cpu in dp.table("dpp_prog_stats").get(c_uint32(Prog.FRER)))


def test_a_new_instance_hands_nothing_to_the_functions(dp):
    assert functions(dp) == Function(0)


def test_each_functions_map_sets_its_bit_while_it_has_work_and_clears_it_when_emptied(dp):
    slot = DISPATCHING % MAX_RSS_IFACES
    dp.table("dpp_frer_gate").update({0: int(Gate.IP)})
    assert functions(dp) == Function.FRER
    dp.table("dpp_rss_ifaces").update({slot: RssIface(DISPATCHING, 2)})
    dp.table("dpp_atsss_gate").update({0: 1})
    assert functions(dp) == Function.FRER | Function.RSS | Function.ATSSS

    dp.table("dpp_frer_gate").update({0: 0})
    assert functions(dp) == Function.RSS | Function.ATSSS
    dp.table("dpp_rss_ifaces").update({slot: RssIface(DISPATCHING, 0)})  # held, but no workers
    assert functions(dp) == Function.ATSSS
    dp.table("dpp_atsss_gate").update({0: 0})
    assert functions(dp) == Function(0)


def test_a_frame_reaches_frer_only_while_its_bit_is_set(dp):
    before = frer_stage_runs(dp)
    dp.table("dpp_frer_gate").update({0: int(Gate.IP)})
    dp.test_run(FRAME)
    assert frer_stage_runs(dp) == before + 1

    dp.table("dpp_frer_gate").update({0: 0})  # the last stream removed
    dp.test_run(FRAME)
    assert (functions(dp), frer_stage_runs(dp)) == (Function(0), before + 1)


def test_the_set_call_leaves_the_functions_word(dp, handle):
    stale = handle.config_get()  # read before FRER's gate opened, written back after
    dp.table("dpp_frer_gate").update({0: int(Gate.IP)})
    stale.default_verdict = 1
    handle.config_set(stale)
    assert functions(dp) == Function.FRER
    assert handle.config_get().default_verdict == 1


def test_the_set_call_keeps_the_shape_set_and_generation_a_publish_wrote_since_its_read(handle):
    stale = handle.config_get()  # read before the publish, written back after it
    handle.shapes_publish([])
    published = handle.config_get()
    assert (published.shape_set, published.generation) != (stale.shape_set, stale.generation)
    stale.default_verdict = 1
    handle.config_set(stale)
    written = handle.config_get()
    assert (written.shape_set, written.generation) == (published.shape_set, published.generation)
    assert written.default_verdict == 1


def clear_word_in_pin(instance: str, config: Config) -> None:
    """The pinned config written with the functions' word clear, as a build without it left it."""
    config.functions = 0
    write_pinned(instance, "dpp_config", bytes(c_uint32(0)), bytes(config))


def test_an_instance_reopened_with_the_word_clear_has_it_again():
    require_kernel()
    with pinned_instance("functions") as instance:
        first = Dataplane.open(instance=instance)
        try:
            first.table("dpp_frer_gate").update({0: int(Gate.IP)})
            clear_word_in_pin(instance, Config(**first.config()))
            before = frer_stage_runs(first)
            first.test_run(FRAME)
            assert (functions(first), frer_stage_runs(first)) == (Function(0), before), "the word is what the entry tests"
        finally:
            first.close()
        reopened = Dataplane.open(instance=instance)
        try:
            reopened.test_run(FRAME)
            assert (functions(reopened), frer_stage_runs(reopened)) == (Function.FRER, before + 1)
        finally:
            reopened.close()
