"""Row shapes: the conversation, id and parameters of one input row, as each family writes them.

The families (``docs/inputs.md`` shows each with the command that reads it):

- ours: ``messages`` (OpenAI chat messages) or ``prompt`` (a string), ``id``, ``dataset`` and
  request parameters (``max_tokens``, ``temperature``, ``tools``, ...) sent with the row;
- SpecForge's prepared file (``scripts/prepare_data.py``, sgl-project/SpecForge a6b6b02) and our
  own ``export --format specforge|sharegpt|jsonl``: ``id`` and ``conversations``;
- ShareGPT (``Aeala/ShareGPT_Vicuna_unfiltered``): ``conversations`` of ``from``/``value`` turns;
- UltraChat (``HuggingFaceH4/ultrachat_200k``): ``prompt_id``, ``prompt`` and ``messages``; the
  conversation wins over the ``prompt`` string;
- Magpie: ``uuid``, ``conversations`` (and ``instruction``); gsm8k: ``question``; Nemotron:
  ``input`` (a string or a list of messages); hermes-fc (``NousResearch/hermes-function-calling-v1``):
  ``conversations`` and ``tools`` as a JSON string, sent as the request's ``tools``.

The conversation is read from the field the user names, else the first of ``messages``,
``conversations``, ``prompt``, ``question``, ``instruction``, ``input`` the row has; a string is one
user turn. Turns are ``role``/``content`` or ``from``/``value`` (``ROLES`` maps the names). The id
is the named field, else ``id``, ``uuid`` or ``prompt_id``, else a content hash. Only rows of our
own shape (``messages``/``prompt``) carry request parameters; another family's columns
(``answer``, Nemotron's ``reasoning: "on"``, Magpie's ``model``) are data, not parameters, and are
not sent (a ``tools`` column is, as speculators renders it: c05b95b
``src/speculators/data_generation/configs.py``).

A conversation is checked as SpecForge's ``scripts/conversation_validation.py``
(``validate_conversation``, a6b6b02) checks it: system messages only before the first user turn,
then ``user`` and ``assistant`` in turn from ``user``, every content a non-empty string. Beside it,
our own rows keep what the chat API takes: a ``developer`` message where a system one may be, an
assistant message with ``tool_calls`` answered by ``tool`` messages, content parts (images) in a
user turn. A row that fails is skipped, never sent (``ShapeProblem``: why, in one line).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONVERSATION_FIELDS",
    "ID_FIELDS",
    "PROMPT_FIELDS",
    "ROLES",
    "FieldMap",
    "RowShape",
    "ShapeProblem",
    "read_row",
    "validate_conversation",
]

#: Role names as the families write them, to the chat API's.
ROLES: dict[str, str] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "developer",
    "tool": "tool",
}
CONVERSATION_FIELDS = ("messages", "conversations")
PROMPT_FIELDS = ("prompt", "question", "instruction", "input")
ID_FIELDS = ("id", "uuid", "prompt_id")
#: Keys a row may not set: the policy and the run decide them.
RESERVED = frozenset({"model", "provider", "stream", "models", "route"})
#: Keys of a row of our own shape that are neither sent nor data of the row.
_OWN_KEYS = frozenset({"dataset", "messages", "prompt", *ID_FIELDS})
#: Message keys kept from a turn of another family (``reasoning_content``, ``generated``,
#: ``weight``... are the trainer's, not the API's).
_TURN_KEYS = ("tool_calls", "tool_call_id", "name")


class ShapeProblem(ValueError):
    """A row that is valid JSON but not a conversation to send: skipped, never sent."""


@dataclass(frozen=True)
class FieldMap:
    """Which fields hold a row's conversation (or prompt string) and its id (``None``: found)."""

    conversation: str | None = None
    prompt: str | None = None
    id: str | None = None


@dataclass(frozen=True)
class RowShape:
    """One row as read: the full conversation (chat messages), its id given (or ``None``), the
    dataset it names, its request parameters, and whether it is of our own shape."""

    messages: list[dict[str, Any]]
    given_id: str | None
    dataset: str | None
    params: dict[str, Any]
    own: bool


