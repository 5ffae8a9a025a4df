"""The store conformance suite (fsm.testing.contract) run against the stores fsm ships: the
file store (in a temporary folder) and the memory store."""

from __future__ import annotations

import pytest

from fsm.store.file_store import FileStore
from fsm.store.protocol import Store, StoreFactory
from fsm.testing import MemoryStorage, MemoryStore
from fsm.testing.contract import StoreContract


class TestFileStore(StoreContract):
    """The file store, the default: its data outlives the process, its leases never expire."""

    @pytest.fixture
    def storage(self) -> StoreFactory:
        return FileStore.from_layout


class TestMemoryStore(StoreContract):
    """The memory store: one per test, crashed in-process, leases that expire on demand."""

    durable = False
    leases_expire = True

    @pytest.fixture
    def storage(self) -> StoreFactory:
        return MemoryStorage()

    def expire_lease(self, store: Store, instance_id: str) -> None:
        assert isinstance(store, MemoryStore)
        store.expire(instance_id)
