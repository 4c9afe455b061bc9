"""Measure the fake OpenRouter: requests/s on one core, and memory with 2000 open streams.

Each server runs in its own process pinned to one CPU; the load comes from another process (pinned
to another CPU when there is one) speaking raw HTTP/1.1 keep-alive over asyncio streams, which costs
far less per request than any HTTP client library, so the server is what saturates. Every figure is
printed beside the same measurement of a bare ``aiohttp.web`` handler that returns a fixed small JSON
body (and, for memory, a bare handler that holds a stream open), with the ratio.

    python benchmarks/fake_server.py [--clients 500] [--seconds 5] [--streams 2000]

Throughput: non-streaming chat completions at zero latency (``speed=0``), 500 concurrent clients,
all sending the same small request with the same provider block (one cached routing decision, as a
generator's run has). Memory: resident set size of the server process before and after 2000 clients
each hold a stream open (the fake's streams stall mid-way through a ``stall`` fault).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import socket
import time
from typing import Any

TARGET_RPS = 3000
BODY = json.dumps(
    {
        "model": "moonshotai/kimi-k2.5",
        "messages": [{"role": "user", "content": "What is 37 * 41?"}],
        "max_tokens": 200,
        "provider": {"ignore": ["fireworks", "baseten"]},
    }
).encode()


def _pin(cpu: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_fake(port: int, ready: Any, options: dict[str, Any]) -> None:
    _pin(0)
    from aiohttp import web

    from openrouter_probe.fake.app import FakeOpenRouter
    from openrouter_probe.rules.snapshot import bundled_snapshot

    app = FakeOpenRouter(bundled_snapshot(), **options).app()
    ready.set()
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=4096)


def _run_bare(port: int, ready: Any, options: dict[str, Any]) -> None:
    _pin(0)
    from aiohttp import web

    size = int(options.get("body_bytes", 0))
    payload = json.dumps({"id": "gen-1", "choices": [{"message": {"content": "1517"}}]}).encode()
    if size > len(payload):
        # the same JSON, padded with whitespace as OpenRouter pads, to a fake answer's size
        payload = b" " * (size - len(payload)) + payload

    async def hello(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=payload, content_type="application/json")

    async def hold(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b": OPENROUTER PROCESSING\n\n")
        await asyncio.sleep(3600)
        return response

    app = web.Application()
    app.router.add_post("/api/v1/chat/completions", hello)
    app.router.add_post("/hold", hold)
    ready.set()
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=4096)


def _request(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-bench\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status


async def _load(
    port: int, clients: int, seconds: float, pid: int = 0
) -> tuple[int, int, float, float]:
    request = _request("/api/v1/chat/completions", BODY)
    done = errors = 0
    stop_at = 0.0

    async def client() -> None:
        nonlocal done, errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.perf_counter() < stop_at:
            writer.write(request)
            status = await _read_response(reader)
            if status == 200:
                done += 1
            else:
                errors += 1
        writer.close()

    stop_at = time.perf_counter() + 1.0  # warm-up: connections, caches
    await asyncio.gather(*(client() for _ in range(clients)))
    done = errors = 0
    cpu0 = _cpu_seconds(pid) if pid else 0.0
    start = time.perf_counter()
    stop_at = start + seconds
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - start
    cpu = (_cpu_seconds(pid) - cpu0) if pid else 0.0
    return done, errors, wall, cpu


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _fake_body_bytes() -> int:
    """The size of the fake's answer to the benchmark request (for a baseline of equal size)."""
    import requests

    from openrouter_probe.fake.server import serve

    with serve(speed=0) as fake:
        r = requests.post(
            f"{fake.base_url}/chat/completions",
            data=BODY,
            headers={"Authorization": "Bearer sk-bench", "Content-Type": "application/json"},
            timeout=30,
        )
    return len(r.content)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _start(target: Any, options: dict[str, Any]) -> tuple[mp.Process, int]:
    port = _free_port()
    ready = mp.get_context("spawn").Event()
    proc = mp.get_context("spawn").Process(target=target, args=(port, ready, options), daemon=True)
    proc.start()
    ready.wait(60)
    for _ in range(200):  # wait for the port to accept
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, port


