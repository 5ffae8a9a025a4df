"""What a machine's guards, actions and hooks are given: :class:`Context`.

Public: the names are defined in :mod:`fsm.model.context`.
"""

from fsm.model.context import (
    Context,
    OptionsT_co,
    TransitionInfo,
)

__all__ = [
    "Context",
    "OptionsT_co",
    "TransitionInfo",
]
