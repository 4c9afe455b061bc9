"""Server tools: the ``tools`` entries of type ``openrouter:*`` that OpenRouter runs itself, and
what they may add to a bill (``server_tools``), or why it cannot be bounded (``unbounded``).

A server tool is billed in ``usage.cost`` beside the tokens (OPENROUTER.md 19): a web search adds
its results to the prompt and a fee per result (``openrouter:web_search``, recorded 2026-08: 8,174
prompt tokens of results for ``max_uses: 1``, cost $0.0133 where the tokens alone come to about a
quarter of it); an advisor adds its own model's tokens at that model's price
(``openrouter:advisor``, 2026-07). One reading serves the spend cap's worst case
(``run.money.spend.request_shape``), the rows' check (``generation.params``) and the fake server's
bill (``fake.server_tools``).

``openrouter:web_search`` is bounded by ``parameters.max_uses`` searches of
``parameters.max_results`` results (each at the dearer of ``RESULT_USD`` and the endpoint's
``web_search`` price, the results in the prompt up to the largest context), ``openrouter:datetime``
adds ``DATETIME_TOKENS``; a search without ``max_uses``, ``openrouter:advisor`` (its model decides
how many consultations, each billed at that model's price) and any other ``openrouter:*`` cannot be
bounded: the row is refused before it is sent, with the line (docs/wire.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from openrouter_probe.errors import Message

__all__ = [
    "ADVISOR",
    "DATETIME",
    "DATETIME_TOKENS",
    "DEFAULT_RESULTS",
    "PREFIX",
    "RESULT_USD",
    "WEB_SEARCH",
    "ServerTools",
    "server_tools",
    "unbounded",
]

PREFIX = "openrouter:"
WEB_SEARCH = "openrouter:web_search"
DATETIME = "openrouter:datetime"
ADVISOR = "openrouter:advisor"
#: What one web search result costs at most through OpenRouter's default engine (Exa: $4 per
#: 1,000 results, OpenRouter's web search docs); an endpoint's own ``web_search`` price (its
#: native search) is used instead where it is dearer.
RESULT_USD = Decimal("0.004")
#: Results per search when ``max_results`` is not given (OpenRouter's default).
DEFAULT_RESULTS = 5
#: Prompt tokens the date adds, at most.
DATETIME_TOKENS = 64


@dataclass(frozen=True, slots=True)
class ServerTools:
    """What a request's server tools may add: ``searches`` (web searches at most), ``results``
    (search results at most, over all searches) and ``prompt_tokens`` (besides the results)."""

    searches: int = 0
    results: int = 0
    prompt_tokens: int = 0

    def __bool__(self) -> bool:
        return bool(self.searches or self.results or self.prompt_tokens)


def _count(value: Any) -> int | None:
    """A positive whole number, else ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _kind(tool: Any) -> str | None:
    kind = tool.get("type") if isinstance(tool, Mapping) else None
    return kind if isinstance(kind, str) and kind.startswith(PREFIX) else None


def unbounded(tools: Sequence[Any] | None) -> Message | None:
    """Why a request's server tools cannot be bounded (one line, saying how to bound them), or
    ``None`` when they can (or there are none)."""
    for i, tool in enumerate(tools or ()):
        kind = _kind(tool)
        if kind is None or kind == DATETIME:
            continue
        raw = tool.get("parameters")
        parameters: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        if kind == WEB_SEARCH:
            if _count(parameters.get("max_uses")) is None:
                return Message(
                    "server-tool-uses",
                    "tools[{i:d}] is {kind:s} without parameters.max_uses: its searches (a fee "
                    "each, and their results in the prompt) have no bound; set "
                    "parameters.max_uses (e.g. 1)",
                    i=i,
                    kind=kind,
                )
            continue
        if kind == ADVISOR:
            return Message(
                "server-tool-advisor",
                "tools[{i:d}] is {kind:s}: each consultation bills its own model's tokens at that "
                "model's price, and nothing in the request bounds how many a request makes (the "
                "model decides; OpenRouter documents no max_uses for it); remove it from the row "
                "to send it under the cap",
                i=i,
                kind=kind,
            )
        return Message(
            "server-tool-unbounded",
            "tools[{i:d}] is the server tool {kind:s}, whose cost this tool cannot bound (it is "
            "billed in usage.cost beside the tokens); remove it from the row, or use "
            "{web_search:s} with parameters.max_uses",
            i=i,
            kind=kind,
            web_search=WEB_SEARCH,
        )
    return None


def server_tools(tools: Sequence[Any] | None) -> ServerTools:
    """What ``tools`` (a request's ``tools``) may add to its bill. A server tool ``unbounded``
    refuses is a ``ValueError`` here (its row should never have been sent)."""
    problem = unbounded(tools)
    if problem is not None:
        raise ValueError(problem)
    searches = results = prompt_tokens = 0
    for tool in tools or ():
        kind = _kind(tool)
        if kind == DATETIME:
            prompt_tokens += DATETIME_TOKENS
        elif kind == WEB_SEARCH:
            parameters = tool.get("parameters") or {}
            uses = _count(parameters.get("max_uses")) or 0
            searches += uses
            results += uses * (_count(parameters.get("max_results")) or DEFAULT_RESULTS)
    return ServerTools(searches, results, prompt_tokens)