def _decoded(value: Any) -> Any:
    """A JSON text where a list is expected (Parquet written by ``export --format parquet``
    holds nested values as JSON text; hermes-fc's ``tools`` is one)."""
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _turn(turn: Any, i: int, *, own: bool) -> dict[str, Any]:
    if not isinstance(turn, Mapping):
        raise ShapeProblem(f"turn {i} is not an object")
    named = turn.get("role", turn.get("from"))
    role = ROLES.get(named.lower()) if isinstance(named, str) else None
    if role is None:
        known = ", ".join(sorted(ROLES))
        raise ShapeProblem(f"turn {i} has role {named!r}; the roles read are {known}")
    if own and "role" in turn:
        message = dict(turn)
        message["role"] = role
        return message
    content = turn.get("content", turn.get("value"))
    message = {"role": role, "content": content}
    message.update({k: turn[k] for k in _TURN_KEYS if turn.get(k)})
    return message


def _conversation(obj: Mapping[str, Any], fields: FieldMap) -> tuple[list[dict[str, Any]], bool]:
    """The row's turns and whether it is of our own shape (``messages`` or ``prompt``)."""
    if fields.conversation is not None or fields.prompt is not None:
        key = fields.conversation or fields.prompt
        assert key is not None
        if key not in obj:
            raise ValueError(f"has no `{key}` (the field named for this dataset)")
        candidates = [key]
    else:
        candidates = [k for k in (*CONVERSATION_FIELDS, *PROMPT_FIELDS) if k in obj]
        if not candidates:
            fields_ = ", ".join(f"`{k}`" for k in (*CONVERSATION_FIELDS, *PROMPT_FIELDS))
            raise ValueError(
                f"has none of {fields_}; name the prompt field (prompt_field, or `fields:` "
                "in a manifest)"
            )
    key = candidates[0]
    own = not fields.conversation and not fields.prompt and key in ("messages", "prompt")
    value = _decoded(obj[key])
    if isinstance(value, str):
        if not value.strip():
            raise ShapeProblem(f"`{key}` is an empty string")
        return [{"role": "user", "content": value}], own
    if not isinstance(value, list):
        raise ShapeProblem(f"`{key}` is {type(value).__name__}, not a list of turns or a string")
    if not value:
        raise ShapeProblem(f"`{key}` is an empty list")
    return [_turn(t, i, own=own) for i, t in enumerate(value)], own


def _content_problem(m: Mapping[str, Any], i: int) -> str | None:
    content, role = m.get("content"), m.get("role")
    if role == "assistant" and m.get("tool_calls") and content in (None, ""):
        return None  # a call without text
    if role == "user" and isinstance(content, list) and content:
        return None  # content parts (images): the chat API's, not SpecForge's
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


def _given_id(obj: Mapping[str, Any], fields: FieldMap) -> str | None:
    keys = (fields.id,) if fields.id is not None else ID_FIELDS
    for key in keys:
        value = obj.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError(f"`{key}` (the id) must be a string or an integer")
        if isinstance(value, str) and not value.strip():
            continue
        return str(value)
    if fields.id is not None:
        raise ValueError(f"has no `{fields.id}` (the id field named for this dataset)")
    return None


def _own_params(obj: Mapping[str, Any]) -> dict[str, Any]:
    reserved = sorted(RESERVED & obj.keys())
    if reserved:
        raise ValueError(
            f"sets {', '.join(reserved)}: the policy (policy=) and the run decide those, not a row"
        )
    params = {k: v for k, v in obj.items() if k not in _OWN_KEYS}
    if "max_tokens" in params and (
        not isinstance(params["max_tokens"], int)
        or isinstance(params["max_tokens"], bool)
        or params["max_tokens"] < 1
    ):
        raise ValueError("`max_tokens` must be a whole number >= 1")
    return params


def _tools(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Another family's ``tools`` column (a list, or hermes-fc's JSON string), if it has one."""
    tools = _decoded(obj.get("tools"))
    if tools in (None, "", []):
        return {}
    if not isinstance(tools, list):
        raise ShapeProblem("`tools` is not a list of tools (nor JSON text of one)")
    return {"tools": tools}


def read_row(obj: Any, fields: FieldMap | None = None) -> RowShape:
    """Read one decoded row; ``ValueError`` for a row that cannot be read at all (the file or the
    field mapping is wrong), ``ShapeProblem`` for one to skip (its conversation is not valid)."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"a row is a JSON object, not {type(obj).__name__}")
    fields = fields or FieldMap()
    messages, own = _conversation(obj, fields)
    given = _given_id(obj, fields)
    dataset = obj.get("dataset")
    if dataset is not None and (not isinstance(dataset, str) or not dataset):
        raise ValueError("`dataset` must be a non-empty string")
    params = _own_params(obj) if own else _tools(obj)
    problem = validate_conversation(messages)
    if problem is not None:
        raise ShapeProblem(problem)
    return RowShape(messages, given, dataset, params, own)
