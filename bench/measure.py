"""Run the cases through the harness: first prove each takes the path it is named after, then time
them, interleaved with the floor, several runs in a random order per run.

A benchmark that measures the wrong path must fail loudly, so a case is checked three ways before
timing (verdict, output packet, the pipeline's own counters) and its verdict and output again on
every timed run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Protocol

from netapp.dataplane.binding import Verdict

from bench.harness import Harness
from bench.packets import RewriteError, check_forwarded
from bench.workload import ALT_MEMBER, CASE_PIPELINE_ACTIONS, CASE_VERDICTS, MATCHED_CASES, case_intent_id

VERIFY_REPEAT = 64  # enough to see the first (cache-filling) and the later (cached) repetitions
FLOOR = "floor"
EMPTY_DIRECT = "empty_direct"


if TYPE_CHECKING:  # bench.instances imports this module
    from bench.instances import Instance


class WrongPathError(AssertionError):
    """The pipeline did not do what the case is named after: its timing would be meaningless."""


@dataclass(frozen=True)
class Subject:
    """Something to time: a program behind the harness (prog_fd None: the empty one, directly)."""

    key: str
    prog_fd: Optional[int]
    packet: bytes
    verdict: int
    check_output: Callable[[bytes], None]


class Tested(Protocol):
    """What is verified and timed: this checkout's Instance, or a --baseline one (bench/remote.py)."""

    @property
    def mode(self) -> str: ...

    @property
    def rules(self) -> int: ...

    @property
    def shapes(self) -> int: ...

    @property
    def prog_fd(self) -> int: ...

    def counters(self, case: str) -> "Counters": ...


def subject_key(mode: str, case: str) -> str:
    return f"{mode}/{case}"


def _verdict_name(value: int) -> str:
    try:
        return Verdict(value).name
    except ValueError:
        return f"unknown({value})"


def expect_unchanged(packet: bytes) -> Callable[[bytes], None]:
    def check(output: bytes) -> None:
        if output != packet:
            raise RewriteError("output packet differs from the input, which this case must not change")

    return check


def expect_forwarded(packet: bytes) -> Callable[[bytes], None]:
    def check(output: bytes) -> None:
        assert ALT_MEMBER.ip4 is not None
        check_forwarded(packet, output, ALT_MEMBER.mac, ALT_MEMBER.ip4)

    return check


def floor_subjects(harness: Harness, packet: bytes) -> list[Subject]:
    """harness -> empty program (the floor), and the empty program alone (for reference)."""
    unchanged = expect_unchanged(packet)
    return [
        Subject(FLOOR, harness.empty_fd, packet, Verdict.PASS, unchanged),
        Subject(EMPTY_DIRECT, None, packet, Verdict.PASS, unchanged),
    ]


def case_subject(instance: Tested, case: str, packet: bytes) -> Subject:
    check = expect_forwarded(packet) if case == "forward" else expect_unchanged(packet)
    return Subject(subject_key(instance.mode, case), instance.prog_fd, packet, CASE_VERDICTS[case], check)


def run_subject(harness: Harness, subject: Subject, repeat: int) -> int:
    """One test run; its per-repetition ns, after checking verdict and output."""
    if subject.prog_fd is None:
        result = harness.run_empty_direct(subject.packet, repeat)
    else:
        result = harness.run(subject.prog_fd, subject.packet, repeat)
    if result.retval != subject.verdict:
        got, expected = _verdict_name(result.retval), _verdict_name(subject.verdict)
        hint = " (ABORTED: the harness itself failed)" if result.retval == Verdict.ABORTED else ""
        raise WrongPathError(f"{subject.key}: verdict {got}, expected {expected}{hint}")
    try:
        subject.check_output(result.data)
    except RewriteError as exc:
        raise WrongPathError(f"{subject.key}: {exc}") from None
    return result.duration_ns


def measure(
    harness: Harness, subjects: list[Subject], runs: int, repeat: int, rng: random.Random
) -> dict[str, list[int]]:
    """Every subject once per run, in a fresh random order each run, so drifting machine noise hits
    floor and cases alike. Returns the per-run ns of each subject."""
    samples: dict[str, list[int]] = {subject.key: [] for subject in subjects}
    for _ in range(runs):
        for subject in rng.sample(subjects, len(subjects)):
            samples[subject.key].append(run_subject(harness, subject, repeat))
    return samples


# --- path verification through the pipeline's counters ------------------------------------------


@dataclass(frozen=True)
class Counters:
    verdicts: Mapping[str, int]
    actions: Mapping[str, int]
    reasons: Mapping[str, int]
    case_rule: int  # packets of the case's own rule
    all_rules: int  # packets of every rule (summed only for a miss)


def _packets(table: Mapping[str, tuple[int, int]]) -> dict[str, int]:
    return {name: counter[0] for name, counter in table.items()}


def read_counters(instance: Instance, case: str) -> Counters:
    # Also what a --baseline revision's process calls, of its own revision (bench/baseline_side.py).
    dataplane = instance.dataplane
    case_rule = dataplane.rule_stats().get(case_intent_id(case), (0, 0))[0]
    all_rules = 0
    if case not in MATCHED_CASES:
        all_rules = sum(packets for packets, _ in instance.handle.stats_rules(0, instance.stat_slots))
    return Counters(
        _packets(dataplane.verdict_stats()),
        _packets(dataplane.action_stats()),
        _packets(dataplane.reason_stats()),
        case_rule,
        all_rules,
    )


def _delta(after: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    return {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}


def verify_case(harness: Harness, instance: Tested, case: str, packet: bytes) -> None:
    """Run the case a few times and check that exactly the expected verdict, action and rule counted
    every packet, and no reason (parse error, fallback) did."""
    where = f"{instance.mode}/{case} with {instance.rules} rules"
    before = instance.counters(case)
    run_subject(harness, case_subject(instance, case, packet), VERIFY_REPEAT)
    after = instance.counters(case)
    verdict = _verdict_name(CASE_VERDICTS[case])
    action = CASE_PIPELINE_ACTIONS[case]
    if _delta(after.verdicts, before.verdicts) != {verdict: VERIFY_REPEAT}:
        raise WrongPathError(f"{where}: verdict counters moved {_delta(after.verdicts, before.verdicts)}")
    if _delta(after.actions, before.actions) != {action: VERIFY_REPEAT}:
        raise WrongPathError(f"{where}: action counters moved {_delta(after.actions, before.actions)}")
    if _delta(after.reasons, before.reasons):
        raise WrongPathError(f"{where}: reason counters moved {_delta(after.reasons, before.reasons)}")
    if case in MATCHED_CASES and after.case_rule - before.case_rule != VERIFY_REPEAT:
        raise WrongPathError(
            f"{where}: its rule counted {after.case_rule - before.case_rule} of {VERIFY_REPEAT}"
        )
    if case not in MATCHED_CASES and after.all_rules != before.all_rules:
        raise WrongPathError(f"{where}: a miss matched rules ({after.all_rules - before.all_rules} packets)")
