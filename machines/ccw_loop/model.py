"""``LoopState``: the ccw-loop document shared with the CCW dashboard, exactly as the original skill
has it.

The master file ``{state_dir}/{loop_id}.json`` is owned by two programs: the dashboard API writes
the top-level fields (``title``, ``status``, ...) and the loop writes ``skill_state``. Both must be
able to read what the other wrote, so every model here allows unknown fields (they are kept, never
dropped) and fields the original skill marks optional get defaults (the original skill's own "After
Skill Initialization" example has a task with only ``id``, ``description`` and ``status``).

Where the Claude version of the original skill differs from the Codex one, the Claude names are
accepted on input (``total_count``/``completed_count``, ``current_task_id``, ``current_bug``, the
``current_action`` value ``paused``) and mapped to the Codex form, which is what gets written.

Some fields are fsm extensions, not in the original skill: ``SkillState.consecutive_errors`` (the
streak the ``max_errors`` limit counts; the original skill has no ``error_count``),
``SkillState.max_errors`` and ``SkillState.max_fix_attempts`` (limits persisted at init like
``max_iterations``, so that they survive restarts), the ``fixes`` and ``attempt`` keys of a fix task
(the hypothesis it implements and which attempt at it this is), and the ``test``, ``suite`` and
``fix_attempts`` keys of a hypothesis (the failing test it explains, which keeps its id across debug
rounds, and how many fix tasks were made for it).

``validate.coverage`` is null until a run measured it (the Claude skill's ``|| null``): the Codex
skill's 0 would claim an unmeasured suite covers nothing.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AGENT_TOOLS",
    "DebugState",
    "DevelopState",
    "DevelopTask",
    "ErrorEntry",
    "EvidenceCriteria",
    "Hypothesis",
    "LoopState",
    "LoopStatus",
    "Phase",
    "SkillState",
    "Summary",
    "TaskTool",
    "TestResult",
    "ValidateState",
]

LoopStatus = Literal["created", "running", "paused", "completed", "failed", "user_exit"]
Phase = Literal["init", "develop", "debug", "validate", "complete"]
TaskTool = Literal["gemini", "qwen", "codex", "bash", "claude"]
"""The original skill lists gemini, qwen, codex and bash; the dashboard also accepts claude."""
AGENT_TOOLS: tuple[str, ...] = ("gemini", "qwen", "codex", "claude")
TaskMode = Literal["analysis", "write"]
TaskStatus = Literal["pending", "in_progress", "completed", "failed"]
HypothesisStatus = Literal["pending", "confirmed", "rejected", "inconclusive"]
TestStatus = Literal["passed", "failed", "skipped"]
Percent = Annotated[float, Field(ge=0, le=100)]


class _Open(BaseModel):
    """A part of the document: unknown keys are kept, so nothing another program wrote is lost."""

    model_config = ConfigDict(
        extra="allow", serialize_by_alias=True, validate_by_name=True, validate_by_alias=True
    )


def _rename(data: Any, names: dict[str, str]) -> Any:
    """Map Claude-version keys to the Codex names, unless the Codex key is present too."""
    if not isinstance(data, dict):
        return data
    renamed = dict(data)
    for old, new in names.items():
        if old in renamed:
            value = renamed.pop(old)
            renamed.setdefault(new, value)
    return renamed


class DevelopTask(_Open):
    """One development task. ``tool`` None means "the configured agent" (``fix_tool``)."""

    id: str
    description: str
    tool: TaskTool | None = None
    mode: TaskMode = "write"
    status: TaskStatus = "pending"
    files_changed: list[str] = Field(default_factory=list)
    created_at: str | None = None
    completed_at: str | None = None

    def extra(self, key: str) -> Any:
        """An fsm/dashboard extension field of the task (``command``, ``prompt_template``, ...)."""
        return (self.model_extra or {}).get(key)


class EvidenceCriteria(_Open):
    """What confirms and what rejects a hypothesis."""

    confirm: str
    reject: str


class Hypothesis(_Open):
    """A testable explanation of a failure (``H1``, ``H2``, ...; likelihood 1 = most likely)."""

    id: str
    description: str
    testable_condition: str
    logging_point: str
    evidence_criteria: EvidenceCriteria
    likelihood: int
    status: HypothesisStatus = "pending"
    evidence: dict[str, Any] | None = None
    verdict_reason: str | None = None


class TestResult(_Open):
    """One test case of a validation run."""

    __test__ = False  # not a pytest test class, despite the name

    test_name: str
    suite: str
    status: TestStatus
    duration_ms: float
    error_message: str | None = None
    stack_trace: str | None = None


class ErrorEntry(_Open):
    """A failed action, as the dashboard shows it."""

    action: str
    message: str
    timestamp: str


class DevelopState(_Open):
    """The development phase: the task list and how far it got."""

    total: int = 0
    completed: int = 0
    current_task: str | None = None
    tasks: list[DevelopTask] = Field(default_factory=list)
    last_progress_at: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _claude_names(cls, data: Any) -> Any:
        return _rename(
            data,
            {
                "total_count": "total",
                "completed_count": "completed",
                "current_task_id": "current_task",
            },
        )


class DebugState(_Open):
    """The debug phase: hypotheses about the current failure and their verdicts."""

    active_bug: str | None = None
    hypotheses_count: int = 0
    hypotheses: list[Hypothesis] = Field(default_factory=list)
    confirmed_hypothesis: str | None = None
    iteration: int = 0
    last_analysis_at: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _claude_names(cls, data: Any) -> Any:
        return _rename(data, {"current_bug": "active_bug"})


class ValidateState(_Open):
    """The latest validation run."""

    pass_rate: Percent = 0
    coverage: Percent | None = None
    """None when nothing measured it (a measured 0 is a real 0)."""
    test_results: list[TestResult] = Field(default_factory=list)
    passed: bool = False
    failed_tests: list[str] = Field(default_factory=list)
    last_run_at: str | None = None


class Summary(_Open):
    """Written when the loop ends: duration in milliseconds, iterations, per-phase statistics."""

    duration: float
    iterations: int
    develop: dict[str, Any] = Field(default_factory=dict)
    debug: dict[str, Any] = Field(default_factory=dict)
    validate_: dict[str, Any] = Field(default_factory=dict, alias="validate")
    """``validate`` in the file (the Python name avoids shadowing ``BaseModel.validate``)."""


class SkillState(_Open):
    """What the loop itself owns; absent until the loop is initialised."""

    current_action: Phase | None = None
    last_action: str | None = None
    completed_actions: list[str] = Field(default_factory=list)
    mode: Literal["interactive", "auto"] = "auto"
    develop: DevelopState = Field(default_factory=DevelopState)
    debug: DebugState = Field(default_factory=DebugState)
    validate_: ValidateState = Field(default_factory=ValidateState, alias="validate")
    errors: list[ErrorEntry] = Field(default_factory=list)
    summary: Summary | None = None
    consecutive_errors: int = 0
    max_errors: int | None = Field(default=None, ge=1)
    """None in documents written before fsm (or by CCW's skills): the option applies."""
    max_fix_attempts: int | None = Field(default=None, ge=1)
    """Fix tasks made for one failing test before the loop gives up on it (None: the option)."""

    @model_validator(mode="before")
    @classmethod
    def _claude_values(cls, data: Any) -> Any:
        # The Claude pause exit writes current_action "paused", outside the enum: the phase is
        # then recovered from last_action (see the codec), and the Codex form is written back.
        if isinstance(data, dict) and data.get("current_action") == "paused":
            return {**data, "current_action": None}
        return data


class LoopState(_Open):
    """The master document of one loop: API fields plus the loop's ``skill_state``."""

    loop_id: str
    title: str
    description: str = ""
    max_iterations: Annotated[int | float, Field(ge=1)] = 10
    status: LoopStatus
    current_iteration: int = Field(default=0, ge=0)
    created_at: str
    updated_at: str
    completed_at: str | None = None
    failure_reason: str | None = None
    skill_state: SkillState | None = None
