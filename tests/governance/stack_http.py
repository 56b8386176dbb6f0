"""A small HTTP client for the compose stack's tests (tests/governance/test_container_stack.py):
cookies kept by hand (so that a session can be carried from one web server to another on
purpose), redirects followed, forms read from the page and posted back as a browser would."""

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http.cookies import SimpleCookie
from typing import Any


@dataclass
class Form:
    action: str
    method: str
    fields: dict[str, str] = field(default_factory=dict)
    # Each button's formaction (where it sends the form instead of ``action``).
    formactions: list[str] = field(default_factory=list)
    buttons: list[tuple[str, str]] = field(default_factory=list)


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self._select: str | None = None
        self._first_option: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.forms.append(Form(a.get("action", ""), a.get("method", "get").lower()))
        if not self.forms:
            return
        form = self.forms[-1]
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    form.fields[name] = a.get("value", "on")
            elif kind == "submit":
                form.buttons.append((name, a.get("value", "")))
            else:
                form.fields[name] = a.get("value", "")
        elif tag == "button":
            if name:
                form.buttons.append((name, a.get("value", "")))
            if a.get("formaction"):
                form.formactions.append(a["formaction"])
        elif tag == "select":
            self._select, self._first_option = name, None
        elif tag == "option" and self._select:
            if self._first_option is None:
                self._first_option = a.get("value", "")
                form.fields.setdefault(self._select, self._first_option)
            if "selected" in a:
                form.fields[self._select] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            form.fields[name] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea and self.forms:
            self.forms[-1].fields[self._textarea] += (
                data.lstrip("\n") if not (self.forms[-1].fields[self._textarea]) else data
            )


def forms(html: str) -> list[Form]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class Page:
    status: int
    url: str
    text: str
    headers: dict[str, str]
    upstreams: list[str]

    def form(self, *, containing: str = "", action: str = "") -> Form:
        for form in forms(self.text):
            if containing and containing not in form.fields:
                continue
            if action:
                found = [a for a in [form.action, *form.formactions] if a.endswith(action)]
                if not found:
                    continue
                return Form(found[0], form.method, dict(form.fields), form.formactions)
            return form
        raise AssertionError(f"no form with {containing or action!r} on {self.url}")

    def json(self) -> Any:
        return json.loads(self.text)


class Browser:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.cookies: dict[str, str] = {}
        self._opener = urllib.request.build_opener(_NoRedirect)

    def request(
        self,
        path: str,
        data: dict[str, str] | None = None,
        *,
        json_body: Any = None,
        base_url: str | None = None,
    ) -> Page:
        """GET (or POST ``data``/``json_body``) ``path``, following redirects."""
        url = path if path.startswith("http") else (base_url or self.base_url) + path
        upstreams: list[str] = []
        body: bytes | None = None
        headers = {"Accept-Language": "en"}
        if data is not None:
            body = urllib.parse.urlencode(data).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        for _hop in range(10):
            if body is not None:
                headers["X-CSRFToken"] = self.cookies.get("csrftoken", "")
                headers["Referer"] = url
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            request = urllib.request.Request(url, data=body, headers=headers)
            try:
                response = self._opener.open(request, timeout=60)
            except urllib.error.HTTPError as error:
                response = error
            self._keep_cookies(response.headers.get_all("Set-Cookie") or [])
            upstream = response.headers.get("X-Arbiter-Upstream")
            if upstream:
                upstreams.append(upstream)
            if response.status in (301, 302, 303) and response.headers.get("Location"):
                url = urllib.parse.urljoin(url, response.headers["Location"])
                body = None
                headers.pop("Content-Type", None)
                continue
            return Page(
                response.status,
                url,
                response.read().decode(),
                dict(response.headers.items()),
                upstreams,
            )
        raise AssertionError(f"too many redirects from {path}")

    def _keep_cookies(self, lines: list[str]) -> None:
        for line in lines:
            cookie = SimpleCookie()
            cookie.load(line)
            for name, morsel in cookie.items():
                if morsel["max-age"] == "0" or not morsel.value:
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = morsel.value

    def submit(self, page: Page, form: Form, **values: str) -> Page:
        fields = {**form.fields, **values}
        action = urllib.parse.urljoin(page.url, form.action or page.url)
        return self.request(action, fields)

    def sign_in(self, username: str, password: str, *, base_url: str | None = None) -> Page:
        page = self.request("/accounts/login/", base_url=base_url)
        form = page.form(containing="username")
        signed_in = self.submit(page, form, username=username, password=password)
        assert signed_in.status == 200 and "/accounts/login/" not in signed_in.url, signed_in.url
        return signed_in

    def sign_out(self) -> None:
        page = self.request("/")
        self.submit(page, page.form(action="/accounts/logout/"))
        self.cookies.pop("sessionid", None)
