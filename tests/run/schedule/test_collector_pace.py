"""The garbage collector's pace while a ``generate`` job runs: fewer collections, the process's
thresholds back when the last job ends, a collector switched off left off."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from openrouter_probe.run.schedule.garbage import FIRST, OLDER, paced


@pytest.fixture(autouse=True)
def _thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_a_job_raises_the_thresholds_and_puts_them_back() -> None:
    gc.set_threshold(700, 10, 10)
    with paced():
        assert gc.get_threshold() == (FIRST, *OLDER)
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_jobs_put_them_back_when_the_last_one_ends() -> None:
    gc.set_threshold(700, 10, 10)
    first, second = paced(), paced()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first to start ends first: the second still runs
    assert gc.get_threshold() == (FIRST, *OLDER)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == (700, 10, 10)


def test_higher_thresholds_and_a_collector_switched_off_are_kept() -> None:
    gc.set_threshold(50_000, 10, 200)
    with paced():
        assert gc.get_threshold() == (50_000, OLDER[0], 200)
    gc.set_threshold(0, 10, 10)  # off
    with paced():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_a_job_that_raises_puts_them_back() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), paced():
        raise RuntimeError("the job failed")
    assert gc.get_threshold() == (700, 10, 10)
