"""The skill-tuning document: ``TuningState`` and every nested type of the original
skill-tuning skill's state schema.

The field names, enums and nullability follow the original skill (``phases/state-schema.md`` of
CCW's skill-tuning skill), so its Initial State Template validates unchanged. Additions, all
optional:

* ``status`` also takes ``paused`` (the control plane's pause needs a non-active status to park
  an instance in) and ``user_exit`` (CCW's orchestrator already stops on it although its enum
  lacks it; here it is what ``fsm stop`` leaves behind).
* ``phase`` holds the FSM state while the status is ``running`` or ``paused`` (see ``codec.py``).
* ``completed_at`` and ``final_report`` are written by CCW's complete/abort actions although the
  schema omits them; ``diagnosis.docs``/``diagnosis.token_consumption`` are CCW's two extra areas.
* ``Issue.rule`` names the diagnosis rule behind an issue, so a re-diagnosis recognises the same
  problem and keeps its id (that is how verification tells whether a fix removed its issues).
* ``AppliedFix.verification_result`` takes CCW's ``rolled_back``: this machine writes it (with
  ``rollback_available`` false) when verification failed and the backup was restored, ``pass``
  when the fix is kept, and ``fail`` when the fix could not be applied at all.
  ``AppliedFix.failure_reason`` says why a fix was not kept (one line per failed check, joined
  with ``; ``); ``AppliedFix.verification_notes`` lists what verification checked and how
  (a block parsed by ``bash -n``, a language it has no parser for, how a call's failure is now
  handled).
* ``failure_reason`` (the field of the same name in ccw-loop's ``LoopState``) is the one-line
  reason a run ended ``failed`` or ``user_exit``; null while running and when the run succeeded.
* ``issues_to_review`` holds the issues of rules whose measured precision is under the
  threshold (:mod:`.diagnosis.trust`), in the shape of ``issues``: shown with their evidence,
  not counted by ``issues_by_severity`` or the quality gate, never given a fix.

``issues_by_severity`` is derived data: a document whose counts disagree with ``issues`` does not
validate, so an action that changes ``issues`` must write both (``quality.issue_update``).
Top-level keys the model does not know (CCW's ``gemini_analysis``, ``requirement_analysis``...)
are allowed and kept.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "SEVERITIES",
    "ActionHistoryEntry",
    "AppliedFix",
    "Diagnosis",
    "DiagnosisDetails",
    "DiagnosisResult",
    "ErrorEntry",
    "Evidence",
    "FileChange",
    "Fix",
    "FixStrategy",
    "Issue",
    "IssueLocation",
    "IssueType",
    "IssuesBySeverity",
    "Severity",
    "Status",
    "TargetSkill",
    "TuningState",
    "count_by_severity",
]

Status = Literal["pending", "running", "paused", "completed", "failed", "user_exit"]
Severity = Literal["critical", "high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = ("critical", "high", "medium", "low")
IssueType = Literal["context_explosion", "memory_loss", "dataflow_break", "agent_failure"]
FixStrategy = Literal[
    "context_summarization",
    "sliding_window",
    "structured_state",
    "constraint_injection",
    "checkpoint_restore",
    "schema_enforcement",
    "orchestrator_refactor",
    "state_centralization",
    "custom",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetSkill(_Strict):
    """The skill being tuned; null until ``init`` has read it."""

    name: str | None = None
    path: str | None = None
    execution_mode: Literal["sequential", "autonomous"] | None = None
    phases: list[str] = Field(default_factory=list)
    specs: list[str] = Field(default_factory=list)


class Evidence(_Strict):
    """One place where a diagnosis pattern matched."""

    file: str
    line: int | None = None
    pattern: str
    context: str
    severity: str


class DiagnosisDetails(_Strict):
    """What a diagnosis looked for, what it found and what it recommends."""

    patterns_checked: list[str] = Field(default_factory=list)
    patterns_matched: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    recommendations: list[str] = Field(default_factory=list)
    redundancies: list[object] | None = None
    conflicts: list[object] | None = None


class DiagnosisResult(_Strict):
    """The outcome of one diagnosis area."""

    status: Literal["completed", "skipped", "failed"]
    issues_found: int = Field(ge=0)
    severity: Literal["critical", "high", "medium", "low", "none"]
    execution_time_ms: float = Field(ge=0)
    details: DiagnosisDetails


class Diagnosis(_Strict):
    """One result per area; null means the area has not been diagnosed in this round."""

    context: DiagnosisResult | None = None
    memory: DiagnosisResult | None = None
    dataflow: DiagnosisResult | None = None
    agent: DiagnosisResult | None = None
    docs: DiagnosisResult | None = None
    token_consumption: DiagnosisResult | None = None


class IssueLocation(_Strict):
    """Where an issue is, relative to the target skill folder."""

    file: str
    line_start: int | None = None
    line_end: int | None = None
    phase: str | None = None


class Issue(_Strict):
    """A problem found in the target skill."""

    id: str
    type: IssueType
    severity: Severity
    priority: int = Field(ge=1)
    location: IssueLocation
    description: str
    evidence: list[str] = Field(default_factory=list)
    root_cause: str
    impact: str
    suggested_fix: str
    related_issues: list[str] = Field(default_factory=list)
    rule: str | None = None


class IssuesBySeverity(_Strict):
    """How many issues there are of each severity."""

    critical: int = Field(0, ge=0)
    high: int = Field(0, ge=0)
    medium: int = Field(0, ge=0)
    low: int = Field(0, ge=0)


class FileChange(_Strict):
    """One file a fix creates, modifies or deletes (path relative to the skill folder)."""

    file: str
    action: Literal["create", "modify", "delete"]
    old_content: str | None = None
    new_content: str | None = None
    diff: str | None = None


class Fix(_Strict):
    """A proposed fix for one or more issues."""

    id: str
    issue_ids: list[str]
    strategy: FixStrategy
    description: str
    rationale: str
    changes: list[FileChange] = Field(default_factory=list)
    risk: Literal["low", "medium", "high"]
    estimated_impact: str
    verification_steps: list[str] = Field(default_factory=list)


class AppliedFix(_Strict):
    """A fix that was applied, where its backup is and how its verification went."""

    fix_id: str
    applied_at: str
    success: bool
    backup_path: str
    verification_result: Literal["pass", "fail", "pending", "rolled_back"]
    rollback_available: bool
    changes_made: list[FileChange] | None = None
    issues_resolved: list[str] | None = None
    failure_reason: str | None = None
    verification_notes: list[str] | None = None


class ActionHistoryEntry(_Strict):
    """One action run: when, how it ended, which files it wrote."""

    action: str
    started_at: str
    completed_at: str | None = None
    result: Literal["success", "failure", "skipped"] | None = None
    output_files: list[str] = Field(default_factory=list)


class ErrorEntry(_Strict):
    """One action failure."""

    action: str
    message: str
    timestamp: str
    recoverable: bool


def count_by_severity(issues: list[Issue]) -> IssuesBySeverity:
    """The severity counts of ``issues``."""
    counts = dict.fromkeys(SEVERITIES, 0)
    for issue in issues:
        counts[issue.severity] += 1
    return IssuesBySeverity(**counts)


class TuningState(BaseModel):
    """The persisted document of one skill-tuning instance (``{work_dir}/state.json``)."""

    model_config = ConfigDict(extra="allow")

    status: Status = "pending"
    started_at: str | None = None
    updated_at: str | None = None
    target_skill: TargetSkill = Field(default_factory=TargetSkill)
    user_issue_description: str = ""
    focus_areas: list[str] = Field(default_factory=list)
    diagnosis: Diagnosis = Field(default_factory=Diagnosis)
    issues: list[Issue] = Field(default_factory=list)
    issues_by_severity: IssuesBySeverity = Field(default_factory=IssuesBySeverity)
    issues_to_review: list[Issue] = Field(default_factory=list)
    proposed_fixes: list[Fix] = Field(default_factory=list)
    applied_fixes: list[AppliedFix] = Field(default_factory=list)
    pending_fixes: list[str] = Field(default_factory=list)
    iteration_count: int = Field(0, ge=0)
    max_iterations: int = Field(5, ge=0)
    quality_score: float = Field(0, ge=0, le=100)
    quality_gate: Literal["pass", "review", "fail"] = "fail"
    completed_actions: list[str] = Field(default_factory=list)
    current_action: str | None = None
    action_history: list[ActionHistoryEntry] = Field(default_factory=list)
    errors: list[ErrorEntry] = Field(default_factory=list)
    error_count: int = Field(0, ge=0)
    max_errors: int = Field(3, ge=1)
    work_dir: str | None = None
    backup_dir: str | None = None
    phase: str | None = None
    completed_at: str | None = None
    final_report: str | None = None
    failure_reason: str | None = None

    @model_validator(mode="after")
    def _severity_counts_match_issues(self) -> TuningState:
        expected = count_by_severity(self.issues)
        if expected != self.issues_by_severity:
            raise ValueError(
                f"issues_by_severity {self.issues_by_severity.model_dump()} does not match the "
                f"issues list {expected.model_dump()}; write both together"
            )
        return self
