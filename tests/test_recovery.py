"""`recover`: rebuilding a corrupt document never loses what was on disk."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from fsm.base.errors import FsmError, LockHeldError
from fsm.engine.instance import Instance
from fsm.engine.recovery import recover
from fsm.model.registry import Recovery

MakeCounter = Callable[..., Instance]


def test_two_recoveries_keep_both_corrupt_copies(make_counter: MakeCounter) -> None:
    """Recovering twice within one second keeps each corrupt file under its own name."""
    instance = make_counter(limit=1)
    for content in (b"first corrupt", b"second corrupt"):
        instance.store.paths(instance.id).document.write_bytes(content)
        instance.store.read_retries = 0
        assert recover(instance).recovered
    kept = sorted(
        p.read_bytes()
        for p in instance.store.paths(instance.id).document.parent.glob("c1.json.corrupt-*")
    )
    assert kept == [b"first corrupt", b"second corrupt"]


def test_an_invalid_rebuilt_document_changes_nothing(
    make_counter: MakeCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook that rebuilds an invalid document is an error; the corrupt file stays in place."""
    instance = make_counter(limit=1)
    instance.store.paths(instance.id).document.write_bytes(b"garbage")
    instance.store.read_retries = 0

    def bad_hook(ctx: object, raw: str | None) -> Recovery:
        return Recovery(instance.machine.document_model.model_construct(count=-1))

    hooks = replace(instance.machine.hooks, recover=bad_hook)
    monkeypatch.setattr(instance.machine, "hooks", hooks)
    with pytest.raises(FsmError, match="rebuilt an invalid document"):
        recover(instance)
    assert instance.store.paths(instance.id).document.read_bytes() == b"garbage"
    assert not list(instance.store.paths(instance.id).document.parent.glob("c1.json.corrupt-*"))


def test_a_failing_hook_is_one_clear_error(
    make_counter: MakeCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception in the hook becomes an FsmError naming the machine; nothing moves."""
    instance = make_counter(limit=1)
    instance.store.paths(instance.id).document.write_bytes(b"garbage")
    instance.store.read_retries = 0

    def broken(ctx: object, raw: str | None) -> Recovery:
        raise KeyError("develop.md")

    monkeypatch.setattr(instance.machine, "hooks", replace(instance.machine.hooks, recover=broken))
    with pytest.raises(FsmError, match="recover hook of 'counter' failed: KeyError"):
        recover(instance)
    assert instance.store.paths(instance.id).document.read_bytes() == b"garbage"


def test_recover_is_refused_while_a_run_holds_the_instance(make_counter: MakeCounter) -> None:
    """Recovery takes the run lock: it never moves a document a run is working on."""
    instance = make_counter(limit=1)
    lock = instance.store.lease(instance.id)
    try:
        with pytest.raises(LockHeldError):
            recover(instance)
    finally:
        lock.release()
