"""The store protocol, for store authors (see docs/stores.md): the primitives a store supplies,
the journal's records it keeps, the readings of a journal it may mix in, and the heartbeats of
the runs driving its instances.

Public: the names are defined in :mod:`fsm.store.protocol`, :mod:`fsm.store.journal`,
:mod:`fsm.store.heartbeat` and :mod:`fsm.model.records`.
"""

from fsm.model.records import Record
from fsm.store.heartbeat import Heartbeat, Heartbeats
from fsm.store.journal import JournalRead, TypedRecords, line_bytes
from fsm.store.protocol import (
    Administered,
    Build,
    Claim,
    Claiming,
    Folders,
    JournalLog,
    LateWrite,
    Layout,
    Lease,
    Listed,
    Proposal,
    Repaired,
    Snapshot,
    Store,
    StoreFactory,
    Swapped,
)

__all__ = [
    "Administered",
    "Build",
    "Claim",
    "Claiming",
    "Folders",
    "Heartbeat",
    "Heartbeats",
    "JournalLog",
    "JournalRead",
    "LateWrite",
    "Layout",
    "Lease",
    "Listed",
    "Proposal",
    "Record",
    "Repaired",
    "Snapshot",
    "Store",
    "StoreFactory",
    "Swapped",
    "TypedRecords",
    "line_bytes",
]
