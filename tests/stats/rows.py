"""Rows with known values for the statistics tests, written and read back as the runner's are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench.results import COLUMN_NAMES, CellWriter, load_rows


def row(cell: str, sample: str, arm: str, *, turn: int = 0, repeat: int = 0, **values: Any) -> dict[str, Any]:
    """One row; ``values`` gives wall (s), tokens, steps, quality and identity overrides."""
    shape = values.pop("shape", (5, 7, 7))
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(
        cell_id=cell,
        sweep=values.pop("sweep", "unit"),
        model="m",
        dataset="d",
        sample_id=sample,
        turn=turn,
        arm=arm,
        repeat=repeat,
        ngram=shape[0],
        window=shape[1],
        guesses=shape[2],
        prompt_as_reference=values.pop("prompt_as_reference", True),
        compiled=values.pop("compiled", False),
        compile_mode=values.pop("compile_mode", None),
        do_sample=values.pop("do_sample", False),
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        seed=0,
    )
    error = values.pop("error", None)
    if error is not None:
        row["error"] = error
        return row
    wall, tokens, steps = values.pop("wall", 1.0), values.pop("tokens", 10), values.pop("steps", 10)
    row.update(
        prompt_tokens=3,
        new_tokens=tokens,
        decode_steps=steps,
        wall_time_s=wall,
        forward_time_s=wall,
        accept_lengths=[1] * steps,
        tokens_per_s=tokens / wall,
        compression_ratio=tokens / steps,
        output_ids=[0] * tokens,
        output_text="",
    )
    if arm != "ar" and not row["do_sample"]:
        row["matches_ar"] = True
    row.update(values)
    return row


def frame(tmp_path: Path, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows through CellWriter and load_rows, one folder per cell."""
    frames = []
    for cell in dict.fromkeys(r["cell_id"] for r in rows):
        writer = CellWriter(tmp_path / cell)
        for row in rows:
            if row["cell_id"] == cell:
                writer.append(row)
        writer.finalize()
        frames.append(load_rows(tmp_path / cell))
    return pd.concat(frames, ignore_index=True)
