"""Read a model's endpoints from OpenRouter's rendered provider page (``openrouter.ai/<id>/providers``).

The page is a Next.js App Router page. Its data is a React Server Components (Flight) stream spread
over ``<script>self.__next_f.push([1, "<chunk>"])</script>`` tags. Joined in order, the chunks form
records ``<hex id>:<payload>``: one per line for JSON and tagged payloads, while a text record
``<id>:T<hex byte length>,<text>`` is length-prefixed and may hold newlines. A value ``"$L1e"`` or
``"$1e"`` points at record ``1e``. Somewhere in the records sits a dehydrated React-Query cache whose
``["model-page", "providerTableEndpointStats", {...}]`` query holds the provider table as an array of
endpoints (provider slug = exact routing tag, quantization, prices in USD per token, p50 stats).

None of this is documented: it is reverse-engineered, as public scrapers describe it, and may
change with any deploy. So every miss raises ``SnapshotError`` instead of returning a partial
result, and the API (``/models/{id}/endpoints``) stays the primary source.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from bs4 import BeautifulSoup

from openrouter_probe.api.jsontext import mappings_in
from openrouter_probe.api.schema import ModelEndpoints
from openrouter_probe.errors import SnapshotError

__all__ = ["parse_provider_page"]

_PUSH = re.compile(r"__next_f\)?\.push\((\[.*\])\)\s*;?\s*\Z", re.S)
_REF = re.compile(r"\$L?([0-9a-fA-F]+)((?::[^:]+)*)")
_ROW_ID = re.compile(rb"[0-9a-fA-F]*")
_TEXT_LEN = re.compile(rb"T([0-9a-fA-F]+),")
_FLAGS = ("is_free", "is_deranked", "is_disabled", "is_hidden", "is_byok_only", "variant")


def parse_provider_page(html: str, *, model: str, source: str | None = None) -> ModelEndpoints:
    """Parse the endpoints of ``model`` out of the HTML of its OpenRouter provider page.

    ``source`` (a URL or file name) only serves error messages. Entries of another model, of a
    non-standard variant, and disabled or hidden ones are dropped; free, deranked and BYOK-only
    entries are kept with their page flags as extra keys. Raises ``SnapshotError`` when the page
    holds no provider table data or no usable endpoint.

    >>> parse_provider_page(html, model="moonshotai/kimi-k2.5").endpoints[0].tag  # doctest: +SKIP
    'chutes/int4'
    """
    where = f"the provider page for {model}" + (f" ({source})" if source else "")
    records = _split_records(_join_chunks(html))
    found = _find_query(records)
    if found is None:
        raise SnapshotError(
            f"{where} holds no providerTableEndpointStats data; OpenRouter may have changed the "
            f"page; use the API (`openrouter-probe endpoints {model}`) instead"
        )
    entries, permaslug, name = found
    endpoints = [e for e in (_to_endpoint(x, model, permaslug, name) for x in entries) if e]
    if not endpoints:
        raise SnapshotError(
            f"{where} lists {len(entries)} provider entries but none is a usable standard "
            f"endpoint of {model}; check the model id or use the API (`openrouter-probe "
            f"endpoints {model}`)"
        )
    return ModelEndpoints.model_validate({"id": model, "name": name, "endpoints": endpoints})


def _join_chunks(html: str) -> str:
    """Join the string chunks of every ``push([1, ...])`` in document order."""
    chunks: list[str] = []
    for script in BeautifulSoup(html, "html.parser").find_all("script"):
        match = _PUSH.search(script.get_text())
        if match is None:
            continue
        try:
            args = json.loads(match.group(1))
        except ValueError:
            continue
        if len(args) >= 2 and args[0] == 1 and isinstance(args[1], str):
            chunks.append(args[1])
    # Chunks are cut in UTF-16 units by the server, so a cut may fall inside a surrogate pair.
    return "".join(chunks).encode("utf-16", "surrogatepass").decode("utf-16")


def _split_records(stream: str) -> dict[str, Any]:
    """Split a Flight stream into ``{id: payload}``; JSON payloads parsed, text records as str."""
    data = stream.encode("utf-8", "surrogatepass")
    records: dict[str, Any] = {}
    pos = 0
    while pos < len(data):
        row_id = _ROW_ID.match(data, pos)
        assert row_id is not None  # the pattern matches the empty string
        colon = row_id.end()
        if colon >= len(data) or data[colon : colon + 1] != b":":
            pos = _next_line(data, pos)  # not a record: garbage or a blank line
            continue
        key = row_id.group().decode().lower()
        text = _TEXT_LEN.match(data, colon + 1)
        if text is not None:
            # Length-prefixed in UTF-8 bytes, unterminated, and may contain newlines.
            start = text.end()
            end = start + int(text.group(1), 16)
            records[key] = data[start:end].decode("utf-8", "replace")
            pos = end + 1 if data[end : end + 1] == b"\n" else end
            continue
        end = _next_line(data, colon)
        payload = data[colon + 1 : end].rstrip(b"\r\n")
        if payload[:1] in (b"{", b"["):
            with contextlib.suppress(ValueError):  # one broken record must not hide the rest
                records[key] = json.loads(payload)
        pos = end
    return records


def _next_line(data: bytes, pos: int) -> int:
    newline = data.find(b"\n", pos)
    return len(data) if newline < 0 else newline + 1


def _resolve(value: Any, records: dict[str, Any], active: frozenset[str] = frozenset()) -> Any:
    """Replace ``$L<id>``/``$<id>`` references by the records they name; ``active`` stops cycles."""
    if isinstance(value, dict):
        return {k: _resolve(v, records, active) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, records, active) for v in value]
    if not isinstance(value, str) or not value.startswith("$"):
        return value
    if value == "$undefined":
        return None
    if value.startswith("$$"):
        return value[1:]
    ref = _REF.fullmatch(value)
    key = ref.group(1).lower() if ref else None
    if key is None or key not in records or key in active:
        return value  # "$Sreact.suspense", "$@1", a missing row: not ours to interpret
    target = _resolve(records[key], records, active | {key})
    for step in filter(None, ref.group(2).split(":") if ref else []):
        if isinstance(target, dict):
            target = target.get(step)
        elif isinstance(target, list) and step.isdigit() and int(step) < len(target):
            target = target[int(step)]
        else:
            return None
    return target


def _find_query(records: dict[str, Any]) -> tuple[list[Any], str | None, str | None] | None:
    """Return the endpoint entries, the canonical slug and the model's display name, if present."""
    # Resolution only swaps strings for records, so the cache dict itself sits in some raw record:
    # find it there and resolve just that, instead of expanding the whole page tree per record.
    queries: list[dict[str, Any]] = []
    for node in mappings_in([r for r in records.values() if not isinstance(r, str)]):
        if "queries" not in node:
            continue
        try:
            items = _resolve(node["queries"], records)
        except RecursionError:
            continue
        if isinstance(items, list):
            queries += [q for q in items if isinstance(q, dict) and "queryKey" in q]
    best: tuple[int, list[Any], dict[str, Any]] | None = None
    for query in queries:
        qkey, state = query.get("queryKey"), query.get("state")
        if not isinstance(qkey, list) or not isinstance(state, dict):
            continue
        names = [k for k in qkey if isinstance(k, str)]
        rank = 0 if "providerTableEndpointStats" in names else 1
        if rank and not any("endpointStats" in k for k in names):
            continue
        if state.get("status") != "success" or not isinstance(state.get("data"), list):
            continue
        params = next((k for k in qkey if isinstance(k, dict)), {})
        if params.get("variant", "standard") != "standard":
            rank += 2  # a free or other variant table only when nothing better exists
        if best is None or rank < best[0]:
            best = (rank, state["data"], params)
    if best is None:
        return None
    permaslug = best[2].get("permaslug")
    permaslug = permaslug if isinstance(permaslug, str) else None
    return best[1], permaslug, _model_name(queries, permaslug)


