"""Policies: the spec a person writes, the compiler, the compiled file, lint and drift.
May import ``rules`` and ``api`` (and ``errors``, ``files``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.policy.compiled import CompiledPolicy as CompiledPolicy
    from openrouter_probe.policy.compiled import Decision as Decision
    from openrouter_probe.policy.compiled import load_compiled_policy as load_compiled_policy
    from openrouter_probe.policy.compiled import load_provider_block as load_provider_block
    from openrouter_probe.policy.compiler import compile_policy as compile_policy
    from openrouter_probe.policy.drift import DriftReport as DriftReport
    from openrouter_probe.policy.drift import check_policy as check_policy
    from openrouter_probe.policy.lint import LintFinding as LintFinding
    from openrouter_probe.policy.lint import lint_block as lint_block
    from openrouter_probe.policy.spec import PolicySpec as PolicySpec
    from openrouter_probe.policy.spec import load_spec as load_spec
    from openrouter_probe.policy.spec import parse_spec as parse_spec

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
