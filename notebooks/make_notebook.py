"""Build notebooks/budget_analysis.ipynb from the cells below (committed without outputs).

    python notebooks/make_notebook.py

Edit the cells here, not in the .ipynb, and re-run: the notebook is generated so that its diff stays
readable and it never carries outputs.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
TARGET = HERE / "budget_analysis.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "md",
        """# What does the Kimi K2.5 job cost, and who may serve it?

A team wants **60 million output tokens** from `moonshotai/kimi-k2.5`, spread over **six datasets**
(B3 to B8, 10M tokens each), to train a speculative-decoding drafter. They have **$100**, will run
**2000 requests at a time**, and accept only providers that serve the model at its **native
precision**: Kimi K2.5 is released in INT4, so any provider that re-quantizes it to a 4-bit *float*
format (FP4, NVFP4) is out. The model also *thinks*: reasoning tokens are billed as output and can
be 50-80% of everything it writes.

This notebook walks through the numbers with `openrouter-probe`. It needs no network and no API key:
it uses the snapshot of OpenRouter's endpoint list that ships with the package. That snapshot is
**reconstructed** from what OpenRouter showed in early 2026 (providers, tags and prices), with
illustrative uptime and speed figures, and it says so when loaded.""",
    ),
    (
        "code",
        """import pandas as pd

from openrouter_probe.analysis.budget import plan_budget
from openrouter_probe.rules.quantities import format_tokens
from openrouter_probe.analysis.matrix import build_matrix
from openrouter_probe.analysis.plots import plot_budget, plot_price_uptime
from openrouter_probe.rules.routing import route
from openrouter_probe.rules.snapshot import bundled_snapshot

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 30)

snap = bundled_snapshot("moonshotai/kimi-k2.5")
print(snap.provenance)""",
    ),
    (
        "md",
        """## 1. Who serves the model: the matrix

One row per provider endpoint. Prices are in **USD per million tokens** (discount already applied),
uptime in percent, latency (time to first token) in milliseconds and throughput in tokens per
second per request. Every column name carries its unit; `docs/analysis.md` describes them all.""",
    ),
    (
        "code",
        """matrix = build_matrix(snap)
matrix[
    [
        "provider", "tag", "input_usd_per_m", "output_usd_per_m", "uptime_30m_pct", "status",
        "latency_p50_ms", "throughput_p50_tps", "max_output_tokens", "supports_tools",
    ]
]""",
    ),
    (
        "md",
        """Output prices run from $2.20 (Chutes) to $3.75 (Venice) per million tokens. Venice also has
a negative `status` and the lowest uptime: OpenRouter treats it as degraded.

## 2. Precision: which providers serve the real model?

A provider *declares* a quantization tag; the **verdict** compares what it really serves with the
model's native release precision (INT4 for Kimi K2.5):

- `native`: serves the INT4 weights as released;
- `requantized`: serves fewer bits or another 4-bit format (FP4, NVFP4): a lossy conversion;
- `undeclared`: the tag says `unknown` and nothing else is known, so nobody can vouch for it.""",
    ),
    (
        "code",
        """matrix[
    ["provider", "tag", "quantization_declared", "precision_effective", "verdict", "verdict_reason"]
]""",
    ),
    (
        "md",
        """BaseTen says `fp4` outright. Fireworks says `unknown`, but it is known to serve K2.5 as
NVFP4 (a fact recorded, with its source, in the precision registry), so it is `requantized` too.
Together, Novita and Venice declare nothing usable: `undeclared`. Six endpoints serve native INT4.

The plot puts price against uptime: the good corner is **bottom right** (cheap and reliable), and
the colour is the verdict. The dotted line is the output price at which $100 would buy the whole
60M-token target ($1.67/M); only endpoints in the shaded band under it would fit. None does: even
the cheapest costs a third more. Section 3 works out what that means.""",
    ),
    (
        "code",
        """%matplotlib inline
