"""Shape filters (dpp/core/filter.h, libdpp's filters.c): every published shape with few enough rules
has a filter whose bits are exactly those its rule keys set, through adds, replacements, deletes
and a reopen of the pinned instance; a shape over the limit has none; and packets still meet
their rules (the classifier skips a shape only when its filter lacks the packet's bits).

The expected bits come from a Python copy of the hash, so a drift between the program's hash and
libdpp's would show here as well as in the packets."""

from __future__ import annotations

import mmap
import random
import struct

import pytest

from netapp.dataplane.binding import FILTER_MAX_RULES, FILTER_WORDS, MAX_FILTERS, FlowKey
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import compile_intents
from netapp.intents.models import Intent
from tests.utils.dataplane import run, traced_dataplane
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance

MASK64 = (1 << 64) - 1
LANE_MULTIPLIERS = (
    0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93,
    0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53, 0x94D049BB133111EB,
)


def filter_hash(key: bytes) -> int:
    """dpp_filter_hash, written again from its comment: a sum of products, then a mix."""
    *lanes, shape = struct.unpack("<7QI", key)
    h = shape * 0xBF58476D1CE4E5B9
    h += sum(lane * mul for lane, mul in zip(lanes, LANE_MULTIPLIERS))
    h &= MASK64
    h ^= h >> 32
    h = (h * 0x9E3779B97F4A7C15) & MASK64
    return h ^ (h >> 29)


def expected_words(dataplane: Dataplane) -> dict[int, int]:
    """Word index -> bits, from the installed rules and the filters their shapes are published with."""
    handle = dataplane._dpp
    current = handle.shapes_get()
    filter_of = {current.shapes[i].mask.shape: current.filters[i] for i in range(current.count)}
    words: dict[int, int] = {}
    for key, _ in handle.rules_dump():
        filter_number = filter_of.get(key.shape, 0)
        if not filter_number:
            continue
        h = filter_hash(bytes(key))
        index = (filter_number - 1) * FILTER_WORDS + ((h >> 20) & (FILTER_WORDS - 1))
        words[index] = words.get(index, 0) | (1 << (h & 63)) | (1 << ((h >> 6) & 63))
    return words


def kernel_words(dataplane: Dataplane) -> dict[int, int]:
    """The non-zero words of dpp_filters, read through a mapping of the map."""
    size = MAX_FILTERS * FILTER_WORDS * 8
    with mmap.mmap(dataplane._dpp.map_fd("dpp_filters"), size, mmap.MAP_SHARED, mmap.PROT_READ) as view:
        values = struct.unpack(f"<{MAX_FILTERS * FILTER_WORDS}Q", view[:size])
    return {index: word for index, word in enumerate(values) if word}


def intent(number: int, shape: int, action: str = "drop") -> Intent:
    """Intent `number` of one of three shapes: a TEID, a UE /32, a UE /24 with a port."""
    matches = (
        {"teid": 0x1000 + number},
        {"src": f"10.{number // 256 % 256}.{number % 256}.1/32"},
        {"dst": f"10.{number // 256 % 256}.{number % 256}.0/24", "protocol": "udp", "dst_port": 5004},
    )
    return Intent.model_validate(
        {"id": f"i{number}", "priority": 10 + shape, "match": matches[shape], "action": {"type": action}}
    )


def apply(dataplane: Dataplane, intents: list[Intent]) -> None:
    report = dataplane.apply(compile_intents(intents, {}))
    assert not report.conflicts


def test_filters_hold_exactly_the_bits_of_the_rules_through_adds_replacements_and_deletes():
    require_kernel()
    rng = random.Random(7)
    dataplane = Dataplane.open()
    try:
        installed: dict[int, Intent] = {}
        for _ in range(6):
            for number in rng.sample(range(3000), 400):
                installed[number] = intent(number, number % 3, rng.choice(("drop", "pass")))
            for number in rng.sample(sorted(installed), 150):
                del installed[number]
            apply(dataplane, list(installed.values()))
            assert kernel_words(dataplane) == expected_words(dataplane)
        apply(dataplane, [])
        assert kernel_words(dataplane) == {}
    finally:
        dataplane.close()


def test_a_reopened_instance_counts_its_rules_again_and_clears_what_it_deletes():
    require_kernel()
    with pinned_instance("filters") as name:
        first = Dataplane.open(instance=name)
        intents = [intent(number, number % 3) for number in range(600)]
        apply(first, intents)
        before = kernel_words(first)
        first.close()
        again = Dataplane.open(instance=name)
        try:
            assert kernel_words(again) == before == expected_words(again)
            apply(again, intents[:100])
            assert kernel_words(again) == expected_words(again)
            apply(again, [])
            assert kernel_words(again) == {}
        finally:
            again.close()


def test_a_shape_with_more_rules_than_a_filter_serves_is_published_without_one():
    require_kernel()
    dataplane = Dataplane.open(max_rules=4 * FILTER_MAX_RULES)
    try:
        big = [intent(number, 0) for number in range(FILTER_MAX_RULES + 1)]
        apply(dataplane, big + [intent(FILTER_MAX_RULES + 1, 1)])
        shapes = dataplane._dpp.shapes_get()
        filters = {shapes.shapes[i].mask.shape: shapes.filters[i] for i in range(shapes.count)}
        teid_shape = FlowKey.from_buffer_copy(bytes(dataplane._dpp.rules_dump()[0][0])).shape
    finally:
        dataplane.close()
    small = [number for shape, number in filters.items() if shape != teid_shape]
    assert filters[teid_shape] == 0
    assert small and all(small)


FILTERED_DOCUMENT = {
    "intents": [
        {"id": "teid", "priority": 30, "match": {"teid": 0x1111}, "action": {"type": "drop"}},
        {"id": "ue", "priority": 20, "match": {"src": "192.168.0.140/32"}, "action": {"type": "drop"}},
        {"id": "subnet", "priority": 10, "match": {"dst": "10.0.0.0/24"}, "action": {"type": "pass"}},
    ]
}


def installed(dataplane) -> list[tuple[bytes, bytes]]:
    return [(bytes(key), bytes(rule)) for key, rule in dataplane._dpp.rules_dump()]


@pytest.fixture(scope="module")
def filtered_instance():
    """FILTERED_DOCUMENT on an instance without a flow cache (each packet searched), loaded once:
    the tests only run packets; what it holds is recorded for them to check it is unchanged."""
    dataplane = traced_dataplane(FILTERED_DOCUMENT, flow_cache=False)
    try:
        yield dataplane, installed(dataplane)
    finally:
        dataplane.close()


@pytest.fixture
def filtered(filtered_instance):
    dataplane, rules = filtered_instance
    assert installed(dataplane) == rules, "the module's instance holds other rules than its document's"
    return dataplane


@pytest.mark.parametrize(
    ("teid", "ue_src", "expected"),
    [(0x1111, "192.168.0.140", "teid"), (1, "192.168.0.140", "ue"), (1, "192.168.0.141", "subnet")],
)
def test_packets_meet_the_rule_of_the_filtered_shape_they_match(filtered, teid, ue_src, expected):
    from tests.dataplane.test_actions import tunnel_frame

    shapes = filtered._dpp.shapes_get()
    filtered_shapes = [shapes.filters[i] for i in range(shapes.count)]
    got = run(filtered, tunnel_frame(teid=teid, ue_src=ue_src)).intent
    assert len(filtered_shapes) == 3 and all(filtered_shapes)
    assert got == expected
