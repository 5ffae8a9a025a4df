"""Logging for scripts that drive fsm: :func:`configure` once, :func:`get_logger` for a logger.

Public: the names are defined in :mod:`fsm.base.log`.
"""

from fsm.base.log import (
    configure,
    get_logger,
)

__all__ = [
    "configure",
    "get_logger",
]
