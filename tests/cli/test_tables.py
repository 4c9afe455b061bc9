"""Tables that fit: the tag, prices and verdict are never cut; lesser columns wrap or are left out,
and one stderr line says which. ``$COLUMNS`` is respected when piped (as under CliRunner)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from openrouter_probe.cli.tables import fit_columns, format_cell
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


def test_piped_without_columns_fits_80() -> None:
    # issue 26: piped with COLUMNS unset, `policy explain` printed about 230 columns
    for args in (
        ["matrix", MODEL, "--offline"],
        ["policy", "explain", "policies/kimi-k2.5.yaml"],
        ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"],
    ):
        stdout, stderr, code = _run(args, None)
        assert code == 0, stderr
        lines = _table_lines(stdout)
        assert lines and max(len(line) for line in lines) <= 80, args
        assert "left out to fit 80 columns:" in stderr.replace("\n  ", " "), args


@pytest.mark.parametrize(
    "args",
    [
        ["policy", "explain", "policies/kimi-k2.5.yaml"],
        ["policy", "explain", "policies/kimi-k2.5.spec.yaml", "--offline"],
        ["models", "--offline"],
        ["endpoints", MODEL, "--offline"],
        ["matrix", MODEL, "--offline"],
        ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_every_line_of_a_table_command_fits_80_when_piped(args: list[str]) -> None:
    """Issue 33: the table fit, but the prose beside it did not (``policy explain`` printed
    286-column reasons, assumptions and trade-off lines), and ``models`` drew an 85-wide table
    (its ids are essential: now they fold). Every stdout line counts, not only the table's."""
    stdout, stderr, code = _run(args, None)
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert len(lines) >= 3
    assert max(len(line) for line in lines) <= 80, max(lines, key=len)
    assert "…" not in stdout
    if args[1] == "explain":
        # wrapped between words, never inside one: every reason and assumption still reads
        text = " ".join(line.strip() for line in lines)
        assert "fireworks: dropped: ignored (spec ignores 'fireworks')" in text
        assert '"order": ["chutes/int4", "deepinfra/int4",' in text
    if args[0] == "models":
        ids = "".join(c[0] for c in _cells(stdout))
        assert "moonshotai/kimi-k2.5" in ids


def test_piped_without_columns_the_csv_has_every_column() -> None:
    stdout, _, _ = _run(["matrix", MODEL, "--offline", "--format", "csv"], None)
    header = stdout.splitlines()[0]
    for name in ("supports_tools", "max_output_tokens", "latency_p50_ms", "cache_read_usd_per_m"):
        assert name in header


def test_the_width_of_a_pipe_a_terminal_and_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import shutil
    import sys

    from openrouter_probe.cli.tables import table_width

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys, "stdout", open(os.devnull, "w"))  # noqa: SIM115 (closed with the test)
    assert table_width() == 80  # a pipe or a file
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a: os.terminal_size((123, 40)))
    assert table_width() == 123  # a terminal
    monkeypatch.setenv("COLUMNS", "61")
    assert table_width() == 61


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
    # issue 26: the table is 62 wide without the reasons: uptime (and status) fit beside it
    header = " ".join(_table_lines(stdout)[1:3])
    assert "uptime" in header and "30m %" in header and "status" in header
    assert max(len(line) for line in _table_lines(stdout)) <= 80
    left_out = stderr.replace("\n  ", " ")
    assert "left out to fit 80 columns: provider, declared, effective, reason " in left_out
    assert {r[0]: r[5] for r in rows}["venice"] == "88.70"


def test_a_column_left_out_early_comes_back_when_a_later_one_makes_room() -> None:
    rows = [{"tag": "t", "a": 12345, "b": "x" * 30}]
    plans, _, dropped = fit_columns(rows, 22, drop_order=("a", "b"))
    assert [p.column for p in plans] == ["tag", "a"] and dropped == ["b"]


def test_budget_at_60_columns_drops_the_empty_column_first() -> None:
    # issue 26: without the prompt size every "all in cost $" cell is "-"; it stayed (a cost
    # column is protected) while "budget buys" and "per dataset" went
    args = ["budget", MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "60M"]
    stdout, stderr, _ = _run([*args, "--datasets", "6"], 60)
    header = " ".join(_table_lines(stdout)[1:3])
    assert "all in" not in header
    assert all("-" not in row[2:] for row in _cells(stdout)[:11])
    stdout, stderr, _ = _run([*args, "--datasets", "6"], 72)
    header = " ".join(_table_lines(stdout)[1:3])
    assert "budget" in header and "buys" in header and "dataset" in header
    chutes = next(r for r in _cells(stdout) if r[0] == "chutes/int4")
    assert chutes == ["chutes/int4", "native", "2.20", "132.00", "45.45M", "7.58M"]
    assert "all in cost $" in stderr.replace("\n  ", " ")


def test_empty_columns_go_first() -> None:
    rows = [{"tag": "t", "cost_usd": None, "note": "abcdefgh"}, {"tag": "u", "cost_usd": None}]
    plans, _, dropped = fit_columns([{**r, "note": r.get("note")} for r in rows], 18)
    assert [p.column for p in plans] == ["tag", "note"] and dropped == ["cost_usd"]


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


def test_policy_explain_piped_in_a_real_process_without_columns_fits_80() -> None:
    """The same as a user's pipe: a child process, COLUMNS not set at all, stdout a pipe."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    out = subprocess.run(
        [sys.executable, "-m", "openrouter_probe", "policy", "explain", "policies/kimi-k2.5.yaml"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    lines = out.stdout.splitlines()
    assert len(lines) > 20 and max(len(line) for line in lines) <= 80
    assert "assumption: Ordered and sorted routes send each request" in out.stdout
