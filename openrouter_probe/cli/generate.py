"""``openrouter-probe generate``: run the job (``cli.outputs``: check who served it, export it)."""

from __future__ import annotations

import functools
import json
import sys
from typing import TYPE_CHECKING, Any

import click

from openrouter_probe.cli._common import (
    budget_option,
    check_snapshot_options,
    checked_by,
    cli,
    note,
    term_of,
    warn_unused,
)
from openrouter_probe.cli.options import (
    AliasedOption,
    field_option,
    format_option,
    out_option,
)
from openrouter_probe.generation.plan import REASONING_EFFORTS, GeneratePlan
from openrouter_probe.rules.quantities import parse_token_count
from openrouter_probe.run.config import DEFAULT_ATTEMPTS, RunPlan
from openrouter_probe.run.report import render_result

if TYPE_CHECKING:
    from openrouter_probe.run.send.batch_plan import BatchOptions

#: The options that say how a single source is read: ``SourceOptions.of``'s keywords.
_SOURCE_OPTIONS = ("prompt_field", "id_field", "limit", "sample", "seed", "config", "split",
                   "row_params", "strict")  # fmt: skip


_BATCH_ONLY = ("batch_size", "batch_live", "batch_poll", "abandon")
#: ``run.send.batch_plan``'s bounds (MAX_BATCH_LINES, DEFAULT_LIVE_BATCHES, MAX_LIVE_BATCHES,
#: MIN_POLL_S, MAX_POLL_S), not imported here so that ``--help`` stays fast; a test holds them equal.
_MAX_LINES, _LIVE, _MAX_LIVE, _MIN_POLL_S, _MAX_POLL_S = 5000, 4, 100, 1.0, 3600.0


#: The ``generate`` options that set a field of the job's plan (``generation.plan.GeneratePlan``,
#: whose fields are ``generate()``'s keywords) under another name; every other option is named
#: as the field it sets, but for ``CLI_ONLY``. ``tests/generation/test_plan.py`` holds them so.
FEEDS = {
    "key_file": "api_key",
    "no_response_cache": "response_cache",
    "quiet": "progress",
    **{name: "source" for name in _SOURCE_OPTIONS},
    "batch": "batch",
    **{name: "batch" for name in _BATCH_ONLY},
    "no_budget": "budget_usd",
}
#: The options of the command alone: how the summary is written (``--format``).
CLI_ONLY = ("fmt",)
#: The plan's fields no option sets: the command gives them itself (``handle_signals=True``),
#: leaves them to the environment (``OPENROUTER_BASE_URL``), or to a library caller (a test's
#: sender, waits, clock and backoff).
NOT_OPTIONS = (
    "base_url",
    "handle_signals",
    "send",
    "sleep",
    "clock",
    "backoff",
    "journal_header",
)


def _batching(batch: bool, given: dict[str, Any]) -> BatchOptions | bool:
    """What ``--batch`` and ``given`` (``--batch-size``, ``--batch-live``, ``--batch-poll``,
    ``--abandon``) ask for: ``False``, or the ``BatchOptions``."""
    asked = {name: value for name, value in given.items() if value not in (None, False)}
    if not batch and asked:
        flags = ", ".join("--" + name.replace("_", "-") for name in asked)
        raise click.UsageError(
            "--batch-size, --batch-live, --batch-poll and --abandon go with --batch; add "
            f"--batch (given: {flags})"
        )
    if not batch:
        return False
    from openrouter_probe.run.send.batch_plan import BatchOptions

    names = {"batch_size": "size", "batch_live": "live", "batch_poll": "poll_s"}
    chosen = {names[k]: v for k, v in given.items() if k in names and v is not None}
    return BatchOptions(**chosen, abandon=given["abandon"])


def _shard(text: str) -> object:
    from openrouter_probe.generation.prompts import parse_shard

    return parse_shard(text)


def _weights_syntax(text: str) -> object:
    """``--weights`` read as the run reads it, each dataset named taken as present (the prompts,
    read later, say which datasets there are)."""
    from openrouter_probe.generation.opening import parse_weights

    return parse_weights(text, [part.partition("=")[0].strip() for part in text.split(",")])


