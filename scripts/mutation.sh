#!/usr/bin/env bash
# Mutation testing (mutmut 3.8.1) of the modules that make decisions: the routing rules, the
# budget, drift, precision, quantities, and the money of a paid run (the cap, the spend journal, the
# reconciler). A module is named by its path under openrouter_probe/, without .py; a name without
# a folder is looked up (spend -> run/money/spend). About 4-5 minutes per money module on two cores
# (longer for routing and budget), so it is not part of .ci/run. Usage:
#
#   bash scripts/mutation.sh                          # the money modules
#   bash scripts/mutation.sh run/money/spend rules/routing  # some modules
#   bash scripts/mutation.sh all                      # every module listed in tests_of below
#
# It works on a copy of the tree (mutmut writes mutants/ and its cache where it runs; set
# MUTATION_WORKDIR to keep the copy), re-runs every survivor in a fresh pytest process (mutmut's
# workers are forked from a process that has already run the suite, so state that process built
# can hide a mutant), and prints a kill rate per module, overall and without mutants of message
# strings (a literal with a space in it: wording, not a decision).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The test files (under tests/, without .py) that exercise each module (its own and its callers'):
# a mutant is judged by these.
declare -A tests_of=(
  [rules/routing]="rules/test_routing policy/test_lint policy/test_compiler analysis/test_budget \
    policy/test_drift rules/test_bad_inputs"
  [rules/precision]="rules/test_precision policy/test_compiler analysis/test_matrix \
    rules/test_bad_inputs"
  [analysis/budget]="analysis/test_budget analysis/test_commands rules/test_bad_inputs"
  [policy/drift]="policy/test_drift rules/test_bad_inputs"
  [rules/quantities]="analysis/test_budget analysis/test_commands rules/test_bad_inputs"
  [run/money/spend]="run/money/test_spend run/test_paid"
  [run/money/journal]="run/money/test_journal run/books/test_reconcile"
  [run/books/reconcile]="run/books/test_reconcile"
)
money=(run/money/spend run/money/journal run/books/reconcile)
if [ "$#" -eq 0 ]; then set -- "${money[@]}"; fi
if [ "$1" = all ]; then set -- "${!tests_of[@]}"; fi
modules=()
for m in "$@"; do
  m=${m%.py}
  m=${m#openrouter_probe/}
  if [ ! -f "$root/openrouter_probe/$m.py" ]; then
    # a bare name (spend, routing): the one module of that name in a folder
    found=$(cd "$root/openrouter_probe" && ls -- */"$m".py */*/"$m".py 2>/dev/null || true)
    [ "$(printf '%s\n' "$found" | grep -c .)" -eq 1 ] || {
      echo "no module openrouter_probe/$m.py (name it by its folder, e.g. run/money/spend)" >&2
      exit 2
    }
    m=${found%.py}
  fi
  modules+=("$m")
done
# The project's interpreter: the README's venv when there is one, else whatever `python` is.
py=${PYTHON:-python}
[ -x "$root/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && py="$root/.venv/bin/python"
"$py" -c 'import openrouter_probe, pytest_recording' || {
  echo "install the project first: pip install -e '.[dev]' (see the README)" >&2
  exit 2
}
"$py" -c 'import mutmut' 2>/dev/null || "$py" -m pip install --quiet 'mutmut==3.8.1'

selected=()
for m in "${modules[@]}"; do
  [ -n "${tests_of[$m]:-}" ] || { echo "$m: no test list in tests_of (scripts/mutation.sh)" >&2; exit 2; }
  read -ra t <<< "${tests_of[$m]}"
  selected+=("${t[@]}")
done
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
  # openrouter_probe.run.money.spend.xǁSpendCapǁfits__mutmut_3 -> openrouter_probe/run/money/spend.py
  file="$(echo "${name%.*}" | tr . /).py"
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
print(f"{'module':<16} {'mutants':>7} {'killed':>6} {'messages':>8} {'other':>5} {'rate':>6} "
      f"{'w/o messages':>12}  surviving mutants, not messages")
for module in sys.argv[1:]:
    dotted = module.replace("/", ".")
    mine = {
        n: s for n, s in statuses.items() if n.rsplit(".", 1)[0] == f"openrouter_probe.{dotted}"
    }
    counted = {n: s for n, s in mine.items() if s in ("killed", "timeout", "survived", "message")}
    if not counted:
        print(f"{module:<16} no mutants")
        continue
    killed = sum(s in ("killed", "timeout") for s in counted.values())
    messages = sum(s == "message" for s in counted.values())
    real = sorted(n.rsplit(".", 1)[1] for n, s in counted.items() if s == "survived")
    rate = 100 * killed / len(counted)
    rate_kept = 100 * killed / (len(counted) - messages) if len(counted) > messages else 100.0
    print(f"{module:<16} {len(counted):>7} {killed:>6} {messages:>8} {len(real):>5} {rate:>5.1f}% "
          f"{rate_kept:>11.1f}%  {' '.join(real)}")
PY
