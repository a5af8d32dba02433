"""Telemetry: the collector, its sinks (InfluxDB, Prometheus, subscriptions) and the schema."""
