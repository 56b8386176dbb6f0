"""Texts Arbiter stores (history reasons, generated change titles) are stored in English and
read in the reader's language; a change's title names only the fields that change; a
change's warnings read as sentences; dates have one format per language."""

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import formats, translation

from governance import services
from governance.models import RuleChange
from governance.models.texts import stored_text
from tests.conftest import login

pytestmark = pytest.mark.django_db


def _propose_guarantee(world, user, value=30, **extra) -> RuleChange:
    return services.rule_change_create(
        user=user,
        reason="Model v3 deadline",
        edits=[
            services.EditSpec(
                target=world.vision_a100, field=name, value=getattr(world.vision_a100, name)
            )
            for name in ("borrow_limit", "lending_limit", "fair_share_weight")
        ]
        + [services.EditSpec(target=world.vision_a100, field="guarantee", value=value)],
        **extra,
    )


def _zh(client):
    client.cookies["django_language"] = "zh-hans"
    return client


def test_a_generated_title_names_only_the_fields_that_change(world, ops):
    """The edit form sends every field; the title names the one that changed, in English."""
    with translation.override("zh-hans"):
        change = _propose_guarantee(world, ops)

    assert change.title == "Vision · Training · A100 80G: guarantee (GPUs)"
    assert change.edits.count() == 1
    with translation.override("zh-hans"):
        label = translation.gettext("guarantee (GPUs)")
        assert label != "guarantee (GPUs)"
        expected = translation.gettext("%(objects)s: %(fields)s") % {
            "objects": "Vision · Training · A100 80G",
            "fields": label,
        }
        assert change.display_title == expected


def test_a_typed_title_is_shown_as_typed(world, ops):
    change = _propose_guarantee(world, ops, title="Vision: more GPUs for v3")
    with translation.override("zh-hans"):
        assert change.display_title == "Vision: more GPUs for v3"


@pytest.mark.parametrize(
    ("stored", "chinese_contains"),
    [
        ("Proposed", "提"),
        ("Applied", "应用"),
        ("Rolled back by change #12", "12"),
        ("Roll this rollback back if the reason for change #3 holds again.", "#3"),
        ("Vision · Training · A100 80G: guarantee (GPUs), borrow limit (GPUs)", "Vision"),
        ("Roll back #3: Speech may borrow 12 A100", "Speech may borrow 12 A100"),
        ("Someone typed this reason.", "Someone typed this reason."),
        ("", ""),
    ],
)
def test_stored_texts_read_in_the_readers_language(stored, chinese_contains):
    with translation.override("en"):
        assert stored_text(stored) == stored
    with translation.override("zh-hans"):
        shown = stored_text(stored)
    assert chinese_contains in shown
    if stored and stored != "Someone typed this reason.":
        assert shown != stored


def test_history_reasons_and_titles_are_in_the_readers_language(world, ops, ops2):
    change = _propose_guarantee(world, ops)
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=ops2)
    reasons = set(change.history.values_list("history_change_reason", flat=True))
    # The author's reason for creating and proposing it; the steps after in English.
    assert {"Model v3 deadline", "Approved", "Applied"} <= reasons
    assert not {"Created", "Proposed"} & reasons
    assert change.history.filter(history_user__isnull=True).count() == 0

    english = login(ops).get(reverse("change_detail", args=[change.pk])).content.decode()
    chinese = _zh(login(ops)).get(reverse("change_detail", args=[change.pk])).content.decode()

    assert "Reason:</span> Model v3 deadline" in english
    assert "Reason:</span> Proposed" not in english
    for word in ("Reason:</span> Approved", "Reason:</span> Applied", "guarantee (GPUs)"):
        assert word not in chinese
    with translation.override("zh-hans"):
        assert translation.gettext("Applied") in chinese
        assert change.display_title in chinese


def test_warnings_read_as_sentences_not_json(world, ops, ops2):
    change = _propose_guarantee(world, ops)
    services.rule_change_approve(change=change, user=ops2)
    services.rule_change_apply(change=change, user=ops2)
    warned = services.rule_change_create(
        user=ops,
        reason="Again",
        edits=[services.EditSpec(target=world.vision_a100, field="guarantee", value=32)],
        confirmation_reason="It cannot wait",
    )
    assert warned.warnings

    page = login(ops).get(reverse("change_detail", args=[change.pk])).content.decode()
    warned_page = login(ops).get(reverse("change_detail", args=[warned.pk])).content.decode()

    assert "[]" not in page
    assert '["' not in warned_page
    shown = warned_page.replace("&quot;", '"').replace("&#x27;", "'")
    assert warned.display_warnings[0][:40] in shown


@pytest.mark.parametrize(
    ("language", "date_text", "datetime_text"),
    [
        ("en", "30 Nov 2026", "30 Nov 2026, 17:05"),
        ("zh-hans", "2026年11月30日", "2026年11月30日 17:05"),
    ],
)
def test_one_date_format_per_language(language, date_text, datetime_text):
    moment = dt.datetime(2026, 11, 30, 17, 5)
    with translation.override(language):
        for name in ("DATE_FORMAT", "SHORT_DATE_FORMAT"):
            assert formats.date_format(moment.date(), name) == date_text
        for name in ("DATETIME_FORMAT", "SHORT_DATETIME_FORMAT"):
            assert formats.date_format(moment, name) == datetime_text
        assert formats.localize(moment.date()) == date_text
        # No trailing period that a sentence ending in a date would double.
        assert not formats.date_format(moment, "DATETIME_FORMAT").endswith(".")


def test_pages_show_dates_in_one_format(world, ops, ops2):
    change = _propose_guarantee(world, ops)
    page = login(ops).get(reverse("change_detail", args=[change.pk])).content.decode()
    assert not re.search(r"\d{1,2}/\d{1,2}/\d{4}", page)
    assert not re.search(r"\b(a\.m\.|p\.m\.)", page)
