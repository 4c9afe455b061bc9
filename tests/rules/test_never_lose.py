"""Never lose a file, never go stale: atomic saves that refuse their inputs, a read-only snapshot,
times converted to UTC and never made up, and a history that keeps every dated snapshot."""

from __future__ import annotations

import copy
import json
import os
import pickle
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe import files
from openrouter_probe.analysis.matrix import build_matrix, matrix_history
from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError, PolicyError, SnapshotError
from openrouter_probe.policy.compiler import compile_policy
from openrouter_probe.policy.spec import load_spec
from openrouter_probe.rules.probing import resolve_snapshot
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot, load_snapshot
from tests.conftest import CAPTURES, ROOT

MODEL = "moonshotai/kimi-k2.5"
SPEC = ROOT / "policies" / "kimi-k2.5.spec.yaml"
RAW_BODY = CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json"


def _with_price(snap: Snapshot, completion: str, *, days: int) -> Snapshot:
    doc = snap.to_json()
    doc["data"]["endpoints"][0]["pricing"]["completion"] = completion
    assert snap.taken_at is not None
    return Snapshot(
        model=snap.model,
        data=doc["data"],
        taken_at=snap.taken_at + timedelta(days=days),
        source="file",
        origin=f"day{days}.json",
    )


# -- a snapshot is immutable from outside ---------------------------------------------------------


def test_to_json_returns_a_copy_and_the_snapshot_stays_whole() -> None:
    snap = bundled_snapshot()
    sha, count = snap.sha256, len(snap.endpoints)
    doc = snap.to_json()
    doc["data"]["endpoints"].clear()
    doc["data"]["id"] = "someone/else"
    assert snap.sha256 == sha
    assert len(snap.endpoints) == count == 11
    assert snap.to_json()["data"]["endpoints"][0]["tag"] == "chutes/int4"
    assert snap.to_json()["sha256"] == sha


