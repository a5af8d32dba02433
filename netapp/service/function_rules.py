"""Rules a network function installs itself, not from intents (the UPF's PDRs with SDF filters,
netapp.upf.sdf): in the service's index, with the slots, shapes, per-rule counters and one-write
transaction of intents' rules (netapp.service.transaction.RuleChange), under the service's lock.

They are kept apart from tenants' intents: their ids hold no '/' (an intent's is
`<tenant>/<intent id>`), their keys set the UPF bit no intent's key has (netapp.dataplane.convert), so
neither can shadow, collide with or be counted as the other; the full reconcile puts them back
(`ServiceState.function_rules`), and start()'s first one installs them as the function's stored state
compiles them (NetAppService.load_function_rules), so a restart does not take them out of the maps.
"""

from __future__ import annotations

from threading import RLock
from typing import TYPE_CHECKING, Callable, Mapping

from netapp.intents.compiler import CompiledRule
from netapp.intents.errors import CompileError

if TYPE_CHECKING:
    from netapp.service.state import ServiceState


class RuleClash(ValueError):
    """A rule whose key another rule has, or that needs a shape too many: `rule_id` names it."""

    def __init__(self, rule_id: str, why: str):
        super().__init__(why)
        self.rule_id = rule_id


class FunctionRules:
    """One network function's rules in the service's index and maps; at most the shapes its setting
    function_shapes gives it (a change adding one more is refused: the classifier's shapes are every
    rule's, and a function taking them all would leave none for the intents)."""

    def __init__(self, state: "ServiceState", name: str):
        self._state = state
        self._name = name
        self._rules: dict[str, CompiledRule] = state.function_rules.setdefault(name, {})

    @property
    def lock(self) -> "RLock":
        """The service's lock, which `change` takes: a caller holding the store's transaction too
        takes this one first, as the intents' transactions do (netapp.service.transaction)."""
        return self._state.lock

    @property
    def rules(self) -> Mapping[str, CompiledRule]:
        return dict(self._rules)

    def change(self, before: Mapping[str, CompiledRule], after: Mapping[str, CompiledRule]) -> Callable[[], None]:
        """Replace the rules `before` with `after` (by id) in the index and, in one write, the maps;
        the undo of it. Refused (RuleClash, or the data plane's ServiceError): nothing changed."""
        state = self._state
        with state.lock:
            change = state.rule_change()
            try:
                for rule_id, rule in before.items():
                    if after.get(rule_id) != rule and rule_id in state.index:
                        change.remove(rule_id)
                added = [rule for rule_id, rule in after.items() if before.get(rule_id) != rule]
                self._check_shapes(before, after)
                for rule in added:
                    _add(change.index_change, rule)
                clash = next((rule for rule in added if state.index.collisions(rule.intent_id)), None)
                if clash is not None:
                    raise RuleClash(clash.intent_id, f"its match {clash.shape.describe()} is another rule's")
                change.apply_to_maps()
            except BaseException:
                change.roll_back()
                raise
            change.committed()
            self._replace(before, after)

        def undo() -> None:
            with state.lock:
                change.undo_maps(RuntimeError("the change is undone"))
                change.roll_back()
                self._replace(after, before)

        return undo

    def _check_shapes(self, before: Mapping[str, CompiledRule], after: Mapping[str, CompiledRule]) -> None:
        """RuleClash naming the first rule of `after` whose shape takes the function's rules past
        their cap (settings function_shapes) and is not one they hold now: a cap lowered below the
        shapes they hold refuses new shapes only, also where a change gives up a held one."""
        cap = self._state.settings.function_shapes.get(self._name)
        if cap is None:
            return
        held = {rule.shape for rule in self._rules.values()}
        shapes = {rule.shape for rule_id, rule in self._rules.items() if rule_id not in before}
        for rule in after.values():
            shapes.add(rule.shape)
            if len(shapes) > cap and rule.shape not in held:
                raise RuleClash(rule.intent_id, f"its shape {rule.shape.describe()} would make the {self._name} rules "
                                f"take {len(shapes)} of the classifier's shapes, more than the node's setting "
                                f"function_shapes gives them ({cap}), which keeps the rest for the intents")

    def _replace(self, before: Mapping[str, CompiledRule], after: Mapping[str, CompiledRule]) -> None:
        for rule_id in before:
            self._rules.pop(rule_id, None)
        self._rules.update(after)


def _add(change, rule: CompiledRule) -> None:  # noqa: ANN001
    try:
        change.add(rule)
    except CompileError as exc:
        raise RuleClash(rule.intent_id, exc.line()) from exc
