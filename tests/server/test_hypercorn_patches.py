"""The wrappers of Hypercorn's private methods (``supervisor/server/hypercorn_patches.py``):
each wrapped attribute exists in the Hypercorn installed, so an upgrade that renames one
fails here, loudly, before a user meets Hypercorn's behaviour where ours was meant."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.protocol.ws_stream import WSStream

from supervisor.server import hypercorn_patches
from supervisor.server.hypercorn_patches import PATCHED, install_all


@pytest.mark.parametrize(("owner", "name"), PATCHED, ids=[f"{o.__name__}.{n}" for o, n in PATCHED])
def test_every_patched_attribute_exists(owner: type, name: str) -> None:
    assert callable(getattr(owner, name, None)), (
        f"hypercorn {version('hypercorn')} has no {owner.__name__}.{name}: "
        "supervisor/server/hypercorn_patches.py needs a look before the pin moves"
    )


def test_install_all_wraps_each_once() -> None:
    install_all()
    wrapped = {name: getattr(owner, name) for owner, name in PATCHED}
    install_all()
    assert {name: getattr(owner, name) for owner, name in PATCHED} == wrapped
    assert all(getattr(method, hypercorn_patches._MARK) for method in wrapped.values())
    assert {H11Protocol, WSStream} == {owner for owner, _ in PATCHED}


def test_a_missing_attribute_is_skipped_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(hypercorn_patches, "PATCHED", ((WSStream, "_renamed_in_a_later_release"),))
    install_all()
    assert "WSStream._renamed_in_a_later_release" in caplog.text
    assert not hasattr(WSStream, "_renamed_in_a_later_release")
