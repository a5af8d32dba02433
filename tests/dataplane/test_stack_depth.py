"""Every program of the build fits the 512-byte BPF stack on the kernels that round each frame to 32
bytes (before 6.9; Ubuntu 24.04's 6.8, the charm's base), not only on this one (16): each call chain's
frames, as the verifier counted them while loading every object (bench/stack.py), rounded up to 32
bytes each (a frame of 0 counting 32), add up to 512 at most; a subprogram that makes a tail call
is reached under fewer than 256 bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bench import stack
from tests.utils.kernel import build_artifact, require_kernel


@pytest.fixture(scope="module")
def programs() -> list[tuple[Path, stack.Program]]:
    require_kernel()
    build = build_artifact("dpp.bpf.o").parent
    return [(path, program) for path in sorted(Path(build).glob("*.bpf.o")) for program in stack.deepest_programs(path)]


@pytest.fixture(scope="module")
def chains(programs: list[tuple[Path, stack.Program]]) -> list[dict]:
    return [row for path, program in programs for row in stack.rows(path, program)]


def test_a_callback_handing_itself_on_ends_its_chain() -> None:
    """A timer's callback re-arming itself (a call to itself here) ends the chain, not the walk."""
    program = stack.Program("p", (stack.Function("f", 8, (1,), False), stack.Function("callback", 0, (1,), False)))
    assert list(program.chains()) == [(0, 1)]


def test_every_function_lies_on_a_chain(programs: list[tuple[Path, stack.Program]]) -> None:
    """Each function of each loaded program is on some chain: none is left out of the bound."""
    missed = [f"{path.name}: {program.name}: {function.name}" for path, program in programs
              for index, function in enumerate(program.functions)
              if not any(index in chain for chain in program.chains())]  # fmt: skip
    assert not missed, "\n".join(missed)


def test_frames_round_as_the_verifier_rounds_them() -> None:
    assert [stack.rounded(depth, 32) for depth in (0, 1, 32, 33, 104)] == [32, 32, 32, 64, 128]
    assert [stack.rounded(depth, 16) for depth in (0, 1, 16, 104)] == [0, 16, 16, 112]


LOOP = 0x4DC70  # the imm a call to bpf_loop has in these made-up dumps


def dump(*instructions: tuple[int, int, int, int]) -> bytes:
    return b"".join(struct.pack("<BBhi", *insn) for insn in instructions)


def loaded_callback(number: int) -> tuple[tuple[int, int, int, int], ...]:
    """ld_imm64 r2 = callback `number` (BPF_PSEUDO_FUNC), its two halves."""
    return (0x18, stack.BPF_PSEUDO_FUNC << 4 | 2, 0, 0), (0, 0, 0, number)


def read(raw: bytes) -> stack.Function:
    return stack.read_calls("f", 360, raw, range(len(raw) // 8), LOOP)


def test_an_inlined_loop_s_slots_are_taken_off_its_caller_s_frame() -> None:
    """The inlining leaves the callback loaded and called from the caller's own code, no call to
    bpf_loop: the 24 bytes the verifier added after its check come off (360 -> 336, 384 -> 352)."""
    inlined = read(dump(*loaded_callback(1), (0x85, stack.BPF_PSEUDO_CALL << 4, 0, 1)))
    assert (inlined.inlined_loop, inlined.frame, inlined.callees) == (True, 336, (1,))
    program = stack.Program("p", (inlined, stack.Function("g", 136, (), False)))
    assert stack.chain_stack(program, (0, 1), 32) == 352 + 160


def test_a_loop_not_inlined_or_a_timer_s_callback_keeps_its_frame() -> None:
    """A bpf_loop call left (not inlined), or a callback only handed to a helper (a BPF timer's):
    the log's depth is the frame the check counted."""
    not_inlined = read(dump(*loaded_callback(1), (0x85, 0, 0, LOOP), (0x85, stack.BPF_PSEUDO_CALL << 4, 0, 1)))
    timer = read(dump(*loaded_callback(1), (0x85, 0, 0, LOOP + 8)))
    assert [(f.inlined_loop, f.frame) for f in (not_inlined, timer)] == [(False, 360), (False, 360)]


def test_the_entry_chains_are_read_through_its_calls(chains: list[dict]) -> None:
    """The reading is not empty: the entry's chain through the UPF's SDF stage and its policer is
    found, with a frame for each (a chain missed would make the bound below pass for nothing)."""
    entry = {tuple(row["chain"]): row["frames"] for row in chains if row["program"] == "dpp_xdp"}
    frames = entry.get(("dpp_xdp", "dpp_upf_sdf", "dpp_upf_police"))
    assert frames and all(frame > 0 for frame in frames), sorted(entry)


def test_every_chain_fits_the_stack_with_frames_rounded_to_32_bytes(chains: list[dict]) -> None:
    over = [f"{row['object']}: {' -> '.join(row['chain'])} {row['frames']} = {row['stack32']}"
            for row in chains if row["stack32"] > stack.MAX_BPF_STACK]  # fmt: skip
    assert not over, "over 512 bytes on kernels rounding frames to 32:\n" + "\n".join(over)


def test_no_tail_call_below_256_bytes_of_frames(chains: list[dict]) -> None:
    deep = [f"{row['object']}: {' -> '.join(row['chain'])} = {row['tail_call32']}"
            for row in chains if row["tail_call32"] >= stack.TAIL_CALL_STACK]  # fmt: skip
    assert not deep, "\n".join(deep)
