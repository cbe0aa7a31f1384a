"""Record the Token Recycling authors' drafts, step by step, on fixed inputs (the fidelity fixture).

Runs the authors' own ``recycling_forward`` (Luo et al., "Turning Trash into Treasure: Accelerating
Inference of Large Language Models with Token Recycling", ACL 2025, arXiv 2408.08696; their code
github.com/Luowaterbi/TokenRecycling, ``evaluation/inference_recycling.py``, the same function as
Spec-Bench's ``evaluation/inference_recycling.py`` at fd2c1cd) and their tree template
(``model/recycling/tree_template_.py``), read from a git mirror of their repository, on the tiny float64
llama of the test suite (``lade_bench.models.tiny.tiny_model("llama", init_scale=3.0, seed=7)``), two
prompts in a row on one adjacency matrix (the authors allocate it once per benchmark run and never
reset it). It writes every forward's fed tokens (the prefill's, then each step's root + 80 drafted
nodes), the accepted lengths and the output into ``tests/fixtures/token_recycling_authors_drafts.json``;
``tests/decoding/test_token_recycling_fidelity.py`` runs our engine on the same inputs and compares.

What is changed to run it on this CPU, and why: their function is CUDA-only (``.cuda()``,
``torch.device('cuda:0')``): those are replaced by the CPU in the function's source text, nothing else
of it is touched, and it is executed as they wrote it (``prepare_data``, ``prepare_data_input_ids``,
the verification, the KV path copy, ``adj_matrix[input_ids] = topk(logits, 8)``). Their model is a
patched transformers Llama (``model/recycling/modeling_llama_kv.py``) with a preallocated KV buffer
(``model/recycling/kv_cache.py``), written for a transformers release this project does not install.
In its place the script passes (a) a KV "buffer" holding token ids, one per cached position, that their
code copies exactly as it copies key/value entries (the accepted path moved after the committed
prefix, the length reset), and (b) a model wrapper that, for every query row, reads the row's context
from that buffer and from their 4D tree mask (the positions the row attends to, in order), checks that
their position id is the context's last position, and returns the tiny llama's next-token logits for
that context computed from scratch (no cache). A causal model's logits at a position are a function of
the tokens it attends to, so this is their patched model's output up to float rounding (float64 here).
torch runs on one thread, where an index assignment with repeated indices keeps the last position's
row (the rule our engine states; the authors' CUDA scatter leaves that order unspecified).

Usage: ``python scripts/record_token_recycling_drafts.py --repo /path/to/Luowaterbi+TokenRecycling/repo``
(a bare git mirror; the fixture names its commit).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import types
from pathlib import Path

import torch

from lade_bench.models.tiny import tiny_model
from lade_bench.results.atomic import atomic_write_text

SOURCE = "evaluation/inference_recycling.py"
TEMPLATE_SOURCE = "model/recycling/tree_template_.py"
FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "token_recycling_authors_drafts.json"
# Fixed inputs: two prompts on one matrix (the second sees the first's rows), a budget of 24 tokens.
TINY = {"architecture": "llama", "init_scale": 3.0, "seed": 7}
PROMPTS = ([5, 9, 13, 2, 7, 7, 31, 4], [4, 7, 31, 2, 9, 13, 5, 8, 8, 3])
MAX_NEW_TOKENS = 24
TOP_K = 8
TREE_VERSION = "2.2.2"


def git_show(repo: Path, path: str) -> str:
    """The text of ``path`` at the mirror's HEAD."""
    return subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{path}"], capture_output=True, text=True, check=True
    ).stdout


def authors_function(repo: Path, namespace: dict) -> types.FunctionType:
    """The authors' ``recycling_forward``, its device moved to the CPU, defined in ``namespace``."""
    text = git_show(repo, SOURCE)
    start = text.index("@torch.no_grad()\ndef recycling_forward")
    end = text.index('if __name__ == "__main__":')
    body = text[start:end].replace(".cuda()", "").replace("torch.device('cuda:0')", "torch.device('cpu')")
    if "cuda" in body:
        raise SystemExit(f"{SOURCE} still names cuda after the device change: the script needs updating")
    exec(compile(body, f"{repo}:{SOURCE}", "exec"), namespace)  # noqa: S102 - the authors' code, on purpose
    return namespace["recycling_forward"]


class TokenBuffer:
    """Their ``initialize_past_key_values`` triple, with one token id per cached position for the KV."""

    def __init__(self, length: int) -> None:
        """A buffer of ``length`` positions, none used."""
        self.data = torch.full((length, 1), -1, dtype=torch.long)  # [..., position, :] as their copy indexes it
        self.length = torch.zeros(1, dtype=torch.long)

    def triple(self) -> tuple[object, torch.Tensor, torch.Tensor]:
        """(past_key_values, past_key_values_data, current_length_data) as their code unpacks them."""
        return self, self.data, self.length


