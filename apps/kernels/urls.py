from django.urls import path

from apps.kernels import views

app_name = "kernels"
urlpatterns = [
    path("", views.kernel_list, name="list"),
    path("problem/<int:problem_pk>/", views.problem_leaderboard, name="leaderboard"),
    path("<int:pk>/", views.kernel_detail, name="detail"),
    path("<int:pk>/diff/", views.kernel_diff, name="diff"),
    path("<int:pk>/download/", views.kernel_download, name="download"),
    path("<int:pk>/package/", views.kernel_package, name="package"),
    path("<int:pk>/rebenchmark/", views.kernel_rebenchmark, name="rebenchmark"),
]
