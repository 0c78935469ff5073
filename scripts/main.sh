#!/usr/bin/env bash
# Set up, then run the main job: every shipped program on its examples, compiled and checked.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python scripts/check_programs.py "$@"
