"""Fails when a function outside tests and binding tables is longer than 60 lines (DESIGN.md,
"Conventions": functions fit on a screen; a longer one is split into named steps).

Scans the git-tracked C++/CUDA sources (.h, .cc, .cu, .cuh) except tests/, the Python binding
tables (python/src/bind_*.cc) and third-party folders. A function's length is the number of lines
strictly between the `{` that opens its body and the matching `}`; braces in comments, string,
character and raw-string literals and preprocessor lines do not count. Only outermost bodies are
measured (a lambda or local class inside a function is part of it); a lambda assigned at
namespace or class scope counts as a function. Bodies of namespaces, classes, structs, enums,
`extern "C"` blocks and brace initializers (a long array or table) are not functions.

Each function over the limit is printed as `path:line: Name has N body lines (limit 60)`; the
exit status is 1 when there is any, or when a file's braces do not balance. PENDING lists the
few long functions left to a change in progress elsewhere, each with its reason; they are printed
as notes, and an entry that is no longer long fails, so the list only shrinks.

Usage: python3 tests/layering/check_function_length.py [SOURCE_DIR]   (default: this checkout)
       python3 tests/layering/check_function_length.py --self-test   (the checker on inline
                                                                        examples)
"""

import pathlib
import re
import subprocess
import sys

LIMIT = 60
SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
THIRD_PARTY_DIRS = ("third_party", "third-party", "external", "vendor")
BINDING_TABLE = re.compile(r"^python/src/bind_[^/]*\.cc$")
# Long functions in code that another change is rewriting, (path, name): why they wait. Each must
# still be over the limit (a stale entry fails), so the list only shrinks.
PENDING = {
}


def selected(rel: str) -> bool:
    """True for a repo-relative path the rule applies to."""
    parts = rel.split("/")
    if not rel.endswith(SOURCE_SUFFIXES) or parts[0] == "tests":
        return False
    if BINDING_TABLE.match(rel):
        return False
    return not any(part in THIRD_PARTY_DIRS for part in parts[:-1])


def tracked_files(root: pathlib.Path):
    """Repo-relative paths of the tracked files (every file when `root` is not a git checkout)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        return sorted(p for p in out.decode("utf-8").split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        skip = ("build", ".")
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                      if p.is_file() and not any(part.startswith(skip)
                                                 for part in p.relative_to(root).parts))


def strip_code(text: str) -> str:
    """`text` with comments, literals' contents and preprocessor lines blanked to spaces (newlines
    kept, so offsets keep their line numbers). Literals keep their quotes."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True  # only whitespace since the last newline

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c == "#":
            end = i
            while end < n and (text[end] != "\n" or text[end - 1] == "\\"):
                end += 1
            blank(i, end)
            i = end
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif c == '"' and re.search(r"(?:^|[^\w])(?:u8|u|U|L)?R$", text[max(0, i - 3):i]):
            m = re.compile(r'"([^()\\\s]{0,16})\(').match(text, i)
            close = text.find(")" + m.group(1) + '"', m.end()) if m else -1
            end = n if close < 0 else close + len(m.group(1)) + 1
            blank(i + 1, end)
            i = end + 1
        elif c == '"' or (c == "'" and not _digit_separator(text, i)):
            end = i + 1
            while end < n and text[end] != c and text[end] != "\n":
                end += 2 if text[end] == "\\" else 1
            blank(i + 1, min(end, n))
            i = end + 1
        else:
            i += 1
    return "".join(out)


def _digit_separator(text: str, i: int) -> bool:
    """True when the quote at `i` separates digits (1'000'000), not a character literal."""
    m = re.search(r"[\w.]+$", text[max(0, i - 64):i])
    return bool(m) and m.group(0)[0].isdigit()


def _top_level(head: str):
    """(index, char) of the characters of `head` outside (), [] and {} groups."""
    depth = 0
    for k, c in enumerate(head):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            yield k, c


def _without_prefix(head: str) -> str:
    """`head` without leading `template <...>` clauses, attributes and access labels."""
    s = head.strip()
    while True:
        m = re.match(r"(?:public|protected|private)\s*:(?!:)\s*|\[\[.*?\]\]\s*", s, re.S)
        if m:
            s = s[m.end():]
            continue
        m = re.match(r"template\s*<", s)
        if not m:
            return s
        depth, k = 1, m.end()
        while k < len(s) and depth:
            depth += {"<": 1, ">": -1}.get(s[k], 0)
            k += 1
        s = s[k:].lstrip()


def _assignment(head: str) -> int:
    """Index of the last top-level `=` of `head` that is an assignment (-1 when none)."""
    last = -1
    for k, c in _top_level(head):
        if c != "=" or head[k + 1:k + 2] == "=" or head[k - 1:k] in tuple("=!<>+-*/%&|^"):
            continue
        if re.search(r"\boperator\s*$", head[:k]):
            continue
        last = k
    return last


