"""`--baseline REV`: the data plane as of a git revision, built on its own and measured beside this
checkout's, in the same interleaved runs.

`dataplane/` at REV is exported with `git archive` into bench/build/baseline-<commit>/ and built
there with its own Makefile (its dpp.bpf.o, and its libdpp.so, which embeds that object through its
skeleton). The baseline is then driven exactly like HEAD: through this checkout's Python binding
(`load_libdpp(path)`) and facade. That is only honest while every struct and enum the benchmark
passes through libdpp has the same layout at REV as in HEAD's binding, so `check_abi` compiles a
probe against REV's headers and compares every size, offset and enum count with HEAD's ctypes
mirrors first; any difference (or a member REV lacks) stops the benchmark with an explanation
instead of measuring garbage. dpp_trace and dpp_test_result are left out on purpose: the benchmark
runs programs through its own harness, never through dpp_test_run, and dpp_flows is never touched
from userspace.

A benchmark whose baseline must run its own revision's Python (bench/flows: the rule struct it
writes, and the binding that writes it, change between revisions) exports netapp/ and bench/ as
well (`prepare(rev, own_python=True)`) and drives that tree in a process of its own
(`BaselineSide`: bench/baseline_side.py); no ABI check is needed then, each side using its own
revision's binding.
"""

from __future__ import annotations

import ctypes
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from netapp.dataplane import binding
from netapp.dataplane.binding import LIBDPP_ENV

from bench import baseline_side
from bench.harness import BUILD_DIR, REPO

# What the benchmark hands to libdpp or gets back from it (DppHandle.open, rules_upsert,
# shapes_publish/get, config_get/set, cpu_enable, table_update of dpp_alt_groups, stats_*).
CROSSING_STRUCTS = (
    binding.OpenOpts,
    binding.FlowKey,
    binding.Rule,
    binding.Shape,
    binding.ShapeSet,
    binding.Config,
    binding.Cpu,
    binding.AltMember,
    binding.AltGroup,
    binding.Counter,
)
# Counter tables are sized by these: a different count would make libdpp write past our arrays.
CROSSING_COUNTS = {
    "DPP_VERDICT_MAX": binding.VERDICT_MAX,
    "DPP_ACTION_MAX": binding.ACTION_MAX,
    "DPP_REASON_MAX": binding.REASON_MAX,
    "DPP_MAX_SHAPES": binding.MAX_SHAPES,
    "DPP_MAX_ALT_MEMBERS": binding.MAX_ALT_MEMBERS,
}
_CACHE_MIN_SHAPES = re.compile(r"^#define DPP_CACHE_MIN_SHAPES (\d+)", re.M)


class BaselineError(RuntimeError):
    """The baseline could not be exported, built, or driven (by this checkout's binding, or by its
    own Python code)."""

DATAPLANE_ONLY = ("dataplane",)
WITH_PYTHON = ("dataplane", "netapp", "bench")


@dataclass(frozen=True)
class Baseline:
    rev: str  # as given on the command line
    commit: str  # what it resolved to
    root: Path  # bench/build/baseline-<commit>; the export is root / "dataplane"

    @property
    def dataplane(self) -> Path:
        return self.root / "dataplane"

    @property
    def libdpp(self) -> Path:
        return self.dataplane / "build" / "libdpp.so"

    @property
    def bpf_object(self) -> Path:
        return self.dataplane / "build" / "dpp.bpf.o"

    def shown(self, path: Path) -> str:
        """`path` in the baseline's tree as a result names it: relative to the repository (results
        must not name the machine they were made on), or to the build directory when elsewhere."""
        path = path.resolve()
        return str(path.relative_to(REPO if path.is_relative_to(REPO) else self.root.parent.resolve()))

    def describe(self) -> dict[str, Any]:
        return {"rev": self.rev, "commit": self.commit, "libdpp": self.shown(self.libdpp)}


def _git(*args: str) -> str:
    result = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    if result.returncode:
        raise BaselineError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


def resolve(rev: str) -> str:
    return _git("rev-parse", "--verify", f"{rev}^{{commit}}")


