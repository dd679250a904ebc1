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
