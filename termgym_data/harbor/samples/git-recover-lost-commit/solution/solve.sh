#!/bin/bash
set -euo pipefail
cd /app/repo
# The commit is still in HEAD's reflog ("commit: add feature").
sha=$(git reflog --format='%H %gs' | awk '$0 ~ /commit: add feature$/ {print $1; exit}')
git branch feature "$sha"
git merge -q --no-edit feature
