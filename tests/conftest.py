from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest


def docker_ready() -> str | None:
    """None when a daemon answers and the sandbox image exists; otherwise why not."""
    try:
        from metasearch.sandboxes.images import default_image_tag, image_exists

        if subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode != 0:
            return "no Docker daemon answers"
        if not image_exists(default_image_tag()):
            return f"sandbox image {default_image_tag()} missing (run `metasearch images build`)"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker unavailable: {exc}"
    return None


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist every worker shares the machine's cores with the others: torch code run in a
    test's own process (the trainer seed in-process, the suites' helpers) gets one thread. Two OpenMP
    threads per worker on two cores spin against each other: one in-process training took 13-57 s
    instead of 4 s beside the other worker. Subprocesses inherit it; sandboxes and graders set their own."""
    if hasattr(config, "workerinput"):
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)


# The files that take longest (test-seconds of a CI run on two cores), longest first. The suite runs with
# ``--dist loadfile --no-loadscope-reorder`` (xdist otherwise orders files by how many tests they hold): a
# worker takes the next file in collection order when it is free, so these start first and the short files
# fill the end. In directory order the end-to-end files came last and one worker ran them alone for minutes
# while the other idled.
LONGEST_FIRST = (
    "tests/suites/test_kernels.py",
    "tests/suites/test_tests_verdict.py",
    "tests/suites/test_adapters.py",
    "tests/llm/test_real_model_study.py",  # CI only (-m slow); by the time it starts its vLLM is ready
    "tests/suites/test_test_shape.py",
    "tests/test_e2e.py",
    "tests/study/test_provenance.py",
    "tests/cluster/test_ray.py",
    "tests/cluster/test_ray_cluster.py",
    "tests/test_e2e_journey.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first (``LONGEST_FIRST``; the order within a file is kept). Tests marked ``slow``
    run only when asked for (``-m slow``), not in the default run."""
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


WATCHED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def signals_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test (or a library it drives in this process) that leaves a signal's handler changed gets it put
    back, with a warning naming it: every later subprocess would inherit an ignored SIGINT, and a server
    started then would not stop on Ctrl-C."""
    before = {signum: signal.getsignal(signum) for signum in WATCHED_SIGNALS}
    yield
    for signum, handler in before.items():
        now = signal.getsignal(signum)
        if now is not handler:
            signal.signal(signum, handler)
            name = signal.Signals(signum).name
            warnings.warn(f"{request.node.nodeid} left {name} handled by {now!r}", stacklevel=1)


@pytest.fixture(scope="session")
def docker_reason() -> str | None:
    """None when Docker sandboxes can run here, else why not (for tests that fall back to local ones)."""
    return docker_ready()


@pytest.fixture(scope="session")
def docker_sandbox_factory():
    reason = docker_ready()
    if reason and os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the Docker tests, but {reason}")
    if reason:
        pytest.skip(reason)
    from metasearch.sandboxes.docker import DockerSandbox
    from metasearch.sandboxes.protocol import DEFAULT_LIMITS

    made: list[DockerSandbox] = []

    def make(study: str = "pytest", **limits: Any) -> DockerSandbox:
        """A sandbox of the default configuration; ``limits`` replace fields of its default limits."""
        sandbox = DockerSandbox(
            DockerSandbox.Config(), study=study, limits=dataclasses.replace(DEFAULT_LIMITS, **limits)
        )
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.sweep()
