"""Indexes that keep list pages and lookups as fast at 10,000 projects as at 100.

- ``quota_pool_project``: the pool list counts each pool's projects from the index alone.
- On PostgreSQL only (a no-op elsewhere), on the upper-cased text that ``icontains`` and
  ``istartswith`` compare (Django writes ``UPPER("col"::text) LIKE UPPER('%q%')``):
  ``text_pattern_ops`` indexes for the user lookup's prefixes (username, first and last
  name), and the ``pg_trgm`` extension with trigram GIN indexes for the project search and
  the project lookup's "contains"; so both find their rows, and count them for the pager,
  without reading every row.
"""

from django.db import migrations, models

# (index name, table, expression, method and operator class)
TEXT_INDEXES = [
    ("user_username_prefix", "governance_user", "username", "btree", "text_pattern_ops"),
    ("user_first_name_prefix", "governance_user", "first_name", "btree", "text_pattern_ops"),
    ("user_last_name_prefix", "governance_user", "last_name", "btree", "text_pattern_ops"),
    ("project_slug_trgm", "governance_project", "slug", "gin", "gin_trgm_ops"),
    ("project_name_trgm", "governance_project", "name", "gin", "gin_trgm_ops"),
    ("project_description_trgm", "governance_project", "description", "gin", "gin_trgm_ops"),
]


def create_text_indexes(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, table, column, method, opclass in TEXT_INDEXES:
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" '
            f'USING {method} ((UPPER("{column}"::text)) {opclass})'
        )


def drop_text_indexes(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, *_ in TEXT_INDEXES:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0008_project_name_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="quota",
            index=models.Index(fields=["pool", "project"], name="quota_pool_project"),
        ),
        migrations.RunPython(create_text_indexes, drop_text_indexes),
    ]
