import os
import subprocess


def report(csv_text, tmp_path, level=None):
    path = tmp_path / "inv.csv"
    path.write_text(csv_text)
    env = dict(os.environ)
    env.pop("REORDER_LEVEL", None)
    if level is not None:
        env["REORDER_LEVEL"] = str(level)
    result = subprocess.run(["python3", "/app/inventory.py", str(path)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_prices_with_cents(tmp_path):
    out = report("item,qty,price\npear,3,0.75\napple,12,0.40\nmelon,5,2.99\nkiwi,1,0.25\n", tmp_path)
    assert out == "total 22.25\nreorder kiwi,pear\n"


def test_alphabetical_and_level(tmp_path):
    out = report("item,qty,price\nzucchini,2,1.10\nbanana,4,0.30\ncherry,9,5.00\n", tmp_path, level=10)
    assert out == "total 48.40\nreorder banana,cherry,zucchini\n"


def test_nothing_to_reorder(tmp_path):
    out = report("item,qty,price\nrice,50,1.25\n", tmp_path)
    assert out == "total 62.50\nreorder -\n"
