"""Record the REST authors' own draft trees, step by step, on fixed inputs (the fidelity fixture).

Runs the authors' retriever, ``draftretriever`` 0.1.0, the binary wheel their repository ships and their
README installs (``DraftRetriever/wheels/draftretriever-0.1.0-cp39-cp39-manylinux_2_34_x86_64.whl`` of
github.com/FasterDecoding/REST, the same file in Spec-Bench's ``model/rest/DraftRetriever/wheels`` at
fd2c1cd): the Rust ``Reader.search`` of He, Zhong, Lee, Zhang, Liang, "REST: Retrieval-Based Speculative
Decoding", NAACL 2024, arXiv 2311.08252 (source: ``DraftRetriever/src/lib.rs``). The wheel is read from
a git mirror of their repository, unpacked into a throwaway folder under the temporary directory and
imported by a Python 3.9 interpreter (the wheel's ABI; never the project's venv). PyPI's
``draftretriever`` (0.1.0 and 0.1.1, cp311) is not theirs: it is ADED's retriever
(github.com/liuxukun2000/ADED, a tri-gram matrix with Monte Carlo tree search; its ``Writer`` takes
other arguments), so it is not used here.

On fixed token ids (Python standard-library modules tokenized by the embedded SmolLM2 tokenizer) the
authors' ``Writer`` builds a datastore and a greedy generation that emits a held-out module's text is
replayed: at each step the context is the text so far, the suffix spans are tried longest first as
their ``generate_candidates_and_draft_buffer`` (``rest/model/utils.py``) tries them (``max_token_span``
16 down to 2, ``Reader.search(span, choices=num_draft)``, the first non-empty answer wins), the tree is
the prefixes of the paths it returns (when no span retrieves anything, their fixed guess: the tree
``[cur, 100]`` of ``random_index = 100`` in the same function, which is Python and so is transcribed
here, as of their commit 50a5fc1; the step records ``"guess": true``), and the step accepts the longest
tree path the text continues with (a greedy target emitting that text accepts exactly that), then
advances by it and the bonus token.

Ties: ``Reader.search`` ranks nodes through a ``BinaryHeap`` filled in the order of a Rust ``HashMap``
and ``cut_to_choices`` sorts a ``HashSet``; both are seeded at random per map, so a query with tied
counts or scores at the cut can answer differently from call to call. Each query is therefore searched
``--runs`` times (each call gets a new seed), and every distinct tree seen is recorded (as its leaves'
token paths, with its node count, accepted length and how often it was seen).
``tests/decoding/test_rest_fidelity.py`` builds our datastore from the same ids and replays the same
steps: where every run of theirs agreed, our tree and accepted length must be theirs exactly; where
their runs disagree (they have no single answer), ours is one deterministic pick and the test compares
the totals (nodes drafted, tokens accepted) with their runs' average.

Usage: ``python scripts/record_rest_drafts.py --repo /path/to/FasterDecoding+REST/repo --python python3.9
[--runs 24] [--out tests/fixtures/rest_authors_drafts.json]`` (a bare git mirror; the fixture names
its commit and the wheel's sha256).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lade_bench.models.loading import EMBEDDED_MODELS
from lade_bench.results.atomic import atomic_write_text

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "rest_authors_drafts.json"
WHEEL = "DraftRetriever/wheels/draftretriever-0.1.0-cp39-cp39-manylinux_2_34_x86_64.whl"
# Fixed inputs: the datastore's documents and the held-out text whose generation is replayed.
DATASTORE_MODULES = ("genericpath.py", "posixpath.py", "fnmatch.py", "glob.py", "shlex.py", "textwrap.py")
QUERY_MODULE = "ntpath.py"
QUERY_START = 16  # the first context: the query's first 16 tokens (a full max_token_span)
STEPS = 160  # replayed steps
# The settings both sides run: the authors' defaults (Spec-Bench's inference_rest.py, Reader.search).
NUM_DRAFT = 64
MAX_TOKEN_SPAN = 16
MAX_MATCHES = 5000
DRAFT_LENGTH = 10
# rest/model/utils.py generate_candidates_and_draft_buffer (50a5fc1; Spec-Bench fd2c1cd the same): when
# no span retrieves anything, `random_index = 100` is drafted after cur. Transcribed into DRIVER below.
NO_MATCH_GUESS = 100
# The authors' side, run by the Python 3.9 interpreter with their wheel on its path: reads the documents,
# the query and the settings as JSON on stdin, builds their datastore with their Writer, replays the
# query's generation with their Reader and prints the steps as JSON.
DRIVER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import draftretriever

job = json.load(sys.stdin)
s = job["settings"]
writer = draftretriever.Writer(index_file_path=job["index"], max_chunk_len=512 * 1024 * 1024, vocab_size=job["vocab"])
for document in job["documents"]:
    writer.add_entry(document)
writer.finalize()
del writer
reader = draftretriever.Reader(index_file_path=job["index"])


def tree_of(context):
    # generate_candidates_and_draft_buffer: spans max_token_span .. 2, the first that retrieves anything;
    # the tree is every prefix of the returned paths (padded with -2), here as its nodes' token paths;
    # with whether it is the no-match guess.
    for span in range(s["max_token_span"], 1, -1):
        paths = reader.search(context[-span:], k=s["max_matches"], choices=s["num_draft"], long=s["draft_length"])[0]
        if paths:
            nodes = set()
            for path in paths:
                kept = [t for t in path if t != -2]
                nodes.update(tuple(kept[: d + 1]) for d in range(len(kept)))
            return tuple(sorted(nodes)), False
    # Their miss (utils.py, transcribed): "Just randomlt guess one token", random_index = 100, the
    # buffers of a 2-token step [cur, guess] (mask [[1,0],[1,1]], retrieve_indices [[0,1]]).
    return ((s["no_match_guess"],),), True


def leaves(tree):
    # A trie is its leaves (every node is a prefix of one): what the fixture records.
    inner = {p[:-1] for p in tree}
    return [list(p) for p in tree if p not in inner]


def accepted(tree, text, position):
    # The longest tree path the text continues with: what a greedy target emitting the text accepts.
    return max((len(p) for p in tree if list(text[position : position + len(p)]) == list(p)), default=0)


text = job["query"]
steps, position = [], job["start"]
while position < len(text) and len(steps) < job["steps"]:
    seen = {}
    for _ in range(job["runs"]):  # each search builds new HashMaps: a new random seed
        tree = tree_of(text[:position])
        seen[tree] = seen.get(tree, 0) + 1
    trees = [
        {"leaves": leaves(t), "nodes": len(t), "accepted": accepted(t, text, position), "seen": n, "guess": g}
        for (t, g), n in seen.items()
    ]
    steps.append({"position": position, "trees": trees})
    position += trees[0]["accepted"] + 1  # the first run's tree, then the bonus token
json.dump(steps, sys.stdout)
"""


