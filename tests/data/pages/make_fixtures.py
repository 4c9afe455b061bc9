"""Regenerate the provider-page fixtures in this directory from the Kimi K2.5 scenario.

The pages are built to the structure public scrapers describe (OPENROUTER.md section 11): a Next.js
App Router page whose data is a Flight stream in ``self.__next_f.push([1, "<chunk>"])`` scripts. They
are not captures of the live page. Output is deterministic.

Usage: ``python tests/data/pages/make_fixtures.py [path/to/kimi-k2.5-endpoints.json]`` (default:
``../shared/scenarios/kimi-k2.5-endpoints.json`` relative to the repository root).
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DEFAULT_SCENARIO = REPO.parent / "shared" / "scenarios" / "kimi-k2.5-endpoints.json"
PERMASLUG = "moonshotai/kimi-k2.5-0127"
NOTE = (
    "<!-- built by openrouter-probe to the structure public scrapers describe (OPENROUTER.md §11); "
    "not a capture of the live page. Regenerate with tests/data/pages/make_fixtures.py -->\n"
)
#: The provider whose record straddles two push chunks (the split falls inside its display name).
SPLIT_PROVIDER = "SiliconFlow"
DESCRIPTION = (
    "Kimi K2.5 is Moonshot AI's native multimodal reasoning model.\n\n"
    "- Native INT4 weights — quantization-aware training\n"
    "- 262K context · text and image input\n"
)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def js_string(chunk: str) -> str:
    """Escape a chunk as Next.js does: a JSON string, safe inside <script>."""
    text = dumps(chunk)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def entry(ep: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    lat, thr = ep.get("latency_last_30m"), ep.get("throughput_last_30m")
    item = {
        "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"openrouter-probe/{ep['tag']}/{PERMASLUG}")),
        "name": ep["name"],
        "provider_name": ep["provider_name"],
        "provider_display_name": ep["provider_name"],
        "provider_slug": ep["tag"],
        "variant": "standard",
        "model_variant_slug": ep["model_id"],
        "model_variant_permaslug": PERMASLUG,
        "quantization": ep["quantization"],
        "context_length": ep["context_length"],
        "max_completion_tokens": ep["max_completion_tokens"],
        "max_prompt_tokens": "$undefined",
        "supported_parameters": ep["supported_parameters"],
        "is_free": False,
        "is_deranked": False,
        "is_disabled": False,
        "is_hidden": False,
        "is_byok_only": False,
        "pricing": {k: v for k, v in ep["pricing"].items() if k != "discount"},
        "stats": None
        if lat is None
        else {
            "p50_throughput": thr["p50"] if thr else None,
            "p50_latency": lat["p50"],
            "throughput_request_count": 1000 + lat["p50"] % 977,
            "window_minutes": 30,
        },
    }
    item.update(overrides)
    return item


def page(title: str, chunks: list[str], body: str = "") -> str:
    scripts = ["<script>(self.__next_f=self.__next_f||[]).push([0])</script>"]
    scripts += [f"<script>self.__next_f.push([1,{js_string(c)}])</script>" for c in chunks]
    scripts.append("<script>self.__next_f.push([2,null])</script>")
    return (
        NOTE + '<!DOCTYPE html><html lang="en"><head><meta charSet="utf-8"/>'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>'
        '<link rel="stylesheet" href="/_next/static/css/4f1c2a.css" data-precedence="next"/>'
        f'<title>{title}</title></head><body><div id="root"><header>OpenRouter</header>'
        f"<main>{body}</main></div>\n" + "\n".join(scripts) + "\n</body></html>\n"
    )


def shell_records(h1: str) -> list[str]:
    return [
        '0:{"P":null,"b":"Xq3v9","p":"","c":["","moonshotai","kimi-k2.5","providers"],'
        '"i":false,"f":[[["",{"children":["__PAGE__",{}]},"$undefined","$undefined",true],'
        '["",["$","$1","c",{"children":["$L5"]}],null],null]],"m":"$undefined","G":["$7",[]],'
        '"s":false,"S":true}',
        '1:"$Sreact.fragment"',
        '2:I[71832,["177","static/chunks/app/layout-1a2b.js"],"default"]',
        ':HL["/_next/static/css/4f1c2a.css","style"]',
        '3:I[39275,[],"HydrationBoundary"]',
        "4:T" + format(len(DESCRIPTION.encode()), "x") + "," + DESCRIPTION,
        "5:"
        + dumps(
            [
                "$",
                "div",
                None,
                {
                    "className": "flex flex-col gap-4",
                    "children": [
                        ["$", "h1", None, {"children": h1}],
                        ["$", "div", None, {"className": "prose", "children": "$4"}],
                        ["$", "$L3", None, {"state": "$L1e", "children": "$L6"}],
                    ],
                },
            ]
        ),
        '6:["$","$Sreact.suspense",null,{"fallback":null,"children":"$@8"}]',
        '7:I[55801,["931","static/chunks/app/not-found.js"],"default"]',
    ]


def kimi_stream(scenario: dict[str, Any], *, with_table: bool = True) -> list[str]:
    data = scenario["data"]
    endpoints = data["endpoints"]
    entries = [entry(ep) for ep in endpoints]
    other = entry(
        endpoints[0],
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, "openrouter-probe/other-model")),
        name="Chutes | moonshotai/kimi-k2-thinking-20251106",
        model_variant_slug="moonshotai/kimi-k2-thinking",
        model_variant_permaslug="moonshotai/kimi-k2-thinking-20251106",
    )
    disabled = entry(
        {**endpoints[0], "provider_name": "Groq", "tag": "groq", "quantization": None},
        name="Groq | moonshotai/kimi-k2.5-0127",
        is_disabled=True,
        stats=None,
    )
    entries[3:3] = [other]
    entries[8:8] = [disabled]
    queries = [
        {
            "queryKey": ["model-page", "model", {"permaslug": PERMASLUG}],
            "queryHash": dumps(["model-page", "model", {"permaslug": PERMASLUG}]),
            "state": {
                "status": "success",
                "data": {
                    "slug": data["id"],
                    "permaslug": PERMASLUG,
                    "name": data["name"],
                    "created": data["created"],
                },
                "dataUpdatedAt": 1790000000000,
            },
        },
        {
            "queryKey": [
                "model-page",
                "providerTableEndpointStats",
                {"permaslug": PERMASLUG, "variant": "standard"},
            ],
            "state": {"status": "success", "data": "$1f", "dataUpdatedAt": 1790000000000},
        },
        {
            "queryKey": ["model-page", "uptime", {"permaslug": PERMASLUG}],
            "state": {"status": "pending", "data": "$undefined"},
        },
    ]
    if not with_table:
        del queries[1]
    return [
        *shell_records(data["name"]),
        *(["1f:" + dumps(entries)] if with_table else []),
        "1e:" + dumps({"mutations": [], "queries": queries}),
        '8:["$","p",null,{"children":"Providers for Kimi K2.5"}]',
    ]


def chunked(records: list[str], split_inside: str | None = None) -> list[str]:
    """Group records into push chunks; cut one chunk inside ``split_inside`` (a string value)."""
    # Text rows are length-prefixed and, as in React's Flight output, not newline-terminated.
    rows = [r if re.match(r"[0-9a-f]*:T", r) else r + "\n" for r in records]
    stream = "".join(rows)
    ends = list(itertools.accumulate(len(r) for r in rows))
    cuts = [0, *ends[2::3]]  # three records to a push, as a streamed response flushes them
    if split_inside is not None:
        at = stream.index(split_inside) + len(split_inside) // 2
        cuts.append(at)
    cuts = [*sorted(set(cuts)), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(cuts) if b > a]


def main(argv: list[str]) -> None:
    scenario_path = Path(argv[1]) if len(argv) > 1 else DEFAULT_SCENARIO
    scenario = json.loads(scenario_path.read_text(encoding="utf-8"))
    title = "Kimi K2.5 - API, Providers, Stats | OpenRouter"
    chunks = chunked(kimi_stream(scenario), split_inside=f'"{SPLIT_PROVIDER}"')
    outputs = {
        "kimi-k2.5-providers.html": page(title, chunks, "<h2>Providers for Kimi K2.5</h2>"),
        "no-data.html": page(title, chunked(kimi_stream(scenario, with_table=False))),
    }
    for name, text in outputs.items():
        (HERE / name).write_text(text, encoding="utf-8")
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main(sys.argv)
