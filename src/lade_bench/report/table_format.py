"""Render a table of display strings as Markdown, LaTeX (booktabs) or HTML.

Own renderers rather than ``DataFrame.to_latex``/``to_markdown``: their output changes between pandas
versions (and ``to_markdown`` needs ``tabulate``), while committed tables must only change when a
number does.
"""

from __future__ import annotations

import html

import pandas as pd

# How a value that does not exist is shown; it does not make a numeric column textual.
MISSING = "n/a"

_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    # Non-ASCII symbols the tables use; plain pdflatex has no glyph for them in text mode.
    "Δ": r"$\Delta$",
    "×": r"$\times$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in text)


def _cells(table: pd.DataFrame) -> list[list[str]]:
    return [["" if v is None or v is pd.NA else str(v) for v in rec] for rec in table.itertuples(index=False)]


def _numeric_columns(table: pd.DataFrame) -> list[bool]:
    """A column is right-aligned when every non-empty, non-missing cell starts like a number."""
    out = []
    for column in table.columns:
        values = [str(v) for v in table[column] if v is not None and v is not pd.NA and str(v) not in ("", MISSING)]
        out.append(bool(values) and all(v.lstrip("+-−")[:1].isdigit() for v in values))
    return out


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown pipe table (numbers right-aligned), ending in a newline."""

    def cell(text: str) -> str:
        return text.replace("|", r"\|").replace("\n", " ")

    header = "| " + " | ".join(cell(str(c)) for c in table.columns) + " |"
    rule = "|" + "|".join("---:" if num else ":---" for num in _numeric_columns(table)) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in _cells(table)]
    return "\n".join([header, rule, *body]) + "\n"


def to_latex(table: pd.DataFrame, *, caption: str, label: str, comment: str = "") -> str:
    """A booktabs ``table`` environment with ``caption`` and ``label``, ending in a newline.

    Args:
        table: display strings; column names become the header row.
        caption: plain text (escaped).
        label: LaTeX label, e.g. ``tab:main_speedup``.
        comment: a ``%`` comment line put first (provenance), plain text.
    """
    spec = "".join("r" if num else "l" for num in _numeric_columns(table))
    lines: list[str] = []
    if comment:
        lines.extend(f"% {line}" for line in comment.splitlines())
    lines += [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(caption)}}}",
        rf"\label{{{label}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(latex_escape(str(c)) for c in table.columns) + r" \\",
        r"\midrule",
        *(" & ".join(latex_escape(v) for v in row) + r" \\" for row in _cells(table)),
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def to_html(table: pd.DataFrame, *, caption: str = "") -> str:
    """An escaped HTML ``<table>`` with an optional caption."""
    numeric = _numeric_columns(table)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    body = []
    for row in _cells(table):
        tds = "".join(
            f'<td class="num">{html.escape(v)}</td>' if num else f"<td>{html.escape(v)}</td>"
            for v, num in zip(row, numeric, strict=True)
        )
        body.append(f"<tr>{tds}</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
