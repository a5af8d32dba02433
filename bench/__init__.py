"""Benchmarks of the DPP NetApp (see bench/README.md)."""
