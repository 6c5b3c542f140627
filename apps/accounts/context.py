from django.conf import settings
from django.http import HttpRequest


def studio(request: HttpRequest) -> dict[str, object]:
    return {"signup_open": settings.KSTUDIO_SIGNUP_OPEN}
