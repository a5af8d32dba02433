"""A real Prometheus (Debian's package) scrapes a real `netapp serve`'s metrics listener and
evaluates the shipped scaling rules (vnfd/prometheus/dpp-netapp-rules.yml) as an operator's would.

The NetApp runs natively on an emulated edge site's n3 with one metered CPU, and an ATSSS session
whose paths' series (`dpp_atsss_path_*`, which telemetry.atsss_path_metrics asks for) the scrapes
carry. Idle, that CPU's `dpp_cpu_load_ratio` is 0 and the scale-in alert fires; once the RAN side sends a priority flow
steered to that CPU at twice its capacity, the scale-out alert fires and the scale-in one ends.
The test's copy of the rules shortens `for:` (the VNFD's 60 s) to a few seconds; the expressions,
thresholds included, are the shipped ones.

About the meter: a CPU with capacity_pps takes at most max(1, capacity x 1 ms) frames per 1 ms
window; the generator spaces its frames at least 1.2 ms apart (netapp.testbed.demo.PacedTraffic),
so every frame is admitted and the load is what is offered: about 2, far above the threshold even
when a busy machine slows the sender down.

Needs root, libdpp and prometheus (skipped outside CI, a failure under CI).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from netapp.telemetry.prometheusd import LocalPrometheus
from netapp.testbed import scenario
from netapp.testbed.demo import PacedTraffic
from netapp.testbed.topology import EdgeSite
from tests.utils.kernel import edge_site_with_alternative
from tests.utils.maps import pinned_instance
from tests.utils.prometheus import RULES, require_prometheus
from tests.utils.serve import ServeProcess, free_port, write_node_settings

NODE = "prom-edge"
CPU = max(os.sched_getaffinity(0))  # the sender may run on it, so the test can use it
FLOW = scenario.Flow(0)  # a priority flow
CAPACITY_PPS = 50
OFFERED_PPS = 100.0  # twice the capacity: a load of 2, against the rules' 0.8
FOR_S = 3  # the test's `for:`, instead of the VNFD's threshold-time
TELEMETRY_INTERVAL_S = 0.5
DEADLINE_S = 60.0  # each wait; two busy cores make every step slow
ATSSS_SESSION = {"name": "ue9", "ue": "10.99.0.9", "mode": "weighted", "paths": [
    {"access": access, "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}", "local_port": 5000 + n,
     "peer_port": 6000 + n, "source_mac": "02:00:00:00:aa:01", "next_hop_mac": "02:00:00:00:bb:01",
     "rtt_us": 20_000 * n} for n, access in ((1, "3GPP"), (2, "non-3GPP"))]}


@pytest.fixture
def site() -> Iterator[EdgeSite]:
    require_prometheus()
    with edge_site_with_alternative() as edge:  # overflow, were there any, goes there
        yield edge


@pytest.fixture
def serve(site: EdgeSite, tmp_path: Path) -> Iterator[tuple[ServeProcess, str, int]]:
    """`netapp serve` on the site with its metrics listener on loopback; (process, admin token,
    listener port)."""
    listener_port = free_port()
    with pinned_instance("prom", site.ns("node")) as instance:
        config, token = write_node_settings(
            tmp_path,
            instance,
            site.ns("node"),
            [site.n3.ifname],
            "operator",
            max_rules=1024,
            telemetry={
                "interval_s": TELEMETRY_INTERVAL_S,
                "node": NODE,
                "metrics_listener": {"enabled": True, "host": "127.0.0.1", "port": listener_port},
                "atsss_path_metrics": True,  # per-path series are off /metrics by default
            },
        )
        process = ServeProcess(config, free_port(), tmp_path)
        try:
            process.start()
            yield process, token, listener_port
        finally:
            process.stop()


def shortened_rules(path: Path) -> Path:
    """The shipped rules with `for:` shortened to FOR_S; everything else as shipped."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = f"{FOR_S}s"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


@pytest.fixture
def prometheus(serve, tmp_path: Path) -> Iterator[LocalPrometheus]:
    _, _, listener_port = serve
    rules = shortened_rules(tmp_path / "rules.yml")
    with LocalPrometheus(
        tmp_path / "prometheus", [f"127.0.0.1:{listener_port}"], rule_files=[rules], scrape_interval_s=1.0
    ) as server:
        yield server


