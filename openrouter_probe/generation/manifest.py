"""A manifest: many datasets in one job, each with its source, selection, weight and turns.

A small YAML file (``examples/datasets.yaml`` is one; ``docs/inputs.md``, "Many datasets in one
job", shows every key). ``generate MANIFEST.yaml`` reads every dataset into one prompt set; the
weights become the run's ``--weights``, and ``turns`` a dataset's own ``--turns``.

Example::

    from openrouter_probe.generation.manifest import read_inputs

    inputs = read_inputs("examples/datasets.yaml", turns="last")
    inputs.prompts.datasets, inputs.weights
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from openrouter_probe.errors import ConfigError, OptionError, braced, validation_errors
from openrouter_probe.generation.params import parse_row_params, row_params_problem
from openrouter_probe.generation.prompts import PromptSet, Selection, read_prompts
from openrouter_probe.generation.shapes import FieldMap
from openrouter_probe.generation.sources import HF_PREFIX, hf_only

__all__ = [
    "DatasetEntry",
    "Inputs",
    "Manifest",
    "SourceOptions",
    "is_manifest",
    "read_inputs",
    "read_manifest",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Fields(_Strict):
    """Which field of a row holds its conversation, its prompt string, its id, its system
    prompt; ``template`` composes the prompt of several columns (``"{instruction}\n\n{input}"``:
    Alpaca's, the default for Alpaca and Dolly rows)."""

    conversation: str | None = None
    prompt: str | None = None
    id: str | None = None
    system: str | None = None
    template: str | None = None


class DatasetEntry(_Strict):
    """One dataset of a manifest."""

    name: str = Field(min_length=1)
    source: str = Field(min_length=1)
    split: str | None = None
    config: str | None = None
    fields: Fields = Field(default_factory=Fields)
    limit: PositiveInt | None = None
    sample: PositiveInt | None = None
    seed: int = 0
    weight: PositiveFloat = 1.0
    turns: Literal["last", "all"] | None = None
    params: list[str] = []  # the columns sent as request parameters (``--row-params``)


class Manifest(_Strict):
    """The datasets of one job, in order."""

    datasets: list[DatasetEntry] = Field(min_length=1)


def is_manifest(path: str | Path) -> bool:
    """Whether ``path`` names a manifest (a ``.yaml``/``.yml`` file) rather than prompts."""
    return Path(str(path)).suffix.lower() in (".yaml", ".yml") and not str(path).startswith(
        HF_PREFIX
    )


def read_manifest(path: str | Path) -> Manifest:
    """Read a manifest; every bad key is named with its place (``datasets[2].limit``)."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the manifest: {exc.strerror}") from exc
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{p}: not a YAML manifest ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{p}: a manifest is a YAML mapping with `datasets:`, a list of "
            "{name, source, ...} (docs/inputs.md)"
        )
    try:
        manifest = Manifest.model_validate(dict(data))
    except ValidationError as exc:
        detail = "; ".join(f"{loc}: {msg}" for loc, msg in validation_errors(exc))
        raise ConfigError(f"{p}: invalid manifest ({detail})") from exc
    names = [d.name for d in manifest.datasets]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{p}: datasets named twice: {', '.join(twice)}; give each its own name")
    for i, entry in enumerate(manifest.datasets):
        if entry.limit is not None and entry.sample is not None:
            raise ConfigError(f"{p}: datasets[{i}] ({entry.name}): give limit or sample, not both")
        problem = row_params_problem(tuple(entry.params))
        if problem is not None:
            raise ConfigError(f"{p}: datasets[{i}].params ({entry.name}): {problem}")
    return manifest


@dataclass
class Inputs:
    """The rows of a job (one source or a manifest's), the weights and turns its datasets ask."""

    prompts: PromptSet
    weights: dict[str, float] = field(default_factory=dict)
    turns: dict[str, str] = field(default_factory=dict)  # dataset -> last|all (manifest only)


def _source_path(entry: DatasetEntry, folder: Path) -> str:
    if entry.source.startswith(HF_PREFIX) or Path(entry.source).is_absolute():
        return entry.source
    return str(folder / entry.source)


def _merge(sets: list[PromptSet], label: str) -> PromptSet:
    """One prompt set of many; an id in two datasets is sent once, listed as a duplicate."""
    merged = PromptSet(label, [])
    seen: dict[str, int] = {}
    every: set[str] = set()
    for one in sets:
        for row in one.every_shard:  # an id in two datasets: once, as the rows are
            if row.id not in every:
                every.add(row.id)
                merged.every_shard.append(row)
        merged.duplicates.extend(one.duplicates)
        merged.skipped.extend(one.skipped)
        merged.notes.extend(one.notes)
        merged.ending_on_assistant += one.ending_on_assistant
        if one.source is not None:
            merged.sources.update(dict.fromkeys(one.datasets, one.source))
        for row in one.rows:
            if row.id in seen:
                merged.duplicates.append((row.id, seen[row.id], row.line))
                continue
            seen[row.id] = row.line
            merged.rows.append(row)
    return merged


@dataclass(frozen=True)
class SourceOptions:
    """How to read a single source (a manifest sets each dataset's own): which fields hold the
    conversation or prompt and the id, which rows to take, the ``hf:`` config and split."""

    fields: FieldMap = field(default_factory=FieldMap)
    selection: Selection = field(default_factory=Selection)
    config: str | None = None
    split: str | None = None
    strict: bool = False  # a row that cannot be read refuses the source (else: skipped, named)

    @classmethod
    def of(
        cls,
        *,
        prompt_field: str | None = None,
        id_field: str | None = None,
        limit: int | None = None,
        sample: int | None = None,
        seed: int = 0,
        config: str | None = None,
        split: str | None = None,
        row_params: str | list[str] | tuple[str, ...] | None = None,
        strict: bool = False,
    ) -> SourceOptions:
        """From ``generate``'s options (``--prompt-field``, ``--id-field``, ``--limit``, ...,
        ``--row-params seed,temperature``: the columns sent as request parameters)."""
        names = parse_row_params(row_params)
        problem = row_params_problem(names)
        if problem is not None:
            raise OptionError(f"{{row_params=}}: {braced(problem)}", row_params=",".join(names))
        return cls(FieldMap(prompt=prompt_field, id=id_field, params=names),
                   Selection(limit, sample, seed), config, split, strict)  # fmt: skip

    def given(self) -> dict[str, Any]:
        """The options set, by their keywords (``SourceOptions.of``'s) and values."""
        named = {
            "prompt_field": self.fields.prompt,
            "id_field": self.fields.id,
            "limit": self.selection.limit,
            "sample": self.selection.sample,
            "config": self.config,
            "split": self.split,
            "row_params": ",".join(self.fields.params) or None,
        }
        return {name: value for name, value in named.items() if value is not None}


def read_inputs(
    prompts: str | Path,
    *,
    turns: str = "last",
    shard: tuple[int, int] | None = None,
    options: SourceOptions | None = None,
) -> Inputs:
    """Read a job's rows: one source (read with ``options``), or every dataset of a manifest
    (each with its own; giving ``options`` too is an error)."""
    options = options or SourceOptions()
    if not is_manifest(prompts):
        wrong = hf_only(prompts, config=options.config, split=options.split)
        if wrong is not None:
            raise OptionError(
                f"{{{wrong}=}} is for hf: ids and datasets folders, not the file {braced(prompts)}",
                **{wrong: getattr(options, wrong)},
            )
        rows = read_prompts(
            prompts,
            shard=shard,
            turns=turns,
            fields=options.fields,
            selection=options.selection,
            config=options.config,
            split=options.split,
            strict=options.strict,
        )
        return Inputs(rows)
    given = options.given()
    if given:
        names = ", ".join(f"{{{name}=}}" for name in given)
        raise OptionError(
            f"{braced(prompts)}: a manifest sets each dataset's own; drop {names} (or set them "
            "in the manifest)",
            **given,
        )
    manifest = read_manifest(prompts)
    folder = Path(prompts).parent
    sets, weights, modes = [], {}, {}
    for entry in manifest.datasets:
        mode = entry.turns or turns
        sets.append(
            read_prompts(
                _source_path(entry, folder),
                shard=shard,
                dataset=entry.name,
                turns=mode,
                fields=FieldMap(**entry.fields.model_dump(), params=tuple(entry.params)),
                selection=Selection(entry.limit, entry.sample, entry.seed),
                config=entry.config,
                split=entry.split,
                strict=options.strict,
            )
        )
        weights[entry.name] = entry.weight
        modes[entry.name] = mode
    return Inputs(_merge(sets, str(prompts)), weights, modes)
