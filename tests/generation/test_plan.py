"""The plan of a ``generate`` job: its fields, ``generate()``'s keywords and the CLI's options
agree; it is frozen, checked once, and never shows the key."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import click
import pytest

from openrouter_probe.cli import cli
from openrouter_probe.cli import generate as cli_generate
from openrouter_probe.errors import ConfigError, OptionError, reason
from openrouter_probe.generation.job import generate
from openrouter_probe.generation.plan import DERIVED, REASONING_EFFORTS, GeneratePlan
from openrouter_probe.run.books.turns import TURNS_MODES
from openrouter_probe.run.send.batch_plan import BatchOptions

COMMAND = cli.commands["generate"]
FIELDS = [f.name for f in dataclasses.fields(GeneratePlan)]
KEYWORDS = list(inspect.signature(generate).parameters)


def _default(param: click.Parameter) -> Any:
    """An option's default as the command gets it (click 8.3 marks "none given" apart)."""
    value = param.default
    if value is None or type(value).__name__ == "Sentinel":
        return False if getattr(param, "is_flag", False) else None
    return value


def _plan(tmp_path: Path, **given: Any) -> GeneratePlan:
    """The plan of ``generate()`` with its own defaults but for ``given``."""
    keywords = {
        name: p.default
        for name, p in inspect.signature(generate).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    keywords.update(policy="p.yaml", out=tmp_path / "out.jsonl", api_key="sk-test")
    keywords.update(given)
    return GeneratePlan.of("prompts.jsonl", **keywords)


def test_generate_takes_exactly_the_plans_fields() -> None:
    assert DERIVED == ("budget_from_key", "shard_source", "mix", "options")
    assert [name for name in FIELDS if name not in DERIVED] == KEYWORDS


def test_every_cli_option_sets_a_field_of_the_plan() -> None:
    names = [p.name for p in COMMAND.params]
    for name in names:
        if name in cli_generate.CLI_ONLY:
            continue
        field = cli_generate.FEEDS.get(name, name)
        assert field in KEYWORDS, f"--{name}: no field {field!r} in the plan"
    assert not set(cli_generate.FEEDS) & set(KEYWORDS) - {"batch"}  # a field is fed as itself
    fed = {cli_generate.FEEDS.get(name, name) for name in names}
    unset = [name for name in KEYWORDS if name not in fed]
    assert unset == list(cli_generate.NOT_OPTIONS)


def test_the_cli_defaults_are_generates(tmp_path: Path) -> None:
    """An option named as a field defaults to ``generate()``'s default, or to the value the
    plan resolves that default to (``attempts=None`` is the default backoff's 6 tries)."""
    defaults = inspect.signature(generate).parameters
    plan = _plan(tmp_path)
    compared = 0
    for param in COMMAND.params:
        if param.name not in defaults or param.name in ("prompts", "policy", "out"):
            continue
        wanted = defaults[param.name].default
        got = _default(param)
        assert got in (wanted, getattr(plan, param.name)), param.name
        compared += 1
    assert compared == 27  # offline among them (review of 0.3); the mixes, mix_seed, samples
    assert plan.attempts == 6 and plan.concurrency == 256 and plan.max_tokens == 4096


def test_the_cli_choices_are_the_plans() -> None:
    choices = {
        p.name: list(p.type.choices) for p in COMMAND.params if isinstance(p.type, click.Choice)
    }
    assert choices["reasoning_effort"] == list(REASONING_EFFORTS)
    assert choices["turns"] == list(TURNS_MODES)


def test_the_plan_is_frozen_checked_and_keeps_the_key_out_of_its_repr(tmp_path: Path) -> None:
    plan = _plan(tmp_path, budget_usd="2.5", target_tokens="10k", shard="1/4",
                 reasoning_effort="high", redo_truncated=True)  # fmt: skip
    assert (plan.budget_usd, plan.target_tokens, plan.shard, plan.shards) == (
        __import__("decimal").Decimal("2.5"),
        10_000,
        (1, 4),
        4,
    )
    assert plan.reasoning == {"effort": "high"} and plan.redo == ("truncated",)
    assert plan.parameters == {"max_tokens", "reasoning"}
    assert plan.options.budget_usd == plan.budget_usd and plan.options.target_tokens == 10_000
    assert "sk-test" not in repr(plan) and plan.api_key == "sk-test"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.max_tokens = 1  # type: ignore[misc]


def test_batch_mode_is_planned_whole(tmp_path: Path) -> None:
    plan = _plan(tmp_path, batch=True)
    assert plan.batch == BatchOptions()
    assert plan.drain_timeout_s == plan.options.drain_timeout_s == 1.0
    assert plan.backoff.timeout_s == 3 * 24 * 3600.0
    assert _plan(tmp_path).batch is None
    with pytest.raises(OptionError) as refused:
        _plan(tmp_path, batch=BatchOptions(size=10), stream=True)
    assert "exclude each other" in str(refused.value)


def test_job_options_resolve_takes_every_field_once() -> None:
    """``JobOptions.resolve`` passes ``_Fields`` on as they are and resolves the rest itself:
    together they are the options' fields, none twice."""
    from openrouter_probe.run.config import JobOptions, _Fields

    fields = {f.name for f in dataclasses.fields(JobOptions)}
    resolved = set(inspect.signature(JobOptions.resolve).parameters) & fields
    assert resolved == {"command", "out", "budget_usd", "concurrency", "api_key", "base_url",
                        "backoff"}  # fmt: skip
    assert set(_Fields.__annotations__) == fields - resolved


def test_the_journal_header_names_only_a_shard_and_a_key_hash(tmp_path: Path) -> None:
    given = {"shard": "1/4", "key_hash": "abc123"}
    assert _plan(tmp_path, journal_header=given).journal_header == given
    with pytest.raises(ConfigError) as caught:
        _plan(tmp_path, journal_header={"policy": "other.yaml"})
    assert reason(caught.value).code == "journal-header-field"
    assert str(caught.value) == (
        "journal_header: policy='other.yaml' refused: it names only 'shard' (i/n) and "
        "'key_hash' (a key's hash), each a text"
    )
    with pytest.raises(ConfigError) as caught:
        _plan(tmp_path, journal_header={"shard": "1/4"}, shard="2/4")
    assert str(caught.value) == "journal_header names shard 1/4, shard='2/4' another: give one"
    with pytest.raises(ConfigError) as caught:
        _plan(tmp_path, journal_header={"shard": "5/4"})
    assert reason(caught.value).code == "shard-range"
