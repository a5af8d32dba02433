"""Intent models, the one schema of the northbound API.

Three shapes of input end up as `Intent`:
- the native format (`Intent`, in `native`), documented in api/intents.md;
- the paper's "Resources / Action / Params" message (`LegacyMessage`, in `legacy`; see
  `legacy_to_native`);
- an intent document (`--intents FILE`): one intent, a list, or an object with intents, alternative
  node groups, CPUs and site defaults (`parse_document`, here).

Every rejection names its field (`IntentError`), e.g. `match.vni` or `Resources[0].encapsulationID1`.

The models are split by what they describe: `fields` (limits and field types they all share),
`native`, `legacy` and, here, the documents that bring them together with the configuration of the
network functions, whose models are in their own packages (netapp.steering.models: the CPUs to
steer to; netapp.forwarding.models: alternative node groups). A network function whose
configuration a document carries adds a field of `IntentDocumentBase`. Every public name of
`fields`, `native` and `legacy` is also importable from here.
"""

from __future__ import annotations

from typing import Any, Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

from netapp.forwarding.models import AlternativeGroup
from netapp.intents.errors import FieldError, IntentError, join_path
from netapp.steering.models import CpuSpec

# Every public name is re-exported: `from netapp.intents.models import X` is how the NetApp imports a model.
from netapp.intents.fields import (  # noqa: F401
    DEFAULT_PRIORITY,
    MAX_ALT_GROUPS,
    MAX_ALT_MEMBERS,
    MAX_CPUS,
    MAX_I64,
    MAX_PRIORITY,
    MAX_U24,
    MAX_U32,
    PORT_PROTOCOLS,
    PROTOCOL_NUMBERS,
    Address,
    CpuId,
    Dscp,
    GroupId,
    IntentId,
    InterfaceName,
    MacAddress,
    OverlayName,
    Port,
    Prefix,
    Priority,
    Protocol,
    ProtocolName,
    ProtocolNumber,
    Qfi,
    TunnelAddress,
    U32,
    Vlan,
    lower_if_str,
    protocol_number,
)
from netapp.intents.legacy import (  # noqa: F401
    LEGACY_DEFAULT_PORT_PROTOCOL,
    LEGACY_ID_PREFIX,
    LEGACY_MAX_ENCAPSULATIONS,
    EncapsulationType,
    HexId,
    LegacyAction,
    LegacyCpu,
    LegacyGroup,
    LegacyMbr,
    LegacyMessage,
    LegacyParam,
    LegacyPort,
    LegacyProtocol,
    LegacyResource,
    is_legacy,
    legacy_to_native,
    legacy_update,
)
from netapp.intents.native import (  # noqa: F401
    Action,
    ActionOptions,
    DropAction,
    DuplicateAction,
    ForwardAction,
    Intent,
    Match,
    OuterTunnel,
    PassAction,
    Police,
    Protect,
    Policed,
    PoliceAlgorithm,
    RedirectAction,
    SteerAction,
    TunnelAction,
    check_one_family,
    check_vni,
    without_nulls,
)


def parse_intent(data: Any) -> Intent:
    """One intent in either format (a legacy message must be an INSERT or UPDATE)."""
    if is_legacy(data):
        action_type, intent = legacy_to_native(data)
        if action_type == "DELETE":
            raise IntentError.at("Action.actionType", "a DELETE message does not describe an intent")
        return intent
    try:
        return Intent.model_validate(data)
    except ValidationError as exc:
        raise IntentError.from_validation(exc) from None


# --- Intent documents --------------------------------------------------------------------------


class IntentDocumentBase(BaseModel):
    """Site configuration that comes with a set of intents."""

    model_config = ConfigDict(extra="forbid")

    alternatives: list[AlternativeGroup] = Field(default_factory=list)
    cpus: list[CpuSpec] = Field(default_factory=list)
    default_verdict: Literal["pass", "drop"] = Field(
        "pass", description="verdict of malformed packets and of fallbacks with nothing better to do"
    )
    default_alternative: Optional[GroupId] = Field(
        None, description="alternative group for overflow when an intent names none"
    )

    @model_validator(mode="after")
    def _check_unique_ids(self) -> "IntentDocumentBase":
        _reject_duplicates("alternatives", [group.id for group in self.alternatives], "id")
        _reject_duplicates("cpus", [spec.cpu for spec in self.cpus], "cpu")
        return self


