"""bench/pfcp_pieces.py: its timers wrap the functions the pieces name, count each piece once when
it nests in itself, take the timing's own cost out of the outer pieces, and put everything back; the
bench's run times them in an endpoint (without a data plane here)."""

from __future__ import annotations

import types

from bench import pfcp_pieces


def _module_with(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec("def inner(n):\n    return n * 2\n\n"
         "def outer(n):\n    return sum(inner(each) for each in range(n))\n\n"
         "def again(n):\n    return n if n == 0 else again(n - 1)\n", module.__dict__)
    return module


def test_the_pieces_are_timed_and_then_put_back(monkeypatch):
    module = _module_with("pieces_under_test")
    monkeypatch.setitem(__import__("sys").modules, "pieces_under_test", module)
    originals = (module.inner, module.outer, module.again)
    timers = pfcp_pieces.PieceTimers([(0, "outer", ("pieces_under_test:outer",)),
                                      (1, "inner", ("pieces_under_test:inner",)),
                                      (0, "again", ("pieces_under_test:again",)),
                                      (0, "absent", ("pieces_under_test:nowhere",))])
    with timers:
        assert module.outer(5) == 20 and module.again(3) == 0
    assert (module.inner, module.outer, module.again) == originals
    pieces = timers.pieces
    assert (pieces["outer"].calls, pieces["inner"].calls, pieces["again"].calls) == (1, 5, 1)
    assert pieces["outer"].inner == 5 and pieces["inner"].inner == 0
    assert timers.missing == ["pieces_under_test:nowhere"] and timers.timed_calls == [7]


def test_a_pieces_net_time_leaves_out_the_timing_inside_it():
    piece = pfcp_pieces.Piece([0])
    piece.cpu, piece.calls, piece.inner = 100e-6, 2, 10
    assert piece.net_us(wrapper_us=3.0, read_us=1.0) == 100 - 30 - 2
    assert piece.net_us(wrapper_us=10.0, read_us=1.0) == 0


def test_a_run_times_the_pieces_and_the_table_compares_two_runs():
    """A run of the endpoint without a data plane (in this process): the pieces it passes through
    are timed, each within the run's total; the table puts two runs side by side, a piece neither
    run passed through shown as none."""
    run = pfcp_pieces.run_side(40, 40, "none")
    assert run["pieces"]["the template match (Templates.match)"]["calls"] == 40
    assert run["pieces"]["the COMMIT (Transaction.commit)"]["calls"] >= 2
    assert "the maps (SessionChange.apply_to_maps)" in run["pieces"]  # NoApplier: none joined
    # within the run's total as timed: the total with every wrapper's estimated cost taken out may
    # come under a piece that lost only its inner wrappers' when the estimate runs high
    assert all(0 <= piece["us"] <= run["timed_cpu_us_per_establishment"] for piece in run["pieces"].values())
    assert run["pieces"]["the group's transaction (Upf.run_group)"]["us"] > 0
    table = pfcp_pieces.format_table({"baseline": {"commit": "0" * 40},
                                      "rounds": [{"order": ["baseline", "head"], "baseline": run, "head": run}]})
    assert "| . the template match (Templates.match) |" in table
    assert "| . . the policers (BpfApplier._write_policers) | - | - | - |" in table
