"""The REST API (/api/v1/): each endpoint validates, calls one domain function, and answers.

Scoping is OwnedQuerySet's: a user reads what `visible_to` allows (their own, shared, all for staff) and
changes only what `owned_by` allows; anything else is a 404 (reading) or a 403 (changing something visible)."""
from __future__ import annotations

import math
import re
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from agent.engine import ProblemNames
from apps.api import serializers as s
from apps.api.renderers import ReportCSVRenderer
from apps.batches import services as batches
from apps.batches.models import Batch
from apps.batches.selectors import visible_batches
from apps.endpoints.models import ModelEndpoint
from apps.kernels.models import Kernel
from apps.kernels.selectors import ORDERINGS, visible_kernels
from apps.kernels.services import download_name, render_module
from apps.problems.models import Problem
from apps.problems.selectors import visible_problems
from apps.problems.services import create_problem, delete_problem
from apps.runs.events import event_page
from apps.runs.models import Run
from apps.runs.selectors import visible_runs
from apps.runs.services import cancel_run, candidate_of, start_evaluation, start_profile, start_rebenchmark

ERROR = OpenApiResponse(description='{"error": {"code", "message", "fields"}}')
EVENT_PAGE = 500


# The largest id or count the database holds (a signed 64-bit integer); past it a query would overflow.
MAX_INT = 2**63 - 1


def _int(request: Request, name: str, default: int | None = None, minimum: int = 0) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return default
    if not re.fullmatch(r"-?[0-9]{1,20}", value):  # ASCII digits: int() also takes " 1", "1_0", other scripts
        raise exceptions.ValidationError({name: [f"Must be a whole number, not {value[:100]!r}."]})
    number = int(value)
    if number < minimum:
        raise exceptions.ValidationError({name: [f"Must be at least {minimum}."]})
    if number > MAX_INT:
        raise exceptions.ValidationError({name: [f"Must be at most {MAX_INT}."]})
    return number


def _text(request: Request, name: str) -> str:
    """A text filter ("" when absent); the database refuses NUL characters, so they are refused here."""
    value = request.query_params.get(name, "")
    if "\x00" in value:
        raise exceptions.ValidationError({name: ["Must not contain NUL characters."]})
    return value


def _mine(request: Request) -> bool:
    return request.query_params.get("mine") in ("1", "true", "True")


def _float(request: Request, name: str) -> float | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except ValueError:
        raise exceptions.ValidationError({name: [f"Must be a number, not {value[:100]!r}."]}) from None
    if not math.isfinite(number):
        raise exceptions.ValidationError({name: [f"Must be a finite number, not {value[:100]!r}."]})
    return number


class Scoped:
    """Reads through visible_to; changes (delete, cancel) through owned_by."""

    model: Any
    request: Request

    def get_queryset(self) -> QuerySet:
        return self.model.objects.visible_to(self.request.user)

    def owned_object(self) -> Any:
        obj = self.get_object()  # 404 when it is not visible
        if not self.model.objects.owned_by(self.request.user).filter(pk=obj.pk).exists():
            raise exceptions.PermissionDenied()
        return obj


class ScopedViewSet(Scoped, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                    viewsets.GenericViewSet):
    """List, read and create; each resource adds its own actions."""


MINE = OpenApiParameter("mine", OpenApiTypes.BOOL, description="only your own")


