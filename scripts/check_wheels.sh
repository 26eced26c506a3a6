#!/usr/bin/env bash
# Build each package's wheel and install + import it alone in a fresh venv. protocol, sandbox,
# instrument and bench must import without torch (the check fails if torch gets installed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
$PY -m venv "$out/build" && "$out/build/bin/pip" install -q build
for p in protocol sandbox instrument bench learner actors embedded; do
  "$out/build/bin/python" -m build -q --wheel --outdir "$out/dist" "packages/$p" >/dev/null
done
"$out/build/bin/python" -m build -q --wheel --outdir "$out/dist" . >/dev/null
ls "$out/dist"
for p in protocol sandbox instrument bench; do
  v="$out/venv-$p"; $PY -m venv "$v"
  "$v/bin/pip" install -q --find-links "$out/dist" "mlerl-$p"
  "$v/bin/python" -c "import mlerl.$p, importlib.util as u; assert u.find_spec('torch') is None, 'torch got installed'; print('mlerl.$p', mlerl.$p.__version__, 'imports alone without torch')"
done
for p in learner actors embedded; do
  v="$out/venv-$p"; $PY -m venv "$v"
  "$v/bin/pip" install -q torch==2.13.0
  "$v/bin/pip" install -q --find-links "$out/dist" "mlerl-$p"
  "$v/bin/python" -c "import mlerl.$p; print('mlerl.$p', mlerl.$p.__version__, 'imports alone')"
done
"$out/venv-embedded/bin/python" -c "from mlerl.embedded import REFERENCE, read_manifest; keys = [read_manifest(d)['key'] for d in REFERENCE.iterdir()]; assert keys, 'no reference build in the wheel'; print('mlerl-embedded ships the reference build', *keys)"
echo "all wheels install and import alone"
