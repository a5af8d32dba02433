"""FakeDpp variants for facade tests: failure injection and a record of what each write saw.

FakeDpp already logs every write in `calls`; these add what the apply-order tests need to check
the facade's safety rules (which rules were in the map when a shape set was published, which shape
set was active when rules were deleted) and a way to make the adapter fail midway.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from netapp.dataplane.binding import DataplaneError, FlowKey, Rule, Shape, struct_bytes
from netapp.dataplane.fake import FakeDpp

# Adapter calls that change kernel state (FakeDpp logs only those, plus close).
WRITES = frozenset(
    {
        "rules_upsert",
        "rules_delete",
        "shapes_publish",
        "stats_rules_clear",
        "config_set",
        "cpu_enable",
        "cpu_disable",
        "cpu_set_overloaded",
        "table_update",
        "table_delete",
        "attach",
        "detach",
        "unpin",
    }
)


def key_shape(key_bytes: bytes) -> int:
    """The shape id a rule key carries."""
    return FlowKey.from_buffer_copy(key_bytes).shape


def shape_id_of(shape_bytes: bytes) -> int:
    """The shape id a published shape's mask carries."""
    return Shape.from_buffer_copy(shape_bytes).mask.shape


@dataclass(frozen=True)
class MapState:
    """What packets are classified against: rules by key and the active shape set."""

    rules: dict[bytes, bytes]
    shapes: tuple[bytes, ...]


@dataclass(frozen=True)
class PublishSeen:
    shape_ids: frozenset[int]
    rule_keys: frozenset[bytes]  # keys in dpp_rules when the set was published


@dataclass(frozen=True)
class DeleteSeen:
    keys: tuple[bytes, ...]
    active_shape_ids: frozenset[int]  # shapes packets were matched against when the keys went


class RecordingDpp(FakeDpp):
    """A FakeDpp that fails on request (once) and records the state each publish and delete saw."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_upsert_after: int | None = None  # fail the next upsert after this many keys
        self.fail_publish_after: int | None = None  # let this many publishes through, fail the next
        self.failing: dict[str, int] = {}  # adapter call -> how many more times it fails (no write)
        self.failing_errno: dict[str, int] = {}  # adapter call -> the errno it fails with (EIO)
        self.publishes: list[PublishSeen] = []
        self.deletes: list[DeleteSeen] = []

    # --- what the tests look at --------------------------------------------------------------

    def writes(self) -> list[tuple]:
        return [call for call in self.calls if call[0] in WRITES]

    def write_names(self) -> list[str]:
        return [call[0] for call in self.writes()]

    def active_shape_ids(self) -> frozenset[int]:
        return frozenset(shape.mask.shape for shape in self.active_shapes())

    def active_shapes_bytes(self) -> list[bytes]:
        return [struct_bytes(shape) for shape in self.active_shapes()]

    def state(self) -> MapState:
        return MapState(
            rules={key: struct_bytes(rule) for key, (_, rule) in self.rules.items()},
            shapes=tuple(struct_bytes(shape) for shape in self.active_shapes()),
        )

    # --- failure injection and recording -----------------------------------------------------

    def fail(self, op: str, times: int = 1, code: int = errno.EIO) -> None:
        """Make the next `times` calls of `op` (rules_upsert, rules_delete, shapes_publish,
        cpu_disable, or "table_update <map>" for a table's writes) fail with `code`."""
        self.failing[op] = times
        self.failing_errno[op] = code

    def _fail_if_armed(self, op: str) -> None:
        if self.failing.get(op, 0) > 0:
            self.failing[op] -= 1
            self.calls.append(("failed", op))
            raise DataplaneError(self.failing_errno.get(op, errno.EIO), f"dpp_{op}", "failed on purpose")

    def rules_upsert(self, keys: Sequence[FlowKey], rules: Sequence[Rule]) -> None:
        if keys:
            self._fail_if_armed("rules_upsert")
        if self.fail_upsert_after is None or not keys:
            return super().rules_upsert(keys, rules)
        done, self.fail_upsert_after = min(self.fail_upsert_after, len(keys)), None
        self.calls.append(("rules_upsert", [struct_bytes(key) for key in keys]))
        for key, rule in zip(keys[:done], rules[:done]):
            self.rules[struct_bytes(key)] = (FlowKey.from_buffer_copy(key), Rule.from_buffer_copy(rule))
        raise _batch_error("dpp_rules_upsert", done, len(keys))

    def rules_delete(self, keys: Sequence[FlowKey]) -> None:
        if keys:
            self._fail_if_armed("rules_delete")
            self.deletes.append(DeleteSeen(tuple(struct_bytes(k) for k in keys), self.active_shape_ids()))
        super().rules_delete(keys)

    def table_update(self, name: str, keys: Any, values: Any, flags: int = 0) -> None:
        if len(keys):
            self._fail_if_armed(f"table_update {name}")
        super().table_update(name, keys, values, flags)

    def cpu_disable(self, cpu: int) -> None:
        self._fail_if_armed("cpu_disable")
        super().cpu_disable(cpu)

    def shapes_publish(self, shapes: Sequence[Shape]) -> None:
        self._fail_if_armed("shapes_publish")
        if self.fail_publish_after == 0:
            self.fail_publish_after = None
            self.calls.append(("shapes_publish", [struct_bytes(shape) for shape in shapes]))
            raise DataplaneError(errno.EIO, "dpp_shapes_publish")
        if self.fail_publish_after is not None:
            self.fail_publish_after -= 1
        self.publishes.append(
            PublishSeen(frozenset(shape.mask.shape for shape in shapes), frozenset(self.rules))
        )
        super().shapes_publish(shapes)


def _batch_error(op: str, done: int, total: int) -> DataplaneError:
    """What binding._check_batch raises: the errno, and how many entries were applied."""
    error = DataplaneError(errno.ENOMEM, op, f"out of memory after {done} of {total}")
    error.done = done  # type: ignore[attr-defined]
    return error
