"""Row shapes: the conversation, id, parameters and other columns of one input row.

A row is read by its entry of the layout table (``generation.layouts``) or by the fields the user
names (``FieldMap``); ``docs/inputs.md`` says each rule. Only the message keys the API reads are
kept (``params.MESSAGE_KEYS``); no column is a request parameter unless the user names it
(``FieldMap.params``, checked by ``params.check``); every other column is the dataset's data,
returned as ``meta`` (never sent). A row to skip raises ``ShapeProblem`` (why, in one line).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openrouter_probe.api.jsontext import json_text_value, jsonable, kind_of
from openrouter_probe.errors import Message
from openrouter_probe.generation.conversation import validate_conversation
from openrouter_probe.generation.layouts import (
    Layout,
    ShapeProblem,
    compose,
    convert_tools,
    convert_xlam,
    glaive_chat,
    image_part,
    layout_of,
    tool_call,
)
from openrouter_probe.generation.params import (
    CHAT_PARAMETERS,
    MESSAGE_KEYS,
    id_params,
    message_keys,
    row_params,
)
from openrouter_probe.generation.transcripts import (
    TranscriptProblem,
    hh_turns,
    is_hh,
    nemo_turns,
    oasst_path,
    pair_turns,
)

__all__ = [
    "CONVERSATION_FIELDS",
    "FAILED_STATUSES",
    "ID_FIELDS",
    "PROMPT_FIELDS",
    "ROLES",
    "SYSTEM_FIELDS",
    "FieldMap",
    "RowShape",
    "ShapeProblem",
    "read_row",
]

#: Role names as the families write them, to the chat API's (LLaMA-Factory's ``function_call``
#: and ``observation`` are a tool call and its result).
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
    "function_call": "assistant",
    "observation": "tool",
}
CONVERSATION_FIELDS = ("messages", "conversations", "conversation", "items")
PROMPT_FIELDS = ("prompt", "question", "instruction", "query", "input")
ID_FIELDS = ("id", "uuid", "prompt_id")
#: Top-level columns that hold a system prompt (the first present is the system turn).
SYSTEM_FIELDS = ("system", "system_prompt", "system_message")
#: ``status`` values of a row that is not a prompt (a failed regeneration, a failed answer).
FAILED_STATUSES = frozenset({"failed", "failure", "error", "skipped", "cancelled"})
#: Message keys kept from a turn of another family (``reasoning_content``, ``generated``,
#: ``weight``... are the trainer's, not the API's).
_TURN_KEYS = ("tool_calls", "tool_call_id", "name")
#: A turn's keys read as the message (Capybara's ``input``/``output`` pair too).
_READ_KEYS = frozenset({"role", "from", "content", "value", "input", "output", *_TURN_KEYS})


@dataclass(frozen=True)
class FieldMap:
    """Which fields hold a row's conversation (or prompt string), its id and its system prompt,
    and the template that composes a prompt of several columns (``None``: the layout's)."""

    conversation: str | None = None
    prompt: str | None = None
    id: str | None = None
    system: str | None = None
    template: str | None = None
    #: the columns sent as request parameters (``--row-params``, a manifest's ``params:``)
    params: tuple[str, ...] = ()

    @property
    def named(self) -> bool:
        return self.conversation is not None or self.prompt is not None


@dataclass(frozen=True)
class RowShape:
    """One row as read: the full conversation (chat messages), its id given (or ``None``), the
    dataset it names, its request parameters, the layout it was read as and its other columns
    (``meta``: data, never sent)."""

    messages: list[dict[str, Any]]
    given_id: str | None
    dataset: str | None
    params: dict[str, Any]
    layout: str = "ours"
    meta: dict[str, Any] = field(default_factory=dict)
    #: what to say once per source about this row: a column kept unsent
    notes: frozenset[str] = frozenset()
    #: what its content id hashes beside the messages (``None``: ``params``): for our own shape,
    #: every column named like a chat parameter, sent or not, as the versions that sent them all
    #: hashed it (an output they wrote resumes, nothing bought twice)
    id_params: dict[str, Any] | None = None


def _turn(turn: Any, i: int, *, own: bool) -> dict[str, Any]:
    if not isinstance(turn, Mapping):
        raise ShapeProblem(f"turn {i} is not an object")
    named = turn.get("role", turn.get("from"))
    role = ROLES.get(named.lower()) if isinstance(named, str) else None
    if role is None:
        known = ", ".join(sorted(ROLES))
        raise ShapeProblem(f"turn {i} has role {named!r}; the roles read are {known}")
    if own and "role" in turn:
        message = message_keys({**turn, "role": role})
    else:
        content = turn.get("content", turn.get("value"))
        message = {"role": role, "content": content}
        message.update({k: turn[k] for k in _TURN_KEYS if turn.get(k)})
        if named == "function_call":  # LLaMA-Factory's: {"name", "arguments"} as JSON text
            call = tool_call(json_text_value(content), i, f"turn {i} (function_call)")
            message = {"role": "assistant", "content": "", "tool_calls": [call]}
    content = message.get("content")
    if isinstance(content, list) and content and all(isinstance(p, str) for p in content):
        raise ShapeProblem(
            f"turn {i} ({role}) is a list of {len(content)} strings, not text nor content "
            "parts (join them in the source: the separator is the dataset's)"
        )
    return message


def _link_tool_results(messages: list[dict[str, Any]]) -> None:
    """A ShareGPT ``observation`` answers the ``function_call`` before it: give it that id."""
    last: str | None = None
    for m in messages:
        calls = m.get("tool_calls")
        if m.get("role") == "assistant" and calls and isinstance(calls[0], Mapping):
            last = calls[0].get("id")
        elif m.get("role") == "tool" and "tool_call_id" not in m and last is not None:
            m["tool_call_id"] = last
            last = None


def _no_empty_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without the empty system turns a set writes for "no system prompt" (Nemotron's)."""
    return [
        m for m in messages if not (m.get("role") == "system" and m.get("content") in (None, ""))
    ]


def _turns_of(value: Any, key: str, *, own: bool) -> list[dict[str, Any]]:
    value = json_text_value(value)
    if isinstance(value, str):
        if not value.strip():
            raise ShapeProblem(f"`{key}` is an empty string")
        if is_hh(value):  # an hh-rlhf transcript named as the prompt: its turns
            return hh_turns(value)
        return nemo_turns(value) or [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise ShapeProblem(f"`{key}` is {kind_of(value)}, not a list of turns or a string")
    if not value:
        raise ShapeProblem(f"`{key}` is an empty list")
    pairs = pair_turns(value)  # Capybara's {input, output}
    messages = pairs or [_turn(t, i, own=own) for i, t in enumerate(value)]
    _link_tool_results(messages)
    return _no_empty_system(messages)


def _turn_leftovers(value: Any, key: str, *, own: bool) -> dict[str, Any]:
    """``{key: [each turn's keys that are not sent]}`` when a turn has any (else ``{}``): the
    dialogue's per-turn data, kept in ``meta`` aligned with the source's turns."""
    value = json_text_value(value)
    if not isinstance(value, list):
        return {}
    out: list[dict[str, Any]] = []
    for turn in value:
        if not isinstance(turn, Mapping):
            out.append({})
            continue
        role = ROLES.get(str(turn.get("role", turn.get("from"))).lower(), "user")
        sent = MESSAGE_KEYS[role] if own and "role" in turn else _READ_KEYS
        out.append({str(k): jsonable(v) for k, v in turn.items() if k not in sent})
    return {key: out} if any(out) else {}


def _given_id(
    obj: Mapping[str, Any], keys: tuple[str, ...], named: str | None
) -> tuple[str | None, str | None]:
    for key in keys:
        value = obj.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError(f"`{key}` (the id) must be a string or an integer")
        if isinstance(value, str) and not value.strip():
            continue
        return str(value), key
    if named is not None:
        raise ValueError(f"has no `{named}` (the id field named for this dataset)")
    return None, None


def _named_layout(fields: FieldMap) -> Layout:
    key = fields.conversation or fields.prompt
    assert key is not None
    return Layout("named", "the fields named", (key,),
                  dialogue=(fields.conversation,) if fields.conversation else (),
                  prompt=(fields.prompt,) if fields.prompt else (), system=fields.system)  # fmt: skip


@dataclass
class _Reader:
    obj: Mapping[str, Any]
    layout: Layout
    fields: FieldMap
    folder: Path | None
    used: set[str] = field(default_factory=lambda: {"dataset"})

    def conversation(self) -> list[dict[str, Any]]:
        obj, layout = self.obj, self.layout
        if layout.chat_text:
            self.used |= {"system", "chat"}
            messages, self.tools = glaive_chat(obj.get("system"), obj.get("chat"))
            return messages
        if layout.reader is not None:  # a transcript: one text (hh-rlhf), a tree (oasst)
            key = layout.dialogue[0]
            self.used.add(key)
            try:
                return hh_turns(obj[key]) if layout.reader == "hh" else oasst_path(obj[key])
            except TranscriptProblem as exc:
                raise ShapeProblem(f"`{key}`: {exc}") from None
        dialogue = [k for k in layout.dialogue if k in obj]
        if dialogue and self.fields.template is None:
            self.used.add(dialogue[0])
            messages = _turns_of(obj[dialogue[0]], dialogue[0], own=layout.own)
            self.turn_meta = _turn_leftovers(obj[dialogue[0]], dialogue[0], own=layout.own)
            return messages
        keys = [k for k in layout.prompt if k in obj]
        if layout.name in ("alpaca", "dolly") or self.fields.template is not None:
            if self.fields.template is None:  # (a template's columns stay in ``meta`` too)
                self.used |= set(keys)
                _main_field(obj, keys)
            text = compose(obj, tuple(keys), self.fields.template)
            if not text:
                raise ShapeProblem(f"`{keys[0]}` is an empty string")
            return [{"role": "user", "content": text}]
        self.used.add(keys[0])
        return _turns_of(obj[keys[0]], keys[0], own=False)

    tools: list[dict[str, Any]] | None = None
    notes: set[str] = field(default_factory=set)
    #: the dialogue's per-turn keys that are not sent (WildChat's ``toxic``, a ``weight``...)
    turn_meta: dict[str, Any] = field(default_factory=dict)

    def system(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The top-level system column (the one named, the layout's, else the first of
        ``SYSTEM_FIELDS``) first, unless the conversation opens with its own."""
        if self.layout.chat_text:
            return messages
        named = self.fields.system or self.layout.system
        keys = (named,) if self.fields.system else (*((named,) if named else ()), *SYSTEM_FIELDS)
        for key in keys:
            if key in self.obj and key not in self.used:
                break
        else:
            return messages
        value = self.obj[key]
        if value is None or (isinstance(value, str) and not value.strip()):
            self.used.add(key)  # an empty system prompt: nothing to keep
            return messages
        if not isinstance(value, str):
            raise ShapeProblem(f"`{key}` (the system prompt) is {kind_of(value)}, not text")
        if messages and messages[0].get("role") in ("system", "developer"):
            if messages[0].get("content") != value:  # the conversation's own: the column kept
                self.notes.add(f"system:{key}")
            return messages
        self.used.add(key)
        return [{"role": "system", "content": value}, *messages]

    def images(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        key = self.layout.image
        if key is None or self.obj.get(key) in (None, "", []):
            return messages
        self.used.add(key)
        value = self.obj[key]
        parts = [
            image_part(v, folder=self.folder)
            for v in (value if isinstance(value, list) else [value])
        ]
        out = [dict(m) for m in messages]
        for m in out:
            if m.get("role") == "user" and isinstance(m.get("content"), str):
                text = m["content"].replace("<image>", "").strip()
                m["content"] = [*parts, {"type": "text", "text": text}]
                return out
        raise ShapeProblem("`image` is given but the conversation has no user text turn")

    def params(self) -> dict[str, Any]:
        """The tools the layout reads as conversation content, and the columns the user named
        as request parameters (``FieldMap.params``): nothing else of the row is sent."""
        obj, layout = self.obj, self.layout
        params: dict[str, Any] = {}
        if self.tools is not None:
            params = {"tools": self.tools} if self.tools else {}
        elif layout.tools is not None and obj.get(layout.tools) not in (None, "", []):
            self.used.add(layout.tools)
            tools = json_text_value(obj[layout.tools])
            converted = convert_xlam(tools) if layout.xlam else convert_tools(tools)
            params = {"tools": converted} if converted else {}
            flag = obj.get("parallel_tool_calls")
            if layout.own and converted and isinstance(flag, bool):  # the fine-tune format's
                self.used.add("parallel_tool_calls")
                params["parallel_tool_calls"] = flag
        if not self.fields.params:
            return params
        named, problem = row_params(obj, self.fields.params)
        if problem is not None:
            raise ShapeProblem(problem)
        self.used |= {k for k in self.fields.params if k in obj}
        return {**params, **named}


def _main_field(obj: Mapping[str, Any], keys: list[str]) -> None:
    """A composed prompt's first field (the instruction) is text: never replaced in silence by
    the field beside it (an empty ``instruction`` with an ``input`` is not the input alone)."""
    value = obj.get(keys[0])
    if isinstance(value, str) and value.strip():
        return
    what = {str: "an empty string", type(None): "null"}.get(type(value))
    what = what or f"{kind_of(value)}, not text"
    beside = [k for k in keys[1:] if obj.get(k) not in (None, "")]
    said = f" beside `{beside[0]}` (not sent as `{beside[0]}` alone)" if beside else ""
    raise ShapeProblem(f"`{keys[0]}` is {what}{said}")


_NO_NOTES: frozenset[str] = frozenset()


def _status_problem(obj: Mapping[str, Any]) -> str | None:
    status = obj.get("status")
    if isinstance(status, str) and status.lower() in FAILED_STATUSES:
        return f"status is {status!r}: a failed row, not a prompt"
    return None


def read_row(obj: Any, fields: FieldMap | None = None, *, folder: Path | None = None) -> RowShape:
    """Read one decoded row; ``ValueError`` for a row that cannot be read at all (the file or the
    field mapping is wrong), ``ShapeProblem`` for one to skip (its conversation is not valid, a
    parameter cannot be sent, its status says it failed). ``folder``: where a relative image path
    is read from."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"a row is a JSON object, not {kind_of(obj)}")
    fields = fields or FieldMap()
    if fields.named:
        key = fields.conversation or fields.prompt
        if key not in obj:
            raise ValueError(f"has no `{key}` (the field named for this dataset)")
        layout = _named_layout(fields)
    else:
        found = layout_of(obj)
        if found is None:
            names = ", ".join(f"`{k}`" for k in (*CONVERSATION_FIELDS, *PROMPT_FIELDS))
            raise ValueError(
                Message(
                    "no-prompt-field",
                    "has none of {names:s}; name the prompt field ({prompt_field:bare}, or "
                    "`fields:` in a manifest)",
                    names=names,
                )
            )
        layout = found
    dataset = obj.get("dataset")
    if dataset is not None and (not isinstance(dataset, str) or not dataset):
        raise ValueError("`dataset` must be a non-empty string")
    ids = (fields.id,) if fields.id is not None else (*layout.id, *ID_FIELDS)
    given, id_key = _given_id(obj, ids, fields.id)
    status = _status_problem(obj)
    if status is not None:
        raise ShapeProblem(status)
    reader = _Reader(obj, layout, fields, folder)
    if layout.status:
        reader.used.add("status")  # a success: the regeneration's, not the dataset's data
    messages = reader.images(reader.system(reader.conversation()))
    params = reader.params()
    problem = validate_conversation(messages)
    if problem is not None:
        raise ShapeProblem(problem)
    used = reader.used | ({id_key} if id_key else set())
    meta = {str(k): jsonable(v) for k, v in obj.items() if k not in used}
    unsent = CHAT_PARAMETERS.intersection(meta)  # named like parameters, not sent: said once
    notes = frozenset(reader.notes.union(f"param:{k}" for k in unsent)) if unsent or reader.notes \
        else _NO_NOTES  # fmt: skip
    meta.update(reader.turn_meta)
    return RowShape(messages, given, dataset, params, layout.name, meta, notes,
                    id_params(obj) if layout.own else None)  # fmt: skip