def tokenize_modules(names: Sequence[str]) -> tuple[list[list[int]], list[dict[str, Any]]]:
    """The SmolLM2 token ids of each stdlib module (no special tokens) and a record of each file."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(EMBEDDED_MODELS["smollm2"].folder(None) / "tokenizer.json"))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    documents, files = [], []
    for name in names:
        data = (stdlib / name).read_bytes()
        documents.append(tokenizer.encode(data.decode("utf-8"), add_special_tokens=False).ids)
        files.append({"module": name, "sha256": hashlib.sha256(data).hexdigest(), "tokens": len(documents[-1])})
    return documents, files


def encode_ids(ids: Sequence[int]) -> str:
    """Token ids as base64 of little-endian uint16 (the authors' Writer stores u16 too)."""
    array = np.asarray(ids, dtype=np.int64)
    assert array.max() < 2**16, "SmolLM2's ids fit in 16 bits"
    return base64.b64encode(array.astype("<u2").tobytes()).decode("ascii")


def git_show_bytes(repo: Path, path: str) -> bytes:
    """The bytes of ``path`` at the mirror's HEAD."""
    return subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], capture_output=True, check=True).stdout


def unpack_authors_wheel(repo: Path, target: Path) -> str:
    """Their wheel from the mirror, unpacked into ``target``; its sha256."""
    data = git_show_bytes(repo, WHEEL)
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        wheel.extractall(target)
    return hashlib.sha256(data).hexdigest()


