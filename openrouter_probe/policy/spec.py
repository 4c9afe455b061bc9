"""The policy spec a person writes (``PolicySpec``), and telling the policy documents apart:
``document_kind``, and ``require_document``, which refuses the wrong one in one line with the
step that fixes it.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from openrouter_probe.api.schema import KNOWN_QUANTIZATIONS
from openrouter_probe.errors import Message, PolicyError, validation_errors
from openrouter_probe.files import load_yaml
from openrouter_probe.rules.provider_block import ProviderBlock

__all__ = [
    "DocumentKind",
    "PolicySpec",
    "PriceLimits",
    "document_kind",
    "is_compiled",
    "load_spec",
    "parse_spec",
    "read_yaml",
    "require_document",
]


def _check_slug(entry: str) -> str:
    if entry != entry.lower() or " " in entry or not entry:
        raise ValueError(
            f"{entry!r} is not a slug: use the lowercase provider slug or endpoint tag "
            f"(e.g. {entry.lower().replace(' ', '-')!r}; see `openrouter-probe endpoints`)"
        )
    return entry


Slug = Annotated[str, AfterValidator(_check_slug)]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class PriceLimits(_Spec):
    """Price ceilings in USD per **million** tokens (what ``max_price`` wants)."""

    input_usd_per_m: float | None = Field(default=None, ge=0)
    output_usd_per_m: float | None = Field(default=None, ge=0)


class PolicySpec(_Spec):
    """What a person means, in YAML; unknown keys are errors. Each key, its default and what it
    compiles to: the table in docs/policy.md ("The spec format")."""

    model: str
    description: str | None = None
    precision: Literal["native", "native-or-upcast", "any"] | list[str] = "native"
    undeclared: Literal["exclude", "admit"] = "exclude"
    ignore: list[Slug] = Field(default_factory=list)
    allow: list[Slug] | None = None
    min_uptime_30m_pct: float | None = Field(default=None, ge=0, le=100)
    max_price: PriceLimits | None = None
    strategy: Literal["order", "sort", "balance"] = "order"
    order_by: Literal["price", "throughput", "latency"] | dict[str, float] = "price"
    fallbacks: bool = True
    require_parameters: bool | None = None
    data_collection: Literal["allow", "deny"] | None = None
    zdr: bool | None = None
    options: dict[str, dict[str, Any]] | None = None
    exclude_measured: list[
        Literal["consistent", "differs", "differs, within tolerance", "inconclusive"]
    ] = Field(default_factory=list)

    @field_validator("precision")
    @classmethod
    def _formats(cls, value: Any) -> Any:
        if isinstance(value, list):
            bad = [v for v in value if v not in KNOWN_QUANTIZATIONS]
            if bad:
                raise ValueError(f"unknown format(s) {bad}; use {', '.join(KNOWN_QUANTIZATIONS)}")
        return value

    @field_validator("order_by")
    @classmethod
    def _weights(cls, value: Any) -> Any:
        if isinstance(value, dict):
            bad = set(value) - {"price", "throughput", "latency"}
            if bad or not value or any(w < 0 for w in value.values()):
                raise ValueError("weights are non-negative numbers for price, throughput, latency")
        return value

    def sha256(self) -> str:
        """Return a hash of the spec's settings (canonical JSON); the compiled file records it."""
        data = self.model_dump(mode="json")
        # Keys added later are left out when unset, so specs without them keep the hash they had.
        if data.get("options") is None:
            data.pop("options", None)
        if not data.get("exclude_measured"):
            data.pop("exclude_measured", None)
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _yaml_error(exc: yaml.YAMLError, where: str) -> PolicyError:
    mark = getattr(exc, "problem_mark", None)
    line = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    return PolicyError(f"not valid YAML: {line}{problem}", source=where)


