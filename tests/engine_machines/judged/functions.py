"""A machine whose final state is tagged success but whose verdict reads the document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from fsm.base.errors import InputError, RefusedError
from fsm.model.context import Context
from fsm.model.outcome import Verdict
from fsm.model.registry import Registry, Reopening, Update

registry = Registry()


class Part(BaseModel):
    """One part and the program that builds it."""

    name: str
    program: str
    built: bool | None = None


@registry.inputs
class BuildInputs(BaseModel):
    """What `fsm new judged` takes."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    parts: list[Part] = Field(default_factory=list)
    """The parts to build, each with the program that builds it."""
    judge_raises: bool = False
    """Make the outcome hook fail (for tests)."""


@registry.options
class BuildOptions(BaseModel):
    """Options of the judged machine."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    retries: int = 0
    """How often a part whose program failed is run again before it counts as failed."""


@registry.document
class Build(BaseModel):
    """The build document."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["created", "running", "paused", "done"] = "created"
    phase: str = "todo"
    parts: list[Part] = Field(default_factory=list)
    next: int = 0
    judge_raises: bool = False


@registry.guard(budget=True)
def has_part_left(doc: Build, ctx: Context[BuildOptions]) -> bool:
    """True while some part has not been tried."""
    return any(part.built is None for part in doc.parts)


@registry.action
def build_part(doc: Build, ctx: Context[BuildOptions]) -> Update:
    """Run the next untried part's program; record whether it worked."""
    parts = list(doc.parts)
    index = next(i for i, part in enumerate(parts) if part.built is None)
    options = ctx.options
    result = ctx.executor.run([parts[index].program])
    for _ in range(options.retries):
        if result.ok:
            break
        result = ctx.executor.run([parts[index].program])
    parts[index] = parts[index].model_copy(update={"built": result.ok})
    return {"parts": parts, "next": index + 1}


@registry.hook
def new_build(inputs: dict[str, Any], ctx: Context[BuildOptions]) -> dict[str, Any]:
    """A new build is created, not yet running."""
    return {"status": "created", "phase": "todo", **inputs}


@registry.hook
def judge(doc: Build) -> Verdict:
    """Success only when every part was built."""
    if doc.judge_raises:
        raise RuntimeError("the judge is broken")
    failed = [part.name for part in doc.parts if not part.built]
    if failed:
        shown = ", ".join(failed)
        return Verdict(False, f"{len(failed)} of {len(doc.parts)} parts failed: {shown}")
    return Verdict(True, f"all {len(doc.parts)} parts built")


@registry.hook
def rebuild(doc: Build, ctx: Context[BuildOptions], items: list[str]) -> Reopening:
    """Retry the failed parts (those named, else all): they are untried again."""
    failed = [part.name for part in doc.parts if part.built is False]
    names = [part.name for part in doc.parts]
    unknown = [item for item in items if item not in names]
    if unknown:
        raise InputError(f"no part {', '.join(unknown)} in this build")
    built = [item for item in items if item not in failed]
    if built:
        raise RefusedError(f"part {', '.join(built)} did not fail")
    chosen = list(items) or failed
    parts = [
        part.model_copy(update={"built": None}) if part.name in chosen else part
        for part in doc.parts
    ]
    return Reopening("todo", {"parts": [p.model_dump() for p in parts]}, chosen)


@registry.hook
def needs(doc: Build, ctx: Context[BuildOptions]) -> list[str]:
    """Every part's program must exist before the build starts."""
    return [
        f"program '{part.program}' (part {part.name}) is not installed"
        for part in doc.parts
        if not ctx.executor.has_program(part.program)
    ]
