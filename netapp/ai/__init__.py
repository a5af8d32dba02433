"""The reference AI module: a closed loop that reads the NetApp's telemetry from InfluxDB,
forecasts each CPU's load (forecast), decides (policy) and acts through the REST API (client),
writing what it forecast and decided back to InfluxDB (record). `netapp ai run` runs it (loop)."""
