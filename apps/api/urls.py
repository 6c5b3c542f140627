from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from apps.api import views

router = DefaultRouter()
router.register("problems", views.ProblemViewSet, basename="problem")
router.register("runs", views.RunViewSet, basename="run")
router.register("kernels", views.KernelViewSet, basename="kernel")
router.register("endpoints", views.EndpointViewSet, basename="endpoint")
router.register("batches", views.BatchViewSet, basename="batch")

app_name = "api"
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's init script as a file of its own: the CSP allows no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
    *router.urls,
]
