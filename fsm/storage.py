"""The store protocol, for store authors (see docs/stores.md).

Public: the names are defined in :mod:`fsm.store.protocol`.
"""

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
    "JournalLog",
    "LateWrite",
    "Layout",
    "Lease",
    "Listed",
    "Proposal",
    "Repaired",
    "Snapshot",
    "Store",
    "StoreFactory",
    "Swapped",
]