# What may follow a function's parameter list before its body.
QUALIFIERS = re.compile(r"^(?:\s*(?:&&|&|(?:const|volatile|noexcept|override|final|mutable|"
                        r"constexpr|try)\b))*\s*(?:->.*)?$", re.S)


def classify(head: str) -> str:
    """What a `{` opens at namespace or class scope, from the text since the last statement:
    "function" (a body, lambdas included), "scope" (namespace, class, enum, extern block: its
    inside is read statement by statement) or "data" (a brace initializer)."""
    s = _without_prefix(head)
    if re.match(r"(?:inline\s+)?namespace\b", s) or re.match(r'extern\s*"[^"]*"', s):
        return "scope"
    eq = _assignment(s)
    if eq >= 0:
        return "function" if s[eq + 1:].lstrip().startswith("[") else "data"
    if re.match(r"(?:typedef\s+)?(?:class|struct|union|enum)\b", s):
        return "scope"
    unclosed = _unclosed_paren(s)
    if unclosed >= 0:  # a `{` inside an open `(`: a lambda argument, or data
        argument = s[unclosed + 1:].split(",")[-1].lstrip()
        return "function" if argument.startswith("[") else "data"
    last_paren = _last_top_level_close(s, ")")
    if last_paren >= 0 and QUALIFIERS.match(s[last_paren + 1:]):
        return "function"
    if re.search(r"\)\s*(?:noexcept\s*)?:(?!:)", s) and s.rstrip().endswith((")", "}")):
        return "function"  # a constructor after its initializer list (not a member's `b_{`)
    if s.rstrip().endswith("]") and "[" in s:
        return "function"  # a lambda without parameters
    return "data"


def _unclosed_paren(s: str) -> int:
    """Index of the innermost `(` of `s` still open at its end (-1 when none)."""
    stack = []
    for k, c in enumerate(s):
        if c == "(":
            stack.append(k)
        elif c == ")" and stack:
            stack.pop()
    return stack[-1] if stack else -1


def _last_top_level_close(s: str, char: str) -> int:
    depth, last = 0, -1
    for k, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and c == char:
                last = k
    return last


def function_name(head: str) -> str:
    """The qualified name before a function head's parameter list, or "lambda"."""
    s = _without_prefix(head)
    eq = _assignment(s)
    if eq >= 0 or s.rstrip().endswith("]"):
        m = re.search(r"([\w:~]+)\s*=\s*$", s[:eq + 1]) if eq >= 0 else None
        return f"lambda {m.group(1)}" if m else "lambda"
    m = re.search(r"((?:[\w~]+\s*::\s*)*(?:operator\s*[^\s(]+|~?\w+))\s*(?:<[^()]*>)?\s*\(", s)
    return re.sub(r"\s+", "", m.group(1)) if m else "function"


def long_functions(text: str, limit: int = LIMIT):
    """(line, name, body lines) of every outermost function of `text` longer than `limit`;
    raises ValueError when the braces do not balance."""
    code = strip_code(text)
    found = []
    head_start = 0  # where the current statement's text begins
    collapsed = []  # brace groups of the current statement, replaced by "{}"
    depth = 0
    i = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c == ";":
            head_start, collapsed = i + 1, []
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"line {code.count(chr(10), 0, i) + 1}: unmatched }}")
            head_start, collapsed = i + 1, []
        elif c == "{":
            head = _collapse(code, head_start, i, collapsed)
            kind = classify(head)
            if kind == "scope":
                depth += 1
                head_start, collapsed = i + 1, []
            else:
                close = _matching(code, i)
                if kind == "function":
                    open_line = code.count("\n", 0, i) + 1
                    body = code.count("\n", i, close) - 1
                    if body > limit:
                        found.append((open_line, function_name(head), body))
                    head_start, collapsed = close + 1, []
                else:
                    collapsed.append((i, close))
                i = close
        i += 1
    if depth != 0:
        raise ValueError(f"{depth} unclosed {{ at the end")
    return found


