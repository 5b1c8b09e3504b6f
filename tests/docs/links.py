#!/usr/bin/env python3
"""Every relative link in the tree's Markdown pages leads somewhere.

    links.py SOURCE_DIR

Checks each [text](target) of README.md, docs/, plugins/*/README.md, sdk/ and python/ pages
whose target is not a URL: the file must exist, and a #fragment must name a heading of the
target page, spelled the way GitHub turns headings into anchors (lower case, punctuation other
than '-' and '_' dropped, spaces turned into '-', a repeated heading numbered -1, -2, ...).
Prints every broken link as FILE:LINE: TARGET (why) and exits 1 if there is one."""
import os
import re
import sys

LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def page_lines(path):
    """The page's lines outside code fences, with their numbers."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                yield number, line


def slug(heading):
    text = re.sub(r"`|\*\*|\*", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        for _, line in page_lines(path):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def pages(root):
    for top in ("README.md",):
        yield os.path.join(root, top)
    for folder in ("docs", "plugins", "sdk", "python", "tools", "bench", "tests", "examples"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = [d for d in dirnames if d not in ("build", "__pycache__", "corpus")]
            for name in filenames:
                if name.endswith(".md"):
                    yield os.path.join(dirpath, name)


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    root = sys.argv[1]
    broken = 0
    checked = 0
    for page in pages(root):
        for number, line in page_lines(page):
            line = re.sub(r"`[^`]*`", "", line)
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                checked += 1
                file_part, _, fragment = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(page), file_part)) if file_part else page
                where = f"{os.path.relpath(page, root)}:{number}: {target}"
                if not os.path.exists(dest):
                    print(f"{where} (no such file)")
                    broken += 1
                elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
                    print(f"{where} (no heading with that anchor)")
                    broken += 1
    print(f"{checked} links checked, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
