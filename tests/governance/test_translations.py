"""The Simplified Chinese catalog: complete, compiled from the current .po, and used by the pages.

The .po and the compiled .mo are both committed, so a machine without GNU gettext still serves
the translated UI; these tests catch a catalog left with gaps or a .mo left behind its .po.
"""

import ast
import gettext
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import translation

from governance.models import PriorityTier, Quota
from tests.conftest import login, require_service

CATALOG_DIR = Path(settings.LOCALE_PATHS[0]) / "zh_Hans" / "LC_MESSAGES"
PO_FILE = CATALOG_DIR / "django.po"
# Every catalog: the project's (LOCALE_PATHS) and each app's own (``<app>/locale``).
CATALOGS = sorted(Path(settings.BASE_DIR).glob("*/locale/zh_Hans/LC_MESSAGES/django.po"))

PLACEHOLDER = re.compile(r"%\(\w+\)[sdfir]|%%|%[sdfir]")


@dataclass
class Entry:
    msgid: str = ""
    msgid_plural: str | None = None
    msgctxt: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    line: int = 0


def _parse_po(path: Path) -> list[Entry]:
    """A small .po reader: enough for the catalogs makemessages writes."""
    entries: list[Entry] = []
    entry: Entry | None = None
    flags: set[str] = set()
    target = "msgid"
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#~"):  # blank or obsolete
            continue
        if line.startswith("#"):
            if line.startswith("#,"):
                flags.update(flag.strip() for flag in line[2:].split(","))
            continue
        keyword, _sep, rest = line.partition(" ")
        if keyword.startswith('"'):  # continues the previous string
            assert entry is not None, f"{path}:{number}: a string outside an entry"
            rest, keyword = line, target
        elif keyword in ("msgctxt", "msgid") and (entry is None or entry.msgstr):
            entry = Entry(line=number, flags=flags)
            flags = set()
            entries.append(entry)
        assert entry is not None, f"{path}:{number}: {keyword} before any msgid"
        text = ast.literal_eval(rest)
        target = keyword
        plural_form = re.fullmatch(r"msgstr\[(\d+)\]", keyword)
        if keyword == "msgstr" or plural_form:
            index = int(plural_form.group(1)) if plural_form else 0
            entry.msgstr[index] = entry.msgstr.get(index, "") + text
        elif keyword in ("msgctxt", "msgid", "msgid_plural"):
            setattr(entry, keyword, (getattr(entry, keyword) or "") + text)
        else:
            raise AssertionError(f"{path}:{number}: unknown keyword {keyword}")
    return entries


def test_every_catalog_is_checked():
    assert PO_FILE in CATALOGS
    assert len(CATALOGS) >= 2, CATALOGS  # governance's and reports'


@pytest.fixture(scope="module", params=CATALOGS, ids=lambda path: path.parts[-5])
def po_file(request) -> Path:
    return request.param


@pytest.fixture(scope="module")
def entries(po_file) -> list[Entry]:
    assert po_file.exists(), f"missing catalog {po_file}"
    return _parse_po(po_file)


def _messages(entries: list[Entry]) -> list[Entry]:
    return [entry for entry in entries if entry.msgid]


def test_catalog_header_declares_chinese_with_one_plural_form(entries):
    header = entries[0]

    assert header.msgid == ""
    assert "fuzzy" not in header.flags
    assert "Language: zh_Hans\n" in header.msgstr[0]
    assert "Plural-Forms: nplurals=1; plural=0;\n" in header.msgstr[0]
    assert "charset=UTF-8" in header.msgstr[0]


def test_catalog_has_every_message_translated_and_none_fuzzy(entries, po_file):
    messages = _messages(entries)
    untranslated = [
        f"line {entry.line}: {entry.msgid!r}"
        for entry in messages
        if not entry.msgstr or not all(text.strip() for text in entry.msgstr.values())
    ]
    fuzzy = [f"line {entry.line}: {entry.msgid!r}" for entry in messages if "fuzzy" in entry.flags]

    assert len(messages) > (300 if po_file == PO_FILE else 100), "the catalog lost its messages"
    assert untranslated == []
    assert fuzzy == []


def test_plural_messages_have_exactly_the_one_chinese_form(entries):
    plurals = [entry for entry in _messages(entries) if entry.msgid_plural is not None]

    assert plurals, "the catalog has no plural message; the check below would prove nothing"
    for entry in plurals:
        assert sorted(entry.msgstr) == [0], f"line {entry.line}: {entry.msgid!r}"


def test_translations_keep_the_placeholders_of_the_english(entries):
    formatted = [entry for entry in _messages(entries) if "python-format" in entry.flags]
    wrong = [
        f"line {entry.line}: {entry.msgid!r} -> {text!r}"
        for entry in formatted
        for text in entry.msgstr.values()
        if Counter(PLACEHOLDER.findall(text)) != Counter(PLACEHOLDER.findall(entry.msgid))
    ]

    assert formatted, "no python-format message found; the parser is broken"
    assert wrong == []


