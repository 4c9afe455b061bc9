"""Layouts: which columns of a popular SFT set make the conversation, the system turn, the id and
the tools, each entry read from its dataset card.

A row is matched to the first layout whose ``needs`` columns it has (``LAYOUTS`` runs from the
most specific to the most general); ``generation.shapes`` reads it by that entry.
``docs/inputs.md`` ("The layout table") shows the table and the composition rules: a composed
prompt (``TEMPLATE``), the system column, tools in OpenAI's schema (xlam's converted, glaive's
parsed out of its text), an image as an ``image_url`` part.
"""

from __future__ import annotations

import base64
import io
import json
import mimetypes
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openrouter_probe.api.jsontext import kind_of
from openrouter_probe.generation.transcripts import is_hh
from openrouter_probe.rules.server_tools import PREFIX as SERVER_TOOL
from openrouter_probe.rules.server_tools import unbounded

__all__ = [
    "LAYOUTS",
    "TEMPLATE",
    "Layout",
    "ShapeProblem",
    "compose",
    "convert_tools",
    "convert_xlam",
    "glaive_chat",
    "image_part",
    "layout_of",
    "tool_call",
]

#: Alpaca's and Dolly's instruction and input, as one user turn.
TEMPLATE = "{instruction}\n\n{input}"


class ShapeProblem(ValueError):
    """A row that is valid JSON but not a conversation to send (one line: why): skipped, never
    sent."""


@dataclass(frozen=True)
class Layout:
    """One entry of the table: the set it reads, the columns that identify it and what each
    column is."""

    name: str
    sets: str  # the Hub ids (and formats) it is read from
    needs: tuple[str, ...]  # every one present: the row is of this layout
    dialogue: tuple[str, ...] = ()  # the first present: a list of turns (or a string)
    prompt: tuple[str, ...] = ()  # composed into one user turn (the first present, or all)
    system: str | None = None
    id: tuple[str, ...] = ("id", "uuid", "prompt_id")
    tools: str | None = None
    image: str | None = None
    own: bool = False  # our own shape: OpenAI's messages (their keys) and fine-tune `tools`
    chat_text: bool = False  # glaive: the dialogue is one USER:/ASSISTANT: string
    xlam: bool = False
    status: bool = False  # a status column: rows whose status is not a success are skipped
    reader: str | None = None  # the dialogue is a transcript: "hh" (one text), "oasst" (a tree)


_PROMPTS = ("prompt", "question", "instruction", "query", "input")

LAYOUTS: tuple[Layout, ...] = (
    Layout("oasst-tree", "OpenAssistant/oasst1, oasst2 (each path of a tree; message rows "
           "gathered into trees)", ("message_tree_id", "prompt"), dialogue=("prompt",),
           id=("path_id", "message_tree_id"), reader="oasst"),
    Layout("hh-rlhf", "Anthropic/hh-rlhf", ("chosen", "rejected"), dialogue=("chosen",),
           reader="hh"),
    Layout("glaive", "glaiveai/glaive-function-calling-v2", ("system", "chat"), chat_text=True,
           system="system"),
    Layout("xlam", "Salesforce/xlam-function-calling-60k", ("query", "tools", "answers"),
           prompt=("query",), tools="tools", xlam=True),
    Layout("nemotron-v2", "nvidia/Nemotron-Post-Training-Dataset-v1/-v2",
           ("messages", "generator", "reasoning"), dialogue=("messages",), id=("uuid",)),
    Layout("llama-nemotron", "nvidia/Llama-Nemotron-Post-Training-Dataset",
           ("input", "generator"), dialogue=("input",), system="system_prompt", id=("uuid",)),
    Layout("wildchat", "allenai/WildChat-1M", ("conversation", "conversation_hash"),
           dialogue=("conversation",), id=("conversation_hash",)),
    Layout("lmsys", "lmsys/lmsys-chat-1m", ("conversation", "conversation_id"),
           dialogue=("conversation",), id=("conversation_id",)),
    Layout("openorca", "Open-Orca/OpenOrca", ("system_prompt", "question", "response"),
           prompt=("question",), system="system_prompt"),
    Layout("alpaca", "tatsu-lab/alpaca, yahma/alpaca-cleaned", ("instruction", "input", "output"),
           prompt=("instruction", "input")),
    Layout("dolly", "databricks/databricks-dolly-15k", ("instruction", "context", "response"),
           prompt=("instruction", "context")),
    Layout("specforge-vlm", "SpecForge prepare_data.py (vlm presets)",
           ("conversations", "image"), dialogue=("conversations",), image="image"),
    Layout("regenerated", "SpecForge regenerate_train_data.py; export it in the specforge format",
           ("conversations", "status"), dialogue=("conversations",), status=True),
    Layout("openthoughts", "open-thoughts/OpenThoughts-114k", ("system", "conversations"),
           dialogue=("conversations",), system="system"),
    Layout("sharegpt", "ShareGPT, OpenHermes-2.5, SlimOrca, Infinity-Instruct, Magpie, "
           "hermes-fc, LLaMA-Factory glaive, SpecForge prepared", ("conversations",),
           dialogue=("conversations",), system="system_prompt", tools="tools"),
    Layout("ours", "ours; OpenAI fine-tune (tools); Tulu-3 SFT mixture; UltraChat",
           ("messages",), dialogue=("messages",), tools="tools", own=True),
    Layout("capybara", "LDJnr/Capybara", ("conversation", "source"), dialogue=("conversation",)),
    Layout("wildchat-like", "any `conversation` list", ("conversation",),
           dialogue=("conversation",)),
    Layout("sharegpt-raw", "raw ShareGPT exports (`items`)", ("items",), dialogue=("items",)),
    Layout("helpsteer2", "nvidia/HelpSteer2", ("prompt", "response", "helpfulness"),
           prompt=("prompt",)),
    Layout("ours-prompt", "ours: a `prompt` string", ("prompt",), prompt=("prompt",),
           tools="tools", own=True),
    Layout("single", "gsm8k (`question`), Magpie (`instruction`), Nemotron (`input`)", (),
           prompt=_PROMPTS),
)  # fmt: skip


