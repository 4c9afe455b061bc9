"""The matrix on the bundled Kimi K2.5 snapshot, and the history view across snapshots."""

from __future__ import annotations

import copy
import math
from datetime import timedelta

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from openrouter_probe.analysis.matrix import (
    HISTORY_COLUMNS,
    MATRIX_COLUMNS,
    build_matrix,
    matrix_history,
)
from openrouter_probe.errors import SnapshotError
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot

MODEL = "moonshotai/kimi-k2.5"


@pytest.fixture(scope="module")
def snap() -> Snapshot:
    return bundled_snapshot(MODEL)


@pytest.fixture(scope="module")
def frame(snap: Snapshot) -> pd.DataFrame:
    return build_matrix(snap)


def _variant(snap: Snapshot, *, days: int, edit) -> Snapshot:
    data = copy.deepcopy(snap.data)
    edit(data["endpoints"])
    return Snapshot(
        model=snap.model,
        data=data,
        taken_at=snap.taken_at + timedelta(days=days),
        source="file",
        origin=f"test+{days}d",
    )


def test_one_row_per_endpoint_with_documented_columns(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == list(MATRIX_COLUMNS)
    assert len(frame) == 11
    assert frame["tag"].is_unique
    assert set(frame["model"]) == {MODEL}


def test_verdicts(frame: pd.DataFrame) -> None:
    verdict = dict(zip(frame["tag"], frame["verdict"], strict=True))
    assert verdict["baseten/fp4"] == "requantized"
    assert verdict["fireworks"] == "requantized"
    for tag in ("chutes/int4", "deepinfra/int4", "siliconflow/int4", "atlas-cloud/int4"):
        assert verdict[tag] == "native"
    for tag in ("together", "novita", "venice"):
        assert verdict[tag] == "undeclared"
    fireworks = frame.set_index("tag").loc["fireworks"]
    # The tag says unknown; the registry's provider fact says NVFP4.
    assert fireworks["quantization_declared"] == "unknown"
    assert fireworks["precision_effective"] == "nvfp4"
    assert fireworks["precision_native"] == "int4"


def test_prices_are_usd_per_million_exact(frame: pd.DataFrame) -> None:
    by_tag = frame.set_index("tag")
    assert by_tag.loc["chutes/int4", "output_usd_per_m"] == 2.2  # exact, not 2.1999999
    assert by_tag.loc["chutes/int4", "input_usd_per_m"] == 0.45
    assert by_tag.loc["venice", "output_usd_per_m"] == 3.75
    assert by_tag.loc["siliconflow/int4", "cache_read_usd_per_m"] == 0.07
    assert math.isnan(by_tag.loc["chutes/int4", "cache_read_usd_per_m"])
    # No internal_reasoning listed: reasoning is billed at the output price.
    assert by_tag.loc["chutes/int4", "reasoning_usd_per_m"] == 2.2
    assert not by_tag["reasoning_price_listed"].any()
    assert frame["output_usd_per_m"].min() == 2.2


def test_stats_limits_and_parameters(frame: pd.DataFrame) -> None:
    venice = frame.set_index("tag").loc["venice"]
    assert venice["status"] == -2
    assert venice["uptime_30m_pct"] == 88.7
    assert venice["latency_p50_ms"] == 3900.0
    assert venice["throughput_p90_tps"] == 24.0
    assert venice["max_output_tokens"] == 65536
    assert not venice["supports_tools"]
    assert frame["supports_reasoning"].all()
    assert frame["status"].dtype == "Int64"
    assert frame["context_tokens"].eq(262144).all()


def test_discount_applies(snap: Snapshot) -> None:
    def discount(endpoints):
        endpoints[0]["pricing"]["discount"] = 0.25
        endpoints[0]["pricing"]["internal_reasoning"] = "0.000002"

    row = build_matrix(_variant(snap, days=0, edit=discount)).iloc[0]
    assert row["output_usd_per_m"] == pytest.approx(1.65)
    assert row["input_usd_per_m"] == pytest.approx(0.3375)
    assert row["reasoning_usd_per_m"] == pytest.approx(1.5)
    assert row["reasoning_price_listed"]
    assert row["discount_fraction"] == 0.25


def test_several_snapshots_concatenate(snap: Snapshot, frame: pd.DataFrame) -> None:
    both = build_matrix([snap, snap])
    assert len(both) == 22
    assert_frame_equal(both.iloc[11:].reset_index(drop=True), frame)


def test_missing_stats_are_nan(snap: Snapshot) -> None:
    def strip(endpoints):
        for e in endpoints:
            e.pop("latency_last_30m", None)
            e.pop("throughput_last_30m", None)
            e["status"] = None

    frame = build_matrix(_variant(snap, days=0, edit=strip))
    assert frame["latency_p50_ms"].isna().all()
    assert frame["status"].isna().all()


def test_history_reports_price_tag_status_changes(snap: Snapshot) -> None:
    def later(endpoints):
        endpoints[0]["pricing"]["completion"] = "0.0000025"  # Chutes 2.20 -> 2.50
        endpoints[1]["tag"] = "deepinfra/fp8"  # DeepInfra re-tags
        endpoints[1]["quantization"] = "fp8"
        endpoints[4]["status"] = -2  # Together degrades
        del endpoints[10]  # Venice leaves
        endpoints.append(dict(endpoints[3], tag="newco/int4", provider_name="NewCo"))

    history = matrix_history([_variant(snap, days=30, edit=later), snap])
    assert list(history.columns) == list(HISTORY_COLUMNS)
    first, second = (history[history["taken_at"] == t] for t in sorted(set(history["taken_at"])))
    assert set(first["change"]) == {"first"}
    by_tag = second.set_index("tag")
    assert by_tag.loc["chutes/int4", "change"] == "changed"
    assert by_tag.loc["chutes/int4", "changes"] == "output_usd_per_m $2.20 -> $2.50"
    assert by_tag.loc["deepinfra/fp8", "changes"] == (
        "tag deepinfra/int4 -> deepinfra/fp8; quantization_declared int4 -> fp8"
    )
    assert by_tag.loc["deepinfra/fp8", "verdict"] == "upcast"
    assert by_tag.loc["together", "changes"] == "status 0 -> -2"
    assert by_tag.loc["venice", "change"] == "gone"
    assert by_tag.loc["newco/int4", "change"] == "new"
    assert by_tag.loc["siliconflow/int4", "change"] == "unchanged"
    assert len(second) == 12  # 10 kept + 1 new + 1 gone


def test_history_of_one_snapshot_is_all_first(snap: Snapshot) -> None:
    history = matrix_history([snap])
    assert len(history) == 11 and set(history["change"]) == {"first"}


def test_history_rejects_mixed_models(snap: Snapshot) -> None:
    other = Snapshot(
        model="moonshotai/kimi-k2",
        data=snap.data,
        taken_at=snap.taken_at,
        source="file",
        origin="x",
    )
    with pytest.raises(SnapshotError, match="model mismatch: a history is of one model"):
        matrix_history([snap, other])
    with pytest.raises(SnapshotError, match="at least one"):
        matrix_history([])


def test_import_is_lazy() -> None:
    import subprocess
    import sys

    code = "import sys, openrouter_probe.analysis.matrix, openrouter_probe.analysis.budget, openrouter_probe.analysis.plots;"
    code += "print(','.join(m for m in ('pandas', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
