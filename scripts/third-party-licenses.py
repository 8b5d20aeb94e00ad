#!/usr/bin/env python3
"""Writes the licences of every crate compiled into the agentgate binary, for the Debian
package's /usr/share/doc/agentgate/ (and so the container image's).

    scripts/third-party-licenses.py OUT_FILE [--target TRIPLE]

The crates are those the `agentgate` package links on TARGET (default: this machine's):
its normal dependencies, transitively, as Cargo resolved them for the workspace (build
scripts and proc macros run at build time and are not shipped). For each crate it writes
its name, version, licence expression and repository, then the text of every licence or
notice file the crate ships (LICENSE*, LICENCE*, COPYING*, NOTICE*, COPYRIGHT*), each
distinct text once. A crate that ships no such file is listed with its SPDX expression
and said to ship none, never left out. cargo deny (deny.toml) decides which licences are
allowed; this only carries their texts, as MIT, BSD and Apache-2.0 ask of a binary.
"""

import hashlib
import json
import pathlib
import subprocess
import sys

NOTICE_PREFIXES = ("license", "licence", "copying", "notice", "copyright", "unlicense")


def host_target():
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    return next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("host: "))


def linked_packages(metadata, root_name):
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    root = next(p["id"] for p in metadata["packages"]
                if p["name"] == root_name and p["source"] is None)
    seen, todo = set(), [root]
    while todo:
        node = nodes[todo.pop()]
        for dep in node["deps"]:
            # kind None is a normal dependency: linked into the binary.
            if any(k["kind"] is None for k in dep["dep_kinds"]) and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    # Our own workspace crates are agentgate's licence, in the copyright file.
    return sorted((packages[i] for i in seen if packages[i]["source"] is not None),
                  key=lambda p: (p["name"], p["version"]))


def notice_files(package):
    root = pathlib.Path(package["manifest_path"]).parent
    found = []
    for path in sorted(root.iterdir()):
        if path.is_file() and path.name.lower().startswith(NOTICE_PREFIXES):
            found.append(path)
    # A licence_file named in Cargo.toml may live elsewhere in the crate.
    if package.get("license_file"):
        named = (root / package["license_file"]).resolve()
        if named.is_file() and named not in found:
            found.append(named)
    return found


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit("usage: third-party-licenses.py OUT_FILE [--target TRIPLE]")
    out = pathlib.Path(args[0])
    target = args[args.index("--target") + 1] if "--target" in args else host_target()
    metadata = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", target],
        check=True, capture_output=True, text=True).stdout)
    crates = linked_packages(metadata, "agentgate")

    texts = {}  # sha256 → (text, [crate names])
    lines = [
        "Third-party crates compiled into agentgate, with their licences",
        f"(target {target}; {len(crates)} crates; written by scripts/third-party-licenses.py)",
        "",
    ]
    for crate in crates:
        files = notice_files(crate)
        refs = []
        for path in files:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
            digest = hashlib.sha256(text.encode()).hexdigest()[:12]
            texts.setdefault(digest, (text, []))[1].append(f"{crate['name']} {crate['version']}")
            refs.append(f"{path.name} [text {digest}]")
        licence = crate.get("license") or f"see {crate.get('license_file')}"
        lines.append(f"{crate['name']} {crate['version']}: {licence}")
        if crate.get("repository"):
            lines.append(f"  source: {crate['repository']}")
        lines.append("  files: " + (", ".join(refs) if refs else
                                     "none shipped in the crate; the SPDX text of its licence applies"))
    lines += ["", "=" * 78, "Licence and notice texts, each once", "=" * 78, ""]
    for digest, (text, users) in sorted(texts.items(), key=lambda item: item[1][1][0]):
        lines += [f"[text {digest}] used by: {', '.join(users)}", "-" * 78, text, "", ""]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{out}: {len(crates)} crates, {len(texts)} distinct licence texts")


if __name__ == "__main__":
    main()
