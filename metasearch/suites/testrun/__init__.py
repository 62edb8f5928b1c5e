"""Test-based verdicts that a candidate cannot forge from inside its own process (grader side).

Stdlib only: the grading sandbox mounts this folder read-only (``grading.TESTRUN_MOUNT``) and imports it
as the package ``testrun``. ``harness.py`` runs next to candidate code and reports facts over a private
channel; ``channel.py`` reads them outside the test process; ``verdict.py`` runs two differently built
harnesses and judges them against test ids learned from a run without candidate code; ``scan.py`` is the
static tamper scan of candidate source. The host side (mounting, caching) lives in ``grading.py``.
``README.md`` is the threat model: what is defended, how, and what is not.
"""
