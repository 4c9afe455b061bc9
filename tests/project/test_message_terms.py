"""Library messages say the library's keywords
(``max_tokens=N``), the CLI shows each command's own flags (``--max-tokens N``) where it prints
them: a ``Message`` carries its code and parameters, each interface renders its names."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from openrouter_probe.cli import cli
from openrouter_probe.cli._common import said as said_for_cli
from openrouter_probe.errors import ConfigError
from openrouter_probe.fake import serve
from openrouter_probe.generation import generate
from openrouter_probe.generation.export import export
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.run.lock import OutputLock
from openrouter_probe.run.report import render_result
from tests._generate import POLICY, ROOT, write_prompts
from tests.conftest import PYTEST_OPENROUTER_KEY


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
             "--snapshot", "bundled", "--max-tokens", "40", "--quiet", "--no-budget"],
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
         "config='main' is for hf: ids", "--config main is for hf: ids"),
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
    assert "drop prompt_field='q', limit=2 (or set them" in said
    result = _generate_cli(str(manifest), "--out", str(tmp_path / "o.jsonl"), "--limit", "2",
                           "--prompt-field", "q")  # fmt: skip
    assert "drop --prompt-field q, --limit 2 (or set them" in result.output
    assert result.exit_code == 2  # a usage error: flags a manifest does not take


def test_the_prompt_field_advice_and_the_turns_line_in_both_terms(tmp_path: Path) -> None:
    """generation.shapes (no prompt field: prompt_field) and run.render (turns="all")."""
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
    assert "turns (turns='all'): 2 to send" in render_result(summary)
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
    assert f"--out {target}: --format parquet writes parquet" in result.output, result.output


def test_the_job_options_say_their_keywords_and_the_cli_its_flags(tmp_path: Path) -> None:
    """generation.job (turns, reasoning_effort and reasoning_max_tokens), run.books.output (out=)."""
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "r0", "prompt": "question 0"}])
    cases = [
        ({"reasoning_effort": "high", "reasoning_max_tokens": 10},
         ["--reasoning-effort", "high", "--reasoning-max-tokens", "10"],
         "give reasoning_effort= or reasoning_max_tokens=, not both",
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
    assert "is this the output file of `generate`?" in said, said
    result = _generate_cli(str(prompts), "--out", str(damaged))
    assert "is this the output file of `generate`?" in result.output, result.output


# -- second pass: export's summary, generate's weights and batch, plots, budget, verify, snapshots


def test_the_export_summary_says_keywords_and_the_cli_its_flags(tmp_path: Path) -> None:
    """generation.export: the summary's hints (include_truncated, only_generated, prompts)."""
    user = {"role": "user", "content": "first question"}
    copied = {"role": "assistant", "content": "an answer from the prompts file"}
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    rows = [
        {"id": "m", "status": "ok", "content": "the answer", "reasoning": "r",
         "messages": [user, copied, {"role": "user", "content": "second"}]},
        {"id": "tool", "status": "ok", "content": "", "reasoning": "r", "tool_calls": [call],
         "messages": [user]},
        {"id": "t", "status": "truncated", "content": "cut", "reasoning": "r", "messages": [user]},
    ]  # fmt: skip
    out = write_prompts(tmp_path / "out.jsonl", rows)
    said = " ".join(export([out], fmt="jsonl", output=tmp_path / "lib.jsonl").render().split())
    assert "(include_truncated=True adds those cut at max_tokens)" in said, said
    assert "only_generated=True leaves these rows out" in said, said
    assert "pass prompts=PROMPTS to take them" in said, said
    assert "--" not in said
    result = CliRunner().invoke(
        cli, ["export", str(out), "--format", "jsonl", "-o", str(tmp_path / "cli.jsonl")]
    )
    assert result.exit_code == 0, result.output
    shown = " ".join(result.stderr.split())  # as one line, whatever the wrapping
    assert "(--include-truncated adds those cut at max_tokens)" in shown, shown
    assert "--only-generated leaves these rows out" in shown, shown
    assert "pass --prompts PROMPTS to take them" in shown, shown
    assert "=True" not in shown and "prompts=" not in shown


