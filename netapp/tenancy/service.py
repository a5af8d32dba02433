"""The tenants' records: read by their tenants, written by administrators.

Each write is one store transaction, which holds the store's lock as the intent service's
transactions do, so a record never changes between an intent's confinement and its commit.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from netapp.service.contract import Conflict, Forbidden, NotFound, Principal, Scope
from netapp.service.store import Store
from netapp.tenancy.models import TenantQuotas, TenantRecord, TenantSpec
from netapp.tenancy.policy import TenantPolicy


class TenantService:
    """`store_of` gives the store when a request comes: the intent service opens it when it starts."""

    def __init__(
        self,
        store_of: Callable[[], Store],
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        open_objects: Callable[[str], dict[str, int]] = lambda tenant: {},
    ):
        """`open_objects(tenant)`: what the tenant holds outside the store (telemetry's
        subscriptions and streams), for its usage."""
        self._store_of = store_of
        self._clock = clock
        self._open_objects = open_objects

    @property
    def store(self) -> Store:
        return self._store_of()

    @property
    def policy(self) -> TenantPolicy:
        return TenantPolicy(self.store)

    def list_tenants(self, who: Principal) -> list[TenantRecord]:
        _require_admin(who)
        return [self._with_usage(record) for record in self.store.list_tenants()]

    def quotas_of(self, who: Principal) -> TenantQuotas:
        """The caller's tenant's quotas (the defaults without a record)."""
        return self.policy.quotas_of(who.tenant)

    def get_tenant(self, who: Principal, tenant: str) -> TenantRecord:
        """A tenant's record and usage: its own for any caller with scope read, any for admins. A
        tenant without a record is shown with what applies to it (no traffic, default quotas)."""
        if not (who.is_admin or (tenant == who.tenant and who.allows(Scope.READ))):
            raise NotFound(f"no tenant {tenant!r}")
        record = self.store.get_tenant(tenant) or TenantRecord(
            tenant=tenant, spec=self.policy.effective_spec(who, tenant), updated_at=self._clock(), revision=0
        )
        return self._with_usage(record)

    def put_tenant(self, who: Principal, tenant: str, spec: TenantSpec) -> tuple[TenantRecord, bool]:
        """Create or replace a tenant's record; True when created. Conflict when its traffic would
        meet another tenant's or leave one of its intents outside."""
        _require_admin(who)
        with self.store.transaction():
            old = self.store.get_tenant(tenant)
            self.policy.check_spec(tenant, spec)
            record = TenantRecord(
                tenant=tenant, spec=spec, updated_at=self._clock(), revision=old.revision + 1 if old else 1
            )
            self.store.put_tenant(record)
        return self._with_usage(record), old is None

    def delete_tenant(self, who: Principal, tenant: str) -> None:
        """Refused while the tenant holds intents, slices or FRER streams: they would be left outside any grant."""
        _require_admin(who)
        with self.store.transaction():
            if self.store.get_tenant(tenant) is None:
                raise NotFound(f"no tenant {tenant!r}")
            usage = self.policy.usage(tenant)
            streams = self.policy.holds_streams(tenant)
            if usage.intents or usage.slices or streams:
                raise Conflict(
                    f"tenant {tenant!r} holds {usage.intents} intents, {usage.slices} slices and {streams} FRER "
                    "streams: delete them first",
                    field="tenant",
                )
            self.store.delete_tenant(tenant)

    def _with_usage(self, record: TenantRecord) -> TenantRecord:
        usage = self.policy.usage(record.tenant).model_copy(update=self._open_objects(record.tenant))
        return record.model_copy(update={"usage": usage})


def _require_admin(who: Principal) -> None:
    if not who.is_admin:
        raise Forbidden("needs scope 'admin'", required_scope=Scope.ADMIN.value)
