"""The order of dpp_upf_dl4's writes (netapp.upf.ways), as a reader on another CPU needs it: a way
published by a whole value without ENTRY then the same with it, retired by its ENTRY bit alone, a
changed action published in another way before the old one is retired, a retired way written again
only after the programs' runs were waited for; and undone in that spirit. Over the fake, each write
recorded."""

from __future__ import annotations

import ctypes
import errno
import random

import pytest

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.contract import DataplaneUnavailable
from netapp.upf.abi import DL4_WAYS, PdrAction, PdrFlag, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site
from netapp.upf import ways
from netapp.upf.ways import bucket_of, table_bits
from tests.upf.test_datapath import DL_TEID, N3_IP
from tests.upf.test_dl4_datapath import ue_session

SLOTS = 64  # 16 buckets
ENTRY = int(PdrFlag.ENTRY)


class RecordingDpp(FakeDpp):
    """A fake that records dpp_upf_dl4's writes, ("write", slot, value bytes), and the waits."""

    def __init__(self) -> None:
        super().__init__(map_sizes={"dpp_upf_dl4": SLOTS})
        self.log: list[tuple] = []
        self.refused_slot = -1  # a way whose retirement (a write without ENTRY) is refused, once

    def table_update(self, name, keys, values, flags=0):  # noqa: ANN001, ANN201
        if name == "dpp_upf_dl4" and int(keys[0]) == self.refused_slot and not bytes(values[0])[0] & ENTRY:
            self.refused_slot = -1
            raise DataplaneError(errno.EBUSY, f"dpp_table_update({name})", "refused")
        if name == "dpp_upf_dl4":
            self.log += [("write", int(key), bytes(value)) for key, value in zip(keys, values)]
        super().table_update(name, keys, values, flags)

    def table_wait_readers(self) -> None:
        self.log.append(("wait",))
        super().table_wait_readers()


@pytest.fixture
def fake():
    return RecordingDpp()


def applier(fake: FakeDpp) -> BpfApplier:
    site = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP)
    return BpfApplier(Dataplane(fake).table, site, iface_entries({5: (Role.N3, 0), 6: (Role.N6, 1)}, N3_IP, None))


def bucket(count: int) -> list[str]:
    """`count` addresses of one bucket (instance 1) of a table of SLOTS ways."""
    wanted, found, address = bucket_of(1, 0x0A630001, table_bits(SLOTS)), [], 0x0A630001
    while len(found) < count:
        if bucket_of(1, address, table_bits(SLOTS)) == wanted:
            found.append(f"{address >> 24}.{address >> 16 & 255}.{address >> 8 & 255}.{address & 255}")
        address += 1
    return found


def differ_in_flags_only(a: bytes, b: bytes) -> bool:
    return a[1:] == b[1:] and (a[0] ^ b[0]) == ENTRY


def test_the_n6_interface_is_told_the_tables_buckets(fake):
    applier(fake)
    iface = fake.entries("dpp_upf_ifaces")[6]
    assert iface.dl4_bits == table_bits(SLOTS) == 4


def test_a_way_is_published_in_two_writes_the_second_setting_entry_alone(fake):
    applier(fake).apply(None, ue_session(1, "10.99.0.7"))
    (_, slot, staged), (_, again, live) = fake.log
    assert slot == again and not staged[0] & ENTRY and differ_in_flags_only(staged, live)
    assert PdrAction.from_buffer_copy(live).teid == DL_TEID + 1


def test_a_way_is_retired_by_its_entry_bit_alone(fake):
    upf = applier(fake)
    upf.apply(None, ue_session(1, "10.99.0.7"))
    live = fake.log[-1][2]
    upf.apply(ue_session(1, "10.99.0.7"), None)
    (_, _, retired), = fake.log[2:]
    assert differ_in_flags_only(live, retired)


def test_a_changed_action_is_published_in_another_way_before_the_old_one_is_retired(fake):
    upf = applier(fake)
    before = ue_session(1, "10.99.0.7")
    upf.apply(None, before)
    old_slot = fake.log[-1][1]
    moved = ue_session(1, "10.99.0.7").model_copy(update={"fars": {**before.fars, 2: before.fars[2].model_copy(
        update={"apply_action": frozenset({"DROP"})})}})
    fake.log.clear()
    upf.apply(before, moved)
    (_, new, staged), (_, _, live), (_, retired_slot, retired) = fake.log
    assert new != old_slot and retired_slot == old_slot, "never written over itself"
    assert live[0] & ENTRY and not retired[0] & ENTRY


def test_a_retired_way_is_written_again_only_after_a_wait_and_only_when_needed(fake):
    upf = applier(fake)
    *inside, newcomer, later = bucket(DL4_WAYS + 2)
    sessions = [ue_session(seid, address) for seid, address in enumerate(inside, start=1)]
    for each in sessions:
        upf.apply(None, each)
    upf.apply(sessions[0], None)
    freed = fake.log[-1][1]
    fake.log.clear()
    upf.apply(None, ue_session(9, newcomer))
    assert fake.log[0] == ("wait",) and {entry[1] for entry in fake.log[1:]} == {freed}
    fake.log.clear()
    upf.apply(sessions[1], None)
    upf.apply(None, ue_session(10, "10.99.200.1"))  # another bucket: a clean way there, no wait
    assert ("wait",) not in fake.log
    fake.log.clear()
    upf.apply(None, ue_session(11, later))  # its bucket has a retired way again: waited for once more
    assert fake.log[0] == ("wait",)


def test_a_refused_change_retires_what_it_published_and_republishes_what_it_retired(fake):
    upf = applier(fake)
    first, second = bucket(2)
    before = ue_session(1, first)
    upf.apply(None, before)
    old_slot, old_value = fake.log[-1][1:]
    moved = ue_session(1, first).model_copy(update={"fars": {**before.fars, 2: before.fars[2].model_copy(
        update={"apply_action": frozenset({"DROP"})})}})
    fake.refused_slot = old_slot  # its retirement is refused: the change is undone
    with pytest.raises(DataplaneUnavailable):
        upf.apply(before, moved)
    undone = next(entry[1] for entry in fake.log if entry[0] == "write" and entry[1] != old_slot)
    published = {slot: way for slot, way in fake.entries("dpp_upf_dl4").items() if way.flags & ENTRY}
    assert list(published) == [old_slot] and bytes(published[old_slot]) == old_value, "as before the change"
    fake.log.clear()
    upf.apply(None, ue_session(2, second))  # the bucket's way the undo retired is not clean: another one
    assert [entry[1] for entry in fake.log] == [undone + 1, undone + 1]


def test_the_ways_of_a_group_are_the_values_each_way_gets_alone_in_one_array():
    """`_staged` and `_live` (a group's publish, one C array each) hold what `_way` makes of each
    entry: the action, the key's address in ue_addr, ENTRY clear and set, every other flag kept."""
    rng = random.Random(17)
    entries = []
    for index in range(40):
        action = PdrAction.from_buffer_copy(rng.randbytes(ctypes.sizeof(PdrAction)))
        entries.append(((index % 3, 4, rng.randbytes(4).ljust(16, b"\0")), action))
    staged = ways._staged(entries)
    live = ways._live(staged)
    assert [bytes(value) for value in staged] == [bytes(ways._way(key, action, live=False)) for key, action in entries]
    assert [bytes(value) for value in live] == [bytes(ways._way(key, action, live=True)) for key, action in entries]
