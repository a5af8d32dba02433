"""Words of an mmapable array's values stored in place (netapp.dataplane.tables.InPlace over libdpp's
dpp_words_store, or numpy's stores where libdpp is absent): only the words that differ are stored,
each aligned to its width, nothing outside the spans given; what the map's syscall lookup reads back
is the value asked for. libdpp's call refuses a word that is not aligned, of another width or past
the mapping, before it stores any. A map of the test's own (BPF_F_MMAPABLE), no program."""

from __future__ import annotations

import ctypes
import errno
import os
from ctypes import Structure, c_uint8, c_uint32
from typing import Any, Iterator

import pytest

from bench.libbpf import BPF_F_MMAPABLE, map_create, map_lookup, map_update
from netapp.dataplane import tables
from netapp.dataplane.binding import MapSpec, MapType, Word, load_libdpp
from netapp.dataplane.tables import Table
from tests.utils.kernel import require_kernel

ENTRIES = 4


class Value(Structure):
    _fields_ = [("raw", c_uint8 * 24)]


def _item(array: Any, index: int) -> Any:
    return array._type_.from_buffer(array, index * ctypes.sizeof(array._type_))


class MapAdapter:
    """The adapter calls a Table's in_place, lookup and update make, over one map by syscalls."""

    def __init__(self, fd: int):
        self.fd = fd

    def map_fd(self, name: str) -> int:
        return self.fd

    def map_info(self, name: str) -> dict[str, int]:
        return {"id": 0, "max_entries": ENTRIES}

    def table_lookup(self, name: str, keys: Any, values: Any, found: Any) -> int:
        for index in range(len(keys)):
            found[index] = map_lookup(self.fd, _item(keys, index), _item(values, index))
        return sum(found)

    def table_update(self, name: str, keys: Any, values: Any, flags: int = 0) -> None:
        for index in range(len(keys)):
            map_update(self.fd, _item(keys, index), _item(values, index))


@pytest.fixture
def table() -> Iterator[Table]:
    require_kernel()
    fd = map_create(int(MapType.ARRAY), 4, ctypes.sizeof(Value), ENTRIES, "dpp_in_place", flags=BPF_F_MMAPABLE)
    try:
        yield Table(MapAdapter(fd), "dpp_in_place", MapSpec(MapType.ARRAY, c_uint32, Value, ENTRIES))
    finally:
        os.close(fd)


@pytest.fixture(params=["libdpp", "numpy"])
def store_by(request, monkeypatch) -> str:
    """Each test twice: words stored by libdpp, and by numpy as where libdpp cannot be loaded."""
    if request.param == "numpy":
        monkeypatch.setattr(tables, "_words_lib_of", lambda adapter: None)
    return request.param


def value(raw: bytes) -> Value:
    return Value.from_buffer_copy(raw)


def test_only_the_words_that_differ_within_the_spans_are_stored_and_read_back(table, store_by):
    before = bytes(range(24))
    others = bytes(24 - n for n in range(24))
    table.update([(c_uint32(index), value(others)) for index in range(ENTRIES)] + [(c_uint32(2), value(before))])
    after = bytearray(before)
    after[0], after[1], after[7] = 0xF0, 0xF1, 0xF7  # 0 and 7 outside the spans
    after[9:13] = b"\xaa\xbb\xcc\xdd"
    after[20] = 0xEE
    spans = [(1, 7), (8, 24)]  # at value 2 (byte 48): words 1@1, 2@2, 2@4, 1@6, 8@8, 8@16
    with table.in_place() as writer:
        stored = writer.store(2, bytes(after), spans)
    assert stored == [(1, 1), (8, 8), (16, 8)], "the words that differ, each at its alignment"
    expected = bytearray(after)
    expected[0], expected[7] = before[0], before[7]
    read = table.lookup([c_uint32(index) for index in range(ENTRIES)])
    assert [bytes(item) for item in read] == [others, others, bytes(expected), others]


def test_a_value_that_already_holds_the_words_has_none_stored(table, store_by):
    table.update([(c_uint32(1), value(bytes(range(24))))])
    with table.in_place() as writer:
        assert writer.store(1, bytes(range(24)), [(0, 24)]) == []
        assert writer.store(1, bytes(range(1, 25)), [(3, 5)]) == [(3, 1), (4, 1)]
    assert bytes(table.get(c_uint32(1))) == bytes(range(3)) + bytes([4, 5]) + bytes(range(5, 24))


def words(*items: tuple[int, int, int]) -> Any:
    return (Word * len(items))(*(Word(offset=offset, value=piece, width=width) for offset, width, piece in items))


@pytest.mark.parametrize("bad, why", [
    ((3, 4, 0xDD), errno.EINVAL),  # an offset not a multiple of its width
    ((4, 3, 0xDD), errno.EINVAL),  # no such width
    ((6, 8, 0xDD), errno.EINVAL),
    ((32, 8, 0xDD), errno.ERANGE),  # past the mapping
    ((31, 2, 0xDD), errno.EINVAL),
    ((30, 4, 0xDD), errno.EINVAL),
    ((28, 8, 0xDD), errno.EINVAL),
    ((24, 16, 0xDD), errno.EINVAL),
])
def test_libdpp_refuses_a_word_unaligned_of_another_width_or_past_the_mapping_and_stores_none(bad, why):
    lib = load_libdpp()
    memory = (ctypes.c_uint64 * 4)()
    assert lib.dpp_words_store(memory, 32, words((0, 8, 0x1111), bad), 2) == -why
    assert list(memory) == [0, 0, 0, 0], "nothing stored, not even the good word before it"
    assert lib.dpp_words_store(memory, 32, words((0, 8, 0x1111), (12, 4, 0x22), (30, 2, 0x33)), 3) == 3
    assert list(memory) == [0x1111, 0x22 << 32, 0, 0x33 << 48]


def test_libdpp_refuses_a_word_aligned_in_the_mapping_whose_memory_is_not():
    """A base that is not itself aligned makes a word at an aligned offset a misaligned store (not
    one store): refused, nothing stored."""
    lib = load_libdpp()
    memory = (ctypes.c_uint64 * 5)()
    base = ctypes.addressof(memory) + 1
    assert lib.dpp_words_store(base, 32, words((0, 1, 0x11), (8, 8, 0x2222)), 2) == -errno.EINVAL
    assert list(memory) == [0] * 5
    assert lib.dpp_words_store(base, 32, words((0, 1, 0x11), (1, 1, 0x22)), 2) == 2  # bytes are aligned
    assert memory[0] == 0x2211 << 8
