"""bench/pfcp_process.py's timer of the store's COMMITs: it counts and times each COMMIT made while
it is entered (none before, none after), and leaves the store's commit as it found it."""

from __future__ import annotations

from bench.pfcp_process import CommitTimer
from netapp.service.store import Store, Transaction


def _commit_one(store: Store) -> None:
    with store.transaction():
        store.execute("INSERT OR REPLACE INTO settings (name, value, updated_at) VALUES ('probe', '1', 'now')")


def test_the_timer_counts_and_times_only_the_commits_made_while_entered(tmp_path):
    store = Store.open(tmp_path / "netapp.db")
    commit = Transaction.commit
    try:
        timer = CommitTimer()
        _commit_one(store)  # before: not counted
        with timer:
            _commit_one(store)
            _commit_one(store)
        _commit_one(store)  # after: not counted
        assert timer.count == 2
        assert timer.wall > 0 and 0 <= timer.cpu
        assert Transaction.commit is commit
    finally:
        Transaction.commit = commit  # type: ignore[method-assign]
        store.close()


def test_a_run_handles_its_timed_requests_in_groups_of_the_size_asked_one_commit_a_group():
    from bench.pfcp_process import run_side

    for group, commits in ((1, 6), (4, 2), (6, 1)):
        run = run_side(6, 4, "none", group=group)
        assert run["commits"] == commits, (group, run)
        assert run["process_cpu_us_per_establishment"] > 0 and run["cpu_us_per_establishment"] > 0
