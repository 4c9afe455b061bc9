"""A cap by default: ``generate`` without ``--budget-usd`` (the library's ``budget_usd="key"``)
is capped at what the key's blocking budget has left (``GET /key``), said on stderr; with no
limit to read it is refused (exit 2) unless ``--no-budget`` (``budget_usd=None``) asks for no cap.
A dry run needs none."""

from __future__ import annotations

import asyncio
import logging
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.errors import OptionError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.manifest import SourceOptions
from tests._generate import POLICY, no_sleep, prompt_rows, records, write_prompts


def _gen(tmp: Path, base_url: str, **options: Any) -> Any:
    options.setdefault("budget_usd", "key")  # the CLI's default without --budget-usd
    return asyncio.run(
        generate(
            tmp / "prompts.jsonl",
            policy=POLICY,
            out=tmp / "out.jsonl",
            base_url=base_url,
            api_key="sk-cap",
            sleep=no_sleep,
            max_tokens=50,
            **options,
        )
    )


def test_the_keys_remaining_limit_is_the_cap_and_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    with serve(speed=0, seed=1, key_limit_usd=5) as fake, caplog.at_level(logging.WARNING):
        summary = _gen(tmp_path, fake.base_url)
    assert summary.budget_usd == Decimal(5) and summary.stop_reason == "done"
    assert len(records(tmp_path / "out.jsonl")) == 3
    said = [r.getMessage() for r in caplog.records if "capped at" in r.getMessage()]
    assert said == [
        "no budget_usd given: this run is capped at the key's own limit ($5.00 of $5.00 left, "
        "never resets): budget_usd=5.0 (give budget_usd= to choose another cap)"
    ]


def test_a_resume_is_capped_at_what_it_spent_plus_what_the_key_has_left(tmp_path: Path) -> None:
    """The cap is the output's, across runs: a resume adds what the key has left to what the
    output spent before (the key's whole limit here), never stops at once on its own spend."""
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    with serve(speed=0, seed=1, key_limit_usd=0.5) as fake:
        first = _gen(tmp_path, fake.base_url, source=SourceOptions.of(limit=2))
        assert first.requests == 2 and first.budget_usd == Decimal("0.5")
        spent = fake.ledger.total_usd
        assert spent > 0
        second = _gen(tmp_path, fake.base_url)
    assert second.rows_already_done == 2 and second.stop_reason == "done"
    assert second.requests == 1 and second.spent_before_usd == spent
    assert abs(second.budget_usd - Decimal("0.5")) < Decimal("1e-9")  # spent + what is left


def test_no_budget_and_no_key_limit_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", prompt_rows(3))
    with serve(speed=0, seed=1) as fake:
        with pytest.raises(OptionError) as refused:
            _gen(tmp_path, fake.base_url)
        assert fake.fake.requests in (None, []) and len(fake.ledger) == 0
        assert str(refused.value) == (
            "no budget_usd= and the key has no limit (GET /key): nothing would cap the spend; "
            "give budget_usd=USD (e.g. 10), or `budget_usd=None` to run with no cap"
        )
        assert not (tmp_path / "out.jsonl").exists()
        summary = _gen(tmp_path, fake.base_url, budget_usd=None)  # asked for: no cap, said
    assert summary.budget_usd is None and summary.stop_reason == "done"
    assert any("nothing caps this run's spend" in w for w in summary.warnings)


def test_the_cli_exits_2_without_a_cap_and_its_dry_run_needs_none(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, prompt_rows(2))
    with serve(speed=0, seed=1) as fake:
        env = {"OPENROUTER_API_KEY": "sk-cap", "OPENROUTER_BASE_URL": fake.base_url}
        args = ["generate", str(prompts), "--policy", str(POLICY), "-o", str(tmp_path / "o.jsonl")]
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == 2, result.output
        assert "no --budget-usd and the key has no limit (GET /key)" in result.output
        assert "give --budget-usd USD (e.g. 10), or `--no-budget` to run with no cap" in (
            " ".join(result.output.split())
        )
        assert len(fake.ledger) == 0
        dry = CliRunner().invoke(cli, [*args, "--dry-run", "--snapshot", "bundled"], env=env)
        assert dry.exit_code == 0, dry.output
        said = " ".join(dry.output.split())
        assert "the real run is capped at what the key's limit has left" in said
        both = CliRunner().invoke(cli, [*args, "--no-budget", "--budget-usd", "1"], env=env)
        assert both.exit_code == 2 and "give --budget-usd or --no-budget, not both" in both.output
        free = CliRunner().invoke(cli, [*args, "--no-budget", "--quiet"], env=env)
        assert free.exit_code == 0, free.output
        assert len(fake.ledger) == 2
