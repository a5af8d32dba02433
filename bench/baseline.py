"""`--baseline REV`: the data plane as of a git revision, built on its own and measured beside this
checkout's, in the same interleaved runs.

`dataplane/`, `netapp/` and `bench/` at REV are exported with `git archive` into
bench/build/baseline-<commit>/ and REV's `dataplane/` is built there with its own Makefile (its
dpp.bpf.o, and its libdpp.so, which embeds that object through its skeleton). Structs such as
struct dpp_rule, and the binding that writes them, change between revisions, so REV's instances
are opened and filled by REV's own Python: `BaselineSide` runs bench/baseline_side.py in a process
of its own with REV's tree first on its path and DPP_LIBDPP at REV's libdpp, and receives the
programs' fds over a Unix socket; both sides are then timed through this checkout's harness. Each
side using its own revision's binding, no layout has to match across revisions.
"""

from __future__ import annotations

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

from netapp.dataplane.binding import LIBDPP_ENV

from bench import baseline_side
from bench.harness import BUILD_DIR, REPO

_CACHE_MIN_SHAPES = re.compile(r"^#define DPP_CACHE_MIN_SHAPES (\d+)", re.M)


class BaselineError(RuntimeError):
    """The baseline could not be exported, built, or driven by its own Python code."""


EXPORTED = ("dataplane", "netapp", "bench")


@dataclass(frozen=True)
class Baseline:
    rev: str  # as given on the command line
    commit: str  # what it resolved to
    root: Path  # bench/build/baseline-<commit>: the export of EXPORTED

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


def export(commit: str, root: Path, paths: Sequence[str] = EXPORTED) -> None:
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


def prepare(rev: str, build_dir: Path = BUILD_DIR, dataplane: bool = True) -> Baseline:
    """Export and build the baseline; returns where its tree and libdpp are (`dataplane` False:
    exported only, for a baseline that loads no data plane)."""
    commit = resolve(rev)
    baseline = Baseline(rev, commit, build_dir / f"baseline-{commit[:12]}")
    export(commit, baseline.root)
    if not dataplane:
        return baseline
    build(baseline.dataplane)
    if not baseline.libdpp.is_file():
        raise BaselineError(f"{baseline.libdpp} was not built")
    return baseline


def prepare_baseline(rev: Optional[str], build_dir: Path = BUILD_DIR, dataplane: bool = True) -> Optional[Baseline]:
    """`prepare` for a benchmark's --baseline (None without one), saying what it does on stderr."""
    if rev is None:
        return None
    exported = ", ".join(f"{path}/" for path in EXPORTED)
    building = " and building it" if dataplane else ""
    print(f"  baseline {rev}: exporting {exported}{building}", file=sys.stderr, flush=True)
    baseline = prepare(rev, build_dir, dataplane)
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
