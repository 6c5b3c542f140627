from django.apps import AppConfig


class BatchesConfig(AppConfig):
    name = "apps.batches"
    label = "batches"
    verbose_name = "Batch jobs"
