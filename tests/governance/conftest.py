"""Fixtures of the sign-in through a real OpenID provider (tests/oidc_provider.py), and the
headless browser of test_browser_flows.py, for test_oidc_browser.py and test_oidc_refusals.py."""

from tests.governance.test_browser_flows import browser  # noqa: F401
from tests.oidc_provider import oidc_provider, provider  # noqa: F401
