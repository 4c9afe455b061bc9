"""A snapshot's ``:batch`` endpoints, and the batch block the compiler writes from them.

The example snapshot (examples/batch/kimi-k3.snapshot.json) is reconstructed: four rows of the
2026-08-25 K3 capture, a Together row and its ``:batch`` row at half the sync price.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from openrouter_probe.api.client import Client
from openrouter_probe.api.connection import Connection
from openrouter_probe.errors import SnapshotError
from openrouter_probe.policy.compiled import compiled_from_document, load_compiled_policy
from openrouter_probe.policy.compiler import compile_policy
from openrouter_probe.policy.lint import lint_batch_block
from openrouter_probe.policy.spec import load_spec, parse_spec
from openrouter_probe.rules.batch import BatchListing, batch_pairs, describe_batch
from openrouter_probe.rules.probing import probe
from openrouter_probe.rules.routing import route_batch
from openrouter_probe.rules.snapshot import Snapshot, bundled_snapshot, load_snapshot
from openrouter_probe.run.checks import endpoints_now
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "batch"
K3 = load_snapshot(EXAMPLE / "kimi-k3.snapshot.json")
K25 = bundled_snapshot()


def _k25_with_batch(rows: list[dict[str, Any]]) -> Snapshot:
    """The bundled K2.5 snapshot with a made-up ``:batch`` listing (for the rules, not facts)."""
    doc = K25.to_json()
    doc["batch"] = {
        "origin": "test",
        "taken_at": "2026-11-20T09:00:00Z",
        "data": {"id": "moonshotai/kimi-k2.5:batch", "endpoints": rows},
        "accepted": [],
    }
    path_doc = json.dumps(doc)
    from openrouter_probe.rules.snapshot import _from_document

    return _from_document(json.loads(path_doc), where="k25-batch", source="file")


def _row(tag: str, provider: str, quantization: str, out_per_token: str) -> dict[str, Any]:
    return {
        "provider_name": provider,
        "tag": tag,
        "quantization": quantization,
        "pricing": {"prompt": "0.0000002", "completion": out_per_token},
        "context_length": 262144,
    }


# -- the snapshot ----------------------------------------------------------------------------------


def test_example_snapshot_holds_its_batch_row_beside_the_sync_ones() -> None:
    assert [e.tag for e in K3.batch_endpoints] == ["together"]
    (pair,) = batch_pairs(K3.batch, K3.endpoints)
    assert pair.sync is not None and pair.sync.tag == "together"
    assert pair.batch.pricing.completion_usd_per_m == 7.5
    assert pair.sync.pricing.completion_usd_per_m == 15
    assert str(pair.ratio) == "0.500"
    assert pair.status == "listed"


def test_old_snapshots_load_unchanged_and_know_nothing_of_batches(tmp_path: Path) -> None:
    assert K25.batch is None and K25.batch_endpoints == []
    again = load_snapshot(K25.save(tmp_path / "k25.json"))
    assert "batch" not in json.loads((tmp_path / "k25.json").read_text())
    assert again.sha256 == K25.sha256 and again.batch is None


def test_an_acceptance_is_recorded_in_the_history_and_survives_a_save(tmp_path: Path) -> None:
    accepted = K3.with_batch_acceptance("together", "batch-1788697047-yF7DlkV44Ab9wwvpDpmT")
    assert K3.batch is not None and K3.batch.status("together") == "listed"
    assert accepted.batch is not None and accepted.batch.status("together") == "accepted"
    assert accepted.sha256 == K3.sha256  # the endpoint data did not change
    again = load_snapshot(accepted.save(tmp_path / "k3.json"))
    assert again.batch is not None
    assert [a.batch_id for a in again.batch.accepted] == ["batch-1788697047-yF7DlkV44Ab9wwvpDpmT"]
    assert again.batch.status("together") == "accepted"
    with pytest.raises(SnapshotError, match="'fireworks' is not a :batch endpoint"):
        K3.with_batch_acceptance("fireworks", "batch-x")


def test_a_malformed_acceptance_names_the_file_and_the_key(tmp_path: Path) -> None:
    doc = K3.to_json()
    doc["batch"]["accepted"] = [{"tag": "together"}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(
        SnapshotError, match=r"bad.json: batch.accepted\[0\]: needs tag and batch_id"
    ):
        load_snapshot(path)


def test_a_paid_runs_live_snapshot_is_probed_without_the_batch_listing(replay_server) -> None:
    # the one live read (rules.probing.probe); a batch run reads its :batch listing when it opens
    base, routes, seen = replay_server
    path = "/api/v1/models/moonshotai/kimi-k3/endpoints"
    routes[path] = (200, json.dumps({"data": K3.to_json()["data"]}), "application/json")
    connection = Connection(api_key="sk-x", base_url=f"{base}/api/v1")
    endpoints, snap = endpoints_now("moonshotai/kimi-k3", None, connection)
    assert (snap.source, snap.origin, snap.batch) == ("api", f"{base}{path}", None)
    assert len(endpoints) == len(K3.endpoints)
    assert [s["path"] for s in seen] == [path]


def test_probe_reads_the_batch_variant_and_a_404_means_none(replay_server) -> None:
    base, routes, seen = replay_server
    sync = json.dumps({"data": K3.to_json()["data"]})
    routes["/api/v1/models/moonshotai/kimi-k3/endpoints"] = (200, sync, "application/json")
    batch = {"data": K3.to_json()["batch"]["data"]}
    routes["/api/v1/models/moonshotai/kimi-k3:batch/endpoints"] = (
        200,
        json.dumps(batch),
        "application/json",
    )
    snap = probe("moonshotai/kimi-k3", client=Client(base_url=f"{base}/api/v1"))
    assert snap.batch is not None
    assert [e.tag for e in snap.batch_endpoints] == ["together"]
    assert snap.batch.origin == f"{base}/api/v1/models/moonshotai/kimi-k3:batch/endpoints"
    routes["/api/v1/models/moonshotai/kimi-k2.5/endpoints"] = (
        200,
        json.dumps({"data": K25.to_json()["data"]}),
        "application/json",
    )
    none = probe("moonshotai/kimi-k2.5", client=Client(base_url=f"{base}/api/v1"))
    assert none.batch is not None and none.batch.data is None and none.batch_endpoints == []
    assert seen[-1]["path"] == "/api/v1/models/moonshotai/kimi-k2.5:batch/endpoints"
    empty = {"data": {"id": "moonshotai/kimi-k2.5:batch", "endpoints": []}}
    routes["/api/v1/models/moonshotai/kimi-k2.5:batch/endpoints"] = (
        200,
        json.dumps(empty),
        "application/json",
    )
    listed_none = probe("moonshotai/kimi-k2.5", client=Client(base_url=f"{base}/api/v1"))
    assert listed_none.batch is not None and listed_none.batch_endpoints == []
    assert "no :batch endpoint (OpenRouter lists none" in describe_batch(listed_none.batch, "m")


# -- the compiler ----------------------------------------------------------------------------------


def test_the_example_batch_block_is_what_a_batch_request_carries() -> None:
    doc = yaml.safe_load((EXAMPLE / "kimi-k3.yaml").read_text())
    assert doc["batch"]["provider"] == {"only": ["together"], "allow_fallbacks": False}
    assert doc["batch"]["order"] == ["together"]
    (row,) = doc["batch"]["decisions"]
    assert (row["output_usd_per_m"], row["sync_output_usd_per_m"]) == (7.5, 15.0)
    assert row["status"] == "listed"
    assert doc["batch"]["note"] == "batches run on together (listed; no submit accepted yet)"


def test_the_checked_in_example_policy_is_what_the_compiler_writes() -> None:
    spec = load_spec(EXAMPLE / "kimi-k3.spec.yaml")
    compiled = compile_policy(spec, K3, spec_file=str(EXAMPLE / "kimi-k3.spec.yaml"))
    assert compiled.to_yaml() == (EXAMPLE / "kimi-k3.yaml").read_text()
    again = load_compiled_policy(EXAMPLE / "kimi-k3.yaml")
    assert again.to_yaml() == compiled.to_yaml()  # the batch block round-trips
    assert again.batch_provider() == {"only": ["together"], "allow_fallbacks": False}


def test_the_sync_block_does_not_depend_on_the_batch_listing() -> None:
    spec = load_spec(EXAMPLE / "kimi-k3.spec.yaml")
    doc = K3.to_json()
    del doc["batch"]
    from openrouter_probe.rules.snapshot import _from_document

    without = _from_document(doc, where="k3", source="file")
    a = compile_policy(spec, K3).to_dict()
    b = compile_policy(spec, without).to_dict()
    assert a["provider"] == b["provider"] and a["decisions"] == b["decisions"]
    assert b["batch"] == {"provider": {"only": ["fireworks", "fireworks/fast", "together"]}}


KIMI_NATIVE = {
    "model": "moonshotai/kimi-k2.5",
    "precision": "native",
    "ignore": ["fireworks", "baseten"],
    "min_uptime_30m_pct": 99,
}


def test_batch_rows_pass_the_same_precision_ignore_and_uptime_rules() -> None:
    snap = _k25_with_batch(
        [
            _row("together", "Together", "unknown", "0.0000014"),  # precision: dropped
            _row("chutes/int4", "Chutes", "int4", "0.0000011"),  # uptime 98.4% (sync): dropped
            _row("deepinfra/int4", "DeepInfra", "int4", "0.0000012"),  # 99.7%: admitted
            _row("fireworks", "Fireworks", "unknown", "0.0000010"),  # ignored by the spec
        ]
    )
    compiled = compile_policy(parse_spec(KIMI_NATIVE), snap)
    assert compiled.batch is not None
    assert compiled.batch["provider"] == {"only": ["deepinfra/int4"], "allow_fallbacks": False}
    reasons = {d["tag"]: d["reason"] for d in compiled.batch["decisions"]}
    assert reasons["together"].startswith("dropped: quantization")
    assert reasons["chutes/int4"] == "dropped: ignored (uptime 98.4% < min_uptime_30m_pct 99%)"
    assert reasons["fireworks"] == "dropped: ignored (spec ignores 'fireworks')"
    # The sync block is the one the same spec compiles to without a batch listing.
    assert compiled.provider == compile_policy(parse_spec(KIMI_NATIVE), K25).provider


def test_no_native_batch_row_says_so_in_one_line() -> None:
    snap = _k25_with_batch([_row("together", "Together", "unknown", "0.0000014")])
    compiled = compile_policy(parse_spec(KIMI_NATIVE), snap)
    assert compiled.batch is not None and compiled.batch["provider"] is None
    assert compiled.batch["note"] == (
        "no :batch endpoint admitted by this policy (1 listed, none native)"
    )


def test_route_batch_picks_the_cheapest_unless_pinned() -> None:
    snap = _k25_with_batch(
        [
            _row("deepinfra/int4", "DeepInfra", "int4", "0.0000012"),
            _row("chutes/int4", "Chutes", "int4", "0.0000011"),
        ]
    )
    rows = snap.batch_endpoints
    assert route_batch(None, rows).admitted_tags[0] == "chutes/int4"
    assert route_batch({"only": ["deepinfra/int4"]}, rows).admitted_tags == ["deepinfra/int4"]
    assert route_batch({"only": ["novita"]}, rows).admitted_tags == []


# -- lint and explain ------------------------------------------------------------------------------


def test_lint_batch_block() -> None:
    rows = K3.batch_endpoints
    assert lint_batch_block({"only": ["together"], "allow_fallbacks": False}, rows) == []
    found = {
        (f.code, f.loc)
        for f in lint_batch_block({"only": ["fireworks"], "order": ["together"]}, rows)
    }
    assert found == {
        ("batch-unsupported-key", "batch.provider.order"),
        ("batch-no-endpoint", "batch.provider.only[0]"),
    }
    (none,) = lint_batch_block({"only": ["together"]}, [])
    assert none.code == "batch-no-endpoint" and none.severity == "error"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openrouter_probe", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_explain_and_lint_cover_the_batch_block(tmp_path: Path) -> None:
    """``policy explain`` and ``policy lint`` on the batch block; the broken and the older forms
    are written beside a copy of the policy and its spec, never into the checkout."""
    for name in ("kimi-k3.yaml", "kimi-k3.spec.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    policy = str(tmp_path / "kimi-k3.yaml")
    snapshot = str(EXAMPLE / "kimi-k3.snapshot.json")
    explained = _cli("policy", "explain", policy)
    assert explained.returncode == 0, explained.stderr
    assert 'batch block: {"only": ["together"], "allow_fallbacks": false}' in explained.stdout
    assert "together: $7.50/M output at the batch price ($15.00/M sync, 50%), listed" in (
        explained.stdout
    )
    linted = _cli("policy", "lint", policy, "--snapshot", snapshot)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "0 error(s)" in linted.stderr and "batch-" not in linted.stdout
    broken = yaml.safe_load(Path(policy).read_text())
    broken["batch"]["provider"] = {"only": ["fireworks"], "order": ["together"]}
    (tmp := Path(policy).with_name("broken.tmp.yaml")).write_text(yaml.safe_dump(broken))
    try:
        bad = _cli("policy", "lint", str(tmp), "--snapshot", snapshot)
    finally:
        tmp.unlink()
    assert bad.returncode == 1
    assert "batch.provider.only[0]: 'fireworks' matches no :batch endpoint" in bad.stdout
    assert "[batch-unsupported-key]" in bad.stdout
    # The older form (the admitted sync tags) against a snapshot that lists the :batch rows.
    older = yaml.safe_load(Path(policy).read_text())
    older["batch"] = {"provider": {"only": ["fireworks", "together"]}}
    (tmp := Path(policy).with_name("older.tmp.yaml")).write_text(yaml.safe_dump(older))
    try:
        old = _cli("policy", "lint", str(tmp), "--snapshot", snapshot)
    finally:
        tmp.unlink()
    assert old.returncode == 1
    assert "'fireworks' matches no :batch endpoint" in old.stdout
    assert "[batch-not-pinned]" in old.stdout


def test_compiled_batch_block_must_be_a_mapping() -> None:
    doc = yaml.safe_load((EXAMPLE / "kimi-k3.yaml").read_text())
    doc["batch"] = {"provider": None, "decisions": "x"}
    with pytest.raises(Exception, match="batch must be a mapping with decisions"):
        compiled_from_document(doc, source="p.yaml")


def test_listing_without_data_has_no_endpoints() -> None:
    listing = BatchListing(origin="o", taken_at=None, data=None)
    assert listing.endpoints == []
    assert describe_batch(listing, "m") == (
        "batch: m: no :batch endpoint (OpenRouter lists none for this model)"
    )


# -- analysis: endpoints, matrix, budget -----------------------------------------------------------


def test_budget_for_the_bundled_k25_says_in_one_line_no_batch_endpoint_is_known() -> None:
    out = _cli(
        "budget", "moonshotai/kimi-k2.5", "--offline", "--budget-usd", "100",
        "--output-tokens", "60M",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    # one line each, wrapped to the 80 columns of a pipe (a continuation starts with two spaces)
    lines = out.stdout.replace("\n  ", " ").splitlines()
    assert lines[0].startswith("60M output tokens at the cheapest admitted $2.20/M (Chutes)")
    assert lines[1] == (
        "batch: no :batch endpoint is known for moonshotai/kimi-k2.5 (this snapshot was not "
        "probed for them; a fresh probe asks GET /models/MODEL:batch/endpoints)"
    )


def test_budget_prices_the_target_at_the_batch_price_beside_the_sync_one() -> None:
    from openrouter_probe.analysis.budget_batch import plan_batch

    plan = plan_batch(K3, output_tokens=60_000_000, budget_usd=100)
    assert (plan.tag, plan.status) == ("together", "listed")
    assert plan.cost_usd == 450 and plan.sync_cost_usd == 900
    assert plan.affordable_output_tokens == 13_333_333
    assert plan.line == (
        "batch: 60M output tokens at the batch price $7.50/M (together, listed) cost $450.00, "
        "50% of $900.00 at its sync price; $100.00 buys 13.33M"
    )
    out = _cli(
        "budget", "moonshotai/kimi-k3", "--snapshot", str(EXAMPLE / "kimi-k3.snapshot.json"),
        "--budget-usd", "100", "--output-tokens", "60M", "--policy", str(EXAMPLE / "kimi-k3.yaml"),
        "--format", "json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["batch"]["cost_usd"] == 450.0


def test_budget_under_a_policy_that_admits_no_batch_row_says_why() -> None:
    from openrouter_probe.analysis.budget_batch import plan_batch

    snap = _k25_with_batch([_row("together", "Together", "unknown", "0.0000014")])
    compiled = compile_policy(parse_spec(KIMI_NATIVE), snap)
    assert compiled.batch is not None
    plan = plan_batch(
        snap,
        output_tokens=60_000_000,
        budget_usd=100,
        admitted=compiled.batch["order"],
        policy_note=compiled.batch["note"],
    )
    assert plan.tag is None
    assert plan.line == "batch: no :batch endpoint admitted by this policy (1 listed, none native)"
    unprobed = plan_batch(K25, output_tokens=1, budget_usd=1)
    assert unprobed.line.startswith("batch: no :batch endpoint is known for moonshotai/kimi-k2.5")


def test_matrix_and_endpoints_show_the_batch_price_per_endpoint() -> None:
    from openrouter_probe.analysis.matrix import build_matrix

    frame = build_matrix(K3).set_index("tag")
    assert frame.loc["together", "batch_output_usd_per_m"] == 7.5
    assert frame.loc["together", "batch_input_usd_per_m"] == 1.5
    assert frame.loc["together", "batch_status"] == "listed"
    assert frame["batch_output_usd_per_m"].drop("together").isna().all()
    assert build_matrix(K25)["batch_status"].isna().all()
    out = _cli(
        "endpoints", "moonshotai/kimi-k3", "--snapshot", str(EXAMPLE / "kimi-k3.snapshot.json"),
        "--format", "csv",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.splitlines()
    assert "output_usd_per_m,batch_output_usd_per_m" in header
    assert any(r.startswith("Together,together,") and ",15.0,7.5," in r for r in rows)
    assert "batch: moonshotai/kimi-k3: 1 :batch endpoint(s): together (listed)" in out.stderr


def test_side_by_side_example_bills_the_batch_at_half_the_sync_price(tmp_path: Path) -> None:
    """examples/batch/side_by_side.py: the same prompts sync and as one batch on the fake."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLE / "side_by_side.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3. sync:     8 rows" in out.stdout
    assert "completed on Together: 8 rows" in out.stdout
    assert "batch / sync = 0.500" in out.stdout
    assert (tmp_path / "kimi-k3.yaml").read_text() == (
        EXAMPLE / "kimi-k3.yaml"
    ).read_text().replace("file: kimi-k3.spec.yaml", "file: null")


def test_policy_check_flags_a_pinned_batch_endpoint_that_is_gone_or_repriced() -> None:
    from openrouter_probe.policy.drift import check_policy
    from openrouter_probe.rules.snapshot import _from_document

    policy = load_compiled_policy(EXAMPLE / "kimi-k3.yaml")
    assert not check_policy(policy, K3).drifted
    doc = K3.to_json()
    doc["batch"]["data"]["endpoints"][0]["pricing"]["completion"] = "0.000015"
    repriced = _from_document(doc, where="k3", source="file")
    (change,) = [c for c in check_policy(policy, repriced).changes if c.kind.startswith("batch")]
    assert (change.kind, change.matters) == ("batch-price", True)
    assert change.message == "together :batch output $7.50/M -> $15.00/M (+100%)"
    doc["batch"]["data"] = None
    gone = _from_document(doc, where="k3", source="file")
    report = check_policy(policy, gone)
    assert report.drifted
    assert "DRIFT batch-gone: batch.provider pins together, which has no :batch endpoint now" in (
        report.render()
    )
