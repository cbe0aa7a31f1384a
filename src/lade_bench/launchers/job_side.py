"""Inside a submitit job: record the user's command and keep each log line once.

A submitit job runs ``python -m submitit.core._submit FOLDER``, so ``sys.argv`` names submitit, not
the command the user typed; the launcher carries that command to the job, and
``runner.provenance.launch_command`` hands it to the manifest. submitit's logger writes through two
handlers of its own (stdout, and stderr from WARNING on; with ``stderr_to_stdout`` both into the same
file) and also passes every record on to the root logger, which Hydra gives a console handler: each
of its lines appeared two or three times. Without submitit's own handlers its records reach every log
through the root logger's handlers, once each.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lade_bench.runner.provenance import record_launch_command


def prepare_job(user_command: Sequence[str]) -> None:
    """Called first in each job: the manifest's command is ``user_command``; submitit logs each line once."""
    if user_command:
        record_launch_command(user_command)
    quiet_submitit_duplicates()


def quiet_submitit_duplicates() -> None:
    """Drop submitit's own log handlers, so its records reach the root logger's handlers only.

    Until Hydra configures logging (at the start of each job, and of the launch) the root logger has
    no handler and only warnings reach the terminal (Python's last resort); from then on every record
    appears once in the console and once in each log file.
    """
    logger = logging.getLogger("submitit")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.propagate = True
