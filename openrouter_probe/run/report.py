"""A run's result for people (``render_result``): the text of a ``run.result.RunResult``, apart
from the value; it reads the result and writes lines of at most ``WIDTH`` columns.

Example::

    print(render_result(summary))  # summary = await generate(...)
"""

from __future__ import annotations

import textwrap
from decimal import Decimal

from openrouter_probe.errors import Term, keyword_term, render_template, rendered
from openrouter_probe.rules.quantities import format_usd
from openrouter_probe.run.result import RunResult
from openrouter_probe.run.stop import StopReason

__all__ = ["WIDTH", "render_result"]

_ZERO = Decimal(0)

#: The width ``render_result`` fits its lines to.
WIDTH = 80


def render_result(result: RunResult, term: Term = keyword_term) -> str:
    """``result`` for people, in lines of at most 80 columns (wrapped between words: a figure is
    never cut; every dataset listed, 0 included; money never shown negative); ``term`` says the
    library's keywords (``errors.keyword_term``; the CLI passes its flags)."""
    lines = StopReason(result.stop_reason).why()  # the first line says why, when not as asked
    lines.append(f"{result.model} via {result.policy} -> {result.out}")
    if result.stop_reason == StopReason.DRY_RUN:
        lines.append(
            f"dry run: {result.rows_to_send:,} row{'' if result.rows_to_send == 1 else 's'} to "
            f"send ({result.rows_already_done:,} already "
            f"done, {result.duplicates:,} duplicate ids skipped); nothing sent"
        )
        if result.shard_from:
            lines.append(result.shard_from)
    else:
        lines.append(
            f"rows: {result.ok:,} ok, {result.truncated:,} truncated, {result.failed:,} failed, "
            f"{result.cancelled:,} cancelled, {result.not_sent:,} not sent"
            + (f", {result.rows_partial:,} stopped mid-way" if result.rows_partial else "")
            + f" ({result.rows_already_done:,} already done, {result.duplicates:,} duplicate ids "
            f"skipped); {result.requests:,} requests, {result.retries:,} retried"
        )
    if result.rows_skipped:
        lines.append(
            f"skipped {result.rows_skipped:,} rows of the prompts: not a row to send "
            "(never sent; the warnings name them)"
        )
    if result.stop_reason == StopReason.DRY_RUN and result.rows_ending_on_assistant:
        lines.append(
            f"{result.rows_ending_on_assistant:,} rows end on an assistant turn: that answer "
            "is regenerated ("
            + render_template("{turns=last}", {}, term)
            + " keeps it as `original`)"
        )
    lines.extend(_turn_lines(result, term))
    lines.extend(_money_lines(result, term))
    if result.in_flight_refusals:
        lines.append(
            f"held in flight at most ${result.held_max_usd:,.4f}; {result.in_flight_refusals:,} "
            "in-flight refusals (OpenRouter's in-flight budget: each waited and went again)"
        )
    lines.extend(_dataset_lines(result))
    for name, tally in sorted(result.providers.items()):
        turns = f", {tally.turns:,} turns" if tally.turns else ""
        byok = f" ({_usd(tally.byok_usd)} BYOK: the provider's, to your own key)"
        lines.append(
            f"  {name}: {tally.rows:,} rows{turns}, {tally.completion_tokens:,} output "
            f"tokens, {_usd(tally.cost_usd)}" + (byok if tally.byok_usd else "")
        )
    if result.worst_case_usd is not None:
        what = "rows" if result.turns_to_send is None else "turns"
        lines.append(f"worst case of the {what} to send: ${result.worst_case_usd:,.4f}")
    if result.expected_usd is not None:
        lines.append(f"expected (budget planner, blended): ${result.expected_usd:,.4f}")
    lines.extend(rendered(n, term) for n in result.notes)
    message = rendered(result.message, term)
    lines.append(f"stopped: {result.stop_reason}" + (f": {message}" if message else ""))
    return "\n".join(_fit(line) for line in lines)


