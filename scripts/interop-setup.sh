#!/usr/bin/env bash
# Installs the pinned third-party MCP clients of the interop suite
# (crates/agentgate/tests/external/interop.rs, interop/README.md):
#
#   scripts/interop-setup.sh
#
# - Python: a virtualenv in interop/python/.venv with interop/python/requirements.txt
#   (every package pinned), with the upstream Q Business MCP server agentgate is compared with;
# - Python SDK 1.x: mcp 1.30.0 in interop/python-1x/.venv with interop/python-1x/requirements.txt
#   (every package pinned; apart from interop/python, whose fastmcp needs mcp 2.x), for the
#   2025-11-25 task wire test;
# - TypeScript: interop/typescript/node_modules from its package-lock.json (npm ci), with the
#   reference server @modelcontextprotocol/server-everything behind agentgate's MCP backend
#   (crates/agentgate/tests/external/mcp_backend.rs);
# - A2A: the official A2A Python SDK (a2a-sdk 1.3.0) in its own virtualenv
#   interop/a2a/.venv with interop/a2a/requirements.txt (every package pinned; kept apart
#   from the MCP clients so neither pins the other's dependencies), for
#   crates/agentgate-sim/tests/a2a_interop.rs and for the SDK agent behind agentgate in
#   crates/agentgate/tests/external/interop.rs.
#
# Needs python3 (3.11), node (20) and npm, and the PyPI and npm registries.
# Running it again re-checks the installs and changes nothing that is current.
set -euo pipefail
cd "$(dirname "$0")/../interop"

echo "interop-setup: Python clients (interop/python/.venv)"
if [ ! -x python/.venv/bin/python ]; then
    python3 -m venv python/.venv
fi
python/.venv/bin/pip install --quiet --disable-pip-version-check -r python/requirements.txt
python/.venv/bin/python -c 'import fastmcp, fastmcp_tasks, mcp; print("  fastmcp", fastmcp.__version__)'
python/.venv/bin/python -c 'import importlib.metadata as m; print("  upstream Q Business server", m.version("awslabs.amazon-qbusiness-anonymous-mcp-server"))'

echo "interop-setup: the Python SDK 1.x (interop/python-1x/.venv)"
if [ ! -x python-1x/.venv/bin/python ]; then
    python3 -m venv python-1x/.venv
fi
python-1x/.venv/bin/pip install --quiet --disable-pip-version-check -r python-1x/requirements.txt
python-1x/.venv/bin/python -c 'import importlib.metadata as m; print("  mcp", m.version("mcp"))'

echo "interop-setup: A2A SDK (interop/a2a/.venv)"
if [ ! -x a2a/.venv/bin/python ]; then
    python3 -m venv a2a/.venv
fi
a2a/.venv/bin/pip install --quiet --disable-pip-version-check -r a2a/requirements.txt
a2a/.venv/bin/python -c 'import importlib.metadata as m; print("  a2a-sdk", m.version("a2a-sdk"))'

echo "interop-setup: TypeScript clients (interop/typescript/node_modules)"
(cd typescript && npm ci --no-audit --no-fund --loglevel=error)
node -e 'for (const p of ["@modelcontextprotocol/sdk", "@modelcontextprotocol/client", "@modelcontextprotocol/ext-tasks", "@modelcontextprotocol/server-everything"]) console.log("  " + p, require(`./typescript/node_modules/${p}/package.json`).version)'
