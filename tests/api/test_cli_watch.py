"""`netapp stats --watch` when the NetApp goes away: it says since when above the last tables, asks
again every 2 s, and carries on when a server answers again at the same address (a real uvicorn,
stopped and started on its port); an error that asking again cannot mend ends it, after the tables."""

from __future__ import annotations

import io
import re

from rich.console import Console, RenderableType
from typer.testing import CliRunner

from netapp.cli.client import Api
from netapp.cli.main import app
from netapp.cli.status import RETRY_S, StatsWatch
from netapp.service.contract import DataplaneUnavailable, Forbidden
from tests.api.conftest import token_of
from tests.api.server import ServerThread


def text(frame: RenderableType) -> str:
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(frame)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_a_watch_rides_out_a_restart_of_the_server(api_app, service):
    with ServerThread(api_app) as first:
        port = first.socket.getsockname()[1]
        watch = StatsWatch(Api(first.url, token_of("admin")))
        assert "updated" in text(watch.poll()).splitlines()[0]

    shown = text(watch.poll())  # the server is gone

    status = shown.splitlines()[0]
    assert re.match(
        rf"server unreachable since \d\d:\d\d:\d\d, retrying every 2 s; the tables below are from "
        rf"\d\d:\d\d:\d\d: cannot reach the NetApp at http://127.0.0.1:{port} \(ConnectError", status
    ), status
    assert "intents" in shown and watch.pause(0.5) == RETRY_S
    with ServerThread(api_app, port=port):
        assert "updated" in text(watch.poll()).splitlines()[0]
    assert watch.down_since is None and watch.pause(0.5) == 0.5


def test_a_failing_server_is_shown_above_the_last_tables_until_it_answers(server, service):
    watch = StatsWatch(Api(server.url, token_of("admin")))
    watch.poll()
    service.fail_next(DataplaneUnavailable("the maps are being reloaded"))

    status, *tables = text(watch.poll()).splitlines()

    assert status.startswith("server failing (503) since ") and status.endswith("the maps are being reloaded")
    assert "intents" in tables[0]
    assert "updated" in text(watch.poll()).splitlines()[0]


def test_a_watch_refused_later_ends_with_its_error_line_after_the_tables(server, service, monkeypatch):
    allowed = service.stats
    polls = []

    def stats(who):
        polls.append(who)
        if len(polls) > 1:
            raise Forbidden("this token may no longer read statistics")
        return allowed(who)

    monkeypatch.setattr(service, "stats", stats)
    # A terminal, as rich sees it: the tables are a live view that a later line could be painted over by.
    env = {"NETAPP_URL": server.url, "NETAPP_TOKEN": token_of("admin"), "TTY_COMPATIBLE": "1",
           "TTY_INTERACTIVE": "1"}

    result = CliRunner().invoke(app, ["stats", "--watch", "--interval", "0.2"], env=env)

    assert result.exit_code == 1 and len(polls) == 2
    assert "intents" in result.stdout
    assert result.output.endswith(
        "netapp: GET /api/v1/stats: 403 this token may no longer read statistics (this token lacks the scope)\n"
    ), result.output
