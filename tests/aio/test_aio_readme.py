"""The README's "From asyncio" example runs as written, from a fresh, unactivated shell
(as tests/project/test_demo.py runs the Trio one)."""

from __future__ import annotations

from pathlib import Path

from tests.project.test_demo import readme_embedding_example, run_unactivated


def test_the_readme_asyncio_example_runs_as_written(tmp_path: Path) -> None:
    example = readme_embedding_example("### From asyncio")
    assert "from supervisor.aio import Supervisor" in example and "asyncio.run(main())" in example
    done = run_unactivated(example, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "'ok': True" in done.stdout, (done.stdout, done.stderr)
    assert "'tool': 'time_get_current_time'" in done.stdout
