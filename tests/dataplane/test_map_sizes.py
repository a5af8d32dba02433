"""Map sizes chosen at load by name (dpp_open_opts.map_sizes, `Dataplane.open(map_sizes=...)`, setting
`dataplane.map_sizes`): a capacity map takes the size asked for; an unknown map, a map whose size the
program assumes and a per-CPU map too large for memory are refused before anything is loaded; a pinned
instance keeps its sizes when reopened (a different size asked for is reported) and through an
upgrade."""

from __future__ import annotations

import errno
import logging
import re

import pytest
from pydantic import ValidationError

from netapp.core.config import Settings
from netapp.dataplane.binding import MAPS, SIZABLE_MAPS, DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.handle import possible_cpus
from netapp.upf.abi import MAX_UPF_PDRS, MAX_UPF_URRS, Usage
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance

URRS = (1 << 20) + 1  # a million URR slots and slot 0, which is never given


@pytest.fixture(autouse=True)
def kernel(request):
    if "settings" not in request.node.name:
        require_kernel()


def refusal(caplog, **sizes) -> DataplaneError:
    with caplog.at_level(logging.WARNING, logger="netapp.dataplane"), pytest.raises(DataplaneError) as refused:
        Dataplane.open(map_sizes=sizes).close()
    return refused.value


def test_a_capacity_map_takes_the_size_asked_for_and_the_others_keep_theirs():
    with Dataplane.open(map_sizes={"dpp_upf_usage": URRS, "dpp_upf_uplink": 1000}) as dp:
        assert dp.map_size("dpp_upf_usage") == URRS
        assert dp.map_size("dpp_upf_uplink") == 1000
        assert dp.map_size("dpp_upf_downlink") == MAX_UPF_PDRS
        usage = dp.table("dpp_upf_usage")
        assert usage.max_entries == URRS
        last = Usage(ul_packets=7)
        usage.update([(URRS - 1, last)])  # the last slot exists
        assert bytes(usage.get(URRS - 1)) == bytes(last)
    with Dataplane.open() as dp:
        assert dp.map_size("dpp_upf_usage") == MAX_UPF_URRS


def test_an_unknown_map_is_refused_by_name(caplog):
    assert refusal(caplog, dpp_upf_sessions=10).errno == errno.ENOENT
    assert "map size of dpp_upf_sessions: the BPF object has no map of that name" in caplog.text


@pytest.mark.parametrize("name", sorted(set(MAPS) - SIZABLE_MAPS))
def test_a_map_whose_size_the_program_assumes_is_refused(caplog, name):
    """Every map but the capacity ones (table=False specs, and plain tables indexed by the
    program's arithmetic): libdpp's list and the mirrors' `sizable` agree."""
    assert refusal(caplog, **{name: 8}).errno == errno.EPERM
    assert f"map size of {name}: its size is the program's" in caplog.text


def test_zero_entries_are_refused(caplog):
    assert refusal(caplog, dpp_upf_usage=0).errno == errno.EINVAL


def test_a_reopened_instance_keeps_its_pinned_sizes_and_reports_a_different_one(caplog):
    with pinned_instance("sizes") as instance:
        Dataplane.open(instance=instance, map_sizes={"dpp_upf_usage": 4096}).close()
        with caplog.at_level(logging.WARNING, logger="netapp.dataplane"):
            with Dataplane.open(instance=instance, map_sizes={"dpp_upf_usage": 4096}) as same:
                assert same.map_size("dpp_upf_usage") == 4096
            assert "pinned with" not in caplog.text
            with Dataplane.open(instance=instance, map_sizes={"dpp_upf_usage": 8192}) as other:
                assert other.map_size("dpp_upf_usage") == 4096, "the pinned map's size wins"
            assert "dpp_upf_usage of instance" in caplog.text
            assert "pinned with 4096 entries: the 8192 asked for are not applied" in caplog.text
            with pytest.raises(DataplaneError) as refused:
                Dataplane.open(instance=instance, map_sizes={"dpp_rules": 8})
            assert refused.value.errno == errno.EPERM, "checked on reopen as on load"


def test_an_upgrade_keeps_the_sizes_chosen_at_load():
    """dpp_policer_stats too, a row of dpp_policers' slots per possible CPU (bpf/nf/qos/maps.h)."""
    with pinned_instance("sizes-up") as instance:
        with Dataplane.open(instance=instance, map_sizes={"dpp_upf_usage": 4096, "dpp_policers": 1000}) as dp:
            assert dp.map_size("dpp_policer_stats") == possible_cpus() * 1000
            before, after = dp.reload()
            assert before != after
            assert dp.map_size("dpp_upf_usage") == 4096
            assert dp.map_size("dpp_policer_stats") == possible_cpus() * 1000
            assert dp.table("dpp_policer_stats").row == 1000


# --- settings ----------------------------------------------------------------------------------


def settings(tmp_path, **map_sizes) -> Settings:
    return Settings(state_dir=tmp_path, auth_disabled=True, dataplane={"map_sizes": map_sizes})


def test_settings_take_the_sizes_of_capacity_maps(tmp_path):
    assert settings(tmp_path, dpp_upf_usage=URRS).dataplane.map_sizes == {"dpp_upf_usage": URRS}
    assert Settings(state_dir=tmp_path, auth_disabled=True).dataplane.map_sizes == {}


@pytest.mark.parametrize(
    ("sizes", "why"),
    [
        ({"dpp_upf_sessions": 10}, "dataplane.map_sizes.dpp_upf_sessions: no map of that name"),
        ({"dpp_rules": 10}, "dataplane.map_sizes.dpp_rules: its size is the program's"),
        ({"dpp_policer_stats": 10}, "dataplane.map_sizes.dpp_policer_stats: its size is the program's (a row of "
                                    "dpp_policers' slots per CPU, sized with it)"),
        ({"dpp_upf_ifaces": 10}, "the maps sized at load: dpp_neighs, dpp_policers, "
                                 "dpp_routes, dpp_rule_policers, dpp_upf_dl4, "
                                 "dpp_upf_downlink, dpp_upf_sdf_pdrs, "
                                 "dpp_upf_teids, dpp_upf_ue4, dpp_upf_uplink, dpp_upf_usage"),
        ({"dpp_upf_usage": 0}, "dataplane.map_sizes.dpp_upf_usage: 0 entries: 1 to 4294967295 allowed"),
    ],
)
def test_settings_refuse_a_map_size_naming_the_field(tmp_path, sizes, why):
    with pytest.raises(ValidationError, match=re.escape(why)):
        settings(tmp_path, **sizes)