class ContextModel:
    """The tiny llama behind their calling convention: every row's logits from its attended context."""

    def __init__(self, model: torch.nn.Module) -> None:
        """Wrap ``model``; ``fed`` records every forward's input ids."""
        self.model = model
        self.vocab_size = model.config.vocab_size
        self.fed: list[list[int]] = []

    def __call__(self, input_ids, past_key_values, attention_mask=None, position_ids=None):
        """Append the fed ids to the buffer and return the logits of each row's context."""
        buffer: TokenBuffer = past_key_values
        ids = input_ids[0].tolist()
        cached = int(buffer.length.item())
        self.fed.append(ids)
        buffer.data[cached : cached + len(ids), 0] = torch.tensor(ids)
        buffer.length.fill_(cached + len(ids))
        committed = buffer.data[:cached, 0].tolist()
        rows = []
        for i in range(len(ids)):
            if attention_mask is None:  # the prefill: causal
                context = committed + ids[: i + 1]
            else:
                seen = attention_mask[0, 0, i].tolist()
                assert all(seen[:cached]), "a tree row must see the whole committed prefix"
                context = committed + [ids[j] for j in range(len(ids)) if seen[cached + j]]
                assert int(position_ids[0, i]) == len(context) - 1, "their position id is the context's last"
            with torch.no_grad():
                rows.append(self.model(input_ids=torch.tensor([context])).logits[0, -1])
        return types.SimpleNamespace(logits=torch.stack(rows)[None])


def record(repo: Path) -> dict:
    """Run the authors' loop on the fixed inputs; the fixture's content."""
    torch.set_num_threads(1)
    model = tiny_model(TINY["architecture"], init_scale=TINY["init_scale"], seed=TINY["seed"])
    wrapper = ContextModel(model)
    templates: dict = {}
    exec(compile(git_show(repo, TEMPLATE_SOURCE), f"{repo}:{TEMPLATE_SOURCE}", "exec"), templates)  # noqa: S102
    adj_matrix = torch.zeros((wrapper.vocab_size, TOP_K), dtype=torch.long)  # their __main__'s global
    # An eos id the tiny model never emits in these runs, so each request ends on the budget.
    tokenizer = types.SimpleNamespace(eos_token_id=wrapper.vocab_size - 1)
    namespace = {
        "torch": torch,
        "adj_matrix": adj_matrix,
        "choose_tree_template": templates["choose_tree_template"],
        "initialize_past_key_values": lambda _model: TokenBuffer(512).triple(),
    }
    forward = authors_function(repo, namespace)
    requests = []
    for prompt in PROMPTS:
        wrapper.fed.clear()
        inputs = types.SimpleNamespace(input_ids=torch.tensor([prompt]))
        output, new_tokens, steps, accept_lengths = forward(
            inputs, wrapper, tokenizer, MAX_NEW_TOKENS, output_id_topk=TOP_K, tree_version=TREE_VERSION
        )
        generated = output[0, len(prompt) :].tolist()
        assert tokenizer.eos_token_id not in generated
        requests.append(
            {
                "prompt": prompt,
                "prefill_fed": wrapper.fed[0],
                "steps": [
                    {"fed": fed, "accept_length": int(length)}
                    for fed, length in zip(wrapper.fed[1:], accept_lengths, strict=True)
                ],
                "committed": generated,
                "new_tokens": int(new_tokens),
            }
        )
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    return {
        "authors_code": {
            "repository": "github.com/Luowaterbi/TokenRecycling",
            "commit": commit.stdout.strip(),
            "files": [SOURCE, TEMPLATE_SOURCE],
            "function": "recycling_forward (device changed to the CPU, nothing else)",
        },
        "recorded_by": "scripts/record_token_recycling_drafts.py",
        "model": {"tiny_model": TINY, "dtype": "float64"},
        "top_k": TOP_K,
        "tree_version": TREE_VERSION,
        "max_new_tokens": MAX_NEW_TOKENS,
        "eos_token_id": tokenizer.eos_token_id,
        "note": "one adjacency matrix for both requests, in order (warm, as the authors run a benchmark); "
        "their loop stops once more than max_new_tokens tokens are committed",
        "requests": requests,
    }


def main() -> None:
    """Parse ``--repo`` and ``--out``, record, write the fixture atomically."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git mirror of Luowaterbi/TokenRecycling")
    parser.add_argument("--out", type=Path, default=FIXTURE, help=f"the fixture to write (default {FIXTURE})")
    args = parser.parse_args()
    fixture = record(args.repo)
    atomic_write_text(args.out, json.dumps(fixture, indent=1) + "\n")
    steps = [len(r["steps"]) for r in fixture["requests"]]
    print(f"wrote {args.out}: {len(fixture['requests'])} requests, {steps} decode steps")


if __name__ == "__main__":
    main()
