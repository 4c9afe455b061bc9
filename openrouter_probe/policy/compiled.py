"""The compiled policy (``CompiledPolicy``, a ``Decision`` per endpoint): written by ``save``,
read back by ``load_compiled_policy``; ``provider_mapping`` and ``load_provider_block`` take the
``provider`` block out of a compiled policy or a bare block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from openrouter_probe.errors import Message, PolicyError
from openrouter_probe.files import atomic_write_text, ensure_not_input
from openrouter_probe.policy.spec import (
    _compiled_name,
    ignored_snapshot_args,
    is_compiled,
    read_yaml,
    require_document,
)
from openrouter_probe.rules.provider_block import ProviderBlock

__all__ = [
    "CompiledPolicy",
    "Decision",
    "compiled_from_document",
    "load_compiled_policy",
    "load_provider_block",
    "provider_mapping",
]

_HEADER = (
    "# Compiled by openrouter-probe: pass `provider` untouched as the request's provider field.\n"
    "# Do not edit by hand; re-compile from the spec named in provenance.spec.\n"
)


@dataclass(frozen=True)
class Decision:
    """What the compiled policy does with one endpoint, and why."""

    tag: str
    provider: str
    declared: str | None
    effective: str | None
    verdict: str
    input_usd_per_m: float | None
    output_usd_per_m: float | None
    uptime_30m_pct: float | None
    status: int | None
    kept: bool
    position: int | None
    share: float | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class CompiledPolicy:
    """A compiled ``provider`` block with its provenance and the decision for every endpoint."""

    model: str
    provider: ProviderBlock
    provenance: dict[str, Any]
    decisions: list[Decision] = field(default_factory=list)
    routing: dict[str, Any] = field(default_factory=dict)
    tradeoff: dict[str, Any] | None = None
    #: The Batch API block compiled from the snapshot's ``:batch`` endpoints (``provider``: what a
    #: batch request carries, ``order``, ``decisions``, ``note``); ``None`` when the snapshot has no
    #: batch listing (taken before batches were probed), which keeps the older ``batch:`` form.
    batch: dict[str, Any] | None = None

    @property
    def admitted(self) -> list[str]:
        """Tags admitted, in routing order."""
        kept = [d for d in self.decisions if d.kept]
        return [d.tag for d in sorted(kept, key=lambda d: d.position or 0)]

    def batch_provider(self) -> dict[str, Any] | None:
        """The ``provider`` a Batch API request carries: ``{only: [tag], allow_fallbacks: false}``
        for the first admitted ``:batch`` endpoint (``None``: the policy admits none). A policy
        compiled from a snapshot without a batch listing keeps the older form, the admitted sync
        tags as ``only`` (which a batch is only accepted for where they have ``:batch`` rows)."""
        if self.batch is not None:
            provider = self.batch.get("provider")
            return dict(provider) if isinstance(provider, Mapping) else None
        return {"only": self.admitted}

    def to_dict(self) -> dict[str, Any]:
        """Return the compiled document: provider, batch, provenance, routing, decisions."""
        doc: dict[str, Any] = {
            "provider": self.provider.to_request(),
            "batch": self.batch if self.batch is not None else {"provider": self.batch_provider()},
            "provenance": self.provenance,
            "routing": self.routing,
            "decisions": [d.to_dict() for d in self.decisions],
        }
        if self.tradeoff is not None:
            doc["tradeoff"] = self.tradeoff
        return doc

    def to_yaml(self) -> str:
        """Return the compiled file's text (deterministic: the same inputs give the same bytes)."""
        body = yaml.safe_dump(
            self.to_dict(), sort_keys=False, allow_unicode=True, width=100, default_flow_style=False
        )
        return _HEADER + body

    def save(self, path: str | Path, *, inputs: Sequence[str | Path] = ()) -> Path:
        """Write the YAML to ``path`` atomically (a failed write leaves the old file whole).

        ``inputs`` are the files the policy was made from (the spec, a snapshot): writing over one
        of them is refused, so ``-o`` can never replace the hand-written spec.
        """
        target = Path(path)
        try:
            ensure_not_input(target, *inputs)
        except ValueError:
            raise PolicyError(
                f"refusing to write the compiled policy over its own input; give another output "
                f"file, e.g. -o {_compiled_name(target)}",
                source=str(target),
            ) from None
        try:
            atomic_write_text(target, self.to_yaml())
        except OSError as exc:
            raise PolicyError(
                f"cannot write the compiled policy: {exc.strerror}", source=str(target)
            ) from exc
        return target


