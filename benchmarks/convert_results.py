"""Converts results files written before the schema (``results_file.SCHEMA_KEYS``) to it, in place.

Nothing is re-measured and no measured value changes: the provenance stays as the file records it, the wall-time
keys of the older scripts become ``wall_s`` and ``parts`` (``wall_seconds`` -> ``wall_s``;
``wall_seconds_this_invocation`` -> ``wall_s`` with ``wall_s_scope: "this invocation"``; ``parts_wall_seconds`` or
a ``wall_s`` of seconds per part -> ``parts``, ``wall_s`` then their total; a part with its own provenance keeps its
seconds as ``wall_s``, and they become ``parts``), ``targets`` stays (null where the file has none), ``benchmark``
names the script that made the file, and every other key moves under ``metrics``. A file already in the schema is
left as it is, so the command can run again after new files land (``lead_inspect.py`` and ``bc_vs_scratch.py``
wrote their own shapes before the harness).

    python benchmarks/convert_results.py                 # every file under benchmarks/results/
    python benchmarks/convert_results.py --check         # exit 1 naming the files not in the schema
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from results_file import RESULTS_DIR, SCHEMA_KEYS

from robot_rl.io import write_json

# Provenance notes that stand beside the schema keys rather than among the measurements.
NOTES = ("uncommitted_changes", "variant", "provenance_source", "argv_source", "last_changed_commit",
         "last_changed_date", "wall_s_note", "wall_s_scope")
# Wall-time keys of a part that records its own provenance (a benchmark run in parts, each part a dict).
PART_WALL_KEYS = ("wall_seconds", "wall_seconds_last_invocation")
SCRIPT = re.compile(r"(?:^|/)(\w+)\.py$")


def in_schema(data: dict) -> bool:
    return all(key in data for key in SCHEMA_KEYS)


def script_of(argv: list[str] | None) -> str | None:
    """The benchmark script a command line ran (``benchmarks/NAME.py`` -> ``NAME``)."""
    for word in argv or []:
        match = SCRIPT.search(word)
        if match and (Path(__file__).parent / f"{match[1]}.py").is_file():
            return match[1]
    return None


def wall_time(data: dict, metrics: dict) -> tuple[float | None, dict | None, dict]:
    """``wall_s``, ``parts`` and the scope note of an older file (``metrics``' parts renamed in place)."""
    notes, parts = {}, data.get("parts_wall_seconds")
    wall = data.get("wall_s", data.get("wall_seconds"))
    if "wall_seconds_this_invocation" in data:
        wall, notes["wall_s_scope"] = data["wall_seconds_this_invocation"], "this invocation"
    if isinstance(wall, dict):
        # quick_demo's parts include their own total (make_demo) beside the stages
        total = round(sum(v for v in wall.values() if isinstance(v, int | float)), 1)
        parts, wall = wall, wall.get("make_demo", total)
    for name, part in metrics.items():
        if isinstance(part, dict) and "machine" in part and any(k in part for k in PART_WALL_KEYS):
            key = next(k for k in PART_WALL_KEYS if k in part)
            metrics[name] = {("wall_s" if k == key else k): v for k, v in part.items()}
            parts = {**(parts or {}), name: part[key]}
    stages = metrics.get("stages")  # lead_inspect.py's stages, each with its seconds summed over its parts
    if parts is None and isinstance(stages, dict) and all(isinstance(s, dict) and "seconds" in s
                                                          for s in stages.values()):
        parts = {name: stage["seconds"] for name, stage in stages.items()}
    return wall, parts, notes


def convert(data: dict, stem: str) -> dict:
    """``data`` (the file ``stem``.json) in the schema; unchanged when it already is."""
    if in_schema(data):
        return data
    missing = [key for key in ("date", "commit", "argv", "machine") if key not in data]
    if missing:
        raise SystemExit(f"{stem}.json has no {', '.join(missing)}: not a file a benchmark script wrote")
    own = {"benchmark", "date", "commit", "argv", "machine", "targets", *NOTES, "wall_s", "wall_seconds",
           "wall_seconds_this_invocation", "parts_wall_seconds"}
    metrics = {k: v for k, v in data.items() if k not in own}
    wall, parts, notes = wall_time(data, metrics)
    record = {"benchmark": script_of(data["argv"]) or data.get("benchmark") or stem,
              **{key: data[key] for key in ("date", "commit", "argv", "machine")},
              "wall_s": wall, "parts": parts, "targets": data.get("targets"), "metrics": metrics}
    record.update({key: data[key] for key in NOTES if key in data})
    record.update(notes)
    return {**{key: record[key] for key in SCHEMA_KEYS}, **record}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only name the files not in the schema; exit 1 if any")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of results files")
    args = parser.parse_args(argv)
    old = [path for path in sorted(args.results.glob("*.json")) if not in_schema(json.loads(path.read_text()))]
    if args.check:
        for path in old:
            print(f"{path.name} is not in the results schema; run python benchmarks/convert_results.py",
                  file=sys.stderr)
        return 1 if old else 0
    for path in old:
        write_json(path, convert(json.loads(path.read_text()), path.stem))
    print(f"converted {len(old)} files" + (f": {', '.join(p.name for p in old)}" if old else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
