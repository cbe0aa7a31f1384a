"""Entry point of ``python -m lade_bench.report`` (see :mod:`lade_bench.report.cli`)."""

import sys

from lade_bench.report.cli import main

sys.exit(main())
