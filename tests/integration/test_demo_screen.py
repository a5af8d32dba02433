"""`netapp demo` (what `make demo` runs) in a terminal of 80x24, as a new user would see it.

The whole demo runs, not recorded states: edge site in network namespaces, the pipeline attached
natively, `netapp serve`, a real InfluxDB, the AI module, the paced traffic with its surges. Its
output goes to a pseudo-terminal of 80 columns and 24 lines, read by a terminal emulator (pyte).
The test waits for a screen that shows, all at once: the CPUs with their capacity, one of them
over it (the data plane's meter, not only the AI module's mark), the AI module's decision panel
with a decision carried out, and the forwarded-instead-of-dropped panel with priority overflow and
packets received by the alternative node, both non-zero (the paper's main effect). Then it presses
Ctrl-C and checks that the demo exits cleanly and removes its site.

On a loaded 2-core machine that screen comes some 30 s after the start (about 10 s of setup, then
the first surge overflows a CPU); the test takes about 45 s. Needs root, libdpp and influxd.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte
import pytest

from netapp.testbed.topology import leftover_sites
from tests.utils.influxd import require_influxd
from tests.utils.kernel import require_kernel

REPO = Path(__file__).resolve().parents[2]
COLUMNS, LINES = 80, 24
EFFECT_TIMEOUT_S = 90.0
EXIT_TIMEOUT_S = 30.0
SITE_LINE = re.compile(rb"edge site (\w+): ")  # the demo's intro names its site
CLOCK = re.compile(r"^\d\d:\d\d:\d\d$")


def _controlling_terminal() -> None:
    """In the child, after setsid: stdin (the pseudo-terminal) becomes its terminal, so that
    Ctrl-C typed there interrupts it, as in a shell."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _number(cell: str) -> int:
    return int(cell.replace(",", ""))


def _panel(lines: list[str], title: str) -> list[list[str]]:
    """The rows (split into cells) under a panel's title and header, up to the next blank line or title."""
    start = next((i for i, line in enumerate(lines) if line.startswith(title)), None)
    if start is None:
        return []
    rows = []
    for line in lines[start + 2:]:
        if not line.strip() or not line.startswith(" ") and not CLOCK.match(line[:8]):
            break
        rows.append(line.split())
    return rows


def main_effect_on(lines: list[str]) -> bool:
    """The CPUs with a capacity, one of them over it, a decision carried out, and forwarded
    traffic, on one screen."""
    cpus = _panel(lines, "CPUs: metered per")
    decisions = _panel(lines, "AI module: decisions")
    forwarded = {" ".join(row[2:4]): _number(row[0]) for row in _panel(lines, "forwarded to the alternative node")}
    return (
        len(cpus) >= 1 and all(row[1].endswith("/s") and _number(row[1][:-2]) > 0 for row in cpus)
        and any(row[-2:] == ["over", "capacity"] for row in cpus)  # the meter, not (only) the AI's mark
        and any(CLOCK.match(row[0]) and row[1] == "applied" for row in decisions)
        and forwarded.get("priority overflow:", 0) > 0
        and forwarded.get("received by", 0) > 0
    )


class Terminal:
    """A pseudo-terminal of COLUMNS x LINES and the screen a terminal would show."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)
        self.transcript = bytearray()  # everything written, for what scrolled off the screen
        self.closed = False

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def read(self, timeout: float) -> None:
        """What the program wrote within `timeout`, onto the screen; `closed` once it is gone."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return
        try:
            data = os.read(self.master, 1 << 16)
        except OSError:  # EIO: every writer closed the terminal
            data = b""
        if not data:
            self.closed = True
        self.transcript += data
        self.stream.feed(data)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> None:
        os.close(self.master)


@pytest.fixture
def terminal():
    term = Terminal()
    yield term
    term.close()


@pytest.mark.timeout(EFFECT_TIMEOUT_S + EXIT_TIMEOUT_S + 30)
def test_the_live_view_at_80x24_shows_ai_decisions_and_traffic_forwarded_instead_of_dropped(terminal):
    require_kernel()
    influxd = require_influxd()
    env = {name: value for name, value in os.environ.items()
           if name not in ("COLUMNS", "LINES") and not name.startswith("NETAPP_")}
    env.update(TERM="xterm-256color", INFLUXD=str(influxd))
    demo = subprocess.Popen(
        [sys.executable, "-m", "netapp.cli.main", "demo", "--duration", str(EFFECT_TIMEOUT_S + 30)],
        stdin=terminal.slave, stdout=terminal.slave, stderr=terminal.slave, env=env, cwd=REPO,
        start_new_session=True, preexec_fn=_controlling_terminal,
    )
    os.close(terminal.slave)
    try:
        deadline = time.monotonic() + EFFECT_TIMEOUT_S
        while not main_effect_on(terminal.lines()):
            assert not terminal.closed and time.monotonic() < deadline, (
                "no screen with a decision and forwarded traffic:\n" + "\n".join(terminal.lines()))
            terminal.read(0.5)
        shown = terminal.lines()

        terminal.type(b"\x03")  # Ctrl-C
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while not terminal.closed and time.monotonic() < deadline:
            terminal.read(0.5)
        assert demo.wait(EXIT_TIMEOUT_S) == 0, "\n".join(terminal.lines())
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()

    assert any(re.match(r"\+\d+s (surge|calm)", line) for line in shown), shown  # the status line
    assert "stopped: removed the service, its pins, the site and its files" in "\n".join(terminal.lines())
    site = SITE_LINE.search(bytes(terminal.transcript))
    assert site, "the demo did not name its edge site"
    assert site.group(1).decode() not in leftover_sites()  # other workers' sites may come and go meanwhile
