"""The REST API (/api/v1/): each endpoint validates, calls one domain function, and answers.

Scoping is OwnedQuerySet's: a user reads what `visible_to` allows (their own, shared, all for staff) and
changes only what `owned_by` allows; anything else is a 404 (reading) or a 403 (changing something visible)."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from agent.validation import ProblemNames
from apps.api import serializers as s
from apps.api.renderers import ReportCSVRenderer
from apps.batches import services as batches
from apps.batches.models import Batch
from apps.endpoints.models import ModelEndpoint
from apps.kernels.models import Kernel
from apps.kernels.services import download_name, render_module
from apps.problems.models import Problem
from apps.problems.services import create_problem
from apps.runs.models import Event, Run
from apps.runs.services import cancel_run, start_evaluation

ERROR = OpenApiResponse(description='{"error": {"code", "message", "fields"}}')
EVENT_PAGE = 500


def _int(request: Request, name: str, default: int | None = None, minimum: int = 0) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except ValueError:
        raise exceptions.ValidationError({name: [f"Must be a whole number, not {value!r}."]}) from None
    if number < minimum:
        raise exceptions.ValidationError({name: [f"Must be at least {minimum}."]})
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
        return float(value)
    except ValueError:
        raise exceptions.ValidationError({name: [f"Must be a number, not {value!r}."]}) from None


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
        problems = super().get_queryset().select_related("owner")
        if _mine(self.request):
            problems = problems.filter(owner=self.request.user)
        if source_hash := _text(self.request, "source_hash"):
            problems = problems.filter(source_hash=source_hash)
        if name := _text(self.request, "name"):
            problems = problems.filter(name__icontains=name)
        return problems

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(s.ProblemCreateSerializer, request)
        names = ProblemNames(data["model_name"], data["get_inputs_name"], data["get_init_inputs_name"])
        problem = create_problem(request.user, data["name"], data["source"], names, shared=data["shared"])
        return Response(s.ProblemSerializer(problem).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        problem = self.owned_object()
        with transaction.atomic():
            # Kernels keep their candidate (PROTECT); the problem's kernels go first, then its runs.
            problem.kernels.all().delete()
            problem.delete()
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
        runs = super().get_queryset().select_related("owner", "problem", "best_candidate").annotate(
            best_kernel_id=Subquery(Kernel.objects.filter(candidate=OuterRef("best_candidate")).order_by("pk").values("pk")[:1]))
        if _mine(self.request):
            runs = runs.filter(owner=self.request.user)
        if (problem := _int(self.request, "problem")) is not None:
            runs = runs.filter(problem_id=problem)
        for name in ("status", "kind"):
            if value := _text(self.request, name):
                runs = runs.filter(**{name: value})
        return runs

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(s.RunCreateSerializer, request)
        if data["kind"] == Run.Kind.EVALUATE:
            run = start_evaluation(request.user, data["problem"], data["source"], data["backend"] or None,
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

    @extend_schema(parameters=[OpenApiParameter("after", int, description="the last seq you have (0: from the start)"),
                               OpenApiParameter("limit", int, description=f"at most this many (≤ {EVENT_PAGE})")],
                   responses={200: s.EventPageSerializer, 404: ERROR})
    @action(detail=True, methods=["get"])
    def events(self, request: Request, pk: str | None = None) -> Response:
        """The run's events after a seq, in order: the same ones the websocket pushes."""
        run = self.get_object()
        after = _int(request, "after", 0)
        limit = min(_int(request, "limit", EVENT_PAGE, minimum=1), EVENT_PAGE)
        page = list(Event.objects.filter(run=run, seq__gt=after).order_by("seq")[:limit + 1])
        events = [e.to_message() for e in page[:limit]]
        return Response({"run": run.pk, "status": run.status, "events": events,
                         "next_after": events[-1]["seq"] if events else after, "has_more": len(page) > limit})


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
    ORDERINGS = {"speedup": "speedup_vs_eager", "-speedup": "-speedup_vs_eager", "created": "created_at",
                 "-created": "-created_at"}

    def get_serializer_class(self) -> type[BaseSerializer]:
        return s.KernelDetailSerializer if self.action == "retrieve" else s.KernelSerializer

    def get_queryset(self) -> QuerySet:
        kernels = super().get_queryset().select_related("owner", "problem", "candidate", "produced_by")
        if _mine(self.request):
            kernels = kernels.filter(owner=self.request.user)
        if (problem := _int(self.request, "problem")) is not None:
            kernels = kernels.filter(problem_id=problem)
        for name in ("problem_hash", "device", "backend"):
            if value := _text(self.request, name):
                kernels = kernels.filter(**{name: value})
        if (minimum := _float(self.request, "min_speedup")) is not None:
            kernels = kernels.filter(speedup_vs_eager__gte=minimum)
        if hardware := _text(self.request, "hardware"):
            kernels = kernels.filter(hardware__icontains=hardware)
        if ordering := _text(self.request, "ordering"):
            if ordering not in self.ORDERINGS:
                raise exceptions.ValidationError({"ordering": [f"Choose one of {', '.join(self.ORDERINGS)}."]})
            kernels = kernels.order_by(self.ORDERINGS[ordering], "-pk")
        return kernels

    @extend_schema(responses={(200, "text/x-python"): OpenApiTypes.STR, 404: ERROR})
    @action(detail=True, methods=["get"])
    def download(self, request: Request, pk: str | None = None) -> HttpResponse:
        """The kernel as one module: the verified source under a provenance header."""
        kernel = self.get_object()
        response = HttpResponse(render_module(kernel), content_type="text/x-python; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{download_name(kernel)}"'
        return response


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
        found = super().get_queryset().select_related("owner", "endpoint")
        if _mine(self.request):
            found = found.filter(owner=self.request.user)
        return found

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = _valid(s.BatchCreateSerializer, request)
        config = _config(data)
        with transaction.atomic():  # a source that fails its check creates nothing
            made = [create_problem(request.user, item["name"], item["source"]) for item in data["sources"]]
            batch = batches.start_batch(request.user, [*data["problems"], *made], config, name=data["name"])
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

