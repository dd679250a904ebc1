#!/bin/bash
set -euo pipefail
cat > /app/backup.sh <<'EOF'
#!/bin/bash
# backup.sh SOURCE_DIR DEST_DIR: numbered tar.gz backups, *.tmp excluded.
if [ "$#" -ne 2 ]; then
  echo "usage: backup.sh SOURCE_DIR DEST_DIR" >&2
  exit 2
fi
src=$1 dest=$2
if [ ! -d "$src" ]; then
  echo "backup.sh: $src is not a directory" >&2
  exit 2
fi
mkdir -p "$dest"
last=0
for f in "$dest"/backup-*.tar.gz; do
  [ -e "$f" ] || continue
  n=${f##*/backup-}
  n=${n%.tar.gz}
  case $n in ''|*[!0-9]*) continue ;; esac
  if [ "$n" -gt "$last" ]; then last=$n; fi
done
out="$dest/backup-$((last + 1)).tar.gz"
tar -czf "$out" --exclude='*.tmp' -C "$src" .
echo "$out"
EOF
chmod +x /app/backup.sh
