"""Emulated edge sites on one machine: network namespaces, veth links, real traffic."""