target = plan_budget(snap, budget_usd=100, output_tokens="60M", datasets=6)
plot_price_uptime(matrix, plan=target)""",
    ),
    (
        "md",
        """## 3. The budget, before any policy

Without a policy OpenRouter may route to any endpoint, so the cheapest it admits is Chutes at
$2.20/M output. The target counts **billed** output tokens (reasoning included). We give the
reasoning share as a range, 50-80%, to see how much *visible* text the money buys.""",
    ),
    (
        "code",
        """plan = plan_budget(
    snap,
    budget_usd=100,
    output_tokens="60M",
    datasets=6,
    dataset_names=["B3", "B4", "B5", "B6", "B7", "B8"],
    reasoning_share="0.5:0.8",
)
print(plan.headline)
cheap = plan.cheapest.output_only
print(f"target covered: {cheap.target_covered_pct:.1f}%")
print(
    f"visible text the budget buys: {format_tokens(cheap.affordable_visible_tokens_min)} "
    f"(80% reasoning) to {format_tokens(cheap.affordable_visible_tokens_max)} (50% reasoning)"
)""",
    ),
    (
        "md",
        """So the plan does not fit: 60M tokens at $2.20/M cost **$132**, 32% more than the $100
budget. The budget buys about **45.45M** billed output tokens, **7.58M per dataset** over six.
Of those 45.45M, only 9-23M are visible answer text; the rest is reasoning.

