"""The package ships type stubs (py.typed, _pagedkv.pyi, replay.pyi) that name every public
class, function and member of the extension module."""

from __future__ import annotations

import ast
import inspect
import pathlib

import pagedkv
from pagedkv import _pagedkv

PACKAGE = pathlib.Path(pagedkv.__file__).parent


def stub_names(path: pathlib.Path):
    tree = ast.parse(path.read_text())
    top, members = set(), {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            members[node.name] = names
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, (ast.AnnAssign, ast.Assign)):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            top.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            top.update(a.asname or a.name for a in node.names)
    return top, members


def public_members(cls):
    own = set()
    for name, _ in inspect.getmembers(cls):
        if name.startswith("_") or name in ("as_dict",):
            continue
        if any(name in vars(base) for base in cls.__mro__ if base.__module__ == "builtins"):
            continue
        own.add(name)
    return own


def check(module, stub):
    top, members = stub_names(stub)
    missing = []
    for name in dir(module):
        if name.startswith("_") or name.endswith("_json"):
            continue
        if name not in top:
            missing.append(name)
            continue
        obj = getattr(module, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            missing += [f"{name}.{m}" for m in public_members(obj) - members.get(name, set())]
    assert not missing, f"{stub.name} lacks: {missing}"


def test_package_is_typed():
    assert (PACKAGE / "py.typed").exists()


def test_extension_stub_is_complete():
    check(_pagedkv, PACKAGE / "_pagedkv.pyi")


def test_replay_stub_is_complete():
    check(_pagedkv.replay, PACKAGE / "replay.pyi")
