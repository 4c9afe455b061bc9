"""``generate``'s own checks of the files it is given, before the run reads them."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from openrouter_probe import files
from openrouter_probe.cli import generate
from tests._generate import POLICY


def test_a_policy_given_as_policy_is_not_parsed_to_classify_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the run parses its policy once, as its policy; classifying it first parsed it twice
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "r0", "prompt": "hi"}) + "\n")
    parsed: list[object] = []
    real = files.load_yaml
    monkeypatch.setattr(files, "load_yaml", lambda text: parsed.append(text) or real(text))
    generate._check_not_swapped(str(prompts), str(POLICY), str(tmp_path / "o.jsonl"))
    assert parsed == []
    # a policy given as PROMPTS: both are read, to say the command as it should be
    with pytest.raises(click.UsageError, match="swap them"):
        generate._check_not_swapped(str(POLICY), str(prompts), str(tmp_path / "o.jsonl"))
    assert len(parsed) == 1
