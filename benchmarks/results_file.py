"""The one writer of ``benchmarks/results/*.json``: every file records what, when, from which commit, with which
command line, on which machine and in how long.

The docs pages and the README's tables are rendered from these files (``benchmarks/render_docs.py``), and every
figure they print names its file's machine, date and commit; a file without them could not be cited. The scripts
run as ``python benchmarks/NAME.py``, which puts this folder on ``sys.path``: ``from results_file import ...``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from timing import describe_machine, provenance

from robot_rl.io import write_json

RESULTS_DIR = Path(__file__).parent / "results"
# What every results file holds besides its measurements (files made before this writer got them from git
# history: ``benchmarks/backfill_provenance.py``).
PROVENANCE_KEYS = ("benchmark", "date", "commit", "argv", "machine", "wall_s")
_STARTED = time.perf_counter()  # imported at a script's start: its wall time runs from here


def write_results(name: str, payload: dict, out: str | os.PathLike | None = None,
                  wall_s: float | dict | None = None) -> Path:
    """Writes ``payload`` as ``benchmarks/results/NAME.json`` (or ``out``) after the provenance fields.

    ``wall_s`` defaults to the seconds since this module was imported; a dict (seconds per part) is kept as given.
    Keys of ``payload`` win over the provenance fields, so a script can record, e.g., the commit it measured
    rather than the one it ran from."""
    target = Path(out) if out is not None else RESULTS_DIR / f"{name}.json"
    record = {"benchmark": name, **provenance(), "machine": describe_machine(),
              "wall_s": round(time.perf_counter() - _STARTED, 1) if wall_s is None else wall_s}
    record.update(payload)
    write_json(target, record)
    return target
