"""The file formats prompts come in besides JSON Lines: gzip (``.jsonl.gz``, as hh-rlhf and
HelpSteer2 ship on the Hub), CSV and TSV with their header, one pretty-printed JSON object (one
row); each read as its rows, each damaged file named."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from openrouter_probe.errors import ConfigError
from openrouter_probe.generation.prompts import read_prompts


def U(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_a_gzip_file_is_read_as_the_file_inside(tmp_path: Path) -> None:
    rows = [{"id": "a", "prompt": "Name a prime."}, {"id": "b", "prompt": "Name a river."}]
    lines = tmp_path / "rows.jsonl.gz"
    lines.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert [(r.id, r.messages) for r in read_prompts(lines)] == [
        ("a", [U("Name a prime.")]),
        ("b", [U("Name a river.")]),
    ]
    array = tmp_path / "rows.json.gz"
    array.write_bytes(gzip.compress(json.dumps(rows, indent=1).encode()))
    assert [r.id for r in read_prompts(array)] == ["a", "b"]
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(lines.read_bytes()[:20])
    with pytest.raises(ConfigError, match=r"cut.jsonl.gz: a damaged or cut gzip file"):
        read_prompts(cut)


def test_csv_and_tsv_are_read_by_their_header(tmp_path: Path) -> None:
    csv_file = tmp_path / "alpaca.csv"
    csv_file.write_text(
        "instruction,input,output\n"
        '"Translate to French.","Where is the library?","Où est la bibliothèque ?"\n'
        '"Give a tip, briefly.",,"Sleep."\n'
        '"Too many",a,b,c\n',
        encoding="utf-8",
    )
    rows = read_prompts(csv_file)
    assert [r.messages for r in rows] == [
        [U("Translate to French.\n\nWhere is the library?")],
        [U("Give a tip, briefly.")],
    ]
    assert rows.rows[0].extra == {"meta": {"output": "Où est la bibliothèque ?"}}
    assert rows.skipped == [f"{csv_file}: row 3: has 1 more cell(s) than the header"]
    tsv = tmp_path / "q.tsv"
    tsv.write_text("id\tquestion\nq1\tWhat is 6 * 7?\n", encoding="utf-8")
    assert [(r.id, r.messages) for r in read_prompts(tsv)] == [("q1", [U("What is 6 * 7?")])]


def test_one_pretty_printed_json_object_is_one_row(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"id": "only", "prompt": "Hello there."}, indent=2))
    rows = read_prompts(path)
    assert [(r.id, r.messages, r.line) for r in rows] == [("only", [U("Hello there.")], 1)]
    also = tmp_path / "one.jsonl"  # the same, named JSON Lines: not read line by line
    also.write_text(path.read_text())
    assert [r.id for r in read_prompts(also)] == ["only"]
