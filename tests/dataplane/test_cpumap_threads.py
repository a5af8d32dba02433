"""Finding a CPUMAP entry's kernel thread in /proc (a made-up /proc here; the service test on the
real kernel checks the thread it finds and the priority it sets)."""

from __future__ import annotations

from pathlib import Path

from netapp.dataplane.cpumap_threads import find_threads, newest


def task(proc: Path, pid: int, comm: str, started: int = 100) -> None:
    folder = proc / str(pid)
    folder.mkdir(parents=True)
    (folder / "comm").write_text(comm + "\n")
    # pid (comm) state ppid ... : field 22 is the start time
    (folder / "stat").write_text(f"{pid} ({comm}) S 2 " + " ".join(["0"] * 17) + f" {started} 0 0\n")


def test_the_full_name_wins_and_a_rewritten_entry_shows_two_threads_the_newest_live(tmp_path):
    task(tmp_path, 10, "cpumap/1/map:4321", started=100)
    task(tmp_path, 11, "cpumap/1/map:4321", started=250)  # the entry was written again
    task(tmp_path, 12, "cpumap/1/map:432")  # another map
    task(tmp_path, 13, "cpumap/2/map:4321")  # another CPU
    assert sorted(find_threads(1, 4321, tmp_path)) == [10, 11]
    assert newest([10, 11], tmp_path) == 11
    assert newest([10, 99], tmp_path) == 10  # 99 has ended


def test_a_cut_name_counts_only_when_it_is_the_only_one(tmp_path):
    task(tmp_path, 20, "cpumap/1/map:12")  # "cpumap/1/map:12345" as kernels before 6.4 show it
    assert find_threads(1, 12345, tmp_path) == [20]
    task(tmp_path, 21, "cpumap/1/map:12")  # map 12999's thread looks the same: ambiguous
    assert find_threads(1, 12345, tmp_path) == []


def test_a_comm_with_spaces_and_parentheses_does_not_shift_the_fields(tmp_path):
    task(tmp_path, 30, "cpumap/1/map:7", started=5)
    task(tmp_path, 31, "x) (y z", started=9)
    assert newest([30, 31], tmp_path) == 31


def test_within_one_clock_tick_the_pid_handed_out_last_is_the_newest_even_across_a_wrap(tmp_path):
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "pid_max").write_text("32768\n")
    task(tmp_path, 32760, "cpumap/1/map:4321", started=700)
    task(tmp_path, 32767, "cpumap/1/map:4321", started=700)
    task(tmp_path, 301, "cpumap/1/map:4321", started=700)  # pids wrapped between the writes
    assert newest([32760, 301, 32767], tmp_path) == 301
    assert newest([32760, 32767], tmp_path) == 32767
    task(tmp_path, 302, "cpumap/1/map:4321", started=650)  # an earlier tick loses whatever its pid
    assert newest([302, 32760], tmp_path) == 32760
