"""A machine named by its file path loads with its module's siblings, as the docs lay it out."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fsm.base.errors import DefinitionError
from fsm.model.machine import load_machine
from tests.conftest import COUNTER

MODEL = '''\
from pydantic import BaseModel, ConfigDict


class Tally(BaseModel):
    """The document."""

    model_config = ConfigDict(extra="forbid")

    phase: str = "open"
    count: int = 0
'''

FUNCTIONS = """\
from fsm.model.registry import Registry

{import_line}

registry = Registry()
registry.document(Tally)
"""

MACHINE = """\
name: tally
version: 1
description: A machine whose model lives in model.py beside functions.py.
module: functions.py
document: Tally
state: {field: phase}
initial: open
storage: {document: "tallies/{id}.json"}
states:
  open: {description: Open.}
  closed: {description: Closed., final: true, tags: [success]}
transitions:
  - {event: close, source: open, dest: closed, description: Close it.}
"""


def _machine(folder: Path, import_line: str) -> Path:
    folder.mkdir()
    (folder / "model.py").write_text(MODEL)
    (folder / "functions.py").write_text(FUNCTIONS.format(import_line=import_line))
    (folder / "machine.yaml").write_text(MACHINE)
    return folder / "machine.yaml"


def test_a_module_imports_its_sibling_relatively(tmp_path: Path) -> None:
    """functions.py may import model.py beside it with `from .model import ...`."""
    machine = load_machine(_machine(tmp_path / "tally", "from .model import Tally"))
    assert machine.document_model.__name__ == "Tally"


def test_an_absolute_sibling_import_is_answered_with_how_to_import_it(tmp_path: Path) -> None:
    """`from model import ...` fails with a hint to import the sibling relatively."""
    with pytest.raises(DefinitionError) as caught:
        load_machine(_machine(tmp_path / "tally", "from model import Tally"))
    assert "model.py is beside functions.py; import it relatively (from .model import ...)" in str(
        caught.value
    )


def test_two_copies_of_a_machine_folder_load_separately(tmp_path: Path) -> None:
    """Machine folders are packages of their own: two copies never share their modules."""
    first = tmp_path / "a"
    second = tmp_path / "b"
    shutil.copytree(COUNTER.parent, first)
    shutil.copytree(COUNTER.parent, second)
    one = load_machine(first / "machine.yaml")
    other = load_machine(second / "machine.yaml")
    assert one.document_model is not other.document_model
