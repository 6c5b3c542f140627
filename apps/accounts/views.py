from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render


def signup(request: HttpRequest) -> HttpResponse:
    # Accounts are made by admins (or createsuperuser) unless KSTUDIO_SIGNUP_OPEN is set.
    if not settings.KSTUDIO_SIGNUP_OPEN:
        raise Http404("Self-signup is off; ask an admin for an account.")
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        login(request, form.save())
        return redirect(settings.LOGIN_REDIRECT_URL)
    return render(request, "registration/signup.html", {"form": form})
