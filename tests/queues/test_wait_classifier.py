"""The classifier against the scheduler reference: every reason it lists lands in its category.

The reference's reason tables are carried in the repository (``data/scheduler_reasons.md``,
copied verbatim with their provenance), so these tests run from a clone alone.
"""

import re
from pathlib import Path

import pytest

from queues.models import WaitCategory
from queues.schedulers.classify import (
    KUEUE_BY_MESSAGE,
    KUEUE_REASONS,
    SLURM_TERMINAL,
    classify_kube,
    classify_kueue,
    classify_slurm,
)
from queues.services.workload import QuotaPosition, classify
from tests.conftest import require_service, shared_dir

REFERENCE = Path(__file__).parent / "data" / "scheduler_reasons.md"
SLURM_ROWS = {
    "1": WaitCategory.RESOURCE,
    "2a": WaitCategory.QUOTA,
    "2b": WaitCategory.QUOTA,
    "3": WaitCategory.QUEUE_RULE,
    "4": WaitCategory.DEPENDENCY,
    "5": WaitCategory.PLACEMENT,
}
CATEGORY_ROWS = {
    "1": WaitCategory.RESOURCE,
    "2": WaitCategory.QUOTA,
    "3": WaitCategory.QUEUE_RULE,
    "4": WaitCategory.DEPENDENCY,
    "5": WaitCategory.PLACEMENT,
}


def reference() -> str:
    return REFERENCE.read_text()


