"""``python -m lade_bench.rest_datastore build|check ...``: the command line (``rest_datastore.cli``)."""

from lade_bench.rest_datastore.cli import main

raise SystemExit(main())
