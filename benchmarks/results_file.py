"""The one writer (and reader) of ``benchmarks/results/*.json``, in one schema.

Every results file holds ``SCHEMA_KEYS``: what (``benchmark``), when (``date``), from which ``commit``, with which
command line (``argv``), on which ``machine``, in how long (``wall_s``: the run's seconds, a number or null when
not recorded; ``parts``: seconds per part where a benchmark runs in parts, else null), its ``targets`` (fixed
before the run, with whether they were met; null where it has none) and its ``metrics`` (the measurements, in the
benchmark's own shape). A few provenance notes may stand beside them (``uncommitted_changes``, ``variant``,
``provenance_source``, ``provenance_note``, ``wall_s_scope``).

The docs pages and the README's tables are rendered from these files (``docs/render_docs.py``), and every
figure they print names its file's machine, date and commit; a file without them could not be cited.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from timing import describe_machine, provenance

from robot_rl.io import write_json

RESULTS_DIR = Path(__file__).parent / "results"
SCHEMA_KEYS = ("benchmark", "date", "commit", "argv", "machine", "wall_s", "parts", "targets", "metrics")
# The schema keys a script may set from its payload instead of the writer's defaults (e.g. the commit it
# measured rather than the one it ran from), and the notes that may stand beside the schema.
OVERRIDABLE = ("benchmark", "date", "commit", "argv", "machine", "uncommitted_changes")
_STARTED = time.perf_counter()  # imported at a script's start: its wall time runs from here
# The code a run measures is the code it started from: a commit made while it runs must not be stamped on it.
STARTED_FROM = {key: value for key, value in provenance().items() if key in ("commit", "uncommitted_changes")}


def total_seconds(parts: dict) -> float:
    """The sum of the numeric values of ``parts`` (seconds per part)."""
    return round(sum(v for v in parts.values() if isinstance(v, int | float)), 1)


def write_results(name: str, payload: dict, out: str | os.PathLike | None = None,
                  wall_s: float | dict | None = None, parts: dict | None = None, targets: dict | None = None,
                  notes: dict | None = None) -> Path:
    """Writes ``benchmarks/results/NAME.json`` (or ``out``) in the schema; returns its path.

    ``payload`` is the measurements (``metrics``); its ``targets`` and ``wall_s`` entries, when present, go to
    those schema keys, and so do its provenance fields (``OVERRIDABLE``: they win over the writer's own).
    ``wall_s`` defaults to the seconds since this module was imported; a dict is seconds per part (``parts``), the
    run's seconds then being their sum unless ``wall_s`` is given apart. ``notes`` are extra top-level keys."""
    metrics = dict(payload)
    own = {key: metrics.pop(key) for key in OVERRIDABLE if key in metrics}
    targets = metrics.pop("targets", targets)
    wall_s = metrics.pop("wall_s", wall_s)
    if isinstance(wall_s, dict):
        parts, wall_s = wall_s, total_seconds(wall_s)
    if wall_s is None:
        wall_s = round(time.perf_counter() - _STARTED, 1)
    record = {"benchmark": name, **provenance(), **STARTED_FROM, "machine": describe_machine(), "wall_s": wall_s,
              "parts": parts, "targets": targets}
    record.update(own)
    record.update(notes or {})
    record["metrics"] = metrics
    target = Path(out) if out is not None else RESULTS_DIR / f"{name}.json"
    write_json(target, {**{key: record[key] for key in SCHEMA_KEYS}, **record})
    return target


def flatten(data: dict) -> dict:
    """A results file as one mapping: the schema and note keys with the measurements beside them (a file in an
    older shape, without ``metrics``, is returned as it is)."""
    return {**{k: v for k, v in data.items() if k != "metrics"}, **(data.get("metrics") or {})}


def read_results(path: str | os.PathLike) -> dict:
    """The results file at ``path``, flattened (``flatten``)."""
    return flatten(json.loads(Path(path).read_text()))
