"""A finished output row as a training conversation, and the row shapes each trainer reads.

A row's conversation is its prompt's messages with the model's answers in place (the answer after
the prompt, or for a row regenerated turn by turn each of its ``turns`` at its ``index``: the
per-turn record, ``docs/training-data.md``). Each assistant message says whether the model wrote
it in this job (``generated``) and carries its reasoning as ``reasoning_content`` (an inline
``<think>...</think>`` split out). Every format keeps everything the row holds except
``specforge``, whose shape cannot hold some rows: ``specforge_row`` says why in one short reason.
On the way in, ``validate_conversation`` says why a prompt row's messages are not a conversation
to send (``generation.shapes`` skips such a row).

SpecForge's shape is its regenerated-data contract, read from sgl-project/SpecForge at
a6b6b0230009d15ec2a97a57384e6f53f0f96946: ``scripts/conversation_validation.py``
(``validate_conversation``), ``scripts/validate_regenerated_data.py`` (``validate_row``) and
``scripts/expand_reasoning_conversations.py`` (``validate_conversation``, ``expand_row``).

Example::

    from openrouter_probe.generation.conversation import conversation_of, specforge_row

    conv = conversation_of(record)            # the messages, answers in place
    row = specforge_row(conv, record["id"])   # a dict, or a str: why the shape cannot hold it
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openrouter_probe.errors import ConfigError

__all__ = [
    "SHAREGPT_ROLES",
    "SPECFORGE_REASONS",
    "Conversation",
    "conversation_of",
    "has_think_marker",
    "sharegpt_turns",
    "specforge_row",
    "split_think",
    "validate_conversation",
]

#: OpenAI chat roles to ShareGPT's ``from`` (what SpecForge's and speculators' loaders map back).
SHAREGPT_ROLES = {"system": "system", "user": "human", "assistant": "gpt", "tool": "tool"}

#: Why SpecForge's shape cannot hold a row (the export counts rows by these).
SPECFORGE_REASONS = {
    "tool": "holds tool calls or a tool message (the shape has no tool role)",
    "role": "holds a role other than system, user and assistant",
    "order": "roles out of order (system first, then user and assistant in turn)",
    "empty": "holds an empty message",
    "parts": "holds image or other non-text parts",
    "think": "a <think> marker is left in the text",
    "end": "does not end with the model's answer",
}

# ``<think>`` at the head of the content, up to the first ``</think>``; or a ``<think>`` never
# closed (the answer was cut inside the reasoning).
_THINK_HEAD = re.compile(r"\s*<think>(?P<inline>.*?)</think>(?P<answer>.*)", re.S | re.I)
_THINK_OPEN = re.compile(r"\s*<think>(?P<inline>.*)", re.S | re.I)
_THINK_CLOSE = re.compile(r"(?P<inline>.*?)</think>(?P<answer>.*)", re.S | re.I)


@dataclass
class Conversation:
    """A row's messages in OpenAI chat shape, answers in place, plus what the export counts.

    Assistant messages carry ``generated`` (the model wrote it in this job) and, when known,
    ``reasoning_content``. ``think_split`` counts the messages whose inline ``<think>`` was split
    out of the content.
    """

    messages: list[dict[str, Any]]
    think_split: int = 0

    @property
    def assistant(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("role") == "assistant"]

    @property
    def written(self) -> list[dict[str, Any]]:
        """The assistant messages the model wrote in this job."""
        return [m for m in self.assistant if m.get("generated")]

    @property
    def copied(self) -> list[dict[str, Any]]:
        """The assistant messages copied from the prompts file (the model did not write them)."""
        return [m for m in self.assistant if not m.get("generated")]

    @property
    def has_reasoning(self) -> bool:
        return any(_filled(m.get("reasoning_content")) for m in self.assistant)

    def empty_answers(self) -> int:
        """Model-written turns with no text and no tool call: nothing to train on."""
        return sum(1 for m in self.written if not _text_of(m) and not m.get("tool_calls"))

    def unreasoned(self, *, written_only: bool = True) -> list[dict[str, Any]]:
        """Model-written turns (or, with ``written_only=False``, all assistant turns) that carry
        no reasoning."""
        turns = self.written if written_only else self.assistant
        return [m for m in turns if not _filled(m.get("reasoning_content"))]


def _filled(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict)).strip()
    return ""


def has_think_marker(text: str) -> bool:
    """Whether ``text`` holds ``<think>`` or ``</think>`` (any case), as SpecForge checks it."""
    lowered = text.lower()
    return "<think>" in lowered or "</think>" in lowered


def split_think(content: str, reasoning: str | None) -> tuple[str, str | None, bool]:
    """Split reasoning returned inline in ``content`` out of it: ``(answer, reasoning, split)``.

    ``<think>R</think>A`` gives ``A`` and ``R`` (after any reasoning the provider returned apart);
    a ``<think>`` never closed is all reasoning (the answer was cut inside it); ``R</think>A``
    without the opening tag (a template that opens it in the prompt) is split only when no
    reasoning came apart. Anything else is left as it is.
    """
    head = _THINK_HEAD.match(content) or _THINK_OPEN.match(content)
    if head is None and not _filled(reasoning):
        head = _THINK_CLOSE.match(content)
    if head is None:
        return content, reasoning, False
    inline = head.group("inline").strip()
    answer = head.groupdict().get("answer") or ""
    parts = [p for p in (reasoning, inline) if _filled(p)]
    joined = "\n\n".join(str(p).strip() for p in parts) or None
    return answer.lstrip(), joined, True


def _assistant(
    content: Any, reasoning: Any, tool_calls: Any, *, generated: bool, conv: Conversation
) -> dict[str, Any]:
    text_reasoning = reasoning if isinstance(reasoning, str) else None
    if isinstance(content, str):
        content, text_reasoning, split = split_think(content, text_reasoning)
        conv.think_split += split
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "" if content is None else content,
        "reasoning_content": text_reasoning,
        "generated": generated,
    }
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def _prompt_message(message: dict[str, Any], conv: Conversation) -> dict[str, Any]:
    if message.get("role") != "assistant":
        return dict(message)
    kept = {
        k: v for k, v in message.items() if k not in ("reasoning", "reasoning_content", "content")
    }
    reasoning = message.get("reasoning_content", message.get("reasoning"))
    out = _assistant(
        message.get("content"), reasoning, message.get("tool_calls"), generated=False, conv=conv
    )
    return {**kept, **out}


def _turns(record: dict[str, Any], prompt: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The per-turn answers of a regenerated row, by the position they take."""
    turns = record["turns"]
    where = f"row {record.get('id')!r}: `turns`"
    if not isinstance(turns, list) or not turns:
        raise ConfigError(f"{where} is not a list of turns; is this a generate output file?")
    by_index: dict[int, dict[str, Any]] = {}
    for i, turn in enumerate(turns):
        index = turn.get("index") if isinstance(turn, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index in by_index:
            raise ConfigError(f"{where}[{i}] has no `index` of its own (a whole number)")
        fits = index == len(prompt) or (
            0 <= index < len(prompt) and prompt[index].get("role") == "assistant"
        )
        if not fits:
            raise ConfigError(
                f"{where}[{i}].index {index} is not an assistant message of the prompt nor the "
                f"answer after it ({len(prompt)})"
            )
        by_index[index] = turn
    return by_index


def conversation_of(record: dict[str, Any]) -> Conversation:
    """The conversation of one output record: its prompt with the model's answers in place."""
    prompt = record.get("messages")
    if not isinstance(prompt, list) or not all(isinstance(m, dict) for m in prompt):
        raise ConfigError(
            f"row {record.get('id')!r} has no `messages` (written by another tool?): the export "
            "needs the prompt of every row"
        )
    conv = Conversation([])
    answers = _turns(record, prompt) if "turns" in record else {len(prompt): record}
    for index in range(max(answers) + 1):
        answer = answers.get(index)
        if answer is not None:
            conv.messages.append(
                _assistant(
                    answer.get("content"),
                    answer.get("reasoning"),
                    answer.get("tool_calls"),
                    generated=True,
                    conv=conv,
                )
            )
        elif index < len(prompt):
            conv.messages.append(_prompt_message(prompt[index], conv))
    return conv


def sharegpt_turns(conv: Conversation) -> list[dict[str, Any]]:
    """The conversation as ShareGPT turns: ``from``/``value``, every other key kept as it is."""
    turns = []
    for m in conv.messages:
        role = str(m.get("role"))
        turn = {"from": SHAREGPT_ROLES.get(role, role), "value": m.get("content")}
        turn.update({k: v for k, v in m.items() if k not in ("role", "content")})
        turns.append(turn)
    return turns


def _specforge_content(content: Any) -> str | None:
    """The text of a message for SpecForge (a string), or ``None`` when it holds other parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" for p in content
    ):
        return "".join(str(p.get("text") or "") for p in content)
    return None


def _specforge_problem(messages: list[dict[str, Any]]) -> str | None:
    """SpecForge's ``validate_conversation`` and ``validate_row``, as one reason key (or ``None``)."""
    expected, saw_user = "user", False
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role == "tool" or m.get("tool_calls") or m.get("tool_call_id"):
            return "tool"
        if role not in ("system", "user", "assistant"):
            return "role"
        if not isinstance(content, str):
            return "parts"
        if not content.strip():
            return "empty"
        reasoning = m.get("reasoning_content") or ""
        if role == "assistant" and (has_think_marker(content) or has_think_marker(reasoning)):
            return "think"  # validate_row checks assistant messages only
        if role == "system" and not saw_user:
            continue
        if role != expected:
            return "order"
        saw_user = True
        expected = "assistant" if role == "user" else "user"
    if not messages or messages[-1].get("role") != "assistant":
        return "end"
    return None


def specforge_row(
    conv: Conversation, row_id: Any, *, preserve_thinking: bool = True
) -> dict[str, Any] | str:
    """SpecForge's regenerated-data row, or the key of ``SPECFORGE_REASONS`` saying why not.

    ``{"id": str, "status": "success", "conversations": [{"role", "content"}, ...]}``; assistant
    turns carry ``reasoning_content`` (a string or null) and ``generated``; ``preserve_thinking:
    true`` when a turn has reasoning and ``preserve_thinking`` is asked.
    """
    messages = []
    for m in conv.messages:
        content = _specforge_content(m.get("content"))
        out: dict[str, Any] = {"role": m.get("role"), "content": content}
        if m.get("role") == "assistant":
            reasoning = m.get("reasoning_content")
            out["reasoning_content"] = reasoning if _filled(reasoning) else None
            out["generated"] = bool(m.get("generated"))
        for key in ("tool_calls", "tool_call_id"):
            if m.get(key):
                out[key] = m[key]
        messages.append(out)
    problem = _specforge_problem(messages)
    if problem is not None:
        return problem
    row: dict[str, Any] = {"id": str(row_id), "status": "success", "conversations": messages}
    if preserve_thinking and conv.has_reasoning:
        row["preserve_thinking"] = True
    return row


def _content_problem(m: Mapping[str, Any], i: int) -> str | None:
    content, role = m.get("content"), m.get("role")
    if role == "assistant" and m.get("tool_calls") and content in (None, ""):
        return None  # a call without text
    if role == "user" and isinstance(content, list) and content:
        if all(isinstance(p, Mapping) and isinstance(p.get("type"), str) for p in content):
            return None  # content parts (images): the chat API's, not SpecForge's
        return f"turn {i} (user) holds content parts that are not objects with a `type`"
    if not isinstance(content, str):
        return f"turn {i} ({role}) has no text content (a non-empty string)"
    if not content.strip():
        return f"turn {i} ({role}) has empty content"
    return None


def validate_conversation(messages: list[dict[str, Any]]) -> str | None:
    """Why ``messages`` is not a conversation to send (one line), or ``None``.

    SpecForge's ``validate_conversation`` (a6b6b02): system only before the first user turn,
    then user and assistant in turn from user, every content a non-empty string; plus the chat
    API's tool calls (``tool`` messages answering an assistant's ``tool_calls``) and a
    ``developer`` message where a system one may be.
    """
    expected, saw_user = "user", False
    for i, m in enumerate(messages):
        role = m.get("role")
        problem = _content_problem(m, i)
        if problem is not None:
            return problem
        if role in ("system", "developer") and not saw_user:
            continue
        if role == "tool":
            if expected not in ("tool", "tool-or-assistant"):
                return f"turn {i} is a tool result that answers no tool call"
            expected = "tool-or-assistant"
            continue
        if role not in ("user", "assistant"):
            return f"turn {i} is {role} after the first user turn (system turns come first)"
        if expected == "tool":
            return f"turn {i} is {role}; the tool call before it has no tool result"
        wanted = "assistant" if expected == "tool-or-assistant" else expected
        if role != wanted:
            return f"turn {i} is {role} where {wanted} comes (user and assistant take turns)"
        saw_user = True
        calls = role == "assistant" and bool(m.get("tool_calls"))
        expected = "tool" if calls else ("assistant" if role == "user" else "user")
    if not saw_user:
        return "has no user turn"
    if expected == "tool":
        return "ends on a tool call with no tool result"
    return None
