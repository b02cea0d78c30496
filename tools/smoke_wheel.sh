#!/usr/bin/env bash
# Build the sdist and the wheel, install the wheel into a fresh virtual environment and run the
# demo and the dataset loaders from it.
#
#   bash tools/smoke_wheel.sh [PYTHON]      # PYTHON: the interpreter whose packages are reused
#
# The wheel is built from the sdist (`python -m build`), so both artefacts are exercised. The fresh
# environment reuses the dependencies already installed for PYTHON (default .venv/bin/python)
# through a .pth file (the new environment has no packages of its own, not even pip), so the
# install needs no download and takes seconds; `pip install --no-index` must still find every
# requirement of the wheel's metadata satisfied there. The commands run outside the work tree, so
# only the installed wheel can provide `causalkit`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${1:-$ROOT/.venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== build sdist and wheel"
"$PYTHON" -m build --outdir "$WORK/dist" "$ROOT" >"$WORK/build.log" 2>&1 || {
    tail -40 "$WORK/build.log"; exit 1; }
SDIST=$(ls "$WORK"/dist/*.tar.gz)
WHEEL=$(ls "$WORK"/dist/*.whl)
echo "   $(basename "$SDIST")  $(basename "$WHEEL")"

echo "== sdist and wheel contents"
LISTING=$(tar -tzf "$SDIST")
for f in LICENSE README.md pyproject.toml causalkit/py.typed causalkit/datasets/data/ihdp.csv; do
    grep -qx "[^/]*/$f" <<<"$LISTING" || { echo "sdist lacks $f"; exit 1; }
done
"$PYTHON" - "$WHEEL" <<'EOF'
import sys
import zipfile

names = zipfile.ZipFile(sys.argv[1]).namelist()
needed = ["causalkit/py.typed", "causalkit/datasets/data/nsw_cps.csv.gz",
          "causalkit/datasets/data/ihdp.csv"]
missing = [n for n in needed if n not in names]
if missing or not any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith("/LICENSE")
                      for n in names):
    sys.exit(f"wheel lacks {missing or 'LICENSE'}")
EOF

echo "== install the wheel into a fresh venv"
"$PYTHON" -m venv --without-pip "$WORK/venv"
SITE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
NEW_SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$SITE" >"$NEW_SITE/_reuse_dependencies.pth"
"$PYTHON" -m pip --python "$WORK/venv/bin/python" install -q --no-index "$WHEEL"
"$PYTHON" -m pip --python "$WORK/venv/bin/python" check

echo "== run the installed package"
cd "$WORK"
"$WORK/venv/bin/python" - "$NEW_SITE" <<'EOF'
import sys
from importlib.metadata import version
from pathlib import Path

import causalkit
from causalkit.datasets import load_ihdp, load_nsw_cps

assert Path(causalkit.__file__).is_relative_to(sys.argv[1]), causalkit.__file__
assert version("causalkit-multisource") == causalkit.__version__
assert (Path(causalkit.__file__).parent / "py.typed").exists()
nsw, ihdp = load_nsw_cps(), load_ihdp()
assert len(nsw) == 16437 and len(ihdp) == 747, (len(nsw), len(ihdp))
print(f"   causalkit {causalkit.__version__} from {Path(causalkit.__file__).parent}; "
      f"load_nsw_cps {nsw.shape}, load_ihdp {ihdp.shape}")
EOF
MPLBACKEND=Agg "$WORK/venv/bin/causalkit" demo --out "$WORK/demo" | tail -3
test -s "$WORK/demo/nsw_cps_comparison.csv"
test -s "$WORK/demo/nsw_cps_comparison.png"
echo "smoke test of the wheel passed"
