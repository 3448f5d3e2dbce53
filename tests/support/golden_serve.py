"""One real ``mcp-supervisor serve`` for the web-tier goldens (and its pytest fixture).

Started as a subprocess over ``golden_config``'s config on 127.0.0.1, port chosen by
the kernel; ready once it said where it listens and its servers are steady, so the
first request of a golden meets the same state every run.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.golden_config import CLI, OPS, SERVERS, clean_env, write_config
from tests.support.golden_files import Golden, port_masker
from tests.support.golden_http import Recorder, exchange, http_request

WAIT_S = 20.0


class Serve:
    """The running ``serve``: its ``address`` and ``authority`` (``127.0.0.1:PORT``)."""

    def __init__(self, directory: Path) -> None:
        config = write_config(directory)
        command = [*CLI, "serve", "--config", str(config), "--bind", "127.0.0.1:0"]
        self.log = directory / "serve.log"  # a file: a pipe nobody reads would fill up
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [*command, "--state-dir", str(directory / "state")],
                stdin=subprocess.DEVNULL,
                stderr=log,
                env=clean_env(),
            )
        parts = urllib.parse.urlsplit(self._listening())
        assert parts.hostname is not None and parts.port is not None, parts
        self.port = parts.port
        self.address = (parts.hostname, parts.port)
        self.authority = f"{parts.hostname}:{parts.port}"
        self._steady()

    def _listening(self) -> str:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and self.process.poll() is None:
            match = re.search(r"admin api listening url=(\S+)", self.log.read_text())
            if match:
                return match.group(1)
            time.sleep(0.02)
        self.stop()
        raise AssertionError(f"serve never said where it listens: {self.log.read_text()}")

    def _steady(self) -> None:
        deadline = time.monotonic() + WAIT_S
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            answer = exchange(self.address, http_request("GET", "/v1/servers", self.authority, token=OPS))
            states = {s["name"]: s["state"] for s in json.loads(answer.body)["servers"]}
            if all(states.get(name) == "steady" for name in SERVERS):
                return
            time.sleep(0.02)
        raise AssertionError(f"servers not steady after {WAIT_S} s: {states}")

    def golden(self, name: str, about: str, rerecord: str) -> Golden:
        """A golden file of cases against this server (its port masked)."""
        return Golden(name, about, rerecord, port_masker(self.port))

    def recorder(self, name: str, about: str, rerecord: str) -> Recorder:
        """Requests to this server, recorded in a golden file of their own."""
        return Recorder(self.address, self.golden(name, about, rerecord))

    def stop(self) -> None:
        """SIGTERM (it drains and stops its servers), SIGKILL if that hangs."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """One ``serve`` for every test of a module (their cases do not disturb each other)."""
    running = Serve(tmp_path_factory.mktemp("serve"))
    try:
        yield running
    finally:
        running.stop()