#: ``layout_of`` by a row's columns, where they alone decide it (the rows of one file share
#: theirs: the table is walked once per set of columns, not per row); bounded.
_BY_COLUMNS: dict[frozenset[str], Layout | None] = {}
#: the layouts a value decides too (not only the columns): never cached by columns
_BY_VALUE = {"nemotron-v2", "hh-rlhf", "oasst-tree"}
_VALUED = tuple(frozenset(x.needs) for x in LAYOUTS if x.name in _BY_VALUE)


def layout_of(obj: Mapping[str, Any]) -> Layout | None:
    """The first layout whose columns the row has (``None``: none of the known fields)."""
    columns = frozenset(obj)
    if columns in _BY_COLUMNS:
        return _BY_COLUMNS[columns]
    found = _layout_of(obj)
    if len(_BY_COLUMNS) < 256 and not any(columns >= needs for needs in _VALUED):
        _BY_COLUMNS[columns] = found
    return found


def _layout_of(obj: Mapping[str, Any]) -> Layout | None:
    for layout in LAYOUTS:
        if not all(k in obj for k in layout.needs):
            continue
        if layout.name == "nemotron-v2" and not isinstance(obj.get("reasoning"), str):
            continue  # our own row with a `reasoning` object and a `generator` column
        if layout.name == "hh-rlhf" and not is_hh(obj.get("chosen")):
            continue  # a preference set with its own prompt column (truthy-dpo, orca_dpo_pairs)
        if layout.name == "oasst-tree" and not isinstance(obj.get("prompt"), Mapping):
            continue
        if layout.name == "single" and not any(k in obj for k in layout.prompt):
            return None
        return layout
    return None


