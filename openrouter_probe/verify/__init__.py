"""The empirical precision check: the same pinned prompts on every endpoint, judged with statistics.

Each module's part is named in ``docs/verify.md`` under the section it implements. The public
names are re-exported by ``openrouter_probe``; ``openrouter-probe verify`` is the command.
May import ``run``, ``policy``, ``rules`` and ``api``; never ``generate`` or ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openrouter_probe import exports_of, lazy_exports

# The public names, written once as the imports a type checker reads (``exports_of``).
if TYPE_CHECKING:
    from openrouter_probe.verify.plan import VerifyPlan as VerifyPlan
    from openrouter_probe.verify.plan import plan_verify as plan_verify
    from openrouter_probe.verify.report import VerifyReport as VerifyReport
    from openrouter_probe.verify.report import build_report as build_report
    from openrouter_probe.verify.run import plan_precision_check as plan_precision_check
    from openrouter_probe.verify.run import verify_precision as verify_precision

_EXPORTS: dict[str, str] = exports_of(__file__)
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
