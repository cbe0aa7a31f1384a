"""Record SAM-Decoding's and PIA's drafts from the authors' own code, step by step, on fixed token streams.

The fidelity fixtures of ``tests/decoding/test_sam_pia_fidelity.py``, written once by this script:

* **SAM-Decoding** (Hu et al., "SAM Decoding: Speculative Decoding via Suffix Automaton", ACL 2025, arXiv
  2411.10666; github.com/hyx1999/SAM-Decoding): the authors' ``DraftModel`` (``samd/draft.py``: its
  ``lookup`` and ``update``) with their ``DynSAM`` (``samd/sam/dyn_sam.py``), ``StaticSAM`` /
  ``NullStaticSAM`` (``samd/sam/static_sam.py``) and their Token Recycling fallback ``TokenRecycle``
  (``samd/tree_model/token_recycle/token_recycle.py``) on their tree (``samd/config/token_recycle.json``,
  loaded by ``SamdConfig``), driven as ``SamdModel.prefill`` / ``decode`` / ``update_state`` drive them
  (``samd/samd_model.py``): the prompt and its logits go in, then per step ``lookup(start_token)``, the
  accepted tokens and the fed tokens with their logits go in. The package's ``__init__`` files are not
  run (they import the GPU model patches and EAGLE, which need another transformers): empty package
  shells stand in for ``samd`` and ``samd.tree_model`` (``tree_model_cls`` holding ``TokenRecycle`` only);
  every module of theirs that runs is imported unchanged from a ``git archive`` of the mirror.
* **PIA** (Zhao et al., "Lookahead: An Inference Acceleration Framework for Large Language Model with
  Lossless Generation Accuracy", KDD 2024, arXiv 2312.12728; github.com/alipay/PainlessInferenceAcceleration):
  the authors' ``LookaheadCache`` (``lookahead/lookahead/common/lookahead_cache.py``, pure Python and
  numpy, imported unchanged from the file) driven as their ``lookahead_generation`` drives it
  (``lookahead/lookahead/common/pretrained_model.py``): ``put(prompt[1:], branch_length + 1, mode='input')``,
  per step ``hier_get(context[-max_query_length:], decoding_length, branch_length, min_input_size=0,
  min_output_size=max(decoding_length // 2, 1), mode='mix')`` and ``stream_put`` of the step's tokens, and
  ``stream_put([], final=True)`` at the end; several requests on one cache (the state carries: earlier
  outputs, earlier prompts reset to zero, the squeeze). Spec-Bench ships no PIA.

What is fixed rather than a model: the streams (prompt and output token ids of each request, what a
greedy target would emit) and, for SAM's fallback, the logits of every fed token: row
``(token + position) % len(rows)`` of a small table of distinct values (token 0, the authors' padding,
never in the top-k), and one fixed row for token 0 itself at every position: their chains are padded
with 0 to ``n_predicts`` and the padding is fed and recycled (row 0 of their matrix), ours are not
(docs/sam_decoding.md), so a position-dependent row 0 would make the subtrees under unknown successors
(token 0 on both sides) differ for that documented reason alone. A step accepts the longest draft path
that the output stream continues with, then the stream's next token, as greedy verification does; so
drafts, acceptance and every state update are a function of these inputs alone. No token of a stream is
0 (SAM's padding) or a stop id in a prompt (PIA's ``put`` would cut it there; ours does not,
docs/pia.md), so those documented differences stay out of the comparison.

Usage (bare git mirrors; the fixtures name their commits):
    python scripts/record_sam_pia_drafts.py --sam-repo /work/.mirror/hyx1999+SAM-Decoding/repo \
        --pia-repo /work/.mirror/alipay+PainlessInferenceAcceleration/repo
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lade_bench.results.atomic import atomic_write_text

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
SAM_FIXTURE = FIXTURES / "sam_decoding_authors_drafts.json"
PIA_FIXTURE = FIXTURES / "pia_authors_drafts.json"
PIA_SOURCE = "lookahead/lookahead/common/lookahead_cache.py"

# SAM's inputs: tokens 1..SAM_VOCAB-2, SAM_EOS ends each static document (as their StaticSAM.build appends).
SAM_VOCAB = 40
SAM_EOS = SAM_VOCAB - 1
SAM_ROWS = 3  # logits rows: a successor list is one of three, so the fallback's trees are accepted at times
SAM_CONFIGURATIONS = (
    {"name": "defaults", "settings": {"n_predicts": 40, "len_threshold": 5, "len_bias": 5}, "static": False},
    {"name": "static_corpus", "settings": {"n_predicts": 12, "len_threshold": 4, "len_bias": 2}, "static": True},
    # No penalty: the two matches tie often (a tie goes to the dynamic one in their lookup).
    {"name": "static_no_bias", "settings": {"n_predicts": 12, "len_threshold": 4, "len_bias": 0}, "static": True},
)
# PIA's inputs: the library defaults, and small bounds with a 1,100-token vocabulary that make the squeeze act.
PIA_CONFIGURATIONS = (
    {
        "name": "defaults",
        "settings": {"decoding_length": 64, "branch_length": 12, "max_query_length": 2},
        "cache": {"max_node": 65536, "max_output_node": 512},
    },
    {
        "name": "squeeze",
        "settings": {"decoding_length": 16, "branch_length": 4, "max_query_length": 2},
        "cache": {"max_node": 65536, "max_output_node": 4},
    },
)
PIA_EOS = 2


def git(repo: Path, *args: str) -> bytes:
    """A git command's stdout in the bare mirror ``repo``."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def commit_of(repo: Path) -> str:
    """The mirror's HEAD commit."""
    return git(repo, "rev-parse", "HEAD").decode().strip()


