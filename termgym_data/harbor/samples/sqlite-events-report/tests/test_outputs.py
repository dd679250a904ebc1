import csv
import sqlite3


def test_database():
    con = sqlite3.connect("/app/events.db")
    rows = sorted(con.execute("SELECT user, event, ms FROM events").fetchall())
    assert len(rows) == 8
    assert ("bo", "search", 410) in rows
    assert all(isinstance(ms, int) for _, _, ms in rows)


def test_report():
    with open("/app/report.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows == [
        ["user", "events", "avg_ms"],
        ["ana", "3", "158"],
        ["bo", "2", "245"],
        ["cy", "2", "150"],
        ["dee", "1", "60"],
    ]
