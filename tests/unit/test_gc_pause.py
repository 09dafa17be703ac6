"""kpax.proto.gc_pause.gc_paused: the cyclic GC paused inside, as it was after."""

from __future__ import annotations

import gc

import pytest

from kpax.proto.gc_pause import gc_paused


def test_the_gc_is_paused_inside_and_enabled_again_after_even_on_an_error() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), gc_paused():
        assert not gc.isenabled()
        _ = 1 / 0
    assert gc.isenabled()


def test_a_gc_the_application_disabled_stays_disabled_and_when_false_changes_nothing() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with gc_paused(False):
        assert gc.isenabled()
