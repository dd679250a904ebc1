#!/bin/bash
set -euo pipefail
find /app/logs -type f -name '*.log' -exec cat {} + \
  | awk '$2 == "ERROR" {print $3}' \
  | sort | uniq -c \
  | awk '{print $2, $1}' \
  | sort -k2,2nr -k1,1 > /app/errors.txt
