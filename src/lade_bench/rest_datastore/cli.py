"""The command line: ``python -m lade_bench.rest_datastore build ...`` and ``... check ...`` (docs/rest.md)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from lade_bench import rest_datastore
from lade_bench.rest_datastore.build import DEFAULT_TEXT_FIELD, build_from_files, datastore_folder
from lade_bench.rest_datastore.reader import REFERENCE, DatastoreError, conf_model, read_manifest
from lade_bench.rest_datastore.reference import REFERENCE_LEFT_OUT, ensure_reference_datastore


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``build`` a datastore for a model's tokenizer from local JSONL or text files; ``check`` it."""
    description = (rest_datastore.__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog="python -m lade_bench.rest_datastore", description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="tokenize files and write a datastore beside the model cache")
    build.add_argument(
        "--model", default="smollm2", help="a conf/model entry whose tokenizer is used (default smollm2)"
    )
    source = build.add_mutually_exclusive_group(required=True)
    source.add_argument("--corpus", nargs="+", help="JSONL (one document per record) or plain-text files")
    source.add_argument(
        "--reference",
        action="store_true",
        help=f"the reference datastore ({REFERENCE!r}: the standard library's modules but "
        f"{', '.join(REFERENCE_LEFT_OUT)}), kept when already built from the same files",
    )
    build.add_argument(
        "--text-field",
        action="append",
        default=None,
        help=f"JSONL field(s) holding text (default {DEFAULT_TEXT_FIELD!r})",
    )
    build.add_argument("--name", default="default", help="the datastore's folder name (default 'default')")
    build.add_argument(
        "--cache-dir", default="~/.cache/lade_bench", help="the model cache (the runner's model_cache_dir)"
    )
    build.add_argument("--out", default=None, help="the datastore folder (default: <cache-dir>/rest_datastores/...)")
    check = commands.add_parser(
        "check",
        help="check a datastore's files and its leak check against datasets and outputs (JSON; exit 1: refused)",
    )
    check.add_argument("--datastore", required=True, help="the datastore folder")
    check.add_argument("--datasets", nargs="*", default=[], help="registered datasets, NAME or NAME=FILE")
    check.add_argument(
        "--outputs",
        nargs="*",
        default=[],
        help="the model's own outputs: results folders (a finished cell's rows) or JSONL files (output_text or text)",
    )
    check.add_argument(
        "--cache-dir", default="~/.cache/lade_bench", help="the model cache, where the datastore's tokenizer is read"
    )
    check.add_argument("--output", default=None, help="write the JSON report there (default: print it)")
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(parser, args)
    if args.reference:
        if args.out is not None or args.name != "default" or args.text_field:
            parser.error(
                "--reference builds the datastore named 'reference' in --cache-dir: drop --out, --name, --text-field"
            )
        folder, built = ensure_reference_datastore(args.model, args.cache_dir)
        manifest = read_manifest(folder)
        done = "built" if built else "already built from the same files, kept"
        print(
            f"reference datastore for {manifest['tokenizer']}: {manifest['tokens']} tokens, {done}: {folder}",
            flush=True,
        )
        return 0
    model = conf_model(args.model)
    from lade_bench.models.loading import tokenizer_source

    out = args.out or datastore_folder(args.cache_dir, tokenizer_source(model), args.name)
    fields = tuple(args.text_field or (DEFAULT_TEXT_FIELD,))
    folder = build_from_files(model, args.corpus, out, text_fields=fields, cache_dir=args.cache_dir)
    manifest = read_manifest(folder)
    print(f"{manifest['tokens']} tokens from {len(args.corpus)} file(s) -> {folder}", flush=True)
    print(f"use it with: rest.datastore={folder}", flush=True)
    return 0


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The ``check`` command: the report as JSON (stdout or ``--output``); exit 1 when the datastore is
    damaged (one line on stderr) or any text leaks (the refusal on stderr too)."""
    import sys

    from lade_bench.rest_datastore.leak import leak_report

    if not args.datasets and not args.outputs:
        parser.error("check: give --datasets, --outputs or both")
    try:
        report = leak_report(args.datastore, args.datasets, args.outputs, args.cache_dir)
    except DatastoreError as err:
        print(f"refused: {err}", file=sys.stderr)
        return 1
    text = json.dumps(report, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    else:
        print(text, end="")
    if report["refused"]:
        print(f"refused: {report['refused']}", file=sys.stderr)
        return 1
    return 0