@cli.command(keywords={"size": "batch_size", "live": "batch_live", "poll_s": "batch_poll"})
@click.argument("prompts", metavar="PROMPTS")
@field_option(
    GeneratePlan, "policy", required=True, type=click.Path(exists=True, dir_okay=False),
    metavar="POLICY",
)  # fmt: skip
@out_option(required=True)
@budget_option()
@click.option("--no-budget", is_flag=True, help="Run with no spend cap at all (not advised).")
@field_option(RunPlan, "concurrency", type=click.IntRange(min=1), metavar="N")
@field_option(
    GeneratePlan, "max_tokens", type=click.IntRange(min=1), default=4096, show_default=True
)
@field_option(
    RunPlan, "target_tokens", metavar="TOKENS",
    callback=checked_by(functools.partial(parse_token_count, what="--target-tokens")),
)  # fmt: skip
@field_option(RunPlan, "pilot", type=click.IntRange(min=1), metavar="N")
@field_option(GeneratePlan, "stream", negatable=True, default=False, show_default=True)
@field_option(GeneratePlan, "temperature", type=click.FloatRange(min=0, max=2))
@field_option(GeneratePlan, "reasoning_effort", type=click.Choice(REASONING_EFFORTS))
@field_option(GeneratePlan, "reasoning_max_tokens", type=click.IntRange(min=1))
@field_option(GeneratePlan, "temperature_mix", metavar="T,T|T=W,...")
@field_option(GeneratePlan, "reasoning_effort_mix", metavar="E,E|E=W,...")
@field_option(GeneratePlan, "thinking_mix", metavar="on=W,off=W")
@field_option(GeneratePlan, "mix_seed", type=int, default=0, show_default=True)
@field_option(
    GeneratePlan, "samples", type=click.IntRange(min=1), default=1, show_default=True, metavar="N"
)
@field_option(GeneratePlan, "dry_run", is_flag=True)
@field_option(GeneratePlan, "shard", metavar="i/n|auto", callback=checked_by(_shard))
@click.option(
    "--key-file",
    type=click.Path(exists=True, dir_okay=False),
    metavar="KEYS.json",
    help="Spend through this shard's own key from `keys create` (with --shard i/n or auto); "
    "OpenRouter stops the shard at the key's limit.",
)
@field_option(GeneratePlan, "weights", metavar="DS=W,...", callback=checked_by(_weights_syntax))
@field_option(
    GeneratePlan, "turns", type=click.Choice(["last", "all"]), default="last", show_default=True
)
@click.option(
    "--prompt-field",
    metavar="FIELD",
    help="The field that holds each row's prompt (a string) or conversation, e.g. question.",
)
@click.option("--id-field", metavar="FIELD", help="The field that holds each row's id.")
@click.option(
    "--limit", type=click.IntRange(min=1), metavar="N", help="Take the first N rows only."
)
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    metavar="N",
    help="Take N rows picked by --sample-seed and each row id: the same rows on every rerun.",
)
@click.option(
    "--sample-seed",
    "seed",
    cls=AliasedOption,
    aliases=("--seed",),
    type=int,
    default=0,
    show_default=True,
    help="The seed of --sample (the --*-mix draws: --mix-seed).",
)
@click.option("--config", metavar="NAME", help="hf: sources: the dataset config.")
@click.option(
    "--split", metavar="NAME", help="hf: sources and datasets folders: the split (train)."
)
@click.option(
    "--row-params",
    metavar="COL,...",
    help="Columns sent as request parameters of their row, e.g. seed,temperature (no "
    "other column is ever sent).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse the prompts if a row cannot be read (default: skip it, named).",
)
@field_option(GeneratePlan, "redo_failed", is_flag=True)
@field_option(GeneratePlan, "redo_truncated", is_flag=True)
@field_option(RunPlan, "lower_max_tokens", is_flag=True)
@field_option(RunPlan, "response_cache_ttl_s", "no_response_cache", is_flag=True)
@field_option(GeneratePlan, "snapshot", metavar="bundled|PATH")
@field_option(GeneratePlan, "offline", is_flag=True)
@field_option(
    RunPlan, "backoff", "attempts", type=click.IntRange(min=1), default=DEFAULT_ATTEMPTS,
    show_default=True,
)  # fmt: skip
@field_option(RunPlan, "read_timeout_s", type=click.FloatRange(min=0, min_open=True))
@field_option(RunPlan, "max_wait_s", type=click.FloatRange(min=0))
@field_option(RunPlan, "drain_timeout_s", type=click.FloatRange(min=0, min_open=True))
@field_option(GeneratePlan, "batch", is_flag=True)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1, max=_MAX_LINES),
    default=None,
    help="With --batch: lines per batch at most (default and OpenRouter's limit: 5000).",
)
@click.option(
    "--batch-live",
    type=click.IntRange(min=1, max=_MAX_LIVE),
    default=None,
    help=f"With --batch: batches running at once at most (default {_LIVE}; "
    "each may take 24 h; the rest wait, reserved, for one to end).",
)
@click.option(
    "--batch-poll",
    type=click.FloatRange(min=_MIN_POLL_S, max=_MAX_POLL_S),
    default=None,
    metavar="SECONDS",
    help="With --batch: seconds before the first poll of a batch (default 15; it grows "
    "by half to 2 minutes, or to this if longer).",
)
@click.option(
    "--abandon",
    is_flag=True,
    help="With --batch: forget the batches an earlier run left running (there is no "
    "cancel: what completes is still billed) and send their rows again.",
)
@field_option(RunPlan, "progress", "quiet", is_flag=True)
@format_option()
def generate(
    prompts: str,
    no_budget: bool,
    key_file: str | None,
    no_response_cache: bool,
    quiet: bool,
    fmt: str,
    **keywords: Any,
) -> None:
    """Run PROMPTS through the policy's providers into --out, within --budget-usd.

    PROMPTS: JSONL, JSON, Parquet, a datasets folder, hf:OWNER/NAME or a manifest (.yaml), in the
    shapes of SpecForge, ShareGPT, UltraChat... (docs/inputs.md). Set OPENROUTER_API_KEY (and
    OPENROUTER_BASE_URL for another server). Summary on stdout; progress and warnings on stderr.
    Exit 0: ended as asked (done, budget, target, pilot); 1: stopped short; 130: interrupted."""
    import asyncio

    from openrouter_probe.generation import generate as run_generate
    from openrouter_probe.generation.manifest import SourceOptions

    # ``keywords``: the options named as generate()'s keywords (``FEEDS``: the others)
    reading = {name: keywords.pop(name) for name in _SOURCE_OPTIONS}
    batching = _batching(keywords.pop("batch"), {name: keywords.pop(name) for name in _BATCH_ONLY})
    if reading["sample"] is None:
        warn_unused(
            "seed", "picks the rows of --sample, and there is no --sample (the mixes: --mix-seed)"
        )
    if all(
        keywords[name] is None
        for name in ("temperature_mix", "reasoning_effort_mix", "thinking_mix")
    ):
        warn_unused("mix_seed", "draws the --*-mix values, and no mix is given")
    offline, dry_run, shard = keywords["offline"], keywords["dry_run"], keywords["shard"]
    _check_not_swapped(prompts, keywords["policy"], keywords["out"])
    if no_budget and keywords["budget_usd"] is not None:
        raise click.UsageError("give --budget-usd or --no-budget, not both")
    if keywords["budget_usd"] is None and not no_budget:
        # the key's remaining limit, read before sending; none: exit 2
        keywords["budget_usd"] = "key"
    check_snapshot_options(offline, keywords["snapshot"])
    if offline and not dry_run:
        # --offline: no network, no spending, as in verify: the dry run only (and no key read)
        note(
            "generate: --offline sends nothing, so this is the dry run only; to send with the "
            "cap priced on the bundled snapshot, give --snapshot bundled instead"
        )
    summary = asyncio.run(
        run_generate(
            prompts,
            **keywords,
            **_shard_key(key_file, shard),
            source=SourceOptions.of(**reading),
            response_cache=not no_response_cache,
            batch=batching,
            handle_signals=True,
            progress=not quiet and not dry_run,
        )
    )
    if key_file is not None and shard:
        from openrouter_probe.generation.keyfile import name_spent_key

        summary = name_spent_key(summary, key_file, shard)
    _show_summary(summary, fmt)
    sys.exit(summary.exit_code)


