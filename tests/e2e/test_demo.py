"""`govindex demo`, as `make demo` runs it: its own embedded stack, the handbook walkthrough,
then the incident case read back as of the moment it began. The printed report is what a
newcomer reads, so its claims are checked line by line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def _section(report: str, number: int) -> list[str]:
    """The lines of step `number`, up to the blank line that ends it."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{number}. "))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def _line(lines: list[str], prefix: str) -> str:
    """The one line of a step that starts (after its indent) with `prefix`."""
    (found,) = [line for line in lines if line.strip().startswith(prefix)]
    return found


def test_the_demo_runs_and_reads_the_incident_back_as_of_its_start() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "govindex.cli.main", "demo"],
        capture_output=True,
        text=True,
        timeout=240,
        env={k: v for k, v in os.environ.items() if not k.startswith("GOVINDEX_")},
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    report = done.stdout

    # The handbook walkthrough still says what it said.
    assert "4.2 Ingested commit" in report
    assert "salary bands (ACL: group:hr only): 0 result(s)" in report
    assert "the earlier pack now verifies as: invalid (deleted)" in report
    assert report.rstrip().splitlines()[-1].startswith("Demo complete:")

    ingested = _section(report, 8)
    assert [line.split()[0] for line in ingested[2:]] == ["8.1", "8.2", "8.3", "8.4"]
    assert "(2025-06-03 10:20)" in ingested[4]  # the export was committed after 10:02

    # A deployment that finished at 09:58:40 is visible at 10:02 though committed at 10:20;
    # the rollback of 10:19 is not, and neither are the deployments before the hour.
    deployments = _section(report, 9)
    assert "d-7731 finished 09:58:40, committed 10:20: visible at 10:02" in deployments[1]
    assert "d-7731,payment-api,1.5.0,prod" in deployments[2]
    assert "deploy/deployments.csv#L6" in deployments[3]
    assert "d-7725" in _line(deployments, "outside the hour:")
    assert "d-7702" in _line(deployments, "outside the hour:")
    assert "d-7734" in _line(deployments, "not visible at 10:02")
    assert all("d-7734" not in line for line in deployments[:3])

    # The owner at the incident (the table's window ends on 2025-06-15) and now.
    owners = _section(report, 10)
    then, now = _line(owners, "at 10:02"), _line(owners, "now")
    assert "team:team-payments-core" in then and "2024-01-01..2025-06-15" in then
    assert "ownership/ownership.csv#L2" in then
    assert "team:team-checkout" in now and "2025-06-15..open" in now
    assert "team-checkout" not in "\n".join(owners[: owners.index(now)])

    # The runbook valid at 10:02 is the second version; now it is the third.
    runbook = _section(report, 11)
    assert "version 2 (commit of 2025-05-20 09:00)" in _line(runbook, "as of 10:02")
    assert "version 3 (commit of 2025-06-03 10:20)" in _line(runbook, "now")
    assert "fraud-check" not in runbook[2]  # a step only the third version has

    # The pack holds the required evidence it could find, says what it could not, and the
    # untrusted e-mail's instruction never reaches its text.
    pack = _section(report, 12)
    assert "status partial" in pack[0]
    items = "\n".join(pack)
    assert "[deployment_record] deploy/deployments.csv#L6" in items
    assert items.count("timeline_entry]") >= 2
    assert "missing: root_cause, 0 of 1" in items
    assert "trust 1" in _line(pack, "omissions:")
    assert "acme/mail/2025-06-03-payment-api-errors.md" in _line(pack, "kept out of model input")
    assert _line(pack, "the e-mail's").endswith("in the pack's text: no")
    assert "ignore previous instructions" not in report.lower()
