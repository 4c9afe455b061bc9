"""Precision: what a model was released in, what each endpoint serves, and the verdict.

The registry (``data/precision.yaml``, extendable by user files and ``$OPENROUTER_PROBE_PRECISION``)
holds the formats, each model's native release precision, provider facts the tags miss and
measured evidence from ``verify --evidence``; ``PrecisionRegistry.verdict`` judges one endpoint
(``native``, ``upcast``, ``requantized``, ``undeclared`` or ``unassessed``). docs/precision.md
has what each section and verdict means, and the sources.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from openrouter_probe.api.schema import Endpoint
from openrouter_probe.errors import ConfigError, Message
from openrouter_probe.files import load_yaml

__all__ = [
    "MEASURED_VERDICTS",
    "PRECISION_ENV",
    "FormatInfo",
    "Measured",
    "MeasuredVerdict",
    "NativePrecision",
    "PrecisionRegistry",
    "PrecisionVerdict",
    "ProviderFact",
    "Verdict",
    "default_registry",
]

PRECISION_ENV = "OPENROUTER_PROBE_PRECISION"

Verdict = Literal["native", "upcast", "requantized", "undeclared", "unassessed"]
#: A verdict of the measured precision check (``openrouter-probe verify``; docs/verify.md says
#: how each is reached).
MeasuredVerdict = Literal["consistent", "differs", "differs, within tolerance", "inconclusive"]
#: The verdicts of a measured precision check, as evidence files and policy specs may name them.
MEASURED_VERDICTS: tuple[str, ...] = get_args(MeasuredVerdict)


def _yaml_error(exc: yaml.YAMLError, path: Path) -> ConfigError:
    """One line for a precision file that is not YAML: ``file:line:column: what; fix``."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or "unreadable"
    return ConfigError(
        f"{where}: not valid YAML ({problem}); fix that line (the bundled "
        "openrouter_probe/data/precision.yaml shows the format)"
    )


@dataclass(frozen=True)
class FormatInfo:
    name: str
    bits: int
    family: str


@dataclass(frozen=True)
class NativePrecision:
    patterns: tuple[str, ...]
    native: str
    method: str
    source: str


@dataclass(frozen=True)
class ProviderFact:
    model: str
    provider: str  # a base slug (every variant) or a full tag
    effective: str
    source: str
    date: str

    def applies_to(self, model: str, endpoint: Endpoint) -> bool:
        if not fnmatchcase(model, self.model):
            return False
        return self.provider in (endpoint.tag.lower(), endpoint.slug)


@dataclass(frozen=True)
class Measured:
    """One measured verdict of ``verify`` on an endpoint: ``verdict`` on ``n`` paired prompts, on
    ``date`` (ISO); ``extra`` keeps the entry's other keys as written (accuracy, p-values, ...)."""

    model: str  # an fnmatch pattern, as for provider facts
    endpoint: str  # a full tag
    verdict: str  # consistent | differs | inconclusive
    n: int
    date: str
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def applies_to(self, model: str, tag: str) -> bool:
        return fnmatchcase(model, self.model) and self.endpoint == tag.lower()

    def __str__(self) -> str:
        return f"{self.verdict} (n={self.n}, {self.date})"


@dataclass(frozen=True)
class PrecisionVerdict:
    """The precision of one endpoint: declared, effective, native, and the verdict with reasons."""

    tag: str
    declared: str | None
    effective: str | None
    effective_from: str  # "tag", "tag suffix", "provider fact: <source>", "nothing"
    native: str | None
    native_source: str | None
    verdict: Verdict
    reason: str
    measured: Measured | None = None  # the latest measured evidence, if any


