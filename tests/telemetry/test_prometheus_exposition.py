"""The Prometheus exposition as Prometheus' own tools judge it: `promtool check metrics` finds
nothing to say about a scrape of the metrics listener over the real data plane, and every metric's
type, labels and HELP text are what api/telemetry.md's "Prometheus metrics" table says (the one
place they are written down for people; HELP in netapp.telemetry.prometheus must equal it)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp import __version__
from netapp.core.config import MetricsListenerSettings
from netapp.dataplane import binding
from netapp.steering.models import CpuSpec
from netapp.service.service import NetAppService
from netapp.telemetry.collector import Collector
from netapp.telemetry.metrics_listener import MetricsListener
from netapp.telemetry.prometheus import HELP, build_labels, cpu_loads, exposition
from tests.telemetry.test_schema import DOC, SinkWithStats, documented, everything_collector
from tests.utils.kernel import require_kernel
from tests.utils.prometheus import promtool
from tests.utils.service import ADMIN, ALICE, grant_site, intent, settings_for, slice_spec

ROW = re.compile(r"^\| `(dpp_\w+)` \| (counter|gauge) \| ([^|]*) \| ([^|]+) \|$")


def documented_metrics() -> dict[str, tuple[str, list[str], str]]:
    """name -> (type, labels, help) from the doc's "Prometheus metrics" table."""
    table = DOC.read_text().split("### Prometheus metrics", 1)[1]
    found = {}
    for line in table.splitlines():
        row = ROW.match(line)
        if row:
            name, kind, labels, help_text = row.groups()
            found[name] = (kind, re.findall(r"`(\w+)`", labels), help_text.strip())
    return found


def families(text: str) -> dict[str, tuple[str, list[str], str]]:
    """exposed name -> (type, labels, help), through Prometheus' text parser."""
    found = {}
    for family in text_string_to_metric_families(text):
        name = family.name + "_total" if family.type == "counter" else family.name
        labels = sorted({label for sample in family.samples for label in sample.labels})
        found[name] = (family.type, labels, family.documentation)
    return found


@pytest.fixture(scope="module")
def everything() -> str:
    """The exposition of a poll holding every field of the schema, and the build."""
    sink_fields = {
        name: 0
        for name in documented()["dpp_telemetry"]["field"]
        if name.startswith(("points_", "write_", "batches_"))
    }
    collector = everything_collector([SinkWithStats(sink_fields)])
    collector.poll_once()
    points = list(collector.poll_once().points())
    return exposition(points, load=cpu_loads(points), build=build_labels("edge-1")).decode()


def test_every_metric_exposed_is_documented_with_its_type_labels_and_help(everything):
    exposed, table = families(everything), documented_metrics()

    assert set(exposed) == set(table)
    for name, (kind, labels, help_text) in table.items():
        assert exposed[name] == (kind, sorted(labels), help_text), name
    assert set(HELP) == set(table)


def test_promtool_finds_nothing_to_say_about_every_metric(everything):
    checked = promtool("check", "metrics", stdin=everything.encode())

    assert (checked.returncode, checked.stdout + checked.stderr) == (0, b"")


def test_promtool_catches_what_it_should(everything):
    """The check above can fail: a counter without `_total` is one promtool reports."""
    broken = everything.replace("dpp_intent_packets_total", "dpp_intent_packets")

    checked = promtool("check", "metrics", stdin=broken.encode())

    assert checked.returncode != 0
    assert b"dpp_intent_packets" in checked.stdout + checked.stderr


def test_build_info_says_which_netapp_answers(everything):
    (info,) = [f for f in text_string_to_metric_families(everything) if f.name == "dpp_build_info"]

    assert [(s.labels, s.value) for s in info.samples] == [({"node": "edge-1", "version": __version__}, 1.0)]


# --- the real data plane ----------------------------------------------------------------------


def udp_frame(dport: int) -> bytes:
    frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2")
    return bytes(frame / UDP(sport=40000, dport=dport) / (b"x" * 32))


@pytest.fixture
def listener_over_the_kernel(tmp_path) -> Iterator[tuple[str, Collector]]:
    """(url, collector): the metrics listener over a collector of the real service, with
    intents in and out of a slice, a metered CPU and counted packets."""
    require_kernel()
    name = f"prom-{secrets.token_hex(3)}"
    service = NetAppService(settings_for(tmp_path, instance=name, max_rules=4096))
    service.start()
    listener = None
    try:
        grant_site(service, ALICE.tenant)
        service.put_cpu(ADMIN, CpuSpec(cpu=1, capacity_pps=1000))
        service.create_intent(ALICE, intent("voice", 6000))
        service.put_slice(ALICE, slice_spec())
        collector = Collector(service, node="edge-1")
        collector.poll_once()
        for _ in range(25):
            service.dataplane.test_run(udp_frame(6000))
        service.dataplane.test_run(udp_frame(6000)[:20])
        collector.poll_once()
        listener = MetricsListener(collector, MetricsListenerSettings(enabled=True, port=0))
        listener.start()
        yield f"http://127.0.0.1:{listener.port}/metrics", collector
    finally:
        if listener is not None:
            listener.stop()
        service.close()
        handle = binding.DppHandle.open(binding.load_libdpp(), name)
        handle.unpin()
        handle.close()


def test_promtool_passes_a_scrape_of_the_listener_over_the_real_data_plane(listener_over_the_kernel):
    url, _ = listener_over_the_kernel

    scraped = httpx.get(url)
    checked = promtool("check", "metrics", stdin=scraped.content)

    assert scraped.status_code == 200
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, b"")
    exposed, table = families(scraped.text), documented_metrics()
    assert {"dpp_build_info", "dpp_intent_packets_total", "dpp_slice_intents", "dpp_cpu_load_ratio"} <= set(exposed)
    for name, described in exposed.items():
        assert described[0] == table[name][0] and described[2] == table[name][2], name
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
    }
    assert samples[("dpp_intent_packets_total", (("intent", "voice"), ("node", "edge-1"), ("slice", ""),
                                                 ("tenant", "alice")))] == 25
