#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py) on a machine with no network, from the carried tree alone.
#
#   bash benchmarks/gpu_check.sh wheels   # on a machine with PyPI (a developer's): the project's training
#                                         # stack, at the versions of this venv, as Python 3.12 wheels in
#                                         # .gpucheck-wheels/ (~31 MiB; ignored by git through its own
#                                         # .gitignore, so it travels only when named in `carry`)
#   bash benchmarks/gpu_check.sh [ARGS]   # on the GPU machine: install those wheels into /tmp (the image's
#                                         # own torch stays), run the check under a hard 8-minute limit,
#                                         # copy benchmarks/results/gpu.json to $OUT when $OUT is set
#
# With the device tool: run(command="bash benchmarks/gpu_check.sh", carry=[".gpucheck-wheels"], timeout_s=540)
# ARGS go to `python -m benchmarks.gpu_check` (e.g. --sim-sft-steps 50). Exit status: the check's (1: a
# stage failed, gpu.json still holds what was measured; 124: the 8-minute limit).
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=.gpucheck-wheels
# Not in the GPU image (or there at versions this project does not run: transformers 5, hub 1.x).
STACK="transformers tokenizers huggingface_hub trl peft accelerate datasets dill multiprocess deepspeed hjson
       pydantic pydantic_core annotated_types typing_inspection pyspellchecker skops prettytable wcwidth"

if [ "${1:-}" = "wheels" ]; then
    PY=${PYTHON:-.venv/bin/python}
    [ -x "$PY" ] || PY=python3
    mkdir -p "$WHEELS" && echo '*' > "$WHEELS/.gitignore"
    # shellcheck disable=SC2086
    specs=$("$PY" - $STACK <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
out = []
for name in sys.argv[1:]:
    try:
        out.append(f"{name}=={version(name)}")
    except PackageNotFoundError:
        sys.exit(f"gpu_check.sh: {name} is not installed in this Python: run `make setup` first")
print(" ".join(out))
EOF
) || exit 1
    binary=$(printf '%s\n' $specs | grep -v '^deepspeed==')
    ds=$(printf '%s\n' $specs | grep '^deepspeed==')
    echo "wheels for: $specs"
    # shellcheck disable=SC2086
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" $binary || exit 1
    # DeepSpeed ships a source archive only: a pure-Python wheel (no ops built; ZeRO-2 needs none).
    DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$WHEELS" "$ds" || exit 1
    du -sh "$WHEELS"
    exit 0
fi

export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 DO_NOT_TRACK=1 \
       TOKENIZERS_PARALLELISM=false DVC_NO_ANALYTICS=1
PY=${PYTHON:-python3}
SITE=/tmp/gpucheck-site
if compgen -G "$WHEELS/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$WHEELS"/*.whl || { echo "gpu_check.sh: installing $WHEELS failed" >&2; exit 1; }
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "gpu_check.sh: no $WHEELS/ (run 'bash benchmarks/gpu_check.sh wheels' where PyPI is reachable);" \
         "using what this Python has" >&2
fi
export PYTHONPATH="$PWD/src:$PWD:${PYTHONPATH:-}"
"$PY" -c 'import torch, transformers, trl, peft, accelerate, deepspeed, datasets
print("gpu_check.sh: torch", torch.__version__, "cuda", torch.version.cuda, "| transformers", transformers.__version__,
      "| trl", trl.__version__, "| peft", peft.__version__, "| deepspeed", deepspeed.__version__,
      "| GPU:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' \
    || { echo "gpu_check.sh: the training stack does not import (see above)" >&2; exit 1; }
# 8 minutes from this script's start, the wheels' install and the import check above included.
limit=$((470 - SECONDS))
[ "$limit" -ge 120 ] || { echo "gpu_check.sh: only $limit s of the 8 minutes left after the set-up" >&2; exit 124; }
timeout -k 5 "$limit" "$PY" -m benchmarks.gpu_check --budget $((limit - 15)) "$@"
rc=$?
[ $rc -eq 124 ] && echo "gpu_check.sh: stopped at the 8-minute limit" >&2
if [ -n "${OUT:-}" ]; then
    for f in benchmarks/results/gpu.json benchmarks/results/gpu_smoke.json; do
        [ -f "$f" ] && cp "$f" "$OUT/"
    done
fi
exit $rc