class _Blank(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        raise ValueError(f"the template names `{key}`, a column the row does not have")


def compose(obj: Mapping[str, Any], fields: tuple[str, ...], template: str | None) -> str:
    """The one user turn of a composed prompt: ``template`` filled with the row's columns, else
    the ``fields`` joined by a blank line (empty ones left out)."""
    if template is not None:
        values = _Blank({k: "" if v is None else str(v) for k, v in obj.items()})
        try:
            return template.format_map(values).strip()
        except (ValueError, IndexError) as exc:
            raise ValueError(f"the template cannot be filled ({exc})") from None
    parts = []
    for key in fields:
        value = obj.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue
        if not isinstance(value, str):
            raise ValueError(f"`{key}` is {kind_of(value)}, not text")
        parts.append(value.strip())
    return "\n\n".join(parts)


def _function(tool: Any, i: int) -> dict[str, Any]:
    if isinstance(tool, Mapping) and str(tool.get("type") or "").startswith(SERVER_TOOL):
        return dict(tool)  # OpenRouter's own server tool, as given (``convert_tools`` bounds it)
    if isinstance(tool, Mapping) and tool.get("type") == "function":
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return dict(tool)
    if isinstance(tool, Mapping) and isinstance(tool.get("name"), str) and "type" not in tool:
        return {"type": "function", "function": dict(tool)}
    raise ShapeProblem(
        f"tools[{i}] is neither an OpenAI tool ({{type: function, function: {{name, ...}}}}) "
        "nor a function ({name, description, parameters})"
    )


def convert_tools(value: Any) -> list[dict[str, Any]]:
    """A ``tools`` column in OpenAI's schema: OpenAI tools and OpenRouter's server tools as they
    are, bare functions wrapped; a server tool whose cost the cap cannot bound refuses the row
    (``rules.server_tools.unbounded``: the line says how to bound it)."""
    if not isinstance(value, list):
        raise ShapeProblem("`tools` is not a list of tools (nor JSON text of one)")
    tools = [_function(t, i) for i, t in enumerate(value)]
    problem = unbounded(tools)
    if problem is not None:
        raise ShapeProblem(problem)
    return tools


_XLAM_TYPES = {
    "str": "string", "string": "string", "int": "integer", "integer": "integer",
    "float": "number", "number": "number", "bool": "boolean", "boolean": "boolean",
    "list": "array", "array": "array", "dict": "object", "object": "object", "tuple": "array",
    "set": "array", "any": None,
}  # fmt: skip
_XLAM_TYPE = re.compile(r"^\s*(?P<base>[A-Za-z]+)(?:\[.*\])?\s*(?P<opt>,\s*optional)?\s*$")


def convert_xlam(value: Any) -> list[dict[str, Any]]:
    """xlam's tools (``{name, description, parameters: {arg: {type, description, default}}}``,
    types as Python writes them: ``str``, ``List[int]``, ``float, optional``) in OpenAI's schema;
    a type it cannot map refuses the row by name."""
    if not isinstance(value, list):
        raise ShapeProblem("xlam `tools` is not a list of functions (nor JSON text of one)")
    out = []
    for i, tool in enumerate(value):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str):
            raise ShapeProblem(f"xlam tools[{i}] has no `name`")
        params = tool.get("parameters") or {}
        if not isinstance(params, Mapping):
            raise ShapeProblem(f"xlam tools[{i}] ({tool['name']}): `parameters` is not an object")
        properties: dict[str, Any] = {}
        required = []
        for arg, spec in params.items():
            spec = spec if isinstance(spec, Mapping) else {}
            written = str(spec.get("type", "any"))
            match = _XLAM_TYPE.match(written)
            base = match.group("base").lower() if match else None
            if base not in _XLAM_TYPES:
                raise ShapeProblem(
                    f"xlam tools[{i}] ({tool['name']}): argument `{arg}` has type {written!r}, "
                    "which has no JSON Schema type here"
                )
            prop: dict[str, Any] = {}
            if _XLAM_TYPES[base] is not None:
                prop["type"] = _XLAM_TYPES[base]
            if spec.get("description"):
                prop["description"] = str(spec["description"])
            if "default" in spec and spec["default"] not in (None, ""):
                prop["default"] = spec["default"]
            properties[str(arg)] = prop
            if not (match and match.group("opt")) and "default" not in spec:
                required.append(str(arg))
        parameters: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            parameters["required"] = required
        function = {"name": tool["name"], "parameters": parameters}
        if tool.get("description"):
            function["description"] = str(tool["description"])
        out.append({"type": "function", "function": function})
    return out


_GLAIVE_MARK = re.compile(r"(?:^|\n+)\s*(USER|ASSISTANT|FUNCTION RESPONSE):\s?")
_END = "<|endoftext|>"


def _glaive_functions(system: str) -> tuple[str, list[dict[str, Any]]]:
    """Glaive's ``system`` text: the prompt before the functions, and each function (JSON objects
    one after another) as an OpenAI tool."""
    text = system.strip().removeprefix("SYSTEM:").strip()
    start = text.find("{")
    if start < 0:
        return text, []
    prompt, rest = text[:start].strip(), text[start:]
    decoder, at = json.JSONDecoder(), 0
    tools: list[dict[str, Any]] = []
    while at < len(rest):
        while at < len(rest) and rest[at] in " \t\r\n,":
            at += 1
        if at >= len(rest):
            break
        try:
            function, at = decoder.raw_decode(rest, at)
        except ValueError:
            raise ShapeProblem(
                "glaive `system`: the function list is not JSON objects one after another"
            ) from None
        tools.append(_function(function, len(tools)))
    return prompt.rstrip(" -:"), tools


