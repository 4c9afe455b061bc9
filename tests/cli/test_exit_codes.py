"""Every usage error exits 2, the tool's own checks of an option's value included; 1 is for a job
that failed (docs/cli.md, "Exit codes")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

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


# -- issue 32 item 5: the new user's list, every one a usage error naming its flag ----------------

PROMPTS_ROWS = [{"id": f"r{i}", "prompt": f"question {i}"} for i in range(3)]
#: generate's options, each a usage error, and what its one Error line says (the flags as the CLI
#: spells them, with the value given).
GENERATE_REFUSED = [
    (["--limit", "2", "--sample", "1"], "give --limit or --sample, not both"),
    (["--reasoning-effort", "high", "--reasoning-max-tokens", "100"],
     "give --reasoning-effort or --reasoning-max-tokens, not both"),
    (["--split", "train"], "--split train is for hf: ids and datasets folders, not the file"),
    (["--config", "main"], "--config main is for hf: ids and datasets folders, not the file"),
    (["--read-timeout", "-1"], "Invalid value for '--read-timeout': -1.0 is not in the range x>0"),
    (["--drain-timeout", "-1"], "Invalid value for '--drain-timeout': -1.0 is not in the range"),
    (["--target-tokens", "0"], "--target-tokens 0: a whole number >= 1"),
    (["--temperature", "7"], "Invalid value for '--temperature': 7.0 is not in the range 0<=x<=2"),
    (["--temperature", "nan"], "--temperature nan: a number from 0 to 2 (OpenRouter's range)"),
    (["--reasoning-max-tokens", "5000", "--max-tokens", "100"],
     "--reasoning-max-tokens 5000 leaves no room for the answer within --max-tokens 100"),
    (["--stream", "--batch"], "--stream and --batch exclude each other"),
]  # fmt: skip


def _error_line(result: object) -> str:
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]  # type: ignore[attr-defined]
    assert len(errors) == 1, result.stderr  # type: ignore[attr-defined]
    return errors[0]


@pytest.mark.parametrize(("options", "said"), GENERATE_REFUSED)
def test_generate_refuses_each_value_of_the_new_users_list_with_exit_2(
    options: list[str], said: str, tmp_path: Path
) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS_ROWS), encoding="utf-8")
    out = tmp_path / "o.jsonl"
    result = CliRunner().invoke(
        cli,
        ["generate", str(prompts), "--policy", POLICY, "-o", str(out), "--snapshot", "bundled",
         "--dry-run", *options],
        env={"OPENROUTER_API_KEY": "sk-x"},
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert said in _error_line(result)
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl"]  # no output, no journal


def test_a_manifest_with_a_source_flag_is_a_usage_error(tmp_path: Path) -> None:
    manifest = ROOT / "examples" / "datasets.yaml"
    result = CliRunner().invoke(
        cli,
        ["generate", str(manifest), "--policy", POLICY, "-o", str(tmp_path / "o.jsonl"),
         "--snapshot", "bundled", "--dry-run", "--limit", "3", "--split", "test"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "a manifest sets each dataset's own; drop --limit 3, --split test" in _error_line(result)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--port", "99999"], "Invalid value for '--port': 99999 is not in the range 0<=x<=65535"),
        (["--speed", "-1"], "Invalid value for '--speed': -1.0 is not in the range x>=0"),
        (["--speed", "nan"], "--speed nan: must be 0 (no waits) or a positive factor"),
        (["--credit-usd", "-1"], "Invalid value for '--credit-usd': -1.0 is not in the range"),
    ],
)
def test_fake_server_refuses_values_out_of_range_with_exit_2(args: list[str], said: str) -> None:
    result = CliRunner().invoke(cli, ["fake-server", "--offline", *args])
    assert result.exit_code == 2, result.output
    assert said in _error_line(result)


def test_verify_endpoints_with_policy_is_a_usage_error() -> None:
    result = CliRunner().invoke(
        cli, ["verify", MODEL, "--offline", "--endpoints", "chutes/int4", "--policy", POLICY]
    )
    assert result.exit_code == 2
    assert _error_line(result) == "Error: give --endpoints or --policy, not both"


# -- the library's refusals: keyword and value for Python callers, the flag in the CLI ------------


def test_an_option_error_carries_its_keywords_and_values_and_says_them_as_keywords() -> None:
    import asyncio

    from openrouter_probe.errors import ConfigError, OptionError
    from openrouter_probe.generation import generate

    with pytest.raises(OptionError) as info:
        asyncio.run(generate(README, policy=POLICY, out="o.jsonl", temperature=float("nan")))
    assert isinstance(info.value, ConfigError)  # callers catching ConfigError still do
    assert info.value.options == ("temperature",) and info.value.values["temperature"] != 0
    assert str(info.value) == "temperature=nan: a number from 0 to 2 (OpenRouter's range)"
    with pytest.raises(OptionError) as info:
        asyncio.run(generate(README, policy=POLICY, out="o.jsonl", max_tokens=100,
                             reasoning_max_tokens=100))  # fmt: skip
    assert info.value.values == {"reasoning_max_tokens": 100, "max_tokens": 100}
    assert str(info.value).startswith(
        "reasoning_max_tokens=100 leaves no room for the answer within max_tokens=100"
    )


def test_the_cli_looks_each_flag_up_in_the_commands_own_params() -> None:
    from openrouter_probe.cli._common import flag_of, said
    from openrouter_probe.errors import OptionError

    generate, export = cli.commands["generate"], cli.commands["export"]
    assert flag_of(generate, "read_timeout_s", -1.0, given=True) == "--read-timeout -1.0"
    assert flag_of(generate, "stream", False, given=True) == "--no-stream"
    assert flag_of(generate, "batch", True, given=True) == "--batch"
    assert flag_of(export, "fmt", "hf", given=True) == "--format hf"
    assert flag_of(export, "preserve_thinking", False, given=True) == "--no-preserve-thinking"
    assert flag_of(export, "paths") == "OUTPUTS..."  # export's keywords: paths= is OUTPUTS
    # a keyword the command has no parameter for is said as the library says it
    assert flag_of(generate, "min_tokens_per_s", 0, given=True) == "min_tokens_per_s=0"
    error = OptionError("{push_to_hub=} needs {fmt=hf}", push_to_hub="me/x", fmt="jsonl")
    assert said(error, export) == "--push-to-hub me/x needs --format hf"
    assert str(error) == "push_to_hub='me/x' needs fmt='hf'"


# -- export: the combinations that did nothing ------------------------------------------------


def _output(tmp_path: Path, n: int = 2) -> Path:
    out = tmp_path / "out.jsonl"
    rows = [
        {"id": f"r{i}", "dataset": "d", "status": "ok", "content": f"answer {i}",
         "reasoning": "because", "messages": [{"role": "user", "content": f"question {i}"}],
         "provider": "Chutes", "model": "m", "finish_reason": "stop",
         "usage": {"completion_tokens": 3}}
        for i in range(n)
    ]  # fmt: skip
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


def test_export_push_to_hub_without_format_hf_is_a_usage_error(tmp_path: Path) -> None:
    out = _output(tmp_path)
    target = tmp_path / "x.jsonl"
    result = CliRunner().invoke(
        cli, ["export", str(out), "--push-to-hub", "me/x", "-o", str(target)]
    )
    assert result.exit_code == 2 and not target.exists()
    assert _error_line(result) == (
        "Error: --push-to-hub me/x uploads a Hub dataset folder, which only --format hf writes "
        "(given: --format sharegpt): add it, or drop --push-to-hub"
    )


def test_export_prompts_matching_no_row_is_a_usage_error(tmp_path: Path) -> None:
    out = _output(tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "elsewhere", "prompt": "q"}) + "\n", encoding="utf-8")
    target = tmp_path / "x.jsonl"
    result = CliRunner().invoke(
        cli, ["export", str(out), "--prompts", str(other), "-o", str(target)]
    )
    assert result.exit_code == 2 and not target.exists()
    assert f"Error: --prompts {other}: none of its row ids is a row of the outputs read" in (
        _error_line(result)
    )
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"id": "r1", "prompt": "q"}) + "\n", encoding="utf-8")
    ok = CliRunner().invoke(cli, ["export", str(out), "--prompts", str(mine), "-o", str(target)])
    assert ok.exit_code == 0 and len(target.read_text().splitlines()) == 2  # one id is enough


def test_export_of_a_journal_alone_is_a_usage_error(tmp_path: Path) -> None:
    out = _output(tmp_path)
    journal = tmp_path / "out.jsonl.ledger"
    journal.write_text(out.read_text(), encoding="utf-8")
    target = tmp_path / "x.jsonl"
    result = CliRunner().invoke(cli, ["export", str(journal), "-o", str(target)])
    assert result.exit_code == 2 and not target.exists()
    assert _error_line(result) == (
        f"Error: {journal} is the spend journal of `generate`, not an output file: export the "
        f"output it is beside ({out})"
    )
    both = CliRunner().invoke(cli, ["export", str(out), str(journal), "-o", str(target)])
    assert both.exit_code == 0 and len(target.read_text().splitlines()) == 2  # out/* still works


def test_export_warns_of_preserve_thinking_outside_specforge(tmp_path: Path) -> None:
    out = _output(tmp_path)
    result = CliRunner().invoke(
        cli, ["export", str(out), "--no-preserve-thinking", "-o", str(tmp_path / "x.jsonl")]
    )
    assert result.exit_code == 0
    assert (
        "warning: --no-preserve-thinking is specforge's; --format sharegpt has no such key: "
        "ignored" in result.stderr
    )
    quiet = CliRunner().invoke(cli, ["export", str(out), "-o", str(tmp_path / "y.jsonl")])
    assert "warning" not in quiet.stderr  # the default is not a choice the user made


def test_generate_warns_of_seed_without_sample(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS_ROWS), encoding="utf-8")
    base = ["generate", str(prompts), "--policy", POLICY, "-o", str(tmp_path / "o.jsonl"),
            "--snapshot", "bundled", "--dry-run"]  # fmt: skip
    # --seed is the old spelling of --sample-seed (issue 33): the warning names the new one
    result = CliRunner().invoke(cli, [*base, "--seed", "3"])
    assert result.exit_code == 0
    assert (
        "warning: --sample-seed 3 picks the rows of --sample, and there is no --sample"
        in result.stderr
    )
    sampled = CliRunner().invoke(cli, [*base, "--seed", "3", "--sample", "2"])
    assert sampled.exit_code == 0 and "warning: --seed" not in sampled.stderr


def test_verify_warns_of_options_a_plan_does_not_read(tmp_path: Path) -> None:
    suite = tmp_path / "s.jsonl"
    suite.write_text(json.dumps({"id": "a", "prompt": "2+2?", "expected": "4"}) + "\n")
    result = CliRunner().invoke(
        cli, ["verify", MODEL, "--offline", "--suite", str(suite), "--n", "5",
              "--evidence", str(tmp_path / "e.yaml")],
    )  # fmt: skip
    assert (
        "warning: --evidence " in result.stderr and "this run sends none: ignored" in result.stderr
    )
    assert "warning: --n 5 shapes the generated suites (arith, tools), and --suite has none" in (
        result.stderr
    )
    assert not (tmp_path / "e.yaml").exists()


# -- every skipped row named ------------------------------------------------------------------


def test_every_skipped_row_is_in_the_json_summary_and_the_text_names_ten(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    rows = [{"id": "good", "prompt": "hello"}] + [
        {"id": f"b{i}", "messages": [{"role": "user", "content": ""}]} for i in range(13)
    ]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    base = ["generate", str(prompts), "--policy", POLICY, "-o", str(tmp_path / "o.jsonl"),
            "--snapshot", "bundled", "--dry-run"]  # fmt: skip
    result = CliRunner().invoke(cli, [*base, "--format", "json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rows_skipped"] == 13
    assert summary["skipped_rows"] == [
        f"{prompts}:{line}: turn 0 (user) has empty content" for line in range(2, 15)
    ]
    text = CliRunner().invoke(cli, base)
    named = [ln for ln in text.stderr.splitlines() if ln.startswith("skipped, never sent:")]
    assert len(named) == 10 and named[-1].startswith(f"skipped, never sent: {prompts}:11:")
    assert "... and 3 more rows skipped" in text.stderr
    assert "--format json lists all 13 skipped rows (skipped_rows)" in text.stderr


# -- found across the other verbs: values the library refused with exit 1 ---------------------

ACROSS_VERBS = [
    (["budget", MODEL, "--offline", "--budget-usd", "10", "--output-tokens", "1M",
      "--datasets", "3", "--dataset-names", "a,b"],
     "--dataset-names: 2 names for 3 datasets; give one name per dataset"),
    (["budget", MODEL, "--offline", "--budget-usd", "10", "--output-tokens", "1M",
      "--prompt-tokens", "100", "--output-tokens-per-request", "100", "--prompt-ratio", "2"],
     "give --prompt-ratio or --prompt-tokens with --output-tokens-per-request, not both"),
    (["budget", MODEL, "--offline", "--budget-usd", "10", "--output-tokens", "1M",
      "--prompt-tokens", "100"], "--prompt-tokens needs --output-tokens-per-request"),
    (["verify", MODEL, "--offline", "--suite", "arithmetic"],
     "--suite arithmetic: no such suite; use arith, tools, or a path to a .jsonl file"),
    (["generate", README, "--policy", POLICY, "-o", "o.jsonl", "--snapshot", "bundled",
      "--dry-run", "--weights", "B9=2"], "--weights B9: no such dataset in the prompts"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "said"), ACROSS_VERBS)
def test_values_refused_across_verbs_are_usage_errors(
    args: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    if args[0] == "generate":  # a prompts file with one dataset, B3
        (tmp_path / "p.jsonl").write_text(json.dumps({"dataset": "B3", "prompt": "q"}) + "\n")
        args = [args[0], str(tmp_path / "p.jsonl"), *args[2:]]
    result = CliRunner().invoke(cli, args, env={"OPENROUTER_API_KEY": "sk-x"})
    assert result.exit_code == 2, result.output
    assert said in _error_line(result)
