"""Fixtures of the benchmark tests."""

from __future__ import annotations

from typing import Callable, Optional

import pytest

from bench import baseline
from tests.utils.run_wide import run_wide

# A --baseline test exports and builds HEAD (a minute or more on a loaded machine), or waits for the
# test of another worker that builds it, before it measures both sides.
BASELINE_TIMEOUT = pytest.mark.timeout(600)


@pytest.fixture(scope="session")
def shared_baselines(tmp_path_factory, worker_id: str) -> Callable[..., Optional[baseline.Baseline]]:
    """prepare_baseline into one directory for the whole run, so that the --baseline tests export
    and build HEAD once, not once each (a build takes about a minute on a loaded machine): the
    export is kept when made from the same commit, and make builds nothing new. Not bench/build/:
    the tests leave nothing behind."""

    def prepare(rev: Optional[str], dataplane: bool = True) -> Optional[baseline.Baseline]:
        with run_wide(tmp_path_factory, worker_id, "baselines") as build_dir:
            return baseline.prepare_baseline(rev, build_dir=build_dir, dataplane=dataplane)

    return prepare
