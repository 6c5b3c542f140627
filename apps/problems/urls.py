from django.urls import path

from apps.problems import views

app_name = "problems"
urlpatterns = [
    path("", views.problem_list, name="list"),
    path("new/", views.problem_new, name="new"),
    path("validate/", views.problem_validate, name="validate"),
    path("<int:pk>/", views.problem_detail, name="detail"),
]
