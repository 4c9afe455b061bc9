"""The plan of a ``generate`` job (``GeneratePlan``): the caller's arguments, checked once.

``GeneratePlan.of`` takes ``generate()``'s keywords, every one of them, and refuses what no run
could use (a temperature outside OpenRouter's range, a reasoning budget that fills
``max_tokens``, ``stream`` with ``batch``, ...) before anything is read or sent; it resolves the
paid run's options (``run.config.JobOptions``: the key and base URL from the environment, the
budget, the output) once, as batch mode wants them. The plan is frozen: what the run does next
(read the prompts, check the policy, send) reads it and never changes it.

The plan's fields are declared once, here. ``generate()``'s keywords are exactly the fields
that are not ``DERIVED``, and the CLI's ``generate`` options each feed one field or are named
in ``cli.generate.CLI_ONLY``: ``tests/generation/test_plan.py`` holds the three in agreement.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from openrouter_probe.api.backoff import Backoff
from openrouter_probe.api.completion import RESPONSE_CACHE_TTL_S
from openrouter_probe.errors import ConfigError, Message, OptionError, Shown
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.generation.prompts import parse_shard
from openrouter_probe.rules.quantities import parse_token_count, whole_number
from openrouter_probe.rules.sampling_mix import SamplingMix
from openrouter_probe.run.books.turns import TURNS_MODES
from openrouter_probe.run.config import JobOptions, Progress
from openrouter_probe.run.send.batch_plan import BatchOptions
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.send.sender import Sender

__all__ = ["DERIVED", "KEY_BUDGET", "REASONING_EFFORTS", "GeneratePlan", "parse_weights"]

REASONING_EFFORTS = ("max", "xhigh", "high", "medium", "low", "minimal", "none")
#: ``budget_usd="key"``: the cap is what the key's blocking budget has left (``GET /key``); a key
#: without a limit refuses the paid run (the CLI's default without ``--budget-usd``).
KEY_BUDGET = "key"
#: How long a row's retries may run in batch mode: a batch may take 24 h, and a retry another.
_BATCH_RETRY_WINDOW_S = 3 * 24 * 3600.0
#: The metadata of a field the plan derives (not a keyword of ``generate()``).
_DERIVED = {"derived": True}


def parse_weights(
    weights: str | Mapping[str, float] | None, datasets: list[str]
) -> dict[str, float]:
    """``--weights B3=2,B4=1`` (or a mapping) checked against the prompts' datasets: each share
    of the cap is its weight over the sum (a dataset not named weighs 1)."""
    if weights is None:
        return {}
    if isinstance(weights, str):
        pairs: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in weights.split(","))):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(
                    Message(
                        "weights-form",
                        "{weights=}: give DATASET=WEIGHT, e.g. B3=2,B4=1",
                        weights=item,
                    )
                )
            pairs[name.strip()] = value.strip()
    else:
        pairs = dict(weights)
    out: dict[str, float] = {}
    for name, value in pairs.items():
        if name not in datasets:
            known = (", ".join(datasets) or "none").replace("{", "{{").replace("}", "}}")
            raise OptionError(
                f"{{weights=}}: no such dataset in the prompts (they are: {known})", weights=name
            )
        try:
            weight = float(value)
        except (TypeError, ValueError):
            weight = -1.0
        if not weight > 0 or weight == float("inf"):
            raise ConfigError(
                Message(
                    "weight-not-positive",
                    "{weights=}: a weight is a number above 0, e.g. 2",
                    weights=Shown(f"{name}={value}"),
                )
            )
        out[name] = weight
    return out


@dataclass(frozen=True, kw_only=True)
class GeneratePlan:
    """What a ``generate`` job was asked, checked (see the module); build it with :meth:`of`.

    Each field is ``generate()``'s keyword of the same name, as the run uses it: ``out`` a
    path, ``budget_usd`` a ``Decimal``, ``target_tokens`` a count, ``shard`` a pair (``"auto"``
    resolved from the launcher), ``batch`` a ``BatchOptions`` or ``None``, ``api_key``,
    ``base_url``, ``attempts`` and ``backoff`` as resolved. Derived: ``shard_source`` (the
    launcher's variables that gave the shard), ``budget_from_key`` (``budget_usd="key"``: the
    cap is read from ``GET /key`` before a paid run) and ``options``, the paid run's
    ``JobOptions``.
    """

    prompts: str | Path
    policy: str | Path
    out: Path
    budget_usd: Decimal | None
    concurrency: int
    max_tokens: int
    target_tokens: int | None
    stream: bool
    temperature: float | None
    reasoning_effort: str | None
    reasoning_max_tokens: int | None
    dry_run: bool
    shard: tuple[int, int] | None
    redo_failed: bool
    redo_truncated: bool
    lower_max_tokens: bool
    weights: str | Mapping[str, float] | None
    turns: str
    source: SourceOptions | None
    max_wait_s: float
    snapshot: Any
    offline: bool
    api_key: str = field(repr=False)  # never in a repr, a log, a traceback
    base_url: str
    attempts: int
    read_timeout_s: float
    drain_timeout_s: float
    handle_signals: bool
    progress: bool | Progress
    send: Sender | None
    sleep: Callable[[float], Awaitable[None]]
    clock: Callable[[], float]
    backoff: Backoff
    batch: BatchOptions | None
    response_cache: bool
    temperature_mix: str | Mapping[str, float] | None
    reasoning_effort_mix: str | Mapping[str, float] | None
    thinking_mix: str | Mapping[str, float] | None
    mix_seed: int
    samples: int
    journal_header: Mapping[str, str] | None
    budget_from_key: bool = field(default=False, metadata=_DERIVED)
    shard_source: str = field(default="", metadata=_DERIVED)
    #: the sampling mix the three ``*_mix`` keywords and ``mix_seed`` make (``None``: none given)
    mix: SamplingMix | None = field(default=None, metadata=_DERIVED)
    options: JobOptions = field(metadata=_DERIVED, repr=False)

    @classmethod
    def of(cls, prompts: str | Path, **keywords: Any) -> GeneratePlan:
        """The plan of ``generate(prompts, **keywords)``, every keyword given (``generate``
        passes its own): checked, the run's options resolved. Raises ``ConfigError`` (and its
        ``OptionError``) for what no run could use."""
        k = keywords
        if k["offline"]:  # no network, no spending: the dry run on the bundled snapshot
            k = {**k, "dry_run": True, "snapshot": k["snapshot"] or "bundled"}
        from_key = isinstance(k["budget_usd"], str) and k["budget_usd"].strip() == KEY_BUDGET
        if from_key:  # the key's remaining limit, read before a paid run sends (or refused)
            k = {**k, "budget_usd": None}
        reasoning = _reasoning(k["reasoning_effort"], k["reasoning_max_tokens"])
        _check_turns(k["turns"])
        max_tokens = whole_number(k["max_tokens"], "max_tokens")
        _check_sampling(max_tokens, k["temperature"], reasoning)
        mix = _mix(k, reasoning)
        shard, shard_source = _shard(k["shard"])
        target = k["target_tokens"]
        if target is not None:
            target = parse_token_count(target, what="target_tokens")
        options = JobOptions.resolve(
            command="generate",
            out=k["out"],
            inputs=(prompts, k["policy"]),
            budget_usd=k["budget_usd"],
            concurrency=k["concurrency"],
            api_key=k["api_key"],
            base_url=k["base_url"],
            need_key=not k["dry_run"],
            attempts=k["attempts"],
            read_timeout_s=k["read_timeout_s"],
            drain_timeout_s=k["drain_timeout_s"],
            handle_signals=k["handle_signals"],
            progress=k["progress"],
            send=k["send"],
            sleep=k["sleep"],
            clock=k["clock"],
            backoff=k["backoff"],
            max_wait_s=k["max_wait_s"],
            target_tokens=target,
            lower_max_tokens=k["lower_max_tokens"],
            response_cache_ttl_s=RESPONSE_CACHE_TTL_S if k["response_cache"] else None,
        )
        batch, options = _batch_mode(k["stream"], options, k["batch"])
        _check_journal_header(k["journal_header"], shard)
        given = {name: k[name] for name in _PASSED}
        return cls(
            **given,
            prompts=prompts,
            out=options.out,
            budget_usd=options.budget_usd,
            concurrency=options.concurrency,
            max_tokens=max_tokens,
            target_tokens=target,
            shard=shard,
            api_key=options.api_key,
            base_url=options.base_url,
            attempts=options.attempts,
            drain_timeout_s=options.drain_timeout_s,
            backoff=options.backoff,
            batch=batch,
            budget_from_key=from_key,
            shard_source=shard_source,
            options=options,
            mix=mix,
            mix_seed=k["mix_seed"],
            samples=whole_number(k["samples"], "samples"),
        )

    @property
    def reasoning(self) -> dict[str, Any] | None:
        """The ``reasoning`` object of every request (``None``: none sent)."""
        if self.reasoning_effort is not None:
            return {"effort": self.reasoning_effort}
        if self.reasoning_max_tokens is not None:
            return {"max_tokens": self.reasoning_max_tokens}
        return None

    @property
    def redo(self) -> tuple[str, ...]:
        """The statuses sent again: ``"failed"``, ``"truncated"``, both or none."""
        return ("failed",) * self.redo_failed + ("truncated",) * self.redo_truncated

    @property
    def shards(self) -> int | None:
        """How many shards the prompts are split into (``None``: not sharded)."""
        return None if self.shard is None else self.shard[1]

    def request_builder(
        self, model: str, provider_raw: Any, *, identity: bool = False, job: str = ""
    ) -> RequestBuilder:
        """What every request of the run shares: the policy's model and provider block, byte
        for byte, the sampling the run asked for and what the model's card fixes
        (``rules.sampling``), each row's draw of the mix (refused, ``OptionError``, where it
        breaks what the card fixes); ``identity``: each row's ``session_id`` (the response
        cache's rows kept apart: ``response_cache``), of the output's ``job``."""
        from openrouter_probe.rules.sampling import sampling_advice

        advice = sampling_advice(model)
        if self.mix is not None:
            self.mix.check(model, advice, self.reasoning)  # a mix the model's card forbids
        return RequestBuilder(
            model=model,
            provider_json=json.dumps(provider_raw, ensure_ascii=False, separators=(",", ":")),
            max_tokens=self.max_tokens,
            stream=self.stream,
            temperature=self.temperature,
            reasoning=self.reasoning,
            advice=advice,
            identity=identity,
            mix=self.mix,
            job=job,
        )

    @property
    def parameters(self) -> set[str]:
        """The request parameters an endpoint must support (``require_parameters``)."""
        named = {"max_tokens"} | ({"temperature"} if self.temperature is not None else set())
        return named | ({"reasoning"} if self.reasoning is not None else set())


#: The fields ``of`` passes on as the caller gave them (checked on the way).
_PASSED = (
    "policy",
    "stream",
    "temperature",
    "reasoning_effort",
    "reasoning_max_tokens",
    "dry_run",
    "redo_failed",
    "redo_truncated",
    "lower_max_tokens",
    "weights",
    "turns",
    "source",
    "max_wait_s",
    "snapshot",
    "offline",
    "read_timeout_s",
    "handle_signals",
    "progress",
    "send",
    "sleep",
    "clock",
    "response_cache",
    "temperature_mix",
    "reasoning_effort_mix",
    "thinking_mix",
    "journal_header",
)
#: The plan's fields that are not ``generate()``'s keywords (the plan derives them).
DERIVED = tuple(f.name for f in dataclasses.fields(GeneratePlan) if f.metadata.get("derived"))


def _mix(k: Mapping[str, Any], reasoning: dict[str, Any] | None) -> SamplingMix | None:
    """The run's sampling mix, checked against the fixed settings it would contradict: a mix and
    the one value of the same parameter exclude each other."""
    both = [
        (mix, fixed)
        for mix, fixed in (
            ("temperature_mix", "temperature"),
            ("reasoning_effort_mix", "reasoning_effort"),
            ("reasoning_effort_mix", "reasoning_max_tokens"),
        )
        if k[mix] is not None and k[fixed] is not None
    ]
    if both:
        mix, fixed = both[0]
        raise OptionError(
            f"give {{{mix}}} or {{{fixed}}}, not both: the mix draws the value of each row",
            **{mix: Shown(str(k[mix])), fixed: k[fixed]},
        )
    if k["thinking_mix"] is not None and (reasoning or {}).get("effort") == "none":
        raise OptionError(
            "{thinking_mix=} draws thinking on for some rows and {reasoning_effort=none} turns it "
            "off for every row: give one of them",
            thinking_mix=Shown(str(k["thinking_mix"])),
        )
    seed = k["mix_seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise OptionError("{mix_seed=}: a whole number, e.g. 0", mix_seed=seed)
    return SamplingMix.of(
        temperature=k["temperature_mix"],
        reasoning_effort=k["reasoning_effort_mix"],
        thinking=k["thinking_mix"],
        seed=k["mix_seed"],
    )


def _check_turns(turns: str) -> None:
    if turns not in TURNS_MODES:
        raise ConfigError(
            f"turns={turns!r}: use 'last' (answer after the last message) or 'all' (regenerate "
            "every assistant turn)"
        )


#: What ``journal_header`` may name: who ran the run (``generation.books`` reads them).
JOURNAL_LABELS = ("shard", "key_hash")


def _check_journal_header(header: Mapping[str, str] | None, shard: tuple[int, int] | None) -> None:
    """``journal_header``: the rank (``shard``, ``"i/n"``) and the key's hash (``key_hash``) a
    run names in its journal when its rows are a shard given whole (the datatrove step's rank),
    not chosen by the row hash as ``shard=`` chooses them."""
    if header is None:
        return
    for name, value in header.items():
        if name not in JOURNAL_LABELS or not isinstance(value, str) or not value:
            raise ConfigError(
                Message(
                    "journal-header-field",
                    "journal_header: {name:s}={value:s} refused: it names only 'shard' (i/n) "
                    "and 'key_hash' (a key's hash), each a text",
                    name=str(name),
                    value=repr(value),
                )
            )
    if "shard" in header:
        named = parse_shard(header["shard"])
        if shard is not None and named != shard:
            raise ConfigError(
                Message(
                    "journal-header-shard",
                    "journal_header names shard {named:s}, {shard=} another: give one",
                    named=header["shard"],
                    shard=f"{shard[0]}/{shard[1]}",
                )
            )


def _shard(shard: str | tuple[int, int] | None) -> tuple[tuple[int, int] | None, str]:
    """The shard pair, and (``shard="auto"``) the launcher's variables that gave it."""
    if isinstance(shard, str) and shard.strip() == "auto":
        from openrouter_probe.generation.shards import shard_from_launcher

        launcher = shard_from_launcher()
        return launcher.pair, launcher.source
    return (parse_shard(shard) if isinstance(shard, str) else shard), ""


def _reasoning(effort: str | None, max_tokens: int | None) -> dict[str, Any] | None:
    if effort is not None and max_tokens is not None:
        raise OptionError(
            "give {reasoning_effort} or {reasoning_max_tokens}, not both",
            reasoning_effort=effort,
            reasoning_max_tokens=max_tokens,
        )
    if effort is not None:
        if effort not in REASONING_EFFORTS:
            raise OptionError(
                f"{{reasoning_effort=}}: use one of {', '.join(REASONING_EFFORTS)}",
                reasoning_effort=effort,
            )
        return {"effort": effort}
    if max_tokens is not None:
        return {"max_tokens": max_tokens}
    return None


def _check_sampling(
    max_tokens: int, temperature: float | None, reasoning: dict[str, Any] | None
) -> None:
    """Refuse what OpenRouter would refuse or the run could not use: a temperature outside
    [0, 2] (or not a number), a reasoning budget that leaves no room for the answer."""
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not 0 <= temperature <= 2
    ):
        raise OptionError(
            "{temperature=}: a number from 0 to 2 (OpenRouter's range)", temperature=temperature
        )
    budget = (reasoning or {}).get("max_tokens")
    if budget is not None and budget >= max_tokens:
        raise OptionError(
            "{reasoning_max_tokens=} leaves no room for the answer within {max_tokens=} "
            "(reasoning counts within it): lower the first or raise the second",
            reasoning_max_tokens=budget,
            max_tokens=max_tokens,
        )


def _batch_mode(
    stream: bool, options: JobOptions, batch: bool | BatchOptions
) -> tuple[BatchOptions | None, JobOptions]:
    """Batch mode's options, checked (``None``: sync); the run's options as batch mode wants
    them (unchanged without ``batch``)."""
    if batch is False:
        return None, options
    if stream:
        raise OptionError(
            "{stream=True} and {batch=True} exclude each other: a batch's answers come back "
            "whole, never streamed",
            stream=True,
            batch=True,
        )
    chosen = BatchOptions() if batch is True else batch
    chosen = dataclasses.replace(chosen, size=whole_number(chosen.size, "batch size"))
    # no cancel route: the first Ctrl-C stops submitting and leaves the batches running;
    # a line retried in a later batch waits for a batch (hours), not 10 minutes
    timeout = max(options.backoff.timeout_s or 0.0, _BATCH_RETRY_WINDOW_S)
    options = dataclasses.replace(
        options,
        drain_timeout_s=min(options.drain_timeout_s, 1.0),
        backoff=dataclasses.replace(options.backoff, timeout_s=timeout),
    )
    return chosen, options
