from django.apps import AppConfig


class EndpointsConfig(AppConfig):
    name = "apps.endpoints"
    verbose_name = "model endpoints"
    default_auto_field = "django.db.models.BigAutoField"
