#!/bin/bash
set -euo pipefail
cat > /app/inventory.py <<'EOF'
"""Print the inventory value and what to reorder."""
import csv
import os
import sys


def main(path):
    level = int(os.environ.get("REORDER_LEVEL", 5))
    total = 0.0
    low = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            qty = int(row["qty"])
            total += qty * float(row["price"])
            if qty < level:
                low.append(row["item"])
    print(f"total {total:.2f}")
    print("reorder " + (",".join(sorted(low)) or "-"))


if __name__ == "__main__":
    main(sys.argv[1])
EOF