def provider_mapping(
    doc: Any, *, source: str | Path | None = None, snapshot_args: Sequence[str] = ()
) -> tuple[Any, str | None]:
    """The provider block of a document (a compiled policy or a bare block) and, for a compiled
    policy, the model it is for. A policy spec is refused in one line (compile it first;
    ``snapshot_args`` is ignored, see ``policy.spec.ignored_snapshot_args``)."""
    ignored_snapshot_args(snapshot_args)
    require_document(doc, "block", source=source)
    if not isinstance(doc, Mapping):
        return doc, None
    provenance = doc.get("provenance")
    model = provenance.get("model") if isinstance(provenance, Mapping) else None
    return doc.get("provider", doc), (str(model) if model else None)


def load_provider_block(path: str | Path) -> ProviderBlock:
    """Read a provider block: a compiled policy (``provider:`` at top level) or a bare mapping."""
    block, _ = provider_mapping(read_yaml(path), source=path)
    return ProviderBlock.parse(block, source=str(path))


def compiled_from_document(
    doc: Any, *, source: str | None = None, snapshot_args: Sequence[str] = ()
) -> CompiledPolicy:
    """Build a ``CompiledPolicy`` from a document ``CompiledPolicy.to_yaml`` wrote
    (``snapshot_args`` is ignored, see ``policy.spec.ignored_snapshot_args``)."""
    ignored_snapshot_args(snapshot_args)
    require_document(doc, "compiled", source=source)
    if not is_compiled(doc):
        raise PolicyError(
            Message(
                "not-compiled",
                "not a compiled policy (needs top-level provider: and provenance:); compile one "
                "with {@compile_policy}",
                spec="SPEC",
                output="POLICY.yaml",
            ),
            source=source,
        )
    provenance = doc["provenance"]
    if not isinstance(provenance, Mapping) or not provenance.get("model"):
        raise PolicyError("provenance.model is missing", source=source)
    for key in ("routing", "tradeoff"):
        if doc.get(key) is not None and not isinstance(doc[key], Mapping):
            raise PolicyError(f"{key} must be a mapping; re-compile the policy", source=source)
    fields = Decision.__dataclass_fields__
    try:
        decisions = [Decision(**{k: d.get(k) for k in fields}) for d in doc.get("decisions") or []]
    except (TypeError, AttributeError) as exc:
        raise PolicyError(f"decisions are malformed: {exc}", source=source) from exc
    return CompiledPolicy(
        model=str(provenance["model"]),
        provider=ProviderBlock.parse(doc["provider"], source=source),
        provenance=dict(provenance),
        decisions=decisions,
        routing=dict(doc.get("routing") or {}),
        tradeoff=doc.get("tradeoff"),
        batch=_batch_section(doc.get("batch"), source),
    )


def _batch_section(raw: Any, source: str | None) -> dict[str, Any] | None:
    """The compiled ``batch:`` block, or ``None`` for the older form (``provider.only`` alone)."""
    if raw is None or (isinstance(raw, Mapping) and set(raw) <= {"provider"}):
        return None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("decisions", []), list):
        raise PolicyError("batch must be a mapping with decisions; re-compile", source=source)
    return dict(raw)


def load_compiled_policy(path: str | Path, *, snapshot_args: Sequence[str] = ()) -> CompiledPolicy:
    """Read a compiled policy YAML written by ``CompiledPolicy.save`` (``snapshot_args``: ignored,
    see ``policy.spec.ignored_snapshot_args``)."""
    ignored_snapshot_args(snapshot_args)
    return compiled_from_document(read_yaml(path), source=str(path))
