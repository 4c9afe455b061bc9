"""Tables that fit: the tag, prices and verdict are never cut; lesser columns wrap or are left out,
and one stderr line says which. ``$COLUMNS`` is respected when piped (as under CliRunner)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.cli._common import fit_columns, format_cell
from openrouter_probe.rules.snapshot import bundled_snapshot

MODEL = "moonshotai/kimi-k2.5"
SNAP = bundled_snapshot()
TAGS = [e.tag for e in SNAP.endpoints]
OUTPUT_PRICES = [f"{float(e.pricing.completion_usd_per_m):.2f}" for e in SNAP.endpoints]


def _run(args: list[str], columns: int | None) -> tuple[str, str, int]:
    env = {"COLUMNS": str(columns)} if columns else {"COLUMNS": ""}
    result = CliRunner().invoke(cli, args, env=env)
    return result.stdout, result.stderr, result.exit_code


def _table_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(("│", "┃", "┏", "└", "┡"))]


def _cells(stdout: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("│").split("│")]
        for line in stdout.splitlines()
        if line.startswith("│")
    ]


@pytest.mark.parametrize("columns", [80, 60])
def test_endpoints_keep_tag_and_prices_whole(columns: int) -> None:
    stdout, stderr, code = _run(["endpoints", MODEL, "--offline"], columns)
    assert code == 0
    rows = _cells(stdout)
    assert [r for r in rows if r[0] in TAGS or r[1] in TAGS]  # the tag column is there
    tags_seen = [c for r in rows for c in r if c in TAGS]
    assert tags_seen == TAGS  # every tag whole (no "chu…"), in order
    for row, price in zip(rows, OUTPUT_PRICES, strict=True):
        assert price in row
    assert "…" not in stdout
    assert all(len(line) <= columns for line in _table_lines(stdout))
    assert stderr.count(f"left out to fit {columns} columns:") == 1
    assert "max output" in stderr.replace("\n  ", " ")  # the least useful column goes first
    assert all(len(line) <= columns for line in stderr.splitlines() if "snapshot:" not in line)


@pytest.mark.parametrize("columns", [80, 60])
def test_matrix_keeps_tag_verdict_and_prices(columns: int) -> None:
    stdout, stderr, code = _run(["matrix", MODEL, "--offline"], columns)
    assert code == 0
    rows = _cells(stdout)
    assert [c for r in rows for c in r if c in TAGS] == TAGS
    verdicts = [c for r in rows for c in r if c in ("native", "undeclared", "requantized")]
    assert len(verdicts) == len(TAGS)
    for row, price in zip(rows, OUTPUT_PRICES, strict=True):
        assert price in row
    assert all(len(line) <= columns for line in _table_lines(stdout))
    assert "…" not in stdout
    assert "supports tools" in stderr.replace("\n  ", " ").splitlines()[-1]


def test_piped_without_columns_shows_every_column() -> None:
    stdout, stderr, _ = _run(["matrix", MODEL, "--offline"], None)
    assert "left out" not in stderr
    header = " ".join(_table_lines(stdout)[1:3])
    for name in ("supports", "max output", "latency", "cache read"):
        assert name in header


def test_wide_enough_shows_everything_on_one_header_line() -> None:
    stdout, stderr, _ = _run(["endpoints", MODEL, "--offline"], 250)
    assert "left out" not in stderr
    assert "throughput p50 tok/s" in stdout


def test_explain_at_80_columns_lists_the_reasons_below() -> None:
    stdout, stderr, code = _run(["policy", "explain", "policies/kimi-k2.5.yaml"], 80)
    assert code == 0
    rows = _cells(stdout)
    assert [r[0] for r in rows] == TAGS
    decisions = {r[0]: r[1] for r in rows}
    assert decisions["chutes/int4"] == "#1, 98%"
    assert decisions["fireworks"] == decisions["venice"] == "dropped"
    assert "fireworks: dropped: ignored" in stdout
    assert "reason" in stderr


def test_budget_at_60_columns_keeps_tag_verdict_price_and_cost() -> None:
    args = ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"]
    stdout, stderr, code = _run(args, 60)
    assert code == 0
    chutes = next(r for r in _cells(stdout) if r[0] == "chutes/int4")
    assert chutes[:2] == ["chutes/int4", "native"]
    assert "2.20" in chutes and "132.00" in chutes
    # budget has no --format csv: the hint names only the formats it has
    # the note is wrapped to the width: its continuation lines are indented
    notes = stderr.replace("\n  ", " ").splitlines()
    left_out = [line for line in notes if line.startswith("left out to fit")]
    assert len(left_out) == 1 and left_out[0].endswith("; --format json has every column)")
    assert all(len(line) <= 60 for line in stderr.splitlines() if "left out" in line)


def test_essential_columns_stay_whole_even_past_the_width() -> None:
    rows = [{"tag": "a-very-long-provider-name/with-a-variant", "verdict": "requantized", "x": 1}]
    plans, _, dropped = fit_columns(rows, 30)
    assert [p.column for p in plans] == ["tag", "verdict"]
    assert dropped == ["x"]


@pytest.mark.parametrize(
    ("value", "column", "shown"),
    [
        (1850.0, "latency_p50_ms", "1850"),
        (31.4, "throughput_p50_tps", "31"),
        (2.2, "output_usd_per_m", "2.20"),
        (10.0, "output_usd_per_m", "10.00"),
        (132.0, "cost_usd", "132.00"),
        (98.4, "uptime_30m_pct", "98.40"),
        (True, "supports_tools", "yes"),
        (None, "tag", "-"),
        (float("nan"), "uptime_30m_pct", "-"),
        (262144, "context_tokens", "262144"),
    ],
)
def test_format_cell(value: object, column: str, shown: str) -> None:
    assert format_cell(value, column) == shown


def test_notes_wrap_to_the_width_between_words(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Review of 0.2.0: audit's notes and the snapshot line ran to 150-270 columns at 80."""
    from openrouter_probe.cli._common import note

    long = "spent: $13.060000 = $0.655000 realised + " + "$12.405000 possibly billed " * 6
    monkeypatch.setenv("COLUMNS", "80")
    note(long)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 1 and all(len(line) <= 80 for line in lines)
    assert " ".join(line.strip() for line in lines) == long.strip()  # no figure cut
    monkeypatch.delenv("COLUMNS")  # piped without COLUMNS: one line, for logs and grep
    note(long)
    assert capsys.readouterr().err == long + "\n"