def _money_lines(result: RunResult, term: Term) -> list[str]:
    cap = f" of {format_usd(result.budget_usd)}" if result.budget_usd is not None else ""
    remaining = result.remaining_usd
    lines = [
        f"spent: {_usd(result.spent_usd)} this run, {_usd(result.spent_total_usd)} in all{cap}"
        + (f"; {_usd(remaining)} remains" if remaining is not None else "")
    ]
    if result.budget_usd is not None and result.spent_total_usd > result.budget_usd:
        over = result.spent_total_usd - result.budget_usd
        lines.append(f"over the cap by {_usd(over)} (answers cost more than their worst case)")
    if result.shards and result.budget_usd is not None:
        total = result.budget_usd * result.shards
        lines.append(
            render_template("{budget_usd:bare}", {}, term)
            + f" is per shard: {format_usd(result.budget_usd)} x {result.shards} "
            f"shards = {format_usd(total)} on the key in all"
        )
    if result.possibly_billed_usd or result.reconciled:
        lines.append(
            f"possibly billed (cost unknown, counted at the worst case): "
            f"{_usd(result.possibly_billed_usd)}; settled from /generation: "
            f"{result.reconciled} attempt(s), {_usd(result.reconciled_back_usd)} given back"
        )
    if result.possibly_billed_before_usd or result.reconciled_before:
        killed = (
            f", {result.killed_in_flight_before} in flight when a run was killed"
            if result.killed_in_flight_before
            else ""
        )
        settled = (
            "a real run settles what it can from /generation"
            if result.stop_reason == StopReason.DRY_RUN  # a dry run settles nothing
            else f"settled from /generation this run: {result.reconciled_before} attempt(s), "
            f"{_usd(result.reconciled_before_back_usd)} given back"
        )
        lines.append(
            f"possibly billed by earlier runs{killed}: "
            f"{_usd(result.possibly_billed_before_usd)} at the worst case; {settled} "
            f"({result.journal})"
        )
    if result.cache_hits:
        lines.append(
            f"{result.cache_hits:,} answer(s) from OpenRouter's response cache: billed nothing, "
            "counted $0 (rows resent after a lost answer)"
        )
    for name, (answers, ratio, usd) in sorted(result.overshoot.items()):
        lines.append(
            f"{name} billed past max_tokens: {answers:,} answer(s), up to {ratio:.2f}x, "
            f"{_usd(usd)} for the tokens past the limit (reserved for from then on)"
        )
    if result.unsettleable:
        lines.append(
            f"{result.unsettleable} attempt(s) left with no generation id: they stay at their worst case"
        )
    return lines


def _dataset_lines(result: RunResult) -> list[str]:
    if not result.datasets:
        if not result.output_tokens:
            return []
        items = [f"{k} {v:,}" for k, v in sorted(result.output_tokens.items())]
        return _pack("output tokens (reasoning included):", items)
    lines = ["datasets: rows done/total, output tokens (reasoning included), spent"]
    for name, t in sorted(result.datasets.items()):
        share = f" of {_usd(t.share_usd)}" if t.share_usd is not None else ""
        unsent = f", {t.not_sent:,} not sent" if t.not_sent else ""
        lines.append(
            f"  {name}: {t.done:,}/{t.rows:,} rows, {t.output_tokens:,} tok, "
            f"{_usd(t.spent_usd)}{share}{unsent}"
        )
    return lines


def _turn_lines(result: RunResult, term: Term) -> list[str]:
    """``--turns all``: turns, in one unit with the rows line's requests (every request sends
    one turn: a row's last turn finishes it; a row without turns of its own is one turn)."""
    if result.turns_to_send is None:
        return []
    kept = (
        f" ({result.turns_resumed:,} more kept by earlier runs, not sent again)"
        if result.turns_resumed
        else ""
    )
    asked = render_template("{turns=all}", {}, term)
    line = f"turns ({asked}): {result.turns_to_send:,} to send for the rows to send{kept}"
    if result.stop_reason != StopReason.DRY_RUN:
        line += f"; {result.turns_done:,} answered"
    lines = [line]
    if result.rows_partial:
        lines.append(
            f"{result.rows_partial:,} row(s) stopped mid-way: their finished turns are kept in "
            f"{result.turns_file or 'the turns file'}; rerun the same command to finish them"
        )
    return lines


def _usd(value: Decimal) -> str:
    """Money for people, never negative (``$0.00 remains``), six decimals below a dollar."""
    value = max(_ZERO, value)
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:,.6f}"


def _pack(label: str, items: list[str]) -> list[str]:
    """``label`` then ``items`` joined by ", ", in lines of at most ``WIDTH``, never inside an
    item."""
    lines: list[str] = []
    line = label
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(line) + 1 + len(piece) > WIDTH and line.strip():
            lines.append(line)
            line = "  " + piece
        else:
            line = f"{line} {piece}" if line else piece
    lines.append(line)
    return lines


def _fit(line: str) -> str:
    """``line`` wrapped at ``WIDTH`` between words (never inside a figure), continued indented."""
    if len(line) <= WIDTH:
        return line
    indent = "  " + " " * (len(line) - len(line.lstrip(" ")))
    return "\n".join(
        textwrap.wrap(
            line,
            width=WIDTH,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )
    )
