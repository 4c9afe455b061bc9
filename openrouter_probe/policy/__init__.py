"""Policies: the spec a person writes, the compiler, the compiled file, lint and drift.
May import ``rules`` and ``api`` (and ``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import lazy_exports

# name -> module that defines it, imported on first use
_EXPORTS: dict[str, str] = {
    "CompiledPolicy": "openrouter_probe.policy.compiled",
    "Decision": "openrouter_probe.policy.compiled",
    "DriftReport": "openrouter_probe.policy.drift",
    "LintFinding": "openrouter_probe.policy.lint",
    "PolicySpec": "openrouter_probe.policy.spec",
    "check_policy": "openrouter_probe.policy.drift",
    "compile_policy": "openrouter_probe.policy.compiler",
    "lint_block": "openrouter_probe.policy.lint",
    "load_compiled_policy": "openrouter_probe.policy.compiled",
    "load_provider_block": "openrouter_probe.policy.compiled",
    "load_spec": "openrouter_probe.policy.spec",
    "parse_spec": "openrouter_probe.policy.spec",
}

__all__ = [
    "CompiledPolicy",
    "Decision",
    "DriftReport",
    "LintFinding",
    "PolicySpec",
    "check_policy",
    "compile_policy",
    "lint_block",
    "load_compiled_policy",
    "load_provider_block",
    "load_spec",
    "parse_spec",
]

if TYPE_CHECKING:
    from openrouter_probe.policy.compiled import (
        CompiledPolicy,
        Decision,
        load_compiled_policy,
        load_provider_block,
    )
    from openrouter_probe.policy.compiler import compile_policy
    from openrouter_probe.policy.drift import DriftReport, check_policy
    from openrouter_probe.policy.lint import LintFinding, lint_block
    from openrouter_probe.policy.spec import PolicySpec, load_spec, parse_spec

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