def read_yaml(path: str | Path) -> Any:
    """Read a YAML file; unreadable files and YAML errors become a ``PolicyError`` naming it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"cannot read: {exc.strerror}", source=str(p)) from exc
    except UnicodeDecodeError as exc:
        raise PolicyError(f"not a text file ({exc.reason})", source=str(p)) from exc
    try:  # libyaml's loader is ten times faster; the pure one reads a broken file for its error
        return load_yaml(text)
    except yaml.YAMLError:
        pass
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, str(p)) from exc


def parse_spec(
    data: Any, *, source: str | None = None, snapshot_args: Sequence[str] = ()
) -> PolicySpec:
    """Validate a mapping as a policy spec; errors name the key and the fix.
    (``snapshot_args`` is ignored: each interface says its own steps; it goes in 0.4.0.)"""
    ignored_snapshot_args(snapshot_args)
    if not isinstance(data, Mapping):
        raise PolicyError("a policy spec is a YAML mapping with at least `model:`", source=source)
    require_document(data, "spec", source=source)
    try:
        return PolicySpec.model_validate(dict(data))
    except ValidationError as exc:
        errors = []
        for loc, msg in validation_errors(exc):
            if msg == "not an accepted key":
                msg = f"not a policy key (known: {', '.join(PolicySpec.model_fields)})"
            elif msg == "required" and loc == "model":
                msg = "required (the OpenRouter model id)"
            errors.append((loc, msg))
        raise PolicyError("invalid policy spec", source=source, errors=errors) from exc


def load_spec(path: str | Path, *, snapshot_args: Sequence[str] = ()) -> PolicySpec:
    """Read a policy spec YAML file (``snapshot_args``: ignored, see ``parse_spec``)."""
    ignored_snapshot_args(snapshot_args)
    return parse_spec(read_yaml(path), source=str(path))


def ignored_snapshot_args(snapshot_args: Sequence[str]) -> None:
    """Up to 0.2.x a caller passed the CLI's snapshot flags (``["--offline"]``) so that the
    commands an error suggested repeated them; the library says no flags now (the CLI repeats
    its own). Given, it is ignored with a ``DeprecationWarning``; it goes in 0.4.0."""
    if snapshot_args:
        warnings.warn(
            "snapshot_args is ignored: the CLI says its own command lines; drop it",
            DeprecationWarning,
            stacklevel=3,
        )


def is_compiled(doc: Any) -> bool:
    """Whether a YAML document is a compiled policy (``provider:`` and ``provenance:``)."""
    return isinstance(doc, Mapping) and "provider" in doc and "provenance" in doc


# Keys only a spec has (a provider block has none of them).
_SPEC_ONLY_KEYS = frozenset(PolicySpec.model_fields) - {
    "ignore",
    "max_price",
    "require_parameters",
    "data_collection",
    "zdr",
}

DocumentKind = Literal["spec", "compiled", "block", "other"]


def document_kind(doc: Any) -> DocumentKind:
    """Say what a YAML document is: a policy ``spec``, a ``compiled`` policy, a provider ``block``
    (bare, or under ``provider:`` without provenance), or ``other`` (not a mapping)."""
    if not isinstance(doc, Mapping):
        return "other"
    if is_compiled(doc):
        return "compiled"
    if "provider" not in doc and set(map(str, doc)) & _SPEC_ONLY_KEYS:
        return "spec"
    return "block"


def _looks_like_block(doc: Mapping[Any, Any]) -> bool:
    """A ``provider:`` key, or a key only a provider block has (``order``, ``only``, ``sort``...)."""
    block_only = set(ProviderBlock.model_fields) - set(PolicySpec.model_fields)
    return "provider" in doc or bool(set(map(str, doc)) & block_only)


def _compiled_name(path: Path) -> str:
    """The file a spec compiles to by convention: ``x.spec.yaml`` -> ``x.yaml``."""
    name = path.name
    for suffix in (".spec.yaml", ".spec.yml"):
        if name.endswith(suffix):
            return str(path.with_name(name[: -len(suffix)] + ".yaml"))
    return str(path.with_name(f"{path.stem}.compiled.yaml"))


_WANTED = {
    "spec": "a policy spec",
    "compiled": "a compiled policy",
    "block": "a provider block",
}


def require_document(
    doc: Any,
    wanted: Literal["spec", "compiled", "block"],
    *,
    source: str | Path | None,
) -> None:
    """Raise a one-line ``PolicyError`` when ``doc`` is a spec where a compiled policy is wanted
    (or the reverse), with the step that turns one into the other (``{@compile_policy}``: each
    interface says it its own way, the CLI with the snapshot flags its command was given).

    Every command that reads a spec or a policy calls this before validating, so a wrong file
    gives one line with the fix, not a list of schema errors. Other mismatches are left to the
    validation that follows. ``wanted="block"`` accepts a compiled policy too (it holds one).
    """
    found = document_kind(doc)
    if found == wanted or found == "other" or (wanted == "block" and found == "compiled"):
        return
    where = str(source) if source is not None else "the file"
    at = None if source is None else str(source)
    if found == "spec":
        raise PolicyError(
            Message(
                "policy-is-spec",
                "this is a policy spec, not {wanted:s}: compile it first with {@compile_policy}",
                wanted=_WANTED[wanted],
                spec=where,
                output=_compiled_name(Path(where)),
            ),
            source=at,
        )
    if found == "compiled" and wanted == "spec":
        spec = doc["provenance"].get("spec") if isinstance(doc["provenance"], Mapping) else None
        spec_file = spec.get("file") if isinstance(spec, Mapping) else None
        if spec_file:
            fix = Message(
                "policy-is-compiled",
                "this is a compiled policy, not a policy spec: compile its spec instead: "
                "{@compile_policy}",
                spec=str(Path(where).with_name(str(spec_file))),
                output=where,
            )
        else:
            fix = Message(
                "policy-is-compiled",
                "this is a compiled policy, not a policy spec: explain it with {@explain_policy}",
                policy=where,
            )
        raise PolicyError(fix, source=at)
    if found == "block" and wanted == "spec" and _looks_like_block(doc):
        raise PolicyError(
            Message(
                "policy-is-block",
                "this is a provider block, not a policy spec: lint it with {@lint_policy}, or "
                "write a spec with model: and precision: (docs/policy.md) and compile that",
                policy=where,
            ),
            source=at,
        )
    if found == "block" and wanted == "compiled":
        raise PolicyError(
            Message(
                "policy-is-bare-block",
                "this is a bare provider block, not a compiled policy (no provenance:); lint it "
                "with {@lint_policy}, or compile a spec into a policy",
                policy=where,
            ),
            source=at,
        )