def _glaive_call(text: str, n: int) -> dict[str, Any]:
    body = text.replace("<functioncall>", "", 1).replace(_END, "").strip()
    # glaive writes the arguments as a JSON string in single quotes: '{"a": 1}'
    body = re.sub(r"\"arguments\"\s*:\s*'(.*)'\s*}\s*$", r'"arguments": \1}', body, flags=re.S)
    try:
        call = json.loads(body)
    except ValueError:
        raise ShapeProblem(f"glaive turn {n}: the <functioncall> is not JSON") from None
    return tool_call(call, n, f"glaive turn {n}: the <functioncall>")


def tool_call(call: Any, n: int, what: str) -> dict[str, Any]:
    """``{"name", "arguments"}`` (the arguments an object or JSON text) as the chat API's tool
    call ``call_N``; ``what`` names the turn that holds it when it names no function."""
    if not isinstance(call, Mapping):
        raise ShapeProblem(f"{what} is not JSON of {{name, arguments}}")
    if not isinstance(call.get("name"), str):
        raise ShapeProblem(f"{what} names no function")
    arguments = call.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return {"id": f"call_{n}", "type": "function",
            "function": {"name": call["name"], "arguments": arguments}}  # fmt: skip


def glaive_chat(system: Any, chat: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Glaive's ``system`` and ``chat`` strings as chat messages and OpenAI tools: ``USER:`` is a
    user turn, ``ASSISTANT: <functioncall> {...}`` an assistant tool call, ``FUNCTION RESPONSE:``
    the tool message answering it, ``<|endoftext|>`` dropped."""
    if not isinstance(chat, str) or not isinstance(system, str | None):
        raise ShapeProblem("glaive `system` and `chat` are not text")
    prompt, tools = _glaive_functions(system or "")
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}] if prompt else []
    pieces = _GLAIVE_MARK.split(chat)
    if pieces[0].strip():
        raise ShapeProblem("glaive `chat` does not start with USER:")
    last_call: str | None = None
    for n, (mark, text) in enumerate(zip(pieces[1::2], pieces[2::2], strict=True)):
        text = text.replace(_END, "").strip()
        if mark == "USER":
            messages.append({"role": "user", "content": text})
        elif mark == "ASSISTANT" and text.startswith("<functioncall>"):
            call = _glaive_call(text, n)
            last_call = call["id"]
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif mark == "ASSISTANT":
            messages.append({"role": "assistant", "content": text})
        else:
            if last_call is None:
                raise ShapeProblem(f"glaive turn {n}: a FUNCTION RESPONSE answers no call")
            messages.append({"role": "tool", "tool_call_id": last_call, "content": text})
            last_call = None
    return messages, tools


def image_part(value: Any, *, folder: Path | None = None) -> dict[str, Any]:
    """An image column as an ``image_url`` part: a URL or ``data:`` URL as it is; a local file
    (from ``folder``, the source's) as a ``data:`` URL; ``{"bytes", "path"}`` (datasets' Image
    undecoded) from its bytes; a PIL image (datasets' Image, streamed) encoded in its format."""
    if callable(getattr(value, "save", None)) and hasattr(value, "format"):  # a PIL image
        buffer = io.BytesIO()
        kind = str(value.format or "PNG").upper()
        value.save(buffer, format=kind)
        value = {"bytes": buffer.getvalue(), "path": f"image.{kind.lower()}"}
    if isinstance(value, Mapping) and isinstance(value.get("bytes"), bytes | bytearray):
        mime = mimetypes.guess_type(str(value.get("path") or "x.png"))[0] or "image/png"
        data = base64.b64encode(bytes(value["bytes"])).decode()
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
    if isinstance(value, Mapping) and value.get("path"):
        value = value["path"]
    if not isinstance(value, str) or not value.strip():
        raise ShapeProblem("`image` is not a path, a URL or image bytes")
    if value.startswith(("http://", "https://", "data:")):
        return {"type": "image_url", "image_url": {"url": value}}
    path = Path(value)
    if not path.is_absolute() and folder is not None:
        path = folder / path
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ShapeProblem(f"`image` {value}: cannot read it ({exc.strerror})") from None
    mime = mimetypes.guess_type(path.name)[0] or "image/png"
    return {"type": "image_url",
            "image_url": {"url": f"data:{mime};base64,{base64.b64encode(raw).decode()}"}}  # fmt: skip
