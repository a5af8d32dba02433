"""Stencils (netapp.upf.stencil, netapp.upf.prepared): cut from what a function made of sentinel
values, kept only if they give back what it made of the others; anything they cannot say is no
stencil at all (the caller then runs the function)."""

from __future__ import annotations

import functools
import socket
import sys
from ctypes import Structure, c_uint8, c_uint16, c_uint32, c_uint64
from typing import Any

from netapp.upf.abi import PdrAction
from netapp.upf.compiler import Entries
from netapp.upf.prepared import EntriesStencil
from netapp.upf.stencil import punch, shape_of

A, B, REAL = 4042326017, 3789750273, 7


def test_a_document_is_filled_where_its_values_went_braces_and_percent_signs_kept():
    made = [f'{{"seid":{value},"ue":"{ue}","rate":"5%"}}' for value, ue in ((A, "240.0.1.1"), (B, "241.0.1.1"),
                                                                            (REAL, "10.0.0.1"))]
    stencil = punch(made, [[str(A), "240.0.1.1"], [str(B), "241.0.1.1"], [str(REAL), "10.0.0.1"]])
    assert stencil is not None and stencil.fill(["9", "10.9.9.9"]) == '{"seid":9,"ue":"10.9.9.9","rate":"5%"}'
    made = [b"\x00%" + value.to_bytes(4, "big") for value in (A, B, REAL)]
    stencil = punch(made, [[value.to_bytes(4, "big")] for value in (A, B, REAL)])
    assert stencil is not None and stencil.fill([b"ABCD"]) == b"\x00%ABCD"


def test_a_filler_encodes_each_value_as_it_fills_it_in_and_gives_what_fill_gives_the_values_encoded():
    made = [f'{{"seid":{value},"ue":"{ue}","again":{value}}}' for value, ue in ((A, "240.0.1.1"), (B, "241.0.1.1"),
                                                                               (REAL, "10.0.0.1"))]
    stencil = punch(made, [[str(A), "240.0.1.1"], [str(B), "241.0.1.1"], [str(REAL), "10.0.0.1"]])
    assert stencil is not None
    for values in ([9, "10.9.9.9"], [0, ""], [1 << 40, "{}%s"]):
        filled = stencil.filler({0: str})(values)
        assert filled == stencil.fill([str(value) for value in values]) == (
            f'{{"seid":{values[0]},"ue":"{values[1]}","again":{values[0]}}}')
    made = [b"\x00%" + value.to_bytes(4, "big") + b"}" for value in (A, B, REAL)]
    stencil = punch(made, [[value.to_bytes(4, "big")] for value in (A, B, REAL)])
    assert stencil is not None
    encode = functools.partial(int.to_bytes, length=4, byteorder="big")
    assert stencil.filler({0: encode})([0x41424344]) == stencil.fill([b"ABCD"]) == b"\x00%ABCD}"


def test_a_value_the_function_did_more_with_than_put_in_place_gives_no_stencil():
    made = [f"{value} {value + 1}" for value in (A, B, REAL)]  # the value, and something made of it
    assert punch(made, [[str(value)] for value in (A, B, REAL)]) is None
    made = [f"{value}-{value}" for value in (A, B)] + ["7-8"]  # the real one not where the sentinels went
    assert punch(made, [[str(value)] for value in (A, B, REAL)]) is None


def test_a_structure_is_filled_where_its_values_are_and_only_of_plain_parts():
    made = [[(3, None, ue, False)] for ue in ("240.0.1.1", "241.0.1.1", "10.0.0.1")]
    shape = shape_of(made, [["240.0.1.1"], ["241.0.1.1"], ["10.0.0.1"]])
    assert shape is not None and shape.fill(["10.0.0.2"]) == [(3, None, "10.0.0.2", False)]
    assert shape_of([{value} for value in (A, B)], [[A], [B]]).fill([5]) == {5}  # type: ignore[union-attr]
    assert shape_of([[PdrAction()], [PdrAction()]], [[A], [B]]) is None


def test_map_entries_are_filled_field_by_field_and_a_field_no_value_explains_gives_none():
    def entries(teid: int, peer_teid: int, qfi: int = 9) -> Entries:
        action = PdrAction(teid=peer_teid, qfi=qfi)
        return Entries(uplink={(teid, 255): action})

    values = [[A, A + 1], [B, B + 1], [REAL, 8]]
    stencil = EntriesStencil.cut([entries(*each) for each in values], values)
    assert stencil is not None
    filled = stencil.fill([5, 6])
    assert list(filled.uplink) == [(5, 255)] and filled.uplink[(5, 255)].teid == 6
    unexplained = [entries(*each, qfi=qfi) for each, qfi in zip(values, (1, 2, 3))]
    assert EntriesStencil.cut(unexplained, values) is None


def test_an_address_is_packed_for_the_keys_and_fields_it_fills_and_a_real_one_comes_back_alike():
    def entries(ue: str, teid: int) -> Entries:
        packed = socket.inet_aton(ue).ljust(16, b"\0")
        return Entries(downlink={(1, 4, packed): PdrAction(teid=teid, peer=(int.from_bytes(packed[:4], "little"), 0, 0, 0))})

    values = [["240.0.0.1", A], ["241.0.0.1", B], ["10.0.0.1", REAL]]
    stencil = EntriesStencil.cut([entries(*each) for each in values], values)
    assert stencil is not None
    filled, expected = stencil.fill(["10.9.8.7", 42]), entries("10.9.8.7", 42)
    assert list(filled.downlink) == list(expected.downlink)
    assert [bytes(value) for value in filled.downlink.values()] == [bytes(value) for value in expected.downlink.values()]


class _Widths(Structure):
    """A value with an int field of each width ctypes gives one (1, 2, 4 and 8 bytes), one of 3
    bytes, an address and constant bytes between them."""

    _fields_ = [("tag", c_uint8), ("small", c_uint8), ("port", c_uint16), ("teid", c_uint32), ("seid", c_uint64),
                ("odd", c_uint8 * 3), ("pad", c_uint8 * 5), ("address", c_uint8 * 16)]


def test_a_value_is_packed_hole_by_hole_at_every_width_and_an_odd_one_as_the_full_path_writes_it():
    def entries(small: int, port: int, teid: int, seid: int, odd: int, ue: str) -> Entries:
        value = _Widths(tag=7, small=small, port=port, teid=teid, seid=seid, pad=(1, 2, 3, 4, 5))
        value.odd[:] = list(odd.to_bytes(3, sys.byteorder))
        value.address[:] = list(socket.inet_aton(ue).ljust(16, b"\0"))
        return Entries(sdf_pdrs={teid: value})  # type: ignore[dict-item]

    values: list[list[Any]] = [[0xF1, 0xF1F2, 0xF1F2F3F4, 0xF1F2F3F4F5F6F7F8, 0xF1F2F9, "240.0.0.1"],
                               [0xE1, 0xE1E2, 0xE1E2E3E4, 0xE1E2E3E4E5E6E7E8, 0xE1E2E9, "241.0.0.1"],
                               [3, 4, 5, 6, 7, "10.0.0.1"]]
    stencil = EntriesStencil.cut([entries(*each) for each in values], values)
    assert stencil is not None
    real = [0xAB, 0xBEEF, 0xDEADBEEF, 0x0123456789ABCDEF, 0x123456, "10.9.8.7"]
    filled, expected = stencil.fill(real), entries(*real)
    assert list(filled.sdf_pdrs) == list(expected.sdf_pdrs)
    assert [bytes(value) for value in filled.sdf_pdrs.values()] == [bytes(value) for value in expected.sdf_pdrs.values()]
