#!/bin/bash
# Terminal-Bench style: pytest with -rA so the summary lists every test.
cd /app
python3 -m pytest "$TEST_DIR/test_outputs.py" -rA
