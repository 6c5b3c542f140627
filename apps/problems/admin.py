from django.contrib import admin

from apps.problems.models import Problem


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "origin", "shared", "created_at")
    list_filter = ("shared", "origin")
    search_fields = ("name", "source_hash", "owner__username")
    readonly_fields = ("source_hash", "validation", "created_at")
