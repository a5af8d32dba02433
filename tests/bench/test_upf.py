"""The UPF benchmark (bench/upf): its bulk entries are the compiler's, its walks rewrite the fields
its sessions differ by, a small run in the kernel checks its own paths, a wrong expectation stops it,
and the README's table is the one the committed result gives."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import pytest

from bench import baseline, insns_command
from bench.upf import __main__ as upf_main
from bench.upf import insns, report, workload
from bench.upf import run as upf_run
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.qos.abi import Algo
from netapp.testbed import netns
from netapp.upf.abi import PdrFlag, Role
from netapp.upf.applier import BpfApplier, iface_entries
from tests.bench.conftest import BASELINE_TIMEOUT
from tests.utils.kernel import require_kernel

REPO = Path(__file__).resolve().parents[2]


def test_bulk_entries_are_the_compilers_at_every_row():
    uplink, downlink = workload.uplink_arrays(1, 40, n9=True), workload.downlink_arrays(1, 40)
    for row, i in enumerate(range(1, 40)):
        ((_, up),) = workload.compiled(i, n9=True).uplink.items()
        ((_, down),) = workload.compiled(i).downlink.items()
        up.flags |= PdrFlag.ENTRY  # in its TEID's slot of dpp_upf_teids
        assert bytes(uplink.values[row]) == bytes(up) and bytes(downlink.values[row]) == bytes(down)
        assert uplink.keys[row] == workload.TEID_BASE + i


@pytest.mark.parametrize("sessions", [40, 3000])
def test_bulk_ways_are_where_the_applier_puts_them(sessions):
    """dpp_upf_dl4's bulk ways: the applier's own placement of the same sessions, way and value."""
    sizes = workload.map_sizes(sessions)
    fake = FakeDpp(map_sizes=sizes)
    applier = BpfApplier(Dataplane(fake).table, workload.site(), iface_entries({6: (Role.N6, 1)}, workload.N3_IP, None))
    for i in range(sessions):
        applier.apply(None, workload.session(i).model_copy(update={"urr_slots": {1: workload.urr_slot(i)}}))
    ways, overflow = workload.dl4_arrays(0, sessions, sizes["dpp_upf_dl4"])
    assert len(overflow) == 0 and sizes["dpp_upf_dl4"] >= 2 * sessions
    assert {int(key): bytes(value) for key, value in zip(ways.keys, ways.values)} == {
        slot: bytes(way) for slot, way in fake.entries("dpp_upf_dl4").items()}


def test_the_walks_rewrite_the_fields_sessions_differ_by():
    up, down = workload.uplink_walk(10), workload.downlink_walk(10)
    sent = workload.walked(workload.uplink_packet(), up, 7)
    assert sent[up.teid_off : up.teid_off + 4] == (workload.TEID_BASE + 7).to_bytes(4, "big")
    assert sent[workload.UE_OFF_UPLINK + 12 : workload.UE_OFF_UPLINK + 16] == bytes(map(int, "10.64.0.7".split(".")))
    sent = workload.walked(workload.downlink_packet(), down, 7)
    assert sent[down.teid_off : down.teid_off + 4] == bytes(map(int, "10.64.0.7".split(".")))


@pytest.mark.parametrize("name", sorted(workload.POLICED))
def test_the_bulk_policers_cpus_hold_what_the_upfs_applier_writes(name):
    """Session 0's policers are written by the UPF's applier, the others' in bulk: every CPU's slot
    of dpp_policer_stats of every session's policer holds what the applier wrote for session 0's
    (the same QER): the token bucket's chunk, which each CPU carves its credit by; the fixed
    window's none (the UPF's windows have no credit)."""
    require_kernel()
    with ExitStack() as stack:
        stack.enter_context(netns.entered(upf_run.make_site(stack)))
        instance = upf_run.open_instance(name, 3)
        stack.callback(instance.close)
        instance.grow(3)
        stats = instance.dataplane.table("dpp_policer_stats")
        shares = {i: [bytes(stats.get(policer)) for policer in workload.policer_ids(i)] for i in range(3)}
        services = stats.get(workload.policer_ids(0)[0])
    assert shares[1] == shares[2] == shares[0], "a bulk session's CPUs differ from the applier's"
    windowed = workload.POLICED[name] == Algo.FIXED_WINDOW
    assert [share.chunk == 0 for share in services] == [windowed] * len(services)


def test_a_small_run_checks_its_paths_and_reports_every_case(tmp_path):
    require_kernel()
    out = tmp_path / "upf.json"
    argv = ["--out", str(out), "--sessions", "1,300", "--active", "1,200", "--runs", "1", "--repeat", "400"]
    assert upf_main.main(argv) == 0
    result = json.loads(out.read_text())
    points = {(case["case"], case["installed"], case["active"]) for case in result["cases"]}
    assert points == {(c, i, a) for c in workload.CASES for i, a in ((1, 1), (300, 1), (300, 200))}
    assert all(case["repeat"] % case["active"] == 0 and case["ns"] > 0 for case in result["cases"])
    policers = ("dpp_policers", "dpp_policer_stats")
    entries = {(install["table"] in policers, install["entries"]) for install in result["install"]}
    assert entries == {(False, 299), (True, 2 * 299)}, ("a PDR entry a session a table; two policers a policed "
                                                         "session, and their CPUs' shares")
    usage = result["urr_usage"]  # a slot for each session, and slot 0
    assert (usage["slots"], usage["bytes"]) == (301, 301 * 32)


def test_a_case_that_takes_another_path_stops_the_run(tmp_path, monkeypatch, capsys):
    """A miss expected to be forwarded: the path check refuses it before any timing."""
    require_kernel()
    wrong = workload.CASES["miss"].__class__(**{**vars(workload.CASES["miss"]), "verdict": "REDIRECT"})
    monkeypatch.setitem(workload.CASES, "miss", wrong)
    out = tmp_path / "upf.json"
    argv = ["--out", str(out), "--sessions", "1", "--active", "1", "--runs", "1", "--repeat", "10"]
    assert upf_main.main(argv) == 1
    assert not out.exists()
    assert "miss: verdict DROP, expected REDIRECT" in capsys.readouterr().err


@BASELINE_TIMEOUT
def test_a_baseline_revision_is_measured_beside_head_in_the_same_runs(tmp_path, monkeypatch, shared_baselines):
    """--baseline with this checkout's own commit: its exported bench/upf and netapp open the
    baseline's instances in a process of their own, in the benchmark's namespace, and both sides'
    cases are timed in the same runs, each checked on its own path first."""
    require_kernel()
    commit = baseline.resolve("HEAD")
    monkeypatch.setattr(upf_main, "prepare_baseline", shared_baselines)
    out = tmp_path / "upf.json"
    argv = ["--out", str(out), "--sessions", "1,30", "--active", "1,20", "--runs", "2", "--repeat", "100",
            "--cases", "downlink,miss", "--baseline", "HEAD"]
    assert upf_main.main(argv) == 0
    result = json.loads(out.read_text())
    revision = result["baseline"]
    assert (revision["rev"], revision["commit"]) == ("HEAD", commit)
    points = {(c["case"], c["installed"], c["active"]) for c in result["cases"]}
    assert points == {(c["case"], c["installed"], c["active"]) for c in revision["cases"]} == {
        (case, installed, active) for case in ("downlink", "miss") for installed, active in ((1, 1), (30, 1), (30, 20))}
    for case in revision["cases"]:
        assert len(case["samples_ns"]) == 2 and case["head_ns_above_floor"] is not None
        assert "head_minus_baseline_ns" in case
    assert f"({commit[:12]})" in report.format_baseline(result)


def test_targets_are_reported_met_or_missed():
    cases = [
        {"case": "uplink", "installed": 1, "active": 1, "ns_above_floor": 50},
        {"case": "miss", "installed": 1, "active": 1, "ns_above_floor": 25},
        {"case": "uplink", "installed": 1_000_000, "active": 1_000_000, "ns_above_floor": 310},
    ]
    met = {target["name"]: target["met"] for target in report.evaluate_targets(cases)}
    assert met == {
        "one hot session, uplink decap + forward (FIB to N6), 1 installed": True,
        "one hot session, TEID miss, 1 installed": False,
        "1,000,000 active sessions, uplink decap + forward (FIB to N6), 1,000,000 installed": False,
    }


def test_the_readme_table_is_the_one_the_result_document_gives():
    result = json.loads((REPO / "bench/results/upf.json").read_text())
    assert report.format_table(result) in (REPO / "bench/README.md").read_text(), (
        "bench/README.md's UPF table: run python -m bench.upf.report bench/results/upf.json"
    )


def test_the_hot_paths_call_no_other_bpf_function_and_run_in_python_as_in_the_kernel():
    """bench.upf.insns: each case's run here comes out as the kernel's (count_case checks it); the UPF
    is inlined in the entry, so a packet it forwards pays no call of another BPF function."""
    require_kernel()
    counted = insns.count_cases(["uplink", "downlink", "downlink_pool", "miss"])
    assert {name: c.calls for name, c in counted.items()} == dict.fromkeys(counted, 0)
    assert counted["uplink"].helpers == {"bpf_xdp_adjust_head": 1, "bpf_xdp_redirect": 1}
    assert counted["miss"].helpers == {}
    assert counted["miss"].instructions < counted["uplink"].instructions


def test_the_policed_cases_run_in_python_as_in_the_kernel():
    """bench.upf.insns follows a QER's policer (dpp_upf_police, a call): its CPU's line found by
    bpf_get_smp_processor_id, inlined, and the fixed window's clock read (bpf_ktime_get_ns); the
    token bucket on its CPU's credit reads no clock."""
    require_kernel()
    counted = insns.count_cases(["uplink", "uplink_policed", "uplink_policed_window"])
    assert counted["uplink_policed"].calls == counted["uplink_policed_window"].calls == 1
    assert counted["uplink_policed"].helpers == counted["uplink"].helpers
    assert counted["uplink_policed_window"].helpers == {**counted["uplink"].helpers, "bpf_ktime_get_ns": 1}
    assert counted["uplink"].instructions < counted["uplink_policed"].instructions


