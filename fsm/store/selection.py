"""Which store keeps a workspace's instances: chosen in one place, registered by name.

The store is named by ``FSM_STORE`` in the environment, else by ``name`` in the ``[store]``
table of fsm.toml, else it is ``files`` (:class:`fsm.store.file_store.FileStore`, the CCW-compatible
files the dashboard reads). The rest of the ``[store]`` table is the store's own settings (a
database's address), handed to it in :attr:`fsm.store.protocol.Layout.settings`.

Stores register like machines, by an entry point in the group ``fsm.stores`` whose value is the
store's factory (:data:`fsm.store.protocol.StoreFactory`: a :class:`~fsm.store.protocol.Layout` in,
a :class:`~fsm.store.protocol.Store` out)::

    [project.entry-points."fsm.stores"]
    postgres = "fsm_postgres:make_store"

fsm's own stores (``files``, and ``memory``: one per process, gone when it ends, for tests) are
found without reading the installed distributions' metadata, so the default costs nothing. An
unknown name is an error naming the stores available.

A store may be chosen by its address instead: ``FSM_STORE=postgresql://host/db`` (or ``url =
"postgresql://host/db"`` in ``[store]`` without a ``name``) chooses the store registered under
the address's scheme (``postgresql``; fsm's PostgreSQL store is registered as ``postgres`` and
``postgresql``, the two schemes libpq accepts), and hands it the address as its ``url``
setting.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fsm.base.errors import OptionsError
from fsm.store.protocol import StoreFactory

__all__ = [
    "DEFAULT",
    "ENTRY_POINT_GROUP",
    "ENVIRONMENT",
    "available",
    "check_settings",
    "chosen",
    "factory",
    "store_settings",
]

ENTRY_POINT_GROUP = "fsm.stores"
ENVIRONMENT = "FSM_STORE"
DEFAULT = "files"
BUILT_IN = {
    "files": "fsm.store.file_store:FileStore.from_layout",
    "memory": "fsm.store.memory:shared_store",
}
"""fsm's own stores, by name: the value of their entry points."""


def chosen(settings: Mapping[str, Any]) -> tuple[str, str]:
    """The name of the store to use, and where it was chosen (for messages).

    ``FSM_STORE`` holds a store's name or an address (``postgresql://...``): an address
    chooses the store registered under its scheme. Without ``name``, the ``url`` of the
    ``[store]`` table chooses the same way.
    """
    named = os.environ.get(ENVIRONMENT)
    if named:
        scheme = _scheme(named)
        if scheme:
            return scheme, f"{ENVIRONMENT}={scheme}://..."
        if not _NAME.fullmatch(named):
            # A key=value address (host=... password=...) or anything else: never echoed,
            # it may hold a password.
            raise OptionsError(
                f"{ENVIRONMENT} holds neither a store's name nor an address "
                "(postgresql://HOST/DATABASE); its value is not shown (it may hold a password)"
            )
        return named, f"{ENVIRONMENT}={named}"
    configured = settings.get("name")
    if isinstance(configured, str) and configured:
        return configured, f"[store] name = '{configured}' in fsm.toml"
    url = settings.get("url")
    if isinstance(url, str) and _scheme(url):
        return _scheme(url), f"[store] url = '{_scheme(url)}://...' in fsm.toml"
    return DEFAULT, "the default"


def check_settings(name: str, settings: Mapping[str, Any]) -> None:
    """OptionsError when the ``[store]`` table of fsm.toml has settings the file store, chosen
    by that table (or by default), does not have: a misspelt ``urll`` would otherwise leave the
    instances in files without a word. (A store chosen by ``FSM_STORE`` is not the table's:
    the table's settings are then another store's.)"""
    if name != DEFAULT or os.environ.get(ENVIRONMENT):
        return
    extra = sorted(set(settings) - {"name", "space"})
    if not extra:
        return
    if "url" in extra and "name" not in settings:
        raise OptionsError(
            "[store] url is not an address of a store fsm knows (postgresql://HOST/DATABASE); "
            "its value is not shown (it may hold a password)"
        )
    import difflib

    close = difflib.get_close_matches(extra[0], _ADDRESS_SETTINGS, n=1)
    hint = f" (did you mean '{close[0]}'? it chooses the postgres store)" if close else ""
    raise OptionsError(
        f"[store] has no setting '{extra[0]}' for the files store (its settings: name, space){hint}"
    )


_ADDRESS_SETTINGS = ("url", "lease", "pool", "reconnect", "connect")
"""The settings of fsm's database store, for the hint of a misspelt one."""


def store_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The store's own settings: the ``[store]`` table but ``name`` and ``space`` (which are
    fsm's: :attr:`fsm.storage.Layout.space`), with the address
    ``FSM_STORE`` holds as ``url`` (it wins over the table's)."""
    own = {key: value for key, value in settings.items() if key not in {"name", "space"}}
    named = os.environ.get(ENVIRONMENT)
    if named and _scheme(named):
        own["url"] = named
    return own


_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
"""What a store's name looks like (an entry point's name)."""


def _scheme(text: str) -> str:
    """The scheme of an address (``postgresql`` of ``postgresql://host/db``), else ''."""
    scheme, separator, _ = text.partition("://")
    if separator and scheme and scheme.replace("+", "").replace("-", "").isalnum():
        return scheme.lower()
    return ""


def available() -> list[str]:
    """The names of every store that can be chosen, sorted."""
    return sorted({*BUILT_IN, *(entry.name for entry in _entry_points())})


def factory(name: str, where: str = "") -> StoreFactory:
    """The factory of the store named ``name`` (OptionsError naming the stores available when
    there is none; ``where`` says where the name was chosen)."""
    value = BUILT_IN.get(name)
    if value is None:
        found = [entry.value for entry in _entry_points() if entry.name == name]
        if not found:
            chosen_by = f" ({where})" if where else ""
            raise OptionsError(
                f"unknown store '{name}'{chosen_by}; the stores available: {', '.join(available())}"
            )
        value = found[0]
    module_name, _, attribute = value.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise OptionsError(f"store '{name}' cannot be loaded from '{value}': {exc}") from exc
    made: StoreFactory = target
    return made


def _entry_points() -> list[EntryPoint]:
    # Imported here: the default store is found without reading any distribution's metadata.
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


if TYPE_CHECKING:  # fsm's own stores implement the protocol (checked by mypy)
    from importlib.metadata import EntryPoint

    from fsm.store.file_store import FileStore
    from fsm.store.memory import MemoryStore
    from fsm.store.protocol import Store

    def _stores(files: FileStore, memory: MemoryStore) -> tuple[Store, Store]:
        return files, memory

    _factories: tuple[StoreFactory, ...] = (FileStore.from_layout,)
