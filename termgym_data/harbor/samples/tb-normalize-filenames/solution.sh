#!/bin/bash
set -euo pipefail
cd /app/photos
for f in *; do
  [ -f "$f" ] || continue
  new=$(printf '%s' "$f" | tr '[:upper:]' '[:lower:]' | sed -E 's/[ _]+/-/g')
  if [ "$f" != "$new" ]; then mv -- "$f" "$new"; fi
done
