"""The QoS function's part of the service contract: the policers of intents and slices, as their
tenant may see them (a tenant its own; an admin every tenant's)."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING

from netapp.qos.views import PolicerRecord

if TYPE_CHECKING:  # netapp.service.contract joins this contract to its IntentService
    from netapp.service.contract import Principal


class PolicersContract(abc.ABC):
    @abc.abstractmethod
    def list_rule_policers(self, who: Principal) -> list[PolicerRecord]:
        """The policers of the caller's intents (their police option) and slices (their MBR): what
        each polices, its configuration, state and counters now."""
