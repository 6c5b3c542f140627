from django.contrib import admin

from apps.knowledge.models import Entry


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "owner", "device", "backend", "status", "speedup_vs_eager", "shared", "updated_at")
    list_filter = ("status", "device", "backend", "shared", ("owner", admin.EmptyFieldListFilter))
    search_fields = ("title", "body", "ops", "problem_hash", "owner__username")
    list_select_related = ("owner",)
    raw_id_fields = ("owner", "run")
    readonly_fields = ("ops", "embedding_model", "created_at", "updated_at")
