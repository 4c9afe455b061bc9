"""The plan of a ``generate`` job: its fields and the run's plan's, ``generate()``'s keywords
and the CLI's options agree, each field declared once; it is frozen, checked once, and never
shows the key."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from openrouter_probe.cli import cli
from openrouter_probe.cli import generate as cli_generate
from openrouter_probe.errors import ConfigError, OptionError, reason
from openrouter_probe.generation.job import generate
from openrouter_probe.generation.plan import (
    DERIVED,
    REASONING_EFFORTS,
    RUN_KEYWORDS,
    GeneratePlan,
)
from openrouter_probe.run.books.turns import TURNS_MODES
from openrouter_probe.run.config import Learned, RunPlan
from openrouter_probe.run.send.batch_plan import BatchOptions
from openrouter_probe.verify.plan import VerifyPlan
from openrouter_probe.verify.run import plan_precision_check, verify_precision

COMMAND = cli.commands["generate"]
FIELDS = [f.name for f in dataclasses.fields(GeneratePlan)]
RUN_FIELDS = [f.name for f in dataclasses.fields(RunPlan)]
KEYWORDS = list(inspect.signature(generate).parameters)
#: What a library caller of ``generate()`` does not set: the run's plan's fields that the
#: command names itself (``command``) or that a test replaces (``lookup``, ``wall_clock``,
#: ``min_tokens_per_s``). What the job learns as it opens is not a field (``run.config.Learned``).
RUN_NOT_KEYWORDS = ("command", "min_tokens_per_s", "lookup", "wall_clock")


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
    """Each keyword of ``generate()`` is a field of the job's plan or of the run's plan it holds
    (``attempts`` and ``response_cache`` set one under another name), in the plan's order."""
    assert DERIVED == ("budget_from_key", "shard_source", "mix", "run")
    own = [name for name in FIELDS if name not in DERIVED]
    assert set(own) <= set(KEYWORDS)
    assert [name for name in KEYWORDS if name in own] == own
    run = [name for name in KEYWORDS if name not in own]
    fed = sorted(RUN_KEYWORDS.get(name, name) for name in run)
    wanted = [name for name in RUN_FIELDS if name not in RUN_NOT_KEYWORDS]
    # attempts or a backoff given whole; the key and the base URL make one connection
    assert fed == sorted([*wanted, "backoff", "connection"])


def test_generates_defaults_are_the_run_plans() -> None:
    """A keyword of ``generate()`` that is a field of the run's plan defaults to the field's
    default, but for those ``RunPlan.resolve`` resolves (``None``: from the environment, the
    default backoff)."""
    keywords = inspect.signature(generate).parameters
    resolved = {"api_key", "base_url", "backoff"}
    compared = []
    for field in dataclasses.fields(RunPlan):
        if field.name not in keywords or field.name in resolved:
            continue
        default = keywords[field.name].default
        if field.default_factory is not dataclasses.MISSING:  # sleep: asyncio.sleep
            assert default == field.default_factory(), field.name
        elif field.default is dataclasses.MISSING:  # out: required by both
            assert default is inspect.Parameter.empty, field.name
            continue
        else:
            assert default == field.default, field.name
        compared.append(field.name)
    assert len(compared) == 13
    for name in resolved:
        assert keywords[name].default is None, name


def test_every_field_is_declared_once() -> None:
    """No name is a field of a job's plan (``generate``'s, ``verify``'s) and of the run's plan it
    holds: a field of the run (out, budget, concurrency, timeouts, connection...) is read from the
    run's plan, never copied into the job's; what the job learns as it opens (the key's cap, the
    weights parsed, the batch settings) is no field of either."""
    for plan in (GeneratePlan, VerifyPlan):
        fields = {f.name: f.type for f in dataclasses.fields(plan)}
        assert not set(fields) & set(RUN_FIELDS), plan.__name__
        assert fields["run"] == "RunPlan", plan.__name__  # held whole
        assert plan.__dataclass_params__.frozen, plan.__name__  # type: ignore[attr-defined]
    learned = {f.name for f in dataclasses.fields(Learned)}
    assert learned == {"cap_usd", "weights", "batch"}
    assert not learned & set(RUN_FIELDS)


def test_the_cli_options_are_the_fields_metadata() -> None:
    """Each field that an option of ``generate`` sets names that option and its help in its
    metadata (``run.config.cli``), the one place they are written: the CLI makes its options
    from them (``cli.options.field_option``)."""
    options = {p.name: p for p in COMMAND.params if isinstance(p, click.Option)}
    by_flag = {flag: p for p in options.values() for flag in p.opts + p.secondary_opts}
    named = 0
    for field in (*dataclasses.fields(GeneratePlan), *dataclasses.fields(RunPlan)):
        meta = field.metadata.get("cli")
        if meta is None:
            continue
        assert meta.flag in by_flag, f"{field.name}: no option {meta.flag}"
        assert by_flag[meta.flag].help == meta.help, field.name
        named += 1
    assert named == 32


