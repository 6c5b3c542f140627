"""Batches were marked finished when read (the API's progress); now where their last run ends. A batch whose runs
all ended before that change, and that nobody read since, is marked finished here."""
from django.db import migrations
from django.db.models import Max
from django.utils import timezone

TERMINAL = ("finished", "failed", "cancelled")


def finish_done_batches(apps, schema_editor):
    Batch = apps.get_model("batches", "Batch")
    Run = apps.get_model("runs", "Run")
    for batch in Batch.objects.filter(status="running"):
        runs = Run.objects.filter(batch_item__batch=batch)
        if runs.exists() and not runs.exclude(status__in=TERMINAL).exists():
            batch.status = "finished"
            batch.finished_at = runs.aggregate(last=Max("finished_at"))["last"] or timezone.now()
            batch.save(update_fields=["status", "finished_at"])


class Migration(migrations.Migration):
    dependencies = [("batches", "0001_initial"), ("runs", "0003_problem_restrict")]
    operations = [migrations.RunPython(finish_done_batches, migrations.RunPython.noop)]
