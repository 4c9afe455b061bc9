"""The ``fake_openrouter`` pytest fixture, shipped as a ``pytest11`` plugin (like pytest-httpserver).

Any project with openrouter-probe installed can test its own OpenRouter code against the fake
(``docs/fake-server.md`` shows a test). A ``@pytest.mark.fake_openrouter(...)`` marker takes any
``serve`` option; the default is the bundled Kimi K2.5 snapshot at ``speed=0`` (no waits). The
fixture sets ``OPENROUTER_BASE_URL`` for the test. Nothing heavy is imported until a test asks for
the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from openrouter_probe.fake.server import FakeServer


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fake_openrouter(**options): options for the fake_openrouter fixture "
        "(credit_usd, faults, seed, speed, degrade, snapshot, clock, ...)",
    )


@pytest.fixture
def fake_openrouter(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeServer]:
    """A fake OpenRouter on 127.0.0.1 for one test; yields the running server."""
    from openrouter_probe.fake.server import serve

    options: dict[str, Any] = {"speed": 0}
    marker = request.node.get_closest_marker("fake_openrouter")
    if marker is not None:
        options.update(marker.kwargs)
    snapshot = options.pop("snapshot", None)
    with serve(snapshot, **options) as server:
        monkeypatch.setenv("OPENROUTER_BASE_URL", server.base_url)
        yield server
