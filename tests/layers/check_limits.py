#!/usr/bin/env python3
"""Fails when a product file is over 500 lines or a function over 120, naming each.

Product files: every .cpp and .hpp of the checkout outside tests/ (and outside build trees).
A file's lines: its newline-separated lines. A function's lines: from the first line of its
signature to its closing brace, both counted, for every function defined at namespace or class
scope (lambdas and local blocks count toward the function they stand in). The source is read
with comments and string literals blanked, braces matched, and a brace counted as a function's
when the text before it holds a parameter list and every scope around it is a namespace or a
type.

Usage: check_limits.py ROOT  (prints every file and function over its limit; exit 1)
"""
import os
import re
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 120
SKIP = {"tests", "build", "build-gpu", ".git", "data", "runs", "node_modules", ".gpu"}


def blank(src):
    """`src` with comments, preprocessor lines, string and character literals replaced by spaces
    (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        at_line_start = i == 0 or src[i - 1] == "\n"
        if at_line_start and src[i:].lstrip(" \t").startswith("#"):
            j = i  # a preprocessor line, with its continuations
            while True:
                k = src.find("\n", j)
                k = n if k < 0 else k
                if k == n or not src[j:k].rstrip().endswith("\\"):
                    break
                j = k + 1
            j = k
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'R"([^(]*)\(', src[i:])
            if not m:
                out.append(src[i])
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = src.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
        elif src[i] in "\"'":
            if src[i] == "'" and 0 < i < n - 1 and src[i - 1].isalnum() and src[i + 1].isalnum():
                out.append(" ")  # a digit separator: 1'000
                i += 1
                continue
            j = i + 1
            while j < n and src[j] != src[i]:
                j += 2 if src[j] == "\\" else 1
            j = min(n, j + 1)
        else:
            out.append(src[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", src[i:j]))
        i = j
    return "".join(out)


def functions(src):
    """(name, first line, lines) of each function defined at namespace or class scope."""
    text = blank(src)
    stack, found, since = [], [], 0
    line = lambda pos: text.count("\n", 0, pos) + 1
    for pos, c in enumerate(text):
        if c == ";":
            since = pos + 1
        elif c == "{":
            head = text[since:pos]
            outer = all(kind in ("namespace", "type") for kind, _, _ in stack)
            if re.search(r"\bnamespace\b", head) and "(" not in head:
                kind = "namespace"
            elif re.search(r"\b(struct|class|union|enum)\b", head) and "(" not in head:
                kind = "type"
            elif outer and "(" in head and ")" in head and not head.rstrip().endswith("="):
                kind = "function"
            else:
                kind = "block"
            stripped = len(head) - len(head.lstrip())
            stack.append((kind, head, since + stripped))
            since = pos + 1
        elif c == "}":
            if stack:
                kind, head, start = stack.pop()
                if kind == "function":
                    m = re.search(r"([~\w:]+)\s*\(", head)
                    found.append((m.group(1) if m else head.strip()[:40], line(start),
                                  line(pos) - line(start) + 1))
            since = pos + 1
    return found


def main(root):
    bad = []
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.split(os.sep)[0] in SKIP:
            dirs[:] = []
            continue
        for name in sorted(files):
            if not name.endswith((".cpp", ".hpp")):
                continue
            path = os.path.join(dirpath, name)
            shown = os.path.relpath(path, root)
            src = open(path, errors="replace").read()
            lines = src.count("\n") + (0 if src.endswith("\n") or not src else 1)
            if lines > MAX_FILE_LINES:
                bad.append(f"{shown}: {lines} lines (a product file keeps to {MAX_FILE_LINES})")
            for fn, first, count in functions(src):
                if count > MAX_FUNCTION_LINES:
                    bad.append(f"{shown}:{first}: function {fn} is {count} lines "
                               f"(a function keeps to {MAX_FUNCTION_LINES})")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} file(s) or function(s) over their limits")
        return 1
    print(f"ok: every product file within {MAX_FILE_LINES} lines, every function within "
          f"{MAX_FUNCTION_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