def _spans(rng: np.random.Generator, sources: list[list[int]], length: int, vocab: range, copy: float) -> list[int]:
    """``length`` tokens: spans copied from ``sources`` (probability ``copy`` per piece) and random tokens."""
    out: list[int] = []
    while len(out) < length:
        usable = [s for s in sources if len(s) >= 8]
        if usable and rng.random() < copy:
            source = usable[int(rng.integers(len(usable)))]
            size = int(rng.integers(5, min(16, len(source)) + 1))
            at = int(rng.integers(0, len(source) - size + 1))
            out.extend(source[at : at + size])
        else:
            out.extend(int(t) for t in rng.integers(vocab.start, vocab.stop, size=int(rng.integers(1, 5))))
    return out[:length]


# ----------------------------------------------------------------------------------------------- SAM


def import_samd(repo: Path, into: Path) -> types.SimpleNamespace:
    """The authors' ``DraftModel``, ``SamdConfig``, ``StaticSAM`` and ``TokenRecycle`` from a git archive
    of the mirror, the two package ``__init__`` files replaced by empty shells (module docstring)."""
    tarfile.open(fileobj=io.BytesIO(git(repo, "archive", "HEAD", "samd", "profile_utils.py"))).extractall(into)
    sys.path.insert(0, str(into))

    def shell(name: str) -> types.ModuleType:
        module = types.ModuleType(name)
        module.__path__ = [str(into / name.replace(".", "/"))]
        sys.modules[name] = module
        return module

    shell("samd")
    tree_models = shell("samd.tree_model")
    from samd.tree_model.token_recycle.token_recycle import TokenRecycle  # type: ignore[import-not-found]
    from samd.tree_model.tree import TreeModel  # type: ignore[import-not-found]

    tree_models.TreeModel = TreeModel  # type: ignore[attr-defined]
    tree_models.tree_model_cls = {"token_recycle": TokenRecycle}  # type: ignore[attr-defined]
    from samd.draft import DraftModel  # type: ignore[import-not-found]
    from samd.sam import StaticSAM  # type: ignore[import-not-found]
    from samd.samd_config import SamdConfig  # type: ignore[import-not-found]

    return types.SimpleNamespace(DraftModel=DraftModel, SamdConfig=SamdConfig, StaticSAM=StaticSAM)


