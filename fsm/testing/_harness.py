"""The harness: a machine's instances in a test workspace, driven by the real engine."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, cast

from fsm.base.clock import Clock, SimulatedClock
from fsm.base.ids import validate_id
from fsm.engine.instance import Workspace
from fsm.model.config import load_config
from fsm.model.discovery import open_machine
from fsm.model.machine import Machine
from fsm.process.executor import AgentCommand, SubprocessExecutor
from fsm.store.protocol import StoreFactory
from fsm.testing._driver import DocT, Driver, RecordingInstance
from fsm.testing._scripted import ScriptedExecutor

__all__ = ["Harness"]

AgentTable = AgentCommand | Sequence[str]
"""An agent as an ``[agent.<tool>]`` table of fsm.toml has it: an argv with ``{prompt}``."""


class Harness(Generic[DocT]):
    """Instances of one machine in a test workspace: a simulated clock, option overrides, agent
    tables, and a :class:`ScriptedExecutor` whose unscripted calls run for real.

    ``machine`` is a loaded machine, a registered name, or the path of a machine file (or of
    its folder). ``root`` is the workspace folder (pytest's ``tmp_path``, say); without one the
    harness makes a temporary folder and, used as a context manager, removes it at the end.
    ``document`` is the model documents are read with (default: the machine's, typed
    ``BaseModel``): pass your model class to have :attr:`Driver.doc` typed. ``options`` are
    given as ``-o`` gives them, over fsm.toml's ``[machine.<name>]`` table; ``agents`` are agent
    tables as fsm.toml has them (``{"codex": ["codex", "exec", "{prompt}"]}``), used by the
    fallback executor for calls no rule answers. ``executor`` replaces the default
    (``ScriptedExecutor(fallback=SubprocessExecutor(root, agents))``); ``clock`` the default
    ``SimulatedClock(tick=1.0)``, which moves one second each time it is read. ``storage``
    gives the workspace another store than files (:class:`fsm.testing.MemoryStorage`, or
    your own :class:`fsm.store.protocol.Store`), to test a machine against it.
    """

    def __init__(
        self,
        machine: Machine | str | Path,
        root: Path | str | None = None,
        *,
        document: type[DocT] | None = None,
        options: Mapping[str, Any] | None = None,
        agents: Mapping[str, AgentTable] | None = None,
        executor: ScriptedExecutor | None = None,
        clock: Clock | None = None,
        storage: StoreFactory | None = None,
    ) -> None:
        self.machine = machine if isinstance(machine, Machine) else open_machine(str(machine))
        self._temporary = root is None
        self.root = Path(tempfile.mkdtemp(prefix="fsm-test-") if root is None else root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.root = self.root.resolve()
        # The machine's own model when none is given: DocT is then its default, BaseModel.
        self.document = document or cast("type[DocT]", self.machine.document_model)
        self.options = dict(options or {})
        self.agents: dict[str, AgentCommand] = dict(load_config(self.root).agents)
        """The agent tables the default fallback executor uses (fsm.toml's, then ``agents``)."""
        for tool, table in (agents or {}).items():
            self.add_agent(tool, table)
        self.clock: Clock = clock or SimulatedClock(tick=1.0)
        if executor is None:
            executor = ScriptedExecutor(fallback=SubprocessExecutor(self.root, self.agents))
        if executor.workspace is None:
            executor.workspace = self.root
        self.executor = executor
        self.storage = storage

    def add_agent(self, tool: str, table: AgentTable) -> None:
        """Give the default fallback executor an agent table (as ``[agent.<tool>]`` would)."""
        self.agents[tool] = _agent(table)

    def workspace(self, **options: Any) -> Workspace:
        """The fsm workspace on :attr:`root`, with these options over the harness's."""
        return Workspace(
            self.root,
            options={**self.options, **options},
            clock=self.clock,
            executor=self.executor,
            storage=self.storage,
        )

    def instance(
        self,
        instance_id: str,
        *,
        interactive: bool = False,
        reconfigure: bool = False,
        **options: Any,
    ) -> Driver[DocT]:
        """A driver of instance ``instance_id`` (created already, or not yet); ``reconfigure``
        as ``fsm run --reconfigure``."""
        workspace = self.workspace(**options)
        instance = RecordingInstance(workspace, self.machine, validate_id(instance_id))
        return Driver(instance, self.document, interactive=interactive, reconfigure=reconfigure)

    def create(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        instance_id: str | None = None,
        interactive: bool = False,
        **options: Any,
    ) -> Driver[DocT]:
        """Create an instance from ``inputs`` (as ``fsm new --set`` gives them) and drive it."""
        chosen = instance_id or self.workspace(**options).new_id(self.machine)
        driver = self.instance(chosen, interactive=interactive, **options)
        driver.instance.create(dict(inputs or {}), actor="test")
        return driver

    def write_config(
        self,
        options: Mapping[str, Any] | None = None,
        agents: Mapping[str, AgentTable] | None = None,
    ) -> Path:
        """Write fsm.toml (``[machine.<name>]`` with ``options``, an ``[agent.<tool>]`` table per
        agent), for ``fsm`` run as a separate process on :attr:`root`. Values are strings,
        numbers, booleans or lists of them."""
        lines = []
        if options:
            lines.append(f"[machine.{self.machine.name}]")
            lines += [f"{key} = {json.dumps(value)}" for key, value in options.items()]
        for tool, table in (agents or {}).items():
            command = _agent(table)
            lines += ["", f"[agent.{tool}]", f"command = {json.dumps(list(command.command))}"]
            if command.analysis_command is not None:
                analysis = json.dumps(list(command.analysis_command))
                lines.append(f"analysis_command = {analysis}")
        path = self.root / "fsm.toml"
        path.write_text("\n".join(lines).lstrip("\n") + "\n", encoding="utf-8")
        return path

    def close(self) -> None:
        """Remove the workspace if the harness made it."""
        if self._temporary:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Harness[DocT]:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _agent(table: AgentTable) -> AgentCommand:
    return table if isinstance(table, AgentCommand) else AgentCommand(tuple(table))