def _model_name(queries: list[dict[str, Any]], permaslug: str | None) -> str | None:
    # The model card query carries the display name; match it by permaslug so a "related models"
    # query on the same page cannot lend its name.
    for query in queries:
        data = (query.get("state") or {}).get("data")
        if isinstance(data, dict) and permaslug and data.get("permaslug") == permaslug:
            name = data.get("name")
            if isinstance(name, str):
                return name
    return None


def _to_endpoint(
    entry: Any, model: str, permaslug: str | None, model_name: str | None
) -> dict[str, Any] | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("provider_slug"), str):
        return None
    variant_slug = entry.get("model_variant_slug")
    variant_perma = entry.get("model_variant_permaslug")
    # The query's permaslug only vouches for the entry when it is this model's (id plus date).
    ours = permaslug is not None and (permaslug == model or permaslug.startswith(model + "-"))
    other_model = variant_slug is not None and model not in (variant_slug, variant_perma)
    if other_model and not (ours and variant_slug == permaslug):
        return None
    if entry.get("variant", "standard") != "standard" or any(
        entry.get(flag) for flag in ("is_disabled", "is_hidden")
    ):
        return None
    display = entry.get("provider_display_name") or entry.get("provider_name")
    out: dict[str, Any] = {
        "name": f"{display} | {variant_perma or permaslug or model}",
        "model_id": variant_slug or model,
        "provider_name": display,
        "tag": entry["provider_slug"],
        "quantization": entry.get("quantization"),
        "pricing": entry.get("pricing") or {},
    }
    if model_name:
        out["model_name"] = model_name
    for key in ("context_length", "max_completion_tokens", "max_prompt_tokens"):
        if key in entry:
            out[key] = entry[key]
    if isinstance(entry.get("supported_parameters"), list):
        out["supported_parameters"] = entry["supported_parameters"]
    stats = entry.get("stats")
    if isinstance(stats, dict):
        if stats.get("p50_latency") is not None:
            out["latency_last_30m"] = {"p50": stats["p50_latency"]}
        if stats.get("p50_throughput") is not None:
            out["throughput_last_30m"] = {"p50": stats["p50_throughput"]}
    out.update({k: entry[k] for k in _FLAGS if k in entry})
    if "id" in entry:
        out["endpoint_id"] = entry["id"]
    return out
