#!/usr/bin/env bash
# scripts/fetch_datasets.sh NAME...: downloads the standard GNN datasets (Planetoid, the
# heterophilous benchmark, OGB, Reddit) into the folder tessera-train reads by default
# (~/.cache/tessera/datasets), checks every file's SHA-256 and converts what needs converting.
# --list names them, --from DIR|URL fetches from a mirror, --help says the rest. The work is done
# by scripts/fetch_datasets.py: Python's standard library, plus numpy and scipy (Debian:
# python3-numpy python3-scipy) for the sets that need converting.
#
# Environment: TESSERA_DATA_DIR (the data folder), TESSERA_DATASETS_MIRROR (a default --from),
# TESSERA_PYTHON (default /usr/bin/python3, where Debian puts numpy and scipy).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${TESSERA_PYTHON:-}"
if [[ -z "${python}" ]]; then
  if [[ -x /usr/bin/python3 ]]; then
    python=/usr/bin/python3
  elif command -v python3 >/dev/null; then
    python="$(command -v python3)"
  else
    echo "fetch_datasets.sh: error: needs python3 (Debian: apt-get install python3" \
      "python3-numpy python3-scipy)" >&2
    exit 2
  fi
fi
exec "${python}" "${here}/fetch_datasets.py" "$@"
