#!/usr/bin/env bash
# Create the peer env and the model exports the encode benchmark's peers need (issue 17), offline but for PyPI.
#
#   bash benchmarks/peers/setup.sh [MODEL_FOLDER] [DATA_FOLDER]
#
# MODEL_FOLDER: a sentence-transformers folder (default: the package's default model, found via the main .venv).
# DATA_FOLDER: the shared data (default: ../shared/data beside the repo); its nli/ MNLI premises calibrate the
# static int8 OpenVINO model. Env: benchmarks/peers/.venv-st (torch==2.13.0 first, then requirements-st.txt),
# skipped when it exists, its imports work and its pins are the current ones. Exports (skipped when present):
# benchmarks/peers/.cache/<model>/{onnx,openvino,fastembed}/. PEERS_PYTHON picks the interpreter (3.10+).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ENV="$HERE/.venv-st"
REQ="$HERE/requirements-st.txt"
MARKER="$ENV/sbert-qdrant-peers-ready"
BASE_PYTHON=${PEERS_PYTHON:-python3}
IMPORTS="import torch, sentence_transformers, optimum.onnxruntime, optimum.intel.openvino, openvino, nncf, datasets, onnxruntime, fastembed; assert torch.__version__.startswith('2.13.0'), torch.__version__"

want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [[ -x "$ENV/bin/python" && -f "$MARKER" && "$(cat "$MARKER")" == "$want" ]] && "$ENV/bin/python" -c "$IMPORTS" 2>/dev/null; then
    echo "peer env ready: $ENV"
else
    echo "creating peer env $ENV"
    rm -f "$MARKER"
    [[ -x "$ENV/bin/python" ]] || "$BASE_PYTHON" -m venv "$ENV"
    "$ENV/bin/python" -m pip install -q --upgrade pip
    "$ENV/bin/python" -m pip install -q torch==2.13.0
    "$ENV/bin/python" -m pip install -q -r "$REQ" -c <(echo torch==2.13.0)
    "$ENV/bin/python" -c "$IMPORTS"
    echo "$want" > "$MARKER"
fi

MODEL=${1:-}
if [[ -z "$MODEL" ]]; then
    MODEL=$("$ROOT/.venv/bin/python" -c "from sbert_qdrant.encoder.loading import resolve_model_folder; print(resolve_model_folder(None))")
fi
DATA=${2:-"$ROOT/../shared/data"}
"$ENV/bin/python" "$HERE/export.py" "$MODEL" "$HERE/.cache" --data "$DATA" 2> >(grep -vE "TracerWarning|inverted_mask|^\s*$" >&2)
echo "peers ready; check them with: .venv/bin/python benchmarks/_peers.py --smoke"
