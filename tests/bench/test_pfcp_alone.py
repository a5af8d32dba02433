"""bench/pfcp_alone.py: it times this checkout's applier pieces (a group's policers written into a
loaded instance, a group's entries split into the slot tables') against a revision's (here the
checkout's own HEAD), so that it fails when the functions it calls change under it."""

from __future__ import annotations

from bench import pfcp_alone
from netapp.upf import applier
from tests.utils.kernel import require_kernel


def test_it_times_the_split_of_a_groups_entries():
    assert pfcp_alone.slots(applier, 2) > 0


def test_it_compares_head_with_a_revision(capsys):
    require_kernel()
    assert pfcp_alone.main(["--baseline", "HEAD", "--rounds", "2", "--groups", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("head / baseline by round: [") == 2 and out.count("median") == 4
