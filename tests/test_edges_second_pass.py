"""Issue 26, the edges a new user touches (second pass): figures in the house style, messages that
point at the fix. Each test failed before its change."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

import openrouter_probe as orp
from openrouter_probe.cli import cli
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
SNAP = orp.bundled_snapshot(MODEL)
POLICY = str(ROOT / "policies" / "kimi-k2.5.yaml")


def _error(result: object) -> str:
    lines = [x for x in result.stderr.splitlines() if x.startswith("Error:")]  # type: ignore[attr-defined]
    assert len(lines) == 1, result.stderr  # type: ignore[attr-defined]
    return lines[0]


def test_verify_notes_say_the_cap_as_every_figure_does(tmp_path: Path) -> None:
    # "$0.5 cap" where everything else prints "$0.50"
    with orp.fake.serve(SNAP, speed=0) as fake:
        report = asyncio.run(
            orp.verify_precision(
                MODEL, out=tmp_path / "v.jsonl", base_url=fake.base_url, api_key="sk-fake",
                endpoints=["chutes/int4"], snapshot=SNAP, n=3, budget_usd="0.5",
            )
        )  # fmt: skip
        spent = fake.ledger.total_usd
    (note,) = [n for n in report.notes if n.startswith("sent ")]
    assert note == (
        f"sent 9 request(s) (0 of 9 already in {tmp_path / 'v.jsonl'}); spent ${spent:.6f} this "
        f"run, ${spent:.6f} in all of the $0.50 cap"
    )


def test_a_policy_given_as_a_snapshot_is_named_without_jsons_own_words() -> None:
    result = CliRunner().invoke(cli, ["matrix", MODEL, "--snapshot", POLICY])
    assert result.exit_code == 1
    line = _error(result)
    assert line == (
        f"Error: {POLICY}: not a snapshot but a text or YAML file; a snapshot is the JSON that "
        "`openrouter-probe endpoints MODEL --save FILE` writes"
    )
    assert "Expecting value" not in result.output and "char 0" not in result.output


def test_a_snapshot_cut_short_says_where(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text('{\n  "model": "moonshotai/kimi-k2.5",\n  "data": {"endpoints": [', "utf-8")
    result = CliRunner().invoke(cli, ["matrix", MODEL, "--snapshot", str(cut)])
    assert result.exit_code == 1
    assert _error(result) == (
        f"Error: {cut}: not valid JSON at line 3, column 26 (Expecting value); a snapshot is the "
        "JSON that `openrouter-probe endpoints MODEL --save FILE` writes: save it again"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"],
        ["matrix", MODEL, "--offline"],
    ],
)
def test_a_plot_into_a_missing_folder_says_create_it(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [*args, "--plot", "nodir/b.png"])
    assert result.exit_code == 1
    assert _error(result) == (
        "Error: --plot nodir/b.png: the folder nodir does not exist; create it first"
    )
    assert ".tmp" not in result.output
    assert not (tmp_path / "nodir").exists()