def _throughput(
    target: Any, options: dict[str, Any], clients: int, seconds: float
) -> dict[str, float]:
    proc, port = _start(target, options)
    try:
        done, errors, wall, cpu = asyncio.run(_load(port, clients, seconds, proc.pid or 0))
    finally:
        proc.terminate()
        proc.join()
    # On a shared machine the wall-clock rate depends on what else runs; the server's own CPU
    # time per request does much less, and 1 / (CPU per request) is what one core can serve.
    return {
        "rps": done / wall,
        "errors": errors,
        "cpu_ms": cpu * 1000 / max(done, 1),
        "core_rps": done / cpu if cpu else 0.0,
    }


async def _hold_streams(port: int, path: str, body: bytes, n: int) -> list[Any]:
    conns = []
    request = _request(path, body)
    sem = asyncio.Semaphore(200)

    async def one() -> None:
        async with sem:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            await reader.readuntil(b"OPENROUTER PROCESSING")
            conns.append((reader, writer))

    await asyncio.gather(*(one() for _ in range(n)))
    return conns


def _memory(
    target: Any, options: dict[str, Any], path: str, body: bytes, n: int
) -> dict[str, float]:
    proc, port = _start(target, options)
    pid = proc.pid or 0
    try:

        async def run() -> tuple[float, float]:
            # one short request first so that lazily imported code is resident before measuring
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            await asyncio.sleep(0.5)
            before = _rss_mb(pid)
            conns = await _hold_streams(port, path, body, n)
            await asyncio.sleep(1.0)
            after = _rss_mb(pid)
            for _, w in conns:
                w.close()
            return before, after

        before, after = asyncio.run(run())
    finally:
        proc.terminate()
        proc.join()
    return {"before_mb": before, "after_mb": after, "per_stream_kb": (after - before) * 1024 / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--streams", type=int, default=2000)
    args = parser.parse_args()
    _pin(1)

    bare = _throughput(_run_bare, {}, args.clients, args.seconds)
    fake = _throughput(_run_fake, {"speed": 0}, args.clients, args.seconds)
    sized = _throughput(_run_bare, {"body_bytes": _fake_body_bytes()}, args.clients, args.seconds)
    print(f"throughput, {args.clients} clients, one server core, speed 0, non-streaming:")
    print(
        f"  {'server':32} {'req/s':>7} {'CPU ms/req':>10} {'req/s/core':>10} {'x bare':>7} "
        f"{'errors':>6}  target"
    )
    rows = (
        ("bare aiohttp.web JSON handler", bare),
        (f"bare, same {_fake_body_bytes()}-byte body", sized),
        ("fake OpenRouter", fake),
    )
    for name, m in rows:
        verdict = ""
        if m is fake:
            verdict = "ok" if m["core_rps"] >= TARGET_RPS else f"UNDER {TARGET_RPS}/s"
        print(
            f"  {name:32} {m['rps']:7.0f} {m['cpu_ms']:10.3f} {m['core_rps']:10.0f} "
            f"{m['core_rps'] / bare['core_rps']:7.2f} {m['errors']:6.0f}  {verdict}"
        )

    stream_body = json.dumps(
        {
            "model": "moonshotai/kimi-k2.5",
            "messages": [{"role": "user", "content": "What is 37 * 41?"}],
            "max_tokens": 400,
            "stream": True,
        }
    ).encode()
    bare_mem = _memory(_run_bare, {}, "/hold", b"{}", args.streams)
    fake_mem = _memory(
        _run_fake,
        {"speed": 0, "faults": "stall=1/3600"},
        "/api/v1/chat/completions",
        stream_body,
        args.streams,
    )
    print(f"memory, {args.streams} open streams (server RSS):")
    print(f"  {'server':34} {'before MB':>9} {'after MB':>9} {'KB/stream':>9} {'x bare':>7}")
    for name, m in (
        ("bare aiohttp.web held stream", bare_mem),
        ("fake OpenRouter (stalled)", fake_mem),
    ):
        ratio = m["per_stream_kb"] / bare_mem["per_stream_kb"] if bare_mem["per_stream_kb"] else 0
        print(
            f"  {name:34} {m['before_mb']:9.1f} {m['after_mb']:9.1f} "
            f"{m['per_stream_kb']:9.1f} {ratio:7.2f}"
        )


if __name__ == "__main__":
    main()
