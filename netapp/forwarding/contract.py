"""The service's operations on alternative node groups (netapp.forwarding.service), a part of
IntentService."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

from netapp.forwarding.models import AlternativeGroup, AlternativeGroupStatus

if TYPE_CHECKING:  # only annotations: netapp.service.contract imports this module
    from netapp.service.contract import Principal


class AlternativesContract(abc.ABC):
    """Alternative node groups (admin): where overflow goes, with each member's liveness."""

    @abc.abstractmethod
    def list_alternatives(self, who: Principal) -> list[AlternativeGroup]: ...

    @abc.abstractmethod
    def get_alternative(self, who: Principal, group_id: int) -> AlternativeGroupStatus:
        """The group with each member's liveness."""

    @abc.abstractmethod
    def put_alternative(self, who: Principal, group: AlternativeGroup) -> AlternativeGroup: ...

    @abc.abstractmethod
    def delete_alternative(self, who: Principal, group_id: int) -> None: ...
