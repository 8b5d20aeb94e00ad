#!/usr/bin/env python3
"""Extract the REST operations agentgate calls from GitHub's OpenAPI description.

Usage:
    python3 extract.py DESCRIPTION.json [OUTPUT.json]

DESCRIPTION.json is a full *bundled* (not dereferenced) OpenAPI 3 description of
api.github.com, e.g. github/rest-api-description
`descriptions/api.github.com/api.github.com.json`, or the same file as shipped
in the `@octokit/openapi` npm package (`generated/api.github.com.json`, which is
GitHub's file plus `x-octokit` keys; those keys are dropped here).

OUTPUT.json (default: operations.json next to this script) is an OpenAPI 3
document holding only the operations listed in OPERATIONS below, with every
component they reference (schemas, parameters, responses, headers, examples,
request bodies), transitively. Nothing else is changed: the selected objects are
copied as they are, in their original key order, so the output is a faithful
subset of the input and is byte-for-byte reproducible from the same input.

Standard library only; no network access.
"""

import hashlib
import json
import os
import sys

# (method, path template) of every REST call agentgate makes; see
# crates/backend-copilot/src/{changes,report,agent_task,watcher}.rs.
OPERATIONS = [
    # changes.rs: find our earlier @copilot comment, else post it.
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    # report.rs: copilot_work_* events of an issue / pull request.
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/timeline"),
    # changes.rs: the pull request Copilot should change.
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    # agent_task.rs / watcher.rs: the Agent tasks API.
    ("get", "/agents/repos/{owner}/{repo}/tasks"),
    ("post", "/agents/repos/{owner}/{repo}/tasks"),
    ("get", "/agents/repos/{owner}/{repo}/tasks/{task_id}"),
]

# Vendor extensions that are not GitHub's (added by @octokit/openapi).
DROP_KEYS = {"x-octokit"}


def strip(node):
    """Copy `node`, dropping keys in DROP_KEYS at every level."""
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k not in DROP_KEYS}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def local_refs(node, found):
    """Add every local `$ref` ("#/components/...") under `node` to `found`."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            found.add(ref)
        for value in node.values():
            local_refs(value, found)
    elif isinstance(node, list):
        for value in node:
            local_refs(value, found)


def resolve(doc, ref):
    """The object a local JSON pointer names (with ~0/~1 unescaping)."""
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[part]
    return node


def extract(doc):
    paths = {}
    missing = []
    for method, path in OPERATIONS:
        item = doc.get("paths", {}).get(path)
        if item is None or method not in item:
            missing.append(f"{method.upper()} {path}")
            continue
        out = paths.setdefault(path, {})
        # Path-level parameters apply to every method of the path.
        if "parameters" in item and "parameters" not in out:
            out["parameters"] = strip(item["parameters"])
        out[method] = strip(item[method])
    if missing:
        raise SystemExit("not in the description: " + ", ".join(missing))

    # Referenced components, transitively.
    wanted = set()
    local_refs(paths, wanted)
    done = set()
    while wanted - done:
        ref = sorted(wanted - done)[0]
        done.add(ref)
        if not ref.startswith("#/components/"):
            raise SystemExit(f"unexpected reference outside components: {ref}")
        local_refs(resolve(doc, ref), wanted)

    # Keep the input's order of component kinds and of names within each.
    components = {}
    for kind, entries in doc.get("components", {}).items():
        for name, value in entries.items():
            pointer = "#/components/{}/{}".format(
                kind, name.replace("~", "~0").replace("/", "~1")
            )
            if pointer in done:
                components.setdefault(kind, {})[name] = strip(value)

    # Keep the input's path order too.
    ordered_paths = {p: paths[p] for p in doc["paths"] if p in paths}
    for path, item in ordered_paths.items():
        ordered_paths[path] = {
            k: item[k] for k in list(doc["paths"][path].keys()) if k in item
        }

    out = {"openapi": doc.get("openapi")}
    if "info" in doc:
        out["info"] = strip(doc["info"])
    if "servers" in doc:
        out["servers"] = doc["servers"]
    out["paths"] = ordered_paths
    out["components"] = components
    return out


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    source = argv[1]
    target = argv[2] if len(argv) == 3 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "operations.json"
    )
    with open(source, "rb") as f:
        raw = f.read()
    doc = json.loads(raw)
    out = extract(doc)
    out["x-agentgate-extract"] = {
        "source_file": os.path.basename(source),
        "source_sha256": hashlib.sha256(raw).hexdigest(),
        "source_info_version": doc.get("info", {}).get("version"),
        "operations": [f"{m.upper()} {p}" for m, p in OPERATIONS],
        "dropped_keys": sorted(DROP_KEYS),
    }
    with open(target, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=2, ensure_ascii=False)
        f.write("\n")
    counts = {k: len(v) for k, v in out["components"].items()}
    print(f"wrote {target}: {len(OPERATIONS)} operations, components {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
