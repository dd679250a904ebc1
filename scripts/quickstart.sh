#!/usr/bin/env bash
# The quick start's main job on the embedded default (no network, no GPU, no API key): set up the
# local backend, then evaluate the reference-solution agent on 20 SWE-SYNTH tasks in bubblewrap
# sandboxes and write a browsable report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/venv.sh
termgym list
termgym eval termgym/SweSynth-v0 --agent oracle --split test --limit 20 -n 4 -o runs/quickstart
termgym view runs/quickstart
echo "open runs/quickstart/report.html in a browser"
# The oracle solves every task: anything less means this machine cannot run the sandboxes.
python - <<'CHECK'
import json, sys
summary = json.load(open("runs/quickstart/summary.json"))
if summary["solved"] != summary["episodes"]:
    sys.exit(f"the oracle solved only {summary['solved']} of {summary['episodes']} tasks: "
             "run `termgym doctor` to see what this machine lacks")
CHECK