def record(repo: Path, python: str, runs: int, work: Path) -> dict[str, Any]:
    """Build the authors' datastore and replay the query's generation with their retriever; the fixture."""
    wheel_sha256 = unpack_authors_wheel(repo, work / "package")
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    documents, files = tokenize_modules(DATASTORE_MODULES)
    (query,), (query_file,) = tokenize_modules((QUERY_MODULE,))
    settings = {
        "num_draft": NUM_DRAFT,
        "max_token_span": MAX_TOKEN_SPAN,
        "max_matches": MAX_MATCHES,
        "draft_length": DRAFT_LENGTH,
        "no_match_guess": NO_MATCH_GUESS,
    }
    job = {
        "index": str(work / "datastore.idx"),
        "vocab": 49_152,  # SmolLM2's vocabulary: the suffix sort's alphabet
        "documents": documents,
        "query": query,
        "start": QUERY_START,
        "steps": STEPS,
        "runs": runs,
        "settings": settings,
    }
    done = subprocess.run(
        [python, "-c", DRIVER, str(work / "package")], input=json.dumps(job), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the authors' retriever failed under {python}: {done.stderr.strip()}")
    version = subprocess.run([python, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return {
        "authors": {
            "repository": "github.com/FasterDecoding/REST",
            "commit": commit,
            "wheel": WHEEL,
            "wheel_sha256": wheel_sha256,
            "run_with": version,
            "source": "DraftRetriever/src/lib.rs (Reader.search, cut_to_choices); the span loop and the "
            "no-match guess (random_index = 100, transcribed: it is Python): rest/model/utils.py "
            "generate_candidates_and_draft_buffer; Spec-Bench fd2c1cd ships the same wheel and utils.py",
            "paper": "He, Zhong, Lee, Zhang, Liang, REST: Retrieval-Based Speculative Decoding, NAACL 2024, "
            "arXiv 2311.08252",
        },
        "recorded_by": "scripts/record_rest_drafts.py",
        "tokenizer": "embedded:smollm2",
        "stdlib_python": sys.version.split()[0],
        "settings": settings,
        "runs_per_step": runs,
        "datastore": {"files": files, "documents": [encode_ids(d) for d in documents]},
        "query": {"file": query_file, "ids": encode_ids(query), "start": QUERY_START},
        "steps": json.loads(done.stdout),
    }


def main() -> None:
    """Record the fixture (atomically) and print a one-line summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git mirror of FasterDecoding/REST")
    parser.add_argument("--python", default="python3.9", help="a Python 3.9 interpreter (the wheel is cp39)")
    parser.add_argument("--runs", type=int, default=24, help="searches per step (each a new HashMap seed)")
    parser.add_argument("--out", type=Path, default=FIXTURE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rest-authors-") as work:
        fixture = record(args.repo, args.python, args.runs, Path(work))
    atomic_write_text(args.out, json.dumps(fixture, separators=(",", ":")) + "\n")
    steps = fixture["steps"]
    tied = sum(len(s["trees"]) > 1 for s in steps)
    guessed = sum(bool(s["trees"][0]["guess"]) for s in steps)
    print(
        f"{args.out}: {len(steps)} steps, {len(steps) - guessed} with a retrieved draft, {guessed} with the "
        f"no-match guess, {tied} answered differently across runs"
    )


if __name__ == "__main__":
    main()
