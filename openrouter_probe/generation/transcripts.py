"""Transcripts: conversations a dataset writes as one text or as a tree, read into turns.

- Anthropic/hh-rlhf: ``chosen`` is one transcript, ``"\\n\\nHuman: ..."`` and
  ``"\\n\\nAssistant: ..."`` in turn (``hh_turns``); its last assistant answer is the one a
  regeneration replaces (``--turns last`` keeps it as ``original``);
- NeMo's turn markers (nvidia/HelpSteer2's multi-turn ``prompt``): the first user turn, then
  ``<extra_id_1>Assistant\\n...`` and ``<extra_id_1>User\\n...`` (``nemo_turns``);
- LDJnr/Capybara: ``conversation`` is a list of ``{input, output}`` pairs, a user turn and its
  answer each (``pair_turns``);
- OpenAssistant (oasst1, oasst2): a message tree (``prompt`` with ``children``, the
  ``.trees.jsonl`` files) or its messages one per row (``message_id``, ``parent_id``, ``role``:
  ``prompter``/``assistant``, ``text``, ``deleted``: the Hub's parquet, ``.messages.jsonl``),
  gathered into trees (``OasstTrees``). Each path from the initial prompt to a leaf is one
  conversation (``oasst_paths``: its id the leaf's ``message_id``); deleted messages and the
  replies under them are left out. ``oasst_path`` reads one path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "OASST_MESSAGE",
    "OasstTrees",
    "TranscriptProblem",
    "hh_turns",
    "is_hh",
    "nemo_turns",
    "oasst_path",
    "oasst_paths",
    "pair_turns",
]

#: The columns of an OpenAssistant message row.
OASST_MESSAGE = ("message_id", "parent_id", "role", "text")
_OASST_ROLES = {"prompter": "user", "assistant": "assistant"}
_HH_MARK = re.compile(r"(?:^|\n\n)(Human|Assistant):[ \t]?")
_NEMO_MARK = re.compile(r"<extra_id_1>(User|Assistant)\n?")


class TranscriptProblem(ValueError):
    """A transcript that does not split into turns (one line: why)."""


def is_hh(value: Any) -> bool:
    """Whether ``value`` is an hh-rlhf transcript (``"\\n\\nHuman: ..."``, as every one of the
    set starts: a prompt that merely begins with "Human:" is not one)."""
    return isinstance(value, str) and value.startswith("\n\nHuman:")


def hh_turns(text: str) -> list[dict[str, Any]]:
    """An hh-rlhf transcript as user and assistant turns, each text stripped."""
    pieces = _HH_MARK.split(text.lstrip("\n"))
    if pieces[0].strip():
        raise TranscriptProblem("the transcript does not start with Human:")
    roles = {"Human": "user", "Assistant": "assistant"}
    return [
        {"role": roles[mark], "content": body.strip()}
        for mark, body in zip(pieces[1::2], pieces[2::2], strict=True)
    ]


def nemo_turns(text: str) -> list[dict[str, Any]] | None:
    """A prompt with NeMo's ``<extra_id_1>User``/``<extra_id_1>Assistant`` markers as turns (the
    text before the first marker is the first user turn); ``None`` when it has none."""
    if "<extra_id_1>" not in text:
        return None
    pieces = _NEMO_MARK.split(text)
    if len(pieces) == 1:
        return None
    turns = [{"role": "user", "content": pieces[0].strip()}]
    for mark, body in zip(pieces[1::2], pieces[2::2], strict=True):
        turns.append({"role": "user" if mark == "User" else "assistant", "content": body.strip()})
    return turns


def pair_turns(value: list[Any]) -> list[dict[str, Any]] | None:
    """Capybara's ``[{input, output}]`` as a user turn and its answer each; ``None`` when the
    list is not of such pairs."""
    if not value or not all(
        isinstance(t, Mapping) and "input" in t and "role" not in t and "from" not in t
        for t in value
    ):
        return None
    turns: list[dict[str, Any]] = []
    for pair in value:
        turns.append({"role": "user", "content": pair.get("input")})
        if pair.get("output") not in (None, ""):
            turns.append({"role": "assistant", "content": pair.get("output")})
    return turns


def oasst_path(root: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A path's conversation (``oasst_paths``: a tree of one reply each, as the rows are read):
    the initial prompt, then each reply down to the leaf."""
    if root.get("deleted"):
        raise TranscriptProblem("the initial prompt is deleted")
    turns: list[dict[str, Any]] = []
    node: Mapping[str, Any] | None = root
    while node is not None:
        role = _OASST_ROLES.get(str(node.get("role")))
        if role is None:
            raise TranscriptProblem(
                f"message {node.get('message_id')!r} has role {node.get('role')!r}, not "
                "prompter or assistant"
            )
        turns.append({"role": role, "content": node.get("text")})
        kept = _kept(node)
        node = kept[0] if kept else None
    return turns


def _kept(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    children = node.get("children")
    if not isinstance(children, list):
        return []
    return [c for c in children if isinstance(c, Mapping) and not c.get("deleted")]


def oasst_paths(root: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every path of a message tree from its initial prompt to a leaf, deleted messages and the
    replies under them left out: ``(the leaf's message_id, the path as a tree of one reply
    each)``, in the tree's order; none when the initial prompt is deleted."""
    paths: list[tuple[str, dict[str, Any]]] = []
    stack: list[tuple[Mapping[str, Any], tuple[Mapping[str, Any], ...]]] = []
    if not root.get("deleted"):
        stack.append((root, ()))
    while stack:
        node, trail = stack.pop()
        trail = (*trail, node)
        kept = _kept(node)
        if not kept:
            chain: dict[str, Any] | None = None
            for message in reversed(trail):
                chain = {**message, "children": [chain] if chain is not None else []}
            assert chain is not None
            paths.append((str(node.get("message_id")), chain))
        stack.extend((child, trail) for child in reversed(kept))
    return paths


@dataclass
class OasstTrees:
    """OpenAssistant message rows gathered into trees: ``add`` each row (with its number),
    ``trees`` the trees in the order their initial prompts came, each ``(number, tree)`` with
    ``tree["prompt"]`` the root and every message's ``children`` (orphans are named)."""

    rows: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def add(self, number: int, row: Mapping[str, Any]) -> None:
        message = {**row, "children": []}
        key = str(row.get("message_id"))
        self.rows[key] = (number, message)
        self.order.append(key)

    def trees(self) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
        """The trees, and ``(number, why)`` for each message whose parent is not in the file."""
        roots, orphans = [], []
        for key in self.order:
            number, message = self.rows[key]
            parent = message.get("parent_id")
            if parent is None:
                tree = {k: message.get(k) for k in ("message_tree_id", "tree_state", "lang")}
                roots.append((number, {**tree, "prompt": message}))
            elif str(parent) in self.rows:
                self.rows[str(parent)][1]["children"].append(message)
            else:
                orphans.append((number, f"an oasst reply whose parent {parent!r} is not here"))
        return roots, orphans
