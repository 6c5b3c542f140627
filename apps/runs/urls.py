from django.urls import path

from apps.runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("start/<int:problem_pk>/", views.run_start, name="start"),
    path("optimize/<int:problem_pk>/", views.run_start_agent, name="optimize"),
    path("<int:pk>/", views.run_detail, name="detail"),
    path("<int:pk>/cancel/", views.run_cancel, name="cancel"),
    path("<int:pk>/events/", views.run_events, name="events"),
    path("<int:pk>/candidates/<int:turn>/", views.candidate_detail, name="candidate"),
    path("<int:pk>/candidates/<int:turn>/profile/", views.candidate_profile, name="profile"),
    path("<int:pk>/diff/", views.run_diff, name="diff"),
]
