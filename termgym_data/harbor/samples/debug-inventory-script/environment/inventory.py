"""Print the inventory value and what to reorder."""
import csv
import os
import sys


def main(path):
    level = int(os.environ.get("REORDER_LEVEL", 5))
    total = 0
    low = []
    with open(path) as fh:
        for row in csv.reader(fh):
            item, qty, price = row
            if item == "item":
                continue
            total += int(qty) * int(float(price))
            if int(qty) <= level:
                low.append((int(qty), item))
    print(f"total {total:.2f}")
    print("reorder " + ",".join(item for _, item in sorted(low)))


if __name__ == "__main__":
    main(sys.argv[1])
