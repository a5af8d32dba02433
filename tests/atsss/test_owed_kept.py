"""What a refused put back was to carry is kept in the store until the heal (netapp.atsss.owed): a
restart in between writes the entries back past the numbers the UEs have seen. Over the fake data
plane, its maps kept across the restart as pinned maps are."""

from __future__ import annotations

import logging

from netapp.atsss.owed import SETTING, owed_of
from netapp.atsss.service import Atsss
from tests.atsss.test_changes_in_flight import ADMIN
from tests.atsss.test_replaced_paths import spec
from tests.atsss.test_replaced_paths_undo import a_delete_whose_put_back_was_refused, assert_written_back_past_their_numbers
from tests.utils.service import Clock


def test_a_restart_before_the_heal_carries_what_the_refused_put_back_was_to_carry(store):
    """The service restarts with the heal still owed: its start's reconcile carries the numbers, as
    the next change would have. Before, they lived in memory only: the paths came back from DCCP 0."""
    fake, _, slots = a_delete_whose_put_back_was_refused(store)
    assert owed_of(store) is not None, "kept"
    restarted = Atsss.start(store, fake.table)
    assert_written_back_past_their_numbers(fake, slots)
    assert owed_of(store) is None and restarted.heal_status() == "ok", "forgotten once carried"


def test_the_heal_forgets_what_was_kept(store):
    """Once the next change has healed the maps nothing is kept, and a restart after it finds the
    maps as the heal left them."""
    fake, atsss, slots = a_delete_whose_put_back_was_refused(store)
    atsss.put_session(ADMIN, "b", spec((3, 4), ue="10.45.0.9", name="b"))
    assert owed_of(store) is None
    assert store.get_setting(SETTING) is None
    Atsss.start(store, fake.table)
    assert_written_back_past_their_numbers(fake, slots)


def test_numbers_kept_by_a_build_of_another_layout_are_not_carried_and_the_reconcile_forgets_them(store, caplog):
    """An upgrade between the refusal and the start: the kept bytes are of other structs, so none
    is carried (the paths come back from 0, as before the store kept them), the log says why, and
    the start's reconcile forgets them."""
    fake, _, slots = a_delete_whose_put_back_was_refused(store)
    kept = store.get_setting(SETTING)
    session_fields, path_fields = kept["layouts"]
    moved_field = [[name, offset + 8, size] for name, offset, size in path_fields]  # same size, another layout
    with store.transaction():
        store.put_setting(SETTING, {**kept, "layouts": [session_fields, moved_field]}, Clock()())
    with caplog.at_level(logging.WARNING, logger="netapp.atsss.owed"):
        Atsss.start(store, fake.table)
    assert "laid out otherwise" in caplog.text
    paths = fake.table("dpp_atsss_paths")
    assert [paths.get(slot).dccp_seq for slot in slots] == [0, 0]
    assert owed_of(store) is None


def test_kept_numbers_that_cannot_be_read_are_not_carried_and_the_start_goes_on(store, caplog):
    """Bytes of the right layout but not of the structs' sizes (a store edited by hand, cut short):
    logged, not carried, and the start's reconcile goes on and forgets them."""
    fake, _, slots = a_delete_whose_put_back_was_refused(store)
    kept = store.get_setting(SETTING)
    with store.transaction():
        store.put_setting(SETTING, {**kept, "paths": {slot: value[:10] for slot, value in kept["paths"].items()}},
                          Clock()())
    with caplog.at_level(logging.WARNING, logger="netapp.atsss.owed"):
        Atsss.start(store, fake.table)
    assert "cannot be read" in caplog.text
    assert owed_of(store) is None
