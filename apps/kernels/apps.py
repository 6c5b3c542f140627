from django.apps import AppConfig


class KernelsConfig(AppConfig):
    name = "apps.kernels"
    label = "kernels"
