"""The one domain error and its one translation for HTML pages (apps/core/errors.py)."""
from django.http import HttpResponse
from django.test import RequestFactory

from apps.core.errors import InUse, QuotaExceeded, Refused, shows_refusals


def _page(request, refusal, **kwargs):
    return HttpResponse(f"{refusal.message} {kwargs}", status=refusal.status)


def _view(error):
    @shows_refusals(_page)
    def view(request, pk):
        raise error
    return view


def test_it_answers_a_refusal_with_the_views_own_page_and_the_refusals_status():
    request = RequestFactory().post("/x")
    for error, status in ((Refused("bad budget"), 400), (QuotaExceeded("too many runs"), 429), (InUse("in a batch"), 409)):
        response = _view(error)(request, pk=7)
        assert response.status_code == status and error.message in response.content.decode()
        assert "'pk': 7" in response.content.decode()


def test_a_refusal_carries_the_api_details_only_where_it_has_issues():
    assert Refused("x").details() == {"issues": []}
    assert QuotaExceeded("x").details() == {} and InUse("x").details() == {}
    assert (Refused.code, QuotaExceeded.code, InUse.code) == ("rejected", "quota_exceeded", "in_use")
