"""The descriptors are valid SOL006 for yangson: mandatory nodes, cardinalities, leafrefs and
must-statements are checked (``deref()`` leafrefs relaxed to strings, see tests/utils/yang.py)."""

from __future__ import annotations


def test_vnfd_is_valid_sol006(strict, descriptors):
    strict.validate({"etsi-nfv-vnfd:vnfd": descriptors.vnfd})


def test_nsd_is_valid_sol006_with_its_vnfd(strict, descriptors):
    # nsd:nsd/vnfd holds the VNFD so that the NSD's vnfd-id leafrefs have a target.
    strict.validate({"etsi-nfv-nsd:nsd": {"vnfd": [descriptors.vnfd], "nsd": [descriptors.nsd]}})
