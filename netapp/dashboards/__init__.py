"""Dashboards shipped with the NetApp, as files: the Grafana dashboard of its InfluxDB telemetry.

`GRAFANA_DASHBOARD` is the committed JSON, built by `netapp.dashboards.grafana` (grafanalib, a
build-time dependency: the `dashboards` extra) and installed with the package, so that reading it
(`netapp dashboards export`) needs nothing but the package.
"""

from __future__ import annotations

from pathlib import Path

GRAFANA_DASHBOARD = Path(__file__).resolve().with_name("dpp-netapp.json")
