"""What the service offers about alternative node groups, its part of the aggregate contract
(netapp.service.contract.IntentService); netapp.forwarding.service implements it.

`Principal` is only named in annotations: netapp.service.contract, where it is defined, composes
this contract and cannot be imported from here at run time."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

from netapp.forwarding.models import AlternativeGroup, AlternativeGroupStatus

if TYPE_CHECKING:
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
