#!/usr/bin/env bash
# Retrieval-only results of `lcr eval` at 32k tokens, 50 questions per task (CPU).
# Usage: bench/eval_results/run.sh [WORKDIR] [METHODS...]   (default: /tmp/lcr-eval-bench, bm25 tfidf dense hybrid mixpr)
# Env: LIMIT=N evaluates only the first N questions of each task; TAG names the summary files;
#      TASKS="vt hashhop2 ..." picks and orders the tasks (default: all five); DEVICE=cuda on a GPU.
# MixPR runs with mixpr.mode=local (all these questions are local; skips the LLM router).
# Data and indexes stay in WORKDIR, outside the project; ../shared/data is read in place.
# PYTHON picks the interpreter (default: the tree's .venv); this tree's lcr is first on the path,
# and WORKDIR/commit.txt records the commit the figures were made at.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-$HERE/.venv/bin/python}"
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
DATA="${LCR_SHARED_DATA:-$HERE/../shared/data}"
WORK="${1:-/tmp/lcr-eval-bench}"; shift || true
METHODS=("${@:-bm25 tfidf dense hybrid mixpr}"); METHODS=(${METHODS[@]})
mkdir -p "$WORK"
git -C "$HERE" rev-parse --short HEAD > "$WORK/commit.txt"
cd "$WORK"

# BABILong filler: the SQuALITY dev stories (Project Gutenberg texts, as BABILong's PG-19).
"$PY" - "$DATA/squality/dev.jsonl" > filler.txt <<'PY'
import json, sys
for line in open(sys.argv[1], encoding="utf-8"):
    print(json.loads(line)["document"])
PY

ev() { "$PY" -c 'import sys; from lcr.eval.cli import eval_group; eval_group(sys.argv[1:], prog_name="lcr eval")' "$@"; }

ev generate hashhop --hops 2 --length 32k --count 50 --seed 0 -o hashhop2.jsonl
ev generate hashhop --hops 4 --length 32k --count 50 --seed 0 -o hashhop4.jsonl
ev generate vt --length 32k --count 50 --seed 0 -o vt.jsonl
ev prepare babilong "$DATA/babi/qa2_two-supporting-facts_test.txt" --filler filler.txt --length 32k --limit 50 --seed 0 -o babilong-qa2.jsonl
ev prepare babilong "$DATA/babi/qa3_three-supporting-facts_test.txt" --filler filler.txt --length 32k --limit 50 --seed 0 -o babilong-qa3.jsonl

for task in ${TASKS:-hashhop2 hashhop4 vt babilong-qa2 babilong-qa3}; do
  args=()
  for m in "${METHODS[@]}"; do args+=(--method "$m"); done
  extra=()
  if [ -n "${LIMIT:-}" ]; then extra+=(--limit "$LIMIT"); fi
  ev "$task.jsonl" "${args[@]}" "${extra[@]}" --set mixpr.mode=local --retrieval-only \
    --device "${DEVICE:-cpu}" --quiet --json > "$task.${TAG:-all}.summary.json"
done
