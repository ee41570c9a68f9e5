#!/usr/bin/env bash
# `pytest-super ray-node` from a checkout, without a Python to run it: the node script ships in the
# package (pytest_super/executors/ray/ray-node.sh, which documents its actions and options).
exec env PYTEST_SUPER_NODE_PROG="${PYTEST_SUPER_NODE_PROG:-scripts/ray-node.sh}" \
  bash "$(dirname "$0")/../pytest_super/executors/ray/ray-node.sh" "$@"
