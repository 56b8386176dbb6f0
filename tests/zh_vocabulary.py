"""What a person reads on a page, and the product's own English words that must not be in it
when the page is in Chinese.

Used by ``tests/governance/test_zh_vocabulary.py`` (every page of the URL registry, as every
persona, on the demo) and runnable by hand against any database:
``DJANGO_SETTINGS_MODULE=governance.settings python -m tests.zh_vocabulary`` lists what it finds.
"""

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

from django.apps import apps
from django.db import models
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import translation

# Words and phrases of the product that are not choice labels: what its pages and stored
# texts say in English when a translation is missing.
PHRASES = [
    "GPU-hours lost",
    "GPU-hours",
    "preemptions",
    "requeues",
    "failures",
    "Quota exception",
    "Queue jump",
    "Preemptible",
    "Not preemptible",
    "no change",
    "Reason:",
    "guarantee (GPUs)",
    "borrow limit (GPUs)",
    "lending limit (GPUs)",
    "API token",
    "Per page",
    "waiting",
    "minutes",
    "Exceptions",
    "Any",
    "Unknown",
    "Next step",
]
# Choice labels that are also the schedulers' own identifiers, quoted as such in help texts
# (Kubernetes taint effects, Slurm's QOS field "Priority"), or product names.
IGNORED_LABELS = {"NoSchedule", "PreferNoSchedule", "NoExecute", "Priority", "Slurm", "Kueue"}
# Apps whose TextChoices make the vocabulary.
APPS = ("governance", "queues", "approvals", "reports")
# Elements whose text is not prose for a person (code, scripts) or shows typed data.
SKIPPED = {"script", "style", "code", "pre", "kbd", "samp", "textarea", "option", "select"}
READ_ATTRIBUTES = ("title", "aria-label", "placeholder", "alt")


def vocabulary() -> list[str]:
    """The English labels of every vocabulary (TextChoices) of the product, and the phrases."""
    from governance.selectors.history import HistoryAction

    labels: set[str] = set(PHRASES)
    choices: list[type[models.TextChoices]] = [HistoryAction]
    for config in apps.get_app_configs():
        if config.name not in APPS:
            continue
        for module_name in ("models",):
            module = __import__(f"{config.name}.{module_name}", fromlist=["*"])
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, models.TextChoices)
                    and value is not models.TextChoices
                ):
                    choices.append(value)
    with translation.override("en"):
        for vocabulary_class in choices:
            for text in vocabulary_class.labels:
                labels.add(str(text))
    return sorted(label for label in labels if label not in IGNORED_LABELS and len(label) > 2)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skipping: list[str] = []
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED and tag not in ("option",):
            self.skipping.append(tag)
        for name, value in attrs:
            if name in READ_ATTRIBUTES and value and not self.skipping:
                self.texts.append(value)

    def handle_endtag(self, tag: str) -> None:
        if self.skipping and self.skipping[-1] == tag:
            self.skipping.pop()

    def handle_data(self, data: str) -> None:
        if not self.skipping and data.strip():
            self.texts.append(data.strip())


def read_texts(html: str) -> list[str]:
    """The texts a person reads on the page: text outside code and scripts, and the
    attributes read aloud or shown on hover."""
    reader = _Reader()
    reader.feed(html)
    return reader.texts


def typed_texts() -> set[str]:
    """What people typed or named (names, reasons, justifications, titles), as stored: shown
    as written in any language. A stored text Arbiter generated reads differently in Chinese
    (``stored_text``) and is not in this set."""
    from governance.models.texts import stored_text

    found: set[str] = set()
    for config in apps.get_app_configs():
        if config.name not in (*APPS, "auth"):
            continue
        for model in config.get_models():
            fields = [
                field.attname
                for field in model._meta.concrete_fields
                if isinstance(field, models.CharField | models.TextField)
                and not field.choices
                and not field.primary_key
            ]
            if not fields:
                continue
            for row in model._base_manager.values_list(*fields).iterator():
                for value in row:
                    if isinstance(value, str) and len(value) >= 3:
                        found.add(value)
    with translation.override("zh-hans"):
        return {value for value in found if stored_text(value) == value}


def english_words(texts: list[str], words: list[str], typed: set[str]) -> list[tuple[str, str]]:
    """(word, text) for every vocabulary word in a text once the typed texts are taken out."""
    hits = []
    long_first = sorted((t for t in typed if len(t) >= 3), key=len, reverse=True)
    patterns = [(word, re.compile(rf"(?<![\w-]){re.escape(word)}(?![\w-])")) for word in words]
    for text in texts:
        if not re.search(r"[A-Za-z]{3}", text):
            continue
        rest = text
        for value in long_first:
            if value in rest:
                rest = rest.replace(value, " ")
        for word, pattern in patterns:
            if pattern.search(rest):
                hits.append((word, text))
    return hits


