import os
import subprocess

REPO = os.environ["REPO"]


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()


def test_feature_branch_points_at_lost_commit():
    assert git("log", "-1", "--format=%s", "feature") == "add feature"
    assert git("show", "feature:feature.py").startswith("def answer():")


def test_main_contains_feature_and_history():
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    subjects = git("log", "--format=%s", "main").splitlines()
    assert "add feature" in subjects and "update notes" in subjects
    assert "return 42" in git("show", "main:feature.py")


def test_working_tree_clean():
    assert git("status", "--porcelain") == ""
