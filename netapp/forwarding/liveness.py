"""Liveness of alternative nodes: GTP-U Echo (3GPP TS 29.281, 7.2.1/7.2.2) on UDP 2152.

Every NetApp is a GTP-U echo end point: one socket on port 2152 answers the Echo Requests it
receives and sends its own to each alternative node marked `probe`, every `interval`. A node that
has not answered for `interval x detect_multiplier` is down: the service takes it out of its
groups' active set, so the data plane stops forwarding to it; its first answer brings it back.

Why this probe (api/rest.md "Liveness of alternative nodes" says more): the answer comes from the
peer NetApp's process, so a node whose NetApp is gone is found even while its link is up (an ARP or
ICMP probe would still be answered by its kernel); and both directions stay out of the overload
path -- the data plane passes GTP-U signalling to the kernel whatever its CPUs' load (`is_benign` in
dpp.bpf.c), where a probe of another port would be best-effort traffic, forwarded away from an
overloaded node like the rest.

Nodes are tracked by address: a node in several groups is probed once. State changes are applied
(`on_change`, which writes the maps) before they are shown (`view`), so whoever sees a node down
knows the data plane no longer forwards to it.
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import logging
import select
import socket
import struct
import threading
import time
from datetime import datetime, timezone
from typing import Callable, Iterable, Mapping, Optional, Sequence

from netapp.telemetry.sample import AlternativeCounters

log = logging.getLogger(__name__)

GTPU_PORT = 2152
ECHO_REQUEST = 1
ECHO_RESPONSE = 2
RECOVERY_IE = 14  # TV, one octet: the restart counter, 0 in GTP-U (TS 29.281 8.2)
# Version 1, protocol type GTP, sequence number present (the Echo messages' S flag is mandatory).
FLAGS_S = 0x32
HEADER = struct.Struct("!BBHIHBB")  # flags, type, length, TEID, sequence, N-PDU number, next ext.
OPTIONAL_LEN = 4  # sequence, N-PDU number, next extension header type: counted in the length
MAX_DATAGRAM = 2048

# States of a member (api/rest.md): never probed, probed and not answered yet, answering, silent.
UNPROBED, INIT, UP, DOWN = "unprobed", "init", "up", "down"

Target = tuple[str, int]  # the address a member is probed at, and the port


def echo_request(sequence: int) -> bytes:
    return HEADER.pack(FLAGS_S, ECHO_REQUEST, OPTIONAL_LEN, 0, sequence & 0xFFFF, 0, 0)


def echo_response(sequence: int) -> bytes:
    body = bytes([RECOVERY_IE, 0])
    return HEADER.pack(FLAGS_S, ECHO_RESPONSE, OPTIONAL_LEN + len(body), 0, sequence & 0xFFFF, 0, 0) + body


def parse_echo(data: bytes) -> Optional[tuple[int, int]]:
    """(message type, sequence number) of a GTPv1-U Echo Request or Response with a sequence
    number; None for anything else (T-PDUs, other signalling, truncated or foreign datagrams)."""
    if len(data) < HEADER.size:
        return None
    flags, kind, length, _teid, sequence, _npdu, _next = HEADER.unpack_from(data)
    if flags >> 5 != 1 or not flags & 0x10 or not flags & 0x02:  # version 1, GTP, S flag
        return None
    if kind not in (ECHO_REQUEST, ECHO_RESPONSE) or 8 + length > len(data) or length < OPTIONAL_LEN:
        return None
    return kind, sequence


@dataclasses.dataclass(frozen=True)
class MemberLiveness:
    """What the API shows of one member."""

    state: str
    alive: bool  # in the active set: the data plane forwards to it
    since: Optional[datetime]  # when the state last changed (None: never changed)
    changes: int  # state changes since the service started
    last_answer: Optional[datetime]


@dataclasses.dataclass
class _Node:
    """One probed address: the state that decides (`state`) and the state shown (`shown`)."""

    target: Target
    started: float  # monotonic time probing began: the first detection deadline counts from it
    state: str = INIT
    shown: str = INIT
    since: Optional[datetime] = None
    changes: int = 0
    last_answer: Optional[float] = None
    last_answer_at: Optional[datetime] = None
    probes: int = 0
    answers: int = 0


class LivenessMonitor:
    """The echo end point and prober: one thread, a socket per address family.

    `watch(groups)` says which members to probe (group id -> per member, its Target or None when
    it is not probed); `on_change(group_ids)` is called from the thread, without the monitor's lock,
    when members of those groups became alive or dead: it rewrites their active sets, read with
    `active()`.
    """

    def __init__(
        self,
        interval_s: float,
        detect_multiplier: int,
        on_change: Callable[[frozenset[int]], None],
        *,
        port: int = GTPU_PORT,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ):
        self.interval_s = interval_s
        self.detect_s = interval_s * detect_multiplier
        self._on_change = on_change
        self._port = port
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._groups: dict[int, list[Optional[Target]]] = {}
        self._nodes: dict[Target, _Node] = {}
        self._outstanding: dict[int, tuple[Target, float]] = {}  # sequence -> where and when sent
        self._sequence = 0
        self._unapplied: set[Target] = set()  # changes on_change refused: tried again every loop
        self._sockets: list[socket.socket] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # --- lifecycle -------------------------------------------------------------------------------

    def open(self, bind4: str = "0.0.0.0", bind6: Optional[str] = "::") -> None:
        """Bind the echo sockets (in the caller's network namespace); OSError if IPv4's fails.
        IPv6 is optional: a host without it probes IPv4 members only."""
        four = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            four.bind((bind4, self._port))
        except OSError:
            four.close()
            raise
        four.setblocking(False)
        self._sockets.append(four)
        if bind6 is None:
            return
        try:
            six = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            six.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            six.bind((bind6, self._sockets[0].getsockname()[1]))
        except OSError as exc:
            log.info("GTP-U echo: no IPv6 socket (%s); IPv6 members are not probed", exc)
            return
        six.setblocking(False)
        self._sockets.append(six)

    @property
    def port(self) -> int:
        """The bound port (the configured one; a test may ask for any free one with 0)."""
        return self._sockets[0].getsockname()[1]

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="alt-liveness", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake()
        if self._thread is not None:
            self._thread.join()
        for sock in (*self._sockets, self._wake_r, self._wake_w):
            sock.close()
        self._sockets = []

    # --- what to probe, and what it found ----------------------------------------------------------

    def watch(self, groups: Mapping[int, Sequence[Optional[Target]]]) -> None:
        """Probe the members of `groups` from now on (and no others). A node already probed keeps
        its state; a new one starts in INIT, not alive until it answers."""
        with self._lock:
            self._groups = {group: list(targets) for group, targets in groups.items()}
            wanted = {target for targets in self._groups.values() for target in targets if target}
            now = self._clock()
            for target in wanted - self._nodes.keys():
                self._nodes[target] = _Node(target, started=now)
            for target in self._nodes.keys() - wanted:
                del self._nodes[target]
        self._wake()

    def active(self, group: int) -> list[int]:
        """Indexes of the group's members the data plane should forward to (unprobed or alive)."""
        with self._lock:
            targets = self._groups.get(group, [])
            return [i for i, target in enumerate(targets) if target is None or self._nodes[target].state == UP]

    def view(self, group: int, count: int) -> list[MemberLiveness]:
        """The shown state of the group's `count` members (unprobed beyond what is watched)."""
        with self._lock:
            targets = self._groups.get(group, [])
            return [self._member_view(targets[i] if i < len(targets) else None) for i in range(count)]

    def _member_view(self, target: Optional[Target]) -> MemberLiveness:
        node = self._nodes.get(target) if target is not None else None
        if node is None:
            return MemberLiveness(UNPROBED, True, None, 0, None)
        return MemberLiveness(node.shown, node.shown == UP, node.since, node.changes, node.last_answer_at)

    def counters(self) -> list[AlternativeCounters]:
        """Each probed node, for telemetry (dpp_alternative)."""
        with self._lock:
            return [
                AlternativeCounters(node.target[0], node.shown == UP, node.changes, node.probes, node.answers)
                for node in self._nodes.values()
            ]

    # --- the thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._loop()
            except Exception:  # noqa: BLE001 - the prober must outlive one bad datagram or write
                log.exception("GTP-U echo: restarting the loop")
                self._stop.wait(self.interval_s)

    def _loop(self) -> None:
        next_probe = self._clock()
        while not self._stop.is_set():
            now = self._clock()
            if now >= next_probe:
                self._probe_all(now)
                next_probe = now + self.interval_s
            self._apply(self._expire(now))
            wake_at = min(next_probe, self._next_deadline())
            timeout = max(0.0, wake_at - self._clock())
            readable, _, _ = select.select([*self._sockets, self._wake_r], [], [], timeout)
            changed: set[Target] = set()
            for sock in readable:
                if sock is self._wake_r:
                    self._wake_r.recv(64)
                    next_probe = self._clock()  # new members: probe them now
                else:
                    changed |= self._receive(sock)
            self._apply(changed)

    def _probe_all(self, now: float) -> None:
        with self._lock:
            self._outstanding = {s: sent for s, sent in self._outstanding.items() if now - sent[1] <= self.detect_s}
            nodes = list(self._nodes.values())
        for node in nodes:
            sock = self._socket_for(node.target[0])
            if sock is None:
                continue
            with self._lock:
                self._sequence = (self._sequence + 1) & 0xFFFF
                sequence = self._sequence
                self._outstanding[sequence] = (node.target, now)
                node.probes += 1
            try:
                sock.sendto(echo_request(sequence), node.target)
            except OSError as exc:  # no route, unreachable: the node stays silent, which is the news
                log.debug("GTP-U echo to %s: %s", node.target[0], exc)

    def _socket_for(self, address: str) -> Optional[socket.socket]:
        family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
        return next((sock for sock in self._sockets if sock.family == family), None)

    def _receive(self, sock: socket.socket) -> set[Target]:
        answered: set[Target] = set()
        while True:
            try:
                data, source = sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return answered
            except OSError as exc:  # an ICMP error queued on the socket: ignored, silence decides
                if exc.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
                    continue
                raise
            echo = parse_echo(data)
            if echo is None:
                continue
            kind, sequence = echo
            if kind == ECHO_REQUEST:
                self._answer(sock, sequence, source)
            else:
                answered |= self._answered(sequence, source)

    def _answer(self, sock: socket.socket, sequence: int, source: tuple) -> None:
        try:
            sock.sendto(echo_response(sequence), source)
        except OSError as exc:
            log.debug("GTP-U echo response to %s: %s", source[0], exc)

    def _answered(self, sequence: int, source: tuple) -> set[Target]:
        """The node an Echo Response came from, when it answers a request we sent it."""
        with self._lock:
            sent = self._outstanding.pop(sequence, None)
            if sent is None or not _same_address(sent[0][0], source[0]):
                return set()
            node = self._nodes.get(sent[0])
            if node is None:
                return set()
            node.answers += 1
            # The wall time first: a pause between the two reads then makes the answer's wall time
            # earlier than its monotonic one, never later, so the time a node is shown down is
            # at least interval x multiplier after its last answer shown, in wall time too.
            node.last_answer_at = self._wall()
            node.last_answer = self._clock()
            if node.state == UP:
                return set()
            node.state = UP
            return {node.target}

    def _expire(self, now: float) -> set[Target]:
        """Nodes whose answer is overdue: down (from up, or from init once the first one is)."""
        expired = set()
        with self._lock:
            for node in self._nodes.values():
                if node.state != DOWN and now >= self._deadline(node):
                    node.state = DOWN
                    expired.add(node.target)
        return expired

    def _deadline(self, node: _Node) -> float:
        return (node.last_answer if node.last_answer is not None else node.started) + self.detect_s

    def _next_deadline(self) -> float:
        with self._lock:
            pending = [self._deadline(node) for node in self._nodes.values() if node.state != DOWN]
        return min(pending, default=float("inf"))

    def _apply(self, changed: set[Target]) -> None:
        """Have the maps follow, then show the new states (and log them). Refused: kept, and
        tried again with the next changes or within an interval."""
        changed = changed | self._unapplied
        if not changed:
            return
        with self._lock:
            groups = frozenset(
                group for group, targets in self._groups.items() if changed.intersection(targets)
            )
        try:
            self._on_change(groups)
        except Exception:  # the maps keep the old set
            if not self._unapplied:
                log.exception("alternative groups %s: active members not updated", sorted(groups))
            self._unapplied = changed
            return
        self._unapplied = set()
        with self._lock:
            for target in changed:
                node = self._nodes.get(target)
                if node is None or node.shown == node.state:
                    continue
                node.shown, node.since = node.state, self._wall()
                node.changes += 1
                self._log(node, groups)

    def _log(self, node: _Node, groups: Iterable[int]) -> None:
        where = ", ".join(str(group) for group in sorted(groups)) or "none"
        if node.state == UP:
            log.warning("alternative node %s is up: answers GTP-U echo (groups %s)", node.target[0], where)
        else:
            log.warning(
                "alternative node %s is down: no GTP-U echo answer for %.0f ms; not forwarded to (groups %s)",
                node.target[0],
                self.detect_s * 1000,
                where,
            )

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # closed or full: the thread wakes anyway


def _same_address(expected: str, got: str) -> bool:
    """`got` may be IPv4-mapped IPv6 or carry a scope; compare the addresses themselves."""
    try:
        a, b = ipaddress.ip_address(expected), ipaddress.ip_address(got.split("%")[0])
    except ValueError:
        return False
    if isinstance(b, ipaddress.IPv6Address) and b.ipv4_mapped is not None:
        b = b.ipv4_mapped
    return a == b
