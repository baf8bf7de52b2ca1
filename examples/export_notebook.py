"""Write the notebook of an example script: `python examples/export_notebook.py examples/python_api.py`
writes `examples/python_api.ipynb`.

The script is the source and the notebook its export, so the two never say different things (a
test compares them). The script's cells are marked as editors and jupytext mark them: a line
`# %%` starts a code cell, `# %% [markdown]` a markdown cell whose lines are comments. The notebook
holds no outputs: running it makes them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

CODE_MARK = "# %%"
MARKDOWN_MARK = "# %% [markdown]"


def script_cells(text: str) -> list[tuple[str, str]]:
    """The script's cells in order, each (`code` or `markdown`, its source without the marks)."""
    cells: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.strip() == MARKDOWN_MARK:
            cells.append(("markdown", []))
        elif line.strip() == CODE_MARK:
            cells.append(("code", []))
        elif cells:
            kind, lines = cells[-1]
            lines.append(_uncommented(line) if kind == "markdown" else line)
    return [(kind, "\n".join(lines).strip("\n")) for kind, lines in cells]


def _uncommented(line: str) -> str:
    """A markdown line of the script without its comment mark (`# ## Title` is `## Title`)."""
    return line[2:] if line.startswith("# ") else line.removeprefix("#")


def notebook(text: str) -> dict[str, Any]:
    """The notebook (nbformat 4) of a script's cells."""

    def cell(kind: str, source: str) -> dict[str, Any]:
        lines = source.splitlines(keepends=True)
        if kind == "markdown":
            return {"cell_type": "markdown", "metadata": {}, "source": lines}
        return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": lines}

    return {
        "cells": [cell(kind, source) for kind, source in script_cells(text)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 4,
    }


def notebook_text(script: Path) -> str:
    return json.dumps(notebook(script.read_text()), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].endswith(".py"):
        print("usage: python examples/export_notebook.py SCRIPT.py", file=sys.stderr)
        return 2
    script = Path(argv[0])
    out = script.with_suffix(".ipynb")
    temporary = out.with_name(f".{out.name}.tmp")
    temporary.write_text(notebook_text(script))
    temporary.replace(out)  # whole, never half a notebook
    print(f"notebook written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
