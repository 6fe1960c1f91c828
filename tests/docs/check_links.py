"""Fails when a relative link in README.md or docs/*.md does not resolve: the file (or folder) it
names must exist in the checkout, and a #anchor must name a heading of the target Markdown file
(GitHub's rule: lower case, punctuation dropped, spaces to dashes, -1, -2, ... for repeats).
Links to web pages (http, https, mailto) are not fetched. Code spans and fenced code blocks are
skipped, so a link written as code is not a link.

Usage: python3 tests/docs/check_links.py [SOURCE_DIR]   (default: the checkout holding this file)
"""

import pathlib
import re
import sys

LINK = re.compile(r"(?<!\!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\((?P<target>[^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text: str, keep_code: bool = False):
    """(line number, line) of the lines outside fenced code blocks, inline code removed unless
    keep_code."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, line if keep_code else re.sub(r"`[^`]*`", "", line)


def slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: pathlib.Path) -> set:
    found, seen = set(), {}
    for _, line in prose_lines(path.read_text(encoding="utf-8"), keep_code=True):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', path.read_text(encoding="utf-8")):
        found.add(m.group(1))
    return found


def check_file(path: pathlib.Path, root: pathlib.Path):
    problems = []
    text = path.read_text(encoding="utf-8")
    for number, line in prose_lines(text):
        targets = [m.group("target") for m in LINK.finditer(line)]
        targets += [m.group("target") for m in IMAGE.finditer(line)]
        for target in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = path if not file_part else (path.parent / file_part).resolve()
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not dest.exists():
                problems.append(f"{where}: {file_part} does not exist")
                continue
            if root not in dest.parents and dest != root:
                problems.append(f"{where}: points outside the checkout")
                continue
            if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(root)}")
    return problems


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
    root = root.resolve()
    files = [root / "README.md"] + sorted((root / "docs").glob("**/*.md"))
    problems = []
    links = 0
    for f in files:
        problems += check_file(f, root)
        links += sum(len(LINK.findall(l)) for _, l in prose_lines(f.read_text(encoding="utf-8")))
    for p in problems:
        print(p)
    print(f"check_links: {len(files)} files, {links} links, {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