def export(commit: str, root: Path, paths: Sequence[str] = DATAPLANE_ONLY) -> None:
    """`paths` (top-level directories) as of `commit` into root (kept when already exported from it)."""
    stamp = root / "COMMIT"
    if stamp.is_file() and stamp.read_text().strip() == commit and all((root / p).is_dir() for p in paths):
        return
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", commit, *paths], capture_output=True
    )
    if archive.returncode:
        raise BaselineError(f"git archive {commit} {' '.join(paths)}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.12 (and late 3.11): refuse odd members
            tar.extractall(root, filter="data")
        else:
            tar.extractall(root)
    stamp.write_text(commit + "\n")


def build(dataplane: Path) -> None:
    """`make` in the exported tree: its own BPF object, skeleton and libdpp."""
    result = subprocess.run(["make", "-C", str(dataplane)], capture_output=True, text=True)
    if result.returncode:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        raise BaselineError(f"building {dataplane} failed:\n{tail}")


_PROBE = """#include <stdio.h>
#include <stddef.h>
#include "libdpp.h"
int main(void)
{
%s
	return 0;
}
"""


def _probe_source() -> str:
    lines = []
    for mirror in CROSSING_STRUCTS:
        lines.append(f'\tprintf("{mirror.C_NAME} . %zu\\n", sizeof(struct {mirror.C_NAME}));')
        for name, *_ in mirror._fields_:
            lines.append(
                f'\tprintf("{mirror.C_NAME} {name} %zu\\n", offsetof(struct {mirror.C_NAME}, {name}));'
            )
    for name in CROSSING_COUNTS:
        lines.append(f'\tprintf("{name} . %d\\n", (int){name});')
    return _PROBE % "\n".join(lines)


def expected_layout() -> dict[tuple[str, str], int]:
    """HEAD's binding: every size and offset of the crossing structs, and the counts."""
    layout = {}
    for mirror in CROSSING_STRUCTS:
        layout[(mirror.C_NAME, ".")] = ctypes.sizeof(mirror)
        for name, *_ in mirror._fields_:
            layout[(mirror.C_NAME, name)] = getattr(mirror, name).offset
    layout.update(((name, "."), value) for name, value in CROSSING_COUNTS.items())
    return layout


def check_abi(baseline: Baseline, work: Optional[Path] = None) -> None:
    """Raise BaselineError unless HEAD's binding lays out what the benchmark passes exactly as the
    baseline's headers do."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise BaselineError("no C compiler to check the baseline's ABI")
    work = work or baseline.root
    source, program = work / "abi_probe.c", work / "abi_probe"
    source.write_text(_probe_source())
    include = baseline.dataplane / "include" / "dpp"
    compiled = subprocess.run(
        [compiler, "-I", str(include), "-o", str(program), str(source)], capture_output=True, text=True
    )
    why = f"this checkout's binding (netapp/dataplane/binding.py) cannot drive libdpp at {baseline.rev}"
    if compiled.returncode:
        raise BaselineError(f"{why}: its headers lack what the binding passes:\n{compiled.stderr.strip()}")
    printed = subprocess.run([str(program)], capture_output=True, text=True, check=True).stdout
    found = {(a, b): int(c) for a, b, c in (line.split() for line in printed.splitlines())}
    expected = expected_layout()
    differ = {key: (found.get(key), value) for key, value in expected.items() if found.get(key) != value}
    if differ:
        details = ", ".join(
            f"{a} {b}: {then} at REV, {now} in HEAD" for (a, b), (then, now) in sorted(differ.items())
        )
        raise BaselineError(f"{why}: layouts differ ({details})")


def cache_min_shapes(dataplane: Path) -> int:
    """DPP_CACHE_MIN_SHAPES of a dataplane tree: from how many shapes its flow cache is consulted
    (bpf/core/classify.h; bpf/classify.h in trees older than the proto/core/nf layout)."""
    header = dataplane / "bpf" / "core" / "classify.h"
    if not header.exists():
        header = dataplane / "bpf" / "classify.h"
    match = _CACHE_MIN_SHAPES.search(header.read_text())
    if match is None:
        raise BaselineError(f"{header} defines no DPP_CACHE_MIN_SHAPES")
    return int(match.group(1))


def prepare(rev: str, build_dir: Path = BUILD_DIR, own_python: bool = False) -> Baseline:
    """Export, build and check the baseline; returns where its libdpp is. own_python: its netapp/
    and bench/ are exported too, for a process of its own to drive it (no ABI check then)."""
    commit = resolve(rev)
    baseline = Baseline(rev, commit, build_dir / f"baseline-{commit[:12]}")
    export(commit, baseline.root, WITH_PYTHON if own_python else DATAPLANE_ONLY)
    build(baseline.dataplane)
    if not baseline.libdpp.is_file():
        raise BaselineError(f"{baseline.libdpp} was not built")
    if not own_python:
        check_abi(baseline)
    return baseline


def prepare_baseline(rev: Optional[str], build_dir: Path = BUILD_DIR) -> Optional[Baseline]:
    """`prepare` for a benchmark's --baseline run by its own Python (None without one), saying what
    it does on stderr."""
    if rev is None:
        return None
    exported = ", ".join(f"{path}/" for path in WITH_PYTHON)
    print(f"  baseline {rev}: exporting {exported} and building it", file=sys.stderr, flush=True)
    baseline = prepare(rev, build_dir, own_python=True)
    print(f"  baseline {rev} = {baseline.commit}: {baseline.root}", file=sys.stderr, flush=True)
    return baseline


SIDE_SCRIPT = Path(baseline_side.__file__).resolve()
SIDE_EXIT_WAIT_S = 60  # closing instances of a million rules takes seconds


class BaselineSide:
    """The baseline's process (bench/baseline_side.py serving `benchmark`) and the socket to it. Its
    hello must be the one the same server gives from this checkout's modules: the same workload."""

    def __init__(self, baseline: Baseline, benchmark: str):
        self.baseline = baseline
        server = baseline_side.SERVERS[benchmark]
        expected = server(baseline_side.import_modules(server)).hello()
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ, PYTHONPATH=str(baseline.root), **{LIBDPP_ENV: str(baseline.libdpp)})
        try:
            self._process = subprocess.Popen(
                [sys.executable, str(SIDE_SCRIPT), benchmark, str(baseline.root), str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=env,
            )
        finally:
            theirs.close()
        self.hello = self._receive()[0]
        differ = {
            name: (self.hello.get(name), value) for name, value in expected.items() if self.hello.get(name) != value
        }
        if differ:
            self.close()
            details = ", ".join(f"{name}: {then!r} at REV, {now!r} in HEAD" for name, (then, now) in differ.items())
            raise BaselineError(f"the baseline's {benchmark} workload differs from HEAD's ({details})")

    def _receive(self) -> tuple[dict[str, Any], list[int]]:
        message, fds = baseline_side.receive(self._sock)
        if message is None:
            raise BaselineError(f"the baseline's process ended (exit status {self._process.wait()}); see above")
        if "error" in message:
            raise BaselineError(f"the baseline's process: {message['error']}")
        return message, fds

    def request(self, message: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
        """The baseline's reply to `message` and the fds it passed."""
        baseline_side.send(self._sock, message)
        return self._receive()

    def netapp(self) -> str:
        """Where the baseline's netapp ran from, as a result names it (the export's, not ours)."""
        return self.baseline.shown(Path(self.hello["netapp"]))

    def close(self) -> None:
        """End of the socket: the baseline's process closes its instances and exits."""
        self._sock.close()
        try:
            self._process.wait(SIDE_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def pair(head: dict[str, Any], baseline: dict[str, Any]) -> None:
    """Add to both results of one configuration the other's figures and the ratios HEAD / baseline:
    of ns (floor included, ratio_to_baseline) and of ns above the floor
    (above_floor_ratio_to_baseline; None when the baseline's is not above the floor)."""
    ratios = {
        "ratio_to_baseline": head["ns"] / baseline["ns"],
        "above_floor_ratio_to_baseline": (
            head["ns_above_floor"] / baseline["ns_above_floor"] if baseline["ns_above_floor"] > 0 else None
        ),
    }
    head.update(baseline_ns=baseline["ns"], baseline_ns_above_floor=baseline["ns_above_floor"], **ratios)
    baseline.update(head_ns=head["ns"], head_ns_above_floor=head["ns_above_floor"], **ratios)