def test_generate_weights_say_weights_and_the_cli_says_its_flag(tmp_path: Path) -> None:
    """generation.job: a weight for a dataset the prompts do not have."""
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "r0", "dataset": "B3", "prompt": "q"}])
    said = _generate_lib(prompts, weights="B9=2")
    assert "weights='B9': no such dataset in the prompts (they are: B3)" in said, said
    result = _generate_cli(str(prompts), "--out", str(tmp_path / "o.jsonl"), "--weights", "B9=2")
    assert result.exit_code == 2  # a usage error
    assert "--weights B9: no such dataset in the prompts (they are: B3)" in result.output


def test_a_plot_it_cannot_write_says_path_and_the_cli_says_plot(tmp_path: Path) -> None:
    """analysis.plots: save_figure's path=; matrix --plot (a format matplotlib has no writer
    for: a missing folder is made now)."""
    from matplotlib.figure import Figure

    from openrouter_probe.analysis.plots import save_figure

    target = tmp_path / "nodir" / "b.txt"
    with pytest.raises(ConfigError) as info:
        save_figure(Figure(), target)
    assert str(info.value).startswith(f"path={target}: cannot write the plot: "), info.value
    assert "--" not in str(info.value)
    result = CliRunner().invoke(
        cli, ["matrix", "moonshotai/kimi-k2.5", "--offline", "--plot", str(target)]
    )
    assert result.exit_code == 1
    assert f"Error: --plot {target}: cannot write the plot: " in result.output


def _budget_cli(*args: str) -> Result:
    return CliRunner().invoke(
        cli, ["budget", "moonshotai/kimi-k2.5", "--offline", "--budget-usd", "100",
              "--output-tokens", "60M", *args], env={"COLUMNS": ""},
    )  # fmt: skip


def test_the_budget_says_its_keywords_alone_and_the_cli_its_flags() -> None:
    """analysis.budget_job (dataset_names, prompt_tokens_per_request) and analysis.budget's
    notes (the prompt size): no ``name (--flag)`` pairs any more."""
    from openrouter_probe.analysis.budget import plan_budget
    from openrouter_probe.rules.snapshot import bundled_snapshot

    snap = bundled_snapshot("moonshotai/kimi-k2.5")
    base: dict[str, Any] = {"budget_usd": 100, "output_tokens": "60M"}
    with pytest.raises(ConfigError) as info:
        plan_budget(snap, **base, datasets=6, dataset_names=["B3"])
    assert str(info.value) == "dataset_names: 1 names for 6 datasets; give one name per dataset"
    with pytest.raises(ConfigError) as info:
        plan_budget(snap, **base, prompt_tokens_per_request=800)
    assert str(info.value).startswith("prompt_tokens_per_request needs output_tokens_per_request")
    assert str(info.value).endswith("or give prompt_to_output_ratio instead"), info.value
    notes = " ".join(plan_budget(snap, **base).notes)
    said = (
        "give prompt_tokens_per_request with output_tokens_per_request, or prompt_to_output_ratio"
    )
    assert said in notes and "--" not in notes, notes
    names = _budget_cli("--datasets", "6", "--dataset-names", "B3")
    assert "Error: --dataset-names: 1 names for 6 datasets; give one name per dataset" in (
        names.output
    ), names.output
    assert names.exit_code == 2  # a usage error
    prompt = _budget_cli("--prompt-tokens", "800")
    assert "Error: --prompt-tokens needs --output-tokens-per-request" in prompt.output
    assert "or give --prompt-ratio instead" in prompt.output
    plain = _budget_cli()
    assert plain.exit_code == 0, plain.output
    assert "give --prompt-tokens with --output-tokens-per-request, or --prompt-ratio" in (
        plain.stderr
    ), plain.stderr
    assert "prompt_tokens_per_request" not in plain.stderr


