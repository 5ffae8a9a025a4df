"""The public API: what `fsm` exports, and the exit code of every error."""

from __future__ import annotations

import importlib

import pytest

import fsm
from fsm.base import errors


def test_all_is_sorted_and_every_name_resolves() -> None:
    """`fsm.__all__` is sorted, and each name in it can be imported from `fsm`."""
    assert fsm.__all__ == sorted(fsm.__all__)
    for name in fsm.__all__:
        assert getattr(fsm, name) is not None


def test_every_error_is_exported_and_nothing_private() -> None:
    """Every public class of the errors module is exported, and nothing private is."""
    assert set(errors.__all__) <= set(fsm.__all__)
    assert not [n for n in fsm.__all__ if n.startswith("_")]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (errors.FsmError, 1),
        (errors.DiagramRenderError, 1),
        (errors.InputError, 2),
        (errors.UnknownMachineError, 2),
        (errors.UnknownInstanceError, 2),
        (errors.InvalidIdError, 2),
        (errors.OptionsError, 2),
        (errors.DocumentInputError, 2),
        (errors.MissingRequirementError, 2),
        (errors.RefusedError, 3),
        (errors.EventNotAllowedError, 3),
        (errors.GuardRejectedError, 3),
        (errors.ControlRefusedError, 3),
        (errors.StoreError, 6),
        (errors.CorruptDocumentError, 6),
        (errors.LockHeldError, 6),
        (errors.InstanceHeldError, 3),
        (errors.ForeignInstanceError, 3),
        (errors.StoreUnreachableError, 6),
        (errors.JournalMismatchError, 6),
        (errors.UnwritableDocumentError, 6),
        (errors.UnsafePathError, 6),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_every_error_knows_its_exit_code(error: type[errors.FsmError], code: int) -> None:
    """Each error class maps to the exit code the README documents."""
    assert error.exit_code == code
    assert issubclass(error, errors.FsmError)


def test_definition_error_lists_every_problem() -> None:
    """A DefinitionError keeps all problems and says how many more there are."""
    error = errors.DefinitionError("m.yaml", ["first", "second", "third"])
    assert error.problems == ["first", "second", "third"]
    assert str(error) == "m.yaml: first (and 2 more; run 'fsm check m.yaml')"


def test_lazy_exports_do_not_import_the_engine_until_used() -> None:
    """Importing `fsm` does not import `transitions`; using `fsm.Engine` does."""
    import subprocess
    import sys

    code = (
        "import sys, fsm; assert 'transitions' not in sys.modules; "
        "fsm.Engine; assert 'transitions' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert importlib.import_module("fsm.engine.engine").Engine is fsm.Engine


def test_every_error_class_lives_in_the_errors_module() -> None:
    """One exception tree: no module of fsm defines an exception class of its own outside
    fsm/base/errors.py (jsonio's JsonError is a ValueError its callers turn into fsm errors)."""
    import ast
    from pathlib import Path

    root = Path(fsm.__file__).parent
    outside = []
    for path in root.rglob("*.py"):
        if path.name in {"errors.py", "jsonio.py"}:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            bases = [getattr(b, "id", getattr(b, "attr", "")) for b in getattr(node, "bases", [])]
            if isinstance(node, ast.ClassDef) and any(b.endswith("Error") for b in bases):
                outside.append(f"{path.name}:{node.name}")
    assert outside == []
