"""The million-frame PPO protocol: its presets change only the budget, the check cadence and the PPO folders of the
start they extend, and the rule that says where a curve stops rising (fixed before any such run) reads the curves
as its docstring says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from protocols import MILLION_FRAMES, PRESETS  # noqa: E402  (benchmarks/ is not a package)

from robot_rl.learning_curves import where_it_stops  # noqa: E402


def _curve(rates: list[float], guesses: list[int] | None = None, batch: int = 4096) -> list[dict]:
    points = [{"frames": i * batch, "success_rate": rate} for i, rate in enumerate(rates)]
    for point, count in zip(points, guesses or []):
        point["failures"] = {"guess": count, "wrong_verdict": 1}
    return points


@pytest.mark.parametrize("name, base", [("few-1m", "few"), ("lead-encoder-1m", "lead-encoder")])
def test_a_budget_preset_keeps_its_start_and_changes_only_the_budget_checks_and_folders(name, base):
    preset, start = PRESETS[name], PRESETS[base]
    assert preset["bc_frames"] == MILLION_FRAMES == 16 * start["bc_frames"]
    for shared in ("demos", "bc", "seeds", "scratch", "scratch_budget_factor", "encoder", "dagger"):
        assert preset.get(shared) == start.get(shared)
    changed = {key for key in preset["ppo"] if preset["ppo"][key] != start["ppo"][key]}
    assert changed == {"eval_every", "checkpoint_every"}
    assert preset["ppo_root"] == f"runs/bench-{name}" != start.get("ppo_root")


def test_a_curve_stops_rising_where_the_smoothed_mean_reaches_nine_tenths_of_its_rise():
    runs = [_curve([0.2, 0.4, 0.6, 0.7, 0.72, 0.7, 0.71, 0.7], [40, 30, 20, 15, 14, 15, 14, 15]),
            _curve([0.2, 0.5, 0.6, 0.72, 0.7, 0.72, 0.7, 0.7], [40, 25, 20, 14, 15, 14, 15, 15])]
    stop = where_it_stops(runs, check_boards=50)
    # means .2 .45 .6 .71 .71 .71 .705 .7; level = mean of the last two = .7025; target .2 + .9 * .5025 = .652;
    # the 3-check trailing means reach it at the fifth check (.673), not the fourth (.587)
    assert stop["start"] == 0.2 and stop["level"] == pytest.approx(0.7025)
    assert stop["stops_rising_at_frames"] == 4 * 4096
    assert stop["last_quarter_from_frames"] == 6 * 4096
    assert stop["failures_per_100_at_start"] == {"guess": 80.0, "wrong_verdict": 2.0}  # 80 of 100 episodes
    assert stop["failures_per_100_last_quarter"] == {"guess": 29.5, "wrong_verdict": 2.0}  # 59 of 200


def test_a_flat_curve_has_no_rise_and_old_curves_no_failure_counts():
    stop = where_it_stops([_curve([0.5, 0.52, 0.5, 0.51])], check_boards=50)
    assert stop["stops_rising_at_frames"] is None and stop["rise"] < 0.05
    assert stop["failures_per_100_at_start"] is None and stop["failures_per_100_last_quarter"] is None


def test_a_falling_curve_has_no_rise():
    assert where_it_stops([_curve([0.6, 0.5, 0.4, 0.3])], check_boards=50)["stops_rising_at_frames"] is None


@pytest.mark.parametrize("rates", [[0.2, 0.2, 0.2, 0.8], [0.3, 0.9], [0.2] * 8 + [0.9], [0.0] * 12 + [1, 0, 0, 1]])
def test_a_curve_that_jumps_at_its_end_is_still_rising_not_an_error(rates):
    stop = where_it_stops([_curve(rates)], check_boards=50)
    assert stop["stops_rising_at_frames"] is None and stop["still_rising_at_end"]


def test_seeds_of_different_lengths_are_read_up_to_the_shortest():
    stop = where_it_stops([_curve([0.2, 0.5, 0.7, 0.8, 0.8]), _curve([0.2, 0.5, 0.7])], check_boards=50)
    assert stop["last_quarter_from_frames"] == 2 * 4096 and stop["level"] == pytest.approx(0.7)


def test_budget_targets_check_every_seeds_last_policy_against_the_start_on_the_same_boards():
    from protocols import budget_targets

    def fresh(rate: float, guesses: int) -> dict:
        return {"rate": rate, "guesses": guesses, "boards": 100}

    lead = PRESETS["lead-encoder-1m"]["budget_targets"]
    start = fresh(0.5, 40)
    met = budget_targets(lead, start, {"0": fresh(0.8, 10), "1": fresh(0.85, 3)})
    assert met == {"last_policy_at_least_80_percent_every_seed_at_this_budget": True,
                   "last_policy_30_points_above_start_every_seed_at_this_budget": True,
                   "at_most_10_guesses_per_100_every_seed_at_this_budget": True}
    # one seed short on each count: 79%, +29 points, 11 guesses
    missed = budget_targets(lead, start, {"0": fresh(0.9, 0), "1": fresh(0.79, 11)})
    assert not any(missed.values())
    assert budget_targets(PRESETS["few-1m"]["budget_targets"], start, {"0": fresh(0.9, 30)}) == {
        "last_policy_at_least_90_percent_every_seed_at_this_budget": True}
    # The dwell preset adds the episodes that end at the view without a verdict: 5 of 100 pass, 6 miss.
    dwell = PRESETS["lead-dwell-1m"]["budget_targets"]
    at_view = "at_most_5_per_100_at_the_view_without_a_verdict_every_seed_at_this_budget"
    for stalled, expected in ((5, True), (6, False)):
        final = {**fresh(0.85, 3), "failures": {"no_verdict_at_view": stalled, "guess": 3}}
        assert budget_targets(dwell, start, {"0": final})[at_view] is expected
    assert PRESETS["lead-dwell-1m"]["ppo"] == {**PRESETS["lead-encoder-1m"]["ppo"], "dwell_penalty": 0.05}
