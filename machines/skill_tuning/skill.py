"""Reading a target skill folder: its markdown files and the code blocks embedded in them.

A skill (the layout of CCW's own skills) is a folder with ``SKILL.md``, phase files under
``phases/`` and specifications under ``specs/``. The diagnoses only ever see a :class:`Skill`,
an immutable snapshot read in one go, so every rule is a pure function of the files. Besides
its markdown, a snapshot knows every file in the folder (for the links a fix must not break)
and the keys of its JSON data files (``specs/rules/*.json``: the names code reading them must
use).

Text is decoded with ``surrogateescape`` so a file that is not valid UTF-8 still round-trips
byte for byte when a fix rewrites it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .markdown import CodeBlock, parse_code_blocks

__all__ = [
    "CodeBlock",
    "DataFile",
    "OutsideWorkspaceError",
    "Skill",
    "SkillFile",
    "TargetSkillError",
    "decode",
    "encode",
    "read_skill",
    "readable",
    "resolve_target",
]

ENCODING = "utf-8"
ERRORS = "surrogateescape"
_FRONTMATTER_NAME = re.compile(r"^name:\s*['\"]?([^'\"\n]+?)['\"]?\s*$", re.MULTILINE)
_NOT_PHASES = {"orchestrator.md", "state-schema.md"}

Role = Literal["skill", "phase", "spec"]


class TargetSkillError(Exception):
    """The target skill folder cannot be used (missing, not a folder, no ``SKILL.md``)."""


class OutsideWorkspaceError(TargetSkillError):
    """The target skill folder is outside the workspace and no ``allow_outside`` names it."""


def decode(data: bytes) -> str:
    """Bytes of a skill file as text that encodes back to the same bytes."""
    return data.decode(ENCODING, ERRORS)


def encode(text: str) -> bytes:
    """The inverse of :func:`decode`."""
    return text.encode(ENCODING, ERRORS)


def readable(value: Any) -> Any:
    """``value`` (JSON data) with the undecodable bytes :func:`decode` keeps in its strings
    shown as ``\\xNN``: text quoted from a file that is not valid UTF-8 (evidence, snippets)
    can then be written to state.json and reports, which must hold valid text."""
    if isinstance(value, str):
        return encode(value).decode(ENCODING, "backslashreplace")
    if isinstance(value, list):
        return [readable(item) for item in value]
    if isinstance(value, dict):
        return {key: readable(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class SkillFile:
    """One markdown file of a skill, with its path relative to the skill folder."""

    path: str
    text: str
    role: Role
    code_blocks: tuple[CodeBlock, ...] = field(default=())

    @property
    def lines(self) -> list[str]:
        """The file's lines without line endings."""
        return self.text.splitlines()

    def line_of(self, needle: str) -> int | None:
        """The 1-based number of the first line containing ``needle``."""
        for number, line in enumerate(self.lines, start=1):
            if needle in line:
                return number
        return None


@dataclass(frozen=True)
class DataFile:
    """A JSON file of a skill: its path and every object key in it (None: not valid JSON)."""

    path: str
    keys: frozenset[str] | None


@dataclass(frozen=True)
class Skill:
    """A snapshot of a skill folder."""

    root: Path
    name: str
    files: tuple[SkillFile, ...]
    execution_mode: Literal["sequential", "autonomous"]
    data: tuple[DataFile, ...] = ()
    paths: frozenset[str] = frozenset()

    @property
    def data_keys(self) -> frozenset[str]:
        """Every object key of the skill's JSON data files."""
        return frozenset(key for data in self.data for key in data.keys or ())

    @property
    def workflow_files(self) -> tuple[SkillFile, ...]:
        """The files whose code the workflow runs: SKILL.md and the phases. The code of a
        specification (``specs/``) illustrates a rule, a format or a pattern; the behaviour
        rules (agent calls, parses, histories, prompts, state writes) do not read it, while
        the field-name rule does (a schema in a spec is the reference spelling)."""
        return tuple(f for f in self.files if f.role != "spec")

    @property
    def phases(self) -> list[str]:
        """Every markdown file under ``phases/``."""
        return [f.path for f in self.files if f.role == "phase"]

    @property
    def specs(self) -> list[str]:
        """Every markdown file under ``specs/``."""
        return [f.path for f in self.files if f.role == "spec"]

    @property
    def phase_sequence(self) -> list[SkillFile]:
        """The ordered phases of the workflow: top-level phase files, minus the orchestrator
        and the state schema (they describe the machinery, not a step)."""
        return [
            f
            for f in self.files
            if f.role == "phase" and f.path.count("/") == 1 and Path(f.path).name not in _NOT_PHASES
        ]

    def file(self, path: str) -> SkillFile | None:
        """The file at ``path`` (relative to the skill folder), if the skill has one."""
        return next((f for f in self.files if f.path == path), None)


