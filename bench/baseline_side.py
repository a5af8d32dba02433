"""The --baseline side of a benchmark: a process that opens and fills instances with the baseline
revision's own code (its bench/, its netapp binding and compiler, its libdpp) and hands their
programs to the benchmark, which times them through its own harness, interleaved with HEAD's. The
rule struct and the binding that writes it change between revisions; each side writing its rules
with its own revision's code is what keeps both sides' ABI right.

It runs as a script, not as a module of this checkout:

    python bench/baseline_side.py BENCHMARK ROOT FD

BENCHMARK is "flows" (bench/flows), "dataplane" (bench/dataplane.py), "upf" (bench/upf) or "duplicate"
(bench/mec/duplicate.py), ROOT the baseline's export
(bench/build/baseline-<commit>: its dataplane/, netapp/ and bench/), FD a SOCK_SEQPACKET socket to
the benchmark. Only the standard library is imported before ROOT takes the place of this file's
directory at the head of sys.path, so none of this checkout's netapp or bench is loaded; `main`
checks that. The benchmark imports this module for `send` and `receive` only (bench/baseline.py).

One JSON object per message. First, unasked, "hello": the workload this revision sends, and where
its netapp and libdpp were loaded from. Then requests {"op": ...} that the benchmark's server below
answers (an "open" also passes the program's fd); a request that fails is answered
{"error": "..."}. The end of the socket closes every instance and ends the process.

What a server calls of the revision's code is the interface every revision must keep (listed in
bench/README.md for each benchmark).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import socket
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Optional, Sequence

MESSAGE_MAX = 1 << 16
Reply = tuple[dict[str, Any], list[int]]


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    # default=int: counters read through numpy are numpy integers.
    socket.send_fds(sock, [json.dumps(message, default=int).encode()], list(fds))


def receive(sock: socket.socket) -> tuple[Optional[dict[str, Any]], list[int]]:
    """The next message and the fds it carried; (None, []) at the end of the socket."""
    data, fds, _, _ = socket.recv_fds(sock, MESSAGE_MAX, 1)
    return (json.loads(data) if data else None), fds


class Server:
    """What a benchmark's server has: the revision's modules it imports (besides netapp), the
    requests it answers (each a method taking the request, returning the reply and fds to pass),
    and the instances it opened, closed at the end."""

    MODULES: tuple[str, ...] = ()
    OPS: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.instances: list = []

    def hello(self) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        for instance in self.instances:
            instance.close()


class FlowsServer(Server):
    """bench/flows:

        {"op": "open", "rules", "shapes", "cache", "max_flows"}
            -> {"instance", "key", "installed", "install_s", "max_rules"} and the program's fd
        {"op": "counts", "instance"} -> {"drop", "passed", "reasons", "rule_packets"}
    """

    MODULES = ("bench.flows.run", "bench.flows.workload")
    OPS = ("open", "counts")

    def __init__(self, modules: dict[str, ModuleType]):
        super().__init__()
        self.run, self.workload = modules["bench.flows.run"], modules["bench.flows.workload"]

    def hello(self) -> dict[str, Any]:
        workload = self.workload
        return {
            "packet": workload.packet().hex(),
            "teid_base": workload.TEID_BASE,
            "src_base": workload.SRC_BASE,
            "other_rules": workload.OTHER_RULES,
        }

    def open(self, request: dict[str, Any]) -> Reply:
        arguments = (request["rules"], request["shapes"], request["cache"], request["max_flows"])
        instance = self.run.open_instance(*arguments)
        self.instances.append(instance)
        sizes = getattr(self.run, "max_rules_for", None)
        reply = {
            "instance": len(self.instances) - 1,
            "key": instance.key,
            "installed": instance.installed,
            "install_s": instance.install_s,
            # Sized by its rule count since 98ea8f1; a fixed size before (None here).
            "max_rules": sizes(instance.rules, instance.shapes) if sizes else None,
        }
        return reply, [instance.handle.prog_fd()]

    def counts(self, request: dict[str, Any]) -> Reply:
        # The baseline's own reading of its counters (verdicts, reasons, rule counters).
        counts = dataclasses.asdict(self.run._counts(self.instances[request["instance"]]))
        return {name: int(value) for name, value in counts.items()}, []


class DataplaneServer(Server):
    """bench/dataplane.py, whose instances are bench/instances.py's:

        {"op": "open", "flow_cache", "case"} (case null: the instance shared by every case)
            -> {"instance", "rules", "shapes"} and the program's fd
        {"op": "grow", "instance", "rules"} -> {"rules", "installs": [{"rules", "seconds"}, ...]}
        {"op": "counters", "instance", "case"}
            -> {"verdicts", "actions", "reasons", "case_rule", "all_rules"} (packets by name)
    """

    MODULES = ("bench.instances", "bench.measure", "bench.workload")
    OPS = ("open", "grow", "counters")

    def __init__(self, modules: dict[str, ModuleType]):
        super().__init__()
        self.opener, self.measure = modules["bench.instances"], modules["bench.measure"]
        self.workload = modules["bench.workload"]

    def hello(self) -> dict[str, Any]:
        workload = self.workload
        return {
            "packets": {case: packet.hex() for case, packet in workload.case_packets().items()},
            "verdicts": dict(workload.CASE_VERDICTS),
            "actions": dict(workload.CASE_PIPELINE_ACTIONS),
            "alt_member": [workload.ALT_MEMBER.mac, str(workload.ALT_MEMBER.ip4)],
        }

    def open(self, request: dict[str, Any]) -> Reply:
        flow_cache, case = request["flow_cache"], request["case"]
        if case is None:
            instance = self.opener.open_shared(flow_cache)
        else:
            instance = self.opener.open_single_rule(flow_cache, case)
        self.instances.append(instance)
        reply = {"instance": len(self.instances) - 1, "rules": instance.rules, "shapes": instance.shapes}
        return reply, [instance.prog_fd]

    def grow(self, request: dict[str, Any]) -> Reply:
        instance = self.instances[request["instance"]]
        self.opener.grow(instance, request["rules"])
        installs = [{"rules": batch.rules, "seconds": batch.seconds} for batch in instance.installs]
        return {"rules": instance.rules, "installs": installs}, []

    def counters(self, request: dict[str, Any]) -> Reply:
        # The baseline's own reading of its counters: its binding's names for verdicts, actions, reasons.
        counters = self.measure.read_counters(self.instances[request["instance"]], request["case"])
        return dataclasses.asdict(counters), []


class UpfServer(Server):
    """bench/upf, whose instances are its run.py's (opened in the benchmark's network namespace, which
    this process starts in, so that the interface roles name its interfaces):

        {"op": "cases"} -> {"instances": {case: its instance's name}} (the cases this revision has)
        {"op": "open", "name", "sessions"} -> {"instance", "sessions"} and the program's fd
        {"op": "grow", "instance", "sessions"} -> {"sessions"}
        {"op": "counts", "instance"} -> {"verdicts", "actions", "reasons"} (packets by name)
    """

    MODULES = ("bench.upf.run", "bench.upf.workload")
    OPS = ("cases", "open", "grow", "counts")

    def __init__(self, modules: dict[str, ModuleType]):
        super().__init__()
        self.run, self.workload = modules["bench.upf.run"], modules["bench.upf.workload"]

    def hello(self) -> dict[str, Any]:
        workload = self.workload
        return {"packets": {name: packet().hex() for name, (packet, _, _) in workload.FLOOR_PACKETS.items()}}

    def cases(self, request: dict[str, Any]) -> Reply:
        return {"instances": {name: case.instance for name, case in self.workload.CASES.items()}}, []

    def open(self, request: dict[str, Any]) -> Reply:
        instance = self.run.open_instance(request["name"], request["sessions"])
        self.instances.append(instance)
        return {"instance": len(self.instances) - 1, "sessions": instance.sessions}, [instance.prog_fd]

    def grow(self, request: dict[str, Any]) -> Reply:
        instance = self.instances[request["instance"]]
        self.run.grow(instance, request["sessions"])
        return {"sessions": instance.sessions}, []

    def counts(self, request: dict[str, Any]) -> Reply:
        return self.run._counts(self.instances[request["instance"]].dataplane), []


class DuplicateServer(Server):
    """bench/mec/duplicate.py, whose instances this server opens with the revision's binding and
    compiler (opened in the benchmark's network namespace, which this process starts in, so that the
    intents' interfaces are its ports):

        {"op": "open", "document"} -> {"instance"} and the program's fd
    """

    MODULES = ("netapp.dataplane.binding", "netapp.dataplane.facade", "netapp.dataplane.abi",
               "netapp.intents.compiler", "netapp.intents.models")
    OPS = ("open",)

    def __init__(self, modules: dict[str, ModuleType]):
        super().__init__()
        self.modules = modules

    def hello(self) -> dict[str, Any]:
        return {}

    def open(self, request: dict[str, Any]) -> Reply:
        binding, facade = self.modules["netapp.dataplane.binding"], self.modules["netapp.dataplane.facade"]
        compiler, models = self.modules["netapp.intents.compiler"], self.modules["netapp.intents.models"]
        max_rules = self.modules["netapp.dataplane.abi"].MAX_RULES
        handle = binding.DppHandle.open(binding.load_libdpp(), None, max_rules=max_rules,
                                        default_verdict=binding.Verdict.DROP)
        dp = facade.Dataplane(handle)
        self.instances.append(dp)
        document = models.parse_document(request["document"])
        dp.apply_compiled(compiler.compile_document(document, facade.host_interfaces()))
        return {"instance": len(self.instances) - 1}, [handle.prog_fd()]


SERVERS = {"flows": FlowsServer, "dataplane": DataplaneServer, "upf": UpfServer, "duplicate": DuplicateServer}


def import_modules(server_class: type[Server]) -> dict[str, ModuleType]:
    """netapp and the server's MODULES, from wherever sys.path finds them (the benchmark calls this
    with its own, for the hello HEAD's workload gives)."""
    return {name: importlib.import_module(name) for name in ("netapp", *server_class.MODULES)}


def _serve(sock: socket.socket, server: Server) -> None:
    while True:
        request, _ = receive(sock)
        if request is None:
            return
        reply: dict[str, Any]
        fds: list[int] = []
        try:
            if request["op"] in server.OPS:
                reply, fds = getattr(server, request["op"])(request)
            else:
                reply = {"error": f"unknown request {request['op']!r}"}
        except Exception as exc:  # noqa: BLE001 - told to the benchmark, which stops
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        send(sock, reply, fds)


def main(argv: Sequence[str]) -> int:
    server_class, root, fd = SERVERS[argv[1]], Path(argv[2]).resolve(), int(argv[3])
    sys.path[0] = str(root)  # this file's directory, when run as a script
    modules = import_modules(server_class)
    for module in modules.values():
        if root not in Path(module.__file__).resolve().parents:
            raise SystemExit(f"baseline side: {module.__name__} comes from {module.__file__}, not {root}")
    sock = socket.socket(fileno=fd)
    server = server_class(modules)
    try:
        send(sock, server.hello() | {"netapp": str(Path(modules["netapp"].__file__).parent)})
        _serve(sock, server)
    finally:
        server.close()
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
