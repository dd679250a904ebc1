#!/bin/bash
# Four independent checks; the reward is the fraction that pass (reward.json, with details).
python3 /tests/check.py
