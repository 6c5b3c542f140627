import pytest

from apps.endpoints.models import ModelEndpoint


@pytest.fixture
def builtin_endpoint():
    """The built-in policy's endpoint. A data migration makes it, but a transactional test empties the tables
    after it, so later tests make it again."""
    return ModelEndpoint.objects.get_or_create(kind="builtin", defaults={"name": "built-in templates (no model)"})[0]
