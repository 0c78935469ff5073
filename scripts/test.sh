#!/usr/bin/env bash
# Set up and run the default test suite (slow suites excluded; run them with: .venv/bin/pytest -m slow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check rasp_compiler tests bench scripts
.venv/bin/pytest -q -p no:cacheprovider
