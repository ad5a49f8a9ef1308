#!/usr/bin/env bash
# Make one small virtualenv per RocketMQ C++ client build used by the integration tests. Each
# package ships a prebuilt librocketmq.so with a thin ctypes binding, and all of them name their
# module `rocketmq`, so they cannot share an environment (nor ours). Idempotent.
#   .venv-cpp1: PyPI `rocketmq` 0.4.4            -> rocketmq-client-cpp 1.x core
#   .venv-cpp2: PyPI `rocketmq-python-cvs` 2.1.0.3 -> rocketmq-client-cpp 2.1.0 core
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=${PYTHON:-python3.11}
command -v "$py" >/dev/null 2>&1 || py=python3
[ "$(uname -m)" = "x86_64" ] || { echo "setup_cpp_clients: librocketmq builds are x86_64 only; skipping" >&2; exit 0; }
make_env() {
  local dir=$1 spec=$2
  if [ -f "$here/$dir/.ok" ] && [ "$(cat "$here/$dir/.ok")" = "$spec" ]; then return 0; fi
  rm -rf "${here:?}/$dir"
  "$py" -m venv "$here/$dir"
  "$here/$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$spec" >&2
  "$here/$dir/bin/python" -c "import rocketmq.client" >&2
  echo "$spec" > "$here/$dir/.ok"
}
make_env .venv-cpp1 "rocketmq==0.4.4"
make_env .venv-cpp2 "rocketmq-python-cvs==2.1.0.3"
