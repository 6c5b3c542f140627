from django.urls import path

from apps.kernels import views

app_name = "kernels"
urlpatterns = [
    path("", views.kernel_list, name="list"),
    path("<int:pk>/", views.kernel_detail, name="detail"),
    path("<int:pk>/download/", views.kernel_download, name="download"),
]
