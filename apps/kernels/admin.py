from django.contrib import admin

from apps.kernels.models import Kernel


@admin.register(Kernel)
class KernelAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "backend", "device", "speedup_vs_eager", "policy", "shared", "created_at")
    list_filter = ("backend", "device", "policy", "shared")
    search_fields = ("name", "source_hash", "problem_hash", "owner__username")
    readonly_fields = ("candidate", "source_hash", "problem_hash", "trajectory", "toolchain", "hardware",
                       "verification", "timing", "created_at", "verified_at")
