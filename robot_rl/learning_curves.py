"""Where a training run's curve of held-out checks stops rising, and why: the one reading of a curve that
``robot-rl info`` gives a PPO run and the PPO benchmarks give their seeds, so a user's run and a measured claim are
read alike."""

from __future__ import annotations

import statistics

# The rule (fixed before the first million-frame run): the seeds' mean check success, smoothed over this many
# consecutive checks (the check and the ones before it); its level is the mean over the last quarter of the checks;
# it stops rising at the first check whose smoothed mean reaches the start plus this share of the rise (never
# reached: it was still rising when the budget ended); a rise under NO_RISE is none.
STOP_SMOOTHING, STOP_SHARE, NO_RISE = 3, 0.9, 0.05


def where_it_stops(runs: list[list[dict]], check_boards: int) -> dict:
    """Where an arm's curves (one per seed, the same checks of ``check_boards`` boards) stop rising (``STOP_*``),
    and why: the failed episodes of each kind per 100 at the first check and over the last quarter's checks,
    summed over the seeds (None where the curves predate failure counts). Curves of different lengths (a seed
    kept from a run with another budget) are read up to the shortest."""
    length = min(len(curve) for curve in runs)
    mean = [statistics.mean(curve[i]["success_rate"] for curve in runs) for i in range(length)]
    smooth = [statistics.mean(mean[max(0, i - STOP_SMOOTHING + 1):i + 1]) for i in range(length)]
    tail = max(1, length // 4)
    start, level = mean[0], statistics.mean(mean[-tail:])
    rise = level - start
    rose = rise >= NO_RISE - 1e-9
    stop = next((i for i in range(length) if smooth[i] >= start + STOP_SHARE * rise - 1e-9), None) if rose else None

    def failures_per_100(points: list[dict]) -> dict | None:
        if any("failures" not in point for point in points):
            return None
        episodes = check_boards * len(points)
        kinds = {kind for point in points for kind in point["failures"]}
        return {kind: round(100 * sum(point["failures"].get(kind, 0) for point in points) / episodes, 1)
                for kind in sorted(kinds)}

    return {"start": round(start, 4), "level": round(level, 4), "rise": round(rise, 4),
            "stops_rising_at_frames": runs[0][stop]["frames"] if stop is not None else None,
            "still_rising_at_end": rose and stop is None,
            "last_quarter_from_frames": runs[0][length - tail]["frames"],
            "failures_per_100_at_start": failures_per_100([curve[0] for curve in runs]),
            "failures_per_100_last_quarter": failures_per_100([point for curve in runs
                                                               for point in curve[length - tail:length]])}


def stop_text(stop: dict) -> str:
    """``where_it_stops`` in one line: 'checks 36% -> 84% (last quarter), stops rising at 196,608 frames; failures
    per 100 in the last quarter: ...'."""
    frames = stop["stops_rising_at_frames"]
    where = (f"stops rising at {frames:,} frames" if frames is not None
             else "still rising at the end" if stop["still_rising_at_end"] else "no rise")
    failures = stop["failures_per_100_last_quarter"]
    kinds = ("not counted" if failures is None else
             ", ".join(f"{kind} {value:g}" for kind, value in failures.items() if value) or "none")
    return (f"checks {stop['start']:.0%} -> {stop['level']:.0%} (last quarter), {where}; failures per 100 in the "
            f"last quarter: {kinds}")
