"""Model lists (``GET /models``) read from a saved body (``load_models_list``) or from the copy
bundled in the package (``bundled_models_list``: a real body of 2026-01-28, old prices; docs/probe.md
says where it comes from). The live list is ``Client.models()``. Both read tolerantly: a model that
cannot be read is skipped and listed in the result's ``skipped``.

Example::

    from openrouter_probe.api.catalog import bundled_models_list

    listing = bundled_models_list()
    print(len(listing.data), listing.data[0].id)
"""

from __future__ import annotations

import gzip
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from openrouter_probe.api.listings import ModelsList
from openrouter_probe.errors import SnapshotError

__all__ = [
    "BUNDLED_MODELS_LIST_DATE",
    "BUNDLED_MODELS_LIST_FILE",
    "BUNDLED_MODELS_LIST_ORIGIN",
    "bundled_models_list",
    "load_models_list",
]

#: The day the bundled models list was taken.
BUNDLED_MODELS_LIST_DATE = "2026-01-28"
#: The package file that holds it (inside ``openrouter_probe/data``).
BUNDLED_MODELS_LIST_FILE = "models-list-2026-01-28.json.gz"
#: Where it comes from, for every place that shows it.
BUNDLED_MODELS_LIST_ORIGIN = (
    "a public capture of GET /api/v1/models from Crashthatch/openroutermodeltable "
    "(models_data.json, commit 7e0a0dc7)"
)


def _parse(body: bytes, *, where: str) -> ModelsList:
    try:
        return ModelsList.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise SnapshotError(
            f"{where}: not a GET /models body ({loc}: {first['msg']}); save one with "
            "`curl https://openrouter.ai/api/v1/models > models.json`"
        ) from exc


def bundled_models_list() -> ModelsList:
    """Return the models list shipped in the package (taken 2026-01-28: old prices, no key)."""
    raw = resources.files("openrouter_probe.data").joinpath(BUNDLED_MODELS_LIST_FILE).read_bytes()
    return _parse(gzip.decompress(raw), where=f"openrouter_probe/data/{BUNDLED_MODELS_LIST_FILE}")


def load_models_list(path: str | Path) -> ModelsList:
    """Read a saved ``GET /models`` body (plain or ``.gz``) from ``path``."""
    p = Path(path)
    try:
        body = p.read_bytes()
    except FileNotFoundError as exc:
        raise SnapshotError(f"{p}: no such file") from exc
    except OSError as exc:
        raise SnapshotError(f"{p}: cannot read it: {exc.strerror}") from exc
    if body[:2] == b"\x1f\x8b":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as exc:
            raise SnapshotError(f"{p}: a broken gzip file ({exc})") from exc
    return _parse(body, where=str(p))
