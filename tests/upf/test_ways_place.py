"""dpp_upf_dl4's placement in libdpp (dpp_upf_dl4_buckets, dpp_upf_dl4_place) against its reference in
Python (`Ways.plan_in_python`, netapp.upf.ways): two `Ways` over two tables alike are given the same
changes, random ones over a small table whose buckets fill up (full ways, addresses of one bucket,
retired ways that need a wait, a wait refused, undone changes, keys the table cannot hold, the
start-up reconcile), and must make the same plans, waits and writes. No kernel: the tables are
netapp.dataplane.fake's; libdpp is loaded for its placement alone (skipped where it is not built)."""

from __future__ import annotations

import ctypes
import errno
import random

import pytest

from netapp.dataplane.binding import DataplaneError, load_libdpp
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.contract import DataplaneUnavailable
from netapp.service.transaction import SiteChange
from netapp.upf.abi import DL4_HASHED, DL4_WAYS, PdrAction
from netapp.upf.ways import Plan, Ways, bucket_of

SLOTS = 64  # 16 buckets of 4 ways: a few dozen entries fill them


def _libdpp_or_skip():
    try:
        return load_libdpp()
    except DataplaneError as exc:
        pytest.skip(f"libdpp is not built here ({exc}): `make -C dataplane`")


class WaitingDpp(FakeDpp):
    """A fake whose waits for the programs' runs are counted, and refused while `refuse_waits`."""

    def __init__(self) -> None:
        super().__init__(map_sizes={"dpp_upf_dl4": SLOTS})
        self.waits = 0
        self.refuse_waits = False
        self.refuse_writes = False

    def table_wait_readers(self) -> None:
        self.waits += 1
        if self.refuse_waits:
            raise DataplaneError(errno.EINTR, "dpp_table_wait_readers", "refused")
        super().table_wait_readers()

    def table_update(self, name, keys, values, flags=0):  # noqa: ANN001, ANN201
        if self.refuse_writes and name == "dpp_upf_dl4":
            raise DataplaneError(errno.EBUSY, f"dpp_table_update({name})", "refused")
        super().table_update(name, keys, values, flags)


class Twins:
    """A table placed by libdpp and one placed in Python, changed alike."""

    def __init__(self) -> None:
        self.fakes = (WaitingDpp(), WaitingDpp())
        self.native = Ways(Dataplane(self.fakes[0]).table("dpp_upf_dl4"))
        self.python = Ways(Dataplane(self.fakes[1]).table("dpp_upf_dl4"), native=False)
        assert self.native._lib is not None and self.python._lib is None

    def plans(self, before: dict, after: dict) -> tuple[Plan, Plan]:
        made = self.native.plan(before, after)
        reference = self.python.plan_in_python(before, after)
        assert shown(made) == shown(reference)
        assert self.fakes[0].waits == self.fakes[1].waits
        return made, reference

    def apply(self, plans: tuple[Plan, Plan], undo: bool = False) -> None:
        """The plans written as the applier writes them (published, then retired); `undo`: rolled back."""
        for ways, plan in zip((self.native, self.python), plans):
            change, left = SiteChange(), []
            try:
                ways.publish(change, plan, left)
                ways.retire(change, plan, left)
            except DataplaneUnavailable:
                change.roll_back()
                continue
            if undo:
                change.roll_back()

    def assert_alike(self) -> None:
        tables = [{slot: bytes(value) for slot, value in fake.entries("dpp_upf_dl4").items() if any(bytes(value))}
                  for fake in self.fakes]
        assert tables[0] == tables[1]
        assert self.native._state == self.python._state
        assert (self.native._slot_of, self.native._retired) == (self.python._slot_of, self.python._retired)


def shown(plan: Plan) -> tuple:
    """A plan as comparable values, in its order: slots, keys, the actions' bytes."""
    def entries(items: dict) -> list:
        return [(slot, key, bytes(action)) for slot, (key, action) in items.items()]

    def hashed(items: dict) -> list:
        return [(key, bytes(action)) for key, action in items.items()]

    return entries(plan.publish), entries(plan.retire), hashed(plan.hashed_before), hashed(plan.hashed_after)


def crowded_keys(rng: random.Random) -> list[tuple]:
    """Keys of few buckets (so that buckets fill and collide), of instances the table holds (0-3)
    and not (16: past its 16 buckets), and IPv6 ones (the hash's)."""
    keys = []
    for _ in range(120):
        instance = rng.choice((0, 1, 1, 2, 3, 16))
        address = 0x0A000000 + rng.randrange(24)
        keys.append((instance, 4, address.to_bytes(4, "big").ljust(16, b"\0")))
    keys += [(1, 6, bytes([0x20, 1, 0xD, 0xB8]) + rng.randbytes(12)) for _ in range(4)]
    return list(dict.fromkeys(keys))


def action(rng: random.Random) -> PdrAction:
    value = PdrAction()
    value.far_id, value.teid = rng.randrange(4), rng.randrange(1 << 32)
    return value


