"""What a run's rows, requests and money came to (``Figures``), as its books count them
(``Counts``, ``run.books.books``), and how long its answers were (``AnswerLengths``)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from openrouter_probe.errors import Message

__all__ = ["AnswerLengths", "Counts", "Figures", "useful_rows"]

#: The share of answers ``AnswerLengths.keeps`` says a ``max_tokens`` for.
WHOLE_SHARE = 0.95


@dataclass
class AnswerLengths:
    """How long answers were (billed output tokens, reasoning included) and how many were cut at
    ``max_tokens``: what ``max_tokens`` would have kept 95% of them whole. A cut answer's own
    length is unknown (longer than it was let be): it only counts as not kept."""

    whole: Counter[int] = field(default_factory=Counter)  # tokens -> answers not cut
    cut: int = 0

    def add(self, tokens: int, cut: bool) -> None:
        if cut:
            self.cut += 1
        else:
            self.whole[tokens] += 1

    @property
    def answers(self) -> int:
        return self.cut + self.whole.total()

    def keeps(self, share: float = WHOLE_SHARE) -> int | None:
        """The least ``max_tokens`` under which ``share`` of the answers end whole; ``None``
        when more than ``1 - share`` were cut (how long they would have been is unknown)."""
        need = math.ceil(share * self.answers)
        if need > self.whole.total() or need == 0:
            return None
        seen = 0
        for tokens in sorted(self.whole):
            seen += self.whole[tokens]
            if seen >= need:
                return max(1, tokens)
        return None  # (not reached)

    def note(self) -> list[str]:
        """What the summary says of them (nothing: no answer yet), a ``Message``. Nothing is
        changed: the ``max_tokens`` named is advice."""
        answers = self.answers
        if not answers:
            return []
        keep = self.keeps()
        said = Message(
            "answers-cut",
            "{cut:,d} of {answers:,d} answers cut at {max_tokens:bare} ({share:.1%})",
            cut=self.cut,
            answers=answers,
            share=self.cut / answers,
        )
        if keep is None:
            return [
                Message(
                    "answers-cut-unknown",
                    "{said:s}: keeping 95% whole needs a higher {max_tokens:bare}, by how much "
                    "these answers cannot say (a cut answer's length is unknown)",
                    said=said,
                )
            ]
        return [
            Message(
                "answers-cut-keep",
                "{said:s}; {max_tokens=} would have kept 95% whole (not changed: give it to use "
                "it)",
                said=said,
                max_tokens=keep,
            )
        ]


_ZERO = Decimal(0)


def useful_rows(
    rows: int, cost_usd: Decimal, lengths: AnswerLengths, source: str = "the output so far"
) -> list[str]:
    """Rows per dollar (``rows`` for ``cost_usd``), and the useful ones: whole (not cut at
    ``max_tokens``) as the answers of ``source`` (``lengths``) were; with no answers, that
    share is unknown and said so."""
    if cost_usd <= 0 or rows <= 0:
        return []
    per = rows / cost_usd
    if not lengths.answers:
        return [
            Message(
                "useful-rows-unknown",
                "rows per dollar: {per:,.1f} at the expected cost; how many come whole (not cut "
                "at {max_tokens:bare}) is unknown until answers come: the run's summary says",
                per=per,
            )
        ]
    whole = Decimal(lengths.answers - lengths.cut) / lengths.answers
    said = Message(
        "useful-rows",
        "useful rows per dollar: {useful:,.1f} of {per:,.1f} at the expected cost ({whole:.1%} "
        "whole, as the {answers:,d} answers of {source:s} were)",
        useful=per * whole,
        per=per,
        whole=whole,
        answers=lengths.answers,
        source=source,
    )
    return [said, *lengths.note()]


@dataclass(frozen=True)
class Figures:
    """What a run's rows, requests and money came to, each figure declared once: the
    ``RunResult``'s of these names (it inherits them) and the slots the books count them in
    (``Counts``)."""

    ok: int = 0
    truncated: int = 0
    failed: int = 0
    cancelled: int = 0
    not_sent: int = 0
    #: rows stopped mid-way (``--turns all``), and turns answered this run (every answer: a row
    #: without turns of its own is one turn)
    rows_partial: int = 0
    turns_done: int = 0
    requests: int = 0
    spent_usd: Decimal = _ZERO
    possibly_billed_usd: Decimal = _ZERO
    reconciled: int = 0
    reconciled_back_usd: Decimal = _ZERO
    reconciled_before: int = 0
    reconciled_before_back_usd: Decimal = _ZERO
    unsettleable: int = 0  # unknown costs with no generation id: they stay at their worst case
    cache_hits: int = 0  # answers of OpenRouter's response cache: billed nothing, counted $0


#: ``Figures``' names, each with what it starts from (0).
_FIGURES = {f.name: f.default for f in fields(Figures)}


class Counts:
    """The books' tally as the run goes: a slot for each of ``Figures``' figures, bumped in
    place (``figures`` gives them by name at the end), and what only the books keep: what this
    run settled of earlier runs' possibly billed money, rows finished and not sent per dataset,
    output tokens per dataset, each provider's figures, every answer's length."""

    __slots__ = (
        *_FIGURES,
        "possibly_billed_before_settled_usd",
        "done",
        "not_sent_by",
        "output_tokens",
        "providers",
        "lengths",
    )

    def __init__(self) -> None:
        for name, start in _FIGURES.items():
            setattr(self, name, start)
        self.possibly_billed_before_settled_usd = _ZERO
        self.done: dict[str, int] = {}  # rows finished, per dataset
        self.not_sent_by: dict[str, int] = {}
        self.output_tokens: dict[str, int] = {}  # this run, per dataset
        #: per provider, ``ProviderTally``'s figures by name as they are counted (``count_answer``)
        self.providers: dict[str, dict[str, Any]] = {}
        self.lengths = AnswerLengths()  # every answer's, this run

    if TYPE_CHECKING:  # a figure's type is ``Figures``'; here each reads as ``Any``

        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def figures(self) -> dict[str, Any]:
        """``Figures``' figures as counted so far, by name (the ``RunResult``'s keywords)."""
        return {name: getattr(self, name) for name in _FIGURES}
