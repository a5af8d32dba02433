"""TEST DOUBLE: the QoS function's part of `FakeIntentService` (tests.api.fake_service), the fake of
netapp.qos.contract: the intents' and slices' policers as a test puts them, by tenant."""

from __future__ import annotations

from netapp.qos.contract import PolicersContract
from netapp.qos.views import PolicerRecord
from netapp.service.contract import Principal, Scope
from tests.api.fake_state import FakeState


class FakePolicers(FakeState, PolicersContract):
    """Policer records as given; a tenant lists its own, an admin all."""

    def __init__(self) -> None:
        super().__init__()
        self.rule_policers: list[PolicerRecord] = []

    def list_rule_policers(self, who: Principal) -> list[PolicerRecord]:
        self._enter("list_rule_policers")
        if not who.allows(Scope.READ):
            return []
        return [record for record in self.rule_policers if who.is_admin or record.tenant == who.tenant]
