#!/bin/bash
set -euo pipefail
python3 - <<'EOF'
import csv, json
totals = {}
with open("/app/sales.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        region = totals.setdefault(row["region"], {"units": 0, "revenue": 0.0})
        region["units"] += int(row["units"])
        region["revenue"] += int(row["units"]) * float(row["unit_price"])
for region in totals.values():
    region["revenue"] = round(region["revenue"], 2)
summary = dict(totals)
summary["top_region"] = max(totals, key=lambda r: totals[r]["revenue"])
with open("/app/summary.json", "w") as fh:
    json.dump(summary, fh, indent=2)
EOF
