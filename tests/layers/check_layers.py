#!/usr/bin/env python3
"""Fails when a library includes a header of a library above it (docs/architecture.md §1).

Each folder is a library; its layer is the set of folders it may include. Inside actors/,
common/ is the shared base (context, byte counters, tensor lists, worker ids), the concept
folders (loader, stage, diloco, recovery, tracker, membership, console, balancer) build on it, and
runtime/ is the composition root that wires them: no concept folder includes runtime/, and
common/ includes no other actors folder.

Usage: check_layers.py ROOT  (prints every upward include with its file and line; exit 1)
"""
import os
import re
import sys

# What each library may include besides itself (downward only).
ALLOWED = {
    "policy": {"config"},
    "tokens": set(),
    "credential": set(),
    "leader": {"credential"},
    "config": {"tokens"},
    "model": {"config", "leader", "policy", "tokens"},
    "messages": {"config", "model"},
    "launch": {"config", "credential", "leader", "messages"},
    "transport": {"config", "credential", "messages", "model", "policy"},
    "report": {"config", "messages", "model"},
    "inspect": {"config", "messages", "model"},
    "supervisors": {"config", "credential", "inspect", "messages", "model", "policy", "transport"},
    "actors": set(),  # its precompiled header: system headers only
    "actors/common": {"config", "messages", "model", "policy"},
    "actors/loader": {"actors/common", "config", "messages", "model"},
    "actors/diloco": {"actors/common", "config", "credential", "inspect", "messages", "model",
                      "policy", "transport"},
    "actors/recovery": {"config", "messages", "model", "policy", "transport"},
    "actors/stage": {"actors/common", "actors/diloco", "actors/recovery", "config", "credential", "inspect",
                     "messages", "model", "policy", "supervisors", "transport"},
    "actors/tracker": {"actors/common", "actors/diloco", "actors/loader", "actors/recovery",
                       "config", "credential",
                       "inspect", "messages", "model", "policy", "supervisors", "transport"},
    "actors/console": {"actors/common", "config", "credential", "inspect", "messages", "model",
                       "supervisors", "transport"},
    "actors/membership": {"actors/common", "actors/console", "config", "credential", "inspect",
                          "leader", "messages", "model", "policy", "supervisors", "transport"},
    "actors/balancer": {"actors/common", "config", "inspect", "messages", "model", "policy",
                        "supervisors"},
}
# The composition root and everything above it may include anything below.
TOP = {"actors/runtime", "apps", "web", "bench"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def library(path):
    parts = path.split("/")
    if parts[0] == "actors" and len(parts) > 2:
        return "actors/" + parts[1]
    return parts[0]


def main(root):
    known = set(ALLOWED) | TOP
    bad = []
    for top in sorted(set(p.split("/")[0] for p in known)):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".hpp", ".cpp", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                lib = library(path)
                if lib in TOP:
                    continue
                if lib not in ALLOWED:
                    bad.append(f"{path}: folder {lib} has no layer in tests/layers/check_layers.py")
                    continue
                with open(os.path.join(root, path), errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue
                        target = library(m.group(1))
                        if target == lib or target not in known:
                            continue
                        if target not in ALLOWED[lib]:
                            bad.append(f"{path}:{n}: {lib} includes {m.group(1)} ({target} is not below it)")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} include(s) against the layers of docs/architecture.md §1")
        return 1
    print(f"ok: every include points down ({len(ALLOWED) + len(TOP)} libraries)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