@pytest.mark.parametrize(
    "module",
    ["openrouter_probe.cli", "openrouter_probe.generation.plan", "openrouter_probe.run.config"],
)
def test_the_cli_reads_the_plans_fields_without_the_runs_machinery(module: str) -> None:
    """The CLI makes its options from the plans' fields at import: the plans' modules import
    what their checks and the run need only where they run, so ``--help`` stays fast."""
    heavy = ("aiohttp", "pydantic", "requests", "pandas", "openrouter_probe.run.books.turns")
    code = f"import sys, {module}; print(*(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_verifys_options_of_the_run_are_the_fields_flags() -> None:
    """``verify`` sets the run's plan's fields it shares with ``generate`` through the same flags
    (its help says them for a check)."""
    flags = {f.metadata["cli"].flag for f in dataclasses.fields(RunPlan) if "cli" in f.metadata}
    shared = [p for p in cli.commands["verify"].params if set(p.opts) & flags]
    assert sorted(p.name for p in shared if p.name) == ["budget_usd", "concurrency", "out", "quiet"]


def test_verify_precisions_keywords_are_the_checks_plan_and_the_runs() -> None:
    """``verify_precision`` takes the check's plan's keywords (``plan_precision_check``: no
    output, no run) and the run's plan's fields (``attempts`` sets the backoff): the one
    ``RunPlan`` of the check is resolved from them, defaulting as the fields do but for
    ``concurrency`` (a check's 32)."""
    keywords = inspect.signature(verify_precision).parameters
    planned = set(inspect.signature(plan_precision_check).parameters)
    fields = {f.name: f for f in dataclasses.fields(RunPlan)}
    run = [name for name in keywords if name not in planned and name != "on_plan"]
    fed = sorted(RUN_KEYWORDS.get(name, name) for name in run)
    wanted = ["out", "concurrency", "read_timeout_s", "handle_signals", "progress", "sleep"]
    assert fed == sorted([*wanted, "backoff", "backoff"])  # attempts, or a backoff given whole
    # a plan only priced is capped by ``budget_usd``; the check's run is given whole (``run``)
    assert planned & set(fields) == {"budget_usd"} and "run" in planned
    for name in ("read_timeout_s", "handle_signals", "progress"):
        assert keywords[name].default == fields[name].default, name
    assert keywords["sleep"].default is fields["sleep"].default_factory()
    assert (keywords["concurrency"].default, fields["concurrency"].default) == (32, 256)


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
        resolved = getattr(
            plan.run if param.name in [*RUN_FIELDS, "attempts"] else plan, param.name
        )
        assert got in (wanted, resolved), param.name
        compared += 1
    assert compared == 28  # offline among them (review of 0.3); the mixes, mix_seed, samples
    assert plan.run.attempts == 6 and plan.run.concurrency == 256 and plan.max_tokens == 4096


def test_the_cli_choices_are_the_plans() -> None:
    choices = {
        p.name: list(p.type.choices) for p in COMMAND.params if isinstance(p.type, click.Choice)
    }
    assert choices["reasoning_effort"] == list(REASONING_EFFORTS)
    assert choices["turns"] == list(TURNS_MODES)


def test_the_plan_is_frozen_checked_and_keeps_the_key_out_of_its_repr(tmp_path: Path) -> None:
    plan = _plan(tmp_path, budget_usd="2.5", target_tokens="10k", shard="1/4",
                 reasoning_effort="high", redo_truncated=True)  # fmt: skip
    assert (plan.run.budget_usd, plan.run.target_tokens, plan.shard, plan.shards) == (
        __import__("decimal").Decimal("2.5"),
        10_000,
        (1, 4),
        4,
    )
    assert plan.reasoning == {"effort": "high"} and plan.redo == ("truncated",)
    assert plan.parameters == {"max_tokens", "reasoning"}
    assert "sk-test" not in repr(plan) and plan.run.connection.api_key == "sk-test"
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.max_tokens = 1  # type: ignore[misc]


def test_batch_mode_is_planned_whole(tmp_path: Path) -> None:
    plan = _plan(tmp_path, batch=True)
    assert plan.batch == BatchOptions()
    assert plan.run.drain_timeout_s == 1.0
    assert plan.run.backoff.timeout_s == 3 * 24 * 3600.0
    assert _plan(tmp_path).batch is None
    with pytest.raises(OptionError) as refused:
        _plan(tmp_path, batch=BatchOptions(size=10), stream=True)
    assert "exclude each other" in str(refused.value)


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