def page_routes() -> Iterator[tuple[str, str, list[str]]]:
    """(name, route, argument names) of every HTML page in the URL registry (no API, admin,
    CSV, script or POST-only action)."""

    def walk(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern

    seen = set()
    for route, pattern in walk(get_resolver().url_patterns):
        if not pattern.name or pattern.name in seen:
            continue
        seen.add(pattern.name)
        yield pattern.name, route, list(pattern.pattern.converters)


def _first(model_label: str, field: str, **filters: Any) -> list[Any]:
    model = apps.get_model(model_label)
    value = model._base_manager.filter(**filters).order_by("pk").values_list(field, flat=True)
    return list(value[:1])


def _all(model_label: str, field: str = "pk") -> list[Any]:
    model = apps.get_model(model_label)
    return list(model._base_manager.order_by("pk").values_list(field, flat=True))


# Not pages a person reads (files, scripts, metrics) or reached only by a link with a secret.
NOT_PAGES = {
    "metrics",
    "plotly_js",
    "report_csv",
    "report_table_csv",
    "report_project_csv",
    "report_project_table_csv",
    "password_reset_confirm",
    "set_language",
    "oidc_start",
    "oidc_callback",
    "logout",
}


def page_arguments(name: str, route: str, converters: list[str]) -> list[list[Any]]:
    """Every argument list to open the page ``name`` with on the data there is (all rule
    changes, requests and reviews; one object of each other kind); [] when there is none."""
    if not converters:
        return [[]]
    project = _first("governance.Project", "slug", slug="vision") or _first(
        "governance.Project", "slug"
    )
    by_prefix: dict[str, list[Any]] = {
        "projects/": project,
        "flavors/": _first("governance.GpuFlavor", "slug"),
        "pools/": _first("governance.Pool", "slug"),
        "tiers/": _first("governance.PriorityTier", "slug"),
        "reviews/tiers/": _first("governance.PriorityTier", "slug"),
        "preemption-classes/": _first("governance.PreemptionClass", "slug", kind="cautious"),
        "quotas/": _first("governance.Quota", "pk", project__slug__in=project),
        "reviews/quotas/": _first("governance.Quota", "pk", project__slug__in=project),
        "people/": _first("governance.User", "username", username="member"),
        "changes/": _all("governance.RuleChange"),
        "service-accounts/": _first("governance.ServiceAccount", "pk"),
        "requests/": _all("approvals.UpgradeRequest"),
        "approval-policies/": _first("approvals.ApprovalPolicy", "pk"),
        "monthly-reviews/": _all("reports.MonthlyReview"),
        "clusters/": _first("queues.Cluster", "name"),
    }
    prefix = max((p for p in by_prefix if route.startswith(p)), key=len, default=None)
    if prefix is None:
        return []
    values = by_prefix[prefix]
    if converters == ["pk", "slug"]:  # a review's project view
        return [[value, project[0]] for value in values] if project else []
    if converters == ["name", "pk"]:  # a cluster's sync run
        runs = _first("queues.SyncRun", "pk")
        return [[values[0], runs[0]]] if values and runs else []
    return [[value] for value in values]


PERSONAS = ("ops", "approver", "lead", "member")


def crawl(
    usernames: tuple[str, ...] = PERSONAS, read: list[str] | None = None
) -> dict[str, list[tuple[str, str]]]:
    """{"persona url": [(word, text), ...]} of every page in Chinese, for each persona; and
    the status of pages that answer neither 200 nor a refusal (kept under "status url").
    ``read`` collects the pages read."""
    from django.conf import settings
    from django.test import Client
    from django.urls import reverse

    words = vocabulary()
    typed = typed_texts()
    User = apps.get_model("governance.User")
    found: dict[str, list[tuple[str, str]]] = {}
    for username in usernames:
        client = Client()
        client.force_login(User.objects.get(username=username))
        client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
        for name, route, converters in page_routes():
            if name in NOT_PAGES or route.startswith(("api/", "admin/")):
                continue
            for args in page_arguments(name, route, converters):
                url = reverse(name, args=args)
                response = client.get(url)
                if response.status_code in (301, 302, 400, 403, 404, 405):
                    continue
                if response.status_code != 200:
                    found[f"status {username} {url}"] = [(str(response.status_code), "")]
                    continue
                if "text/html" not in response.get("Content-Type", ""):
                    continue
                if read is not None:
                    read.append(f"{username} {url}")
                hits = english_words(read_texts(response.content.decode()), words, typed)
                if hits:
                    found[f"{username} {url}"] = hits
    return found


if __name__ == "__main__":
    import django

    django.setup()
    from django.test.utils import setup_test_environment

    setup_test_environment()
    for page, hits in crawl().items():
        print(page)
        for word, text in hits:
            print(f"    {word!r}: {text[:160]!r}")
