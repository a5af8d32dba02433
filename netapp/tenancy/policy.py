"""The tenancy rules the service applies inside its transactions: whose rules are site-wide, what a
confined tenant's intent becomes, the quotas, and which tenant records may be written.

Site-wide: a tenant whose record says `site: true`, and an administrator's own tenant while it has
no record (the operator's token needs no grant to run its site). Every other tenant is confined to
its grants, and sends only to its destinations (netapp.tenancy.destinations); a tenant without a
record owns no traffic, so its intents are refused until an administrator grants it some.
"""

from __future__ import annotations

from typing import AbstractSet, Callable, Iterable, Optional, Sequence

from netapp.atsss import scope as atsss_scope
from netapp.atsss.store import count_sessions, load_sessions
from netapp.core.addresses import Address, node_addresses
from netapp.frer.scope import check_scope
from netapp.frer.store import count_streams, load_streams
from netapp.intents.errors import IntentError
from netapp.intents.models import Intent
from netapp.service.contract import Conflict, Forbidden, Principal, QuotaExceeded, SliceSpec, Snssai
from netapp.service.store import Store
from netapp.tenancy import destinations
from netapp.tenancy.confine import confine, grants_intersect
from netapp.tenancy.models import TenantQuotas, TenantSpec, TenantUsage, TrafficGrant

SHOWN_INTENTS = 5


