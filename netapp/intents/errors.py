"""Errors that name the offending field, and the one formatter that turns pydantic's into a line."""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from pydantic import ValidationError

# Pydantic puts the tag of a discriminated union (and the name of a wrapping validator) into an
# error's location; users never wrote those, so they are left out of the field path.
_UNION_TAGS = frozenset({"pass", "drop", "steer", "forward", "redirect", "native", "legacy"})

_MESSAGE_REWRITES = {
    "extra_forbidden": "unknown field",
    "missing": "required field is missing",
}


class FieldError(ValueError):
    """Raised by a model-level validator to blame one field (relative to the model) for an error."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


class IntentError(ValueError):
    """An intent, a document or a ruleset was rejected; each problem names its field path."""

    def __init__(self, problems: Sequence[tuple[str, str]]):
        self.problems = list(problems)
        super().__init__(self.line())

    @property
    def field(self) -> str:
        return self.problems[0][0] if self.problems else ""

    @property
    def message(self) -> str:
        return self.problems[0][1] if self.problems else ""

    def line(self) -> str:
        return "; ".join(f"{path}: {msg}" if path else msg for path, msg in self.problems)

    @classmethod
    def at(cls, field: str, message: str) -> "IntentError":
        return cls([(field, message)])

    @classmethod
    def from_validation(cls, exc: ValidationError, prefix: str = "") -> "IntentError":
        return cls([_describe(err, prefix) for err in exc.errors()])

    def prefixed(self, prefix: str) -> "IntentError":
        """The same problems, located below `prefix` (e.g. "intents[2]")."""
        return IntentError([(join_path(prefix, path), msg) for path, msg in self.problems])


class CompileError(IntentError):
    """An intent cannot be compiled; `field` is its path inside the intent (e.g. match.interface)."""

    def __init__(self, field: str, message: str, intent_id: Optional[str] = None):
        self.intent_id = intent_id
        super().__init__([(field, message)])

    def line(self) -> str:
        where = f"intent {self.intent_id!r}: " if self.intent_id else ""
        return f"{where}{super().line()}"


def join_path(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def path_of(loc: Iterable[Any]) -> str:
    """('Resources', 0, 'encapsulationID1') -> 'Resources[0].encapsulationID1'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in _UNION_TAGS or "[" in str(part):
            continue
        else:
            path = join_path(path, str(part))
    return path


def _describe(err: Any, prefix: str) -> tuple[str, str]:
    path = path_of(err["loc"])
    ctx = err.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, FieldError):
        return join_path(prefix, join_path(path, cause.field)), cause.message
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return _describe_union_tag(err, join_path(prefix, path), ctx)
    return join_path(prefix, path), _message(err)


def _describe_union_tag(err: Any, path: str, ctx: dict[str, Any]) -> tuple[str, str]:
    """Blame the discriminator field ("action.type"), not the whole union."""
    tag_field = str(ctx.get("discriminator", "type")).strip("'")
    if err["type"] == "union_tag_not_found":
        return join_path(path, tag_field), "required field is missing"
    return join_path(
        path, tag_field
    ), f"unknown {tag_field} {ctx.get('tag')!r} (expected {ctx.get('expected_tags')})"


def _message(err: Any) -> str:
    if err["type"] in _MESSAGE_REWRITES:
        return _MESSAGE_REWRITES[err["type"]]
    if err["type"] == "value_error":
        # Our own validators already quote the input where it helps.
        return err["msg"].removeprefix("Value error, ")
    message = err["msg"]
    if _is_short_scalar(err.get("input")):
        message += f" (got {err['input']!r})"
    return message


def _is_short_scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool) and len(repr(value)) <= 40
