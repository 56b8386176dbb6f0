"""End-to-end: the README's walk-through, step by step as written, in English and in Chinese.

On the demo data (``seed_demo``, as ``make run`` loads it) and in Debian's headless Chromium:
``ops`` proposes a quota change with a reason, ``ops2`` approves and applies it, the quota's
history tells who and why; then a tier change approved by its owner ``approver``; then a new
quota, proposed by ``ops`` and approved by ``ops2``. The
Chinese run switches the language on the sign-in page, as a user would, finds every link
and button by its translated label, and checks each page for English left untranslated.
A screenshot of every step is written to ``var/screenshots/walkthrough/<language>/``.
"""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import translation
from django.utils.text import capfirst

from approvals.models import Approval, RequestEvent, UpgradeRequest
from governance.models import (
    GpuFlavor,
    Pool,
    PreemptionClass,
    PriorityTier,
    Project,
    Quota,
    RuleChange,
    User,
)
from governance.models.texts import stored_text
from governance.services.demo import DEMO_PASSWORD
from tests.governance.test_browser_flows import browser  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

README = settings.BASE_DIR / "README.md"
QUOTA_REASON = "Model v3 needs more A100 until March"
TIER_REASON = "Jobs above 48 GPUs starve the others"
NEW_QUOTA_REASON = "Speech starts serving its recogniser"
# Words that stay as they are in Chinese: product names, units, acronyms, the API header.
KEPT_WORDS = {
    "Arbiter",
    "GPU",
    "GPUs",
    "API",
    "CPU",
    "Slurm",
    "Kueue",
    "Kubernetes",
    "Token",
    "NVIDIA",
    "SXM",
    "OpenAPI",
    "REST",
    "CI",
    "ID",
    "English",
    "JSON",
    "URL",
    "UTC",
}


def _label(language: str, text: str) -> str:
    with translation.override(language):
        return capfirst(translation.gettext(text))


def test_the_readme_walkthrough_is_the_one_this_test_follows():
    """The steps below are the README's: if the README changes, this test must too."""
    readme = README.read_text()
    for words in [
        "sign in as `ops`",
        "Open **Quotas**, the **Details** of\n   the row Vision · Training cluster · A100 80G, "
        "then **Propose a change**",
        "Set **Guarantee (GPUs)** to 4 more than it shows (`28` on a fresh demo)",
        "**Propose change**",
        "sign in as `ops2`. Open **Changes** and the change at the top,\n   **Approve** it, "
        "then **Apply** it",
        "its **History** tab shows who\n   changed it, why, and through which change",
        "open **Tiers**, then\n   **Key project**, **Propose a change**, set **GPU cap per job** "
        "to 16 less than it shows\n   (`48` on a fresh demo)",
        "**Propose\nchange** then asks for a **Confirmation** at the top of the form",
        "step 6 creates a quota that then exists: the second time, choose **L40S 48G**",
        "| `wei.zhang` |",
        "Sign in as `approver` (its owner): **Changes**, the change at the top,\n   **Approve**",
        "Then `ops2` (or `ops`) opens it the same way and **Apply**s it",
        "| `ops2` |",
        "as `ops`, open **Quotas**, then **New quota**; type `speech`\n   in **Project**, choose "
        "**Inference cluster** and **A100 80G**, set **Guarantee (GPUs)** to\n   `2`, choose "
        "**Preemptible** as **Preemption class**",
        "Sign in as `ops2`: **Changes**, the change at the top, **Approve** it,\n   then "
        "**Apply** it. **Quotas** now lists Speech · Inference cluster · A100 80G.",
    ]:
        assert words in readme, words


