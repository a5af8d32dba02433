"""ATSSS's UE filter (dpp_atsss_ues): a bit per hash of the UE addresses with a session, which the
pipeline reads before it looks a session up, so that a frame to a UE without one costs no lookup
(include/dpp/nf/atsss.h). A sync (netapp.atsss.table.AtsssMaps.sync) sets a UE's bit before its
session is written and clears it once no session left has that bit, which a count of the sessions
per bit says without reading the others: a delete costs the same among 10 sessions or 10,000."""

from __future__ import annotations

from ctypes import c_uint32, c_uint64
from typing import Callable, Iterable, Optional

from netapp.atsss.abi import UE_FILTER_WORDS, SessionKey, ue_filter_bit
from netapp.dataplane.tables import Table


def _bit(key: SessionKey) -> int:
    return ue_filter_bit(tuple(key.addr))


class UeFilter:
    """The filter's words, and the sessions held per bit; `held_keys()` reads the sessions' keys
    from the maps (the counts' first source)."""

    def __init__(self, table: Table, held_keys: Callable[[], Iterable[SessionKey]]):
        self._ues = table
        self._held_keys = held_keys
        self._counts: Optional[dict[int, int]] = None  # filter bit -> sessions held with it

    def taken(self) -> dict[int, int]:
        """The counts, forgotten until `count` gives them back: a sync that fails on the way leaves
        them to be counted again from the map."""
        counts = self.counts()
        self._counts = None
        return counts

    def counts(self) -> dict[int, int]:
        """The sessions held per bit: counted from the map once (and after a full sync or a failed
        one), then kept by each sync."""
        if self._counts is None:
            counts: dict[int, int] = {}
            for key in self._held_keys():
                counts[_bit(key)] = counts.get(_bit(key), 0) + 1
            self._counts = counts
        return self._counts

    def set(self, keys: list[SessionKey]) -> None:
        """The bits of these sessions' addresses set (the words that lack one written)."""
        wanted: dict[int, int] = {}
        for key in keys:
            wanted[_bit(key) // 64] = wanted.get(_bit(key) // 64, 0) | 1 << (_bit(key) % 64)
        self._write_words(wanted, lambda now, bits: now | bits)

    def count(self, counts: dict[int, int], added: list[SessionKey], deleted: list[SessionKey]) -> None:
        """`counts` (from `taken`) moved by the sessions `added` and `deleted` (the map written
        already), and kept; a bit whose last session went is cleared."""
        for key in added:
            counts[_bit(key)] = counts.get(_bit(key), 0) + 1
        cleared: dict[int, int] = {}
        for key in deleted:
            bit = _bit(key)
            counts[bit] = counts.get(bit, 1) - 1
            if not counts[bit]:
                del counts[bit]
                cleared[bit // 64] = cleared.get(bit // 64, 0) | 1 << (bit % 64)
        self._write_words(cleared, lambda now, bits: now & ~bits)
        self._counts = counts

    def reset(self) -> None:
        """Every word made exactly the bits of the sessions held, counted from the map (a full sync
        sheds stale bits, which the pinned map kept over a restart)."""
        held: dict[int, int] = {}
        for bit in self.counts():
            held[bit // 64] = held.get(bit // 64, 0) | 1 << (bit % 64)
        self._write_words({word: held.get(word, 0) for word in range(UE_FILTER_WORDS)}, lambda now, bits: bits)

    def _write_words(self, words: dict[int, int], merge: Callable[[int, int], int]) -> None:
        """Each word of `words` made merge(its value now, the given bits), written only if it changes."""
        indexes = sorted(words)
        now = self._ues.lookup([c_uint32(word) for word in indexes])
        writes = []
        for word, value in zip(indexes, now):
            before = int(value or 0)
            after = merge(before, words[word])
            if after != before:
                writes.append((c_uint32(word), c_uint64(after)))
        self._ues.update(writes)
