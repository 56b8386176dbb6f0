"""A flagged request's message reads "1 approved exception" in the singular and in Chinese,
from the one stored message (a plural message picks its form when it is read)."""

import pytest
from django.utils import translation

from governance.models.texts import message_english, message_plural, message_text, ngettext_noop

SINGULAR, PLURAL = ngettext_noop(
    "%(project)s already had %(count)d approved exception this month; the policy "
    "flags requests from %(limit)d on.",
    "%(project)s already had %(count)d approved exceptions this month; the policy "
    "flags requests from %(limit)d on.",
)


@pytest.mark.parametrize(
    ("count", "english"),
    [
        (
            1,
            "Vision already had 1 approved exception this month; the policy flags requests "
            "from 1 on.",
        ),
        (
            3,
            "Vision already had 3 approved exceptions this month; the policy flags requests "
            "from 1 on.",
        ),
    ],
)
def test_the_flag_message_agrees_with_its_number(count: int, english: str) -> None:
    stored = message_plural(
        SINGULAR, PLURAL, number="count", project="Vision", count=count, limit=1
    )

    assert message_english(stored) == english
    with translation.override("zh-hans"):
        assert message_text(stored) == (
            f"Vision 本月已有 {count} 个获批的例外；审批策略会在达到 1 个时开始标记申请。"
        )


def test_a_message_stored_before_plurals_still_reads() -> None:
    old = {"key": PLURAL, "params": {"project": "Vision", "count": 1, "limit": 1}}

    with translation.override("zh-hans"):
        assert message_text(old).startswith("Vision 本月已有 1 个获批的例外")