def resolve_target(workspace: Path, raw: str | None, allowed: Iterable[str] = ()) -> Path:
    """The absolute skill folder for ``target_skill.path`` (relative paths are from the
    workspace); raise :class:`TargetSkillError` unless it is a folder holding ``SKILL.md`` that
    lies inside the workspace, or inside one of the ``allowed`` outside folders (option
    ``allow_outside``): the machine rewrites the skill's files, and fsm writes nothing outside
    the workspace the user did not name."""
    if not raw:
        raise TargetSkillError(
            "no target skill given: set target_skill.path to the skill folder "
            "(fsm new skill-tuning --set target_skill.path=.claude/skills/NAME)"
        )
    path = Path(raw)
    given = path if path.is_absolute() else workspace / path
    root = given.resolve()
    if not root.is_relative_to(workspace.resolve()) and not any(
        root.is_relative_to(Path(folder).resolve()) for folder in allowed
    ):
        inside = os.path.abspath(given).startswith(os.path.join(os.path.abspath(workspace), ""))
        what = (
            f"is a symbolic link out of the workspace (to {root})"
            if inside  # a cloned repository may ship its skill folder as a link to anywhere
            else f"is outside the workspace ({root})"
        )
        raise OutsideWorkspaceError(
            f"target skill folder {raw} {what}: skill-tuning rewrites the skill's files, so a "
            f"folder outside the workspace needs option allow_outside naming it "
            f"(-o allow_outside={root.parent}, or allow_outside in [machine.skill-tuning] of "
            "fsm.toml)"
        )
    if not root.exists():
        raise TargetSkillError(f"target skill folder does not exist: {raw} (resolved to {root})")
    if not root.is_dir():
        raise TargetSkillError(f"target skill path is not a folder: {raw}")
    if not (root / "SKILL.md").is_file():
        raise TargetSkillError(
            f"target skill folder has no SKILL.md: {raw}; point target_skill.path at the folder "
            "that contains SKILL.md"
        )
    return root


def read_skill(root: Path) -> Skill:
    """Read ``SKILL.md``, ``phases/**/*.md`` and ``specs/**/*.md`` of the skill at ``root``."""
    if not (root / "SKILL.md").is_file():
        raise TargetSkillError(f"target skill folder has no SKILL.md: {root}")
    files = [_read(root, root / "SKILL.md", "skill")]
    folders: tuple[tuple[str, Role], ...] = (("phases", "phase"), ("specs", "spec"))
    for folder, role in folders:
        base = root / folder
        if base.is_dir():
            files.extend(_read(root, p, role) for p in sorted(base.rglob("*.md")) if p.is_file())
    found = _FRONTMATTER_NAME.search(_frontmatter(files[0].text))
    name = found.group(1).strip() if found else root.name
    autonomous = (root / "phases" / "orchestrator.md").is_file()
    paths = frozenset(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    data = tuple(_read_data(root, rel) for rel in sorted(paths) if rel.endswith(".json"))
    mode: Literal["sequential", "autonomous"] = "autonomous" if autonomous else "sequential"
    return Skill(root, name, tuple(files), mode, data, paths)


def _read_data(root: Path, rel: str) -> DataFile:
    try:
        value = json.loads((root / rel).read_bytes())
    except (ValueError, OSError):
        return DataFile(rel, None)
    return DataFile(rel, frozenset(_keys(value)))


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in _keys(item)}
    if isinstance(value, list):
        return {key for item in value for key in _keys(item)}
    return set()


def _read(root: Path, path: Path, role: Role) -> SkillFile:
    text = decode(path.read_bytes())
    return SkillFile(path.relative_to(root).as_posix(), text, role, parse_code_blocks(text))


def _frontmatter(text: str) -> str:
    if not text.startswith("---"):
        return ""
    end = text.find("\n---", 3)
    return text[3:end] if end != -1 else ""
