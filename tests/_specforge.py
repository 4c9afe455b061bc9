"""What SpecForge and speculators accept, as assertions: their contract, field by field.

Read (not copied) from sgl-project/SpecForge at a6b6b0230009d15ec2a97a57384e6f53f0f96946:
- ``scripts/conversation_validation.py`` ``validate_conversation``: a non-empty list of objects;
  every ``content`` a non-empty string (after ``strip``); ``system`` only before the first ``user``;
  then only ``user``/``assistant``, alternating, starting with ``user``; at least one ``user``.
- ``scripts/validate_regenerated_data.py`` ``validate_row``: ``id`` a non-empty string, ``status ==
  "success"``, the conversation valid, assistant ``reasoning_content`` a string or null, non-empty
  with ``--expect-reasoning``, no ``<think>``/``</think>`` (any case) in content or reasoning with
  ``--strict-think-markers``; at least one assistant message; the last message an assistant's.
- ``scripts/expand_reasoning_conversations.py`` ``validate_conversation`` / ``expand_row``: the same,
  every assistant ``reasoning_content`` a non-empty string, and not an assistant before the first
  user; one training event per assistant turn.
- ``specforge/data/preprocessing.py`` ``build_eagle3_dataset``: reads the ``conversations`` column,
  drops ``id``, pops ``tools``, and passes every other column to the chat template as a keyword
  (so a column named ``messages`` collides with the template's own ``messages``).

And from vllm-project/speculators at c05b95b303f7d4f21e8d7624e0ffa1c2d9b4d73b,
``src/speculators/data_generation/preprocessing.py`` ``_normalize_conversation``: ``role`` or
``from`` (``human``/``gpt`` mapped), ``content`` or ``value``; ``tool_calls`` and ``tool_call_id``
kept; ``reasoning_content`` (or ``thinking``) kept as both; every other key dropped. It reads the
``conversations`` column (``load_raw_dataset``).
"""

from __future__ import annotations

from typing import Any


def _marker(text: str) -> bool:
    lowered = text.lower()
    return "<think>" in lowered or "</think>" in lowered


def assert_specforge_conversation(messages: Any) -> None:
    """SpecForge's ``validate_conversation`` (validation style)."""
    assert isinstance(messages, list) and messages, "conversations must be a non-empty list"
    expected, saw_user = "user", False
    for index, message in enumerate(messages):
        assert isinstance(message, dict), f"message {index} must be an object"
        content = message.get("content")
        assert isinstance(content, str) and content.strip(), f"message {index} content"
        role = message.get("role")
        if role == "system" and not saw_user:
            continue
        assert role in ("user", "assistant"), f"message {index} has unsupported role {role!r}"
        assert role == expected, f"message {index} expected role {expected!r}, got {role!r}"
        saw_user = True
        expected = "assistant" if role == "user" else "user"
    assert saw_user, "conversation has no user message"


def assert_specforge_row(
    row: dict[str, Any], *, expect_reasoning: bool, strict_think_markers: bool = True
) -> int:
    """``validate_regenerated_data.validate_row``; returns the row's assistant messages."""
    assert isinstance(row.get("id"), str) and row["id"].strip(), "id must be a non-empty string"
    assert row.get("status") == "success", "status must be 'success'"
    messages = row.get("conversations")
    assert_specforge_conversation(messages)
    assistants = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        assistants += 1
        reasoning = message.get("reasoning_content")
        assert reasoning is None or isinstance(reasoning, str), f"message {index} reasoning type"
        if expect_reasoning:
            assert isinstance(reasoning, str) and reasoning.strip(), f"message {index} reasoning"
        if strict_think_markers:
            assert not _marker(message["content"]), f"message {index} content has a marker"
            assert not (isinstance(reasoning, str) and _marker(reasoning)), f"{index} reasoning"
    assert assistants, "conversation has no assistant message"
    assert messages[-1]["role"] == "assistant", "conversation must end with an assistant message"
    return assistants


def expand_events(row: dict[str, Any]) -> list[dict[str, Any]]:
    """``expand_reasoning_conversations.expand_row``: one event per assistant turn, the history's
    reasoning removed; raises ``AssertionError`` where the script would skip the row."""
    assert_specforge_row(row, expect_reasoning=True, strict_think_markers=False)
    first = next(m for m in row["conversations"] if m["role"] != "system")
    assert first["role"] != "assistant", "Data starts with an assistant message"
    history: list[dict[str, Any]] = []
    events = []
    for message in row["conversations"]:
        if message["role"] != "assistant":
            history.append(dict(message))
            continue
        events.append(
            {
                "id": f"{row['id']}#turn{len(events)}",
                "source_id": row["id"],
                "conversations": [*history, dict(message)],
            }
        )
        history.append({k: v for k, v in message.items() if k != "reasoning_content"})
    return events


def speculators_turns(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What speculators' ``_normalize_conversation`` makes of a ShareGPT or chat conversation."""
    roles = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
    out = []
    for turn in conversation:
        role = turn.get("from", turn.get("role", ""))
        normal: dict[str, Any] = {
            "role": roles.get(role, role if role in ("system", "tool") else "assistant"),
            "content": turn.get("value") or turn.get("content") or "",
        }
        for key in ("tool_calls", "tool_call_id"):
            if turn.get(key):
                normal[key] = turn[key]
        thinking = turn.get("thinking") or turn.get("reasoning_content")
        if thinking:
            normal["thinking"] = normal["reasoning_content"] = thinking
        out.append(normal)
    return out
