"""Every usage error exits 2, the tool's own checks of an option's value included; 1 is for a job
that failed (issue 26; docs/cli.md, "Exit codes")."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from openrouter_probe.cli import cli
from tests.conftest import ROOT

MODEL = "moonshotai/kimi-k2.5"
POLICY = str(ROOT / "policies" / "kimi-k2.5.yaml")
SPEC = str(ROOT / "policies" / "kimi-k2.5.spec.yaml")
README = str(ROOT / "README.md")

# verb -> a bad option and the line that says what is wrong. The tool's own checks where a verb
# has one (they exited 1 before issue 26), click's own otherwise.
BAD: dict[str, tuple[list[str], str]] = {
    "models": (["--offline", "--format", "yaml"], "Invalid value for '--format'"),
    "endpoints": ([MODEL, "--offline", "--snapshot", "x.json"], "--offline and --snapshot PATH"),
    "matrix": ([MODEL, "--offline", "--snapshot", "x.json"], "--offline and --snapshot PATH"),
    "budget": (
        [MODEL, "--offline", "--budget-usd", "-5", "--output-tokens", "1M"],
        "--budget-usd -5: a positive amount of USD, e.g. 100",
    ),
    "policy compile": ([SPEC, "--offline", "--snapshot", "x.json"], "--offline and --snapshot"),
    "policy lint": ([POLICY, "--offline", "--snapshot", "x.json"], "--offline and --snapshot"),
    "policy explain": ([POLICY, "--offline", "--snapshot", "x.json"], "--offline and --snapshot"),
    "policy check": ([POLICY, "--offline", "--price-threshold-pct", "-1"], "-1.0 is not in"),
    "generate": (
        [README, "--policy", POLICY, "-o", "o.jsonl", "--shard", "3/2"],
        "--shard 3/2: needs 0 <= i < n, e.g. 0/2",
    ),
    "audit": ([README, "--policy", POLICY, "--offline", "--snapshot", "x.json"], "--offline and"),
    "export": ([README, "--format", "csv", "-o", "x.csv"], "Invalid value for '--format'"),
    "fake-server": (
        ["--offline", "--faults", "upstream_429=lots"],
        "--faults entry 'upstream_429=lots': rate 'lots' is not a number between 0 and 1",
    ),
    "verify": ([MODEL, "--offline", "--budget-usd", "ten"], "--budget-usd: 'ten' is not a number"),
    "keys create": (
        [
            "--shards",
            "2",
            "--budget-usd",
            "1",
            "--name",
            "j",
            "-o",
            "k.json",
            "--shard-weights",
            "1,0",
        ],
        "--shard-weights 1,0: every weight is a number above 0",
    ),
    "keys status": (["k.json"], "'k.json' does not exist"),
    "keys revoke": (["k.json"], "'k.json' does not exist"),
}

# The values issue 26 found exiting 1 (click's own exited 2).
OWN_CHECKS = [
    ("generate", ["--budget-usd", "-5"], "--budget-usd -5: a positive amount of USD, e.g. 100"),
    ("generate", ["--budget-usd", "0"], "--budget-usd 0: a positive amount of USD, e.g. 100"),
    ("generate", ["--budget-usd", "ten"], "--budget-usd: 'ten' is not a number"),
    ("generate", ["--shard", "3/2"], "--shard 3/2: needs 0 <= i < n, e.g. 0/2"),
    ("generate", ["--weights", "B3:2"], "--weights B3:2: give DATASET=WEIGHT, e.g. B3=2,B4=1"),
    ("generate", ["--weights", "B3=0"], "--weights B3=0: a weight is a number above 0, e.g. 2"),
    ("generate", ["--target-tokens", "10Q"], "--target-tokens: '10Q' is not a token count"),
    ("budget", ["--output-tokens", "10Q"], "--output-tokens: '10Q' is not a token count"),
    ("budget", ["--reasoning-share", "2"], "--reasoning-share"),
    ("budget", ["--prompt-ratio", "-1"], "--prompt-ratio: -1 must be >= 0"),
    ("fake-server", ["--degrade", "chutes"], "--degrade 'chutes': expected TAG=RATE"),
]


def _verbs(group: click.Group, prefix: str = "") -> Iterator[str]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _verbs(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}"


def test_every_verb_has_a_bad_option_case() -> None:
    assert sorted(BAD) == sorted(_verbs(cli))


@pytest.mark.parametrize("verb", sorted(BAD))
def test_a_bad_option_exits_2_with_one_error_line(
    verb: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    args, said = BAD[verb]
    result = CliRunner().invoke(cli, [*verb.split(), *args], env={"OPENROUTER_API_KEY": "sk-x"})
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and said in errors[0], result.stderr


@pytest.mark.parametrize(("verb", "option", "said"), OWN_CHECKS)
def test_the_tools_own_checks_are_usage_errors(
    verb: str, option: list[str], said: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    base = {
        "generate": [README, "--policy", POLICY, "-o", "o.jsonl"],
        "budget": [MODEL, "--offline", "--budget-usd", "100", "--output-tokens", "1M"],
        "fake-server": ["--offline", "--port", "0"],
    }[verb]
    result = CliRunner().invoke(cli, [verb, *base, *option], env={"OPENROUTER_API_KEY": "sk-x"})
    assert result.exit_code == 2, result.output
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert said in error


def test_a_failed_job_still_exits_1(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # not a usage error: the options are right, the prompts file is not a prompts file
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    result = CliRunner().invoke(
        cli,
        ["generate", README, "--policy", POLICY, "-o", "o.jsonl", "--snapshot", "bundled"],
        env={"OPENROUTER_API_KEY": "sk-x"},
    )
    assert result.exit_code == 1, result.output
