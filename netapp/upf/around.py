"""The appliers that act around the data path's (netapp.upf.applier): End Markers
(netapp.upf.endmarker) and buffering (netapp.upf.buffering), chained by netapp.upf.runtime as
Buffering(EndMarkers(BpfApplier)).

A change reaches the data path by one of four calls: one session's change (`apply`), the changes of
a transaction at once (`apply_group`), the stored sessions at start or once an undo left the maps
wrong (`reconcile`, `reconcile_compiled`). Each is defined here, passed on to the inner applier and
then shown to the wrapper (`_applied`; a wrapper that keeps state of its own overrides the
reconciles). What goes out of the node for a change (End Markers, replayed frames) waits until it
stands, its transaction over (`settled`, `_settled`): a change undone sends nothing. What the UPF reads of its applier (netapp.upf.sessions: its slot counts, usage, site,
what an undo left wrong) is the inner one's, named here one by one. Nothing else is passed on: a
call the data path's applier gains must be named here too, or it is not there, rather than reaching
the data path around the wrappers.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from netapp.upf.compiler import Entries
from netapp.upf.models import RuleError, Session

Pair = tuple[Optional[Session], Optional[Session]]
Compiled = Iterable[tuple[int, Callable[[], Entries]]]


class AroundApplier:
    """An applier that does what it adds once its inner applier has made each change."""

    def __init__(self, inner: Any):
        self._inner = inner

    # --- what the UPF reads of the data path's applier (AttributeError where the inner has none) ---

    @property
    def urr_slots(self) -> int:
        return self._inner.urr_slots

    @property
    def teid_slots(self) -> int:
        return self._inner.teid_slots

    @property
    def sdf_slots(self) -> int:
        return self._inner.sdf_slots

    @property
    def policer_slots(self) -> int:
        return self._inner.policer_slots

    @property
    def policers(self) -> Any:
        return self._inner.policers

    @property
    def site(self) -> Any:
        return self._inner.site

    @property
    def stale(self) -> list[str]:
        return self._inner.stale

    @property
    def usage(self) -> Callable[..., Any]:
        return self._inner.usage

    @property
    def final_usage(self) -> Callable[..., Any]:
        return self._inner.final_usage

    # --- changes: the inner applier's first -------------------------------------------------------

    def apply(self, old: Optional[Session], new: Optional[Session]) -> None:
        self._inner.apply(old, new)
        self._applied([(old, new)])

    def apply_group(self, pairs: list[Pair]) -> bool:
        """The pairs at once, as the inner applier takes them; False, nothing applied, when it takes
        no group or not this one (the caller then applies them in turn)."""
        group = getattr(self._inner, "apply_group", None)
        if group is None or not group(pairs):
            return False
        self._applied(pairs)
        return True

    def reconcile(self, sessions: Iterable[Session]) -> dict[int, RuleError]:
        return self._inner.reconcile(sessions)

    def reconcile_compiled(self, compiled: Compiled) -> dict[int, RuleError]:
        return self._inner.reconcile_compiled(compiled)

    def committed(self) -> None:
        """The changes applied are committed (netapp.upf.held.SessionChange)."""
        done = getattr(self._inner, "committed", None)
        if done is not None:
            done()

    def settled(self, pairs: list[Pair]) -> None:
        """The transaction that made `pairs` is committed and over: of its locks only the UPF's is
        held (not the service's or the store's, which every other change waits for). What the
        wrappers send out for it, the inner one's first."""
        done = getattr(self._inner, "settled", None)
        if done is not None:
            done(pairs)
        self._settled(pairs)

    def _applied(self, pairs: list[Pair]) -> None:
        """What the wrapper adds to the pairs the inner applier has just made."""

    def _settled(self, pairs: list[Pair]) -> None:
        """What the wrapper sends out once the pairs stand (`settled`)."""
