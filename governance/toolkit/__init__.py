"""The web and API toolkit every app shares, under public names (``docs/architecture.md``).

- ``api``: the API's one error format and its OpenAPI responses (``NOT_FOUND``, ``BAD_INPUT``,
  …), paging (``LimitOffsetPagination``, ``get_paginated_response``), filter parsing, ETags,
  the schema class and DRF's exception handler.
- ``changes``: the answer of every operation that proposes or decides a rule change.
- ``auth``, ``throttles``, ``parsers``: DRF's token authentication and scope permission, the
  rate limits and the JSON parser (named in settings), the API write audit middleware.
- ``client``: the client's address (``X-Forwarded-For`` only from trusted proxies).
- ``oidc``: the identity provider's backend, its account check and session middleware.
- ``bad_input``: the middleware that answers undecodable input with a 400.
- ``paging``: the HTML list pages' paging (``paginate``).
- ``web``: the HTML views' posted data and ``propose`` (a rule change from a form).
- ``admin``: ``ReadOnlyAdmin`` for governed objects.
- ``console``: a refused request (4xx) logged as one line, and mails on the console as read.
- ``deprecation``: an API path kept for a deprecation period after it moved
  (``deprecated_path``: the same answers with ``Deprecation``, ``Sunset`` and ``Link``).

Other apps import these modules by name; ``governance.views`` and ``governance.apis`` stay
governance's own.
"""
