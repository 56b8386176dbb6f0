"""Nothing a person reads stays in English on a Chinese page: every page of the URL registry,
as each of the demo's personas, on the demo's data (its rules, changes, requests with their
frozen evidence, job history and stored monthly reviews, and a change proposed inside the
observation window of another), read in zh-Hans, holds none of the product's own English
words (every choice label of its vocabularies and the phrases in ``tests.zh_vocabulary``).
What people typed (names, reasons) is shown as typed and is not counted.
"""

import pytest
from django.core.management import call_command
from django.utils import translation

from governance import services
from governance.models import Quota, User
from reports.selectors.stored_reviews._format import class_label, timeline_title
from tests import zh_vocabulary

pytestmark = pytest.mark.django_db


def _observed_change() -> None:
    """A guarantee change applied now, and a second one on the same quota proposed in English
    inside its observation window: its stored warning (quoting the first one's title) reads
    in Chinese on a Chinese page."""
    ops, ops2 = User.objects.get(username="ops"), User.objects.get(username="ops2")
    quota = Quota.objects.filter(project__slug="vision").order_by("pk").first()
    assert quota is not None
    first = services.rule_change_create(
        user=ops,
        reason="More for v3",
        edits=[services.EditSpec(target=quota, field="guarantee", value=quota.guarantee + 1)],
    )
    services.rule_change_approve(change=first, user=ops2)
    services.rule_change_apply(change=first, user=ops2)
    quota.refresh_from_db()
    with translation.override("en"):
        second = services.rule_change_create(
            user=ops,
            reason="More again",
            edits=[services.EditSpec(target=quota, field="guarantee", value=quota.guarantee + 1)],
            confirmation_reason="Agreed with the lead",
        )
    assert second.warnings, "the second change was not warned about the first one"


def test_every_page_in_chinese_holds_no_english_word_of_the_product(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("seed_demo", verbosity=0)
    call_command("seed_demo_workload", "--days", "40", verbosity=0)
    call_command("seed_demo_approvals", verbosity=0)
    call_command("seed_demo_reviews", "--months", "1", verbosity=0)
    _observed_change()

    read: list[str] = []
    found = zh_vocabulary.crawl(read=read)

    report = [
        f"{page}: {word!r} in {text[:120]!r}" for page, hits in found.items() for word, text in hits
    ]
    assert report == []
    for page in ["/monthly-reviews/", "/requests/", "/jobs/wait/", "/changes/", "/quotas/"]:
        assert any(f"ops {page}" in url for url in read), page
    assert any(url == "member /jobs/wait/" for url in read)
    assert len(read) > 150


def test_the_crawl_finds_english_where_a_page_shows_it():
    """The checker itself: an English label on a Chinese page is found; typed text is not."""
    words = zh_vocabulary.vocabulary()
    texts = zh_vocabulary.read_texts(
        '<p title="Quota limit">等待</p><p>Resource shortage: 3 个作业</p>'
        "<p>Model v3 needs more: Cautious</p><code>AssocGrpGRES</code>"
    )

    hits = zh_vocabulary.english_words(texts, words, typed={"Model v3 needs more: Cautious"})

    assert {word for word, _text in hits} == {"Quota limit", "Resource shortage", "Quota"}
    assert "Cautious" in words and "Preemptible" in words and "GPU-hours lost" in words


def test_a_review_stored_before_titles_were_messages_reads_in_chinese():
    """A review frozen with English titles (no ``title_message``) still reads in Chinese."""
    grant = {"kind": "grant", "title": "Quota exception · Language model pre-training"}
    change = {"kind": "change", "title": "Roll back #2: Exploratory work ages after 3 h"}
    with translation.override("zh-hans"):
        assert timeline_title(grant) == (
            translation.gettext("Quota exception") + " · Language model pre-training"
        )
        assert timeline_title(change).startswith(
            translation.gettext("Roll back #%(id)d: %(title)s")[:2]
        )
        assert "Roll back" not in timeline_title(change)
        assert class_label({"preemption_class": "cautious", "class_kind": "cautious"}) == "谨慎抢占"
    with translation.override("en"):
        assert timeline_title(grant) == grant["title"]
        assert class_label({"preemption_class": "cautious", "class_kind": "cautious"}) == "Cautious"
