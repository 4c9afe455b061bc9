"""pre-commit hooks for repositories that check a policy in (``.pre-commit-hooks.yaml``), not
part of the ``openrouter-probe`` group: ``python -m openrouter_probe.cli.hooks compile|lint
[--snapshot PATH] FILE...``.

pre-commit passes every staged file at once; these loop over them, pair ``X.spec.yaml`` with its
compiled ``X.yaml``, find the snapshot to use offline (docs/checked-in-policies.md says which)
and call the library functions ``policy compile`` and ``policy lint`` call. Exit 0 when every
file is fresh and clean, 1 otherwise.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from openrouter_probe.cli._common import said
from openrouter_probe.cli.options import precision_option

if TYPE_CHECKING:
    from openrouter_probe.rules.snapshot import Snapshot

_SPEC, _SNAPSHOT = ".spec.yaml", ".snapshot.json"


@dataclass(frozen=True)
class _Pair:
    """A policy spec, its compiled file and the sibling snapshot, by naming convention."""

    base: Path

    @classmethod
    def of(cls, path: Path) -> _Pair:
        name = path.name
        for suffix in (_SPEC, _SNAPSHOT, ".yaml", ".yml"):
            if name.endswith(suffix):
                return cls(path.with_name(name.removesuffix(suffix)))
        return cls(path.with_suffix(""))

    @property
    def spec(self) -> Path:
        return self.base.with_name(self.base.name + _SPEC)

    @property
    def compiled(self) -> Path:
        return self.base.with_name(self.base.name + ".yaml")

    @property
    def snapshot(self) -> Path:
        return self.base.with_name(self.base.name + _SNAPSHOT)


def _recorded_source(doc: Any) -> str | None:
    """``provenance.snapshot.source`` of a compiled policy document, if it has one."""
    if not isinstance(doc, dict):
        return None
    snap = (doc.get("provenance") or {}).get("snapshot")
    return str(snap.get("source")) if isinstance(snap, dict) else None


def _snapshot_for(pair: _Pair, model: str, given: str | None, doc: Any, *, where: Path) -> Snapshot:
    """The snapshot to compile or lint ``pair`` against, offline: ``given``, else
    ``X.snapshot.json`` beside it, else the bundled one when ``doc`` records it;
    ``doc`` is the compiled policy document, ``where`` the file an error names."""
    from openrouter_probe.errors import SnapshotError
    from openrouter_probe.rules.probing import resolve_snapshot

    if given:
        return resolve_snapshot(model, snapshot=given)
    if pair.snapshot.exists():
        return resolve_snapshot(model, snapshot=str(pair.snapshot))
    if _recorded_source(doc) == "bundled":
        return resolve_snapshot(model, snapshot="bundled")
    raise SnapshotError(
        f"{where}: no snapshot to check it against offline: save one next to it "
        f"(openrouter-probe endpoints {model or 'MODEL'} --save {pair.snapshot}) "
        "or give the hook args: [--snapshot, PATH]"
    )


def _tracked_specs() -> list[Path]:
    """Every ``*.spec.yaml`` git tracks in the current repository (empty outside one)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--", f"*{_SPEC}"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [Path(line) for line in out.splitlines() if line]


def _pairs_to_compile(files: Iterable[str], given: str | None) -> list[_Pair]:
    """The spec/compiled pairs touched by ``files``; when the shared ``--snapshot`` file itself
    changed, also every tracked spec for the model it holds."""
    from openrouter_probe.policy.spec import load_spec
    from openrouter_probe.rules.probing import resolve_snapshot

    paths = [Path(f) for f in files]
    pairs = {_Pair.of(p) for p in paths}
    if given and any(p.resolve() == Path(given).resolve() for p in paths):
        shared = resolve_snapshot(None, snapshot=given)
        models = {shared.model, shared.data.get("id")}
        pairs |= {_Pair.of(s) for s in _tracked_specs() if load_spec(s).model in models}
    return sorted((p for p in pairs if p.spec.exists()), key=lambda p: str(p.base))


