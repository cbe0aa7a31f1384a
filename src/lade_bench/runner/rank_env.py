"""What a job knows of torchrun before torch loads: how many processes it launched, and the error for
ranks that cannot be joined as the config asks.

Apart from ``runner.ranks`` (which joins the ranks with torch.distributed) so that ``runner.job`` can
refuse a bad command without importing torch.
"""

from __future__ import annotations

import os

# torchrun's environment (the launcher protocol, not a switch of ours).
WORLD_SIZE_VAR, LOCAL_RANK_VAR = "WORLD_SIZE", "LOCAL_RANK"


class RanksError(RuntimeError):
    """The ranks of a multi-device cell cannot be joined as the config asks."""


def launched_world_size() -> int:
    """Processes torchrun started for this job (1 when not launched by torchrun)."""
    return int(os.environ.get(WORLD_SIZE_VAR, "1"))
