"""The plan of a ``generate`` job (``GeneratePlan``): the caller's arguments, checked once.

``GeneratePlan.of`` refuses what no run could use before anything is read or sent and resolves
the paid run's plan (``run.config.RunPlan``) once; the plan is frozen. Each field is declared
once: ``generate``'s own here, what every paid run takes in ``RunPlan``. ``generate()``'s keywords
are the fields of both that are not ``DERIVED`` (or set one under another name,
``RUN_KEYWORDS``); the CLI's options are made from the fields' metadata (``run.config.cli``), so
``generate --help`` imports this module: what its checks need is imported where they run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import ConfigError, Message, OptionError, Shown
from openrouter_probe.rules.quantities import parse_token_count, whole_number
from openrouter_probe.run.config import RunPlan, cli

if TYPE_CHECKING:
    from openrouter_probe.generation.manifest import SourceOptions
    from openrouter_probe.rules.sampling_mix import SamplingMix
    from openrouter_probe.run.send.batch_plan import BatchOptions
    from openrouter_probe.run.send.request import RequestBuilder

__all__ = [
    "DERIVED",
    "KEY_BUDGET",
    "REASONING_EFFORTS",
    "RUN_KEYWORDS",
    "GeneratePlan",
]

REASONING_EFFORTS = ("max", "xhigh", "high", "medium", "low", "minimal", "none")
#: ``budget_usd="key"``: the cap is what the key's blocking budget has left (``GET /key``); a key
#: without a limit refuses the paid run (the CLI's default without ``--budget-usd``).
KEY_BUDGET = "key"
#: How long a row's retries may run in batch mode: a batch may take 24 h, and a retry another.
_BATCH_RETRY_WINDOW_S = 3 * 24 * 3600.0
#: The metadata of a field the plan derives (not a keyword of ``generate()``).
_DERIVED = {"derived": True}


@dataclass(frozen=True, kw_only=True)
class GeneratePlan:
    """What a ``generate`` job was asked, checked (see the module); build it with :meth:`of`.

    It adds ``generate``'s own inputs (prompts, policy, sampling, turns, shard...) to ``run``,
    the paid run's plan (``run.config.RunPlan``, each of its fields declared there once). Each
    own field is ``generate()``'s keyword of the same name, as the job uses it: ``shard`` a pair
    (``"auto"`` resolved from the launcher), ``batch`` a ``BatchOptions`` or ``None``. Derived:
    ``shard_source`` (the launcher's variables that gave the shard), ``budget_from_key``
    (``budget_usd="key"``: the cap is read from ``GET /key`` before a paid run), ``mix``, ``run``.
    """

    prompts: str | Path
    policy: str | Path = field(
        metadata=cli(
            "--policy",
            "A compiled policy YAML: its model and provider block go into every request.",
        )
    )
    max_tokens: int = field(
        metadata=cli(
            "--max-tokens",
            "Output tokens per answer at most, reasoning included (a --row-params column wins).",
        )
    )
    stream: bool = field(
        metadata=cli(
            "--stream", "Ask for answers as streams (SSE); the records are the same either way."
        )
    )
    temperature: float | None = field(
        metadata=cli("--temperature", "Of every request, 0 to 2 (a --row-params column wins).")
    )
    reasoning_effort: str | None = field(
        metadata=cli(
            "--reasoning-effort",
            "reasoning.effort of every request (a --row-params column wins).",
        )
    )
    reasoning_max_tokens: int | None = field(
        metadata=cli(
            "--reasoning-max-tokens",
            "reasoning.max_tokens of every request, instead of --reasoning-effort.",
        )
    )
    dry_run: bool = field(metadata=cli("--dry-run", "Print the plan and its cost; send nothing."))
    shard: tuple[int, int] | None = field(
        metadata=cli(
            "--shard",
            "Send only shard i of n (0 <= i < n), by row id; auto: the launcher's rank and world "
            "size (SLURM_ARRAY_TASK_ID/COUNT, SLURM_PROCID/NTASKS, RANK/WORLD_SIZE).",
        )
    )
    redo_failed: bool = field(
        metadata=cli("--redo-failed", "Send again the rows recorded as failed.")
    )
    redo_truncated: bool = field(
        metadata=cli(
            "--redo-truncated",
            "Send again only the rows cut at max_tokens, with --max-tokens (raise it); the new "
            "answer supersedes the cut one for audit and export.",
        )
    )
    weights: str | Mapping[str, float] | None = field(
        metadata=cli(
            "--weights",
            "Share the budget between datasets by weight, e.g. B3=2,B4=1 (others weigh 1; "
            "default: equal shares).",
        )
    )
    turns: str = field(
        metadata=cli(
            "--turns",
            "last: answer after the last message; all: regenerate every assistant turn of "
            "multi-turn rows in order, each request carrying the model's own earlier turns.",
        )
    )
    source: SourceOptions | None
    snapshot: Any = field(
        metadata=cli(
            "--snapshot",
            "Price and check the policy against this snapshot instead of the live endpoints.",
        )
    )
    offline: bool = field(
        metadata=cli(
            "--offline",
            "No network and no spending: the dry run on the bundled snapshot (to send priced on "
            "it: --snapshot bundled).",
        )
    )
    batch: BatchOptions | None = field(
        metadata=cli(
            "--batch",
            "Send through OpenRouter's Batch API at the policy's :batch endpoint (its price, "
            "results within 24 h); the same output, journal, cap and resume.",
        )
    )
    temperature_mix: str | Mapping[str, float] | None = field(
        metadata=cli(
            "--temperature-mix",
            "Draw each row's temperature: 0.6,0.8,1.0 (equal shares) or 0.6=1,1.0=3 (weights), "
            "from --mix-seed and the row id (the same on resume and every shard).",
        )
    )
    reasoning_effort_mix: str | Mapping[str, float] | None = field(
        metadata=cli(
            "--reasoning-effort-mix",
            "Draw each row's reasoning.effort the same way, e.g. low,high,max.",
        )
    )
    thinking_mix: str | Mapping[str, float] | None = field(
        metadata=cli(
            "--thinking-mix",
            "Draw thinking on or off per row, e.g. on=0.8,off=0.2 (off: reasoning.enabled "
            "false); a model card's fixed temperature follows each row's thinking.",
        )
    )
    mix_seed: int = field(
        metadata=cli(
            "--mix-seed", "The seed of the --*-mix draws (not --sample's: that is --sample-seed)."
        )
    )
    samples: int = field(
        metadata=cli(
            "--samples",
            "N rows of each prompt (ids ID#0 ... ID#N-1), each its own draw and answer.",
        )
    )
    journal_header: Mapping[str, str] | None
    budget_from_key: bool = field(default=False, metadata=_DERIVED)
    shard_source: str = field(default="", metadata=_DERIVED)
    #: the sampling mix the three ``*_mix`` keywords and ``mix_seed`` make (``None``: none given)
    mix: SamplingMix | None = field(default=None, metadata=_DERIVED)
    #: the paid run's plan: what ``generate`` shares with ``verify``
    run: RunPlan = field(metadata=_DERIVED, repr=False)

    @classmethod
    def of(cls, prompts: str | Path, **keywords: Any) -> GeneratePlan:
        """The plan of ``generate(prompts, **keywords)``, every keyword given: checked, the run's
        plan resolved from the keywords that are not the plan's own fields. Raises
        ``ConfigError`` (and its ``OptionError``) for what no run could use."""
        from openrouter_probe.api.completion import RESPONSE_CACHE_TTL_S

        k = keywords
        if k["offline"]:  # no network, no spending: the dry run on the bundled snapshot
            k = {**k, "dry_run": True, "snapshot": k["snapshot"] or "bundled"}
        from_key = isinstance(k["budget_usd"], str) and k["budget_usd"].strip() == KEY_BUDGET
        if from_key:  # the key's remaining limit, read before a paid run sends (or refused)
            k = {**k, "budget_usd": None}
        _check_reasoning(k["reasoning_effort"], k["reasoning_max_tokens"])
        _check_turns(k["turns"])
        max_tokens = whole_number(k["max_tokens"], "max_tokens")
        _check_sampling(max_tokens, k["temperature"], k["reasoning_max_tokens"])
        mix = _mix(k)
        shard, shard_source = _shard(k["shard"])
        _check_journal_header(k["journal_header"], shard)
        own = {f.name for f in dataclasses.fields(cls) if not f.metadata.get("derived")}
        given = {name: value for name, value in k.items() if name in own}
        run = {name: value for name, value in k.items() if name not in own}
        if run["target_tokens"] is not None:
            run["target_tokens"] = parse_token_count(run["target_tokens"], what="target_tokens")
        cache = run.pop("response_cache")
        options = RunPlan.resolve(
            command="generate",
            inputs=(prompts, k["policy"]),
            need_key=not k["dry_run"],
            response_cache_ttl_s=RESPONSE_CACHE_TTL_S if cache else None,
            **run,
        )
        batch, options = _batch_mode(k["stream"], options, k["batch"])
        given["samples"] = whole_number(k["samples"], "samples")
        given.update(prompts=prompts, max_tokens=max_tokens, shard=shard, batch=batch, mix=mix)
        return cls(**given, run=options, budget_from_key=from_key, shard_source=shard_source)

    @property
    def response_cache(self) -> bool:
        """Whether the requests ask OpenRouter's response cache (``generate``'s keyword)."""
        return self.run.response_cache_ttl_s is not None

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
        from openrouter_probe.run.send.request import RequestBuilder

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


#: ``generate()``'s keywords that set a field of the run's plan under another name (the key and
#: the base URL make its one ``connection``).
RUN_KEYWORDS = dict(
    attempts="backoff",
    response_cache="response_cache_ttl_s",
    api_key="connection",
    base_url="connection",
)
#: The plan's fields that are not ``generate()``'s keywords (the plan derives them).
DERIVED = tuple(f.name for f in dataclasses.fields(GeneratePlan) if f.metadata.get("derived"))


def _mix(k: Mapping[str, Any]) -> SamplingMix | None:
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
    if k["thinking_mix"] is not None and k["reasoning_effort"] == "none":
        raise OptionError(
            "{thinking_mix=} draws thinking on for some rows and {reasoning_effort=none} turns it "
            "off for every row: give one of them",
            thinking_mix=Shown(str(k["thinking_mix"])),
        )
    seed = k["mix_seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise OptionError("{mix_seed=}: a whole number, e.g. 0", mix_seed=seed)
    if all(k[name] is None for name in ("temperature_mix", "reasoning_effort_mix", "thinking_mix")):
        return None  # (no mix: ``SamplingMix.of``'s None, without importing its module)
    from openrouter_probe.rules.sampling_mix import SamplingMix

    return SamplingMix.of(
        temperature=k["temperature_mix"],
        reasoning_effort=k["reasoning_effort_mix"],
        thinking=k["thinking_mix"],
        seed=k["mix_seed"],
    )


def _check_turns(turns: str) -> None:
    from openrouter_probe.run.books.turns import TURNS_MODES

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
        from openrouter_probe.generation.prompts import parse_shard

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
    from openrouter_probe.generation.prompts import parse_shard

    return (parse_shard(shard) if isinstance(shard, str) else shard), ""


def _check_reasoning(effort: str | None, max_tokens: int | None) -> None:
    if effort is not None and max_tokens is not None:
        raise OptionError(
            "give {reasoning_effort} or {reasoning_max_tokens}, not both",
            reasoning_effort=effort,
            reasoning_max_tokens=max_tokens,
        )
    if effort is not None and effort not in REASONING_EFFORTS:
        raise OptionError(
            f"{{reasoning_effort=}}: use one of {', '.join(REASONING_EFFORTS)}",
            reasoning_effort=effort,
        )


def _check_sampling(max_tokens: int, temperature: float | None, budget: int | None) -> None:
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
    if budget is not None and budget >= max_tokens:
        raise OptionError(
            "{reasoning_max_tokens=} leaves no room for the answer within {max_tokens=} "
            "(reasoning counts within it): lower the first or raise the second",
            reasoning_max_tokens=budget,
            max_tokens=max_tokens,
        )


def _batch_mode(
    stream: bool, options: RunPlan, batch: bool | BatchOptions
) -> tuple[BatchOptions | None, RunPlan]:
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
    from openrouter_probe.run.send.batch_plan import BatchOptions

    chosen = BatchOptions() if batch is True else batch
    # no cancel route: the first Ctrl-C stops submitting and leaves the batches running;
    # a line retried in a later batch waits for a batch (hours), not 10 minutes
    timeout = max(options.backoff.timeout_s or 0.0, _BATCH_RETRY_WINDOW_S)
    options = dataclasses.replace(
        options,
        drain_timeout_s=min(options.drain_timeout_s, 1.0),
        backoff=dataclasses.replace(options.backoff, timeout_s=timeout),
    )
    return chosen, options
