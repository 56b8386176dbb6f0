"""A bound on a block's wall time, for code that could loop (a replay): the test fails with a
clear message instead of hanging the suite."""

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def finishes_within(seconds: int) -> Iterator[None]:
    """Fail, rather than hang, if the block runs longer than ``seconds``."""

    def stop(*_args: object) -> None:
        raise AssertionError(f"did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
