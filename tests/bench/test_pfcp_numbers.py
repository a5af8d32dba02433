"""bench/pfcp_numbers.py: it times this checkout's number choice against a revision's (here the
checkout's own HEAD), so that it fails when netapp.upf.slots changes under it."""

from __future__ import annotations

from bench import pfcp_numbers
from netapp.upf import slots


def test_it_times_the_checkouts_number_choice():
    assert pfcp_numbers.per_establishment(slots, 50) > 0


def test_it_compares_head_with_a_revision(capsys):
    assert pfcp_numbers.main(["--baseline", "HEAD", "--rounds", "2", "--count", "50"]) == 0
    out = capsys.readouterr().out
    assert "head / baseline by round: [" in out and out.count("median") == 2