def _two_deepinfra(path: Path) -> Path:
    """The bundled snapshot with a second DeepInfra endpoint: the slug names two."""
    doc = json.loads(
        (ROOT / "openrouter_probe" / "data" / "kimi-k2.5.snapshot.json").read_text(encoding="utf-8")
    )
    doc.pop("sha256")
    second = {**doc["data"]["endpoints"][1], "tag": "deepinfra/fp4", "quantization": "fp4"}
    doc["data"]["endpoints"].append(second)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_verify_says_its_keywords_and_the_cli_its_flags(tmp_path: Path) -> None:
    """verify.run (endpoints= or policy=), verify.plan (a slug of two endpoints), verify.stats
    (alpha=, which the CLI's own range check refuses first: shown as the CLI would)."""
    from openrouter_probe.rules.snapshot import load_snapshot
    from openrouter_probe.verify.run import plan_precision_check
    from openrouter_probe.verify.stats import check_statistics

    model = "moonshotai/kimi-k2.5"
    two = _two_deepinfra(tmp_path / "two.json")
    slug = "2 endpoints have that slug (deepinfra/int4, deepinfra/fp4)"
    cases = [
        ({"endpoints": ["chutes"], "policy": str(POLICY)},
         ["--endpoints", "chutes", "--policy", str(POLICY)],
         "give endpoints= or policy=, not both", "give --endpoints or --policy, not both"),
        ({"endpoints": ["deepinfra"]}, ["--endpoints", "deepinfra"],
         f"endpoints='deepinfra': {slug}", f"--endpoints deepinfra: {slug}"),
        ({"endpoints": ["chutes"], "reference": "deepinfra"},
         ["--endpoints", "chutes", "--reference", "deepinfra"],
         f"reference='deepinfra': {slug}", f"--reference deepinfra: {slug}"),
    ]  # fmt: skip
    for options, flags, said, shown in cases:
        with pytest.raises(ConfigError) as info:
            plan_precision_check(model, snapshot=load_snapshot(two), **options)
        assert said in str(info.value) and "--" not in str(info.value), info.value
        result = CliRunner().invoke(
            cli, ["verify", model, "--snapshot", str(two), "--dry-run", *flags]
        )
        assert result.exit_code == 2 and shown in result.output, result.output  # usage errors
        assert said not in result.output
    with pytest.raises(ConfigError) as info:
        check_statistics(alpha=1.5)
    assert str(info.value).startswith("alpha=1.5: must be a number strictly between 0 and 1")
    shown = said_for_cli(info.value, cli.commands["verify"])
    assert shown.startswith("--alpha 1.5: must be a number strictly")
    with pytest.raises(ConfigError, match=r"^n=0: a whole number >= 1$"):
        plan_precision_check(model, snapshot="bundled", n=0)


def test_a_snapshot_the_package_lacks_says_snapshot_and_the_cli_its_flag() -> None:
    """rules.snapshot: the suggested command stays whole, the way out is snapshot=PATH."""
    from openrouter_probe.errors import SnapshotError
    from openrouter_probe.rules.probing import resolve_snapshot
    from openrouter_probe.rules.snapshot import bundled_snapshot

    with pytest.raises(SnapshotError) as info:
        bundled_snapshot("acme/none")
    said = str(info.value)
    assert said.endswith("take one with `orp.probe(MODEL).save(PATH)` and pass snapshot=PATH"), said
    with pytest.raises(SnapshotError, match=r"^give a model, offline=True or snapshot=PATH$"):
        resolve_snapshot(None)
    result = CliRunner().invoke(cli, ["matrix", "acme/none", "--offline"])
    assert result.exit_code == 1
    assert result.output.rstrip().endswith(
        "take one with `openrouter-probe endpoints MODEL --save PATH` and pass --snapshot PATH"
    ), result.output
