#!/bin/sh
# Regenerates every provider's vectors (../*.json) with the providers' own SDKs, pinned in each batch's
# requirements.txt and package-lock.json, then shows what changed: nothing, if the committed vectors are what the
# SDKs make. Needs Python 3.11 with venv and Node 20 with npm, and reaches PyPI and the npm registry.
#   sh shared/schemes/tests/vectors/generate/run.sh [BATCH...]     (default: a b c d e f g h)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=${TMPDIR:-/tmp}/inbox-vectors
mkdir -p "$work"
for batch in ${*:-a b c d e f g h}; do
  echo "== batch $batch"
  dir=$here/$batch
  if [ -f "$dir/requirements.txt" ]; then
    [ -x "$work/venv-$batch/bin/python" ] || python3 -m venv "$work/venv-$batch"
    "$work/venv-$batch/bin/pip" install --quiet --disable-pip-version-check -r "$dir/requirements.txt"
  fi
  [ -f "$dir/package.json" ] && (cd "$dir" && npm ci --silent --ignore-scripts --no-audit --no-fund)
  [ -f "$dir/generate.py" ] && (cd "$dir" && "$work/venv-$batch/bin/python" generate.py)
  # Batch a's Node half only verifies what Python made; the others' Node halves write vectors of their own.
  for script in generate.mjs verify.mjs; do
    [ -f "$dir/$script" ] && (cd "$dir" && node "$script")
  done
done
cd "$here/.."
changed=$(git status --short -- . ':!generate')
if [ -n "$changed" ]; then
  printf 'vectors the SDKs made differently from the committed ones:\n%s\n' "$changed"
  exit 1
fi
echo "every vector is exactly what the SDKs make"
