from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CAPTURES = DATA / "captures"  # a byte-exact copy of ../shared/captures

# Like llm-openrouter: a real key only when re-recording; cassettes never hold it.
PYTEST_OPENROUTER_KEY = os.environ.get("PYTEST_OPENROUTER_KEY", "test-key-not-real")

# No property test has a wall-clock limit: hypothesis's default 200 ms deadline per example and
# its too-slow health check fail a test when the machine is busy, not when the code is wrong.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from a known environment: the test key, the real base URL."""
    monkeypatch.setenv("OPENROUTER_API_KEY", PYTEST_OPENROUTER_KEY)
    monkeypatch.delenv("OPENROUTER_BASE_URL", raising=False)
    monkeypatch.delenv("OPENROUTER_PROBE_DEBUG", raising=False)


@pytest.fixture(autouse=True)
def _fresh_logging() -> object:
    """Each test starts with the package logger as a library leaves it (propagating, no handler of
    its own) and gets it back so: a CLI run installs a stderr handler that would hide records from
    caplog in the tests that follow."""
    import logging

    logger = logging.getLogger("openrouter_probe")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    logger.handlers[:] = []
    logger.setLevel(logging.NOTSET)
    logger.propagate = True
    yield
    logger.handlers[:], level, logger.propagate = saved[0], saved[1], saved[2]
    logger.setLevel(level)


@pytest.fixture(autouse=True)
def retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries happen but nothing sleeps: the client's waits are recorded on a virtual clock
    (the idea of stamina's testing mode). A test that asks for this fixture reads the waits."""
    from openrouter_probe.api import wire

    waits: list[float] = []
    clock = [0.0]

    def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(wire, "_sleep", fake_sleep)
    monkeypatch.setattr(wire, "_monotonic", lambda: clock[0])
    return waits


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, object]:
    return {
        "filter_headers": ["authorization", "cookie", "x-api-key"],
        "record_mode": "none",
        "match_on": ["method", "scheme", "host", "port", "path", "query"],
        "allow_playback_repeats": False,
    }


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """A module's cassettes follow its path: ``tests/api/test_client.py`` reads
    ``tests/cassettes/api/test_client/``."""
    package, *path = request.module.__name__.split(".")
    assert package == "tests", request.module.__name__
    return str(ROOT / "tests" / "cassettes" / Path(*path))


@pytest.fixture
def replay_server():
    """A loopback HTTP server that answers with real OpenRouter bodies; yields (base_url, routes)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    routes: dict[str, tuple[int, str, str]] = {}
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            status, body, ctype = routes.get(
                self.path,
                (
                    404,
                    '{"error":{"message":"No endpoints found for this path.","code":404}}',
                    "application/json",
                ),
            )
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield base, routes, seen
    finally:
        server.shutdown()
        server.server_close()
