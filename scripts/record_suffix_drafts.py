"""Record the SuffixDecoding authors' drafts, step by step, on fixed token sequences (the fidelity fixture).

SuffixDecoding (Oliaro, Jia, Campos, Qiao, NeurIPS 2025, arXiv 2411.04975) as the authors run it in their
own vLLM plugin, ArcticInference (github.com/snowflakedb/ArcticInference): ``speculative_config={"method":
"suffix"}``. The suffix trees are their C++ ``SuffixDecodingCache`` (``arctic_inference.suffix_decoding``,
the package this suite builds, whose ``cache.py`` is the mirror's). What a caller can get wrong is how it
drives the cache, so this script runs the plugin's own driver, read from a git mirror of their repository:

* ``_update_suffix_cache`` and ``propose_suffix_draft_token_ids``, methods of their patched vLLM model
  runner (``arctic_inference/vllm/model_runner.py``): their source text is executed unchanged, bound to a
  stand-in for the runner that holds what those two methods read (vLLM's input batch: request ids, prompt
  lengths, the token-id buffer and its length; the speculative config; ``max_model_len``; synchronous
  scheduling). The module itself imports vLLM, torch's CUDA streams and vLLM's GPU runner, which do not
  run here, so only the two methods are taken out of it.
* the config's defaults, read from ``ArcticSpeculativeConfig`` and ``SpeculativeConfigPatch.__post_init__``
  (``arctic_inference/vllm/config.py``): the class attributes, and the ``num_speculative_tokens`` that
  method "suffix" gets when ``suffix_speculative_tokens`` is unset.
* two lines transcribed, because they sit inside GPU code: ``min_score = 0`` for method "suffix" (every
  draft is used, ``propose_draft_token_ids``) and the cut of a draft to ``num_speculative_tokens``
  (``tokens[:length]`` with ``length = min(len(tokens), self.num_spec_tokens)``, where the plugin builds
  the draft tensor); vLLM's ``MAX_SPEC_LEN`` (``vllm/v1/sample/rejection_sampler.py``, 128), which the
  proposer imports, is given.

Fixed inputs: requests in a row on one cache (a cell's warm state), each a prompt and the output a greedy
target would emit, built from a few repeated token phrases (some ids past 65,535) so the trees match long
spans. Generation is simulated as vLLM's greedy verification does it: after the prefill's token, each step
accepts the longest draft prefix equal to the target's next tokens plus one token of the target. Every
step's sampled tokens, draft and accepted length go into ``tests/fixtures/suffix_decoding_authors_drafts.json``;
``tests/decoding/test_suffix_decoding_fidelity.py`` drives our engine's drafter on the same inputs.

Usage: ``python scripts/record_suffix_drafts.py --repo /path/to/snowflakedb+ArcticInference/repo``
(a bare git mirror; the fixture names its commit).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import subprocess
import textwrap
import types
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from lade_bench.results.atomic import atomic_write_text

RUNNER_SOURCE = "arctic_inference/vllm/model_runner.py"
CONFIG_SOURCE = "arctic_inference/vllm/config.py"
FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "suffix_decoding_authors_drafts.json"
MAX_SPEC_LEN = 128  # vLLM's vllm/v1/sample/rejection_sampler.py, imported by the plugin's proposer
MAX_MODEL_LEN = 4096  # above every sequence here, so the proposer's model-length bound never binds
SEED = 70  # a seed whose requests meet that difference (six steps)
# The cases: the plugin's defaults as their config sets them, and a small cache at vLLM's depth: a width of
# 8, below the 12-token chains a depth of 24 allows at factor 1 (so the cut binds), and eviction after two
# requests (the plugin's FIFO slot per request, taken at its start).
SMALL_CACHE = {"suffix_cache_max_depth": 24, "suffix_cache_max_requests": 2, "num_speculative_tokens": 8}


def git_show(repo: Path, path: str) -> str:
    """The text of ``path`` at the mirror's HEAD."""
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{path}"], capture_output=True, text=True, check=True
    ).stdout


