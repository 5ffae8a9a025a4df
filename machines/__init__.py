"""Machines bundled with fsm. Only the packages listed in BUNDLED are registered."""

BUNDLED: tuple[str, ...] = ("ccw_loop", "issue_manager", "skill_tuning")
