"""The list pages' targets: one definition, read by ``bench/pages.py`` and by the tests."""

# No list page or API page is larger than this, at any size of the organisation.
MAX_PAGE_BYTES = 150 * 1024
# At the largest size, a page's median time, its queries and its size stay within this
# multiple of the smallest size's.
TARGET_RATIO = 1.5
