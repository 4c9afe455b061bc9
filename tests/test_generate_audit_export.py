"""Audit (who served each row, outside the policy?) and export (ShareGPT, JSONL, parquet)."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.generate import generate
from openrouter_probe.generate.audit import audit
from openrouter_probe.generate.export import export
from openrouter_probe.rules.snapshot import bundled_snapshot
from tests._generate import POLICY, LedgerSender, no_sleep, prompt_rows, records, write_prompts


def _make_output(tmp_path: Path, n: int = 10, *, name: str = "out.jsonl", seed: int = 0) -> Path:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(n, datasets=2))
    out = tmp_path / name
    asyncio.run(
        generate(
            tmp_path / "prompts.jsonl",
            policy=POLICY,
            out=out,
            send=LedgerSender(seed=seed),
            snapshot="bundled",
            sleep=no_sleep,
            max_tokens=64,
        )
    )
    return out


def _append(out: Path, record: dict[str, object]) -> None:
    with out.open("a") as handle:
        handle.write(json.dumps(record) + "\n")


def test_audit_per_provider_and_within_policy(tmp_path: Path) -> None:
    out = _make_output(tmp_path)
    rows = records(out)
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    (chutes,) = report.providers
    assert chutes.provider == "Chutes" and chutes.tags == ["chutes/int4"] and chutes.admitted
    assert chutes.rows == 10
    assert chutes.completion_tokens == sum(r["usage"]["completion_tokens"] for r in rows)
    assert chutes.cost_usd == sum(Decimal(str(r["cost_usd"])) for r in rows)
    assert chutes.truncated == sum(r["status"] == "truncated" for r in rows)
    assert report.exit_code == 0 and report.outside == []
    assert report.predicted_usd is not None and report.predicted_usd > 0
    assert "every row was served by an endpoint" in report.render_notes()


def test_audit_of_only_failed_rows_does_not_claim_they_were_served(tmp_path: Path) -> None:
    out = tmp_path / "failed.jsonl"
    for i in range(3):
        _append(out, {"id": f"r{i}", "dataset": "d0", "status": "failed", "provider": None,
                      "error": {"kind": "transient", "message": "connection failed"}})  # fmt: skip
    notes = audit([out], policy=POLICY, snapshot=bundled_snapshot()).render_notes()
    assert "0 rows served, 3 failed" in notes
    assert "no row was served: nothing to check against the policy" in notes
    assert "every row was served" not in notes


def test_audit_flags_rows_outside_the_policy(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 3)
    _append(
        out,
        {
            "id": "x1",
            "dataset": "d0",
            "status": "ok",
            "provider": "Fireworks",
            "usage": {"prompt_tokens": 10, "completion_tokens": 100},
            "cost_usd": 0.0003,
            "messages": [],
        },
    )
    _append(
        out,
        {
            "id": "x2",
            "dataset": "d0",
            "status": "failed",
            "error": {"status": 400, "message": "context"},
        },
    )
    report = audit([out], policy=POLICY, snapshot=bundled_snapshot())
    fireworks = next(p for p in report.providers if p.provider == "Fireworks")
    assert not fireworks.admitted and fireworks.tags == ["fireworks"]
    assert report.outside == [("x1", "Fireworks")] and report.exit_code == 1
    assert report.failed == 1 and report.failed_by_kind == {"400": 1}
    assert fireworks.effective_usd_per_m == Decimal("3")
    assert "OUTSIDE THE POLICY: 1 row(s)" in report.render_notes()


def test_audit_cli_merges_shards_and_exits_1_outside(tmp_path: Path) -> None:
    a = _make_output(tmp_path, 4, name="a.jsonl")
    b = tmp_path / "b.jsonl"
    _append(
        b,
        {
            "id": "y",
            "dataset": "d0",
            "status": "ok",
            "provider": "BaseTen",
            "usage": {"completion_tokens": 5},
            "cost_usd": 0.00001,
        },
    )
    result = CliRunner().invoke(
        cli, ["audit", str(a), str(b), "--policy", str(POLICY), "--offline", "--format", "json"]
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert {p["provider"] for p in doc["providers"]} == {"Chutes", "BaseTen"}
    assert doc["outside_policy"] == [{"id": "y", "provider": "BaseTen"}]
    ok = CliRunner().invoke(cli, ["audit", str(a), "--policy", str(POLICY), "--offline"])
    assert ok.exit_code == 0, ok.output
    assert "Chutes" in ok.stdout and "chutes/int4" in ok.stdout


def test_export_sharegpt_keeps_reasoning(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 5)
    rows = {r["id"]: r for r in records(out)}
    target = tmp_path / "train.jsonl"
    summary = export([out], fmt="sharegpt", output=target, include_truncated=True)
    exported = records(target)
    assert summary.written == len(exported) == summary.read == 5
    first = exported[0]
    source = rows[first["id"]]
    assert first["conversations"] == [
        {"from": "human", "value": source["messages"][0]["content"]},
        {
            "from": "gpt",
            "value": source["content"],
            "reasoning_content": "thinking",
            "generated": True,
        },
    ]


def test_export_skips_failed_and_truncated_by_default(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    base = {
        "dataset": "d",
        "messages": [{"role": "user", "content": "q"}],
        "content": "a",
        "reasoning": None,
    }
    _append(out, {**base, "id": "ok", "status": "ok"})
    _append(out, {**base, "id": "cut", "status": "truncated"})
    _append(out, {**base, "id": "bad", "status": "failed"})
    _append(out, {**base, "id": "gone", "status": "cancelled"})
    target = tmp_path / "t.jsonl"
    summary = export([out], fmt="jsonl", output=target)
    assert summary.written == 1 and summary.not_answered == {"truncated": 1, "failed": 1}
    (row,) = records(target)
    assert row["id"] == "ok"
    assert row["conversations"] == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": None, "generated": True},
    ]
    assert export([out], fmt="jsonl", output=target, include_truncated=True).written == 2


def test_export_parquet_roundtrip(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out = _make_output(tmp_path, 4)
    target = tmp_path / "t.parquet"
    assert export([out], fmt="parquet", output=target, include_truncated=True).written == 4
    frame = pd.read_parquet(target)
    assert sorted(frame["id"]) == sorted(r["id"] for r in records(out))
    messages = json.loads(frame["conversations"][0])
    assert messages[-1]["role"] == "assistant" and messages[-1]["reasoning_content"] == "thinking"


def test_export_never_writes_over_its_input(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 1)
    with pytest.raises(ConfigError, match="-o: the output"):
        export([out], fmt="jsonl", output=out)


def test_export_cli(tmp_path: Path) -> None:
    out = _make_output(tmp_path, 3)
    target = tmp_path / "sg.jsonl"
    result = CliRunner().invoke(
        cli, ["export", str(out), "--format", "sharegpt", "-o", str(target), "--include-truncated"]
    )
    assert result.exit_code == 0, result.output
    assert f"wrote 3 of 3 rows to {target} (sharegpt)" in result.stderr
    assert len(records(target)) == 3


def test_shards_cover_every_row_once_and_merge_in_audit(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(60))
    outs = []
    for i in range(3):
        out = tmp_path / f"shard{i}.jsonl"
        asyncio.run(
            generate(
                tmp_path / "prompts.jsonl",
                policy=POLICY,
                out=out,
                send=LedgerSender(seed=i),
                snapshot="bundled",
                sleep=no_sleep,
                max_tokens=16,
                shard=f"{i}/3",
            )
        )
        outs.append(out)
    ids = [r["id"] for out in outs for r in records(out)]
    assert sorted(ids) == sorted(f"r{i}" for i in range(60)) and len(set(ids)) == 60
    assert all(records(out) for out in outs)
    report = audit(outs, policy=POLICY, snapshot=bundled_snapshot())
    assert report.rows == 60 and report.exit_code == 0
