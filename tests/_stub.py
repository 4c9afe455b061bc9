"""A tiny loopback aiohttp.web server for the transport's fault tests (tests only, not the fake).

It answers ``/api/v1/chat/completions`` from a script: for request ``n`` the script returns an
action (``ok``, ``status`` with a real OpenRouter error body, ``drop`` mid-body, ``stall``,
``midstream`` error, ``error200``). Success bodies are the real Inceptron capture's (non-streaming,
with its whitespace padding) and the real ModelRun stream, so every answer has a real shape. It
also serves the bundled snapshot's endpoints and a ``/key`` body.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web

from openrouter_probe.rules.snapshot import bundled_snapshot
from tests.conftest import CAPTURES

Action = tuple[Any, ...]

INCEPTRON = yaml.safe_load((CAPTURES / "kimi-k2.5-chat-inceptron.yaml").read_text())[
    "interactions"
][0]["response"]["body"]
MODELRUN = yaml.safe_load((CAPTURES / "kimi-k2.5-stream-modelrun.yaml").read_text())[
    "interactions"
][0]["response"]["body"]
GROQ_429 = yaml.safe_load((CAPTURES / "kimi-k2-0905" / "simple_kimi-k2_groq.yaml").read_text())[
    "interactions"
][0]["response"]["body"]


@dataclass
class Stub:
    script: Callable[[dict[str, Any], int], Action]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    base_url: str = ""
    key_remaining: float | None = 1000.0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        action = self.script(body, len(self.requests))
        kind = action[0]
        if kind == "status":
            _, status, payload, *extra = action
            headers = extra[0] if extra else {}
            return web.Response(
                status=status, text=payload, content_type="application/json", headers=headers
            )
        stream = bool(body.get("stream"))
        text = MODELRUN if stream else INCEPTRON
        if kind == "error200":
            text = json.dumps(
                {
                    "id": "gen-x",
                    "provider": "Inceptron",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "error",
                            "error": {"code": 502, "message": "Provider returned error"},
                        }
                    ],
                }
            )
        if kind == "midstream":
            cut = text.index("data: ", len(text) // 2)
            error = {
                "id": "gen-x",
                "object": "chat.completion.chunk",
                "provider": "ModelRun",
                "error": {"code": 502, "message": "Upstream error mid-stream"},
                "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
            }
            text = text[:cut] + f"data: {json.dumps(error)}\n\n"
        response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream" if stream else "application/json",
                "X-Generation-Id": "gen-header",
            },
        )
        await response.prepare(request)
        data = text.encode()
        if kind == "drop":
            await response.write(data[: len(data) // 2])
            assert request.transport is not None
            request.transport.close()  # the connection dies mid-body
            return response
        if kind == "stall":
            await response.write(data[:20])
            await self.release.wait()  # never answers the rest: the client's read timeout fires
            return response
        await response.write(data)
        await response.write_eof()
        return response

    async def endpoints(self, request: web.Request) -> web.Response:
        return web.json_response({"data": bundled_snapshot().data})

    async def key(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "data": {
                    "label": "test",
                    "limit": 1000,
                    "limit_remaining": self.key_remaining,
                    "usage": 0,
                }
            }
        )


@contextlib.asynccontextmanager
async def serve(
    script: Callable[[dict[str, Any], int], Action], **options: Any
) -> AsyncIterator[Stub]:
    stub = Stub(script, **options)
    app = web.Application()
    app.router.add_post("/api/v1/chat/completions", stub.chat)
    app.router.add_get("/api/v1/models/{author}/{slug}/endpoints", stub.endpoints)
    app.router.add_get("/api/v1/key", stub.key)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    stub.base_url = f"http://127.0.0.1:{port}/api/v1"
    try:
        yield stub
    finally:
        stub.release.set()
        await runner.cleanup()
