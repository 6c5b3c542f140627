from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="problems:list", permanent=False)),
    path("admin/", admin.site.urls),
    path("accounts/", include("apps.accounts.urls")),
    path("problems/", include("apps.problems.urls")),
    path("runs/", include("apps.runs.urls")),
    path("kernels/", include("apps.kernels.urls")),
    path("batches/", include("apps.batches.urls")),
    path("training/", include("apps.training.urls")),
    path("api/v1/", include("apps.api.urls")),
]

# Under /api/ these answer in the API's JSON error format; elsewhere they are Django's own pages.
handler400 = "apps.api.errors.bad_request"
handler404 = "apps.api.errors.page_not_found"
handler500 = "apps.api.errors.server_error"
