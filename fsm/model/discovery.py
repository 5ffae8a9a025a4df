"""Finding machines: registered ones (bundled, third-party, or the workspace's own), and machine
files named by path.

Every registered machine, the three bundled with fsm included, is an entry point in the
``fsm.machines`` group whose name is the machine name and whose object is the module (or
package) holding ``machine.yaml`` beside it, or the path of the machine file itself::

    [project.entry-points."fsm.machines"]
    my-machine = "my_package.my_machine"

A workspace may also name machine files of its own in ``fsm.toml``, so that they are known by
name like installed ones (``fsm new counter``, and ``fsm ls``, ``fsm run --all``, ``fsm worker``
and ``fsm serve`` include them)::

    [machines]
    counter = "machines/counter/machine.yaml"   # or the folder holding machine.yaml

The command line looks them up in the workspace it works in (:func:`use_workspace`); the Python
API passes ``workspace=``. Such a name never shadows another: one that an installed machine
already has is refused where it is used, like two entry points of one name.

The engine imports no machine package itself: it only follows entry points. fsm's own three
are also known without reading any distribution's metadata (:data:`BUNDLED`, the same entry
points as pyproject's: a test keeps them equal): importing ``importlib.metadata`` (and the email
parser it reads metadata with) was a tenth of ``fsm status``'s start-up.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from fsm.base.errors import DefinitionError, UnknownMachineError
from fsm.base.reading import read_limited

if TYPE_CHECKING:  # finding a machine needs neither pydantic nor the machine's module
    import importlib.metadata

    from fsm.model.machine import Machine

__all__ = [
    "MachineEntry",
    "find_machine",
    "open_machine",
    "registered_machines",
    "use_workspace",
    "workspace_machines",
]

ENTRY_POINT_GROUP = "fsm.machines"
BUNDLED = {
    "ccw-loop": "fsm_machines.ccw_loop",
    "issue-manager": "fsm_machines.issue_manager",
    "skill-tuning": "fsm_machines.skill_tuning",
}
"""fsm's own machines: the entry points its distribution registers (pyproject.toml)."""


@dataclass(frozen=True)
class MachineEntry:
    """A registered machine: its name, machine file, and where it came from."""

    name: str
    path: Path
    source: str


_CURRENT: list[Path] = []
"""The workspace whose ``[machines]`` the lookups see when none is given (set by the CLI)."""


def use_workspace(path: Path | None) -> None:
    """Make ``path``'s ``[machines]`` part of every lookup that names no workspace (the command
    line's ``-C``); None forgets it."""
    _CURRENT[:] = [] if path is None else [path]


def workspace_machines(workspace: Path | None = None) -> dict[str, MachineEntry]:
    """The machines ``workspace``'s fsm.toml names in ``[machines]`` (the current workspace's when
    None), their paths resolved against the workspace; OptionsError when fsm.toml is bad."""
    if workspace is None:
        if not _CURRENT:
            return {}
        workspace = _CURRENT[0]
    root = workspace.resolve()
    try:
        text = read_limited(root / "fsm.toml", _MAX_TOML)
    except FileNotFoundError:
        return {}
    except OSError:
        text = None  # load_config says what is wrong with it
    if text is not None and b"machines" not in text:
        # No [machines] table can be in it: listing and naming stay free of the configuration
        # module (and of pydantic, which it imports).
        return {}
    seen = _SEEN.get(root)
    if seen is not None and text is not None and seen[0] == text:
        return dict(seen[1])
    from fsm.model.config import load_config

    config = load_config(root)
    found: dict[str, MachineEntry] = {}
    for name, where in config.definitions.items():
        path = root / where
        if path.suffix not in {".yaml", ".yml"}:
            path = path / "machine.yaml"
        found[name] = MachineEntry(name, path, f"workspace ({root / 'fsm.toml'} [machines])")
    if text is not None:
        _SEEN[root] = (text, dict(found))
    return found


_MAX_TOML = 1024 * 1024
"""fsm.toml's size limit (as :data:`fsm.model.config.MAX_TOML_BYTES`, which imports pydantic)."""
_SEEN: dict[Path, tuple[bytes, dict[str, MachineEntry]]] = {}
"""Each workspace's fsm.toml as last read, and the machines it named (one parse per process
while it does not change)."""


def registered_machines(workspace: Path | None = None) -> dict[str, MachineEntry]:
    """Every registered machine by name: fsm's own entry points first, then the others, then
    the workspace's ``[machines]`` (see :func:`workspace_machines`).

    A name is never taken by two machines. An entry point naming a bundled machine is ignored
    (a plugin cannot replace ``ccw-loop`` behind the user's back), and so is a workspace
    machine named like an installed one; a name that two other distributions register is
    refused where it is used. :func:`name_clashes` says each.
    """
    return _registered(workspace)[0]


def name_clashes(workspace: Path | None = None) -> dict[str, str]:
    """Each machine name registered more than once, with what happens to it (one line)."""
    return _registered(workspace)[1]


