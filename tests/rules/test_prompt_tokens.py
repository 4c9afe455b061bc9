"""A request's prompt tokens, estimated once for every message shape the datasets send (string
content, content parts, an assistant's tool calls, a tool's result, reasoning sent back) and bounded
from above; the fake bills the estimate."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

import openrouter_probe as orp
from openrouter_probe.rules.prompt_tokens import estimate_prompt_tokens, prompt_tokens_bound
from openrouter_probe.rules.snapshot import bundled_snapshot

MODEL = "moonshotai/kimi-k2.5"
ARGS = '{"a": 2, "b": 3}'
# 96 characters as compact JSON: 24 tokens
CALL = [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": ARGS}}]
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        ({"role": "user", "content": "12345678"}, 2),
        ({"role": "user", "content": "123456789"}, 3),  # a started token counts
        (
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "12345678"},
                    {"type": "image_url", "image_url": {"url": "data:x"}},
                ],
            },
            2,
        ),
        ({"role": "assistant", "content": None, "tool_calls": CALL}, 24),
        ({"role": "tool", "tool_call_id": "call_1", "content": "5"}, 1),
        # reasoning sent back: ``reasoning``, its ``reasoning_details`` the same text (counted once)
        (
            {
                "role": "assistant",
                "content": "5",
                "reasoning": "12345678",
                "reasoning_details": [{"type": "reasoning.text", "text": "12345678"}],
            },
            1 + 2,
        ),
        (
            {
                "role": "assistant",
                "content": "5",
                "reasoning_details": [
                    {"type": "reasoning.text", "text": "12345678"},
                    {"type": "reasoning.summary", "summary": "1234"},
                ],
            },
            1 + 2 + 1,
        ),
        # a trainer's field is not sent (``generation.params.MESSAGE_KEYS``): not counted
        ({"role": "assistant", "content": "5", "reasoning_content": "12345678"}, 1),
    ],
    ids=[
        "string",
        "rounded-up",
        "parts",
        "tool-calls",
        "tool-result",
        "reasoning",
        "details",
        "trainer-field",
    ],
)
def test_each_message_shape_is_counted(message: dict[str, Any], tokens: int) -> None:
    # 3 for the reply's priming, 3 for the message, then its text at 4 characters a token
    assert estimate_prompt_tokens([message]) == 3 + 3 + tokens
    # the bound (every byte sent, and the template's allowance) is never below the estimate
    assert prompt_tokens_bound(len(json.dumps([message]).encode()), 1) > 3 + 3 + tokens


def test_the_prompt_bound_is_bytes_plus_the_template_allowance() -> None:
    assert prompt_tokens_bound(0, 0) == 32
    assert prompt_tokens_bound(100, 1) == 148
    assert prompt_tokens_bound(100, 3) == 100 + 48 + 32


def test_the_k25_capture_is_reproduced() -> None:
    # the K2.5 capture: a 27- and a 20-character message, 21 prompt tokens reported
    messages = [{"role": "system", "content": "x" * 27}, {"role": "user", "content": "y" * 20}]
    assert estimate_prompt_tokens(messages) == 21


def test_the_tools_and_formats_of_the_body_are_prompt() -> None:
    body = {"tools": TOOLS, "tool_choice": "auto", "response_format": None, "max_tokens": 9}
    # tools: 78 characters of compact JSON (20 tokens); "auto" with its quotes: 2
    assert estimate_prompt_tokens([], body) == 3 + 20 + 2
    assert estimate_prompt_tokens([]) == 3


def test_the_fake_bills_a_tool_calls_arguments_as_prompt() -> None:
    messages = [
        {"role": "user", "content": "12345678"},
        {"role": "assistant", "content": None, "tool_calls": CALL},
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ]
    body = {"model": MODEL, "messages": messages, "tools": TOOLS, "max_tokens": 16}
    with orp.fake.serve(bundled_snapshot(MODEL), speed=0, seed=1) as fake:
        answer = requests.post(
            f"{fake.base_url}/chat/completions",
            json=body,
            headers={"Authorization": "Bearer sk-fake"},
            timeout=30,
        )
    answer.raise_for_status()
    assert answer.json()["usage"]["prompt_tokens"] == 3 + (3 + 2) + (3 + 24) + (3 + 1) + 20
