"""The public API of the package: only pagedkv's own names are public (`__all__` lists exactly
them), every public class, function, method and property has a docstring, and the stubs
(_pagedkv.pyi, replay.pyi) name every public name and member and nothing else."""

import ast
import inspect
import pathlib
import re

import numpy as np
import pytest

import pagedkv
import pagedkv.replay
from pagedkv import _pagedkv

PACKAGE = pathlib.Path(pagedkv.__file__).parent


def public_names(module):
    return {n for n in dir(module) if not n.startswith("_")}


def stub_exports(path: pathlib.Path):
    """Names a stub exports (classes, functions, variables, `import X as X` re-exports) and the
    public members of each class it declares."""
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
            members[node.name] = {n for n in names if not n.startswith("_")}
        elif isinstance(node, ast.FunctionDef):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
        elif isinstance(node, ast.Assign):
            top.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            # PEP 484: only `from m import X as X` re-exports X.
            top.update(a.asname for a in node.names if a.asname == a.name)
    return {n for n in top if not n.startswith("_")}, members


def runtime_members(cls):
    """Public attributes defined by `cls` itself or a pagedkv base (not by object/Exception)."""
    own = set()
    for name, _ in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if any(name in vars(base) for base in cls.__mro__ if base.__module__ == "builtins"):
            continue
        own.add(name)
    return own


def has_docstring(obj) -> bool:
    """True when `obj` has a docstring beyond pybind11's generated signature lines."""
    doc = obj.__doc__  # its own: inspect.getdoc would fall back to a base class's
    if not doc:
        return False
    name = getattr(obj, "__name__", "")
    for line in doc.splitlines():
        text = line.strip()
        if not text or text == "Overloaded function.":
            continue
        if name and re.match(r"^(\d+\. )?%s\(" % re.escape(name), text):
            continue  # a signature line pybind11 writes
        return True
    return False


def undocumented(module, names):
    missing = []
    for name in sorted(names):
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            continue  # a submodule has its own check
        if not has_docstring(obj):
            missing.append(name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for member in sorted(runtime_members(obj)):
                attr = inspect.getattr_static(obj, member)
                if isinstance(attr, (staticmethod, classmethod)):
                    attr = getattr(obj, member)
                if not has_docstring(attr):
                    missing.append(f"{name}.{member}")
    return missing


def stub_mismatch(module, names, stub: pathlib.Path):
    top, members = stub_exports(stub)
    problems = [f"missing {n}" for n in sorted(names - top)]
    problems += [f"extra {n}" for n in sorted(top - names)]
    for name in sorted(names & top):
        obj = getattr(module, name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            have, declared = runtime_members(obj), members.get(name, set())
            problems += [f"missing {name}.{m}" for m in sorted(have - declared)]
            problems += [f"extra {name}.{m}" for m in sorted(declared - have)]
    return problems


def extension_names():
    """The extension's public names as `import pagedkv` shows them (its replay submodule is
    pagedkv.replay's business)."""
    return public_names(_pagedkv)


def test_all_lists_exactly_the_public_names():
    assert sorted(pagedkv.__all__) == sorted(public_names(pagedkv))
    assert len(set(pagedkv.__all__)) == len(pagedkv.__all__)
    assert sorted(pagedkv.replay.__all__) == sorted(public_names(pagedkv.replay))


def test_no_foreign_names_are_public():
    for name in pagedkv.__all__:
        obj = getattr(pagedkv, name)
        module = obj.__name__ if inspect.ismodule(obj) else getattr(obj, "__module__", "")
        assert module.startswith("pagedkv"), f"pagedkv.{name} comes from {module}"
    for name in pagedkv.replay.__all__:
        module = getattr(getattr(pagedkv.replay, name), "__module__", "")
        assert module.startswith("pagedkv"), f"pagedkv.replay.{name} comes from {module}"


def test_every_public_name_has_a_docstring():
    missing = undocumented(pagedkv, public_names(pagedkv))
    missing += [f"replay.{n}" for n in undocumented(pagedkv.replay, public_names(pagedkv.replay))]
    assert not missing, f"no docstring: {missing}"
    assert has_docstring(pagedkv) and has_docstring(pagedkv.replay)


def test_extension_stub_matches_the_extension():
    problems = stub_mismatch(_pagedkv, extension_names(), PACKAGE / "_pagedkv.pyi")
    assert not problems, problems


def test_package_names_have_a_stub_entry():
    # pagedkv re-exports the extension (its stub is _pagedkv.pyi) and adds Python code that is
    # its own stub (py.typed); every name is one or the other.
    extension = extension_names()
    for name in pagedkv.__all__:
        obj = getattr(pagedkv, name)
        if name in extension and obj is getattr(_pagedkv, name):
            continue
        source = inspect.getsourcefile(obj)
        assert source is not None and source.endswith(".py"), f"pagedkv.{name} has no stub"


def test_replay_stub_matches_the_replay_module():
    problems = stub_mismatch(
        pagedkv.replay, public_names(pagedkv.replay), PACKAGE / "replay.pyi")
    assert not problems, problems


def test_has_docstring_rejects_a_bare_signature():
    def f():
        pass

    assert not has_docstring(f)
    f.__doc__ = "f(x: int) -> int\n"
    assert not has_docstring(f)
    f.__doc__ = "f(x: int) -> int\n\nDoubles x."
    assert has_docstring(f)


def test_import_refuses_numpy_2_when_pybind11_cannot_speak_it():
    # The module's own pybind11 and this NumPy load together (this test runs at all).
    pagedkv._check_numpy(np.__version__, _pagedkv._pybind11_version)
    assert len(_pagedkv._pybind11_version) == 2
    pagedkv._check_numpy("1.24.2", (2, 10))
    pagedkv._check_numpy("2.4.6", (2, 12))
    with pytest.raises(ImportError, match=r"pybind11 2\.10.*NumPy 2\.4\.6.*numpy<2"):
        pagedkv._check_numpy("2.4.6", (2, 10))
