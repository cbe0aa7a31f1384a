"""A sweep's leaderboard as another device would see it, from the step-cost model (``python -m lade_bench.predict``).

Every method here is exact, so the widths and acceptances a row records are the device's to cost:
``stats.step_cost`` prices each decode step on a device profile measured by the suite anywhere (a
sweep's ``device_profiles/*.json``, the GPU check's ``device_profile_<model>.json``, a tune folder's), and
this package turns the priced rows into the leaderboard, beside what the rows' own device measured.

Modules, one job each:

* ``profiles``: reading ``--profile`` files (refusing what is not one) and matching one to each model
  of the sweep (refusing another model's or dtype's curve).
* ``leaderboard``: the predicted rows (refusing a step outside the profile's measured range, naming
  the cell) and the per (cell, arm) records, predicted and measured.
* ``output``: the Markdown and CSV files, each table headed with the profile it was predicted from.
"""

from lade_bench.predict.leaderboard import PredictedTable, predicted_leaderboard, predicted_rows
from lade_bench.predict.output import write_leaderboard
from lade_bench.predict.profiles import PredictError, ProfileFile, match_profiles, read_profile_file

__all__ = [
    "PredictError",
    "PredictedTable",
    "ProfileFile",
    "match_profiles",
    "predicted_leaderboard",
    "predicted_rows",
    "read_profile_file",
    "write_leaderboard",
]
