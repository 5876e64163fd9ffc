"""How long the README's test command takes on a fresh clone: `make test`, timed as CI runs it.

Clones this checkout's HEAD into a scratch folder (committed files only, as CI sees them), then runs the set-up
(`make .venv/.installed`: the virtual environment and the project installed into it) and `make test` there, one
after the other, each timed on the wall clock and by the CPU seconds of its processes. Run it alone on the
machine: anything beside it slows both. The README's line on the test suite is rendered from this file.

    python benchmarks/test_suite.py     # about 15 minutes on 2 CPU cores; writes benchmarks/results/test_suite.json
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import Benchmark, Variant

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 15 * 60  # the README's claim for `make test` on 2 CPU cores, fixed before the run
SLOWEST = 15  # the slowest tests listed in the results file

BENCHMARK = Benchmark("test_suite", __doc__, variants=(
    Variant("fresh-clone", (), "set-up and make test on a fresh clone of HEAD"),
), common={"out": None}, targets={"make_test_s": f"<= {TARGET_S} (make test on a fresh clone, 2 CPU cores)"})


def timed(argv: list[str], cwd: Path, log: Path, env: dict) -> dict:
    """Runs ``argv`` in ``cwd`` with its output in ``log``; its exit code, wall seconds and CPU seconds (user +
    system of every process it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"exit_code": code, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def outcome(text: str) -> dict:
    """pytest's closing counts ("446 passed, 2 skipped in ...") and its slowest tests (``--durations``)."""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", text)}
    slowest = [{"seconds": float(s), "what": what, "test": test}
               for s, what, test in re.findall(r"^(\d+\.\d+)s (call|setup|teardown)\s+(\S+)", text, re.M)]
    return {"counts": counts, "slowest": slowest[:SLOWEST]}


def run(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="robot_rl-test-suite-") as scratch:
        clone = Path(scratch) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True,
                                check=True).stdout.strip()
        env = {**os.environ, "PYTEST_ADDOPTS": f"--durations={SLOWEST}"}
        env.pop("VIRTUAL_ENV", None)
        setup = timed(["make", ".venv/.installed"], clone, Path(scratch) / "setup.log", env)
        tests = timed(["make", "test"], clone, Path(scratch) / "test.log", env)
        text = (Path(scratch) / "test.log").read_text()
        print(text[-3000:])
    met = tests["exit_code"] == 0 and tests["wall_s"] <= TARGET_S
    return {"commit": commit, "uncommitted_changes": False, "setup": setup, "make_test": tests, **outcome(text),
            "targets": {"make_test_s": {"target": f"<= {TARGET_S}", "value": tests["wall_s"], "met": met}},
            "wall_s": round(setup["wall_s"] + tests["wall_s"], 1)}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run))