def _shard_key(key_file: str | None, shard: str | None) -> dict[str, Any]:
    """``--key-file``: ``generate``'s ``api_key`` (this shard's key's secret) and
    ``journal_header`` (its hash); none without (the key of OPENROUTER_API_KEY)."""
    if key_file is None:
        return {}
    if not shard:
        raise click.UsageError(
            "--key-file holds one key a shard: give --shard i/n or --shard auto with it"
        )
    from openrouter_probe.generation.keyfile import read_key_file, shard_key
    from openrouter_probe.generation.prompts import parse_shard

    key = shard_key(read_key_file(key_file), parse_shard(shard))
    return {"api_key": key.secret, "journal_header": {"key_hash": key.hash}}


def _show_summary(summary: Any, fmt: str) -> None:
    """The run's summary on stdout: JSON (every skipped row in ``skipped_rows``) or text (the
    warnings name the first 10)."""
    if fmt == "json":
        click.echo(json.dumps(summary.to_dict(), indent=2))
        return
    click.echo(render_result(summary, term_of(click.get_current_context().command)))
    if len(summary.skipped_rows) > 10:
        note(f"--format json lists all {len(summary.skipped_rows)} skipped rows (skipped_rows)")


def _kind_of(path: str) -> str | None:
    """What a file given to ``generate`` is, read from its start: ``"a compiled policy"`` or
    ``"a policy spec"`` (YAML), ``"a prompts file"`` (JSON lines, Parquet), or ``None``."""
    from pathlib import Path

    file = Path(path)
    if not file.is_file():
        return None
    if file.suffix.lower() == ".parquet":
        return "a prompts file"
    with file.open("rb") as handle:
        head = handle.read(1 << 20)
    first = next((line for line in head.splitlines() if line.strip()), b"").strip()
    if first.startswith(b"{"):
        try:
            return "a prompts file" if isinstance(json.loads(first), dict) else None
        except ValueError:
            return None
    if file.suffix.lower() not in (".yaml", ".yml") or len(head) == 1 << 20:
        return None
    import yaml

    from openrouter_probe.files import load_yaml
    from openrouter_probe.policy.spec import document_kind

    try:
        kind = document_kind(load_yaml(head.decode("utf-8", errors="replace")))
    except yaml.YAMLError:
        return None
    return {"compiled": "a compiled policy", "spec": "a policy spec"}.get(kind)


