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
