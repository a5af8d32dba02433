"""The --baseline side of the flow-mix benchmark: a process that opens and fills instances with the
baseline revision's own code (its bench/flows/run.py, its netapp binding and compiler, its libdpp)
and hands their programs to the benchmark, which times them through its own harness, interleaved
with HEAD's. The rule struct and the binding that writes it change between revisions; each side
writing its rules with its own revision's code is what keeps both sides' ABI right.

It runs as a script, not as a module of this checkout:

    python bench/flows/baseline_side.py ROOT FD

ROOT is the baseline's export (bench/build/baseline-<commit>: its dataplane/, netapp/ and bench/),
FD a SOCK_SEQPACKET socket to the benchmark. Only the standard library is imported before ROOT
takes the place of this file's directory at the head of sys.path, so none of this checkout's
netapp or bench is loaded; `main` checks that. The benchmark imports this module for `send` and
`receive` only.

One JSON object per message. First, unasked, "hello": the workload this revision sends. Then:

    {"op": "open", "rules", "shapes", "cache", "max_flows"}
        -> {"instance", "key", "installed", "install_s", "max_rules"} and the program's fd
    {"op": "counts", "instance"} -> {"drop", "passed", "reasons", "rule_packets"}

A request that fails is answered {"error": "..."}. The end of the socket closes every instance and
ends the process.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

MESSAGE_MAX = 1 << 16


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def receive(sock: socket.socket) -> tuple[Optional[dict[str, Any]], list[int]]:
    """The next message and the fds it carried; (None, []) at the end of the socket."""
    data, fds, _, _ = socket.recv_fds(sock, MESSAGE_MAX, 1)
    return (json.loads(data) if data else None), fds


def _hello(workload: Any, netapp: Any) -> dict[str, Any]:
    return {
        "packet": workload.packet().hex(),
        "teid_base": workload.TEID_BASE,
        "src_base": workload.SRC_BASE,
        "other_rules": workload.OTHER_RULES,
        "netapp": str(Path(netapp.__file__).parent),
    }


def _serve(sock: socket.socket, run: Any, instances: list) -> None:
    sizes = getattr(run, "max_rules_for", None)
    while True:
        request, _ = receive(sock)
        if request is None:
            return
        fds: list[int] = []
        try:
            if request["op"] == "open":
                instance = run.open_instance(
                    request["rules"], request["shapes"], request["cache"], request["max_flows"]
                )
                instances.append(instance)
                reply = {
                    "instance": len(instances) - 1,
                    "key": instance.key,
                    "installed": instance.installed,
                    "install_s": instance.install_s,
                    # Sized by its rule count since 98ea8f1; a fixed size before (None here).
                    "max_rules": sizes(instance.rules, instance.shapes) if sizes else None,
                }
                fds = [instance.handle.prog_fd()]
            elif request["op"] == "counts":
                # The baseline's own reading of its counters (verdicts, reasons, rule counters).
                counts = dataclasses.asdict(run._counts(instances[request["instance"]]))
                reply = {name: int(value) for name, value in counts.items()}
            else:
                reply = {"error": f"unknown request {request['op']!r}"}
        except Exception as exc:  # noqa: BLE001 - told to the benchmark, which stops
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        send(sock, reply, fds)


def main(argv: Sequence[str]) -> int:
    root, fd = Path(argv[1]).resolve(), int(argv[2])
    sys.path[0] = str(root)  # this file's directory, when run as a script
    import netapp
    from bench.flows import run, workload

    for module in (netapp, run):
        if root not in Path(module.__file__).resolve().parents:
            raise SystemExit(f"baseline side: {module.__name__} comes from {module.__file__}, not {root}")
    sock = socket.socket(fileno=fd)
    instances: list = []
    try:
        send(sock, _hello(workload, netapp))
        _serve(sock, run, instances)
    finally:
        for instance in instances:
            instance.close()
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