def test_the_buckets_libdpp_computes_are_the_reference_s_over_addresses_instances_and_widths():
    lib = _libdpp_or_skip()
    rng = random.Random(5)
    for bits in (0, 1, 4, 14, 30):
        keys = [(rng.choice((0, 1, (1 << bits) - 1, 1 << bits, rng.randrange(1 << 31))), rng.choice((4, 4, 6)),
                 rng.randbytes(16)) for _ in range(200)]
        buckets = (ctypes.c_int32 * len(keys))()
        assert lib.dpp_upf_dl4_buckets((ctypes.c_uint32 * len(keys))(*[key[0] for key in keys]),
                                       bytes(key[1] for key in keys), b"".join(key[2] for key in keys),
                                       len(keys), bits, buckets) == 0
        fits = [bits > 0 and family == 4 and instance < 1 << bits for instance, family, _ in keys]
        assert list(buckets) == [bucket_of(instance, int.from_bytes(packed[:4], "big"), bits) if fit else DL4_HASHED
                                 for (instance, _, packed), fit in zip(keys, fits)]
    assert lib.dpp_upf_dl4_buckets(None, None, None, 0, 31, None) == -errno.EINVAL


def test_a_bucket_past_the_shadow_is_refused_not_read():
    lib = _libdpp_or_skip()
    state, ways = (ctypes.c_uint8 * 8)(), (ctypes.c_int32 * 1)()
    assert lib.dpp_upf_dl4_place((ctypes.c_int32 * 1)(2), 1, state, 8, 0, 1, ways) == -errno.ERANGE
    assert lib.dpp_upf_dl4_place((ctypes.c_int32 * 1)(1), 1, state, 8, 0, 1, ways) == 1 and list(ways) == [4]


@pytest.mark.parametrize("seed", range(6))
def test_libdpp_places_as_the_python_reference_over_random_changes(seed):
    _libdpp_or_skip()
    rng = random.Random(seed)
    twins, keys, current, hashed = Twins(), crowded_keys(random.Random(seed)), {}, 0
    for step in range(60):
        twins.fakes[0].refuse_waits = twins.fakes[1].refuse_waits = step % 9 == 4
        touched = rng.sample(list(current), min(len(current), rng.randrange(6)))
        before = {key: current[key] for key in touched}
        after = {key: (action(rng) if rng.random() < 0.3 else value) for key, value in before.items()
                 if rng.random() < 0.7}
        after.update({key: action(rng) for key in rng.sample(keys, rng.randrange(1, 12)) if key not in current})
        assert twins.native.holding(list(after)) == twins.python.holding(list(after))
        plans = twins.plans(before, after)
        hashed += len(plans[0].hashed_after)
        undo = rng.random() < 0.15
        refused = undo and rng.random() < 0.3  # a write refused: the change undoes itself
        for fake in twins.fakes:
            fake.refuse_writes = refused
        twins.apply(plans, undo=undo)
        for fake in twins.fakes:
            fake.refuse_writes = False
        if not undo:
            current = {**{key: value for key, value in current.items() if key not in before}, **after}
        twins.assert_alike()
    assert twins.fakes[0].waits > 0, "some change waited for the programs' runs"
    assert hashed > 0, "some entry found its bucket full"


def test_a_full_bucket_sends_the_next_entry_to_the_hash_and_its_retired_way_after_a_wait():
    _libdpp_or_skip()
    twins = Twins()
    bits = twins.native.bits
    address, same = 0x0A000001, []
    while len(same) < DL4_WAYS + 2:
        if bucket_of(1, address, bits) == bucket_of(1, 0x0A000001, bits):
            same.append((1, 4, address.to_bytes(4, "big").ljust(16, b"\0")))
        address += 1
    rng = random.Random(3)
    first = {key: action(rng) for key in same[:DL4_WAYS + 1]}
    made, _ = twins.plans({}, first)
    assert len(made.publish) == DL4_WAYS and list(made.hashed_after) == [same[DL4_WAYS]]
    twins.apply(twins.plans({}, first))
    gone = {same[0]: first[same[0]]}
    twins.apply(twins.plans(gone, {}))
    waits = twins.fakes[0].waits
    made, _ = twins.plans({}, {same[-1]: action(rng)})
    assert twins.fakes[0].waits == waits + 1 and list(made.publish) == [twins.native.slot(same[1]) - 1]
    twins.assert_alike()


def test_the_start_up_reconcile_places_as_the_reference():
    _libdpp_or_skip()
    rng = random.Random(11)
    twins, keys = Twins(), crowded_keys(rng)
    written = {key: action(rng) for key in rng.sample(keys, 40)}
    twins.apply(twins.plans({}, written))
    desired = {key: (action(rng) if rng.random() < 0.3 else value) for key, value in written.items() if rng.random() < 0.6}
    desired.update({key: action(rng) for key in rng.sample(keys, 20)})
    hashed = {key: value for key, value in written.items() if key not in twins.native._slot_of}
    fresh = [Ways(Dataplane(twins.fakes[0]).table("dpp_upf_dl4")),
             Ways(Dataplane(twins.fakes[1]).table("dpp_upf_dl4"), native=False)]
    plans = [ways.reconcile(dict(desired), dict(hashed)) for ways in fresh]
    assert shown(plans[0]) == shown(plans[1])
    assert fresh[0]._state == fresh[1]._state
