"""``repr(RunPlan)`` once held the API key. No options object, nor an object that holds
the key to send it, may show it in its ``repr`` or ``str`` (a log line, a traceback's locals, a
notebook's echo)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from openrouter_probe.api.batches import BatchClient
from openrouter_probe.api.client import Client
from openrouter_probe.generation.manifest import SourceOptions
from openrouter_probe.run.config import RunPlan
from openrouter_probe.run.send.batch_plan import BatchOptions
from openrouter_probe.run.send.request import RequestBuilder
from openrouter_probe.run.send.transport import HttpTransport

MARK = "sk-or-v1-" + "MARKEDKEY0123456789abcdef"  # split: no key-shaped literal in the tree


def _objects(tmp_path: Path) -> dict[str, Any]:
    options = RunPlan.resolve(
        command="generate", out=tmp_path / "out.jsonl", api_key=MARK, budget_usd=1
    )
    transport = HttpTransport(options.connection, limit=4)
    return {
        "RunPlan": options,
        "RunPlan replaced": dataclasses.replace(options, concurrency=8),
        "BatchOptions": BatchOptions(),
        "RequestBuilder": RequestBuilder(model="m", provider_json="{}"),
        "SourceOptions": SourceOptions(),
        "Client": Client(api_key=MARK, base_url="http://127.0.0.1:9/api/v1"),
        "BatchClient": BatchClient(api_key=MARK, base_url="http://127.0.0.1:9/api/v1"),
        "HttpTransport": transport,
    }


def test_no_options_object_shows_the_key(tmp_path: Path) -> None:
    async def scenario() -> dict[str, tuple[str, str]]:  # the transport wants a running loop
        return {name: (repr(o), str(o)) for name, o in _objects(tmp_path).items()}

    shown = asyncio.run(scenario())
    assert len(shown) == 8
    for name, (as_repr, as_str) in shown.items():
        assert MARK not in as_repr, name
        assert MARK not in as_str, name
        assert MARK[8:20] not in as_repr + as_str, name  # not even a part of it
    assert "concurrency=8" in shown["RunPlan replaced"][0]  # a repr that still says things
    options = _objects(tmp_path)["RunPlan"]
    assert options.connection.api_key == MARK  # redacted from the repr, not lost
