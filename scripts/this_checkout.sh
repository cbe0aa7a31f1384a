# Sourced by the scripts that produce committed results, after they cd into the checkout's root.
#
# The venv installs lade_bench in editable mode, pointing at the checkout that ran setup.sh. A git
# worktree that reuses that venv (a symlinked .venv, as docs/results.md describes for timed runs)
# would otherwise import the other checkout's src/, and every manifest would record that checkout's
# commit and dirty state (results/manifest.py reads git from the imported package's folder), not the
# code the worktree was made to run. Putting this checkout's src/ first makes the run and its
# provenance this checkout's.
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
