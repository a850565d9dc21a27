#!/usr/bin/env bash
# Source this (`. .ci/use-node.sh`) to make `node` in this shell at least the project's floor (package.json engines:
# 22.19), for what the npm scripts do not cover (`npx webdata-etl …`, `node pipelines/….ts`). The npm scripts need
# no such step: they run through scripts/with-node.mjs. When the machine's Node is older (Debian's is 20), that
# launcher installs Node 24 from the npm registry once, into ${WEBDATA_NODE_HOME:-${XDG_CACHE_HOME:-~/.cache}/webdata-etl/node24},
# and this puts the same Node first on PATH: one install, one place that knows how.
_webdata_launcher="$(dirname -- "${BASH_SOURCE:-$0}")/../scripts/with-node.mjs"
# A shell that does not say which file it sources (dash): the checkout's root, from where the README says to run it.
[ -f "$_webdata_launcher" ] || _webdata_launcher=scripts/with-node.mjs
if ! command -v node >/dev/null 2>&1; then
  echo "use-node: no node on PATH: install Node.js >= 22.19 (e.g. Node 24 LTS)" >&2
  unset _webdata_launcher
  return 1 2>/dev/null || exit 1
fi
# It prints the node to use (this one when it is new enough), or one line saying what to install and fails.
if ! _webdata_node="$(node "$_webdata_launcher" --which)"; then
  unset _webdata_launcher _webdata_node
  return 1 2>/dev/null || exit 1
fi
PATH="$(dirname -- "$_webdata_node"):$PATH"
export PATH
unset _webdata_launcher _webdata_node