@dataclass
class PrecisionRegistry:
    """Formats, native precisions and provider facts. ``load`` merges user files over the default."""

    formats: dict[str, FormatInfo] = field(default_factory=dict)
    models: list[NativePrecision] = field(default_factory=list)
    facts: list[ProviderFact] = field(default_factory=list)
    measured: list[Measured] = field(default_factory=list)

    @classmethod
    def load(cls, *user_files: str | Path) -> PrecisionRegistry:
        """Return the bundled registry with ``user_files`` (and ``$OPENROUTER_PROBE_PRECISION``)
        merged over it: their models and facts are consulted first."""
        registry = cls()
        # Parsed anew on every call (about 2 ms with libyaml): no caller is handed a registry that
        # an earlier one built, changed, or built with other code.
        bundled = resources.files("openrouter_probe.data").joinpath("precision.yaml").read_bytes()
        registry._merge(load_yaml(bundled), where="bundled precision.yaml")
        paths = [*user_files]
        if os.environ.get(PRECISION_ENV):
            paths.append(os.environ[PRECISION_ENV])
        for path in paths:
            p = Path(path)
            try:
                doc = yaml.safe_load(p.read_text(encoding="utf-8"))
            except OSError as exc:
                raise ConfigError(f"{p}: cannot read precision file: {exc.strerror}") from exc
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{p}: not a text file ({exc.reason})") from exc
            except yaml.YAMLError as exc:
                raise _yaml_error(exc, p) from exc
            registry._merge(doc, where=str(p))
        return registry

    def _merge(self, doc: Any, *, where: str) -> None:
        """Add ``doc``'s entries ahead of those already there (later files win)."""
        if not isinstance(doc, dict):
            raise ConfigError(f"{where}: expected a mapping with formats/models/provider_facts")
        unknown = set(doc) - {"formats", "models", "provider_facts", "measured"}
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {sorted(unknown)}; use formats, models, provider_facts, "
                "measured"
            )
        for name, info in (doc.get("formats") or {}).items():
            try:
                self.formats[str(name)] = FormatInfo(
                    str(name), int(info["bits"]), str(info.get("family", "float"))
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: formats.{name}: needs bits: <int>") from exc
        models, facts = [], []
        for i, item in enumerate(doc.get("models") or []):
            try:
                match = item["match"]
                patterns = (match,) if isinstance(match, str) else tuple(str(m) for m in match)
                native = str(item["native"]).lower()
            except (KeyError, TypeError) as exc:
                raise ConfigError(f"{where}: models[{i}]: needs match and native") from exc
            self._check_format(native, f"{where}: models[{i}].native")
            models.append(
                NativePrecision(
                    patterns, native, str(item.get("method", "")), str(item.get("source", ""))
                )
            )
        for i, item in enumerate(doc.get("provider_facts") or []):
            try:
                fact = ProviderFact(
                    model=str(item["model"]),
                    provider=str(item["provider"]).lower(),
                    effective=str(item["effective"]).lower(),
                    source=str(item["source"]),
                    date=str(item["date"]),
                )
            except (KeyError, TypeError) as exc:
                raise ConfigError(
                    f"{where}: provider_facts[{i}]: needs model, provider, effective, source, date"
                ) from exc
            self._check_format(fact.effective, f"{where}: provider_facts[{i}].effective")
            facts.append(fact)
        self.models = models + self.models
        self.facts = facts + self.facts
        measured = [_measured(item, f"{where}: measured[{i}]") for i, item in
                    enumerate(doc.get("measured") or [])]  # fmt: skip
        self.measured = measured + self.measured

    def measured_for(self, model: str, tag: str) -> Measured | None:
        """Return the latest measured evidence on endpoint ``tag`` of ``model`` (by date; on a tie,
        the entry from the file loaded last, user files before the bundled one)."""
        found = [m for m in self.measured if m.applies_to(model, tag)]
        return max(found, key=lambda m: m.date) if found else None

    def _check_format(self, name: str, where: str) -> None:
        if name not in self.formats:
            raise ConfigError(
                f"{where}: {name!r} is not a known format ({', '.join(self.formats)})"
            )

    def native_for(self, model: str) -> NativePrecision | None:
        """Return the native release precision of ``model`` (id or canonical slug), if known."""
        return next(
            (m for m in self.models if any(fnmatchcase(model, p) for p in m.patterns)), None
        )

    def effective_for(self, model: str, endpoint: Endpoint) -> tuple[str | None, str]:
        """Return what ``endpoint`` really serves and where that came from."""
        for fact in self.facts:
            if fact.applies_to(model, endpoint):
                return fact.effective, f"provider fact ({fact.date}): {fact.source}"
        declared = endpoint.quantization.lower() if endpoint.quantization else None
        if declared in self.formats:
            return declared, "tag"
        suffix = endpoint.variant.lower() if endpoint.variant else None
        if suffix in self.formats:
            return suffix, "tag suffix"
        return None, "nothing"

    def verdict(self, model: str, endpoint: Endpoint) -> PrecisionVerdict:
        """Judge one endpoint of ``model``."""
        native = self.native_for(model)
        effective, source = self.effective_for(model, endpoint)
        declared = endpoint.quantization

        def make(verdict: Verdict, reason: str) -> PrecisionVerdict:
            return PrecisionVerdict(
                tag=endpoint.tag,
                declared=declared,
                effective=effective,
                effective_from=source,
                native=native.native if native else None,
                native_source=native.source if native else None,
                verdict=verdict,
                reason=reason,
                measured=self.measured_for(model, endpoint.tag),
            )

        if effective is None:
            tag = "no quantization tag" if declared is None else f"tag {declared!r}"
            return make("undeclared", f"{tag} and no known fact")
        if native is None:
            return make(
                "unassessed",
                f"serves {effective}; {model}'s native precision is not in the registry",
            )
        served, released = self.formats[effective], self.formats[native.native]
        how = "" if source == "tag" else f" (from {source.split(':')[0]})"
        if effective == native.native:
            return make("native", f"{effective}{how} is the native release precision")
        if served.bits > released.bits:
            return make("upcast", f"{effective}{how} is wider than native {native.native}")
        if served.bits < released.bits:
            return make(
                "requantized", f"{effective}{how} has fewer bits than native {native.native}"
            )
        if effective in ("fp4", "fp8") and native.native.startswith(("mx", "nv")):
            # OpenRouter's fp4/fp8 cover their mx/nv variants: no evidence of a lossy step.
            return make("native", f"{effective}{how} covers native {native.native}")
        return make(
            "requantized",
            f"{effective}{how} is another {served.bits}-bit format than native {native.native}",
        )


def _measured(item: Any, where: str) -> Measured:
    """One ``measured:`` entry: model, endpoint (a full tag), verdict, n and date are required."""
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a mapping (model, endpoint, verdict, n, date)")
    missing = [k for k in ("model", "endpoint", "verdict", "n", "date") if item.get(k) is None]
    if missing:
        raise ConfigError(
            Message(
                "measured-incomplete",
                "{where:s}: needs {missing:s} (write it with {@verify_evidence})",
                where=str(where),
                missing=", ".join(missing),
            )
        )
    verdict = str(item["verdict"]).lower()
    if verdict not in MEASURED_VERDICTS:
        raise ConfigError(
            f"{where}.verdict: {item['verdict']!r}; use one of {', '.join(MEASURED_VERDICTS)}"
        )
    endpoint = str(item["endpoint"]).lower()
    if "/" not in endpoint:
        raise ConfigError(f"{where}.endpoint: {endpoint!r}; give the full tag, e.g. chutes/int4")
    n = item["n"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"{where}.n: {n!r}; the number of paired prompts, a whole number")
    date = str(item["date"])  # YAML reads an unquoted 2026-11-30 as a date: str() gives it back
    rest = {k: v for k, v in item.items() if k not in ("model", "endpoint", "verdict", "n", "date")}
    return Measured(str(item["model"]), endpoint, verdict, n, date, rest)


def default_registry() -> PrecisionRegistry:
    """A new registry: the bundled one plus ``$OPENROUTER_PROBE_PRECISION`` when set."""
    return PrecisionRegistry.load()
