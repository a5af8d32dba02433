"""TEST DOUBLE: forwarding's part of `FakeIntentService` (tests.api.fake_service), the fake of
netapp.forwarding.contract: alternative groups in a dict."""

from __future__ import annotations

from netapp.forwarding.contract import AlternativesContract
from netapp.forwarding.models import AlternativeGroup, AlternativeGroupStatus, AlternativeMemberStatus
from netapp.service.contract import Conflict, NotFound, Principal
from tests.api.fake_state import FakeState, require_admin


class FakeAlternatives(FakeState, AlternativesContract):
    """Alternative groups: every member unprobed and alive."""

    def __init__(self) -> None:
        super().__init__()
        self.alternatives: dict[int, AlternativeGroup] = {}

    def list_alternatives(self, who: Principal) -> list[AlternativeGroup]:
        self._enter("list_alternatives")
        return [self.alternatives[key] for key in sorted(self.alternatives)]

    def get_alternative(self, who: Principal, group_id: int) -> AlternativeGroupStatus:
        self._enter("get_alternative")
        if group_id not in self.alternatives:
            raise NotFound(f"no alternative group {group_id}", field="group_id")
        group = self.alternatives[group_id]
        members = [
            AlternativeMemberStatus(
                **member.model_dump(), state="unprobed", alive=True, since=None, changes=0, last_answer=None
            )
            for member in group.members
        ]
        return AlternativeGroupStatus(id=group_id, members=members, active=len(members))

    def put_alternative(self, who: Principal, group: AlternativeGroup) -> AlternativeGroup:
        self._enter("put_alternative")
        require_admin(who)
        self.alternatives[group.id] = group
        return group

    def delete_alternative(self, who: Principal, group_id: int) -> None:
        self._enter("delete_alternative")
        require_admin(who)
        if group_id not in self.alternatives:
            raise NotFound(f"no alternative group {group_id}", field="group_id")
        users = [r.intent.id for r in self.intents.values() if r.intent.alternative == group_id]
        if users:
            raise Conflict(f"alternative group {group_id} is used by {', '.join(users)}", intents=users)
        del self.alternatives[group_id]
