"""Machines bundled with fsm. Only the packages listed in BUNDLED are registered."""

BUNDLED: tuple[str, ...] = ("issue_manager",)