def method_source(module_text: str, class_name: str, names: tuple[str, ...]) -> dict[str, str]:
    """The source text of the methods ``names`` of ``class_name`` in ``module_text``, dedented."""
    tree = ast.parse(module_text)
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in names:
                    found[item.name] = textwrap.dedent(ast.get_source_segment(module_text, item) or "")
    missing = set(names) - set(found)
    if missing:
        raise SystemExit(f"{class_name} in the mirror has no {sorted(missing)}: the plugin changed, read it again")
    return found


def plugin_defaults(config_text: str) -> dict[str, Any]:
    """The suffix settings of ``ArcticSpeculativeConfig`` and the width method "suffix" gets by default."""
    tree = ast.parse(config_text)
    defaults: dict[str, Any] = {}
    width = None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ArcticSpeculativeConfig":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    if item.target.id.startswith("suffix_"):
                        defaults[item.target.id] = ast.literal_eval(item.value)
        if isinstance(node, ast.ClassDef) and node.name == "SpeculativeConfigPatch":
            for sub in ast.walk(node):
                # `elif self.num_speculative_tokens is None: self.num_speculative_tokens = 16` (method "suffix")
                if isinstance(sub, ast.If) and "num_speculative_tokens is None" in ast.unparse(sub.test):
                    for stmt in sub.body:
                        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
                            width = stmt.value.value
    if width is None or "suffix_cache_max_depth" not in defaults:
        raise SystemExit("could not read the plugin's suffix defaults from its config.py: read it again")
    if defaults.get("suffix_speculative_tokens", 0) > 0:
        width = defaults["suffix_speculative_tokens"]
    return {**defaults, "num_speculative_tokens": width}


def fixed_requests() -> list[dict[str, list[int]]]:
    """Prompts and target outputs of repeated phrases (seeded; stored in the fixture, not regenerated)."""
    rng = random.Random(SEED)
    lengths = (6, 9, 12, 18, 24, 30, 40, 48, 8, 15)
    phrases = [[rng.choice([*range(3, 200), 70_001, 131_071]) for _ in range(n)] for n in lengths]
    # Variants of the longest phrase (its first k tokens, then another tail): continuations that branch
    # with different frequencies, where the best-scored match under the plugin's budget of MAX_SPEC_LEN,
    # cut to the width afterwards, is not the one chosen under a budget of the width (vLLM's call).
    longest = phrases[lengths.index(max(lengths))]
    phrases += [longest[:k] + [rng.randrange(3, 200) for _ in range(len(longest) - k)] for k in (10, 20, 30)]
    requests = []
    for _ in range(7):
        prompt = [t for i in rng.sample(range(len(phrases)), 3) for t in phrases[i]]
        output = [t for _ in range(8) for t in phrases[rng.randrange(len(phrases))]][:150]
        requests.append({"prompt": prompt, "target": output})
    return requests


def runner(cache: Any, config: dict[str, Any], methods: dict[str, Any]) -> types.SimpleNamespace:
    """A stand-in for their model runner: the attributes their two methods read, methods bound to it."""
    spec = types.SimpleNamespace(method="suffix", **config)
    batch = types.SimpleNamespace(
        req_ids=[],
        req_id_to_index={},
        num_prompt_tokens=np.zeros(1, dtype=np.int64),
        token_ids_cpu=np.zeros((1, MAX_MODEL_LEN), dtype=np.int64),
        num_tokens_no_spec=np.zeros(1, dtype=np.int64),
    )
    self = types.SimpleNamespace(
        speculative_config=spec,
        input_batch=batch,
        max_model_len=MAX_MODEL_LEN,
        use_async_scheduling=False,
        _suffix_cache=cache,
        _suffix_response_tokens={},
        num_spec_tokens=config["num_speculative_tokens"],
    )
    for name, fn in methods.items():
        setattr(self, name, types.MethodType(fn, self))
    return self