Every admitted endpoint, with its own figures (`weight` is its expected share of the traffic
under OpenRouter's default load balancing; the last row blends them by those weights):""",
    ),
    (
        "code",
        """plan.endpoints_frame()[
    [
        "tag", "verdict", "weight", "price_out_usd_per_m", "cost_usd", "shortfall_pct",
        "affordable_output_tokens", "affordable_output_tokens_per_dataset", "time_to_finish_h",
    ]
]""",
    ),
    (
        "md",
        """`time_to_finish_h` divides the tokens by the p50 throughput of one request times 2000
concurrent requests. It is a **lower bound**: nobody outside the provider knows how many of those
requests it can actually serve at once.

### Run until the money runs out

If the job simply runs the datasets in order and stops when the $100 is spent:""",
    ),
    (
        "code",
        """plan.run_frame()""",
    ),
    (
        "md",
        """B3 to B6 finish, B7 gets a little over half way, B8 never starts.

### What the reasoning share does

Each line is the cost of a number of *visible* tokens at one reasoning share; the dashed line is
the budget. The more the model thinks, the steeper the line and the less text $100 buys.

The target is marked: the red dotted line is what the 60M billed tokens (10M for each of six
datasets) cost, $132, and the red band between it and the budget is the **$32 shortfall**. The grey
band is the visible text those 60M tokens hold, 12M (80% reasoning) to 30M (50%): each line crosses
the target's cost inside it. Wherever a line is above the dashed budget line, $100 does not reach.""",
    ),
    (
        "code",
        """plot_budget(plan)""",
    ),
    (
        "md",
        """## 4. The compiled policy and what it admits

The team's rules compile into OpenRouter's own `provider` request field: keep only endpoints
tagged `int4`, ignore Fireworks and BaseTen, and try the cheapest first. The compiled file lives in
`policies/kimi-k2.5.yaml` (the inline block below is the same rule, used only if the file is
missing). The routing model says which endpoints that block admits, in what order, and why each
other endpoint is left out.""",
    ),
    (
        "code",
        """from pathlib import Path

import yaml

candidates = [Path.cwd() / "policies", Path.cwd().parent / "policies"]
policy_file = next((d / "kimi-k2.5.yaml" for d in candidates if (d / "kimi-k2.5.yaml").exists()), None)
if policy_file is not None:
    block = yaml.safe_load(policy_file.read_text(encoding="utf-8"))["provider"]
    print(f"policy: {policy_file.name}")
else:
    block = {
        "ignore": ["baseten", "fireworks"],
        "quantizations": ["int4"],
        "order": [
            "chutes/int4", "deepinfra/int4", "siliconflow/int4",
            "atlas-cloud/int4", "parasail/int4", "moonshotai/int4",
        ],
    }
    print("policy: inline block (policies/kimi-k2.5.yaml not found)")
print(yaml.safe_dump({"provider": block}, sort_keys=False))

decision = route(block, snap.endpoints)
admitted = pd.DataFrame(
    [
        {
            "position": c.position,
            "tag": c.endpoint.tag,
            "role": c.role,
            "traffic_share_pct": round(c.weight * 100, 4),
        }
        for c in decision.candidates
    ]
)
excluded = pd.DataFrame(
    [{"tag": x.endpoint.tag, "reason": x.reason, "detail": x.detail} for x in decision.excluded]
)
print(f"routing mode: {decision.mode}")
admitted""",
    ),
    (
        "code",
        """excluded""",
    ),
    (
        "md",
        """Exactly the six native INT4 endpoints are admitted; the two re-quantized providers are
ignored by name and the three `unknown` tags fail the `quantizations` filter.

## 5. The budget under the policy

With an ordered policy nearly every request goes to the first provider (Chutes), falling back to
the next when it fails; the blended price weighs each admitted endpoint by that expected share.
Here we also count the **input** tokens. The prompt and answer sizes below are assumptions for the
illustration (800 prompt tokens, 4000 billed output tokens per request): put in your own.""",
    ),
    (
        "code",
        """policy_plan = plan_budget(
    snap,
    budget_usd=100,
    output_tokens="60M",
    datasets=6,
    dataset_names=["B3", "B4", "B5", "B6", "B7", "B8"],
    reasoning_share="0.5:0.8",
    prompt_tokens_per_request=800,
    output_tokens_per_request=4000,
    provider=block,
)
blend = policy_plan.blended
print(policy_plan.headline)
print(
    f"blended over the routing weights: ${blend.price_out_usd_per_m:.4f}/M output; "
    f"the target costs ${blend.output_only.cost_usd:,.2f} output-only"
)
all_in = policy_plan.cheapest.all_in
print(
    f"all-in at {policy_plan.cheapest.tag}: {format_tokens(policy_plan.input_tokens)} input tokens "
    f"over {policy_plan.requests:,} requests; the target costs ${all_in.cost_usd:,.2f}, "
    f"$100 buys {format_tokens(all_in.affordable_output_tokens)} output tokens"
)
policy_plan.run_frame()""",
    ),
    (
        "md",
        """## What this means

- At native precision the cheapest price is still $2.20/M, and the policy's blend is barely dearer
  ($2.20/M), because nearly all traffic goes to Chutes first.
- **$100 does not buy 60M tokens.** It buys about 45.45M billed output tokens (7.58M per dataset),
  a little less once input tokens are counted. Either raise the budget to about $132 plus input,
  lower the target to roughly 7.5M tokens per dataset, or run the datasets in order and accept that
  B7 is partial and B8 does not start.
- With 50-80% reasoning, those tokens hold only 9-23M tokens of visible text: if the drafter needs
  visible text, plan on that figure, not on the billed one.

The same figures come from the command line:

```
openrouter-probe budget moonshotai/kimi-k2.5 --offline --budget-usd 100 --output-tokens 60M \\
    --datasets 6 --reasoning-share 0.5:0.8 --policy policies/kimi-k2.5.yaml --format json
```""",
    ),
    (
        "md",
        """## 6. Rehearse the run on the fake OpenRouter

Before spending real money, run the generator against the project's fake OpenRouter: a loopback
server that routes by the same provider block, bills from the snapshot's prices and keeps a ledger.
First a dry run (the plan and its worst-case and expected cost; nothing is sent), then a small run
under a tight cap: the generator's recorded spend equals the fake's ledger, and the cap holds.
`await` works here because the notebook's event loop is already running.""",
    ),
    (
        "code",
        """import json
import tempfile

import openrouter_probe as orp
from openrouter_probe.fake import serve

work = Path(tempfile.mkdtemp())
prompts = work / "prompts.jsonl"
prompts.write_text(
    "".join(json.dumps({"prompt": f"What is {i} * 41?", "dataset": f"B{i % 2}"}) + "\\n" for i in range(40))
)
if policy_file is not None:
    with serve(speed=0) as fake:
        options = dict(policy=policy_file, out=work / "out.jsonl", base_url=fake.base_url, api_key="sk-fake")
        plan = await orp.generate(prompts, budget_usd=100, max_tokens=4096, dry_run=True, **options)
        print(orp.render_result(plan), end="\\n\\n")
        summary = await orp.generate(prompts, budget_usd=0.02, max_tokens=512, concurrency=2000, **options)
        print(orp.render_result(summary))
        print(f"the fake's ledger: ${fake.ledger.total_usd:.6f}; recorded: ${summary.spent_usd:.6f}")""",
    ),
    (
        "md",
        """## 7. Check that the admitted providers serve the same model

A provider can declare `int4` and still serve something else. `verify_precision` sends the same
pinned prompts (here: arithmetic with known answers) to each endpoint and to a reference (the first
party, Moonshot AI, sent twice to measure its own noise), then compares them pair by pair
(mid-p McNemar tests, and the answers' disagreement against the reference's own, Holm-corrected
across endpoints and measures). Each endpoint gets a verdict: `consistent` (the whole interval of
every difference lies inside the 10-point tolerance), `differs` (significantly less accurate, or
disagreeing more than the reference with itself) or `inconclusive` (too few prompts to tell).

On the fake server we make DeepInfra *degrade* 20% of its answers, as a badly re-quantized
deployment might, and check it against Chutes with 100 prompts each: a run of well under a second
and about a cent of (fake) money. `thinking="off"` asks for greedy answers without reasoning, the
cheap check; the default, `thinking="job"`, checks the model as the job runs it (Kimi K2.5 thinking,
at its card's sampling) after a 6-request pilot that sizes the reasoning room: about $0.29 here for
the same verdicts. On the real API, drop the fake and set `OPENROUTER_API_KEY`; the command-line
twin is `openrouter-probe verify moonshotai/kimi-k2.5 --endpoints chutes/int4,deepinfra/int4
--budget-usd 1 --thinking off`.""",
    ),
    (
        "code",
        """with serve(snap, speed=0, degrade={"deepinfra/int4": 0.2}) as fake:
    report = await orp.verify_precision(
        "moonshotai/kimi-k2.5",
        endpoints=["chutes/int4", "deepinfra/int4"],
        n=100,
        budget_usd=1,
        out=work / "verify.jsonl",
        snapshot=snap,
        base_url=fake.base_url,
        api_key="sk-fake",
        thinking="off",
    )
print(report.render())
report.to_frame()[["role", "verdict", "scored", "accuracy", "accuracy_gap", "p_holm", "cost_usd"]]""",
    ),
    (
        "md",
        """Chutes answers exactly like the reference: `consistent`. DeepInfra gets 15 points fewer right,
far beyond chance: `differs`, and it should leave the policy (`verify --evidence FILE` writes the
finding where `policy compile --precision-file FILE` reads it).""",
    ),
]


def build() -> nbformat.NotebookNode:
    """Return the notebook (no outputs, python3 kernel)."""
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    for kind, source in CELLS:
        cell = new_markdown_cell(source) if kind == "md" else new_code_cell(source)
        nb.cells.append(cell)
    # Stable ids keep the committed file's diff small between rebuilds.
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i:02d}"
    return nb


def main() -> None:
    nb = build()
    nbformat.validate(nb)
    nbformat.write(nb, TARGET)
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