class Walk:
    """One browser page following the README in one language, with screenshots."""

    def __init__(self, page, base_url: str, language: str) -> None:
        self.page = page
        self.base_url = base_url
        self.language = language
        self.step = 0
        self.folder = Path(settings.DATA_DIR) / "screenshots" / "walkthrough" / language
        self.folder.mkdir(parents=True, exist_ok=True)
        for old in self.folder.glob("*.png"):
            old.unlink()
        self.untranslated: dict[str, list[str]] = {}
        self._data = _data_texts()

    def t(self, text: str) -> str:
        return _label(self.language, text)

    def shot(self, name: str) -> None:
        self.step += 1
        self.page.screenshot(path=str(self.folder / f"{self.step:02d}-{name}.png"), full_page=True)
        if self.language != "en":
            found = untranslated_words(self.page.locator("body").inner_text(), self._data)
            if found:
                self.untranslated[f"{self.step:02d}-{name} {self.page.url}"] = found

    def click_link(self, text: str, *, within: str = "body") -> None:
        self.page.locator(within).get_by_role("link", name=text, exact=True).first.click()
        self.page.wait_for_load_state()

    def click_button(self, text: str) -> None:
        self.page.locator("main").get_by_role("button", name=text, exact=True).first.click()
        self.page.wait_for_load_state()

    def sign_in(self, username: str) -> None:
        self.page.goto(self.base_url + "/")
        assert "/accounts/login/" in self.page.url
        if self.language != "en" and self.page.locator("html").get_attribute("lang") == "en":
            # The language switch at the top right, as a user finds it.
            self.page.locator("button[name=language][value=zh-hans]").click()
            self.page.wait_for_load_state()
        assert self.page.locator("html").get_attribute("lang") == self.language
        self.page.get_by_label(self.t("Username")).fill(username)
        self.page.get_by_label(self.t("Password")).fill(DEMO_PASSWORD)
        self.shot(f"sign-in-{username}")
        self.click_button(self.t("Sign in"))
        assert self.page.url == self.base_url + "/", self.page.url
        self.shot(f"home-{username}")

    def sign_out(self) -> None:
        self.page.locator("header").get_by_role("button", name=self.t("Log out")).click()
        self.page.wait_for_load_state()

    def nav(self, text: str) -> None:
        self.click_link(self.t(text), within="nav.site-nav")

    def open_quota(self, project: str, pool: str, flavor: str) -> None:
        """Quotas → the row of ``project · pool · flavor`` → Details."""
        self.nav("Quotas")
        row = (
            self.page.locator("main tbody tr")
            .filter(has=self.page.get_by_role("link", name=project, exact=True))
            .filter(has_text=pool)
            .filter(has_text=flavor)
        )
        row.get_by_role("link", name=self.t("Details"), exact=True).click()
        self.page.wait_for_load_state()


def _data_texts() -> list[str]:
    """What the demo's people typed (names, descriptions, reasons, titles): shown as typed in
    every language, so not "untranslated"."""
    texts: set[str] = {QUOTA_REASON, TIER_REASON, NEW_QUOTA_REASON}
    models = [User, Project, Pool, GpuFlavor, PriorityTier, PreemptionClass]
    for model in models:
        names = [
            field.name
            for field in model._meta.get_fields()
            if getattr(field, "get_internal_type", lambda: "")() in ("CharField", "TextField")
            and not getattr(field, "choices", None)  # a vocabulary: its translated label
            and field.name != "password"
        ]
        for row in model._default_manager.values_list(*names):
            texts.update(value for value in row if value)
    # A change's typed texts only: a title or rollback condition Arbiter wrote must show in
    # the reader's language, so it is not data.
    for change in RuleChange.objects.all():
        texts.update(filter(None, [change.reason, change.ticket, change.confirmation_reason]))
        if change.title_message is None:
            texts.add(change.title)
        with translation.override("zh-hans"):
            generated = stored_text(change.rollback_condition) != change.rollback_condition
        if not generated:
            texts.add(change.rollback_condition)
    # What requesters and approvers typed; not what Arbiter wrote (a stored message).
    for request in UpgradeRequest.objects.all():
        texts.update(filter(None, [request.justification, request.business_impact]))
        texts.update(request.job_ids or [])
    texts.update(Approval.objects.exclude(comment="").values_list("comment", flat=True))
    texts.update(
        RequestEvent.objects.filter(message__isnull=True)
        .exclude(comment="")
        .values_list("comment", flat=True)
    )
    texts.update(str(user) for user in User.objects.all())
    texts.update(str(quota) for quota in Quota.objects.select_related("project", "pool", "flavor"))
    return sorted(texts, key=len, reverse=True)


def untranslated_words(text: str, data: list[str]) -> list[str]:
    """Runs of English words on a Chinese page, once the demo's own data is taken out."""
    for value in data:
        text = text.replace(value, " ")
    text = re.sub(r"\S+@\S+|https?://\S+", " ", text)
    found = set()
    # Words of letters only: slugs, models and ids (a100-80g, ops2, OPS-1201) are not words.
    for token in re.split(r"[\s,;:!?()\[\]{}<>“”\"·→…/]+", text):
        word = token.strip(".")
        if (
            re.fullmatch(r"[A-Za-z][A-Za-z'’]*[a-z][A-Za-z'’]*", word)
            and word not in KEPT_WORDS
            and len(word) > 1
        ):
            found.add(word)
    return sorted(found)


def test_the_untranslated_text_check_finds_english(db):
    """The check below can fail: English chrome on a Chinese page is found, names are not."""
    data = ["Training cluster", "Sam Okafor"]
    assert untranslated_words("配额 Training cluster 由 Sam Okafor 修改 GPU 24 → 28", data) == []
    assert untranslated_words("历史 Reason: Proposed 原因", data) == ["Proposed", "Reason"]
    assert untranslated_words("提出 a100-80g ops2 H100 API", data) == []


