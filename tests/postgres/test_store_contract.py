"""The store conformance suite (fsm.testing.contract) run against the PostgreSQL store, on a
real server: each test in a database of its own."""

from __future__ import annotations

import psycopg
import pytest

from fsm.postgres.store import PostgresStore
from fsm.store.protocol import Layout, Store, StoreFactory
from fsm.testing.contract import StoreContract
from tests.postgres.conftest import initialized


class TestPostgresStore(StoreContract):
    """The PostgreSQL store: its data outlives the process, its leases expire."""

    leases_expire = True

    @pytest.fixture
    def storage(self, postgres_url: str) -> StoreFactory:
        initialized(postgres_url)

        def make(layout: Layout) -> Store:
            settings = {**layout.settings, "url": postgres_url, "lease": 5}
            return PostgresStore.from_layout(
                Layout(
                    layout.workspace,
                    layout.machine,
                    layout.document,
                    layout.meta,
                    layout.values,
                    read_retries=layout.read_retries,
                    retry_interval=layout.retry_interval,
                    settings=settings,
                    space=layout.space or "contract",
                    queue=layout.queue,
                )
            )

        return make

    def expire_lease(self, store: Store, instance_id: str) -> None:
        assert isinstance(store, PostgresStore)
        with psycopg.connect(store.settings.url, autocommit=True) as conn:
            conn.execute(
                "UPDATE fsm_holders SET expires = statement_timestamp() - interval '1 second' "
                "WHERE id = (SELECT holder FROM fsm_instances "
                "WHERE space = %s AND machine = %s AND id = %s)",
                (store.space, store.machine, instance_id),
            )
