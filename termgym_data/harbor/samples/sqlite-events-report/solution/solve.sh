#!/bin/bash
set -euo pipefail
python3 - <<'EOF'
import csv, json, sqlite3
con = sqlite3.connect("/app/events.db")
con.execute("DROP TABLE IF EXISTS events")
con.execute("CREATE TABLE events(user TEXT, event TEXT, ms INTEGER)")
with open("/app/events.jsonl") as fh:
    for line in fh:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        con.execute("INSERT INTO events VALUES (?, ?, ?)", (e["user"], e["event"], int(e["ms"])))
con.commit()
rows = con.execute(
    "SELECT user, COUNT(*) AS n, AVG(ms) FROM events GROUP BY user ORDER BY n DESC, user ASC").fetchall()
with open("/app/report.csv", "w", newline="") as fh:
    out = csv.writer(fh, lineterminator="\n")
    out.writerow(["user", "events", "avg_ms"])
    for user, n, avg in rows:
        out.writerow([user, n, int(avg + 0.5)])
EOF
