"""The on-disk layouts spelled once in ``robot_rl.artefact_files``."""

from __future__ import annotations

from robot_rl.artefact_files import dagger_round, dagger_round_folders, dagger_round_records


def test_dagger_rounds_come_in_round_order_past_round_99(tmp_path):
    for round_index in (0, 1, 2, 11, 99, 100):
        record = dagger_round(tmp_path, round_index, record=True)
        record.parent.mkdir(exist_ok=True)
        record.write_text("{}")
        if round_index:  # round 0 is the init policy's check: no folder
            dagger_round(tmp_path, round_index).mkdir()
    (tmp_path / "rounds" / "round-notes.json").write_text("{}")  # not a round
    assert [path.name for path in dagger_round_records(tmp_path)] == [
        "round-00.json", "round-01.json", "round-02.json", "round-11.json", "round-99.json", "round-100.json"]
    assert [path.name for path in dagger_round_folders(tmp_path)] == [
        "round-01", "round-02", "round-11", "round-99", "round-100"]
    assert dagger_round_folders(tmp_path / "no-run") == []
