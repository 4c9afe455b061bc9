"""The CLI's names for the library's terms: library messages say ``max_wait_s=60``, the CLI
shows ``--max-wait 60``.

Library messages (stop messages, budget advice, warnings) name the keyword a Python caller
passes (``max_tokens=4096 would fit``, ``lower_max_tokens=True``, ``turns="all"``, ``out=``);
``flagged`` rewrites them to the flags of the command line where the CLI prints them (the summary,
the log lines, the one-line errors and usage errors). Only the forms ``name=VALUE`` (a quoted value
loses its quotes), ``name=True`` and a bare ``name=`` are rewritten, and a few names no message uses
for anything else, so a message that speaks of ``max_tokens`` as a quantity is left as it is
(and not ``n``: ``n=200`` is a count in verify's report; the CLI's own range check refuses
``--n 0`` before the library would). A command adds a keyword only its function means
(``flagged(text, {"path": "--plot"})`` for ``save_figure``).

Example::

    flagged("the wait is more than max_wait_s=60 s")  # 'the wait is more than --max-wait 60 s'
    flagged('resume with turns="all"')                # 'resume with --turns all'
    flagged("give limit= or sample=, not both")       # 'give --limit or --sample, not both'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

__all__ = ["FLAGS", "flagged"]

#: The library's keyword -> the CLI's flag.
FLAGS = {
    "max_wait_s": "--max-wait",
    "max_tokens": "--max-tokens",
    "lower_max_tokens": "--lower-max-tokens",
    "redo_failed": "--redo-failed",
    "redo_truncated": "--redo-truncated",
    "budget_usd": "--budget-usd",
    "dry_run": "--dry-run",
    "out": "--out",
    "concurrency": "--concurrency",
    "attempts": "--attempts",
    "turns": "--turns",
    "read_timeout_s": "--read-timeout",
    "limit": "--limit",
    "sample": "--sample",
    "prompt_field": "--prompt-field",
    "id_field": "--id-field",
    "config": "--config",
    "split": "--split",
    "policy": "--policy",
    "shard": "--shard",
    "key_file": "--key-file",
    "fmt": "--format",
    "push_to_hub": "--push-to-hub",
    "output": "-o",
    "reasoning_effort": "--reasoning-effort",
    "reasoning_max_tokens": "--reasoning-max-tokens",
    # generate and export
    "weights": "--weights",
    "batch": "--batch",
    "include_truncated": "--include-truncated",
    "only_generated": "--only-generated",
    "require_reasoning": "--require-reasoning",
    "prompts": "--prompts",
    # the snapshot a command reads
    "snapshot": "--snapshot",
    "offline": "--offline",
    # budget
    "output_tokens": "--output-tokens",
    "output_tokens_per_dataset": "--tokens-per-dataset",
    "datasets": "--datasets",
    "dataset_names": "--dataset-names",
    "reasoning_share": "--reasoning-share",
    "prompt_tokens_per_request": "--prompt-tokens",
    "output_tokens_per_request": "--output-tokens-per-request",
    "prompt_to_output_ratio": "--prompt-ratio",
    # verify (not ``n``: ``n=200`` is a count in the report)
    "endpoints": "--endpoints",
    "reference": "--reference",
    "alpha": "--alpha",
    "power": "--power",
    "tolerance": "--tolerance",
    "repeats": "--repeats",
}
#: Names said bare in messages only as the keyword (``max_tokens`` is also a quantity).
_BARE = (
    "max_wait_s", "lower_max_tokens", "redo_failed", "redo_truncated", "budget_usd", "dry_run",
    "read_timeout_s", "prompt_field", "id_field", "reasoning_effort", "reasoning_max_tokens",
    "include_truncated", "only_generated", "require_reasoning", "output_tokens_per_dataset",
    "dataset_names", "reasoning_share", "prompt_tokens_per_request", "output_tokens_per_request",
    "prompt_to_output_ratio",
)  # fmt: skip
_WORD = re.compile(rf"(?<![\w.-])({'|'.join(_BARE)})(?![\w=])")


@functools.lru_cache(maxsize=8)
def _keywords(names: tuple[str, ...]) -> re.Pattern[str]:
    """``name=True``, ``name="value"`` (a value without spaces or quotes), ``name=value``,
    ``name=``, for any of ``names`` (the longest first)."""
    alternatives = "|".join(sorted(names, key=len, reverse=True))
    return re.compile(rf"""(?<![\w.-])({alternatives})=(?:(True)\b|(["'])([^\s"']+)\3)?""")


def _keyword(match: re.Match[str], flag: str) -> str:
    if match.group(2):  # name=True: the flag alone
        return flag
    if match.group(4) is not None:  # name="value": the value as typed on the command line
        return f"{flag} {match.group(4)}"
    at = match.end()
    follows = match.string[at : at + 1]
    return flag + " " if follows and not follows.isspace() and follows not in ",;:)" else flag


def flagged(text: str, terms: Mapping[str, str] | None = None) -> str:
    """``text`` with the library's keywords shown as the CLI's flags (see the module). ``terms``
    adds a command's own ``name=`` forms, for a keyword only one function means (``save_figure``'s
    ``path=`` is ``--plot``)."""
    if "_" not in text and "=" not in text:
        return text
    flags = {**FLAGS, **terms} if terms else FLAGS
    keywords = _keywords(tuple(flags))
    text = keywords.sub(lambda m: _keyword(m, flags[m.group(1)]), text)
    return _WORD.sub(lambda m: FLAGS[m.group(1)], text)