def section(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def expand(token: str) -> list[str]:
    """``(Assoc\\|QOS)Max*PerJob*`` → ``AssocMaxGRESPerJob``, ``QOSMaxGRESPerJob``."""
    token = token.replace("\\|", "|")
    match = re.search(r"\(([^)]*)\)", token)
    if match:
        return [
            name
            for alternative in match.group(1).split("|")
            for name in expand(token[: match.start()] + alternative + token[match.end() :])
        ]
    token = token.replace("*", "GRES")
    return [token]


def slurm_reference_reasons() -> list[tuple[str, str]]:
    table = section(reference(), "### 5.5 Pending reason codes", "### 5.6")
    found = []
    for line in table.splitlines():
        row = re.match(r"^\| \*\*(\w+) ", line)
        terminal = line.startswith("| Terminal")
        if not row and not terminal:
            continue
        for token in re.findall(r"`([^`]+)`", line.split("|", 2)[2]):
            if "…" in token or "<" in token or token.startswith("^") or ":" in token:
                continue
            for name in expand(token):
                found.append((name, "terminal" if terminal or row is None else row.group(1)))
    return found


def test_the_reference_lists_many_slurm_reasons():
    assert len(slurm_reference_reasons()) >= 60


def test_the_copy_is_the_references_own():
    """The copied sections are still the reference's own lines, where it sits beside the
    repository (an optional check of the provenance: the tests above need only the copy)."""
    original = shared_dir() / "reference" / "schedulers.md"
    require_service(
        "the scheduler reference (../shared)",
        original.exists(),
        f"{original.name} is not beside the repository; the tests above need only the copy",
    )
    lines = set(original.read_text().splitlines())
    copied = reference().split("-->", 1)[1].splitlines()
    assert [line for line in copied if line and line not in lines] == []
    assert len([line for line in copied if line]) >= 25


@pytest.mark.parametrize("reason, row", slurm_reference_reasons())
def test_every_slurm_reason_of_the_reference_has_its_category(reason, row):
    if row == "terminal":
        assert reason in SLURM_TERMINAL
        return
    verdict = classify_slurm(reason)
    assert verdict.category == SLURM_ROWS[row], reason
    if row == "2b":
        assert verdict.clears_by_itself is False, reason
    if row == "2a":
        assert verdict.clears_by_itself is True, reason


def kueue_reference_reasons() -> set[str]:
    text = section(reference(), "**`QuotaReserved=False` reasons**", "**Message templates**")
    return set(re.findall(r"`([A-Z][A-Za-z]+)`", text)) - {"UnadmittedWorkloadsObservability"}


def test_every_kueue_wait_reason_of_the_reference_is_known():
    reasons = kueue_reference_reasons()
    assert {"WaitingForQuota", "ExceedsMaxQuota", "NoMatchingFlavor", "PreemptionGated"} <= reasons
    for reason in reasons:
        assert reason in KUEUE_REASONS or reason in KUEUE_BY_MESSAGE or reason == "WaitingForQuota"


def cross_table() -> list[tuple[str, str, str]]:
    """(category row, Kueue cell, K8s pod cell) of the reference's cross-system table."""
    text = section(reference(), "## 9. Cross-system", "**Design note:**")
    rows = []
    for line in text.splitlines():
        row = re.match(r"^\| (\d) ", line)
        if row:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows.append((row.group(1), cells[1], cells[6]))
    return rows


def test_the_cross_system_table_kueue_reasons_match():
    rows = cross_table()
    assert len(rows) == 5
    at_limit = QuotaPosition(used=16, guarantee=16, maximum=16, request=1)
    for row, kueue, _pod in rows:
        for reason in re.findall(r"`([A-Z][A-Za-z]+)`", kueue):
            verdict = classify_kueue(reason, position=at_limit)
            if reason == "WaitingForQuota" and row == "1":
                lent = QuotaPosition(used=2, guarantee=8, maximum=16, request=1)
                verdict = classify_kueue(reason, position=lent)
            assert verdict.category == CATEGORY_ROWS[row], (row, reason)


def test_the_cross_system_table_kueue_messages_match():
    for row, kueue, _pod in cross_table():
        for message in re.findall(r'"([^"]+)"', kueue) + re.findall(r"\(`([a-z][^`]+)`\)", kueue):
            if "…" in message and not message.startswith("insufficient"):
                continue
            verdict = classify_kueue(
                "Pending", message.replace("…", "nvidia.com/gpu in flavor a100, 1 more needed")
            )
            assert verdict.category == CATEGORY_ROWS[row], (row, message)


def test_the_kube_scheduler_texts_of_the_reference():
    text = reference()
    sample = re.search(r"`(0/N nodes are available: [^`]+)`", text).group(1)
    assert classify_kube("Unschedulable", sample).category == WaitCategory.RESOURCE
    only_labels = "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."
    assert classify_kube("Unschedulable", only_labels).category == WaitCategory.PLACEMENT
    taint = "0/2 nodes are available: 2 node(s) had untolerated taint {gpu: h100}."
    assert classify_kube("Unschedulable", taint).category == WaitCategory.PLACEMENT
    for row, _kueue, pod in cross_table():
        for phrase in re.findall(r"`([^`]+)`", pod):
            verdict = classify_kube("FailedScheduling", phrase.replace("<res>", "nvidia.com/gpu"))
            assert verdict.category == CATEGORY_ROWS[row], (row, phrase)


@pytest.mark.parametrize(
    "used, guarantee, maximum, asked, expected",
    [
        (16, 16, 16, 1, WaitCategory.QUOTA),  # at guarantee, cannot borrow
        (18, 16, 18, 2, WaitCategory.QUOTA),  # above guarantee, borrowed all it may
        (4, 16, 16, 1, WaitCategory.RESOURCE),  # under guarantee: the cohort lent it out
        (16, 16, 24, 2, WaitCategory.RESOURCE),  # may still borrow: the pool is short
        (16, 16, None, 2, WaitCategory.RESOURCE),  # borrowing bounded only by the pool
        (15, 16, 16, 4, WaitCategory.RESOURCE),  # under guarantee, request spills over
    ],
)
def test_waiting_for_quota_depends_on_the_queue_usage(used, guarantee, maximum, asked, expected):
    position = QuotaPosition(used=used, guarantee=guarantee, maximum=maximum, request=asked)
    assert classify(scheduler="kueue", reason="WaitingForQuota", position=position).category == (
        expected
    )


@pytest.mark.parametrize(
    "scheduler, reason",
    [("slurm", "SomethingNew"), ("kueue", "BrandNewReason"), ("kube", "Weird"), ("other", "x")],
)
def test_unknown_reasons_are_kept_and_unclassified(scheduler, reason):
    verdict = classify(scheduler=scheduler, reason=reason, message="no template matches this")
    assert verdict.category == WaitCategory.UNCLASSIFIED
    assert verdict.reason == reason
    assert verdict.clears_by_itself is None


def test_slurm_reasons_with_details_and_parentheses():
    assert classify_slurm("ReqNodeNotAvail, UnavailableNodes:gpu01").reason == "ReqNodeNotAvail"
    assert classify_slurm("(Resources)").category == WaitCategory.RESOURCE
    assert classify_slurm("QOSGrpGRES").clears_by_itself is True
    assert classify_slurm("AssocMaxGRESPerJob").clears_by_itself is False
