from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from openrouter_probe.api.client import Client
from openrouter_probe.errors import NoRouteError, SnapshotError
from openrouter_probe.rules.probing import probe, resolve_snapshot
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot, load_snapshot
from tests.conftest import CAPTURES, DATA


def test_bundled_snapshot_is_the_scenario_with_provenance() -> None:
    snap = bundled_snapshot()
    scenario = json.loads((DATA / "kimi-k2.5-endpoints.json").read_text())
    assert snap.data == scenario["data"]
    assert snap.source == "bundled"
    assert snap.taken_at == datetime(2026, 2, 1, tzinfo=UTC)
    assert len(snap.endpoints) == 11
    assert "Reconstructed, not a live capture" in snap.provenance
    assert "2026-02-01" in snap.provenance
    assert snap.sha256.startswith("sha256:") and len(snap.sha256) == 71


def test_bundled_for_another_model_is_a_clear_error() -> None:
    with pytest.raises(SnapshotError, match=r"no bundled snapshot for 'x/y'.*pass snapshot=PATH$"):
        bundled_snapshot("x/y")


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    snap = bundled_snapshot()
    path = snap.save(tmp_path / "k25.json")
    again = load_snapshot(path)
    assert again.data == snap.data
    assert again.sha256 == snap.sha256
    assert again.taken_at == snap.taken_at
    assert again.source == "file" and again.captured_from == "bundled"
    assert again.note == snap.note
    assert "loaded from file" in again.provenance


def test_hash_changes_with_content(tmp_path: Path) -> None:
    snap = bundled_snapshot()
    doc = snap.to_json()
    doc["data"]["endpoints"][0]["quantization"] = "fp8"
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    edited = load_snapshot(path)
    assert edited.sha256 != snap.sha256
    assert edited.endpoints[0].quantization == "fp8"


def test_raw_endpoints_body_loads_as_snapshot() -> None:
    snap = load_snapshot(CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json")
    assert snap.model == "moonshotai/kimi-k3"
    assert len(snap.endpoints) == 4
    assert "capture time unknown" in (snap.note or "")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json at all", "not a snapshot but a text or YAML file"),
        ("[1, 2]", "not a snapshot"),
        ('{"hello": "world"}', "not a snapshot"),
        ('{"format": "openrouter-probe.snapshot/1", "model": "a/b"}', "'taken_at'"),
        (
            '{"format": "openrouter-probe.snapshot/1", "model": "a/b", "taken_at": "2026-01-01T00:00:00Z",'
            ' "data": {"id": "a/b", "endpoints": [{"tag": "x"}]}}',
            r"data\.endpoints\[0\]\.provider_name: required",
        ),
    ],
)
def test_bad_snapshot_files_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SnapshotError, match=message) as info:
        load_snapshot(path)
    assert str(path) in str(info.value)


def test_missing_snapshot_file(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="no such snapshot file"):
        load_snapshot(tmp_path / "nope.json")


def test_resolve_rejects_a_snapshot_of_another_model(tmp_path: Path) -> None:
    path = bundled_snapshot().save(tmp_path / "k25.json")
    with pytest.raises(SnapshotError, match=r"holds moonshotai/kimi-k2.5, not moonshotai/kimi-k3"):
        resolve_snapshot("moonshotai/kimi-k3", snapshot=str(path))
    assert resolve_snapshot("moonshotai/kimi-k2.5", snapshot=str(path)).source == "file"
    assert resolve_snapshot("moonshotai/kimi-k2.5", offline=True).source == "bundled"


def test_probe_uses_the_api_first(replay_server) -> None:
    base, routes, _ = replay_server
    body = (CAPTURES / "kimi-k3-endpoints-2026-08-25-reduced.json").read_text()
    routes["/api/v1/models/moonshotai/kimi-k3/endpoints"] = (200, body, "application/json")
    snap = probe("moonshotai/kimi-k3", client=Client(base_url=f"{base}/api/v1"))
    assert snap.source == "api"
    assert snap.origin == f"{base}/api/v1/models/moonshotai/kimi-k3/endpoints"
    assert [e.tag for e in snap.endpoints][:2] == ["fireworks", "alibaba"]


def test_probe_falls_back_to_the_page(replay_server) -> None:
    base, routes, _ = replay_server
    routes["/api/v1/models/moonshotai/kimi-k2.5/endpoints"] = (
        503,
        "<html>down</html>",
        "text/html",
    )
    page = (DATA / "pages" / "kimi-k2.5-providers.html").read_text()
    routes["/moonshotai/kimi-k2.5/providers"] = (200, page, "text/html")
    snap = probe("moonshotai/kimi-k2.5", client=Client(base_url=f"{base}/api/v1", attempts=1))
    assert snap.source == "page"
    assert snap.origin == f"{base}/moonshotai/kimi-k2.5/providers"
    assert {e.tag for e in snap.endpoints} >= {"chutes/int4", "baseten/fp4", "fireworks"}


def test_probe_does_not_scrape_for_an_unknown_model(replay_server) -> None:
    base, routes, seen = replay_server
    routes["/api/v1/models"] = (200, '{"data": []}', "application/json")
    with pytest.raises(NoRouteError):
        probe("x/y", client=Client(base_url=f"{base}/api/v1"))
    # after the 404, only the API's root is asked (is the URL wrong?); no provider page
    assert [s["path"] for s in seen] == ["/api/v1/models/x/y/endpoints", "/api/v1/models"]


def test_snapshot_from_endpoints_keeps_payload() -> None:
    snap = bundled_snapshot()
    again = Snapshot.from_endpoints(snap.parsed, model=snap.model, source="api", origin="x")
    assert again.data == snap.data and again.sha256 == snap.sha256


def test_a_paid_run_reads_its_endpoints_through_resolve_snapshot(tmp_path: Path) -> None:
    """``run.checks.endpoints_now`` is ``resolve_snapshot`` with a live read of its own: the same
    snapshot from a path, "bundled" or a ``Snapshot``, the same refusal of another model's, and
    the live endpoints from ``GET /models/{model}/endpoints``."""
    from openrouter_probe.api.connection import Connection
    from openrouter_probe.fake import serve
    from openrouter_probe.run.checks import endpoints_now

    model, path = "moonshotai/kimi-k2.5", bundled_snapshot().save(tmp_path / "k25.json")
    nowhere = Connection(api_key="sk-fake", base_url="http://127.0.0.1:9")  # never asked
    for given in (path, str(path), "bundled", bundled_snapshot()):
        endpoints, snap = endpoints_now(model, given, nowhere)
        assert snap.sha256 == resolve_snapshot(model, snapshot=given).sha256
        assert endpoints == list(snap.endpoints) and len(endpoints) == 11
        with pytest.raises(SnapshotError) as info:
            endpoints_now("moonshotai/kimi-k3", given, nowhere)
        with pytest.raises(SnapshotError) as same:
            resolve_snapshot("moonshotai/kimi-k3", snapshot=given)
        assert str(info.value) == str(same.value)
    with serve(speed=0) as fake:
        live = Connection(api_key="sk-fake", base_url=fake.base_url)
        endpoints, snap = endpoints_now(model, None, live)
    assert (snap.source, snap.origin) == ("api", f"{fake.base_url}/models/{model}/endpoints")
    assert len(endpoints) == 11