def test_data_is_read_only_and_copies_are_ordinary() -> None:
    snap = bundled_snapshot()
    with pytest.raises(TypeError, match="read-only"):
        snap.data["id"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        snap.data["endpoints"].append({})
    with pytest.raises(TypeError, match="read-only"):
        snap.data["endpoints"][0]["pricing"]["completion"] = "0"
    mine = copy.deepcopy(snap.data)
    mine["endpoints"].clear()  # a deep copy is a plain dict to edit
    assert type(mine) is dict and len(snap.endpoints) == 11
    assert json.loads(json.dumps(snap.data)) == snap.to_json()["data"]
    assert pickle.loads(pickle.dumps(snap)).sha256 == snap.sha256


def test_the_callers_dict_cannot_change_a_snapshot_later() -> None:
    data = bundled_snapshot().to_json()["data"]
    snap = Snapshot(model=MODEL, data=data, taken_at=None, source="file", origin="x")
    sha = snap.sha256
    data["endpoints"].pop()
    assert snap.sha256 == sha and len(snap.endpoints) == 11


def test_endpoints_list_cannot_be_reordered_from_outside() -> None:
    snap = bundled_snapshot()
    snap.endpoints.reverse()
    assert snap.endpoints[0].tag == "chutes/int4"


# -- times ----------------------------------------------------------------------------------------


def test_an_offset_is_converted_to_utc(tmp_path: Path) -> None:
    doc = bundled_snapshot().to_json()
    doc["taken_at"] = "2026-03-01T12:00:00+02:00"
    path = tmp_path / "offset.json"
    path.write_text(json.dumps(doc))
    snap = load_snapshot(path)
    assert snap.taken_at == datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert snap.taken_at.utcoffset() == timedelta(0)
    assert "2026-03-01 10:00 UTC" in snap.provenance
    assert snap.to_json()["taken_at"] == "2026-03-01T10:00:00Z"
    assert str(build_matrix(snap)["taken_at"].iloc[0]) == "2026-03-01 10:00:00+00:00"


def test_a_raw_body_is_undated_and_compiles_to_the_same_bytes(tmp_path: Path) -> None:
    snap = load_snapshot(RAW_BODY)
    assert snap.taken_at is None
    assert "capture time unknown" in snap.provenance
    assert snap.to_json()["taken_at"] is None
    spec_file = tmp_path / "k3.spec.yaml"
    spec_file.write_text("model: moonshotai/kimi-k3\nprecision: any\n")
    spec = load_spec(spec_file)
    first = compile_policy(spec, load_snapshot(RAW_BODY)).to_yaml()
    again = compile_policy(spec, load_snapshot(RAW_BODY)).to_yaml()
    assert first == again
    assert "taken_at: null" in first


def test_an_undated_snapshot_saves_and_loads_undated(tmp_path: Path) -> None:
    saved = load_snapshot(RAW_BODY).save(tmp_path / "k3.json")
    again = load_snapshot(saved)
    assert again.taken_at is None and again.sha256 == load_snapshot(RAW_BODY).sha256


# -- history --------------------------------------------------------------------------------------


def test_history_a_price_that_comes_back_is_current() -> None:
    a0 = bundled_snapshot()
    b1 = _with_price(a0, "0.0000025", days=1)
    a2 = _with_price(a0, "0.0000022", days=2)  # back to A's price, and A's data
    assert a2.sha256 == a0.sha256
    history = matrix_history([a2, b1, a0])
    chutes = history[history["tag"] == "chutes/int4"]
    assert list(chutes["output_usd_per_m"]) == [2.2, 2.5, 2.2]
    assert list(chutes["change"]) == ["first", "changed", "changed"]
    assert chutes["changes"].iloc[-1] == "output_usd_per_m $2.50 -> $2.20"


def test_history_merges_equal_neighbours_only() -> None:
    a0 = bundled_snapshot()
    a1 = _with_price(a0, "0.0000022", days=1)  # same data as a0, a day later
    b2 = _with_price(a0, "0.0000025", days=2)
    history = matrix_history([a0, a1, b2])
    assert history["taken_at"].nunique() == 2
    assert len(matrix_history([a0, a0])) == 11


def test_history_refuses_an_undated_snapshot() -> None:
    snap = bundled_snapshot()
    undated = Snapshot(
        model=MODEL, data=snap.to_json()["data"], taken_at=None, source="file", origin="raw.json"
    )
    with pytest.raises(SnapshotError, match=r"raw\.json has no capture time"):
        matrix_history([snap, undated])


# -- atomic writes that never replace an input ----------------------------------------------------


@pytest.fixture
def failing_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fails mid-write: the data is written, the sync fails (as on a full disk)."""

    def boom(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", boom)


def _only(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_failed_snapshot_save_leaves_the_old_file(tmp_path: Path, failing_fsync: None) -> None:
    target = tmp_path / "snap.json"
    target.write_text("the good snapshot")
    with pytest.raises(SnapshotError, match="No space left"):
        bundled_snapshot().save(target)
    assert target.read_text() == "the good snapshot"
    assert _only(tmp_path) == ["snap.json"]  # no temp file left behind


def test_a_failed_policy_save_leaves_the_old_file(tmp_path: Path, failing_fsync: None) -> None:
    target = tmp_path / "kimi.yaml"
    target.write_text("the good policy")
    compiled = compile_policy(load_spec(SPEC), bundled_snapshot())
    with pytest.raises(PolicyError, match="No space left"):
        compiled.save(target)
    assert target.read_text() == "the good policy"
    assert _only(tmp_path) == ["kimi.yaml"]


def test_a_failed_plot_leaves_the_old_file(tmp_path: Path, failing_fsync: None) -> None:
    from openrouter_probe.analysis.plots import plot_price_uptime, save_figure

    target = tmp_path / "plot.png"
    target.write_bytes(b"the good plot")
    with pytest.raises(ConfigError, match="cannot write the plot"):
        save_figure(plot_price_uptime(build_matrix(bundled_snapshot())), target)
    assert target.read_bytes() == b"the good plot"
    assert _only(tmp_path) == ["plot.png"]


def test_compile_refuses_to_write_over_its_spec(tmp_path: Path) -> None:
    spec = tmp_path / "s.spec.yaml"
    text = SPEC.read_text()
    spec.write_text(text)
    os.symlink(spec, tmp_path / "alias.yaml")
    for output in (str(spec), str(tmp_path / "." / "s.spec.yaml"), str(tmp_path / "alias.yaml")):
        result = CliRunner().invoke(
            cli, ["policy", "compile", str(spec), "--offline", "-o", output]
        )
        assert result.exit_code == 1, result.output
        assert f"-o {output} is the input {spec}" in result.stderr
        assert "write the policy to another file" in result.stderr
        assert spec.read_text() == text


def test_compile_refuses_to_write_over_its_snapshot(tmp_path: Path) -> None:
    snap = bundled_snapshot().save(tmp_path / "snap.json")
    before = snap.read_bytes()
    result = CliRunner().invoke(
        cli, ["policy", "compile", str(SPEC), "--snapshot", str(snap), "-o", str(snap)]
    )
    assert result.exit_code == 1
    assert "is the input" in result.stderr
    assert snap.read_bytes() == before


def test_compiled_policy_save_refuses_its_inputs(tmp_path: Path) -> None:
    spec = tmp_path / "x.spec.yaml"
    spec.write_text(SPEC.read_text())
    compiled = compile_policy(load_spec(spec), bundled_snapshot())
    with pytest.raises(PolicyError, match=r"over its own input.*-o .*x\.yaml"):
        compiled.save(spec, inputs=[spec])
    assert compiled.save(tmp_path / "x.yaml", inputs=[spec]).exists()


def test_endpoints_save_refuses_the_snapshot_it_reads(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_bytes(RAW_BODY.read_bytes())
    result = CliRunner().invoke(
        cli,
        ["endpoints", "moonshotai/kimi-k3", "--snapshot", str(raw), "--save", str(raw)],
    )
    assert result.exit_code == 1
    assert "is the snapshot being read" in result.stderr
    assert raw.read_bytes() == RAW_BODY.read_bytes()


# -- the file the user gave, not the one recorded inside it ---------------------------------------


def test_snapshot_of_another_model_names_the_file_passed(tmp_path: Path) -> None:
    path = bundled_snapshot().save(tmp_path / "mine.json")
    with pytest.raises(SnapshotError) as info:
        resolve_snapshot("moonshotai/kimi-k3", snapshot=str(path))
    assert str(info.value) == (
        f"model mismatch: {path} holds moonshotai/kimi-k2.5, not moonshotai/kimi-k3; "
        "pass a snapshot of moonshotai/kimi-k3 (save one with "
        '`orp.probe("moonshotai/kimi-k3").save(PATH)`)'
    )


def test_the_bundled_snapshot_cites_its_package_path() -> None:
    snap = bundled_snapshot()
    assert snap.origin == "openrouter_probe/data/kimi-k2.5.snapshot.json"
    assert "shared/" not in snap.provenance
    assert "shared/" not in json.dumps(snap.to_json())
