#!/usr/bin/env bash
# Create .venv and install the project with its test extras (idempotent).
# torch is pinned to 2.13.0 in pyproject.toml (a CPU build here; elsewhere install it first from
# https://download.pytorch.org/whl/cpu, see DEVELOPERS.md); never loosen the pin.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v -i warning || true
.venv/bin/python -m pip install -q -e '.[test,lens]' 2>&1 | grep -v -i warning || true
.venv/bin/python -c "import rasp_compiler, torch, lark; print('installed rasp-compiler with torch', torch.__version__)"
