from django.urls import path

from apps.batches import views

app_name = "batches"
urlpatterns = [
    path("", views.batch_list, name="list"),
    path("<int:pk>/", views.batch_detail, name="detail"),
]
