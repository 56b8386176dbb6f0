"""The tags long lists use per row: ``key_url`` gives exactly the URL ``{% url %}`` gives (the
route reversed once, the key put in its place), refuses what the route refuses and follows the
script prefix."""

import pytest
from django.template import Context, Template
from django.urls import NoReverseMatch, reverse, set_script_prefix

from governance.templatetags.arbiter import key_url


@pytest.mark.parametrize(
    ("name", "key"),
    [("project_detail", "vision"), ("tier_detail", "regular"), ("quota_detail", 42)],
)
def test_key_url_is_the_url_reverse_gives(name, key):
    assert key_url(name, key) == reverse(name, args=[key])
    rendered = Template("{% key_url name key %}").render(Context({"name": name, "key": key}))
    assert rendered == reverse(name, args=[key])


def test_key_url_refuses_what_the_route_refuses():
    # An int route given a slug, a slug route given a space: reversed as usual, refused.
    with pytest.raises(NoReverseMatch):
        key_url("quota_detail", "not-a-number")
    with pytest.raises(NoReverseMatch):
        key_url("project_detail", "two words")


def test_key_url_follows_the_script_prefix():
    set_script_prefix("/arbiter/")
    try:
        assert key_url("project_detail", "vision") == "/arbiter/projects/vision/"
        assert key_url("project_detail", "vision") == reverse("project_detail", args=["vision"])
    finally:
        set_script_prefix("/")
    assert key_url("project_detail", "vision") == "/projects/vision/"