def sam_inputs(rng: np.random.Generator) -> dict[str, Any]:
    """The logits table, a static corpus and four requests (prompt, output), copies among them all."""
    vocab = range(1, SAM_EOS)
    rows = []
    for _ in range(SAM_ROWS + 1):  # the last: token 0's, at every position
        row = rng.permutation(SAM_VOCAB).astype(float)
        row[0] = -1.0  # token 0 (the authors' padding) is never a successor
        rows.append(row.tolist())
    documents: list[list[int]] = []
    for _ in range(3):  # later documents repeat spans of earlier ones: a static match occurs more than once
        documents.append(_spans(rng, documents, 40, vocab, 0.6))
    requests = []
    earlier: list[list[int]] = []
    for _ in range(4):
        prompt = _spans(rng, [*documents, *earlier], int(rng.integers(30, 50)), vocab, 0.5)
        output = _spans(rng, [prompt, *documents, *earlier], 70, vocab, 0.6)
        requests.append({"prompt": prompt, "output": output})
        earlier += [prompt, output]
    return {"rows": rows[:-1], "padding_row": rows[-1], "documents": documents, "requests": requests}


def logits_of(inputs: dict[str, Any], tokens: list[int], positions: list[int]) -> torch.Tensor:
    """The fixed 'model': the logits row of each fed token at its position (token 0: one row everywhere)."""
    rows = inputs["rows"]
    return torch.tensor(
        [rows[(t + p) % len(rows)] if t else inputs["padding_row"] for t, p in zip(tokens, positions, strict=True)]
    )


def tree_parents(tree: list[list[int]]) -> list[int]:
    """Parent of every node of the authors' tree adjacency (node 0, the root: -1)."""
    parents = [-1] * len(tree)
    for node, children in enumerate(tree):
        for child in children:
            parents[child] = node
    return parents


def accepted_length(tokens: list[int], parents: list[int], following: list[int]) -> tuple[int, list[int]]:
    """Greedy verification on a fixed stream: the longest root path whose tokens ``following`` starts with.

    Returns (drafted tokens accepted, the path's node indices, root excluded). Among equal lengths the
    first node in index order, as a tree's siblings never share a token unless they are padding.
    """
    depth = {0: 0}
    best: tuple[int, int] = (0, 0)
    for node in range(1, len(tokens)):
        parent = parents[node]
        if parent in depth and depth[parent] < len(following) and tokens[node] == following[depth[parent]]:
            depth[node] = depth[parent] + 1
            if depth[node] > best[0]:
                best = (depth[node], node)
    path = []
    node = best[1]
    while node > 0:
        path.append(node)
        node = parents[node]
    return best[0], path[::-1]


