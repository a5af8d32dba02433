"""scripts/step, the runner of every setup step of `make demo` and `make test`: what it says before,
while and after a command runs, and that a live view keeps its terminal."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STEP = REPO / "scripts" / "step"


def step(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(STEP), *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def test_a_step_says_what_runs_then_passes_the_output_on_then_says_how_long_it_took():
    result = step("-n", "2/5", "-t", "about 30 s", "building the data plane", "sh", "-c", "echo one; echo two >&2")

    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[:3] == ["[2/5] building the data plane (about 30 s)...", "one", "two"]
    assert re.fullmatch(r"\[2/5\] building the data plane: done in \d+ s", lines[3])
    assert len(lines) == 4 and result.stderr == ""


def test_a_failing_step_says_so_with_the_command_status_and_exits_with_it():
    result = step("-n", "1/5", "installing Debian packages", "sh", "-c", "echo half-way; exit 3")

    assert result.returncode == 3
    assert result.stdout.splitlines() == ["[1/5] installing Debian packages...", "half-way"]
    assert re.fullmatch(r"\[1/5\] installing Debian packages: failed after \d+ s \(exit status 3\)\n", result.stderr)


def test_an_unnumbered_step_and_a_step_with_nothing_to_do():
    assert step("building", "true").stdout.splitlines()[0] == "building..."
    assert step("-n", "3/5", "Python packages: up to date").stdout == "[3/5] Python packages: up to date\n"


def test_the_last_step_says_how_long_the_setup_took():
    started = int(time.time()) - 171
    result = step("-n", "5/5", "-s", str(started), "-x", "running the tests", "echo", "summary")

    first, last = result.stdout.splitlines()
    assert re.fullmatch(r"\[5/5\] running the tests, after 2 min 5[12] s of setup\.\.\.", first)
    assert last == "summary"  # -x: the command's last line stays the last (pytest's summary in CI)


def test_a_quiet_command_gets_a_line_saying_it_still_runs(tmp_path: Path):
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    runner = subprocess.Popen(
        [str(STEP), "-n", "4/5", "building InfluxDB", "sh", "-c", f"echo started; read line < {gate}; echo released"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "STEP_HEARTBEAT": "1"},
        start_new_session=True,  # its process group, so that a failed test leaves no command behind
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in runner.stdout:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        seen = []
        while not seen or not seen[-1].startswith("[4/5] building InfluxDB: still running, "):
            seen.append(lines.get(timeout=10))  # queue.Empty: no heartbeat came
        with open(gate, "w") as release:  # the command says nothing until this line arrives
            release.write("go\n")
        assert runner.wait(timeout=30) == 0
    finally:
        with contextlib.suppress(ProcessLookupError):  # gone already when the test passed
            os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
    reader.join(timeout=10)
    rest = [lines.get_nowait() for _ in range(lines.qsize())]

    assert seen[:2] == ["[4/5] building InfluxDB...\n", "started\n"]
    assert rest[-2] == "released\n"
    assert rest[-1].startswith("[4/5] building InfluxDB: done in ")


def test_only_a_handed_over_command_sees_the_terminal():
    """The live view of `netapp demo` needs a terminal; steps whose lines are passed on do not get one."""
    probe = [sys.executable, "-c", "import sys; print('terminal' if sys.stdout.isatty() else 'pipe')"]

    assert terminal_output(["-x", "demo", *probe]).splitlines()[-1] == "terminal"
    assert terminal_output(["pip", *probe]).splitlines()[1] == "pipe"


def terminal_output(args: list[str]) -> str:
    """What scripts/step prints, run with a pseudo-terminal as its stdout."""
    leader, follower = os.openpty()
    try:
        subprocess.run([str(STEP), *args], stdout=follower, timeout=60, check=True)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the last writer is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode().replace("\r\n", "\n")
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_without_a_label_it_says_how_to_call_it():
    result = step()
    assert result.returncode == 2
    assert result.stderr.startswith("usage: scripts/step ")
