from django.contrib import admin

from apps.batches.models import Batch, BatchItem


class BatchItemInline(admin.TabularInline):
    model = BatchItem
    raw_id_fields = ("problem", "run")
    extra = 0


@admin.register(Batch)
class BatchAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "endpoint", "device", "status", "created_at")
    list_filter = ("status",)
    inlines = [BatchItemInline]
