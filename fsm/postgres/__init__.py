"""The PostgreSQL store (``pip install 'fsm[postgres]'``): instances, journals and leases in one
database that workers on many hosts share.

Chosen with ``[store] url = "postgresql://..."`` in fsm.toml, or ``FSM_STORE=postgresql://...``
(see :mod:`fsm.stores`); ``fsm store init`` creates its tables. psycopg is imported only when the
store is made, so fsm without the extra never imports it: a missing psycopg is one error line
saying what to install. The store itself is :class:`fsm.postgres.store.PostgresStore`; the
process's connections, lease holder and listener are :mod:`fsm.postgres.database`; the tables
and their migrations :mod:`fsm.postgres.schema`. ``docs/scale-out.md`` is the operator's guide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsm.base.errors import MissingRequirementError

if TYPE_CHECKING:
    from fsm.postgres.store import PostgresStore
    from fsm.store.protocol import Layout

__all__ = ["make_store"]


def make_store(layout: Layout) -> PostgresStore:
    """The PostgreSQL store of ``layout`` (the factory registered as ``postgres``)."""
    try:
        from fsm.postgres.store import PostgresStore
    except ImportError as exc:
        if exc.name not in {"psycopg", "psycopg_pool", "psycopg_binary", "psycopg_c"}:
            raise
        raise MissingRequirementError(
            "the postgres store", [f"{exc.name} is not installed: pip install 'fsm[postgres]'"]
        ) from exc
    return PostgresStore.from_layout(layout)