def _registered(workspace: Path | None) -> tuple[dict[str, MachineEntry], dict[str, str]]:
    found, clashes = _installed()
    for name, entry in workspace_machines(workspace).items():
        if name in found:
            # The installed machine keeps its name; fsm machines and fsm check say why the
            # workspace's is not used.
            clashes[name] = (
                f"machine '{name}' of {entry.source} has the name of an installed machine "
                f"({found[name].source}) and is not used: give it another name"
            )
        elif name not in clashes:
            found[name] = entry
    return found, clashes


def _installed() -> tuple[dict[str, MachineEntry], dict[str, str]]:
    import importlib.metadata

    own = _own_machines()
    points: dict[str, dict[str, importlib.metadata.EntryPoint]] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        # The same distribution seen twice on sys.path registers one value twice: no clash.
        points.setdefault(entry.name, {}).setdefault(entry.value, entry)
    found = dict(own)
    clashes: dict[str, str] = {}
    for name, by_value in points.items():
        if name in own:
            others = [repr(value) for value in by_value if value != BUNDLED[name]]
            if others:
                clashes[name] = (
                    f"machine '{name}' is bundled with fsm: the entry point "
                    f"{' and '.join(others)} registering the same name is ignored"
                )
        elif len(by_value) > 1:
            clashes[name] = (
                f"machine '{name}' is registered by {len(by_value)} entry points "
                f"({', '.join(repr(value) for value in by_value)}): uninstall all but one"
            )
        else:
            (entry,) = by_value.values()
            found[name] = _entry(entry, f"entry point {entry.value}")
    return found, clashes


_OWN: dict[str, MachineEntry] = {}


def _own_machines() -> dict[str, MachineEntry]:
    """fsm's own machines that are installed, found without importing them (their packages'
    folders: no distribution's metadata read, no machine module imported)."""
    if not _OWN:
        for name, package in BUNDLED.items():
            try:
                spec = importlib.util.find_spec(package)
            except ImportError:
                continue
            folders = spec.submodule_search_locations if spec is not None else None
            if folders:
                path = Path(next(iter(folders))) / "machine.yaml"
                _OWN[name] = MachineEntry(name, path, f"bundled ({package})")
    return dict(_OWN)


def _entry(entry: importlib.metadata.EntryPoint, source: str) -> MachineEntry:
    return MachineEntry(entry.name, _entry_path(entry), source)


def _entry_path(entry: importlib.metadata.EntryPoint) -> Path:
    try:
        target = entry.load()
    except Exception as exc:
        raise DefinitionError(
            entry.value, [f"cannot load entry point '{entry.name}': {exc}"]
        ) from exc
    if isinstance(target, ModuleType) and target.__file__:
        return Path(target.__file__).parent / "machine.yaml"
    if isinstance(target, str | Path):
        return Path(target)
    raise DefinitionError(
        entry.value, [f"entry point '{entry.name}' is neither a module nor a path"]
    )


def find_machine(target: str, workspace: Path | None = None) -> MachineEntry:
    """The machine named ``target`` (see :func:`registered_machines`), or the machine file at
    path ``target``.

    Bundled names and ``.yaml`` paths are resolved without reading (and importing) the
    third-party entry points: a machine name has no ``.``, so no registered machine can be
    named like a machine file.
    """
    own = _own_machines()
    if target in own:
        return own[target]
    path = Path(target)
    if path.suffix in {".yaml", ".yml"}:
        return _machine_file(path)
    machines, clashes = _registered(workspace)
    if target in machines:
        return machines[target]
    clash = clashes.get(target)
    if clash is not None:
        raise DefinitionError(target, [clash])
    if path.is_dir():
        return _machine_file(path / "machine.yaml")
    from fsm.model.definition import did_you_mean

    raise UnknownMachineError(
        f"unknown machine '{target}'{did_you_mean(target, machines)}; 'fsm machines' lists the "
        "ones known here (a workspace's own machines are named in its fsm.toml [machines]: "
        "from another folder, give -C WORKSPACE or the machine folder's path)"
    )


def _machine_file(path: Path) -> MachineEntry:
    if not path.exists():
        raise UnknownMachineError(f"no machine file at {path}")
    return MachineEntry(path.stem, path, str(path))


_CACHE: dict[Path, Machine] = {}


def open_machine(target: str, workspace: Path | None = None) -> Machine:
    """Load the machine named (or at) ``target``, once per process."""
    from fsm.model.machine import load_machine

    entry = find_machine(target, workspace)
    if entry.source != str(entry.path) and not entry.path.is_file():
        what = "is not a regular file" if entry.path.exists() else "is not there"
        raise UnknownMachineError(f"machine '{entry.name}' of {entry.source}: {entry.path} {what}")
    key = entry.path.resolve()
    if key not in _CACHE:
        expected = entry.name if entry.source != str(entry.path) else None
        _CACHE[key] = load_machine(entry.path, expected_name=expected)
    return _CACHE[key]