def record_case(config: dict[str, Any], requests: list[dict[str, list[int]]], methods: dict[str, Any]) -> list:
    """Every request's steps (sampled tokens, the plugin's draft, accepted length) on one cache, in order."""
    from arctic_inference.suffix_decoding import SuffixDecodingCache

    cache = SuffixDecodingCache(
        max_tree_depth=config["suffix_cache_max_depth"], max_cached_requests=config["suffix_cache_max_requests"]
    )
    me = runner(cache, config, methods)
    batch = me.input_batch
    recorded = []
    for number, request in enumerate(requests):
        req_id, prompt, target = f"req-{number}", request["prompt"], request["target"]
        batch.req_ids, batch.req_id_to_index = [req_id], {req_id: 0}
        batch.num_prompt_tokens[0] = len(prompt)
        batch.token_ids_cpu[0, : len(prompt)] = prompt
        done, sampled, steps = 0, [target[0]], []  # the prefill samples the first output token
        while True:
            batch.token_ids_cpu[0, len(prompt) + done : len(prompt) + done + len(sampled)] = sampled
            done += len(sampled)
            batch.num_tokens_no_spec[0] = len(prompt) + done
            me._update_suffix_cache([sampled])
            (result,) = me.propose_suffix_draft_token_ids([sampled])
            # propose_draft_token_ids: min_score = 0 for method "suffix"; the draft tensor keeps
            # tokens[:min(len(tokens), num_spec_tokens)].
            draft = list(result.token_ids) if result.score >= 0 else []
            draft = draft[: min(len(draft), me.num_spec_tokens)]
            accepted = 0
            while (
                accepted < len(draft) and done + accepted < len(target) and draft[accepted] == target[done + accepted]
            ):
                accepted += 1
            steps.append({"sampled": list(sampled), "draft": draft, "accepted": accepted})
            if done >= len(target):
                break
            sampled = target[done : done + accepted + 1]
        recorded.append({"prompt": prompt, "target": target, "steps": steps})
    batch.req_ids, batch.req_id_to_index = [], {}
    me._update_suffix_cache([])  # the last request leaves the batch: stopped
    return recorded


def main() -> None:
    """Run the plugin's driver on the fixed inputs and write the fixture (atomically)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="bare git mirror of snowflakedb/ArcticInference")
    parser.add_argument("--out", type=Path, default=FIXTURE)
    args = parser.parse_args()
    from arctic_inference.suffix_decoding import SuffixDecodingDraft

    commit = subprocess.run(
        ["git", "-C", str(args.repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    names = ("_update_suffix_cache", "propose_suffix_draft_token_ids")
    sources = method_source(git_show(args.repo, RUNNER_SOURCE), "GPUModelRunnerPatch", names)
    namespace: dict[str, Any] = {"SuffixDecodingDraft": SuffixDecodingDraft, "MAX_SPEC_LEN": MAX_SPEC_LEN}
    for text in sources.values():
        exec(compile("from __future__ import annotations\n" + text, RUNNER_SOURCE, "exec"), namespace)
    methods = {name: namespace[name] for name in names}
    defaults = plugin_defaults(git_show(args.repo, CONFIG_SOURCE))
    requests = fixed_requests()
    cases = {
        "plugin_defaults": {"config": defaults, "requests": record_case(defaults, requests, methods)},
        "small_cache": {
            "config": {**defaults, **SMALL_CACHE},
            "requests": record_case({**defaults, **SMALL_CACHE}, requests, methods),
        },
    }
    fixture = {
        "authors_code": {
            "repository": "github.com/snowflakedb/ArcticInference",
            "commit": commit,
            "files": [RUNNER_SOURCE, CONFIG_SOURCE],
            "functions": "GPUModelRunnerPatch._update_suffix_cache and .propose_suffix_draft_token_ids, run "
            "unchanged on a stand-in runner (synchronous scheduling); min_score and the cut to "
            "num_speculative_tokens transcribed from propose_draft_token_ids",
            "suffix_trees": f"arctic-inference=={version('arctic-inference')} (SuffixDecodingCache, their C++)",
            "max_spec_len": MAX_SPEC_LEN,
            "max_model_len": MAX_MODEL_LEN,
        },
        "recorded_by": "scripts/record_suffix_drafts.py",
        "note": "requests in order on one cache (a cell's warm state); each step: the tokens sampled "
        "(the prefill's first, then the accepted draft prefix plus one), the draft proposed after adding "
        "them, and how many of its tokens the greedy target accepts",
        "cases": cases,
    }
    atomic_write_text(args.out, json.dumps(fixture, indent=1) + "\n")
    steps = sum(len(r["steps"]) for case in cases.values() for r in case["requests"])
    print(f"wrote {args.out}: {len(cases)} cases, {steps} steps, defaults {defaults}")


if __name__ == "__main__":
    main()