def _check_not_swapped(prompts: str, policy: str, out: str) -> None:
    """A policy given as PROMPTS, or prompts given as --policy: one line with the command as it
    should be, before either is read (they gave a page of "not JSON" or a YAML parse error)."""
    as_prompts, as_policy = _kind_of(prompts), _kind_of(policy)
    policy_given = as_prompts in ("a compiled policy", "a policy spec")
    if not policy_given and as_policy != "a prompts file":
        return
    right_prompts = prompts if as_prompts == "a prompts file" else "PROMPTS.jsonl"
    right_policy = policy if as_policy in ("a compiled policy", None) else "POLICY.yaml"
    if policy_given and as_policy == "a prompts file":
        said, right_prompts, right_policy = "swap them", policy, prompts
        what = f"{prompts} is {as_prompts} and {policy} {as_policy}"
    elif policy_given:
        said = "give the prompts (JSON lines) first"
        what = f"PROMPTS {prompts} is {as_prompts}, not prompts"
        if prompts != policy and as_prompts == "a compiled policy" and as_policy is None:
            right_policy = prompts
    else:
        said = "give a compiled policy"
        what = f"--policy {policy} is {as_policy}, not a policy"
    if right_policy.endswith((".spec.yaml", ".spec.yml")):
        right_policy = "POLICY.yaml"  # compile it first: the spec/policy swap says how
    raise click.UsageError(
        f"{what}; {said}: `openrouter-probe generate {right_prompts} --policy {right_policy} "
        f"-o {out}`"
    )
