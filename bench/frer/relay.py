"""A path's delay, where the kernel has no netem: frames read from one interface are sent out of
another a fixed time later, in order. Run inside the path's namespace:

    python -m bench.frer.relay IN OUT DELAY_MS

It prints "ready" once both sockets are bound and relays until killed."""

from __future__ import annotations

import collections
import select
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def relay(inbound: str, outbound: str, delay_s: float) -> None:
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    rx.bind((inbound, ETH_P_ALL))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((outbound, 0))
    due: collections.deque[tuple[float, bytes]] = collections.deque()
    print("ready", flush=True)
    while True:
        timeout = max(0.0, due[0][0] - time.monotonic()) if due else 1.0
        if select.select([rx], [], [], timeout)[0]:
            while True:
                try:
                    frame, address = rx.recvfrom(65535, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if address[2] != PACKET_OUTGOING:
                    due.append((time.monotonic() + delay_s, frame))
        now = time.monotonic()
        while due and due[0][0] <= now:
            tx.send(due.popleft()[1])


if __name__ == "__main__":
    relay(sys.argv[1], sys.argv[2], float(sys.argv[3]) / 1000)
