"""Who gives which policer ids (slots of dpp_policers): the UPF's QERs (netapp.upf.policing) the
lower half, rules and slices (netapp.qos.rules) the upper half.

    0                    size // 2                         size
    | no policer | QERs'  |  intents' own, slices' shared  |

Each side gives, rewrites and empties (also when it reconciles the map at start) only the ids of its
own range, so neither can take or clear the other's. The map's size is the one in force
(dataplane.map_sizes.dpp_policers; 65536 by default: 32767 for QERs, 32768 for rules and slices).
"""

from __future__ import annotations


def upf_ids(size: int) -> range:
    """The ids the UPF gives its QERs' policers (0 is never a policer)."""
    return range(1, size // 2)


def rule_ids(size: int) -> range:
    """The ids of intents' and slices' policers."""
    return range(size // 2, size)