def _matching(code: str, i: int) -> int:
    depth = 0
    for k in range(i, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    raise ValueError(f"line {code.count(chr(10), 0, i) + 1}: unmatched {{")


def _collapse(code: str, start: int, end: int, groups) -> str:
    """code[start:end] with each brace group of `groups` replaced by "{}"."""
    parts, k = [], start
    for a, b in groups:
        parts.append(code[k:a])
        parts.append("{}")
        k = b + 1
    parts.append(code[k:end])
    return "".join(parts)


def judge(found, pending):
    """Messages for the long functions `found` ({path: [(line, name, body lines)]}, None for a
    file whose braces do not match): (problems, notes). An entry of `pending` found long is a note;
    one no longer found long is a problem (remove it from the list)."""
    problems, notes, seen = [], [], set()
    for rel, functions in sorted(found.items()):
        if functions is None:
            problems.append(f"{rel}: cannot match braces")
            continue
        for line, name, body in functions:
            message = f"{rel}:{line}: {name} has {body} body lines (limit {LIMIT})"
            if (rel, name) in pending:
                seen.add((rel, name))
                notes.append(f"{message}; pending: {pending[(rel, name)]}")
            else:
                problems.append(message)
    for rel, name in sorted(set(pending) - seen):
        problems.append(f"{rel}: {name} is listed in PENDING but no longer over {LIMIT} lines; "
                        "remove it from the list")
    return problems, notes


def check(root: pathlib.Path) -> int:
    found = {}
    for rel in tracked_files(root):
        if not selected(rel) or not (root / rel).is_file():
            continue
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        try:
            found[rel] = long_functions(text)
        except ValueError as e:
            print(f"{rel}: {e}")
            found[rel] = None
    problems, notes = judge(found, PENDING)
    for message in notes + problems:
        print(message)
    if problems:
        sys.stdout.flush()
        print(f"{len(problems)} problem(s) in {len(found)} files; split long functions into "
              'named steps (DESIGN.md, "Conventions")', file=sys.stderr)
        return 1
    print(f"no function over {LIMIT} lines in {len(found)} files of {root} "
          f"({len(notes)} pending elsewhere)")
    return 0


def _body(lines: int, statement: str = "x += 1;") -> str:
    return "".join(f"  {statement}\n" for _ in range(lines))


SELF_TEST_FILES = {
    # name: (text, expected (line, name, body lines) list)
    "long function": (
        "int Long(int x) {\n" + _body(61) + "  return x;\n}\n",
        [(1, "Long", 62)]),
    "exactly the limit": ("void Fits() {\n" + _body(60) + "}\n", []),
    "long array initialiser, struct, enum and namespace": (
        "namespace a {\nconstexpr int kTable[] = {\n" + _body(80, "1,") + "};\n"
        "struct Big {\n" + _body(80, "int x;") + "  int Small() const { return 1; }\n};\n"
        "enum class E : int {\n" + _body(80, "kA,") + "};\n"
        "const std::vector<Row> kRows{\n" + _body(80, "{1, 2},") + "};\n"
        "}  // namespace a\n",
        []),
    "braces in comments, strings, chars, raw strings and macros": (
        "namespace {\nint Tricky() {\n  const char* s = \"}}\";  // }\n  char c = '}';\n"
        "  /* } */ auto r = R\"x(})x\";\n  int big = 1'000'000;\n#define CLOSE }\n" +
        _body(60) + "  return 0;\n}\n}\n",
        [(2, "Tricky", 66)]),
    "method, constructor with initializer list, operator, extern C and a lambda": (
        "class Server : public Base {\n public:\n  Server(int a) : a_(a), b_{a} {\n" + _body(61) +
        "  }\n  bool operator==(const Server& o) const {\n" + _body(61) + "  }\n};\n"
        'extern "C" {\nint Entry(void) {\n' + _body(61) + "}\n}\n"
        "const auto kMake = [](int x) -> int {\n" + _body(61) + "};\n"
        "void HttpServer::AddRoutes() {\n  Get(\"/\", [](const Request& r) {\n" + _body(61) +
        "  });\n}\n",
        [(3, "Server", 61), (66, "operator==", 61), (131, "Entry", 61), (195, "lambda kMake", 61),
         (258, "HttpServer::AddRoutes", 63)]),
}


def self_test() -> int:
    failed = 0
    for name, (text, want) in SELF_TEST_FILES.items():
        try:
            got = long_functions(text)
        except ValueError as e:
            got = f"ValueError: {e}"
        if got != want:
            print(f"self-test '{name}': expected {want}, got {got}", file=sys.stderr)
            failed += 1
    want_selected = {"engine/a.cc": True, "bench/b.cu": True, "include/pagedkv/c.h": True,
                     "tests/engine/d.cc": False, "python/src/bind_engine.cc": False,
                     "python/src/module.cc": True, "third_party/x/y.h": False,
                     "engine/README.md": False}
    for rel, want in want_selected.items():
        if selected(rel) != want:
            print(f"self-test: selected({rel!r}) should be {want}", file=sys.stderr)
            failed += 1
    problems, notes = judge({"a.cc": [(1, "F", 70)], "b.cc": [(3, "G", 61)], "c.cc": None},
                            {("a.cc", "F"): "why", ("d.cc", "H"): "why"})
    if len(problems) != 3 or len(notes) != 1 or not notes[0].startswith("a.cc:1: F"):
        print(f"self-test: judge gave problems {problems}, notes {notes}", file=sys.stderr)
        failed += 1
    try:
        long_functions("void f() {\n")
        print("self-test: an unclosed brace should be an error", file=sys.stderr)
        failed += 1
    except ValueError:
        pass
    if failed:
        return 1
    print("self-test: the checker flags long functions and nothing else")
    return 0


def main(argv) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(argv[1]) if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    return check(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
