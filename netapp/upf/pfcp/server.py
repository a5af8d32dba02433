"""The PFCP endpoint: a UDP socket (default port 8805) answering an SMF, and sending it usage reports.

Each datagram is decoded (netapp.upf.pfcp.codec), answered by its handler (netapp.upf.pfcp.handlers)
and counted by what came of it. A request repeated by the same peer with the same sequence number is
a retransmission: it gets the response already sent, byte for byte, and has no second effect (the
responses are kept in a bounded cache, for `cache_ttl_s`). A datagram that is not PFCP is dropped and
counted by kind; a request whose header can be read but whose IEs cannot is answered with Invalid
length or Mandatory IE incorrect; a version other than 1 gets Version Not Supported (29.244 7.6).
Nothing a peer sends stops the endpoint: an unexpected error in a handler is counted and answered
with System failure.

Requests are handled on the event loop's thread, in arrival order: those the loop reads together
(the datagrams waiting in the socket when it looks) are handled as the parts of one transaction
(`Upf.run_group`), so that one sync of the disk serves many, and answered once it is committed and
applied. Establishments of a shape met before are not decoded but made from a template
(netapp.upf.pfcp.templates). A retransmission of a request still queued is counted and dropped: the
response is on its way. One thread, no hand-off: a request costs no future, no lock and no wake-up
of another thread (a writer thread of its own cost some 70 us an establishment: bench/README.md);
the loop reads nothing while a group is handled, and the datagrams that come meanwhile are the next
group.

`PfcpServer` runs the endpoint on an event loop of its own thread (`netapp serve` runs the REST API on
the main one). Its URR logic (`usage`, netapp.upf.usage) sends usage reports with `send_usage`, which
does not wait; `report_usage` does, from any thread.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import gc
import itertools
import logging
import socket
import sys
import termios
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Optional, Union

from netapp.service.contract import ServiceError
from netapp.upf.models import RuleError
from netapp.upf.pfcp.codec import IE, Header, MalformedMessage, Message, decode, decode_header, encode, group, leaf, message
from netapp.upf.pfcp.handlers import Handlers, Peer, node_id_of
from netapp.upf.pfcp.ies import PFCP_PORT, REQUESTS, Cause, IEType, MsgType
from netapp.upf.pfcp.templates import Templates
from netapp.upf.peers import PeerGate, SmfPeers
from netapp.upf.sessions import Upf
from netapp.upf.usage import UsageMonitor, UsageReport

log = logging.getLogger("netapp.upf.pfcp")

MAX_GROUP = 256  # requests handled in one transaction at most
GC_YOUNG = 10_000  # allocations between young collections once settled (Python's default: 700)
T1_S = 3.0  # how long a Session Report Request waits for its response before it is sent again
N1 = 3  # how many times it is sent
# What the N4 socket may hold while a group is handled: some 4,000 requests (the kernel counts
# about 1 KiB a datagram), 0.4 s of them at 10,000 a second. A burst (an SMF's restart re-establishing
# its sessions) waits in it instead of being dropped and sent again after the SMF's T1 (seconds).
RECEIVE_BUFFER = 4 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)  # past net.core.rmem_max (CAP_NET_ADMIN)


def settle_collector() -> None:
    """Start-up is over (modules, the app, the sessions loaded): Python's cyclic garbage collector
    is told so. What start-up made is frozen out of its walk (gc.freeze): a full collection then
    walks only what was made since, not the whole process, so its pause does not grow with
    start-up's hundreds of thousands of objects. Young collections come every GC_YOUNG allocations
    instead of 700: a group of requests in flight (some 150 objects a request) is then seldom caught
    alive by one and promoted, which is what brings the full collections on. The price: what is
    frozen is never collected (garbage cycles of start-up stay; objects freed by reference counting
    are freed as ever), and cycles made later are found a little later. Process-wide: called once,
    by `netapp serve`."""
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG), middle, old)


class ResponseCache:
    """The last responses by peer and sequence number, at most `size`, each for `ttl_s`. An entry
    holds no tuple of its own but its key (the peer's address, port and the sequence number, flat):
    an entry outlives many young collections, and every container made since the last one is walked
    by the next, which comes after GC_YOUNG of them (`settle_collector`)."""

    def __init__(self, size: int = 10_000, ttl_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        # the responses, oldest first, and when each expires (a float: not a container the collector walks)
        self._entries: collections.OrderedDict[tuple[str, int, int], bytes] = collections.OrderedDict()
        self._expiry: dict[tuple[str, int, int], float] = {}
        self._size, self._ttl_s, self._clock = size, ttl_s, clock

    def get(self, peer: Peer, seq: int) -> Optional[bytes]:
        self._expire()
        return self._entries.get((peer[0], peer[1], seq))

    def put(self, peer: Peer, seq: int, response: bytes) -> None:
        key = (peer[0], peer[1], seq)
        self._entries[key] = response
        self._entries.move_to_end(key)
        self._expiry[key] = self._clock() + self._ttl_s
        while len(self._entries) > self._size:
            del self._expiry[self._entries.popitem(last=False)[0]]

    def __len__(self) -> int:
        return len(self._entries)

    def _expire(self) -> None:
        now, entries, expiry = self._clock(), self._entries, self._expiry
        while entries and expiry[next(iter(entries))] <= now:
            del expiry[entries.popitem(last=False)[0]]


class Undecoded:
    """A request handled from its bytes (the fast path of establishments, netapp.upf.pfcp.templates):
    its type and sequence number at hand, decoded only should it be refused (a refusal names IEs)."""

    def __init__(self, header: Header, data: bytes):
        self.type, self.seq, self.data = header.type, header.seq, data

    def decoded(self) -> Message:
        return decode(self.data)


Request = Union[Message, Undecoded]
Response = Union[Message, bytes, None]  # None: none (a Heartbeat refused); bytes: made from a template
Job = tuple[Callable[[], Any], Request, Peer]  # the work; the request; its peer


class PfcpProtocol(asyncio.DatagramProtocol):
    """The endpoint's datagrams, on the loop's thread. `open_requests()` before the first datagram,
    `close_requests()` after the last."""

    def __init__(self, handlers: Handlers, cache: ResponseCache):
        self.handlers = handlers
        self.cache = cache
        self.counters: collections.Counter[str] = collections.Counter()
        self.transport: Optional[asyncio.DatagramTransport] = None
        # our requests' sequence numbers -> the response's future, and the address it must come from
        self._pending: dict[int, tuple[asyncio.Future[Message], str]] = {}
        self._seq = itertools.count(1)
        self._in_flight: set[tuple[Peer, int]] = set()  # requests queued or being handled
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._queue: collections.deque[Job] = collections.deque()  # requests read, not yet handled
        self._draining = 0  # a drain is scheduled (> 0), and how often it has let the loop read on
        self._open = False  # requests are taken
        self.gate: Optional[PeerGate] = None  # pfcp.peers; None: every peer is admitted
        self.templates: Optional[Templates] = Templates.of(handlers)  # None: every establishment the full way

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self._loop = asyncio.get_running_loop()

    def open_requests(self) -> None:
        self._open = True

    def close_requests(self) -> None:
        """Handle the requests queued, take no more (from any thread; the loop may be running)."""

        def close() -> None:
            self._open = False
            self._drain(whole=True)

        if self._loop is None or not self._loop.is_running() or _on_thread_of(self._loop):
            close()
            return
        closed: Future[None] = Future()
        self._loop.call_soon_threadsafe(lambda: (close(), closed.set_result(None)))
        closed.result()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        peer = (addr[0], addr[1])
        self.counters["received"] += 1
        try:
            self._receive(data, peer)
        except Exception:  # never let a datagram stop the endpoint
            self.counters["internal_error"] += 1
            log.exception("PFCP: a datagram from %s:%s failed", *peer)

    def _receive(self, data: bytes, peer: Peer) -> None:
        try:
            header, _ = decode_header(data)
        except MalformedMessage as exc:
            self.counters[f"malformed_{exc.kind}"] += 1
            if exc.kind == "bad_version" and exc.header is not None:
                self._send(encode(message(MsgType.VERSION_NOT_SUPPORTED_RESPONSE, exc.header.seq, None)), peer)
            return
        if self.gate is not None and not self._admitted(header, data, peer):
            return
        is_request = header.type in REQUESTS
        if is_request and (cached := self.cache.get(peer, header.seq)) is not None:
            self.counters["retransmission"] += 1
            self._send(cached, peer)
            return
        if is_request and (peer, header.seq) in self._in_flight:
            self.counters["retransmission"] += 1  # answered once handled
            return
        if header.type == MsgType.SESSION_ESTABLISHMENT_REQUEST and self._established_fast(header, data, peer):
            return
        try:
            msg = decode(data)
        except MalformedMessage as exc:
            self.counters[f"malformed_{exc.kind}"] += 1
            if is_request and exc.kind in ("bad_length", "bad_ie") and header.type in self.handlers.by_type:
                cause = Cause.INVALID_LENGTH if exc.kind == "bad_length" else Cause.MANDATORY_IE_INCORRECT
                request = message(header.type, header.seq, header.seid)
                self._answer(request, self.handlers.refusal(request, RuleError(cause, str(exc), exc.ie_type)), peer)
            return
        if msg.type == MsgType.SESSION_REPORT_RESPONSE:
            pending = self._pending.get(msg.seq)
            if pending is None or pending[1] != peer[0]:  # none of ours, or another peer's to answer
                self.counters["unexpected_message"] += 1
                return
            self.counters["report_response"] += 1
            del self._pending[msg.seq]
            if not pending[0].done():
                pending[0].set_result(msg)
            return
        handler = self.handlers.by_type.get(msg.type)
        if handler is None:
            self.counters["unexpected_message"] += 1
            return
        if msg.type == MsgType.SESSION_ESTABLISHMENT_REQUEST and self.templates is not None:
            templates = self.templates
            self._submit(lambda: templates.establish_full(msg, peer, data), msg, peer)
        else:
            self._submit(lambda: handler(msg, peer), msg, peer)

    def _established_fast(self, header: Header, data: bytes, peer: Peer) -> bool:
        """An establishment of a known shape, queued to be made from its template, undecoded
        (netapp.upf.pfcp.templates); False: of no known shape."""
        matched = self.templates.match(data) if self.templates is not None else None
        if matched is None:
            return False
        template, values = matched
        templates = self.templates
        self._submit(lambda: templates.establish(template, values, data, peer), Undecoded(header, data), peer)
        return True

    def _submit(self, work: Callable[[], Any], request: Request, peer: Peer) -> None:
        """Queue the request's work; it is handled once the datagrams read with it are queued too."""
        if not self._open or self._loop is None:
            raise RuntimeError("the PFCP endpoint takes no requests")
        self._in_flight.add((peer, request.seq))
        self._queue.append((work, request, peer))
        if not self._draining:
            self._draining = 1
            self._loop.call_soon(self._drain)

    def _drain(self, whole: bool = False) -> None:
        """The requests queued, in groups of at most MAX_GROUP (one transaction each), each answered
        once its group is committed. Datagrams still waiting in the socket are read into the group
        first (`whole`: none): the loop is let run once more for them."""
        if not whole and len(self._queue) < MAX_GROUP and self._draining <= MAX_GROUP and self._unread():
            self._draining += 1
            self._loop.call_soon(self._drain)  # type: ignore[union-attr]
            return
        self._draining = 0
        collecting = gc.isenabled()
        gc.disable()  # until the groups' objects are freed: `_answer_queued`
        try:
            self._answer_queued()
        finally:
            if collecting:
                gc.enable()

    def _answer_queued(self) -> None:
        """The queue's groups handled and answered, with the cyclic collector held off (`_drain`): a
        group's objects (some 40 containers a request: its session's facts, the undo's closures, the
        parts) live until it is answered, and a group of 200, as a backlog makes them, holds more than
        the GC_YOUNG allocations a young collection waits for: one would come in nearly every group,
        walk it alive and promote it for the middle generation to walk again. Once this returns they
        are freed (by reference counting, as ever), and the collection then due walks only what
        outlives them. Process-wide, but for this span alone: cycles made meanwhile wait for its end."""
        while self._queue:
            jobs = [self._queue.popleft() for _ in range(min(MAX_GROUP, len(self._queue)))]
            self.counters["groups"] += 1  # transactions: a group's fixed cost is shared by its requests
            for job, response in zip(jobs, self._handled(jobs)):
                self._answer(job[1], response, job[2])

    def _unread(self) -> bool:
        """A datagram waits in the socket (FIONREAD: the size of the next one)."""
        sock = self.transport.get_extra_info("socket") if self.transport is not None else None
        if sock is None:
            return False
        waiting = bytearray(4)
        try:
            fcntl.ioctl(sock.fileno(), termios.FIONREAD, waiting)
        except OSError:
            return False
        return int.from_bytes(waiting, sys.byteorder) > 0

    def _admitted(self, header: Header, data: bytes, peer: Peer) -> bool:
        """pfcp.peers (netapp.upf.peers): an Association Setup it refuses is answered Request
        rejected; anything else from an address it does not cover is dropped. Both counted."""
        setup = header.type == MsgType.ASSOCIATION_SETUP_REQUEST
        why = self.gate.refusal(peer[0], _setup_node_id(data) if setup else None)  # type: ignore[union-attr]
        if why is None:
            return True
        self.counters["refused_peer"] += 1
        if setup:
            request = message(header.type, header.seq, None)
            self._send(encode(self.handlers.refusal(request, RuleError(Cause.REQUEST_REJECTED, why))), peer)
        return False

    def _handled(self, jobs: list[Job]) -> list[Response]:
        """The requests, in one transaction; a response each (should the whole fail unexpectedly,
        each the refusal its error earns)."""
        try:
            outcomes = self.handlers.upf.run_group([job[0] for job in jobs])
        except Exception as exc:  # noqa: BLE001 - the endpoint lives on: each request is answered
            log.exception("PFCP: a group of %d requests failed as a whole", len(jobs))
            outcomes = [exc] * len(jobs)
        return [self._response(job[1], job[2], outcome) for job, outcome in zip(jobs, outcomes)]

    def _response(self, msg: Request, peer: Peer, outcome: Any) -> Response:
        """The response to `msg`: the handler's (its bytes, from a template), or the refusal its
        error earns."""
        if not isinstance(outcome, Exception):
            self.counters["accepted"] += 1
            if isinstance(outcome, bytes):
                self.counters["accepted_from_template"] += 1
            return outcome() if callable(outcome) else outcome  # a response finished once committed
        if isinstance(msg, Undecoded):
            msg = msg.decoded()
        if isinstance(outcome, RuleError):
            error = outcome
        elif isinstance(outcome, ServiceError):  # the store failed
            error = RuleError(Cause.SYSTEM_FAILURE, str(outcome))
        elif isinstance(outcome, (KeyError, TypeError, ValueError)):  # an IE without the fields its flags promise
            error = RuleError(Cause.MANDATORY_IE_INCORRECT, f"{type(outcome).__name__}: {outcome}")
        else:
            self.counters["internal_error"] += 1
            log.error("PFCP: %s from %s:%s failed", MsgType(msg.type).name, *peer, exc_info=outcome)
            error = RuleError(Cause.SYSTEM_FAILURE, f"{type(outcome).__name__}: {outcome}")
        self.counters[f"refused_{error.cause.name.lower()}"] += 1
        log.info("PFCP: %s from %s:%s refused: %s", MsgType(msg.type).name, *peer, error)
        return self.handlers.refusal(msg, error)

    def _answer(self, request: Request, response: Response, peer: Peer) -> None:
        self._in_flight.discard((peer, request.seq))
        if response is None:
            return
        data = response if isinstance(response, bytes) else encode(response)
        self.cache.put(peer, request.seq, data)
        self._send(data, peer)

    def _send(self, data: bytes, peer: Peer) -> None:
        if self.transport is not None:
            self.transport.sendto(data, peer)

    async def request(self, msg_type: MsgType, seid: int, ies: list[IE], peer: Peer, t1_s: float, n1: int) -> Message:
        """Send a request to the peer and wait for its response, sending it again up to n1 times."""
        seq = next(self._seq) % (1 << 24) or next(self._seq)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[seq] = (future, peer[0])
        data = encode(message(msg_type, seq, seid, *ies))
        try:
            for _ in range(n1):
                self._send(data, peer)
                try:
                    return await asyncio.wait_for(asyncio.shield(future), t1_s)
                except asyncio.TimeoutError:
                    self.counters["request_timeout"] += 1
            raise TimeoutError(f"no response from {peer[0]}:{peer[1]} to {msg_type.name} after {n1} tries")
        finally:
            self._pending.pop(seq, None)


class PfcpServer:
    """The endpoint on `host`:`port` (0: any free port), on an event loop in a thread of its own."""

    def __init__(self, upf: Upf, host: str = "0.0.0.0", port: int = PFCP_PORT, *, node_id: Optional[str] = None,
                 cache: Optional[ResponseCache] = None, peers: Optional[SmfPeers] = None):
        self.upf = upf
        self.peers = peers  # who may use N4 (pfcp.peers); None: anyone
        self._bind = (host, port)
        own = upf.n3_ipv4 or upf.n3_ipv6 or (host if host not in ("0.0.0.0", "::") else "127.0.0.1")
        self.usage = UsageMonitor(upf, self._report)
        self.protocol = PfcpProtocol(Handlers(upf, node_id or own, own, self.usage), cache or ResponseCache())
        self.protocol.gate = PeerGate(peers) if peers is not None else None
        self._loop = _event_loop()
        self._thread: Optional[threading.Thread] = None
        self.address: Optional[Peer] = None
        self._on_close: list[Callable[[], None]] = []

    def close_with(self, close: Callable[[], None]) -> None:
        """Call `close` once the endpoint has stopped (what serves it, e.g. the route watch)."""
        self._on_close.append(close)

    @property
    def counters(self) -> dict[str, int]:
        return dict(self.protocol.counters)

    def start(self) -> None:
        """Bind and serve; OSError if the address cannot be bound."""
        transport, _ = self._loop.run_until_complete(
            self._loop.create_datagram_endpoint(lambda: self.protocol, sock=n4_socket(*self._bind))
        )
        self.protocol.open_requests()
        self.address = transport.get_extra_info("sockname")[:2]
        self._thread = threading.Thread(target=self._loop.run_forever, name="pfcp", daemon=True)
        self._thread.start()
        log.info("PFCP: serving on %s port %s", *self.address)

    def close(self) -> None:
        self.protocol.close_requests()
        if self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._thread = None
        if self.protocol.transport is not None:
            self.protocol.transport.close()
        self._loop.run_until_complete(asyncio.sleep(0))  # let the transport finish closing
        self._loop.close()
        for close in reversed(self._on_close):
            close()

    def report_usage(self, seid: int, reports: list[UsageReport], t1_s: float = T1_S, n1: int = N1) -> Cause:
        """Send a Session Report Request with the usage reports to the session's SMF; its Cause.
        Raises RuleError (unknown session or association) or TimeoutError (no response)."""
        return self.send_usage(seid, reports, t1_s, n1).result()

    def send_usage(
        self, seid: int, reports: list[UsageReport], t1_s: float = T1_S, n1: int = N1
    ) -> "Future[Cause]":
        """`report_usage` without waiting: the Cause (or the error) comes in the future. Raises
        RuleError at once for an unknown session or association."""
        ies = [leaf(IEType.REPORT_TYPE, usar=1), *(report.ie() for report in reports)]
        return self.send_report(seid, ies, t1_s, n1)

    def send_report(self, seid: int, ies: list[IE], t1_s: float = T1_S, n1: int = N1) -> "Future[Cause]":
        """A Session Report Request of `ies` to the session's SMF, without waiting: the Cause (or
        the error) comes in the future. Raises RuleError at once for an unknown session or association."""
        session = self.upf.require_session(seid)
        association = self.upf.require_association(session.node_id)
        if self.peers is not None and not self.peers.admits_node(association.address, association.node_id):
            raise RuleError(Cause.NO_ESTABLISHED_ASSOCIATION,
                            f"{association.node_id} at {association.address} is no longer in pfcp.peers")
        peer = (association.address, association.port)
        coroutine = self.protocol.request(MsgType.SESSION_REPORT_REQUEST, session.remote.seid, ies, peer, t1_s, n1)
        return asyncio.run_coroutine_threadsafe(_cause_of(coroutine), self._loop)

    def report_downlink_data(self, seid: int, pdr_ids: list[int]) -> None:
        """A Downlink Data Report (report type DLDR; 29.244 7.5.8.2) naming the PDRs whose FAR buffers
        with NOCP, sent without waiting (netapp.upf.buffering); a refusal or no answer is logged."""
        ies = [leaf(IEType.REPORT_TYPE, dldr=1),
               group(IEType.DOWNLINK_DATA_REPORT, *(leaf(IEType.PDR_ID, id=pdr_id) for pdr_id in pdr_ids))]
        self._send_logged(seid, ies, "downlink data report")


    def _report(self, seid: int, reports: list[UsageReport]) -> None:
        """The URR logic's reports, sent without waiting; a refusal or no answer is logged."""
        ies = [leaf(IEType.REPORT_TYPE, usar=1), *(report.ie() for report in reports)]
        self._send_logged(seid, ies, "usage report")

    def _send_logged(self, seid: int, ies: list[IE], what: str) -> None:
        def done(future: "Future[Cause]") -> None:
            error = future.exception()
            if error is not None or future.result() != Cause.REQUEST_ACCEPTED:
                log.warning("PFCP: the %s of session %#x: %s", what, seid, error or future.result().name)

        try:
            self.send_report(seid, ies).add_done_callback(done)
        except RuleError as exc:  # the session or its association went in the meantime
            log.info("PFCP: the %s of session %#x not sent: %s", what, seid, exc)


def n4_socket(host: str, port: int) -> socket.socket:
    """The endpoint's UDP socket, bound, its receive buffer RECEIVE_BUFFER: forced past
    net.core.rmem_max (212,992 bytes unless raised: some 200 requests) where the process may
    (`netapp serve` runs as root), else as large as rmem_max lets it be."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _event_loop() -> asyncio.AbstractEventLoop:
    """libuv's (uvloop, a dependency of the package) where it is installed: it reads the datagrams
    waiting in the socket in one go, and sends and receives for a fraction of asyncio's own cost;
    else asyncio's, which reads one datagram per turn of the loop (a group is then read a turn at a
    time: `PfcpProtocol._drain`)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - a dependency; without it, slower
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _on_thread_of(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _setup_node_id(data: bytes) -> Optional[str]:
    """The Node ID of an Association Setup Request; None when it cannot be read (the request is
    then refused as malformed by the usual path)."""
    try:
        ie = decode(data).ies.one(IEType.NODE_ID)
        return None if ie is None else node_id_of(ie)
    except (MalformedMessage, RuleError, KeyError, ValueError):
        return None


async def _cause_of(request: Any) -> Cause:
    """The Cause of the response the request gets."""
    response = await request
    cause = response.ies.one(IEType.CAUSE)
    if cause is None:
        return Cause.MANDATORY_IE_MISSING
    try:
        return Cause(cause["cause"])
    except ValueError:  # a cause we have no name for: a rejection all the same
        return Cause.REQUEST_REJECTED
