"""REST's datastore: a suffix array over the token ids of a local corpus, built once by a command.

REST (He et al., NAACL 2024) drafts continuations of the context's longest suffix found in a datastore; a
datastore is a folder of three files (the token ids, their suffix array, a manifest with the content hash
that names it in a cell's id), built atomically: written beside, then renamed into place.

The package is two sides, the second importing the first and never the other way:

* what the engine reads: ``reader`` (the format, :class:`~lade_bench.rest_datastore.reader.Datastore`,
  ``read_manifest``, ``check_tokenizer``, ``load_datastore`` with every file checked, ``content_hash``).
  It imports no other ``lade_bench`` module at module level, and ``decoding/`` imports nothing else
  outside itself (``tests/test_layout.py``);
* what builds and checks datastores: ``build`` (tokenize a corpus, sort its suffix array, write the
  folder), ``reference`` (the reference datastore: the word ``reference`` resolved, built once),
  ``leak`` (the token leak check: a datastore holding a benchmark's text is refused), ``refusal`` (the
  plan's question before any model loads: files, tokenizer, leak) and ``cli`` (the command line).

Commands: ``python -m lade_bench.rest_datastore build --model smollm2 --corpus FILE... [--name NAME]``, or
``build --reference --model smollm2`` for the reference datastore (``reader.REFERENCE``, what
``rest.datastore`` names by default; ``scripts/setup.sh`` builds it for the embedded models);
``... check --datastore PATH --datasets NAME[=FILE]... [--outputs PATH...]`` reports the leak check as JSON
(docs/rest.md). No torch import at the top: the plan reads manifests and checks leaks before loading.
This file imports nothing, so importing the reader loads nothing of the other side.
"""
