"""The registry a machine's module fills with its guards, actions and hooks.

Public: the names are defined in :mod:`fsm.model.registry`.
"""

from fsm.model.registry import (
    HOOK_NAMES,
    Action,
    Codec,
    Guard,
    GuardInfo,
    Hooks,
    Recovery,
    Registry,
    Reopening,
    Update,
)

__all__ = [
    "HOOK_NAMES",
    "Action",
    "Codec",
    "Guard",
    "GuardInfo",
    "Hooks",
    "Recovery",
    "Registry",
    "Reopening",
    "Update",
]