@pytest.fixture
def demo(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("seed_demo")
    call_command("seed_demo_approvals")  # as `make run` loads it: requests and notifications


CONFIRMATION = "The first walk-through's change is understood; this one goes ahead"


@pytest.mark.parametrize(("language", "again"), [("en", "zh-hans"), ("zh-hans", "en")])
def test_the_readme_walkthrough(browser, live_server, demo, language, again):  # noqa: F811
    """The walk-through in one language, then again in the other on the same demo (as the
    README says it can be): the values go up again, and the second time the form asks for a
    confirmation in plain view, because the first time's changes are still observed."""
    walk_through(browser, live_server.url, language, second=False)
    walk_through(browser, live_server.url, again, second=True)


def _propose(walk: Walk, *, second: bool) -> None:
    """Propose change; the second time, the plan warns (the observation window of the first
    change): the confirmation shows at the top of the form, is written, and sent again."""
    page = walk.page
    walk.click_button(walk.t("Propose change"))
    confirm = page.locator("#change-confirm textarea")
    if not second:
        assert confirm.count() == 0
        return
    assert confirm.is_visible(), "the confirmation is asked for in plain view"
    walk.shot("confirmation-asked")
    confirm.fill(CONFIRMATION)
    walk.click_button(walk.t("Propose change"))


def walk_through(browser, base_url: str, language: str, *, second: bool) -> None:  # noqa: F811
    context = browser.new_context(locale="en-US", viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.set_default_timeout(20_000)
    walk = Walk(page, base_url, language)
    quota = Quota.objects.get(
        project__slug="vision", pool__slug="training", flavor__slug="a100-80g"
    )
    before = quota.guarantee
    assert before == (28 if second else 24)
    after = before + 4

    # 1. Sign in as ops; Quotas → Vision · Training cluster · A100 80G → Propose a change.
    walk.sign_in("ops")
    nav_fits(page)
    walk.nav("Quotas")
    walk.shot("quotas")
    walk.open_quota("Vision", "Training cluster", "A100 80G")
    assert page.url.endswith(f"/quotas/{quota.pk}/")
    walk.shot("quota")
    walk.click_link(walk.t("Propose a change"), within="main")
    walk.shot("quota-form")

    # 2. Guarantee 4 more (28 the first time), a reason, Propose change: the plan; ops may
    # not approve it.
    page.get_by_label(walk.t("guarantee (GPUs)"), exact=True).fill(str(after))
    page.locator("textarea[name=reason]").fill(QUOTA_REASON)
    _propose(walk, second=second)
    assert re.search(r"/changes/\d+/$", page.url), page.url
    change = RuleChange.objects.filter(reason=QUOTA_REASON).latest("pk")
    main = page.locator("main").inner_text()
    assert str(before) in main and str(after) in main
    assert walk.t("You proposed this change: someone else must approve it.") in main
    assert page.locator("main").get_by_role("button", name=walk.t("Approve")).count() == 0
    # The title names the one field that changed, in the reader's language.
    heading = page.locator("h1").inner_text()
    assert walk.t("guarantee (GPUs)").lower() in heading.lower()
    assert walk.t("borrow limit (GPUs)").lower() not in heading.lower()
    walk.shot("change-proposed")
    assert Quota.objects.get(pk=quota.pk).guarantee == before
    assert bool(change.warnings) == second

    # 3. Log out; ops2: Changes → the change at the top → Approve → Apply.
    walk.sign_out()
    walk.sign_in("ops2")
    walk.nav("Changes")
    walk.shot("changes")
    page.locator("main a.timeline__subject").first.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/changes/{change.pk}/")
    walk.click_button(walk.t("Approve"))
    walk.shot("change-approved")
    walk.click_button(walk.t("Apply"))
    walk.shot("change-applied")
    assert Quota.objects.get(pk=quota.pk).guarantee == after

    # 4. The quota guarantees the new value; its History tab: who, why, through which change.
    walk.open_quota("Vision", "Training cluster", "A100 80G")
    assert str(after) in page.locator("main").inner_text()
    walk.click_link(walk.t("History"), within="main")
    history = page.locator("main").inner_text()
    assert QUOTA_REASON in history
    assert "Lena Fischer" in history  # ops2 applied it
    assert page.locator(f"main a[href$='/changes/{change.pk}/']").count() >= 1
    walk.shot("quota-history")

    # 5. A tier change goes to its owner: ops proposes, approver approves, ops2 applies.
    cap = PriorityTier.objects.get(slug="key-project").max_gpus_per_job
    assert cap == (48 if second else 64)
    walk.sign_out()
    walk.sign_in("ops")
    walk.nav("Tiers")
    walk.click_link("Key project", within="main")
    walk.click_link(walk.t("Propose a change"), within="main")
    page.get_by_label(walk.t("GPU cap per job"), exact=True).fill(str(cap - 16))
    page.locator("textarea[name=reason]").fill(TIER_REASON)
    _propose(walk, second=second)
    tier_change = RuleChange.objects.filter(reason=TIER_REASON).latest("pk")
    walk.shot("tier-change-proposed")
    walk.sign_out()
    walk.sign_in("approver")
    assert walk.t("Lead") not in page.locator("header .badge--role").inner_text()
    walk.nav("Changes")
    page.locator("main a.timeline__subject").first.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/changes/{tier_change.pk}/")
    walk.click_button(walk.t("Approve"))
    walk.shot("tier-change-approved-by-owner")
    walk.sign_out()
    walk.sign_in("ops2")
    walk.nav("Changes")
    page.locator("main a.timeline__subject").first.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/changes/{tier_change.pk}/")
    walk.click_button(walk.t("Apply"))
    walk.shot("tier-change-applied")
    assert PriorityTier.objects.get(slug="key-project").max_gpus_per_job == cap - 16
    walk.click_link(walk.t("Changes"), within="nav.site-nav")
    walk.shot("changes-after")

    # 6. A new quota is proposed; ops2 approves and applies it.
    walk.sign_out()
    walk.sign_in("ops")
    walk.nav("Quotas")
    walk.click_link(walk.t("New quota"), within="main")
    page.get_by_label(walk.t("project"), exact=True).fill("speech")
    page.get_by_label(walk.t("pool"), exact=True).select_option(label="Inference cluster")
    # The second time the A100 quota exists: the README says to choose L40S 48G then.
    flavor, flavor_slug = ("L40S 48G", "l40s-48g") if second else ("A100 80G", "a100-80g")
    page.get_by_label(walk.t("flavor"), exact=True).select_option(label=flavor)
    page.get_by_label(walk.t("guarantee (GPUs)"), exact=True).fill("2")
    page.get_by_label(walk.t("preemption class"), exact=True).select_option(label="Preemptible")
    page.locator("textarea[name=reason]").fill(NEW_QUOTA_REASON)
    walk.click_button(walk.t("Propose change"))
    confirm = page.locator("#change-confirm textarea")
    if second and confirm.count():  # the first time's new quota, in the same pool, is observed
        confirm.fill(CONFIRMATION)
        walk.click_button(walk.t("Propose change"))
    assert re.search(r"/changes/\d+/$", page.url), page.url
    quota_change = RuleChange.objects.filter(reason=NEW_QUOTA_REASON).latest("pk")
    main = page.locator("main").inner_text()
    assert walk.t("You proposed this change: someone else must approve it.") in main
    new_quota = Quota.objects.filter(
        project__slug="speech", pool__slug="inference", flavor__slug=flavor_slug
    )
    assert not new_quota.exists()
    walk.shot("new-quota-proposed")
    walk.sign_out()
    walk.sign_in("ops2")
    walk.nav("Changes")
    page.locator("main a.timeline__subject").first.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/changes/{quota_change.pk}/")
    walk.click_button(walk.t("Approve"))
    walk.click_button(walk.t("Apply"))
    walk.shot("new-quota-applied")
    created = new_quota.get()
    assert created.guarantee == 2
    walk.nav("Quotas")
    assert "Inference cluster" in page.locator("main").inner_text()

    # Beyond the README: what Arbiter wrote itself (notifications, a request's timeline and
    # flags) reads in the reader's language too.
    page.locator("nav.site-nav a[href$='/notifications/']").click()  # its name has a count
    page.wait_for_load_state()
    walk.shot("notifications")
    notification = page.locator("main ul.notifications a")
    assert notification.count() > 0
    notification.first.click()
    page.wait_for_load_state()
    assert "/requests/" in page.url, page.url
    walk.shot("request")

    context.close()
    assert walk.untranslated == {}, walk.untranslated


def nav_fits(page) -> None:
    """At 1366 px the whole navigation of ops shows: no link is cut off or hidden."""
    nav = page.locator("nav.site-nav")
    overflow = nav.evaluate("nav => nav.scrollWidth - nav.clientWidth")
    assert overflow <= 0, f"the navigation overflows by {overflow} px"
    width = page.viewport_size["width"]
    for link in nav.locator("a").all():
        box = link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (
            link.inner_text()
        )
