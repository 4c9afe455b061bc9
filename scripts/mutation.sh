#!/usr/bin/env bash
# Mutation testing (mutmut 3.8.1) of the modules that make decisions: routing, budget, drift,
# precision, quantities. Slow (tens of minutes per module on two cores), so it is not part of
# .ci/run. Usage:
#
#   bash scripts/mutation.sh                     # all five modules
#   bash scripts/mutation.sh routing precision   # some of them
#
# It works on a copy of the tree (mutmut writes mutants/ and its cache where it runs; set
# MUTATION_WORKDIR to keep the copy), re-runs every survivor in a fresh pytest process (mutmut's
# workers are forked from a process that has already run the suite, so state that process built
# can hide a mutant), and prints a kill rate per module, overall and without mutants of message
# strings (a literal with a space in it: wording, not a decision).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$#" -gt 0 ]; then modules=("$@"); else modules=(routing budget drift precision quantities); fi
for m in "${modules[@]}"; do
  [ -f "$root/openrouter_probe/$m.py" ] || { echo "no module openrouter_probe/$m.py" >&2; exit 2; }
done
# The project's interpreter: the README's venv when there is one, else whatever `python` is.
py=${PYTHON:-python}
[ -x "$root/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && py="$root/.venv/bin/python"
"$py" -c 'import openrouter_probe, pytest_recording' || {
  echo "install the project first: pip install -e '.[dev]' (see the README)" >&2
  exit 2
}
"$py" -c 'import mutmut' 2>/dev/null || "$py" -m pip install --quiet 'mutmut==3.8.1'

# The test files that exercise each module (its own and its callers'): a mutant is judged by these.
declare -A tests_of=(
  [routing]="test_routing test_lint test_policy test_budget test_drift test_edges"
  [precision]="test_precision test_policy test_matrix test_edges"
  [budget]="test_budget test_analysis_cli test_edges"
  [drift]="test_drift test_edges"
  [quantities]="test_budget test_analysis_cli test_edges"
)
selected=()
for m in "${modules[@]}"; do read -ra t <<< "${tests_of[$m]:-}"; selected+=("${t[@]}"); done
[ "${#selected[@]}" -gt 0 ] || selected=(test_*)
# Left out: property tests over whole compiles and end-to-end runs that take seconds each (a
# surviving mutant runs every selected test): the kill rate is a floor for the full suite.
slow="not test_properties_of_compiled_policies and not test_block_passes_through_openai_extra_body"
slow="$slow and not test_matrix_table_and_plot"

work=${MUTATION_WORKDIR:-$(mktemp -d)}
mkdir -p "$work"
echo "mutation: working in $work" >&2
if [ -n "${MUTATION_REPORT_ONLY:-}" ]; then
  cd "$work"  # re-check the survivors and report on an earlier run kept with MUTATION_WORKDIR
else
# The tree as it is now (tracked and new files, not ignored ones), without mutmut's own leftovers.
(cd "$root" && git ls-files -z --cached --others --exclude-standard) |
  while IFS= read -r -d '' f; do
    [ -f "$root/$f" ] && printf '%s\0' "$f"
  done | (cd "$root" && xargs -0 cp --parents -t "$work")
cd "$work"
rm -rf mutants
{
  echo
  echo "[tool.mutmut]"
  echo 'source_paths = ["openrouter_probe"]'
  # everything the tests read besides the package and tests/ (policies, notebooks, the README...)
  printf 'also_copy = ['
  sep=""
  for f in *; do
    case "$f" in openrouter_probe | tests | pyproject.toml) continue ;; esac
    printf '%s"%s"' "$sep" "$f"
    sep=", "
  done
  echo "]"
  printf 'only_mutate = ['
  sep=""
  for m in "${modules[@]}"; do printf '%s"openrouter_probe/%s.py"' "$sep" "$m"; sep=", "; done
  echo "]"
  echo "pytest_add_cli_args = [\"-p\", \"no:cacheprovider\", \"--hypothesis-seed=0\", \"-m\", \"not notebook\", \"-k\", \"$slow\"]"
  printf 'pytest_add_cli_args_test_selection = ['
  sep=""
  for t in $(printf '%s\n' "${selected[@]}" | sort -u); do printf '%s"tests/%s.py"' "$sep" "$t"; sep=", "; done
  echo "]"
} >> pyproject.toml

