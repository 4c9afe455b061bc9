"""No cassette may hold a key."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

CASSETTES = sorted((ROOT / "tests" / "cassettes").rglob("*.yaml"))


def test_there_are_cassettes() -> None:
    assert len(CASSETTES) >= 10


@pytest.mark.parametrize("path", CASSETTES, ids=lambda p: p.name)
def test_cassette_holds_no_key(path: object) -> None:
    text = path.read_text()  # type: ignore[attr-defined]
    assert "sk-or-" not in text
    assert "Bearer " not in text
    assert "test-key-not-real" not in text
