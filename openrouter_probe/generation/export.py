"""Export generator output for training a drafter: SpecForge, ShareGPT, plain JSONL, parquet, hf.

Rows come from one or more output files (shards merged by row id); only answered rows are
exported, never one whose answer is empty; each row's conversation is its prompt with the model's
answers in place (``generation.conversation``). Each format's row, its refusals and its writer are
one entry of ``generation.formats``; ``docs/training-data.md`` has the formats field by field and
their rules. Every format is written atomically, never over one of its inputs.

Example::

    from openrouter_probe.generation.export import export

    summary = export(["out.jsonl"], fmt="specforge", output="train.jsonl", only_generated=True)
    print(summary.render())
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openrouter_probe.errors import (
    ConfigError,
    OptionError,
    Term,
    braced,
    keyword_term,
    render_template,
)
from openrouter_probe.files import ensure_not_input
from openrouter_probe.generation.conversation import (
    SPECFORGE_REASONS,
    Conversation,
    conversation_of,
)
from openrouter_probe.generation.formats import (
    EXPORT_FORMATS,
    FORMATS,
    ExportFormat,
    Target,
)
from openrouter_probe.generation.records import beside, merged_records, reasoning_tokens_of
from openrouter_probe.run.books.output import output_tokens_of
from openrouter_probe.run.tallies import Frozen

__all__ = ["EXPORT_FORMATS", "ExportSummary", "export"]

#: Why a row is left out, beside ``SPECFORGE_REASONS`` (the export's summary counts by these).
LEFT_OUT_REASONS = {
    "empty_answer": "the answer is empty",
    "copied_turns": "holds assistant turns from the prompts file ({only_generated=True})",
    "no_reasoning": "an assistant turn has no reasoning ({require_reasoning=True})",
    **SPECFORGE_REASONS,
}
_SHOWN_IDS = 3


@dataclass(frozen=True)
class ExportSummary(Frozen):
    """What an export read, wrote and left out (and why), a value (tuples and read-only mappings
    inside): ``render()`` says it in a few lines."""

    fmt: str
    output: str
    json_array: bool = False
    read: int = 0
    written: int = 0
    not_answered: Mapping[str, int] = field(default_factory=dict)  # status -> rows
    left_out: Mapping[str, int] = field(default_factory=dict)  # LEFT_OUT_REASONS key -> rows
    #: the first few row ids of each reason
    left_out_ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    think_split: int = 0  # rows with a <think> split out of a content
    unreasoned: int = 0  # rows written with a model-written turn without reasoning
    copied: int = 0  # rows written that hold prompt-file assistant turns
    tools_unknown: int = 0  # rows written with tool calls but no `tools` list
    output_tokens: int = 0  # billed output tokens of the answered rows read
    reasoning_tokens: int = 0
    longest_ok: int = 0  # output tokens of the longest row that finished (not cut)
    pushed: str | None = None  # push_to_hub: the commit the Hub reports
    superseded: int = 0  # truncated answers a redo_truncated=True answer replaced

    @property
    def reasoning_share(self) -> float | None:
        """Reasoning tokens over billed output tokens of the answered rows read."""
        return self.reasoning_tokens / self.output_tokens if self.output_tokens else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.fmt,
            "output": self.output,
            "json_array": self.json_array,
            "read": self.read,
            "written": self.written,
            "not_answered": dict(self.not_answered),
            "left_out": dict(self.left_out),
            "left_out_ids": {k: list(v) for k, v in self.left_out_ids.items()},
            "think_split": self.think_split,
            "unreasoned": self.unreasoned,
            "copied": self.copied,
            "tools_unknown": self.tools_unknown,
            "reasoning_share": self.reasoning_share,
            "longest_ok_output_tokens": self.longest_ok,
            "pushed": self.pushed,
            "superseded": self.superseded,
        }

    def render(self, term: Term = keyword_term) -> str:
        """The summary as short lines (stderr), each wrapped at 80 columns (``term`` says the
        library's keywords; the CLI passes its flags)."""

        def said(template: str) -> str:
            return render_template(template, {}, term)

        shape = "a JSON array" if self.json_array else self.fmt
        lines = [f"wrote {self.written} of {self.read} rows to {self.output} ({shape})"]
        if self.pushed:
            lines.append(f"pushed to the Hub: {self.pushed}")
        if self.superseded:
            lines.append(
                f"{self.superseded} truncated answer(s) superseded by a "
                + said("{redo_truncated=True}")
                + " answer (the later one is exported)"
            )
        if self.not_answered:
            counts = ", ".join(f"{n} {status}" for status, n in sorted(self.not_answered.items()))
            hint = said(" ({include_truncated=True} adds those cut at max_tokens)")
            lines.append(f"not answered: {counts}" + (hint if "truncated" in counts else ""))
        for reason, n in sorted(self.left_out.items(), key=lambda kv: -kv[1]):
            ids = ", ".join(self.left_out_ids.get(reason, []))
            more = ", ..." if n > _SHOWN_IDS else ""
            lines.append(f"left out {n}: {said(LEFT_OUT_REASONS[reason])}: {ids}{more}")
            if reason == "empty_answer":
                lines.append(self._empty_answer_advice(said))
        lines.extend(self._notes(said))
        wrapped = [
            textwrap.fill(
                line, 80, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
            )
            for line in lines[1:]
        ]
        return "\n".join([lines[0], *wrapped])  # the first line names the file: never cut

    def _empty_answer_advice(self, said: Callable[[str], str]) -> str:
        share = self.reasoning_share
        measured = f"reasoning is {share:.0%} of the output tokens read; " if share else ""
        longest = f" (the longest finished row used {self.longest_ok:,})" if self.longest_ok else ""
        return (
            f"  the reasoning used up max_tokens before the answer: {measured}"
            + said("raise {max_tokens} for the next run")
            + longest
        )

    def _notes(self, said: Callable[[str], str]) -> list[str]:
        notes = []
        if self.think_split:
            notes.append(f"split <think>...</think> out of the content in {self.think_split} rows")
        if self.copied:
            notes.append(
                f'{self.copied} rows hold assistant turns from the prompts file, marked "generated":'
                " false (the model did not write them; "
                + said("{only_generated=True}")
                + " leaves these rows out)"
            )
        if self.unreasoned:
            notes.append(
                f"{self.unreasoned} rows have a model-written turn without reasoning ("
                + said("{require_reasoning=True}")
                + " leaves them out)"
            )
        if self.tools_unknown:
            notes.append(
                f"{self.tools_unknown} rows hold tool calls but the output records no `tools`: "
                + said("pass {prompts=PROMPTS} to take them from the prompts file")
            )
        return notes


def _count_tokens(figures: Counter[str], record: dict[str, Any]) -> None:
    """Add a row's billed output and reasoning tokens (per turn when it has turns)."""
    turns = record.get("turns")
    answers = [t for t in turns if isinstance(t, dict)] if isinstance(turns, list) else []
    answers = answers or [record]
    output = sum(output_tokens_of(a) for a in answers)
    figures["output_tokens"] += output
    figures["reasoning_tokens"] += sum(reasoning_tokens_of(a) for a in answers)
    if record.get("status") == "ok":
        figures["longest_ok"] = max(figures["longest_ok"], output)


def _check_target(
    fmt: str, output: str | Path, files: list[str], push_to_hub: str | None = None
) -> tuple[ExportFormat, bool]:
    """Refuse what cannot be written before reading anything; return the format and whether to
    write an array."""
    if fmt not in FORMATS:
        raise OptionError(f"{{fmt=}}: use one of {', '.join(EXPORT_FORMATS)}", fmt=fmt)
    chosen = FORMATS[fmt]
    if push_to_hub and not chosen.folder:
        raise OptionError(
            "{push_to_hub=} uploads a Hub dataset folder, which only {fmt=hf} writes (given: "
            "{fmt=}): add it, or drop {push_to_hub}",
            push_to_hub=push_to_hub,
            fmt=fmt,
        )
    _check_outputs(files)
    target = Path(output)
    try:
        ensure_not_input(target, *files)
    except ValueError as exc:
        raise ConfigError(f"output=: {exc}; name another file") from exc
    chosen.check(target)
    return chosen, chosen.arrays and target.suffix.lower() == ".json"


def _check_outputs(files: list[str]) -> None:
    """Refuse outputs that hold no output: every one a spend journal or turns file of ``generate``
    (an export of them would write nothing)."""
    from openrouter_probe.run.books.turns import TURNS_SUFFIX
    from openrouter_probe.run.money.journal import JOURNAL_SUFFIX

    if files and all(beside(f) for f in files):
        first, what = files[0], beside(files[0])
        answers = first.removesuffix(JOURNAL_SUFFIX).removesuffix(TURNS_SUFFIX)
        raise OptionError(
            f"{braced(first)} is the {what} of `generate`, not an output file: export "
            f"the output it is beside ({braced(answers)})",
            paths=files,
        )


def _prompt_tools(prompts: str | Path | None) -> tuple[dict[str, Any], set[str]]:
    """Each prompt row's ``tools`` by row id (the output does not record them), and every row id
    of the prompts."""
    if prompts is None:
        return {}, set()
    from openrouter_probe.generation.manifest import read_inputs

    rows = read_inputs(prompts).prompts  # a manifest too: each dataset's rows
    tools = {r.id: r.params["tools"] for r in rows if r.params.get("tools")}
    return tools, {r.id for r in rows}


def _uses_tools(conv: Conversation) -> bool:
    return any(
        m.get("role") == "tool" or m.get("tool_calls") or m.get("tool_call_id")
        for m in conv.messages
    )


def _left_out(conv: Conversation, *, only_generated: bool, require_reasoning: bool) -> str | None:
    """Why every format leaves the row out (the first reason), or ``None``."""
    if conv.empty_answers():
        return "empty_answer"
    if only_generated and conv.copied:
        return "copied_turns"
    if require_reasoning and conv.unreasoned(written_only=False):
        return "no_reasoning"
    return None


@dataclass
class _Export:
    """An export as it reads: what it keeps (``export``'s options) and its figures so far
    (``ExportSummary``'s, by name: the summary is made of them once, at the end)."""

    fmt: ExportFormat
    keep: frozenset[str]
    only_generated: bool
    require_reasoning: bool
    preserve_thinking: bool
    tools: dict[str, Any]
    figures: Counter[str] = field(default_factory=Counter)
    not_answered: Counter[str] = field(default_factory=Counter)
    left_out: Counter[str] = field(default_factory=Counter)
    left_out_ids: dict[str, list[str]] = field(default_factory=dict)

    def row(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The exported row of one record, or ``None`` when it is left out (counted)."""
        status = str(record.get("status"))
        if status not in self.keep:
            self.not_answered[status] += 1
            return None
        conv = conversation_of(record)
        tools = record.get("tools") or self.tools.get(str(record["id"]))
        row: dict[str, Any] | str | None = _left_out(
            conv, only_generated=self.only_generated, require_reasoning=self.require_reasoning
        )
        if row is None:
            row = self.fmt.row(record, conv, tools, self.preserve_thinking)
        if isinstance(row, str):
            self.left_out[row] += 1
            shown = self.left_out_ids.setdefault(row, [])
            if len(shown) < _SHOWN_IDS:
                shown.append(str(record["id"]))
            return None
        figures = self.figures
        figures["think_split"] += bool(conv.think_split)
        figures["copied"] += bool(conv.copied)
        figures["unreasoned"] += bool(conv.unreasoned())
        figures["tools_unknown"] += bool(not tools and _uses_tools(conv))
        return row


def export(
    paths: Iterable[str | Path],
    *,
    fmt: str,
    output: str | Path,
    include_truncated: bool = False,
    only_generated: bool = False,
    require_reasoning: bool = False,
    preserve_thinking: bool = True,
    prompts: str | Path | None = None,
    push_to_hub: str | None = None,
    hub_api: Any = None,
    command: str | None = None,
) -> ExportSummary:
    """Write the answered rows of ``paths`` to ``output`` in ``fmt``; say what was left out.

    ``fmt="hf"`` writes a dataset folder (``generation.hub``), its card naming ``command``;
    ``push_to_hub`` (a repo id) then uploads it with ``huggingface_hub`` (``hub_api`` replaces
    its ``HfApi``).

    ``only_generated`` leaves out rows that hold assistant turns copied from the prompts file;
    ``require_reasoning`` rows with an assistant turn without reasoning; ``preserve_thinking``
    (``specforge``) sets ``preserve_thinking: true`` on rows with reasoning; ``prompts`` (the
    prompts file) gives each row's ``tools``. A row with an empty answer is never exported.
    """
    files = [str(p) for p in paths]
    chosen, json_array = _check_target(fmt, output, files, push_to_hub)
    tools, prompt_ids = _prompt_tools(prompts)
    reading = _Export(
        fmt=chosen,
        keep=frozenset({"ok", "truncated"} if include_truncated else {"ok"}),
        only_generated=only_generated,
        require_reasoning=require_reasoning,
        preserve_thinking=preserve_thinking,
        tools=tools,
    )
    pairs = []
    superseded: list[str] = []
    matched = False
    for record in merged_records(files, superseded=superseded):
        reading.figures["read"] += 1
        if record.get("status") in ("ok", "truncated"):
            _count_tokens(reading.figures, record)
        row = reading.row(record)
        if row is not None:
            pairs.append((record, row))
        matched = matched or str(record["id"]) in prompt_ids
    if prompts is not None and reading.figures["read"] and not matched:
        raise OptionError(
            "{prompts=}: none of its row ids is a row of the outputs read (the prompts of "
            "another run?): give the prompts file these rows were generated from",
            prompts=str(prompts),
        )
    target = Target(Path(output), json_array, tuple(files), command, len(superseded))
    chosen.write(pairs, target)
    pushed = None
    if push_to_hub:  # (a folder's: ``_check_target``)
        from openrouter_probe.generation import hub

        pushed = hub.push_to_hub(Path(output), push_to_hub, api=hub_api)
    return ExportSummary(
        fmt=fmt,
        output=str(output),
        json_array=json_array,
        written=len(pairs),
        not_answered=dict(reading.not_answered),
        left_out=dict(reading.left_out),
        left_out_ids={k: tuple(v) for k, v in reading.left_out_ids.items()},
        pushed=pushed,
        superseded=len(superseded),
        **reading.figures,
    )