"$py" -m mutmut run --max-children "${MUTATION_CHILDREN:-2}" > mutmut-run.log 2>&1 || {
  tail -20 mutmut-run.log >&2
  exit 1
}
fi

# Sort the survivors: mutants of message strings are noise; the others are re-run in a fresh
# process (applied to the copy, the tests that cover them run by plain pytest).
"$py" -m mutmut results --all true > results.txt || true
"$py" - <<'PY'
import re
import subprocess
import sys

QUOTED = re.compile(r"""(?:[rbfu]{0,2})("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")


def is_message(name: str) -> bool:
    """A mutant that only rewrites, or replaces by None, string literals containing a space."""
    diff = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", name], capture_output=True, text=True
    ).stdout.splitlines()
    old = [l[1:] for l in diff if l.startswith("-") and not l.startswith("---")]
    new = [l[1:] for l in diff if l.startswith("+") and not l.startswith("+++")]
    if len(old) != 1 or len(new) != 1:
        return False
    a, b = old[0], new[0]
    if QUOTED.sub(lambda m: "None" if " " in m.group(1) else m.group(0), a) == b:
        return True  # the message replaced by None
    if QUOTED.sub("S", a) != QUOTED.sub("S", b):
        return False  # code changed, not only a literal
    changed = [x for x, y in zip(QUOTED.findall(a), QUOTED.findall(b)) if x != y]
    return bool(changed) and all(" " in x for x in changed)


with open("results.txt") as results, open("sorted.txt", "w") as out:
    for line in results:
        if ": " not in line:
            continue
        name, status = line.strip().rsplit(": ", 1)
        if status == "survived" and is_message(name):
            status = "message"
        out.write(f"{name} {status}\n")
PY
: > rechecked.txt
while read -r name status; do
  [ "$status" = "survived" ] || continue
  file="openrouter_probe/$(echo "$name" | cut -d. -f2).py"
  cp "$file" "$file.orig"
  "$py" -m mutmut apply "$name" > /dev/null
  mapfile -t tests < <("$py" -m mutmut tests-for-mutant "$name" 2>/dev/null | grep '^tests/' || true)
  if [ "${#tests[@]}" -gt 0 ] &&
    ! "$py" -m pytest -x -q -p no:cacheprovider --hypothesis-seed=0 "${tests[@]}" > /dev/null 2>&1; then
    echo "$name killed" >> rechecked.txt  # killed in a fresh process
  fi
  mv "$file.orig" "$file"
done < sorted.txt

"$py" - "${modules[@]}" <<'PY'
"""Per module: mutants, killed, survivors; kill rate overall and without message-string mutants."""
import sys

statuses = dict(line.split() for line in open("sorted.txt"))
statuses.update(dict(line.split() for line in open("rechecked.txt")))
print(f"{'module':<12} {'mutants':>7} {'killed':>6} {'messages':>8} {'other':>5} {'rate':>6} "
      f"{'w/o messages':>12}  surviving mutants, not messages")
for module in sys.argv[1:]:
    mine = {n: s for n, s in statuses.items() if n.startswith(f"openrouter_probe.{module}.")}
    counted = {n: s for n, s in mine.items() if s in ("killed", "timeout", "survived", "message")}
    if not counted:
        print(f"{module:<12} no mutants")
        continue
    killed = sum(s in ("killed", "timeout") for s in counted.values())
    messages = sum(s == "message" for s in counted.values())
    real = sorted(n.split(".", 2)[2] for n, s in counted.items() if s == "survived")
    rate = 100 * killed / len(counted)
    rate_kept = 100 * killed / (len(counted) - messages) if len(counted) > messages else 100.0
    print(f"{module:<12} {len(counted):>7} {killed:>6} {messages:>8} {len(real):>5} {rate:>5.1f}% "
          f"{rate_kept:>11.1f}%  {' '.join(real)}")
PY
