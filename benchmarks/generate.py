"""Client CPU per request and peak memory of `generate`, beside a bare aiohttp loop and the openai SDK.

The fake OpenRouter (``speed=0``) serves in this process's background thread; each client runs in
its own child process, which measures itself: CPU (user + system, ``getrusage``) from just before its
work starts to its end, per request answered, and its peak RSS (``VmHWM``: its own, not the
parent's) with the RSS after imports beside it. Every client sends the same body (the policy's model and provider block, one user
message, ``max_tokens``) with the same number of requests in flight:

- ``bare``: aiohttp, one session, ``TCPConnector(limit=C)``, C workers pulling from a list; reads each
  body and ``json.loads`` it (non-streaming) or reads the whole stream (streaming). The floor.
- ``reader``: the bare loop that also reads each answer, as any client that keeps it must: the
  body's ``json.loads`` (non-streaming), or every event of the stream split off and
  ``json.loads``-ed, its content and reasoning joined, its usage kept (streaming). The floor of
  reading a stream: ``bare`` parses no event.
- ``generate``: ``openrouter_probe.generate`` (the function) with its full work: prompts file, resume check, the cap
  (``--budget-usd``), parsing and classification, one flushed output line per row.
- ``openai``: ``AsyncOpenAI`` (httpx inside), ``max_retries=0``, C workers, iterating streams.

Targets (issue 8): ``generate`` ≤ 1.5x the bare loop's CPU per request and peak memory, and at least
10x cheaper per request than the openai SDK. Ratios are printed; nothing is asserted.

    python benchmarks/generate.py [--requests 20000] [--concurrency 2000] [--openai-requests 2000]
        [--modes nonstream,stream,stream500] [--clients bare,generate,openai]
        [--against OTHER_CHECKOUT --rounds 3] [--whole-process]
    python benchmarks/generate.py --latency-s 3 --requests 6000 --concurrency 2000
        --clients bare,generate [--against OTHER_CHECKOUT --rounds 2]

``--against PATH`` adds a client ``before``: ``generate`` from another checkout of the project (its
``openrouter_probe`` on ``PYTHONPATH``), run side by side with this one against the same fake
server; ``--rounds N`` alternates every client N times (bare, generate, before, bare, ...) and
prints the median of each (the shared machine's noise moves single runs by 20%).

``--latency-s L`` measures wall time instead, the time a user feels: a loopback stub in this
process answers every chat request after exactly L seconds with a 200-token answer (OpenRouter's
body shape, Chutes' prices; as OpenRouter does, the 200 status and whitespace padding at once, the
body when the answer is made; ``/key`` and ``/credits`` an account of $1,000,000 with no in-flight
limit), and each client sends ``--requests`` rows at ``--concurrency`` (non-streaming; ``generate``
on the bundled snapshot). Printed per client: the wall time of its work and of its whole process
(interpreter start, imports, prompts, journal and output included), the ratio to the bare loop's,
the most requests the stub held at once within the first two round trips (2L from the first
request) and in all, and the whole process's CPU.

``--whole-process`` (with or without ``--latency-s``) takes each client's CPU and wall time from
this parent around the child (``RUSAGE_CHILDREN``): interpreter start and imports count, as a user
pays them.

Modes: ``nonstream`` and ``stream`` answer ~24 tokens (``--max-tokens 32``); ``stream500`` answers
1,000 tokens in 500 chunks of 2 (``max_tokens`` 1000), with a fifth of ``--requests``: the shape of a
long reasoning answer, where parsing the chunks is most of the client's work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "policies" / "kimi-k2.5.yaml"
KEY = "sk-bench-not-real"


def _peak_rss_kb(usage: resource.struct_rusage) -> int:
    """This process's own peak RSS: ``VmHWM``. Not ``ru_maxrss``, which Linux carries over from
    the parent through fork and exec: a child of the parent that runs the fake server (grown to
    hundreds of MB by 2,000 streams) reported the parent's peak, not its own."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return usage.ru_maxrss


def _rss_kb() -> int:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def _body(i: int, *, provider: Any, max_tokens: int, stream: bool) -> bytes:
    return json.dumps(
        {
            "model": "moonshotai/kimi-k2.5",
            "provider": provider,
            "stream": stream,
            "messages": [{"role": "user", "content": f"question {i}: what is {i} * 41?"}],
            "max_tokens": max_tokens,
        },
        separators=(",", ":"),
    ).encode()


