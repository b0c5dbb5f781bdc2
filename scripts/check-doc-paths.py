#!/usr/bin/env python3
"""Fails when a document names a file or folder of the repository that does not exist.

Every `backticked` text in the given Markdown files that looks like a repository path (it
starts with crates/, docs/, scripts/, java/, python/ or fuzz/) must exist, so that a map of the
code is never out of date. Usage: scripts/check-doc-paths.py docs/server-layout.md [more.md]
"""

import os
import re
import sys

ROOTS = ("crates/", "docs/", "scripts/", "java/", "python/", "fuzz/")


def missing(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    named = {m.group(1) for m in re.finditer(r"`([^`\s]+)`", text) if m.group(1).startswith(ROOTS)}
    return sorted(p for p in named if not os.path.exists(p.rstrip("/")))


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    bad = 0
    for doc in argv:
        for p in missing(doc):
            print(f"{doc}: names {p}, which does not exist")
            bad += 1
    if bad:
        return 1
    print(f"check-doc-paths: every path named in {', '.join(argv)} exists")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
