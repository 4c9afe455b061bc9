"""Request parameters: the chat parameters a row may set, each checked, and the message keys sent.

``CHAT_PARAMETERS`` is the body of OpenRouter's chat completions request as the official SDK
``openrouter`` 1.3.84 declares it (``openrouter.components.chatrequest.ChatRequest``'s fields),
without the ones the policy and the run decide (``model``, ``models``, ``provider``, ``stream``,
``messages``: ``RESERVED``), plus the documented ones the SDK does not list (``include_reasoning``,
``usage``, ``transforms``, ``verbosity``, ``web_search_options``: OpenRouter's docs, see
``OPENROUTER.md`` §6-§7). A row's key that is not one of them is the dataset's data, never sent.

``check`` says why a value cannot be sent (one line) or ``None``: the ranges are the SDK's
docstrings (``temperature`` 0-2, ``top_p`` 0-1, the penalties -2 to 2, ``top_logprobs`` 0-20,
``stop`` up to 4), whole numbers where the API takes integers, and no NaN or infinity anywhere (JSON
has none; ``json.dumps`` would write ``NaN``, which the API refuses).

Example::

    from openrouter_probe.generation.params import check

    check("temperature", 7)      # 'temperature=7 is outside [0, 2]'
    check("temperature", "hot")  # 'temperature='hot' is not a number'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from openrouter_probe.api.jsontext import json_text_value, kind_of
from openrouter_probe.errors import Message
from openrouter_probe.rules.server_tools import unbounded

__all__ = [
    "CHAT_PARAMETERS",
    "MESSAGE_KEYS",
    "RESERVED",
    "check",
    "id_params",
    "message_keys",
    "parse_row_params",
    "row_params",
    "row_params_problem",
]

#: ``ChatRequest``'s fields in the ``openrouter`` SDK 1.3.84, less ``RESERVED``, plus the
#: documented ones it leaves out.
CHAT_PARAMETERS = frozenset(
    {
        "cache_control", "debug", "deferred_tools", "frequency_penalty", "image_config",
        "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata", "min_p",
        "modalities", "parallel_tool_calls", "plugins", "prediction", "presence_penalty",
        "prompt_cache_key", "prompt_cache_options", "reasoning", "reasoning_effort",
        "repetition_penalty", "response_format", "seed", "service_tier", "session_id", "stop",
        "stop_server_tools_when", "stream_options", "temperature", "tool_choice", "tools",
        "top_a", "top_k", "top_logprobs", "top_p", "trace", "user",
        # documented by OpenRouter, not (or no longer) in the SDK's model
        "include_reasoning", "usage", "transforms", "verbosity", "web_search_options",
    }
)  # fmt: skip
#: Body keys the policy (``provider``) and the run (``model``, ``stream``, ...) decide.
RESERVED = frozenset({"model", "models", "provider", "stream", "route", "messages"})

#: The keys of a chat message the API reads, by role (the SDK's message models); any other key
#: (the fine-tune format's ``weight``, a trainer's ``generated``, WildChat's ``toxic``...) is not
#: sent.
MESSAGE_KEYS: dict[str, frozenset[str]] = {
    "user": frozenset({"role", "content", "name"}),
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
    "assistant": frozenset(
        {"role", "content", "name", "tool_calls", "reasoning", "reasoning_details", "refusal"}
    ),
}

_EFFORTS = ("max", "xhigh", "high", "medium", "low", "minimal", "none")
_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "min_p": (0.0, 1.0),
    "top_a": (0.0, 1.0),
    "frequency_penalty": (-2.0, 2.0),
    "presence_penalty": (-2.0, 2.0),
    "repetition_penalty": (0.0, 2.0),
}
_WHOLE: dict[str, int] = {
    "max_tokens": 1,
    "max_completion_tokens": 1,
    "top_k": 0,
    "top_logprobs": 0,
    "seed": -(2**63),
}
_FLAGS = ("logprobs", "parallel_tool_calls", "include_reasoning")
_TEXTS = ("user", "session_id", "prompt_cache_key", "service_tier", "verbosity")
_LISTS = ("tools", "plugins", "modalities", "transforms", "stop_server_tools_when")
_OBJECTS = ("reasoning", "response_format", "metadata", "logit_bias", "web_search_options",
            "usage", "prediction", "trace", "debug", "image_config")  # fmt: skip


def parse_row_params(value: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """``--row-params seed,temperature`` (or a list, a manifest's ``params:``) as names."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(dict.fromkeys(str(item).strip() for item in items if str(item).strip()))


def row_params_problem(names: tuple[str, ...]) -> str | None:
    """Why the columns ``names`` cannot be sent as request parameters (``None``: they can):
    each must be an OpenRouter chat parameter the policy and the run do not decide."""
    for name in names:
        if name in RESERVED:
            return f"`{name}` is decided by the policy and the run, never by a row"
        if name not in CHAT_PARAMETERS:
            return f"`{name}` is not an OpenRouter chat parameter (generation/params.py)"
    return None


def row_params(obj: Mapping[str, Any], names: tuple[str, ...]) -> tuple[dict[str, Any], str | None]:
    """The columns ``names`` (``--row-params``) of a row as request parameters, and why one of
    them cannot be sent (``None``: all can; the row is then skipped). A column the row lacks (or
    null) is not sent; ``reasoning_effort`` is sent as ``reasoning.effort``."""
    params = {k: json_text_value(obj[k]) if k == "tools" else obj[k] for k in names
              if obj.get(k) is not None}  # fmt: skip
    for key, value in params.items():
        problem = check(key, value)
        if problem is not None:
            return {}, problem
    if "reasoning_effort" in params and "reasoning" not in params:
        params["reasoning"] = {"effort": params.pop("reasoning_effort")}
    return params, None


def id_params(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Our own row's chat-parameter columns as its content id has always hashed them, sent or
    not (the versions that sent them all hashed them so: an output they wrote resumes)."""
    params = {k: json_text_value(v) if k == "tools" else v for k, v in obj.items()
              if k in CHAT_PARAMETERS}  # fmt: skip
    if "reasoning_effort" in params and "reasoning" not in params:
        params["reasoning"] = {"effort": params.pop("reasoning_effort")}
    return params


def message_keys(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` with only the keys the API reads for its role (``MESSAGE_KEYS``)."""
    keep = MESSAGE_KEYS.get(str(message.get("role")), MESSAGE_KEYS["user"])
    return {k: v for k, v in message.items() if k in keep}


def _finite(value: Any) -> bool:
    """Whether ``value`` holds no NaN or infinity, at any depth."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _tool_problem(tools: list[Any]) -> str | None:
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("type"), str):
            return f"tools[{i}] is not a tool (an object with a `type`)"
        if tool["type"] == "function":
            function = tool.get("function")
            if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
                return f"tools[{i}] is a function tool without `function.name` (OpenAI's schema)"
    # a server tool billed beyond what the spend cap can bound is refused before it is sent
    return unbounded(tools)


def _reasoning_problem(value: Mapping[str, Any]) -> str | None:
    effort = value.get("effort")
    if effort is not None and effort not in _EFFORTS:
        return f"reasoning.effort={effort!r}: one of {', '.join(_EFFORTS)}"
    budget = value.get("max_tokens")
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)
                               or budget < 0):  # fmt: skip
        return f"reasoning.max_tokens={budget!r} is not a whole number >= 0"
    if effort is not None and budget is not None:
        return "reasoning sets both effort and max_tokens (give one)"
    return None


def _shape_problem(name: str, value: Any) -> str | None:
    """The type and range rules of one parameter (``None``: it may be sent)."""
    if name in _RANGES:
        low, high = _RANGES[name]
        if not _number(value):
            return f"{name}={value!r} is not a number"
        if not low <= value <= high:
            return f"{name}={value!r} is outside [{low:g}, {high:g}]"
    elif name in _WHOLE:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{name}={value!r} is not a whole number"
        if value < _WHOLE[name] or (name == "top_logprobs" and value > 20):
            most = " and <= 20" if name == "top_logprobs" else ""
            return f"{name}={value!r}: give a whole number >= {_WHOLE[name]}{most}"
    elif name in _FLAGS and not isinstance(value, bool):
        return f"{name}={value!r} is not true or false"
    elif name in _TEXTS and not isinstance(value, str):
        return f"{name}={value!r} is not a string"
    elif name in _LISTS and not isinstance(value, list):
        return f"{name} is {kind_of(value)}, not a list"
    elif name in _OBJECTS and not isinstance(value, Mapping):
        return f"{name}={value!r} is not an object"
    elif name == "stop" and not (
        isinstance(value, str)
        or (isinstance(value, list) and len(value) <= 4 and all(isinstance(s, str) for s in value))
    ):
        return f"stop={value!r} is not a string or a list of up to 4 strings"
    elif name == "reasoning_effort" and value not in _EFFORTS:
        return f"reasoning_effort={value!r}: one of {', '.join(_EFFORTS)}"
    elif name == "tool_choice" and not (
        value in ("none", "auto", "required") or isinstance(value, Mapping)
    ):
        return f"tool_choice={value!r}: 'none', 'auto', 'required' or a named tool"
    return None


def check(name: str, value: Any) -> str | None:
    """Why the chat parameter ``name`` cannot be sent as ``value`` (one line), or ``None``."""
    if name in RESERVED:
        return Message(
            "row-sets-reserved",
            "sets {name:s}: the policy ({policy}) and the run decide it, not a row",
            name=name,
        )
    if name not in CHAT_PARAMETERS:
        return f"{name} is not an OpenRouter chat parameter"
    if not _finite(value):
        return f"{name}={value!r} holds NaN or infinity (not JSON)"
    problem = _shape_problem(name, value)
    if problem is None and name == "tools":
        problem = _tool_problem(value)
    if problem is None and name == "reasoning":
        problem = _reasoning_problem(value)
    return problem
