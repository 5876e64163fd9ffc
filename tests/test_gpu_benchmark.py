"""benchmarks/gpu_benchmark.py: its profiler's accounting, worker counts and targets, and its smoke variant end to
end on the CPU (about 20 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_benchmark  # noqa: E402  (benchmarks/ is not a package: its scripts import each other by name)
import timing  # noqa: E402
from results_file import SCHEMA_KEYS  # noqa: E402


class FakeClock:
    """A perf_counter that moves only when told."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class Worker:
    def __init__(self, clock: FakeClock):
        self.clock = clock

    def step(self, seconds: float) -> None:
        self.clock.now += seconds

    def outer(self) -> None:  # 1 s of its own around a 2 s step
        self.clock.now += 1.0
        self.step(2.0)


def test_a_section_nested_in_another_counts_for_the_inner_one_only(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", clock.perf_counter)
    worker, timer = Worker(clock), timing.SectionTimer(torch.device("cpu"))
    timer.wrap(worker, "outer", "outer")
    timer.wrap(worker, "step", "step")
    with timer.section("all"):
        clock.now += 0.5
        worker.outer()
    assert dict(timer.seconds) == {"all": 0.5, "outer": 1.0, "step": 2.0}


def test_a_method_timed_within_a_section_is_not_timed_outside_it_and_unwrap_restores_it(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(timing.time, "perf_counter", clock.perf_counter)
    worker, timer = Worker(clock), timing.SectionTimer(torch.device("cpu"))
    timer.wrap(Worker, "step", "step", within="collection")  # on the class: every instance
    worker.step(3.0)
    with timer.section("collection"):
        worker.step(2.0)
    assert dict(timer.seconds) == {"collection": 0.0, "step": 2.0}
    timer.unwrap()
    assert "step" in vars(Worker) and vars(worker) == {"clock": clock}
    assert Worker.step.__qualname__ == "Worker.step"


def test_worker_counts_are_capped_to_the_cores_without_repeats():
    assert gpu_benchmark.worker_counts([1, 2, 4, 8, 16], cores=16) == [1, 2, 4, 8, 16]
    assert gpu_benchmark.worker_counts([16, 1, 2, 4, 8], cores=6) == [1, 2, 4, 6]
    assert gpu_benchmark.worker_counts([1, 2], cores=1) == [1]


def test_targets_are_met_missed_or_not_measured():
    largest = {"workers": 16, "end_to_end_frames_per_s": 9000.0, "end_to_end_of_env_bound": 0.35}
    quick = {"preset": "quick", "status": "finished", "wall_s": 55.0, "stages_s": {}}
    full = {"preset": "full", "status": "timed out after 1800 s", "wall_s": 1800.0, "stages_s": {}}
    verdicts = gpu_benchmark.target_verdicts(84, largest, {"quick": quick, "full": full})
    assert {name: v["met"] for name, v in verdicts.items()} == {
        "end_to_end_frames_per_s_at_84": True, "end_to_end_of_env_bound_at_16_workers": False,
        "make_demo_s": True, "full_pipeline_s": False}
    assert set(verdicts) == set(gpu_benchmark.TARGETS)
    not_run = gpu_benchmark.target_verdicts(32, largest, {})
    assert not_run["end_to_end_frames_per_s_at_84"]["met"] is None and not_run["make_demo_s"]["value"] is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_without_cuda_the_cuda_run_exits_2_with_one_line(capsys):
    assert gpu_benchmark.run(Namespace(device="cuda")) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_smoke_variant_writes_the_scaling_rows_and_the_profile_in_the_schema(tmp_path):
    out = tmp_path / "gpu_benchmark.json"
    done = subprocess.run([sys.executable, "benchmarks/gpu_benchmark.py", "--variant", "smoke", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(out.read_text())
    assert all(key in data for key in SCHEMA_KEYS) and data["variant"] == "smoke"
    metrics = data["metrics"]
    assert [row["workers"] for row in metrics["scaling"]] == [1, 2]
    assert all(row["env_bound_frames_per_s"] > 0 and row["end_to_end_frames_per_s"] > 0 for row in metrics["scaling"])
    profile = metrics["profile"]
    assert [row["part"] for row in profile["rows"]] == [label for label, _ in gpu_benchmark.PROFILE_ROWS]
    assert sum(row["s_per_iteration"] for row in profile["rows"]) == pytest.approx(profile["iteration_s"], rel=0.1)
    assert metrics["pipelines"] == {} and data["targets"]["make_demo_s"]["met"] is None
    for parts in metrics["parts_ms_per_frame"].values():
        assert set(parts) == {"env_physics_ik_ms", "render_ms", "host_to_device_ms", "policy_inference_ms",
                              "learner_update_ms"} and all(0 < ms < 10_000 for ms in parts.values()), parts