def configure(api: httpx.Client, site: EdgeSite) -> None:
    """The alternative node, one CPU with a capacity, one priority intent steered to it; an ATSSS
    session of a UE the site sends nothing to, whose paths the scrapes show."""
    for group in scenario.document(site, [CPU])["alternatives"]:
        api.put(f"/api/v1/alternatives/{group['id']}", json=group).raise_for_status()
    api.put(f"/api/v1/dataplane/cpus/{CPU}", json={"cpu": CPU, "capacity_pps": CAPACITY_PPS}).raise_for_status()
    response = api.post("/api/v1/intents", json=scenario.priority_intent(site, FLOW, [CPU]))
    assert response.status_code == 201, response.text
    response = api.post("/api/v1/atsss/sessions", json=ATSSS_SESSION)
    assert response.status_code == 201, response.text


def wait_for(what: str, found: Callable[[], Any], prometheus: LocalPrometheus) -> Any:
    """Poll `found` until it returns something true; fail naming `what` after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        answer = found()
        if answer:
            return answer
        time.sleep(0.25)
    targets = prometheus.api("targets")["activeTargets"]
    pytest.fail(f"no {what} within {DEADLINE_S:g} s; targets: {targets}; alerts: {prometheus.alerts()}")


def alerts(prometheus: LocalPrometheus, name: str, state: str = "firing") -> list[dict[str, Any]]:
    return [
        alert for alert in prometheus.alerts()
        if alert["labels"]["alertname"] == name and alert["state"] == state and alert["labels"]["node"] == NODE
    ]


def test_prometheus_scrapes_the_listener_and_the_scaling_alerts_follow_the_load(site, serve, prometheus):
    process, token, _ = serve
    shipped = {rule["alert"]: rule["expr"] for rule in yaml.safe_load(RULES.read_text())["groups"][0]["rules"]}
    loaded = {rule["name"]: rule["query"] for group in prometheus.api("rules")["groups"] for rule in group["rules"]}
    assert loaded == shipped
    with httpx.Client(base_url=process.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as api:
        configure(api, site)

    build = wait_for("dpp_build_info", lambda: prometheus.query(f'dpp_build_info{{node="{NODE}"}} == 1'), prometheus)
    assert build[0]["metric"]["job"] == "dpp-netapp"
    wait_for("CPU counter", lambda: prometheus.query(f'dpp_cpu_packets_total{{node="{NODE}",cpu="{CPU}"}}'),
             prometheus)
    rtts = wait_for("the ATSSS paths' RTTs", lambda: prometheus.query(
        f'dpp_atsss_path_rtt_seconds{{node="{NODE}",tenant="operator",session="ue9"}}'), prometheus)
    assert sorted((row["metric"]["path"], row["metric"]["access"], float(row["value"][1])) for row in rtts) == [
        ("0", "3GPP", 0.02), ("1", "non-3GPP", 0.04)]

    # Idle: the load is 0, under the scale-in threshold.
    wait_for("firing scale-in alert while idle", lambda: alerts(prometheus, "DppNetAppScaleIn"), prometheus)
    assert not alerts(prometheus, "DppNetAppScaleOut", "pending") + alerts(prometheus, "DppNetAppScaleOut")

    traffic = PacedTraffic(site, {FLOW: lambda _: OFFERED_PPS}, sending_cpu=lambda _: CPU)
    traffic.start()
    try:
        (firing,) = wait_for("firing scale-out alert under load", lambda: alerts(prometheus, "DppNetAppScaleOut"),
                             prometheus)
        wait_for("the end of the scale-in alert", lambda: not alerts(prometheus, "DppNetAppScaleIn", "pending")
                 and not alerts(prometheus, "DppNetAppScaleIn"), prometheus)
    finally:
        sent = traffic.stop()

    assert float(firing["value"]) > 0.8
    assert firing["labels"]["scaling_direction"] == "out"
    steered = prometheus.query(f'dpp_cpu_packets_total{{node="{NODE}",cpu="{CPU}"}}')
    assert 0 < float(steered[0]["value"][1]) <= sent[FLOW.index]
