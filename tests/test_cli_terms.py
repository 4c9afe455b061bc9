"""Issue 22 item 4: library messages say the library's keywords (``max_tokens=N``), the CLI shows
its flags (``--max-tokens N``) where it prints them (``cli.terms``)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.cli.terms import flagged
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from tests._generate import POLICY, write_prompts
from tests.conftest import PYTEST_OPENROUTER_KEY


@pytest.mark.parametrize(
    ("library", "cli_text"),
    [
        ("more than max_wait_s=60 s: slow", "more than --max-wait 60 s: slow"),
        ("; max_tokens=1234 would fit", "; --max-tokens 1234 would fit"),
        ("a lower max_tokens with lower_max_tokens=True)", "a lower max_tokens with --lower-max-tokens)"),
        ("(redo_failed=True also resends)", "(--redo-failed also resends)"),
        ("raise budget_usd above $0.10", "raise --budget-usd above $0.10"),
        ("no budget_usd: (dry_run=True shows it)", "no --budget-usd: (--dry-run shows it)"),
        ("answers cut at max_tokens", "answers cut at max_tokens"),  # a quantity, not a keyword
        ("spent_usd and the_budget_usd_x", "spent_usd and the_budget_usd_x"),
    ],
)  # fmt: skip
def test_flagged_shows_the_keywords_as_flags_and_nothing_else(library: str, cli_text: str) -> None:
    assert flagged(library) == cli_text


def test_the_budget_advice_is_in_library_terms_and_the_cli_shows_the_flags(tmp_path: Path) -> None:
    prompts = write_prompts(
        tmp_path / "prompts.jsonl", [{"id": f"r{i}", "prompt": f"question {i}"} for i in range(3)]
    )
    with serve(speed=0, seed=22) as fake:
        summary = asyncio.run(
            generate(prompts, policy=POLICY, out=tmp_path / "lib.jsonl", base_url=fake.base_url,
                     api_key=PYTEST_OPENROUTER_KEY, snapshot="bundled", budget_usd="0.001",
                     max_tokens=4096, progress=False)
        )  # fmt: skip
        assert summary.stop_reason == "budget" and summary.requests == 0
        found = re.search(r"max_tokens=(\d+) would fit", summary.message)
        assert found, summary.message
        assert "--" not in summary.message
        env = {"OPENROUTER_BASE_URL": fake.base_url, "OPENROUTER_API_KEY": PYTEST_OPENROUTER_KEY}
        result = CliRunner().invoke(
            cli,
            ["generate", str(prompts), "--policy", POLICY, "--out", str(tmp_path / "cli.jsonl"),
             "--snapshot", "bundled", "--budget-usd", "0.001", "--max-tokens", "4096", "--quiet"],
            env=env,
        )  # fmt: skip
        uncapped = CliRunner().invoke(
            cli,
            ["generate", str(prompts), "--policy", POLICY, "--out", str(tmp_path / "free.jsonl"),
             "--snapshot", "bundled", "--max-tokens", "40", "--quiet"],
            env=env,
        )  # fmt: skip
        sharded = CliRunner().invoke(
            cli,
            ["generate", str(prompts), "--policy", POLICY, "--out", str(tmp_path / "s.jsonl"),
             "--snapshot", "bundled", "--budget-usd", "0.5", "--shard", "0/2", "--dry-run"],
            env=env,
        )  # fmt: skip
    assert "--budget-usd is per shard: $0.50 x 2 shards = $1.00" in sharded.stdout
    assert "budget_usd" not in sharded.output, sharded.output
    # the same advice, the same number, with the CLI's flag
    assert f"--max-tokens {found.group(1)} would fit" in result.stdout, result.output
    assert "max_tokens=" not in result.stdout
    assert (
        "no --budget-usd: nothing caps this run's spend (--dry-run shows the worst case)"
        in uncapped.stderr
    ), uncapped.output
    assert "budget_usd" not in uncapped.stderr
