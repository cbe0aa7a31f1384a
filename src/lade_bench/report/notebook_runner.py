"""Execute a jupytext notebook (``notebooks/*.py``, py:percent) with parameters, as papermill would.

The ``.py`` file is the source of truth. Its cell tagged ``parameters`` holds the defaults; the values
passed here go into a new cell right after it (tagged ``injected-parameters``), so the notebook runs
unchanged with another sweep. Execution uses nbclient with the ``python3`` kernel of ipykernel, i.e.
the interpreter this package is installed in.

    python -m lade_bench.report.notebook_runner notebooks/main_table.py sweep_dir=runs/x out_dir=paper_figures/tables
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jupytext
import nbformat
from nbclient import NotebookClient

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"


def inject_parameters(notebook: nbformat.NotebookNode, parameters: Mapping[str, Any]) -> nbformat.NotebookNode:
    """Insert a cell assigning ``parameters`` (as Python literals) after the ``parameters`` cell.

    Raises:
        ValueError: the notebook has no cell tagged ``parameters``, or a name is not one of its
            assignments (a typo would otherwise be silently ignored).
    """
    index = next(
        (i for i, c in enumerate(notebook.cells) if PARAMETERS_TAG in c.get("metadata", {}).get("tags", [])), None
    )
    if index is None:
        raise ValueError("the notebook has no cell tagged 'parameters'")
    declared = notebook.cells[index].source
    unknown = [name for name in parameters if not re.search(rf"^{re.escape(name)}\s*=", declared, re.MULTILINE)]
    if unknown:
        raise ValueError(f"parameter(s) {unknown} are not assigned in the notebook's parameters cell")
    source = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [INJECTED_TAG]})
    notebook.cells.insert(index + 1, cell)
    return notebook


def execute_notebook(
    source: str | os.PathLike[str],
    parameters: Mapping[str, Any] | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    timeout_s: int = 600,
    kernel_name: str = "python3",
) -> nbformat.NotebookNode:
    """Read a jupytext (or .ipynb) notebook, inject ``parameters``, execute it and return it with outputs.

    Args:
        source: the notebook file (``.py`` py:percent, or ``.ipynb``).
        parameters: values overriding the ``parameters`` cell.
        cwd: working directory of the kernel (relative paths in parameters resolve against it);
            default: the notebook's folder.
        timeout_s: limit per cell.
        kernel_name: Jupyter kernel to run.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell raised (the message includes the traceback).
    """
    path = Path(source)
    notebook = jupytext.read(path)
    if parameters:
        inject_parameters(notebook, parameters)
    workdir = Path(cwd) if cwd is not None else path.parent
    client = NotebookClient(
        notebook, timeout=timeout_s, kernel_name=kernel_name, resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()
    return notebook


def main(argv: Sequence[str] | None = None) -> int:
    """``notebook_runner NOTEBOOK name=value ...``; returns the exit status.

    Values are strings; those of parameters named ``*_dir`` are paths relative to the current
    directory and are made absolute, because the kernel runs in the notebook's folder (as Jupyter's
    does, which the notebooks' defaults assume).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(__doc__)
        return 2
    parameters: dict[str, Any] = {}
    for arg in args[1:]:
        name, _, value = arg.partition("=")
        parameters[name] = str(Path(value).resolve()) if name.endswith("_dir") else value
    execute_notebook(args[0], parameters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
