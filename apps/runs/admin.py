from django.contrib import admin

from apps.runs.models import Candidate, Event, Run


class CandidateInline(admin.TabularInline):
    model = Candidate
    fields = ("turn", "backend", "source_hash", "created_at")
    readonly_fields = fields
    extra = 0


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "problem", "owner", "kind", "status", "stage", "best_speedup", "created_at")
    list_filter = ("status", "kind", "shared")
    search_fields = ("problem__name", "owner__username")
    readonly_fields = ("last_seq", "step_token", "step_claimed_at", "step_attempts", "created_at", "started_at", "finished_at")
    inlines = [CandidateInline]


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("run", "seq", "kind", "created_at")
    list_filter = ("kind",)
    readonly_fields = ("run", "seq", "kind", "payload", "created_at")


@admin.register(Candidate)
class CandidateAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "turn", "backend", "status", "created_at")
    search_fields = ("source_hash",)
    readonly_fields = ("source_hash", "build", "verdict", "created_at")
