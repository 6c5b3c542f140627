from django.apps import AppConfig


class ProblemsConfig(AppConfig):
    name = "apps.problems"
    label = "problems"
