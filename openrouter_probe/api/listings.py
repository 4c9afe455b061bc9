"""Typed views of OpenRouter's listings, ``GET /models`` (``ModelsList``) and ``GET /providers``
(``ProvidersList``), read tolerantly as ``api.schema``'s endpoints are (``api.payload``): a model or
provider that cannot be read is left out of its list (``skipped``). Apart from the endpoints: a
paid run reads a model's endpoints, never the listings, and does not build these models.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, ClassVar

from pydantic import Field

from openrouter_probe.api.payload import Payload, SkippedRecord
from openrouter_probe.api.schema import Architecture, Pricing

__all__ = ["AliasTarget", "Model", "ModelsList", "Provider", "ProvidersList", "TopProvider"]


class TopProvider(Payload):
    core_fields: ClassVar[frozenset[str] | None] = frozenset(
        {"context_length", "max_completion_tokens"}
    )

    context_length: int | None = None
    max_completion_tokens: int | None = None
    is_moderated: bool | None = None


class AliasTarget(Payload):
    """The concrete model a tilde-latest alias (``~z-ai/glm-latest``) points at."""

    core_fields: ClassVar[frozenset[str] | None] = frozenset()

    name: str | None = None
    slug: str | None = None


class Model(Payload):
    """One entry of ``GET /models``; both the early-2026 and the newer field sets."""

    core_fields: ClassVar[frozenset[str] | None] = frozenset({"id", "pricing", "context_length"})

    id: str
    canonical_slug: str | None = None
    hugging_face_id: str | None = None
    name: str | None = None
    created: int | None = None
    description: str | None = None
    context_length: int | None = None
    architecture: Architecture | None = None
    pricing: Pricing = Field(default_factory=Pricing)
    top_provider: TopProvider | None = None
    per_request_limits: dict[str, Any] | None = None
    supported_parameters: list[str] = Field(default_factory=list)
    default_parameters: dict[str, Any] | None = None
    expiration_date: str | None = None
    knowledge_cutoff: str | None = None
    supported_voices: list[Any] | None = None
    links: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    benchmarks: dict[str, Any] | None = None
    alias_target: AliasTarget | None = None


class ModelsList(Payload):
    """``GET /models``. A model that cannot be read is left out of ``data`` and listed in
    ``skipped``. ``links.next`` (newer lists) names the next page; ``Client.models()`` follows it."""

    core_fields: ClassVar[frozenset[str] | None] = frozenset({"data"})
    skippable_list: ClassVar[str | None] = "data"
    record_noun: ClassVar[str] = "models"

    data: list[Model]
    total_count: int | None = None
    links: dict[str, Any] | None = None

    @classmethod
    def joined(cls, pages: Sequence[ModelsList]) -> ModelsList:
        """Return one list from consecutive pages: their models in order, their skipped entries
        numbered across all pages, ``total_count`` and ``links`` of the last page."""
        if len(pages) == 1:
            return pages[0]
        skipped: list[SkippedRecord] = []
        read = 0
        for page in pages:
            skipped += [replace(s, index=s.index + read) for s in page._skipped]
            read += len(page.data) + len(page._skipped)
        listing = cls.model_construct(
            _fields_set=pages[0].model_fields_set,
            data=[model for page in pages for model in page.data],
            total_count=pages[-1].total_count,
            links=pages[-1].links,
        )
        listing._keep(raw_fields={}, skipped=skipped)
        if any(page._holds_kept for page in pages):
            object.__setattr__(listing, "_holds_kept", True)
        return listing


class Provider(Payload):
    """One entry of ``GET /providers``. ``slug`` is what routing wants, never ``name``."""

    core_fields: ClassVar[frozenset[str] | None] = frozenset({"name", "slug"})

    name: str
    slug: str
    privacy_policy_url: str | None = None
    terms_of_service_url: str | None = None
    status_page_url: str | None = None
    headquarters: str | None = None
    datacenters: list[str] | None = None


class ProvidersList(Payload):
    core_fields: ClassVar[frozenset[str] | None] = frozenset({"data"})
    skippable_list: ClassVar[str | None] = "data"
    record_noun: ClassVar[str] = "providers"

    data: list[Provider]