def _reject_duplicates(field: str, keys: list[int], key_name: str) -> None:
    seen: dict[int, int] = {}
    for index, key in enumerate(keys):
        if key in seen:
            raise FieldError(f"{field}[{index}].{key_name}", f"{key} is already used by {field}[{seen[key]}]")
        seen[key] = index


def _entry_kind(value: Any) -> str:
    if isinstance(value, LegacyMessage) or is_legacy(value):
        return "legacy"
    return "native"


IntentEntry = Annotated[
    Union[Annotated[Intent, Tag("native")], Annotated[LegacyMessage, Tag("legacy")]],
    Discriminator(_entry_kind),
]


class IntentDocumentIn(IntentDocumentBase):
    """A document as written: intents in either format, legacy ones applied in order."""

    intents: list[IntentEntry] = Field(default_factory=list)


class IntentDocument(IntentDocumentBase):
    """A document resolved to native intents (see `parse_document`)."""

    intents: list[Intent] = Field(default_factory=list)


def parse_document(data: Any) -> IntentDocument:
    """Validate what an intents file holds: an intent, a list of intents, or a document object.

    Legacy messages are applied in order: INSERT adds, UPDATE replaces, DELETE removes.
    """
    wrapped, single = _as_document_object(data)
    try:
        raw = IntentDocumentIn.model_validate(wrapped)
        resolved = _resolve_entries(raw.intents)
    except ValidationError as exc:
        raise _relocate(IntentError.from_validation(exc), single) from None
    except IntentError as exc:
        raise _relocate(exc, single) from None
    fields = {name: getattr(raw, name) for name in IntentDocumentBase.model_fields}
    return IntentDocument(intents=resolved, **fields)


def _as_document_object(data: Any) -> tuple[Any, bool]:
    """Wrap a list or a lone intent into a document object; say whether it was a lone intent."""
    if isinstance(data, list):
        return {"intents": data}, False
    if isinstance(data, dict) and data and not set(data) & set(IntentDocumentIn.model_fields):
        return {"intents": [data]}, True
    return data, False


def _relocate(error: IntentError, single: bool) -> IntentError:
    """A lone intent's problems are reported relative to the intent, not to the wrapper we made."""
    if not single:
        return error
    problems = []
    for path, message in error.problems:
        if path == "intents[0]":
            path = ""
        elif path.startswith("intents[0]."):
            path = path[len("intents[0].") :]
        problems.append((path, message))
    return IntentError(problems)


def _resolve_entries(entries: list[Union[Intent, LegacyMessage]]) -> list[Intent]:
    by_id: dict[str, Intent] = {}
    origin: dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = f"intents[{index}]"
        if isinstance(entry, Intent):
            _insert(by_id, origin, entry, index, join_path(where, "id"))
            continue
        try:
            action_type, intent = legacy_to_native(entry)
        except IntentError as exc:
            raise exc.prefixed(where) from None
        _apply_legacy(by_id, origin, action_type, intent, index, where)
    return list(by_id.values())


def _insert(by_id: dict[str, Intent], origin: dict[str, int], intent: Intent, index: int, path: str) -> None:
    if intent.id in by_id:
        raise IntentError.at(
            path, f"duplicate intent id {intent.id!r} (first at intents[{origin[intent.id]}])"
        )
    by_id[intent.id] = intent
    origin[intent.id] = index


def _apply_legacy(
    by_id: dict[str, Intent], origin: dict[str, int], action_type: str, intent: Intent, index: int, where: str
) -> None:
    if action_type == "INSERT":
        _insert(by_id, origin, intent, index, join_path(where, "Action.flow_hash"))
        return
    if intent.id not in by_id:
        raise IntentError.at(
            join_path(where, "Action.actionType"),
            f"{action_type} of {intent.id!r}, which no earlier entry inserted",
        )
    if action_type == "DELETE":
        del by_id[intent.id]
        del origin[intent.id]
        return
    try:
        by_id[intent.id] = legacy_update(by_id[intent.id], intent)
    except IntentError as exc:
        raise exc.prefixed(where) from None
