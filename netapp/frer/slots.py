"""The slots of FRER's maps as the control plane writes them."""

from __future__ import annotations

from netapp.frer.abi import SEQ_SPACE, Flags, Recovery
from netapp.frer.model import RecoveryConfig


def recovery_value(config: RecoveryConfig, pop: bool = False) -> Recovery:
    """A recovery function's slot: its parameters, and the state SequenceRecoveryReset leaves
    (take any), its counters zero."""
    flags = (
        (Flags.INDIVIDUAL if config.individual else 0)
        | (Flags.TAKE_NO_SEQUENCE if config.take_no_sequence else 0)
        | (Flags.POP if pop else 0)
        | (Flags.LATENT if config.latent else 0)
    )
    return Recovery(
        algo=config.algo,
        history_len=config.history_len,
        flags=int(flags),
        latent_paths=config.latent_paths,
        latent_difference=config.latent_difference,
        reset_ns=config.reset_ns,
        latent_period_ns=config.latent_period_ns,
        latent_reset_period_ns=config.latent_reset_period_ns,
        take_any=1,
        seq=SEQ_SPACE - 1,
    )