def test_the_upfs_fixed_window_works_out_no_carve(capsys):
    """The UPF's windows have no CPU credit (police.h's POLICE_WINDOW_CREDIT): police_share gives
    them no carve to work out, which police_decide would not pass on; the token bucket's lines are
    those of its pass on its credit."""
    require_kernel()
    insns.count_cases(["uplink_policed_window"], top=1000)
    printed = capsys.readouterr().out
    assert "police.h:" in printed and "bpf_map_lookup_elem(&dpp_policer_stats" in printed
    assert "s->chunk - s->credit" not in printed


def test_the_n3_fast_paths_t_pdu_is_not_read_again_by_the_upf(capsys):
    """The N3 fast path hands the UPF its tunnel's address (dpp_parse.n3_daddr): neither the uplink
    nor the TEID miss finds the tunnel's IP header again (upf_ours's line), and the TEID's hash key
    (with any QFI) is made only when dpp_upf_uplink may hold the TEID, which it does not here."""
    require_kernel()
    insns.count_cases(["uplink", "miss"], top=1000)
    printed = capsys.readouterr().out
    assert "upf.h:" in printed and "bpf_map_lookup_elem(&dpp_upf_teids" in printed
    assert "bounded_offset(l->tun_l3)" not in printed
    assert "DPP_UPF_QFI_ANY" not in printed


def test_executed_instructions_are_summed_by_the_source_line_they_belong_to():
    lines = ["a.h:1 x", "a.h:1 x", "b.h:7 y", "a.h:1 x"]  # an index an instruction, as source_lines gives
    assert insns_command.by_line({0: 1, 1: 1, 2: 5, 3: 1}, lines, 2) == [("b.h:7 y", 5), ("a.h:1 x", 3)]
    assert insns_command.by_line({0: 1, 2: 1}, lines, 1) == [("a.h:1 x", 1)]


def test_a_cases_lines_are_read_from_the_loaded_programs_line_info(capsys):
    """source_lines has an entry an instruction index (a 16-byte load takes two): the miss's
    instructions fall on the lines of the UPF's miss and of the entry's counters."""
    require_kernel()
    counted = insns.count_cases(["miss"], top=500)["miss"]
    assert sum(counted.pcs.values()) == counted.instructions
    printed = capsys.readouterr().out
    assert printed.startswith("miss:\n")
    assert "o->action = DPP_ACTION_DEFAULT;" in printed and "counters.h:" in printed


def test_session_counts_beyond_the_tables_are_refused():
    with pytest.raises(SystemExit):
        upf_main.parse_args(["--sessions", str(workload.MAX_SESSIONS + 1)])
