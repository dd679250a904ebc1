import os
import subprocess
import tarfile

SCRIPT = "/app/backup.sh"


def run(*args):
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True)


def names(archive):
    with tarfile.open(archive) as tar:
        return sorted(os.path.normpath(m.name) for m in tar.getmembers() if m.isfile())


def test_executable():
    assert os.access(SCRIPT, os.X_OK)


def test_backups_are_numbered(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "out"
    (src / "sub").mkdir(parents=True)
    (src / "notes.txt").write_text("hello")
    (src / "sub" / "data.csv").write_text("a,b")
    (src / "scratch.tmp").write_text("skip me")
    first = run(str(src), str(dest))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(dest / "backup-1.tar.gz")
    assert names(dest / "backup-1.tar.gz") == ["notes.txt", "sub/data.csv"]
    (dest / "backup-7.tar.gz").write_bytes((dest / "backup-1.tar.gz").read_bytes())
    second = run(str(src), str(dest))
    assert second.stdout.strip() == str(dest / "backup-8.tar.gz")


def test_errors(tmp_path):
    assert run(str(tmp_path / "missing"), str(tmp_path / "out")).returncode == 2
    bad = run(str(tmp_path))
    assert bad.returncode == 2 and bad.stderr.strip()
