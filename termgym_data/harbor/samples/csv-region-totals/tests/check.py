"""Grade /app/summary.json: one point per check, reward = points / 4, written to reward.json."""
import json

EXPECTED = {
    "north": {"units": 18, "revenue": 320.33},
    "south": {"units": 27, "revenue": 103.5},
    "east": {"units": 14, "revenue": 166.44},
}
checks = {"valid_json": 0, "units": 0, "revenue": 0, "top_region": 0}
try:
    with open("/app/summary.json") as fh:
        data = json.load(fh)
    if isinstance(data, dict):
        checks["valid_json"] = 1
        regions = {k: v for k, v in data.items() if k != "top_region"}
        if set(regions) == set(EXPECTED) and all(isinstance(v, dict) for v in regions.values()):
            checks["units"] = int(all(regions[r].get("units") == EXPECTED[r]["units"] for r in EXPECTED))
            checks["revenue"] = int(all(
                isinstance(regions[r].get("revenue"), (int, float))
                and abs(regions[r]["revenue"] - EXPECTED[r]["revenue"]) < 0.005 for r in EXPECTED))
        checks["top_region"] = int(data.get("top_region") == "north")
except (OSError, ValueError) as exc:
    print("cannot read /app/summary.json:", exc)
print(checks)
reward = sum(checks.values()) / len(checks)
with open("/logs/verifier/reward.json", "w") as fh:
    json.dump({"reward": reward, **checks}, fh)
