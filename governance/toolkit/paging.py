"""Pages of a list: page numbers and a page size, with the filters kept in every link.

``paginate`` reads ``page`` and ``size`` from the query string (a bad page number shows the
nearest page; a size not offered is the default) and returns a ``ListPage`` that the template
``includes/pagination.html`` renders. The list pages pass their selector's queryset: the
paginator counts it and reads one page, so a page costs the same whatever the rows (a first
page that holds the whole list is read alone, one row more than the page, and not counted).
"""

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, QueryDict

PAGE_SIZES = (25, 50, 100)
DEFAULT_PAGE_SIZE = 50


@dataclass(frozen=True)
class PageLink:
    label: str
    url: str | None  # None: the current page, or an ellipsis
    current: bool = False


@dataclass(frozen=True)
class ListPage:
    page: Page
    numbers: list[PageLink]
    previous_url: str | None
    next_url: str | None
    sizes: list[PageLink]

    @property
    def object_list(self) -> Any:
        return self.page.object_list

    @property
    def count(self) -> int:
        return self.page.paginator.count

    def __iter__(self) -> Any:
        return iter(self.page.object_list)

    def __len__(self) -> int:
        return len(self.page.object_list)

    def __bool__(self) -> bool:
        return self.count > 0


class _FirstRead(Paginator):
    """A paginator whose first page was read already (counted as usual)."""

    def __init__(self, rows: Any, size: int, first: list[Any]) -> None:
        super().__init__(rows, size)
        self._first = first

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        if number == 1:
            return Page(self._first[: self.per_page], number, self)
        return super().page(number)


def page_size(request: HttpRequest, default: int = DEFAULT_PAGE_SIZE) -> int:
    size = request.GET.get("size", "")
    return int(size) if size in {str(choice) for choice in PAGE_SIZES} else default


def _url(query: QueryDict, **changes: Any) -> str:
    query = query.copy()
    for name, value in changes.items():
        query[name] = str(value)
    return "?" + query.urlencode()


def paginate(
    request: HttpRequest,
    rows: Any,
    *,
    default_size: int = DEFAULT_PAGE_SIZE,
    param: str = "page",
) -> ListPage:
    """One page of ``rows`` (a queryset or a list) as ``?page=&size=`` ask (``param`` names
    the page number when a page shows several lists)."""
    size = page_size(request, default_size)
    number = request.GET.get(param)
    paginator: Paginator
    if isinstance(rows, QuerySet) and number in (None, "", "1"):
        # The first page read with one row more: when that row is missing the page is the
        # whole list, and counting it again would be a query for nothing.
        first = list(rows[: size + 1])
        paginator = Paginator(first, size) if len(first) <= size else _FirstRead(rows, size, first)
    else:
        paginator = Paginator(rows, size)
    page = paginator.get_page(number)
    query = request.GET.copy()
    query.pop(param, None)
    numbers = [
        PageLink(label=str(number), url=None)
        if number == paginator.ELLIPSIS
        else PageLink(
            label=str(number),
            url=None if number == page.number else _url(query, **{param: number}),
            current=number == page.number,
        )
        for number in paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1)
    ]
    sizes = [
        PageLink(
            label=str(choice),
            url=None if choice == size else _url(query, size=choice),
            current=choice == size,
        )
        for choice in PAGE_SIZES
    ]
    return ListPage(
        page=page,
        numbers=numbers,
        previous_url=_url(query, **{param: page.previous_page_number()})
        if page.has_previous()
        else None,
        next_url=_url(query, **{param: page.next_page_number()}) if page.has_next() else None,
        sizes=sizes,
    )
