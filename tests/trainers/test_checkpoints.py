"""Finding the last checkpoint: veRL's tracker file first, else global_step_N by number."""

from __future__ import annotations

from trainers.verl.checkpoints import last_checkpoint, main


def test_highest_step_by_number_not_by_text(tmp_path):
    for step in (2, 9, 10):
        (tmp_path / f"global_step_{step}").mkdir()
    (tmp_path / "global_step_x").mkdir()
    (tmp_path / "global_step_99.tmp").mkdir()
    assert last_checkpoint(tmp_path) == tmp_path / "global_step_10"


def test_the_tracker_file_wins_when_its_folder_exists(tmp_path):
    for step in (5, 10):
        (tmp_path / f"global_step_{step}").mkdir()
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("5\n")
    assert last_checkpoint(tmp_path) == tmp_path / "global_step_5"
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("7")  # stale tracker: fall back
    assert last_checkpoint(tmp_path) == tmp_path / "global_step_10"


def test_no_checkpoint_is_reported(tmp_path, capsys):
    assert last_checkpoint(tmp_path) is None
    assert main([str(tmp_path)]) == 1
    assert "no global_step_N" in capsys.readouterr().err
