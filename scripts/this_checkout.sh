# Sourced by the scripts that produce committed results, after they cd into the checkout's root: this
# checkout's code on the path, and the argument-count check the scripts share (require_arg_count).
#
# The venv installs lade_bench in editable mode, pointing at the checkout that ran setup.sh. A git
# worktree that reuses that venv (a symlinked .venv, as docs/results.md describes for timed runs)
# would otherwise import the other checkout's src/, and every manifest would record that checkout's
# commit and dirty state (results/manifest.py reads git from the imported package's folder), not the
# code the worktree was made to run. Putting this checkout's src/ first makes the run and its
# provenance this checkout's.
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

# A result script's argument-count check: exit 2 with its usage line unless it got one of the allowed counts.
#   require_arg_count "$usage" $# 1 3
require_arg_count() {
    local usage=$1 got=$2 allowed
    shift 2
    for allowed in "$@"; do
        if [ "$got" -eq "$allowed" ]; then
            return 0
        fi
    done
    echo "$usage" >&2
    exit 2
}

# A (model, dataset) group script's group check: exit 2 naming the allowed ones unless MODEL and DATASET are
# among them; nothing to check when no group was given.
#   require_group "$only_model" "$only_dataset" "${models[*]}" "${datasets[*]}"
require_group() {
    local model=$1 dataset=$2 models=$3 datasets=$4
    if [ -z "$model" ]; then
        return 0
    fi
    if [[ ! " $models " =~ " $model " ]] || [[ ! " $datasets " =~ " $dataset " ]]; then
        echo "unknown group '$model $dataset': MODEL is one of $models, DATASET one of $datasets" >&2
        exit 2
    fi
}

# A sitting script's optional one-item argument: exit 2 naming the allowed ones unless ITEM (when given) is one.
#   require_item "model" "MODEL" "${3:-}" "${models[*]}"
require_item() {
    local what=$1 name=$2 item=$3 allowed=$4
    if [ -n "$item" ] && [[ ! " $allowed " =~ " $item " ]]; then
        echo "unknown $what '$item': $name is one of $allowed" >&2
        exit 2
    fi
}

# Spec-Bench's question file under SHARED_DATA_DIR: exit 2 saying what the folder must hold unless it is there.
#   require_spec_bench_questions "$questions"
require_spec_bench_questions() {
    if [ ! -f "$1" ]; then
        echo "no Spec-Bench question file at $1: SHARED_DATA_DIR is the folder holding spec_bench/question.jsonl" >&2
        exit 2
    fi
}