class TenantPolicy:
    """Reads the tenants' records from the store, in the caller's transaction."""

    def __init__(self, store: Store, addresses: Callable[[], AbstractSet[Address]] = node_addresses):
        """`addresses`: the node's own, asked when an intent names a tunnel source (the site's
        namespace's, from the service)."""
        self.store = store
        self.addresses = addresses

    def default_group(self) -> Optional[int]:
        """The site's default overflow group as the running service applied it (its settings snapshot
        in the store, written at start); None: overflow without a group takes the default verdict."""
        snapshot = self.store.get_setting("snapshot") or {}
        return snapshot.get("default_alternative")

    def spec_of(self, tenant: str) -> Optional[TenantSpec]:
        record = self.store.get_tenant(tenant)
        return None if record is None else record.spec

    def effective_spec(self, who: Principal, tenant: str) -> TenantSpec:
        """The tenant's record, or what applies without one when `who` acts for it: site-wide for an
        administrator's own tenant, no traffic for any other."""
        spec = self.spec_of(tenant)
        return spec if spec is not None else TenantSpec(site=who.is_admin and tenant == who.tenant)

    def grants_for(self, who: Principal, tenant: str) -> Optional[list[TrafficGrant]]:
        """The grants `tenant`'s intents are confined to when `who` writes them; None: site-wide."""
        spec = self.effective_spec(who, tenant)
        return None if spec.site else spec.traffic

    def interfaces_for(self, who: Principal, tenant: str) -> Optional[list[str]]:
        """The interfaces `tenant`'s rules may send out of when `who` writes them; None: any."""
        return destinations.interfaces_of(self.effective_spec(who, tenant))

    def confined(self, who: Principal, tenant: str, intent: Intent) -> tuple[Intent, Optional[str]]:
        """The intent as it may be installed for `tenant`, and what was narrowed (None: nothing).
        IntentError (field below `match`) when it cannot be kept inside the tenant's traffic, or
        (field below `action`, or `alternative`) when it sends outside its destinations, or puts
        another host's address as a tunnel's source."""
        spec = self.effective_spec(who, tenant)
        if spec.site:
            return intent, None
        destinations.check_intent(intent, destinations.allowed(spec), tenant, self.store.get_alternative,
                                  self.default_group())
        destinations.check_source(intent, self.addresses)
        match, narrowed = confine(intent.match, spec.traffic, tenant)
        if narrowed is None:
            return intent, None
        return intent.model_copy(update={"match": match}), narrowed

    def check_slice(self, who: Principal, tenant: str, spec: SliceSpec) -> None:
        """A confined tenant's slice uses one of its S-NSSAIs, when the record lists any."""
        record = self.spec_of(tenant)
        if record is None or record.site or not record.snssais or spec.snssai in record.snssais:
            return
        allowed = ", ".join(_snssai(s) for s in record.snssais)
        raise IntentError.at("snssai", f"S-NSSAI {_snssai(spec.snssai)} is not granted to tenant {tenant!r} (granted: {allowed})")

    def quotas_of(self, tenant: str) -> TenantQuotas:
        spec = self.spec_of(tenant)
        return TenantQuotas() if spec is None else spec.quotas

    def check_quotas(self, tenant: str) -> None:
        """After a change's rows are written: QuotaExceeded when the tenant now holds too much."""
        quotas = self.quotas_of(tenant)
        intents, slices = self.store.tenant_usage(tenant)
        for kind, used, most in (("intents", intents, quotas.intents), ("slices", slices, quotas.slices)):
            if used > most:
                raise QuotaExceeded(
                    f"tenant {tenant!r} may hold {most} {kind} (quotas.{kind}); this change would make it {used}",
                    quota=kind,
                    limit=most,
                    used=used,
                )

    def usage(self, tenant: str) -> TenantUsage:
        intents, slices = self.store.tenant_usage(tenant)
        return TenantUsage(intents=intents, slices=slices, frer_streams=self.holds_streams(tenant),
                           atsss_sessions=count_sessions(self.store, tenant))

    def check_spec(self, tenant: str, spec: TenantSpec) -> None:
        """Conflict when `spec` would let the tenant's traffic meet another tenant's, or leave one of
        its intents outside it (change or delete those first)."""
        if spec.site:
            return
        self._check_disjoint(tenant, spec.traffic)
        self._check_intents_inside(tenant, spec.traffic)
        self._check_intents_destinations(tenant, spec)
        self._check_streams_inside(tenant, spec)
        self._check_atsss_inside(tenant, spec)

    def check_group_users(self, group_id: int, users: Iterable[tuple[str, str]]) -> None:
        """Conflict when, with alternative group `group_id` as the store now holds it, an intent of a
        confined tenant among `users` ((tenant, intent id) of the rules sending to it) would send
        outside its tenant's destinations."""
        for tenant, intent_id in users:
            spec = self.spec_of(tenant)
            record = self.store.get_intent(tenant, intent_id)
            if spec is None or spec.site or record is None:
                continue
            try:
                destinations.check_intent(record.intent, destinations.allowed(spec), tenant, self.store.get_alternative,
                                          self.default_group())
            except IntentError as exc:
                raise Conflict(
                    f"alternative group {group_id}: intent {intent_id!r} of tenant {tenant!r} sends to it, and "
                    f"{exc.message}: change or delete the intent first, or the tenant's destinations",
                    field="members",
                    tenant=tenant,
                ) from None

    def check_default_group(self, group_id: Optional[int]) -> None:
        """Conflict when, with `group_id` as the site's default overflow group (the store's groups as
        they are now), an intent of a confined tenant that names no group would overflow outside its
        tenant's destinations."""
        if group_id is None:
            return
        for record in self.store.list_tenants():
            if record.spec.site:
                continue
            intents = [stored.intent for stored in self.store.tenant_intents(record.tenant)]
            outside = destinations.outside(intents, destinations.allowed(record.spec), record.tenant,
                                           self.store.get_alternative, group_id)
            if outside:
                intent_id, why = outside[0]
                raise Conflict(
                    f"default alternative group {group_id}: intent {intent_id!r} of tenant {record.tenant!r} "
                    f"overflows to it, and {why.line()}: give the intent an alternative group, or change the "
                    "tenant's destinations",
                    field="default_alternative",
                    tenant=record.tenant,
                    intent=intent_id,
                )

    def _check_disjoint(self, tenant: str, traffic: Sequence[TrafficGrant]) -> None:
        for other in self.store.list_tenants():
            if other.tenant == tenant or other.spec.site:
                continue
            for n, mine in enumerate(traffic):
                for theirs in other.spec.traffic:
                    if grants_intersect(mine, theirs):
                        raise Conflict(
                            f"traffic[{n}] ({mine.describe()}) meets the grant {theirs.describe()!r} of "
                            f"tenant {other.tenant!r}: grants of different tenants must not share packets",
                            field=f"traffic[{n}]",
                            tenant=other.tenant,
                        )

    def _check_intents_inside(self, tenant: str, traffic: Sequence[TrafficGrant]) -> None:
        outside = []
        for record in self.store.tenant_intents(tenant):
            try:
                _, narrowed = confine(record.intent.match, traffic, tenant)
            except IntentError:
                narrowed = "outside"
            if narrowed is not None:
                outside.append(record.intent.id)
        _refuse_intents(tenant, outside, "lie outside this traffic", "traffic")

    def _check_intents_destinations(self, tenant: str, spec: TenantSpec) -> None:
        """Conflict when one of the tenant's intents would send outside the spec's destinations."""
        intents = [record.intent for record in self.store.tenant_intents(tenant)]
        outside = destinations.outside(intents, destinations.allowed(spec), tenant, self.store.get_alternative,
                                       self.default_group())
        if outside:
            first, why = outside[0]
            _refuse_intents(tenant, [intent_id for intent_id, _ in outside], "send outside these destinations",
                            "destinations", f" ({first!r}: {why.line()})")

    def _check_streams_inside(self, tenant: str, spec: TenantSpec) -> None:
        """Conflict when one of the tenant's FRER streams would reach outside this traffic."""
        for stream in load_streams(self.store, tenant):
            try:
                check_scope(stream, spec.traffic, tenant, destinations.interfaces_of(spec))
            except Forbidden as exc:
                raise Conflict(
                    f"FRER stream {stream.name!r} of tenant {tenant!r} would lie outside this traffic or its destinations "
                    f"({exc.field}): change or delete it first",
                    field=_spec_field(exc.field),
                    stream=stream.name,
                ) from None

    def _check_atsss_inside(self, tenant: str, spec: TenantSpec) -> None:
        """Conflict when one of the tenant's ATSSS sessions would steer a UE outside this traffic."""
        for session in load_sessions(self.store, tenant):
            try:
                atsss_scope.check_scope(session, spec.traffic, tenant, destinations.interfaces_of(spec))
            except Forbidden as exc:
                raise Conflict(
                    f"ATSSS session {session.name!r} of tenant {tenant!r} would lie outside this traffic or its destinations "
                    f"({exc.field}): change or delete it first",
                    field=_spec_field(exc.field),
                    session=session.name,
                ) from None

    def holds_streams(self, tenant: str) -> int:
        """The tenant's FRER streams."""
        return count_streams(self.store, tenant)


def _refuse_intents(tenant: str, outside: list[str], what: str, field: str, why: str = "") -> None:
    """Conflict naming the first of the tenant's intents that would `what` (none: nothing to refuse)."""
    if not outside:
        return
    shown = ", ".join(repr(i) for i in outside[:SHOWN_INTENTS])
    more = f" and {len(outside) - SHOWN_INTENTS} more" if len(outside) > SHOWN_INTENTS else ""
    raise Conflict(
        f"{len(outside)} intents of tenant {tenant!r} would {what} ({shown}{more}){why}: change or delete them first",
        field=field,
        intents=outside[:SHOWN_INTENTS],
    )


def _spec_field(field: str) -> str:
    """The spec's field that refuses a stream's or a session's `field`: an interface is a destination."""
    return "destinations" if field.endswith("interface") else "traffic"


def _snssai(snssai: Snssai) -> str:
    return f"{snssai.sst}" if snssai.sd is None else f"{snssai.sst}-{snssai.sd}"
