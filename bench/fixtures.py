"""The keyword arguments the benchmarks' fixtures pass to many services at once, typed.

Imported after ``django.setup()`` by the scripts beside it (the models are only named for the
type checker here).
"""

from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from governance.models import User


class Author(TypedDict):
    """Who writes a fixture's rule and why: every governed write has both."""

    user: "User"
    reason: str


class TierReview(TypedDict):
    """The review fields every tier of a fixture shares."""

    eligibility: str
    confirmed_by: str
    review_cycle_days: int
    owner: "User"


def author(user: "User", reason: str) -> Author:
    return Author(user=user, reason=reason)


def tier_review(owner: "User") -> TierReview:
    return TierReview(eligibility="Any", confirmed_by="Ops", review_cycle_days=90, owner=owner)
