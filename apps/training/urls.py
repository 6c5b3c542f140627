from django.urls import path

from apps.training import views

app_name = "training"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("<int:pk>/", views.run_detail, name="detail"),
    path("<int:pk>/status/", views.run_status, name="status"),
    path("<int:pk>/cancel/", views.run_cancel, name="cancel"),
]
