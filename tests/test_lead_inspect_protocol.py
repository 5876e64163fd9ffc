"""The lead-task benchmark's protocol: which DAgger runs make up an arm, how a continued run starts, and that a
rewrite keeps the arms it did not rerun, and another robot arm's own folders."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import lead_inspect  # noqa: E402  (benchmarks/ is not a package)


def test_each_arm_names_the_dagger_runs_it_is_made_of():
    assert lead_inspect.dagger_chain("recipe") == []
    assert lead_inspect.dagger_chain("encoder") == []
    assert lead_inspect.dagger_chain("dagger") == ["dagger"]
    assert lead_inspect.dagger_chain("encoder-dagger-8") == ["encoder-dagger", "encoder-dagger-8"]
    for recipe in lead_inspect.RECIPES.values():  # a continued arm shares its BC run and encoder
        if recipe.after:
            assert lead_inspect.RECIPES[recipe.after].bc_run == recipe.bc_run
            assert lead_inspect.RECIPES[recipe.after].encoder == recipe.encoder


def test_a_continued_dagger_run_starts_from_the_last_round_with_beta_halving_on(tmp_path):
    args = Namespace(root=tmp_path, boards=10, device="cpu", precision="fp32", seed=0)
    last_round = tmp_path / "encoder-dagger" / "rounds" / "round-04"
    (tmp_path / "encoder-dagger").mkdir()
    (tmp_path / "encoder-dagger" / "summary.json").write_text(
        json.dumps({"policy": str(last_round / "checkpoints" / "last.pt")}))
    first = lead_inspect.dagger_config(args, "encoder-dagger", tmp_path / "bc-encoder")
    assert Path(first.init) == tmp_path / "bc-encoder" and first.beta == lead_inspect.DAGGER["beta"]
    continued = lead_inspect.dagger_config(args, "encoder-dagger-8", tmp_path / "bc-encoder")
    assert Path(continued.init) == last_round
    rounds, beta, decay = (lead_inspect.DAGGER[k] for k in ("rounds", "beta", "beta_decay"))
    assert continued.beta == pytest.approx(beta * decay**rounds)
    assert continued.rounds == rounds and Path(continued.run_dir) == tmp_path / "encoder-dagger-8"


def test_a_rewrite_keeps_the_arms_it_did_not_rerun(tmp_path):
    path = tmp_path / "lead_inspect.json"
    assert lead_inspect.earlier_arms(path) == ({}, {})
    record = {"status": "done", "final": {"success_rate": 0.5}}
    older = {**record, "kept_from": {"date": "2026-12-01", "commit": "0ld0ne0"}}  # kept by an earlier rewrite
    path.write_text(json.dumps({"benchmark": "lead_inspect", "date": "2026-12-02", "commit": "abc1234",
                                "metrics": {"arms": {"dagger": record, "recipe": older},
                                            "stages": {"collect": {"seconds": 1.0}}}}))
    arms, source = lead_inspect.earlier_arms(path)
    assert arms == {"dagger": {**record, "kept_from": {"date": "2026-12-02", "commit": "abc1234"}}, "recipe": older}
    assert source == {"date": "2026-12-02", "commit": "abc1234", "stages": {"collect": {"seconds": 1.0}}}


def test_another_robot_arm_gets_its_own_demos_runs_and_results_file():
    parser = lead_inspect.BENCHMARK.parser()
    lead_inspect.BENCHMARK.add_common(parser)
    lead_inspect.options(parser)
    built_in = lead_inspect.with_folders(parser.parse_args([]))
    assert (built_in.data, built_in.root) == (Path("data/demos-lead"), Path("runs/lead-inspect"))
    assert built_in.out.name == "lead_inspect.json"
    panda = lead_inspect.with_folders(parser.parse_args(["--robot-arm", "panda"]))
    assert (panda.data, panda.root) == (Path("data/demos-lead-panda"), Path("runs/lead-inspect-panda"))
    assert panda.out.name == "lead_inspect_panda.json"
    chosen = lead_inspect.with_folders(parser.parse_args(["--robot-arm", "panda", "--out", "x.json", "--root", "r"]))
    assert (chosen.out, chosen.root) == (Path("x.json"), Path("r"))


def test_another_training_seed_shares_the_demos_and_trains_every_stage_with_it_in_its_own_folders():
    parser = lead_inspect.BENCHMARK.parser()
    lead_inspect.BENCHMARK.add_common(parser)
    lead_inspect.options(parser)
    seed = lead_inspect.with_folders(parser.parse_args(["--seed", "1"]))
    assert (seed.data, seed.root) == (Path("data/demos-lead"), Path("runs/lead-inspect-seed1"))
    assert seed.out.name == "lead_inspect_seed1.json"
    assert lead_inspect.with_folders(parser.parse_args(["--robot-arm", "panda", "--seed", "2"])).out.name == (
        "lead_inspect_panda_seed2.json")
    recipe = lead_inspect.RECIPES["encoder-dagger-8"]
    assert lead_inspect.bc_config(seed, recipe).seed == lead_inspect.encoder_config(seed).seed == 1
    assert lead_inspect.bc_config(seed, recipe).encoder_weights == "runs/lead-inspect-seed1/encoder"


def test_a_dagger_run_stopped_between_rounds_reports_its_checks_so_far(tmp_path):
    scalars = tmp_path / "logs" / "scalars" / "dagger"
    scalars.mkdir(parents=True)
    for name, values in {"success_rate": (0.2, 0.4), "guesses": (3, 1), "collisions_per_episode": (9.5, 4.0),
                         "aggregate_frames": (1000, 2000)}.items():
        (scalars / f"{name}.csv").write_text("".join(f"{step},{value}\n" for step, value in enumerate(values)))
    report = lead_inspect.in_progress(tmp_path)
    assert report["status"] == "in progress"
    assert [(c["round"], c["success_rate"], c["aggregate_frames"]) for c in report["curve"]] == [
        (0, 0.2, 1000), (1, 0.4, 2000)]


def test_an_arm_measured_in_an_earlier_part_keeps_the_date_and_commit_it_was_measured_at():
    earlier = {"status": "done", "final": {"success_rate": 0.98}, "kept_from": {"date": "d0", "commit": "c0"}}
    reread = {"status": "done", "final": {"success_rate": 0.98}}
    assert lead_inspect.with_earlier_record(reread, earlier, evaluated_before=True)["kept_from"]["commit"] == "c0"
    assert "kept_from" not in lead_inspect.with_earlier_record(reread, earlier, evaluated_before=False)
    assert lead_inspect.with_earlier_record(None, earlier, evaluated_before=True) is earlier
    assert lead_inspect.with_earlier_record(None, {"status": "in progress"}, evaluated_before=True) is None
    assert lead_inspect.with_earlier_record(reread, {}, evaluated_before=True) is reread