def record_sam(repo: Path, work: Path, rng: np.random.Generator) -> dict[str, Any]:
    """Run the authors' DraftModel on the fixed streams of every configuration; every step recorded."""
    samd = import_samd(repo, work)
    inputs = sam_inputs(rng)
    configurations = []
    for configuration in SAM_CONFIGURATIONS:
        config = samd.SamdConfig(**configuration["settings"])
        static = samd.StaticSAM.build(inputs["documents"], SAM_EOS, verbose=False) if configuration["static"] else None
        draft = samd.DraftModel(config, sam_static=static, lm=None, dtype=torch.float32, device="cpu")
        parents = tree_parents(config.tree)
        requests = []
        for request in inputs["requests"]:
            prompt, output = request["prompt"], request["output"]
            draft.reset()  # SamdModel.generate: per question (the dynamic automaton, the static match)
            fed = torch.tensor(prompt)
            draft.update(tokens=fed, tree_tokens=fed, tree_logits=logits_of(inputs, prompt, list(range(len(prompt)))))
            steps = []
            i, length = 0, len(prompt)  # output[i] is the start token, at position `length`
            while i < len(output) - 1:
                start = output[i]
                _, dynamic = draft.sam_dyn.lookup(start)
                _, static_match = draft.sam_static.lookup(start)
                kind, tokens, *_ = draft.lookup(start)
                if kind == "sequence":
                    node_parents = list(range(-1, len(tokens) - 1))
                    source = "dynamic" if dynamic >= static_match - config.len_bias else "static"
                else:
                    node_parents, source = parents, "tree"
                matched, _ = accepted_length(tokens, node_parents, output[i + 1 :])
                if kind == "sequence":
                    depths = list(range(len(tokens)))
                else:
                    depths = [0] * len(tokens)
                    for node in range(1, len(tokens)):
                        depths[node] = depths[parents[node]] + 1
                accepted = output[i : i + 1 + matched]  # candidate[:accept_length]: the start token first
                draft.update(
                    tokens=torch.tensor(accepted),
                    tree_tokens=torch.tensor(tokens),
                    tree_logits=logits_of(inputs, list(tokens), [length + d for d in depths]),
                )
                steps.append(
                    {
                        "start": start,
                        "dynamic_match": dynamic,
                        "static_match": static_match,
                        "kind": source,
                        "draft": list(tokens),
                        "accepted": matched,
                    }
                )
                i += 1 + matched
                length += 1 + matched
            requests.append({"prompt": prompt, "output": output, "steps": steps})
        configurations.append(
            {
                "name": configuration["name"],
                "settings": configuration["settings"],
                "static_documents": inputs["documents"] if configuration["static"] else None,
                "requests": requests,
            }
        )
    return {
        "authors": {
            "repository": "hyx1999/SAM-Decoding",
            "commit": commit_of(repo),
            "code": [
                "samd/draft.py",
                "samd/sam/dyn_sam.py",
                "samd/sam/static_sam.py",
                "samd/tree_model/token_recycle/token_recycle.py",
                "samd/config/token_recycle.json",
                "samd/samd_config.py",
            ],
        },  # fmt: skip
        "made_by": "scripts/record_sam_pia_drafts.py",
        "protocol": (
            "per request: reset, update(prompt, its logits); per step: lookup(start), the longest draft path "
            "the output continues accepted, update(start + accepted, fed tokens, their logits); logits of a "
            "fed token at position p: logits_rows[(token + p) % len(logits_rows)], token 0's padding_row at every "
            "position; static documents each "
            "followed by static_eos; a chain step's draft is the authors' n_predicts tokens (start first, "
            "padded with 0), a tree step's their tree's node tokens in node order (tree_parents)"
        ),
        "static_eos": SAM_EOS,
        "logits_rows": inputs["rows"],
        "padding_row": inputs["padding_row"],
        "tree_parents": tree_parents(samd.SamdConfig().tree),
        "configurations": configurations,
    }


# ----------------------------------------------------------------------------------------------- PIA


