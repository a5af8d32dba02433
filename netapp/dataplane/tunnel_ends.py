"""dpp_tunnel_ends as the installed rules use it: each tunnel endpoint address a rule names (an intent's
match.tunnel_src / tunnel_dst) has a small id, which the rule's key holds and which the program puts
into a GTP-U packet's key (dataplane/bpf/core/ends.h).

Ids are the data plane's business, not the compiler's: the rules' writer (netapp.dataplane.rules) asks
for an address's id when it makes a rule's key (`id_of`, which gives a new address an id and writes
it into the map before any rule can name it) and counts the installed keys that hold each id (`hold`,
`drop`). At the end of a change the addresses no installed key names go (`free`).

A packet must never match a rule through an id that meant another address when the packet was
looked up. So an id is given back only after its address left the map (after the rules naming it
went, and a wait for the program runs that may have read it: `Table.wait_readers`), and the free ids
are taken oldest first: an id freed now is given again only after every other free id was, and a
run that read the old address would have to outlast all those changes.

dpp_config.tunnel_ends counts the map's entries: while it is 0, no GTP-U packet looks an address up.
It is raised before a new address's first rule is written, and lowered after the addresses went.
A restart reads the ids from the map (`adopt`).
"""

from __future__ import annotations

import errno
import logging
from collections import Counter, deque
from ipaddress import IPv4Address, IPv6Address
from typing import Any, Iterable, Union

from netapp.dataplane.abi import MAX_TUNNEL_ENDS, TunnelEnd, U32x4
from netapp.dataplane.convert import address_words, words_address
from netapp.dataplane.errors import DataplaneError

log = logging.getLogger("netapp.dataplane")

IpAddress = Union[IPv4Address, IPv6Address]


def end_key(address: IpAddress) -> TunnelEnd:
    """The map's key of an address."""
    return TunnelEnd(family=address.version, addr=U32x4(*address_words(address)))


class TunnelEnds:
    """The addresses of dpp_tunnel_ends, their ids, and how many installed rule keys hold each id."""

    def __init__(self, table: Any, adapter: Any):
        self._table = table
        self._dpp = adapter  # its config_get / config_set: dpp_config.tunnel_ends
        self._ids: dict[IpAddress, int] = {}
        self._refs: Counter[int] = Counter()
        self._free: deque[int] = deque(range(1, MAX_TUNNEL_ENDS + 1))
        self._fresh: set[int] = set()  # given to the change at hand: not freed before it ends

    def adopt(self) -> None:
        """The ids a pinned instance's map holds (after a restart); the installed keys are counted
        by the writer as it adopts them."""
        self._ids = {words_address(key.addr, key.family): int(value) for key, value in self._table.items()}
        taken = set(self._ids.values())
        self._free = deque(i for i in range(1, MAX_TUNNEL_ENDS + 1) if i not in taken)

    def id_of(self, address: IpAddress) -> int:
        """The address's id; a new address gets the oldest free id, written into the map (and the
        count raised) now, before any rule names it. DataplaneError when all are taken."""
        held = self._ids.get(address)
        if held is not None:
            return held
        if not self._free:
            self._free_unnamed(keep=self._fresh)  # addresses an earlier change left, or none
        if not self._free:
            raise DataplaneError(
                errno.ENOSPC, f"give tunnel address {address} an id",
                f"rules name {MAX_TUNNEL_ENDS} tunnel addresses already, the most the data plane holds at once",
            )
        end_id = self._free.popleft()
        try:
            self._table.update([(end_key(address), end_id)])
        except DataplaneError:
            self._free.appendleft(end_id)
            raise
        self._ids[address] = end_id
        self._fresh.add(end_id)
        self._set_count()
        return end_id

    def hold(self, end_id: int) -> None:
        """An installed rule key holds the id."""
        self._refs[end_id] += 1

    def drop(self, end_id: int) -> None:
        """An installed rule key holding the id went."""
        self._refs[end_id] -= 1
        if self._refs[end_id] <= 0:
            del self._refs[end_id]

    def recount(self, held: Iterable[int]) -> None:
        """The counts from every installed rule key's ids (a full apply)."""
        self._refs = Counter(end_id for end_id in held if end_id)

    def free(self) -> None:
        """At the end of a change: the addresses no installed key names leave the map, after one wait
        for the program runs that may have read them; their ids go to the back of the free ones."""
        self._fresh.clear()
        self._free_unnamed(keep=set())

    def _free_unnamed(self, keep: set[int]) -> None:
        unnamed = {
            address: end_id for address, end_id in self._ids.items() if not self._refs[end_id] and end_id not in keep
        }
        if not unnamed:
            return
        try:
            self._table.wait_readers()
            self._table.delete([end_key(address) for address in unnamed])
        except DataplaneError as exc:
            log.warning("dpp_tunnel_ends: %d addresses no rule names stay for now: %s", len(unnamed), exc)
            return
        for address, end_id in unnamed.items():
            del self._ids[address]
            self._free.append(end_id)
        self._set_count()

    def _set_count(self) -> None:
        config = self._dpp.config_get()
        if config.tunnel_ends != len(self._ids):
            config.tunnel_ends = len(self._ids)
            self._dpp.config_set(config)

    @property
    def addresses(self) -> dict[IpAddress, int]:
        """Address -> id, as the map holds them."""
        return dict(self._ids)
