"""Intents as rules of the index, as a tenant sees them: their names, collisions and warnings.

Tenancy: intent and slice ids are unique per tenant. In the data plane an intent is known as
`<tenant>/<intent id>` (see `rule_id`): intent ids cannot contain '/', so two tenants may use the same
id and the last '/' always separates them. Admins may name another tenant's object the same way.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from netapp.intents.compiler import CompiledRule, Conflict as RuleConflict, SharedPolice, with_police_defaults
from netapp.intents.errors import IntentError
from netapp.intents.models import Intent
from netapp.service.contract import Conflict, ConflictView, IntentWarning, Principal, batch_field
from netapp.qos.slices import with_slice_police
from netapp.service.overlaps import overlap_warnings

if TYPE_CHECKING:
    from netapp.service.state import ServiceState
    from netapp.service.transaction import Where

log = logging.getLogger("netapp.service")

OTHER_TENANT = "an intent of another tenant"
# What a confined tenant is told of a rule it collides with: grants of different tenants never
# meet, so only a site-wide rule can have its match, and which tenant holds it stays unsaid.
SITE_RULE = "a site-wide rule"
ANONYMOUS_OWNERS = (OTHER_TENANT, SITE_RULE)


def rule_id(tenant: str, intent_id: str) -> str:
    """The data plane's id of a tenant's intent."""
    return f"{tenant}/{intent_id}"


def split_rule_id(qualified: str) -> tuple[str, str]:
    """(tenant, intent id) of a data plane id; the last '/' separates them."""
    tenant, _, intent_id = qualified.rpartition("/")
    return tenant, intent_id


class Rules:
    """The index's rules as `who` may see them, and the checks every change of rules makes."""

    def __init__(self, state: "ServiceState"):
        self._state = state

    def compile(self, tenant: str, intent: Intent, shared: Optional[SharedPolice] = None) -> CompiledRule:
        """The tenant's intent as a rule; `shared`: the policer of its slice (netapp.qos.slices)."""
        rule = self._state.index.compile(intent, rule_id(tenant, intent.id))
        return with_slice_police(rule, shared)

    def display(self, who: Principal, qualified: str) -> str:
        """How `who` may see an intent's name: its own by id, an admin everything, others nothing."""
        tenant, intent_id = split_rule_id(qualified)
        if tenant == who.tenant:
            return intent_id
        if who.is_admin:
            return qualified
        return OTHER_TENANT if self._state.tenancy.grants_for(who, who.tenant) is None else SITE_RULE

    def warnings(self, who: Principal, qualified: list[str]) -> list[IntentWarning]:
        """What `who` should know about these intents as the index now holds them: the intents of
        other shapes they overlap, named as `who` may see them (netapp.service.overlaps)."""
        return overlap_warnings(
            self._state.index, qualified, lambda name: self.display(who, name), ANONYMOUS_OWNERS
        )

    def confined(
        self, who: Principal, tenant: str, intent: Intent, notes: Optional[list[IntentWarning]] = None
    ) -> Intent:
        """The intent kept inside the traffic its tenant owns (netapp.tenancy); IntentError if it
        cannot be. A narrowed match is logged, and told in `notes` (a `narrowed` warning). Its police
        option, if any, is given the settings' burst and algorithm where it leaves them unset: the
        intent is stored as it is enforced."""
        confined, narrowed = self._state.tenancy.confined(who, tenant, intent)
        if narrowed is not None:
            log.info("intent %s of tenant %s: match %s", intent.id, tenant, narrowed)
            if notes is not None:
                notes.append(IntentWarning(kind="narrowed", intent_a=intent.id, reason=f"the match was {narrowed}"))
        return with_police_defaults(confined, self._state.police_defaults)

    def confined_member(self, who: Principal, tenant: str, intent: Intent) -> Intent:
        """`confined` for a slice member's intent: an error names the member (its label)."""
        try:
            return self.confined(who, tenant, intent)
        except IntentError as exc:
            raise IntentError.at("members", f"{intent.label}: {exc.line()}") from exc

    def require_free_intent_id(
        self,
        tenant: str,
        intent_id: str,
        at: Optional[int] = None,
        positions: Optional[dict[str, int]] = None,
    ) -> None:
        """Conflict if the tenant has an intent of that id. `at`: the intent's position in a batch
        (`positions`: each id's last position), for the error to name it and catch repeats."""
        field = "id" if at is None else batch_field(at, "id")
        where = "" if at is None else f"{batch_field(at)}: "
        if positions is not None and at is not None and positions[rule_id(tenant, intent_id)] != at:
            raise Conflict(
                f"{where}intent id {intent_id!r} appears more than once in the batch "
                f"(again at {batch_field(positions[rule_id(tenant, intent_id)])})",
                field=field,
            )
        existing = self._state.store.get_intent(tenant, intent_id)
        if existing is None:
            return
        owner = f" (it belongs to slice {existing.slice_id!r})" if existing.slice_id else ""
        raise Conflict(f"{where}intent id {intent_id!r} is in use{owner}", field=field)

    # --- collisions ------------------------------------------------------------------------------

    def reject_collisions(
        self, who: Principal, added: list[CompiledRule], where: Optional["Where"] = None
    ) -> None:
        for rule in added:
            collisions = self._state.index.collisions(rule.intent_id)
            if collisions:
                raise self._collision_error(who, rule, collisions[0], where)

    def _collision_error(
        self, who: Principal, rule: CompiledRule, conflict: RuleConflict, where: Optional["Where"] = None
    ) -> Conflict:
        other = conflict.intent_a if conflict.intent_b == rule.intent_id else conflict.intent_b
        at = where(rule.intent_id) if where is not None else None
        other_at = where(other) if where is not None else None
        if at is not None and other_at is not None and other_at > at:
            # two of one batch: blame the later one, which collides with what comes before it
            later = self._state.index.get(other)
            if later is not None:
                rule, other, at, other_at = later, rule.intent_id, other_at, at
        mine, theirs = self.display(who, rule.intent_id), self.display(who, other)
        prefix = "" if at is None else f"{batch_field(at)}: "
        if other_at is not None:
            theirs_named = f"{theirs!r} ({batch_field(other_at)} of the same batch)"
        else:
            theirs_named = theirs if theirs in ANONYMOUS_OWNERS else repr(theirs)
        extra = {} if at is None else {"index": at}
        why = {
            "duplicate": "the same match, priority and action",
            "shadowed": f"the same match {rule.shape.describe()}; the lower priority one would never match",
            "conflict": f"the same match {rule.shape.describe()} and priority, and another action",
        }[conflict.kind]
        return Conflict(
            f"{prefix}intent {mine!r} collides with {theirs_named}: {why}. "
            "The data plane keys rules by match, so only one of them can be installed",
            field="match" if at is None else batch_field(at, "match"),
            intent_a=mine,
            intent_b=theirs,
            kind=conflict.kind,
            **extra,
        )

    def conflict_view(self, who: Principal, conflict: RuleConflict) -> ConflictView:
        a, b = self.display(who, conflict.intent_a), self.display(who, conflict.intent_b)
        reason = conflict.reason.replace(repr(conflict.intent_a), repr(a)).replace(
            repr(conflict.intent_b), repr(b)
        )
        return ConflictView(kind=conflict.kind, intent_a=a, intent_b=b, reason=reason)  # type: ignore[arg-type]
