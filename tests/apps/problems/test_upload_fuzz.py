"""Property-based fuzzing (hypothesis) of upload validation: arbitrary bytes and text, and real modules with
random edits. Reading never fails except with Refused and a message; static validation never raises
and points only at lines that exist; the upload page answers a redirect or a 400 with the error, never a 500.
Derandomized: the same examples on every run, so `make test` cannot flake on a new one."""
from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from hypothesis import HealthCheck, given, settings, strategies as st

from agent.engine import validation
from apps.core.errors import Refused
from apps.problems.services import read_source
from tests.apps.cast import GOOD_CANDIDATE, PROBLEM

# Compiling fuzzed text warns about its escape sequences (the user's code, not ours).
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.filterwarnings("ignore::SyntaxWarning")]
LIMIT = 2000
CORPUS_PROBLEM = PROBLEM.read_text()
CORPUS_CANDIDATE = GOOD_CANDIDATE.read_text()
# Text a browser or JSON could carry (no lone surrogates: the API refuses them and form data is UTF-8),
# weighted towards Python's own punctuation so edits make near-misses rather than noise.
PYTHON_BITS = st.sampled_from(["(", ")", ":", "\n", "    ", "def ", "class ", "return ", "import ", "torch", "Model",
                               "get_inputs", "forward", "self", "=", ",", "\t", "\x00", "\ufeff", "é", "'''", "\\"])
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=200)


@st.composite
def edited(draw, source: str) -> str:
    """The source with a few random edits: a span deleted, replaced or duplicated, or text inserted."""
    for _ in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, len(source)))
        end = draw(st.integers(start, min(len(source), start + 40)))
        piece = draw(st.one_of(PYTHON_BITS, TEXT))
        how = draw(st.sampled_from(["delete", "replace", "insert", "duplicate"]))
        if how == "delete":
            source = source[:start] + source[end:]
        elif how == "replace":
            source = source[:start] + piece + source[end:]
        elif how == "insert":
            source = source[:start] + piece + source[start:]
        else:
            source = source[:end] + source[start:end] + source[end:]
    return source


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(data=st.one_of(st.binary(max_size=3 * LIMIT), st.builds(lambda s: s.encode(), edited(CORPUS_PROBLEM))),
       name=st.from_regex(r"[\w .()-]{1,40}\.py", fullmatch=True))
def test_reading_an_uploaded_file_gives_its_text_or_says_what_is_wrong(data, name):
    with override_settings(KSTUDIO_MAX_UPLOAD_BYTES=LIMIT):
        try:
            text = read_source(SimpleUploadedFile(name, data), "", what="problem module")
        except Refused as exc:
            assert exc.message and name in exc.message
            if len(data) > LIMIT:
                assert f"{LIMIT:,}-byte limit" in exc.message
            else:
                assert "not UTF-8" in exc.message
                with pytest.raises(UnicodeDecodeError):
                    data.decode("utf-8")
        else:
            assert len(data) <= LIMIT and text == data.decode("utf-8").removeprefix("\ufeff")


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(pasted=st.one_of(TEXT, edited(CORPUS_PROBLEM), st.text(alphabet="é ", min_size=LIMIT // 2, max_size=LIMIT)))
def test_reading_pasted_text_gives_it_back_or_says_what_is_wrong(pasted):
    with override_settings(KSTUDIO_MAX_UPLOAD_BYTES=LIMIT):
        size = len(pasted.encode("utf-8"))
        try:
            text = read_source(None, pasted, what="problem module")
        except Refused as exc:
            assert (size > LIMIT and f"{size:,} bytes, over the {LIMIT:,}-byte limit" in exc.message) or \
                (not pasted.strip() and "Nothing was uploaded" in exc.message)
        else:
            assert text == pasted.replace("\r\n", "\n") and size <= LIMIT and pasted.strip()


def _check_report(report: validation.ValidationReport, source: str) -> None:
    lines = source.count("\n") + 1
    assert isinstance(report.ok, bool) and report.ok == (not report.errors())
    for issue in report.issues:
        assert issue.severity in ("error", "warning") and issue.message.strip()
        assert issue.line is None or 1 <= issue.line <= lines + 1, (issue, lines)
    report.to_dict()  # what the page and the API store: must serialise


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(source=st.one_of(edited(CORPUS_PROBLEM), TEXT))
def test_static_validation_of_an_edited_problem_never_raises_and_points_at_real_lines(source):
    _check_report(validation.validate_problem(source), source)


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(source=edited(CORPUS_CANDIDATE))
def test_static_validation_of_an_edited_candidate_never_raises_and_points_at_real_lines(source):
    _check_report(validation.validate_candidate(source, problem_source=CORPUS_PROBLEM), source)


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=600), st.builds(lambda s: s.encode(), edited(CORPUS_PROBLEM))),
       as_file=st.booleans())
def test_the_upload_page_answers_a_fuzzed_module_with_a_redirect_or_a_stated_error(client, owner, data, as_file):
    client.force_login(owner)
    fields = {"model_name": "Model", "get_inputs_name": "get_inputs", "get_init_inputs_name": "get_init_inputs"}
    if as_file:
        fields["file"] = SimpleUploadedFile("fuzz.py", data)
    else:
        fields["source"] = data.decode("utf-8", errors="replace")
    response = client.post("/problems/new/", fields)
    assert response.status_code in (302, 400), response.status_code
    if response.status_code == 400:
        assert 'id="upload-error"' in response.content.decode()