def _compile_one(pair: _Pair, given: str | None, registry: Any, check_only: bool) -> bool:
    """Re-compile one pair; return True when the compiled file was already up to date."""
    from openrouter_probe.files import atomic_write_text
    from openrouter_probe.policy.compiler import compile_policy
    from openrouter_probe.policy.spec import load_spec, read_yaml

    spec = load_spec(pair.spec)
    compiled_doc = read_yaml(pair.compiled) if pair.compiled.exists() else None
    snap = _snapshot_for(pair, spec.model, given, compiled_doc, where=pair.compiled)
    fresh = compile_policy(spec, snap, registry=registry, spec_file=str(pair.spec))
    text = fresh.to_yaml()
    current = pair.compiled.read_text(encoding="utf-8") if pair.compiled.exists() else None
    if current == text:
        return True
    what = "is missing" if current is None else "is stale"
    source = _cli_snapshot(pair, given, snap)
    redo = f"openrouter-probe policy compile {pair.spec} --snapshot {source}"
    if check_only:
        click.echo(f"{pair.compiled}: {what}; re-compile it: {redo} -o {pair.compiled}")
    else:
        atomic_write_text(pair.compiled, text)
        click.echo(
            f"{pair.compiled}: {what}: re-compiled from {pair.spec} against {source}; "
            "review the diff and stage it"
        )
    for line in _diff_lines(compiled_doc, fresh, where=pair.compiled):
        click.echo(f"  {line}")
    return False


def _diff_lines(doc: Any, fresh: Any, *, where: Path) -> list[str]:
    """What the re-compile changes against the compiled file as it was (``doc``), for review."""
    from openrouter_probe.errors import PolicyError
    from openrouter_probe.policy.changes import provenance_diff, recompile_diff
    from openrouter_probe.policy.compiled import compiled_from_document

    if doc is None:
        return recompile_diff(None, fresh)
    try:
        old = compiled_from_document(doc, source=str(where))
    except PolicyError as exc:
        return [f"the file was not a compiled policy ({exc.reason}); it admits now:"] + [
            line.removeprefix("a re-compile ") for line in recompile_diff(None, fresh)
        ]
    lines = recompile_diff(old, fresh)
    if not lines:
        lines = [
            "the provider block and what it admits are unchanged",
            *provenance_diff(old, fresh),
        ]
    return lines


def _cli_snapshot(pair: _Pair, given: str | None, snap: Snapshot) -> str:
    if given:
        return given
    return "bundled" if snap.source == "bundled" else str(pair.snapshot)


_snapshot_option = click.option(
    "--snapshot",
    "snapshot",
    metavar="bundled|PATH",
    help="The snapshot for every file (default: X.snapshot.json next to X.yaml, or the bundled "
    "one when the compiled file records it).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def hooks() -> None:
    """pre-commit hooks: re-compile policies offline and lint them (see .pre-commit-hooks.yaml)."""


@hooks.command("compile")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@_snapshot_option
@precision_option
@click.option(
    "--check", "check_only", is_flag=True, help="Report stale files; do not rewrite them."
)
def compile_cmd(
    files: tuple[str, ...], snapshot: str | None, precision_files: tuple[str, ...], check_only: bool
) -> None:
    """Re-compile each X.spec.yaml among FILES (or paired with them) into X.yaml; exit 1 if any
    compiled file was stale or missing (rewritten unless --check)."""
    from openrouter_probe.errors import ProbeError
    from openrouter_probe.rules.precision import PrecisionRegistry

    registry = PrecisionRegistry.load(*precision_files)
    ok = True
    try:
        pairs = _pairs_to_compile(files, snapshot)
    except ProbeError as exc:
        click.echo(f"Error: {said(exc)}")
        sys.exit(1)
    for pair in pairs:
        try:
            ok = _compile_one(pair, snapshot, registry, check_only) and ok
        except ProbeError as exc:
            click.echo(f"Error: {said(exc)}")
            ok = False
    sys.exit(0 if ok else 1)


@hooks.command()
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@_snapshot_option
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
def lint(files: tuple[str, ...], snapshot: str | None, strict: bool) -> None:
    """Lint every policy among FILES (YAML with a top-level provider:) against its snapshot.

    Specs (*.spec.yaml) and YAML without provider: are skipped. Exit 1 on errors (or warnings
    with --strict).
    """
    from openrouter_probe.errors import ProbeError
    from openrouter_probe.policy.compiled import provider_mapping
    from openrouter_probe.policy.lint import lint_block
    from openrouter_probe.policy.spec import read_yaml

    failed = False
    for name in files:
        path = Path(name)
        if path.name.endswith(_SPEC) or path.suffix not in (".yaml", ".yml"):
            continue
        try:
            doc = read_yaml(path)
            if not isinstance(doc, dict) or "provider" not in doc:
                continue
            block, model = provider_mapping(doc)  # not a mapping: lint_block's schema error
            snap = _snapshot_for(_Pair.of(path), model or "", snapshot, doc, where=path)
            findings = lint_block(block, snap.endpoints, model=snap.model)
        except ProbeError as exc:
            click.echo(f"Error: {said(exc)}")
            failed = True
            continue
        for finding in findings:
            click.echo(f"{path}: {finding}")
        errors = sum(f.severity == "error" for f in findings)
        failed = failed or bool(errors) or (strict and bool(findings))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":  # pragma: no cover
    hooks()
