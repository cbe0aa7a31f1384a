"""The committed draft-model comparison (paper_figures/assisted/) recomputes from its committed rows.

``scripts/assisted_reference.sh`` archives the sweep into ``paper_figures/assisted/rows/`` and builds
the tables and figures from that archive. Here the report is built again from the archive: every table
must come out byte for byte (``cells_summary.csv`` to 1e-9), with the same figures; every number of the
README's hand-written table must come out of the rows with the same bootstrap settings; every cell ran
at one clean commit on one CPU kind with nothing of the suite beside it; every speedup the READMEs
quote for it is one its tables hold.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lade_bench import stats
from lade_bench.report.build import FIGURES_DIR, TABLES_DIR, build_report
from lade_bench.report.conditions import cell_processor
from lade_bench.results.archive import cell_manifests

from .committed import (
    assert_each_run_timed_alone,
    assert_quotes_only_table_numbers,
    assert_tables_recompute,
    numbers_in_tables,
)

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "paper_figures" / "assisted"
ARCHIVE = FOLDER / "rows"
ARMS = {"ar", "lookahead", "prompt_lookup", "jacobi", "assisted"}
LABELS = {
    "lookahead": "lookahead N5 W7 G7",
    "prompt_lookup": "prompt lookup",
    "jacobi": "Jacobi (no pool)",
    "assisted": "assisted (SmolLM2 draft)",
}
SAMPLES = 20  # scripts/assisted_reference.sh: dataset.limit=20


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    """The report built again from the committed archive, into a temporary folder."""
    return build_report([ARCHIVE], tmp_path_factory.mktemp("assisted"), html=False)


def test_every_committed_table_recomputes_from_the_committed_rows(rebuilt):
    """Markdown and LaTeX byte for byte, the full-precision summary to 1e-9; the same figures."""
    assert_tables_recompute(rebuilt.out_dir / TABLES_DIR, FOLDER / TABLES_DIR, key="arm")
    new_figures = sorted(p.name for p in (rebuilt.out_dir / FIGURES_DIR).iterdir())
    assert new_figures == sorted(p.name for p in (FOLDER / FIGURES_DIR).iterdir())


def test_the_sweep_is_the_whole_plan_and_every_greedy_arm_gives_ar_tokens(rebuilt):
    """Five methods on the same 20 samples (both MT-Bench turns), none lost, each matching AR everywhere."""
    summary = rebuilt.sweep.summary
    assert set(summary["arm"]) == ARMS
    assert (summary["n_units"] == SAMPLES).all() and (summary["n_pairs"] == 2 * SAMPLES).all()
    assert (summary["n_errors"] == 0).all()
    assert (summary.loc[summary["arm"] != stats.BASELINE_ARM, "matches_ar"] == 1.0).all()


def test_every_cell_ran_at_one_clean_commit_on_one_cpu_kind_and_alone():
    """The recipe runs on both cores with two threads; no test, tuner or other sweep beside any run."""
    manifests = list(cell_manifests(ARCHIVE).values())
    assert manifests
    assert len({m["git_sha"] for m in manifests}) == 1
    assert not any(m["git_dirty"] for m in manifests)
    assert len({cell_processor(m) for m in manifests}) == 1
    for m in manifests:
        assert_each_run_timed_alone(m, cores=2)


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def test_every_number_of_the_readme_table_recomputes_from_the_committed_rows(rebuilt):
    """The hand-written table of paper_figures/assisted/README.md quotes the rows, not a memory of them."""
    rows = rebuilt.sweep.rows
    paired = stats.common_rows(rows)
    records = {rec["arm"]: rec for rec in stats.summarize(rows).to_dict("records")}
    table = {}
    for line in (FOLDER / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in LABELS.values():
            table[cells[0]] = [c.replace("*", "") for c in cells[1:]]
    assert set(table) == set(LABELS.values())
    for arm, label in LABELS.items():
        rec = records[arm]
        mean = stats.per_sample_mean(stats.per_sample_totals(paired, arm), sampled=False)
        n, speedup, per_sample, compression, draft = table[label]
        assert n == f"{rec['n_units']} / {rec['n_pairs']}"
        assert speedup == f"{rec['speedup']:.2f}x [{rec['speedup_ci_low']:.2f}, {rec['speedup_ci_high']:.2f}]"
        assert per_sample == f"{mean:.2f}x"
        assert compression == f"{rec['compression_ratio']:.2f}"
        share = rec["draft_time_share"]
        assert draft == ("" if math.isnan(share) else _percent(share))


def test_every_speedup_the_readmes_quote_for_it_is_in_its_tables():
    """The assisted README's prose and the "Beside a draft model" paragraph of docs/reference_results.md.

    The README's own table (whose per-sample means no committed table prints) is checked above.
    """
    known = numbers_in_tables(FOLDER / TABLES_DIR)
    lines = (FOLDER / "README.md").read_text().splitlines()
    readme = "\n".join(line for line in lines if not line.lstrip().startswith("|"))
    glance = (ROOT / "docs" / "reference_results.md").read_text()
    paragraph = glance.split("**Beside a draft model**", 1)[1].split("\n\n", 1)[0]
    for where, text in (("assisted README", readme), ("the docs' paragraph", paragraph)):
        assert_quotes_only_table_numbers(text, known, where)