@extend_schema_view(
    list=extend_schema(parameters=[MINE, OpenApiParameter("source_hash", str), OpenApiParameter("name", str)]),
    create=extend_schema(request=s.ProblemCreateSerializer, responses={201: s.ProblemSerializer, 400: ERROR}),
    destroy=extend_schema(responses={204: None, 403: ERROR, 404: ERROR, 409: ERROR}),
)
class ProblemViewSet(mixins.DestroyModelMixin, ScopedViewSet):
    """Problems: modules in KernelBench's format. Creating one checks it (AST, then one run in the sandbox)."""

    model = Problem
    serializer_class = s.ProblemSerializer

    def get_queryset(self) -> QuerySet:
        return visible_problems(self.request.user, mine=_mine(self.request), source_hash=_text(self.request, "source_hash"),
                                name=_text(self.request, "name"))

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(s.ProblemCreateSerializer, request)
        names = ProblemNames(data["model_name"], data["get_inputs_name"], data["get_init_inputs_name"])
        problem = create_problem(request.user, data["name"], data["source"], names=names, shared=data["shared"])
        return Response(s.ProblemSerializer(problem).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        delete_problem(self.owned_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(
    list=extend_schema(parameters=[MINE, OpenApiParameter("problem", int), OpenApiParameter("status", str),
                                   OpenApiParameter("kind", str)]),
    create=extend_schema(request=s.RunCreateSerializer, responses={201: s.RunSerializer, 400: ERROR}),
)
class RunViewSet(ScopedViewSet):
    """Runs: an evaluation of your candidate, or the agent optimizing a problem under budgets."""

    model = Run
    serializer_class = s.RunSerializer

    def get_queryset(self) -> QuerySet:
        return visible_runs(self.request.user, mine=_mine(self.request), problem=_int(self.request, "problem"),
                            status=_text(self.request, "status"), kind=_text(self.request, "kind"))

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(s.RunCreateSerializer, request)
        if data["kind"] == Run.Kind.EVALUATE:
            run = start_evaluation(request.user, data["problem"], data["source"], backend=data["backend"] or None,
                                   shared=data["shared"])
        else:
            run = batches.start_configured_run(request.user, data["problem"], _config(data))
        return Response(s.RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: s.RunSerializer, 403: ERROR, 404: ERROR})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Stop the run (an agent run keeps its best kernel so far). Cancelling a finished run changes nothing."""
        run = self.owned_object()
        cancel_run(run)
        run.refresh_from_db()
        return Response(s.RunSerializer(run).data)

    @extend_schema(request=s.ProfileRequestSerializer, responses={201: s.RunSerializer, 400: ERROR, 404: ERROR, 429: ERROR})
    @action(detail=True, methods=["post"])
    def profile(self, request: Request, pk: str | None = None) -> Response:
        """Profile one of the run's candidates (any run you can see): a new evaluation run of yours, of its source
        with the profiler on; its verdict's `profile` holds the table (Nsight Compute or torch.profiler)."""
        run = self.get_object()
        turn = _valid(s.ProfileRequestSerializer, request)["turn"]
        return Response(s.RunSerializer(start_profile(request.user, candidate_of(run, turn))).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[OpenApiParameter("after", int, description="the last seq you have (0: from the start)"),
                               OpenApiParameter("limit", int, description=f"at most this many (≤ {EVENT_PAGE})")],
                   responses={200: s.EventPageSerializer, 404: ERROR})
    @action(detail=True, methods=["get"])
    def events(self, request: Request, pk: str | None = None) -> Response:
        """The run's events after a seq, in order: the same ones the websocket pushes."""
        run = self.get_object()
        after = _int(request, "after", 0)
        page = event_page(run.pk, after, min(_int(request, "limit", EVENT_PAGE, minimum=1), EVENT_PAGE))
        return Response({"run": run.pk, "status": run.status, "events": page.events, "next_after": page.next_after,
                         "has_more": page.has_more})


@extend_schema_view(
    list=extend_schema(parameters=[
        MINE, OpenApiParameter("problem", int), OpenApiParameter("problem_hash", str),
        OpenApiParameter("min_speedup", float, description="speedup over eager at least this"),
        OpenApiParameter("device", str), OpenApiParameter("backend", str),
        OpenApiParameter("hardware", str, description="text in the hardware description, e.g. H100"),
        OpenApiParameter("ordering", str, enum=["speedup", "-speedup", "created", "-created"])]),
)
class KernelViewSet(Scoped, viewsets.ReadOnlyModelViewSet):
    """The kernel library: accepted kernels with their provenance."""

    model = Kernel
    serializer_class = s.KernelSerializer

    def get_serializer_class(self) -> type[BaseSerializer]:
        return s.KernelDetailSerializer if self.action == "retrieve" else s.KernelSerializer

    def get_queryset(self) -> QuerySet:
        r = self.request
        filters = {"mine": _mine(r), "problem": _int(r, "problem"), "problem_hash": _text(r, "problem_hash"),
                   "device": _text(r, "device"), "backend": _text(r, "backend"), "min_speedup": _float(r, "min_speedup"),
                   "hardware": _text(r, "hardware"), "ordering": _text(r, "ordering")}
        if filters["ordering"] and filters["ordering"] not in ORDERINGS:
            raise exceptions.ValidationError({"ordering": [f"Choose one of {', '.join(ORDERINGS)}."]})
        return visible_kernels(r.user, **filters)

    @extend_schema(responses={(200, "text/x-python"): OpenApiTypes.STR, 404: ERROR})
    @action(detail=True, methods=["get"])
    def download(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The kernel as one module: the verified source under a provenance header."""
        kernel = self.get_object()
        response = HttpResponse(render_module(kernel), content_type="text/x-python; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{download_name(kernel)}"'
        return response

    @extend_schema(request=None, responses={201: s.RunSerializer, 400: ERROR, 403: ERROR, 404: ERROR, 429: ERROR})
    @action(detail=True, methods=["post"])
    def rebenchmark(self, request: Request, pk: str | None = None) -> Response:
        """Measure the kernel again (its owner only): a new evaluation run of its source, whose timing joins the
        kernel's `measurements` whatever it shows."""
        run = start_rebenchmark(request.user, self.owned_object())
        return Response(s.RunSerializer(run).data, status=status.HTTP_201_CREATED)


class EndpointViewSet(viewsets.ReadOnlyModelViewSet):
    """The models the agent can run on (admins configure them); runs and batches name one."""

    serializer_class = s.EndpointSerializer
    queryset = ModelEndpoint.objects.filter(enabled=True)


@extend_schema_view(
    list=extend_schema(parameters=[MINE]),
    create=extend_schema(request=s.BatchCreateSerializer, responses={201: s.BatchSerializer, 400: ERROR}),
)
class BatchViewSet(ScopedViewSet):
    """Batch jobs: many problems under one configuration, and their results table."""

    model = Batch
    serializer_class = s.BatchSerializer

    def get_queryset(self) -> QuerySet:
        return visible_batches(self.request.user, mine=_mine(self.request))

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(s.BatchCreateSerializer, request)
        batch = batches.create_batch(request.user, data["problems"], data["sources"], _config(data), name=data["name"])
        return Response(s.BatchSerializer(batch).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: s.BatchSerializer, 403: ERROR, 404: ERROR})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        batch = self.owned_object()
        batches.cancel_batch(batch)
        return Response(s.BatchSerializer(batch).data)

    @extend_schema(parameters=[OpenApiParameter("format", str, enum=["json", "csv"])],
                   responses={(200, "application/json"): s.ReportSerializer, (200, "text/csv"): OpenApiTypes.STR,
                              404: ERROR})
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, ReportCSVRenderer])
    def report(self, request: Request, pk: str | None = None, format: str | None = None) -> Response:
        """Per-problem verdicts and speedups, the correctness rate, fast_p and geometric-mean speedups."""
        batch = self.get_object()
        response = Response(batches.report(batch))
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = f'attachment; filename="batch_{batch.pk}_report.csv"'
        return response


def _valid(serializer_class: type[BaseSerializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data, context={"request": request})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _config(data: dict[str, Any]) -> batches.RunConfig:
    return batches.RunConfig(endpoint=data["endpoint"], budgets=dict(data["budgets"]), device=data["device"],
                             instructions=data["instructions"], shared=data["shared"])