# -- the clients (each runs in a child process) ----------------------------------------------------


async def _loop(args: argparse.Namespace, read: Any) -> int:
    """C workers on one aiohttp session sending the bodies in turn; ``read(body)`` for each 200
    (``None``: read nothing more than the bytes)."""
    import aiohttp
    import yaml

    provider = yaml.safe_load(POLICY.read_text())["provider"]
    bodies = [
        _body(i, provider=provider, max_tokens=args.max_tokens, stream=args.stream)
        for i in range(args.requests)
    ]
    url = args.base_url + "/chat/completions"
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    done = 0
    it = iter(bodies)
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=300)
    async with aiohttp.ClientSession(connector=connector, headers=headers, timeout=timeout) as s:

        async def worker() -> None:
            nonlocal done
            for body in it:
                async with s.post(url, data=body) as response:
                    data = await response.read()
                if response.status == 200:
                    if read is not None:
                        read(data)
                    done += 1

        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    return done


async def _bare(args: argparse.Namespace) -> int:
    """The floor: a body ``json.loads``-ed, a stream's bytes read whole (see the module)."""
    return await _loop(args, None if args.stream else json.loads)


def _read_stream(data: bytes) -> tuple[str, str, Any]:
    """A stream read as plainly as it can be: each ``data:`` event decoded, its deltas joined."""
    content: list[str] = []
    reasoning: list[str] = []
    usage = None
    for line in data.split(b"\n"):
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning") or "")
        usage = event.get("usage") or usage
    return "".join(content), "".join(reasoning), usage


def _read_body(data: bytes) -> Any:
    return json.loads(data)["choices"][0]["message"]


async def _reader(args: argparse.Namespace) -> int:
    """``bare``, reading each answer (see the module)."""
    return await _loop(args, _read_stream if args.stream else _read_body)


async def _generate(args: argparse.Namespace) -> int:
    from openrouter_probe.generation import generate

    summary = await generate(
        args.prompts,
        policy=POLICY,
        out=args.out,
        budget_usd=1_000_000,
        concurrency=args.concurrency,
        max_tokens=args.max_tokens,
        stream=args.stream,
        base_url=args.base_url,
        api_key=KEY,
        # the latency stub serves no catalogue: the bundled snapshot prices the run
        **({"snapshot": "bundled"} if args.latency_s else {}),
    )
    return summary.ok + summary.truncated


async def _openai(args: argparse.Namespace) -> int:
    import openai
    import yaml

    try:  # openai >= 3 ships on httpx2; older releases on httpx
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]

    provider = yaml.safe_load(POLICY.read_text())["provider"]
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    client = openai.AsyncOpenAI(
        base_url=args.base_url,
        api_key=KEY,
        max_retries=0,
        timeout=300,
        http_client=openai.DefaultAsyncHttpxClient(limits=limits),
    )
    done = 0
    it = iter(range(args.requests))

    async def worker() -> None:
        nonlocal done
        for i in it:
            messages: Any = [{"role": "user", "content": f"question {i}: what is {i} * 41?"}]
            if args.stream:
                stream = await client.chat.completions.create(
                    model="moonshotai/kimi-k2.5",
                    messages=messages,
                    max_tokens=args.max_tokens,
                    stream=True,
                    extra_body={"provider": provider},
                )
                async for _ in stream:
                    pass
            else:
                await client.chat.completions.create(
                    model="moonshotai/kimi-k2.5",
                    messages=messages,
                    max_tokens=args.max_tokens,
                    extra_body={"provider": provider},
                )
            done += 1

    async with client:
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    return done


