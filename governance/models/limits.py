"""The largest whole numbers a rule takes, one limit for the pages and the API.

Counts (GPUs, weights, limits) are stored in 32-bit columns on every database, so a count is
at most 2,147,483,647; a number of days stays within ten years (a review cycle of 10**18
days would overflow the date it sets).
"""

from django.utils.translation import gettext_lazy as _

COUNT_MAX = 2**31 - 1
DAYS_MAX = 3650


def whole_number_max(field_name: str) -> int:
    """The largest value of the integer rule field ``field_name``."""
    return DAYS_MAX if field_name.endswith("_days") else COUNT_MAX


def whole_number_message(field_name: str) -> str:
    """The limit in words, as the pages and the API both say it."""
    return str(
        _("Enter a whole number no larger than %(limit)s.")
        % {"limit": f"{whole_number_max(field_name):,}"}
    )
