"""A fresh studio can optimize out of the box: one endpoint for the built-in policy (no model)."""
from django.db import migrations

NAME = "built-in templates (no model)"


def create(apps, schema_editor):
    ModelEndpoint = apps.get_model("endpoints", "ModelEndpoint")
    ModelEndpoint.objects.get_or_create(name=NAME, defaults={
        "kind": "builtin", "notes": "Fused kernels from Kernel Studio's own templates, searched over a few turns."})


def remove(apps, schema_editor):
    apps.get_model("endpoints", "ModelEndpoint").objects.filter(name=NAME, kind="builtin").delete()


class Migration(migrations.Migration):
    dependencies = [("endpoints", "0002_builtin_kind")]
    operations = [migrations.RunPython(create, remove)]
