"""Issue 22 item 4: library messages say the library's keywords (``max_tokens=N``), the CLI shows
its flags (``--max-tokens N``) where it prints them (``cli.terms``)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from openrouter_probe.cli import cli
from openrouter_probe.cli.terms import flagged
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.export import export
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.run.lock import OutputLock
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


@pytest.mark.parametrize(
    ("library", "cli_text"),
    [
        ('resume with turns="all", or', "resume with --turns all, or"),
        ("turns (turns='all'): 20 to send", "turns (--turns all): 20 to send"),
        ("give limit= or sample=, not both", "give --limit or --sample, not both"),
        ("out=/tmp/a.jsonl: the folder", "--out /tmp/a.jsonl: the folder"),
        ("out=: it is an input; name another", "--out: it is an input; name another"),
        ("concurrency=0: a whole number >= 1", "--concurrency 0: a whole number >= 1"),
        ("keep-alive comments (read_timeout_s)", "keep-alive comments (--read-timeout)"),
        ("superseded by redo_truncated=True: the", "superseded by --redo-truncated: the"),
        ("output=x.jsonl: fmt='parquet' writes", "-o x.jsonl: --format parquet writes"),
        ("timeout=3, layout=2, stdout=x", "timeout=3, layout=2, stdout=x"),  # not keywords
        ("a split of the rows, the limit", "a split of the rows, the limit"),  # words, no `=`
    ],
)  # fmt: skip
def test_flagged_shows_values_and_bare_keywords(library: str, cli_text: str) -> None:
    assert flagged(library) == cli_text


def _generate_cli(*args: str) -> Result:
    env = {"OPENROUTER_API_KEY": PYTEST_OPENROUTER_KEY}
    return CliRunner().invoke(
        cli, ["generate", *args, "--policy", POLICY, "--snapshot", "bundled", "--dry-run"], env=env
    )


def _generate_lib(prompts: Path, **options: Any) -> str:
    options = {"out": prompts.with_name("out.jsonl"), **options}
    with pytest.raises(ConfigError) as info:
        asyncio.run(generate(prompts, policy=POLICY, snapshot="bundled", dry_run=True,
                             api_key=PYTEST_OPENROUTER_KEY, **options))  # fmt: skip
    assert "--" not in str(info.value), info.value
    return str(info.value)


def test_the_run_options_are_refused_by_keyword_and_the_cli_names_its_flags(
    tmp_path: Path,
) -> None:
    """run.config (out, concurrency), rules.quantities, generation.prompts (limit and sample, shard),
    generation.sources (config): the library says the keyword, the CLI its flag."""
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "r0", "prompt": "question 0"}])
    missing = tmp_path / "no" / "out.jsonl"
    cases = [
        ({"out": missing}, ["--out", str(missing)],
         f"out={missing}: the folder", f"--out {missing}: the folder"),
        ({"shard": "x"}, ["--shard", "x"], "shard='x': give i/n", "--shard x: give i/n"),
        ({"source": SourceOptions.of(config="main")}, ["--config", "main"],
         "config= is for hf: ids", "--config is for hf: ids"),
    ]  # fmt: skip
    for options, flags, said, shown in cases:
        assert said in _generate_lib(prompts, **options)
        result = _generate_cli(str(prompts), "--out", str(tmp_path / "out.jsonl"), *flags)
        assert result.exit_code != 0 and shown in result.output, result.output
        assert said not in result.output
    # the CLI's own range check refuses --concurrency 0 before the library sees it
    assert "concurrency=0: a whole number >= 1" in _generate_lib(prompts, concurrency=0)
    with pytest.raises(ConfigError, match="give limit= or sample=, not both"):
        SourceOptions.of(limit=1, sample=1)


def test_a_manifest_and_source_options_say_the_keywords_the_cli_its_flags(tmp_path: Path) -> None:
    """generation.manifest: the options a manifest sets itself, by keyword and by flag."""
    write_prompts(tmp_path / "a.jsonl", [{"id": "r0", "prompt": "question 0"}])
    manifest = tmp_path / "m.yaml"
    manifest.write_text("datasets:\n  - {name: B3, source: a.jsonl}\n", encoding="utf-8")
    said = _generate_lib(manifest, source=SourceOptions.of(limit=2, prompt_field="q"))
    assert "drop prompt_field or id_field, limit= or sample= (or set them" in said
    result = _generate_cli(str(manifest), "--out", str(tmp_path / "o.jsonl"), "--limit", "2",
                           "--prompt-field", "q")  # fmt: skip
    assert "drop --prompt-field or --id-field, --limit or --sample (or set them" in result.output


def test_the_prompt_field_advice_and_the_turns_line_in_both_terms(tmp_path: Path) -> None:
    """generation.shapes (no prompt field: prompt_field) and run.summary (turns="all")."""
    odd = write_prompts(tmp_path / "odd.jsonl", [{"id": "r0", "foo": "q"}])
    said = _generate_lib(odd)
    assert "name the prompt field (prompt_field, or `fields:`" in said, said
    shown = _generate_cli(str(odd), "--out", str(tmp_path / "o.jsonl")).output
    assert "name the prompt field (--prompt-field, or `fields:`" in shown, shown
    chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]  # fmt: skip
    talk = write_prompts(tmp_path / "talk.jsonl", [{"id": "r0", "messages": chat}])
    summary = asyncio.run(generate(talk, policy=POLICY, out=tmp_path / "t.jsonl", dry_run=True,
                                   snapshot="bundled", turns="all"))  # fmt: skip
    assert 'turns (turns="all"): 2 to send' in summary.render()
    result = _generate_cli(str(talk), "--out", str(tmp_path / "t.jsonl"), "--turns", "all")
    assert "turns (--turns all): 2 to send" in result.output, result.output


def test_a_locked_output_says_out_and_the_cli_says_out_flag(tmp_path: Path) -> None:
    """run.lock: another run holds the output."""
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "r0", "prompt": "question 0"}])
    out = tmp_path / "out.jsonl"
    with OutputLock(out, command="generate"):
        said = _generate_lib(prompts, out=out)
        result = _generate_cli(str(prompts), "--out", str(out))
    assert said.endswith("or give this run another out="), said
    assert "or give this run another --out" in result.output, result.output


def test_export_refuses_by_keyword_and_the_cli_names_o_and_format(tmp_path: Path) -> None:
    """generation.export: a parquet export into a .jsonl name."""
    target = tmp_path / "x.jsonl"
    (tmp_path / "out.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        export([tmp_path / "out.jsonl"], fmt="parquet", output=target)
    assert f"output={target}: fmt='parquet' writes parquet" in str(info.value)
    result = CliRunner().invoke(
        cli, ["export", str(tmp_path / "out.jsonl"), "--format", "parquet", "-o", str(target)]
    )
    assert f"-o {target}: --format parquet writes parquet" in result.output, result.output


def test_the_job_options_say_their_keywords_and_the_cli_its_flags(tmp_path: Path) -> None:
    """generation.job (turns, reasoning_effort and reasoning_max_tokens), run.output (out=)."""
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "r0", "prompt": "question 0"}])
    cases = [
        ({"reasoning_effort": "high", "reasoning_max_tokens": 10},
         ["--reasoning-effort", "high", "--reasoning-max-tokens", "10"],
         "give reasoning_effort or reasoning_max_tokens, not both",
         "give --reasoning-effort or --reasoning-max-tokens, not both"),
    ]  # fmt: skip
    for options, flags, said, shown in cases:
        assert said in _generate_lib(prompts, **options)
        result = _generate_cli(str(prompts), "--out", str(tmp_path / "out.jsonl"), *flags)
        assert shown in result.output, result.output
    # click's own choice refuses --turns every before the library sees it
    assert "turns='every': use 'last'" in _generate_lib(prompts, turns="every")
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text('{"status": "ok"}\n', encoding="utf-8")  # run.output: no id
    said = _generate_lib(prompts, out=damaged)
    assert "is this the out= file of `generate`?" in said, said
    result = _generate_cli(str(prompts), "--out", str(damaged))
    assert "is this the --out file of `generate`?" in result.output, result.output
