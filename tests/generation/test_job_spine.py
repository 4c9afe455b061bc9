"""The job's spine: one ``generate`` of one row on the fake enters ``generation/job.py`` at most
3 times and crosses from ``generation/`` into ``run/`` by two calls of control, opening the
output (``open_run``) and running the job (``run_job``); every other call into ``run/`` is a
frozen value's own method or a property read (``scripts/trace_spine.py`` says how it counts)."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import FrameType, ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "trace_spine.py"


@pytest.fixture(scope="module")
def spine() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_spine", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_generate_enters_the_job_once_and_crosses_into_run_by_open_and_run(
    spine: ModuleType, tmp_path: Path
) -> None:
    counts = spine.trace(tmp_path)
    assert sum(counts["job_entries"].values()) <= 3, counts["job_entries"]
    assert dict(counts["control"]) == {"run/paid.py:open_run": 1, "run/paid.py:run_job": 1}
    # the values it leaves out are there: the run's start and prices made, the spend read
    crossings = counts["crossings"]
    assert crossings["run/start.py:opened"] == 1
    assert crossings["run/money/spend.py:worst_case"] == 1
    assert crossings["run/paid.py:spent_before_usd"] == crossings["run/paid.py:held"] == 1
    assert sum(crossings.values()) > sum(counts["control"].values())


@dataclasses.dataclass(frozen=True)
class _Value:
    n: int

    def doubled(self) -> FrameType:
        return sys._getframe()

    @property
    def frame(self) -> FrameType:
        return sys._getframe()


@dataclasses.dataclass
class _Mutable:
    n: int

    def doubled(self) -> FrameType:
        return sys._getframe()


def _function(n: int) -> FrameType:
    return sys._getframe()


def test_control_is_a_function_or_a_method_of_what_is_not_a_frozen_value(
    spine: ModuleType,
) -> None:
    assert spine.value_call(_Value(1).doubled()) == "frozen value"
    assert spine.value_call(_Value(1).frame) == "property read"
    assert spine.value_call(_Mutable(1).doubled()) == ""
    assert spine.value_call(_function(1)) == ""
