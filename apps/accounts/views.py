from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from rest_framework.authtoken.models import Token


def signup(request: HttpRequest) -> HttpResponse:
    # Accounts are made by admins (or createsuperuser) unless KSTUDIO_SIGNUP_OPEN is set.
    if not settings.KSTUDIO_SIGNUP_OPEN:
        raise Http404("Self-signup is off; ask an admin for an account.")
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        login(request, form.save(), backend="django.contrib.auth.backends.ModelBackend")
        return redirect(settings.LOGIN_REDIRECT_URL)
    return render(request, "registration/signup.html", {"form": form})


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """The user's API token (one per user): make it, see it, revoke it. Making a new one revokes the old."""
    if request.method == "POST":
        Token.objects.filter(user=request.user).delete()
        if request.POST.get("action") == "create":
            Token.objects.create(user=request.user)
        return redirect("tokens")
    return render(request, "registration/tokens.html", {"token": Token.objects.filter(user=request.user).first(),
                                                        "api_root": request.build_absolute_uri("/api/v1/")})
