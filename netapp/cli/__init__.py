"""The `netapp` command line."""