def test_msgfmt_finds_no_error_and_nothing_left_to_translate(po_file):
    msgfmt = shutil.which("msgfmt")
    require_service("GNU gettext (msgfmt)", msgfmt is not None, "msgfmt is not on PATH")

    result = subprocess.run(
        [str(msgfmt), "--check", "--statistics", "-o", "/dev/null", str(po_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )

    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"\d+ translated messages\.\n", result.stderr), result.stderr


def test_compiled_catalog_matches_the_po(entries, po_file):
    """The committed .mo holds exactly the .po's translations, and nothing the .po lacks (a
    .po that lost entries in a merge while the old .mo still served them): run
    compilemessages if not."""
    with po_file.with_suffix(".mo").open("rb") as handle:
        compiled = gettext.GNUTranslations(handle)
    in_po = {
        entry.msgid if entry.msgctxt is None else f"{entry.msgctxt}\x04{entry.msgid}"
        for entry in _messages(entries)
    }
    catalog: dict = compiled._catalog  # type: ignore[attr-defined]
    only_in_mo = sorted(
        repr(key[0] if isinstance(key, tuple) else key)
        for key in catalog
        if (key[0] if isinstance(key, tuple) else key) not in in_po
        and (key[0] if isinstance(key, tuple) else key)
    )
    assert only_in_mo == []
    stale = []
    for entry in _messages(entries):
        if entry.msgid_plural is not None:
            got = compiled.ngettext(entry.msgid, entry.msgid_plural, 1)
        elif entry.msgctxt is not None:
            got = compiled.pgettext(entry.msgctxt, entry.msgid)
        else:
            got = compiled.gettext(entry.msgid)
        if got != entry.msgstr.get(0):
            stale.append(f"{entry.msgid!r}: .po {entry.msgstr.get(0)!r}, .mo {got!r}")

    assert stale == []


@pytest.mark.parametrize(
    ("english", "chinese"),
    [
        ("Pools", "资源池"),
        ("Quotas", "配额"),
        ("Flavors", "GPU 规格"),
        ("Tiers", "优先级层级"),
        ("Preemption classes", "抢占类别"),
        ("Fair-share weight", "公平份额权重"),
        ("Reclaim grace", "回收宽限期"),
    ],
)
def test_key_terms_translate(english, chinese):
    with translation.override("zh-hans"):
        assert translation.gettext(english) == chinese
    with translation.override("en"):
        assert translation.gettext(english) == english


def test_model_names_and_plurals_translate():
    with translation.override("zh-hans"):
        assert str(Quota._meta.verbose_name) == "配额"
        assert str(PriorityTier._meta.verbose_name_plural) == "优先级层级"
        assert str(Quota._meta.get_field("fair_share_weight").verbose_name) == "公平份额权重"
        days = translation.ngettext("%(days)s day", "%(days)s days", 90) % {"days": 90}
        assert days == "90 天"


NAV_ZH = ["首页", "项目", "资源池", "GPU 规格", "优先级层级", "抢占类别", "配额"]
NAV_EN = ["Home", "Projects", "Pools", "Flavors", "Tiers", "Preemption classes", "Quotas"]


def _nav(html: str) -> str:
    match = re.search(r'<nav class="site-nav".*?</nav>', html, re.S)
    assert match, "the page has no main navigation"
    return match.group(0)


@pytest.mark.parametrize("page", ["home", "quota_detail"])
def test_pages_render_in_chinese_with_the_language_cookie(world, page):
    client = login(world.ops)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    args = [world.vision_a100.pk] if page == "quota_detail" else []

    response = client.get(reverse(page, args=args))

    assert response.status_code == 200
    html = response.content.decode()
    assert '<html lang="zh-hans">' in html
    nav = _nav(html)
    for label in NAV_ZH:
        assert f">{label}</a>" in nav
    for label in NAV_EN:
        assert f">{label}</a>" not in nav
    assert "每一次规则变更都会记录操作人及原因" in html


def test_quota_detail_in_chinese_uses_the_quota_terms(world):
    client = login(world.ops)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"

    html = client.get(reverse("quota_detail", args=[world.vision_a100.pk])).content.decode()

    for term in ["保障量", "借用上限", "出借上限", "公平份额权重", "回收宽限期", "谨慎抢占"]:
        assert term in html
    assert "Borrow limit" not in html


def test_pages_stay_in_english_without_the_cookie(world):
    """The default is English: the Chinese above comes from the cookie, not from the catalog."""
    html = login(world.ops).get(reverse("home")).content.decode()

    assert '<html lang="en">' in html
    nav = _nav(html)
    for label in NAV_EN:
        assert f">{label}</a>" in nav
