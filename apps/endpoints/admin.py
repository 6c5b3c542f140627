from django.contrib import admin

from apps.endpoints.models import ModelEndpoint


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "model", "base_url", "enabled", "created_at")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "model", "base_url")
    fieldsets = (
        (None, {"fields": ("name", "kind", "enabled", "notes")}),
        ("Where", {"fields": ("base_url", "model", "api_key_env")}),
        ("Sampling", {"fields": ("temperature", "max_tokens", "timeout_seconds", "retries")}),
        ("Scripted turns", {"fields": ("script",), "classes": ("collapse",)}),
    )