def import_lookahead_cache(repo: Path, into: Path) -> Any:
    """The authors' ``lookahead_cache`` module, imported from its file (the package's other modules need
    their patched transformers models)."""
    path = into / "lookahead_cache.py"
    path.write_bytes(git(repo, "show", f"HEAD:{PIA_SOURCE}"))
    spec = importlib.util.spec_from_file_location("authors_lookahead_cache", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pia_requests(rng: np.random.Generator, name: str) -> list[dict[str, list[int]]]:
    """Fixed requests. ``defaults``: five on a 60-token vocabulary, prompts and outputs copying from earlier
    ones (earlier outputs and earlier prompts' reset n-grams both get drafted), two outputs ending in the
    stop id. ``squeeze``: three whose prompts hold 1,100 distinct tokens, so 1,024 trees change."""
    bos = 1
    requests: list[dict[str, list[int]]] = []
    if name == "defaults":
        vocab = range(3, 63)
        earlier: list[list[int]] = []
        for k in range(5):
            prompt = [bos, *_spans(rng, earlier, int(rng.integers(30, 70)), vocab, 0.5)]
            output = _spans(rng, [prompt, *earlier], int(rng.integers(50, 80)), vocab, 0.7)
            if k in (1, 3):
                output.append(PIA_EOS)
            requests.append({"prompt": prompt, "output": output})
            earlier += [prompt[1:], output]
        return requests
    vocab = range(3, 1103)
    earlier = []
    for _ in range(3):
        prompt = [bos, *(int(t) for t in rng.permutation(np.arange(vocab.start, vocab.stop)))]
        output = _spans(rng, [prompt[1:], *earlier, prompt[1:60]], 60, range(3, 40), 0.7)
        requests.append({"prompt": prompt, "output": output})
        earlier.append(output)
    return requests


def record_pia(repo: Path, work: Path, rng: np.random.Generator) -> dict[str, Any]:
    """Run the authors' LookaheadCache on the fixed streams of every configuration; every step recorded."""
    authors = import_lookahead_cache(repo, work)
    configurations = []
    for configuration in PIA_CONFIGURATIONS:
        settings = configuration["settings"]
        decoding_length, branch_length = settings["decoding_length"], settings["branch_length"]
        cache = authors.LookaheadCache(eos_ids=[PIA_EOS], **configuration["cache"])
        requests = []
        for request in pia_requests(rng, configuration["name"]):
            prompt, output = request["prompt"], request["output"]
            cache.put(prompt[1:], branch_length=branch_length + 1, mode="input", idx=0)
            # The prefill's token is the first of the output: streamed in like every step's tokens.
            cache.stream_put(output[:1], branch_length=branch_length + 1, final=False, mode="output", idx=0)
            steps = []
            i = 0
            while i < len(output) - 1 and output[i] != PIA_EOS:
                context = prompt + output[: i + 1]
                ids, mask, _ = cache.hier_get(
                    context[-settings["max_query_length"] :],
                    decoding_length=decoding_length,
                    branch_length=branch_length,
                    min_input_size=0,
                    min_output_size=max(decoding_length // 2, 1),
                    mode="mix",
                    idx=0,
                )
                parents = [-1] + [max((j for j in range(1, r) if mask[r, j]), default=0) for r in range(1, len(ids))]
                matched, _ = accepted_length(list(ids), parents, output[i + 1 :])
                emitted = output[i + 1 : i + 2 + matched]  # the accepted drafts and the next token
                cache.stream_put(emitted, branch_length=branch_length + 1, final=False, mode="output", idx=0)
                steps.append({"draft": [int(t) for t in ids], "parents": parents, "accepted": matched})
                i += len(emitted)
            cache.stream_put([], branch_length=branch_length + 1, final=True, mode="output", idx=0)
            requests.append({"prompt": prompt, "output": output, "steps": steps})
        configurations.append(
            {"name": configuration["name"], "settings": settings, "cache": configuration["cache"], "requests": requests}
        )
    return {
        "authors": {
            "repository": "alipay/PainlessInferenceAcceleration",
            "commit": commit_of(repo),
            "code": [PIA_SOURCE, "lookahead/lookahead/common/pretrained_model.py (the calls, transcribed)"],
        },
        "made_by": "scripts/record_sam_pia_drafts.py",
        "protocol": (
            "one LookaheadCache(eos_ids=[stop_id], **cache) per configuration, its requests in order: "
            "put(prompt[1:], branch_length + 1, mode='input'); stream_put(output[:1]); per step hier_get("
            "context[-max_query_length:], decoding_length, branch_length, 0, max(decoding_length // 2, 1), "
            "'mix'), the longest draft path the output continues accepted, stream_put(accepted + next token); "
            "a step never starts at the stop id; stream_put([], final=True) at the end"
        ),
        "stop_id": PIA_EOS,
        "configurations": configurations,
    }


def main() -> None:
    """Record both fixtures (seeded: the same mirrors give the same files)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sam-repo", type=Path, required=True, help="bare git mirror of hyx1999/SAM-Decoding")
    parser.add_argument("--pia-repo", type=Path, required=True, help="bare git mirror of PainlessInferenceAcceleration")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        sam = record_sam(args.sam_repo, Path(tmp) / "sam", np.random.default_rng(65))
        (Path(tmp) / "pia").mkdir()
        pia = record_pia(args.pia_repo, Path(tmp) / "pia", np.random.default_rng(66))
    for path, fixture in ((SAM_FIXTURE, sam), (PIA_FIXTURE, pia)):
        atomic_write_text(path, json.dumps(fixture, separators=(",", ":")) + "\n")
        steps = sum(len(r["steps"]) for c in fixture["configurations"] for r in c["requests"])
        print(f"{path}: {steps} steps from {fixture['authors']['repository']} {fixture['authors']['commit'][:7]}")


if __name__ == "__main__":
    main()