def child(args: argparse.Namespace) -> None:
    import aiohttp  # noqa: F401  (imports count as start-up, not per-request work)
    import yaml  # noqa: F401

    if args.client == "generate":
        # The library's modules are start-up too: generate imports them on first use. Only
        # those: a module its run does not import (the dry run's budget, the policy compiler)
        # would be counted in --whole-process as work the run never does.
        import openrouter_probe.api.client
        import openrouter_probe.generation
        import openrouter_probe.policy.lint
        import openrouter_probe.rules.snapshot  # noqa: F401
    if args.client == "openai":
        import openai  # noqa: F401
    rss_after_imports = _rss_kb()
    clients = {"bare": _bare, "reader": _reader, "generate": _generate, "openai": _openai}
    run = clients[args.client]
    start = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter()
    done = asyncio.run(run(args))
    wall = time.perf_counter() - wall
    end = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
    print(
        json.dumps(
            {
                "done": done,
                "cpu_s": cpu,
                "wall_s": wall,
                "peak_rss_kb": _peak_rss_kb(end),
                "rss_after_imports_kb": rss_after_imports,
            }
        )
    )


# -- the latency stub (``--latency-s``) --------------------------------------------------------------


class LatencyStub:
    """A loopback OpenRouter that answers every chat request after ``latency_s`` with a
    ``tokens``-token answer, in a background thread; it counts the requests it holds at once
    (``most``; ``most_early``: within two round trips of the first request)."""

    def __init__(self, latency_s: float, tokens: int = 200) -> None:
        self.latency_s, self.tokens = latency_s, tokens
        self.base_url = ""
        self.reset()

    def reset(self) -> None:
        self.held = self.most = self.most_early = self.answered = self.started = 0
        self.first: float | None = None
        self.arrivals: list[float] = []  # when each chat request came, from the first

    def _body(self, n: int) -> bytes:
        prompt = 20
        cost = prompt * 0.00000045 + self.tokens * 0.0000022  # Chutes' K2.5 prices
        return json.dumps(
            {
                "id": f"gen-{int(time.time())}-stub{n:015d}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "moonshotai/kimi-k2.5-0127",
                "provider": "Chutes",
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "logprobs": None,
                        "finish_reason": "stop",
                        "native_finish_reason": "stop",
                        "message": {
                            "role": "assistant",
                            "content": " word" * self.tokens,
                            "refusal": None,
                        },
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": self.tokens,
                    "total_tokens": prompt + self.tokens,
                    "cost": round(cost, 10),
                    "is_byok": False,
                    "prompt_tokens_details": {"cached_tokens": 0},
                    "cost_details": {"upstream_inference_cost": round(cost, 10)},
                    "completion_tokens_details": {"reasoning_tokens": 0},
                },
            },
            separators=(",", ":"),
        ).encode()

    def app(self) -> Any:
        from aiohttp import web

        async def chat(request: web.Request) -> web.Response:
            await request.read()
            now = time.monotonic()
            if self.first is None:
                self.first = now
            self.arrivals.append(now - self.first)
            self.held += 1
            self.most = max(self.most, self.held)
            if now - self.first <= 2 * self.latency_s:
                self.most_early = max(self.most_early, self.held)
            self.started += 1
            gen = f"gen-stub-{self.started}"
            # as OpenRouter (and the fake) answer: the 200 status and keep-alive padding at
            # once, the body when the answer is made
            response = web.StreamResponse(
                status=200, headers={"X-Generation-Id": gen, "Content-Type": "application/json"}
            )
            try:
                await response.prepare(request)
                await response.write(b"\n         \n\n")
                await asyncio.sleep(self.latency_s)
            finally:
                self.held -= 1
            self.answered += 1
            await response.write(self._body(self.answered))
            await response.write_eof()
            return response

        async def key(request: web.Request) -> web.Response:
            data = {"label": "stub", "limit": None, "limit_remaining": None, "usage": 0.0}
            return web.json_response({"data": {**data, "is_free_tier": False}})

        async def credits(request: web.Request) -> web.Response:
            return web.json_response({"data": {"total_credits": 1_000_000, "total_usage": 0}})

        app = web.Application()
        app.router.add_post("/api/v1/chat/completions", chat)
        app.router.add_get("/api/v1/key", key)
        app.router.add_get("/api/v1/credits", credits)
        return app

    def __enter__(self) -> LatencyStub:
        import threading

        from aiohttp import web

        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = web.AppRunner(self.app(), access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
            loop.run_until_complete(site.start())
            port = runner.addresses[0][1]
            self.base_url = f"http://127.0.0.1:{port}/api/v1"
            started.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        started.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


def _latency(args: argparse.Namespace) -> None:
    """Wall time to finish ``--requests`` rows at ``--concurrency`` against the latency stub."""
    clients = args.clients.split(",") + (["before"] if args.against else [])
    runs: dict[str, list[dict[str, Any]]] = {client: [] for client in clients}
    args.max_tokens = max(args.max_tokens, 256)  # a 200-token answer is whole
    with tempfile.TemporaryDirectory() as folder, LatencyStub(args.latency_s) as stub:
        tmp = Path(folder)
        for round_no in range(args.rounds):
            order = clients if round_no % 2 == 0 else clients[::-1]
            for client in order:
                stub.reset()
                r = _run_child(
                    client,
                    stream=False,
                    requests=args.requests,
                    base_url=stub.base_url,
                    args=args,
                    tmp=tmp,
                )
                r.update(most=stub.most, most_early=stub.most_early, answered=stub.answered)
                runs[client].append(r)
    print(
        f"{args.requests:,} rows at C={args.concurrency}, {args.latency_s:g} s latency, "
        f"{args.rounds} round(s), medians by whole-process wall time"
    )
    print(
        f"{'client':9} {'work s':>7} {'process s':>9} {'x bare':>7} {'in flight 2 RT':>14} "
        f"{'most':>5} {'CPU s':>6} {'CPU ms/req':>10}  runs (process s)"
    )
    best = {c: sorted(found, key=lambda r: r["process_wall_s"]) for c, found in runs.items()}
    median = {c: found[len(found) // 2] for c, found in best.items()}
    base = median.get("bare")
    for client, r in median.items():
        ratio = r["process_wall_s"] / base["process_wall_s"] if base else float("nan")
        print(
            f"{client:9} {r['wall_s']:>7.2f} {r['process_wall_s']:>9.2f} {ratio:>7.2f} "
            f"{r['most_early']:>14,} {r['most']:>5,} {r['process_cpu_s']:>6.2f} "
            f"{r['process_cpu_s'] / max(1, r['done']) * 1000:>10.3f}  "
            f"{[round(x['process_wall_s'], 2) for x in runs[client]]}"
        )
    print("target: generate's wall time at most 1.15x the bare loop's; in flight C in 2 RT")


# -- the parent: the fake server, the prompts, the table ---------------------------------------------


def _library_env(library: str, tmp: Path) -> dict[str, str]:
    """A child's environment: ``library`` on ``PYTHONPATH``, its modules' bytecode cached (under
    ``tmp``) as an installed package has it, compiled before the first child runs. Not compiled
    from source by every child, as ``PYTHONDONTWRITEBYTECODE`` would have it: the site-packages
    the bare loop imports have their bytecode, and a user's install has the library's too."""
    env = {**os.environ, "PYTHONPATH": library, "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    package = Path(library) / "openrouter_probe"
    if package.is_dir() and library not in _COMPILED:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(package)], env=env, check=True
        )
        _COMPILED.add(library)
    return env


_COMPILED: set[str] = set()


def _run_child(
    client: str, *, stream: bool, requests: int, base_url: str, args: Any, tmp: Path
) -> dict[str, Any]:
    prompts = tmp / f"prompts-{requests}.jsonl"
    if not prompts.exists():
        prompts.write_text(
            "".join(
                json.dumps({"id": f"r{i}", "prompt": f"question {i}: what is {i} * 41?"}) + "\n"
                for i in range(requests)
            )
        )
    out = tmp / f"out-{client}-{stream}.jsonl"
    for leftover in (out, Path(f"{out}.ledger"), out.with_name(f".{out.name}.lock")):
        leftover.unlink(missing_ok=True)  # a fresh output each run (the journal and lock too)
    # "before": generate from the other checkout (--against); every other client: this one
    library = args.against if client == "before" else str(ROOT)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "generate" if client == "before" else client,
        "--base-url",
        base_url,
        "--requests",
        str(requests),
        "--concurrency",
        str(args.concurrency),
        "--max-tokens",
        str(args.max_tokens),
        "--prompts",
        str(prompts),
        "--out",
        str(out),
    ] + (["--stream"] if stream else [])
    if args.latency_s:
        cmd += ["--latency-s", str(args.latency_s)]
    env = _library_env(library, tmp)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{client} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    # the whole process, as this parent sees it: interpreter start and imports included
    result["process_wall_s"] = wall
    result["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (
        after.ru_stime - before.ru_stime
    )
    if result["done"] != requests:
        print(f"warning: {client} answered {result['done']} of {requests}", file=sys.stderr)
    return result


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose CPU per request is the median of ``runs`` (with every run's figure)."""
    ordered = sorted(runs, key=lambda r: r["cpu_ms_per_request"])
    middle = dict(ordered[len(ordered) // 2])
    middle["all_cpu"] = [round(r["cpu_ms_per_request"], 3) for r in runs]
    return middle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--openai-requests", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, default=2_000)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--modes", default="nonstream,stream,stream500")
    parser.add_argument("--clients", default="bare,generate,openai")
    parser.add_argument("--child", choices=["bare", "reader", "generate", "openai"])
    parser.add_argument("--base-url")
    parser.add_argument("--prompts")
    parser.add_argument("--out")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--against", help="another checkout: its generate runs as 'before'")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the clients N times")
    parser.add_argument("--latency-s", type=float, default=0.0, help="wall time at this latency")
    parser.add_argument(
        "--whole-process", action="store_true", help="CPU per request of the whole process"
    )
    args = parser.parse_args()
    if args.child:
        args.client = args.child
        child(args)
        return
    if args.latency_s:
        _latency(args)
        return

    from openrouter_probe.fake import serve

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        for mode in args.modes.split(","):
            stream = mode != "nonstream"
            long = mode == "stream500"
            # 500-chunk streams: answers of 1,000 tokens sent 2 per chunk, a fifth of the requests
            options = (
                {"median_tokens": 4000, "tokens_per_chunk": 2} if long else {"median_tokens": 24}
            )
            mode_args = argparse.Namespace(**vars(args))
            if long:
                mode_args.max_tokens = 1000
            clients = args.clients.split(",") + (["before"] if args.against else [])
            runs: dict[str, list[dict[str, Any]]] = {client: [] for client in clients}
            with serve(speed=0, seed=0, **options) as fake:
                for _ in range(args.rounds):
                    for client in clients:
                        n = args.openai_requests if client == "openai" else args.requests
                        n = max(1, n // 5) if long else n
                        r = _run_child(
                            client,
                            stream=stream,
                            requests=n,
                            base_url=fake.base_url,
                            args=mode_args,
                            tmp=tmp,
                        )
                        cpu = r["process_cpu_s"] if args.whole_process else r["cpu_s"]
                        r["cpu_ms_per_request"] = cpu / max(1, r["done"]) * 1000
                        r["requests"] = n
                        runs[client].append(r)
            results = {client: _median(found) for client, found in runs.items()}
            base = results.get("bare")
            for client, r in results.items():
                rows.append((mode, client, r, base, results.get("generate")))
    print(
        f"{'mode':9} {'client':9} {'requests':>8} {'CPU ms/req':>10} {'x bare':>7} "
        f"{'peak MB':>8} {'x bare':>7} {'added MB':>8} {'gen cheaper':>11} {'wall s':>7}"
    )
    for mode, client, r, base, gen in rows:
        x_cpu = r["cpu_ms_per_request"] / base["cpu_ms_per_request"] if base else float("nan")
        x_mem = r["peak_rss_kb"] / base["peak_rss_kb"] if base else float("nan")
        cheaper = (
            f"{r['cpu_ms_per_request'] / gen['cpu_ms_per_request']:.1f}x"
            if gen and client == "openai"
            else ""
        )
        added = (r["peak_rss_kb"] - r["rss_after_imports_kb"]) / 1024
        print(
            f"{mode:9} {client:9} {r['requests']:>8} {r['cpu_ms_per_request']:>10.3f} {x_cpu:>7.2f} "
            f"{r['peak_rss_kb'] / 1024:>8.1f} {x_mem:>7.2f} {added:>8.1f} {cheaper:>11} {r['wall_s']:>7.1f}"
            + (f"  runs: {r['all_cpu']}" if len(r["all_cpu"]) > 1 else "")
        )
    if args.whole_process:
        print("CPU: the whole process (interpreter start and imports included)")
    print(
        "targets: generate <= 1.5x bare in CPU per request and peak memory; "
        "openai >= 10x generate per request ('gen cheaper')"
    )


if __name__ == "__main__":
    main()
