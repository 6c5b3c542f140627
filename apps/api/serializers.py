"""What the API reads and writes. Input serializers only validate; the views call one domain function."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import ProhibitNullCharactersValidator
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from apps.batches.models import Batch
from apps.batches.services import DEVICES, FAST_P, fast_p_key
from apps.endpoints.models import ModelEndpoint
from apps.kernels.models import Kernel
from apps.problems.models import Problem
from apps.runs.models import Run


class SourceField(serializers.CharField):
    """A module's text: at most KSTUDIO_MAX_UPLOAD_BYTES bytes of UTF-8, the same limit as an upload's."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        limit = settings.KSTUDIO_MAX_UPLOAD_BYTES
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if size > limit:
            raise serializers.ValidationError(f"The module is {size:,} bytes, over the {limit:,}-byte limit; send only "
                                              "the module itself, without embedded data.")
        return text


class ProblemSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)

    class Meta:
        model = Problem
        fields = ["id", "name", "owner", "source", "source_hash", "model_name", "get_inputs_name",
                  "get_init_inputs_name", "validation", "runtime_error", "shared", "created_at"]
        read_only_fields = fields


class ProblemCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="problem.py")
    source = SourceField(help_text="the module's text, in KernelBench's format")
    model_name = serializers.RegexField(r"^[A-Za-z_][A-Za-z0-9_]*\Z", max_length=100, default="Model")
    get_inputs_name = serializers.RegexField(r"^[A-Za-z_][A-Za-z0-9_]*\Z", max_length=100, default="get_inputs")
    get_init_inputs_name = serializers.RegexField(r"^[A-Za-z_][A-Za-z0-9_]*\Z", max_length=100,
                                                  default="get_init_inputs")
    shared = serializers.BooleanField(default=False)


class BudgetsSerializer(serializers.Serializer):
    turns = serializers.IntegerField(min_value=1, required=False, help_text="model turns (capped by the studio's maximum)")
    tokens = serializers.IntegerField(min_value=1, required=False, help_text="prompt + completion tokens over the run")
    agent_wall_seconds = serializers.IntegerField(min_value=1, required=False, help_text="time in model calls and tools")
    gpu_seconds = serializers.FloatField(min_value=0.001, required=False, help_text="time on the GPU")


class EndpointField(serializers.SlugRelatedField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="name", queryset=ModelEndpoint.objects.filter(enabled=True), **kwargs)

    def to_internal_value(self, data: Any) -> ModelEndpoint:
        # CharField's guards, which a related field lacks: the database refuses NUL and lone surrogates.
        if isinstance(data, str):
            try:
                ProhibitNullCharactersValidator()(data)
                ProhibitSurrogateCharactersValidator()(data)
            except (DjangoValidationError, serializers.ValidationError):
                self.fail("invalid")
        return super().to_internal_value(data)


class AgentConfigSerializer(serializers.Serializer):
    """The configuration of an agent run, and of every run of a batch."""

    endpoint = EndpointField(help_text="an enabled model endpoint's name (GET /api/v1/endpoints/)")
    budgets = BudgetsSerializer(required=False, default=dict)
    device = serializers.ChoiceField(choices=DEVICES, required=False, allow_blank=True, default="",
                                     help_text="where candidates run (default: the studio's)")
    instructions = serializers.CharField(max_length=20_000, required=False, allow_blank=True, default="")
    shared = serializers.BooleanField(default=False)


class RunCreateSerializer(AgentConfigSerializer):
    problem = serializers.PrimaryKeyRelatedField(queryset=Problem.objects.none())
    kind = serializers.ChoiceField(choices=Run.Kind.choices)
    source = SourceField(required=False, help_text="evaluate: the candidate (ModelNew) module")
    backend = serializers.ChoiceField(choices=["", "cpp", "cuda", "nvrtc", "triton"], required=False, default="")
    endpoint = EndpointField(required=False, help_text="agent: an enabled model endpoint's name")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:
            self.fields["problem"].queryset = Problem.objects.visible_to(request.user)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if data["kind"] == Run.Kind.EVALUATE and not data.get("source", "").strip():
            raise serializers.ValidationError({"source": ["An evaluate run needs the candidate module's source."]})
        if data["kind"] == Run.Kind.AGENT and data.get("endpoint") is None:
            raise serializers.ValidationError({"endpoint": ["An agent run needs an endpoint (GET /api/v1/endpoints/)."]})
        return data


class RunSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    problem_name = serializers.CharField(source="problem.name", read_only=True)
    best = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = ["id", "problem", "problem_name", "owner", "kind", "status", "stage", "message", "config", "budgets",
                  "last_seq", "best_speedup", "best", "shared", "created_at", "started_at", "finished_at"]
        read_only_fields = fields

    def get_best(self, run: Run) -> dict[str, Any] | None:
        """The best accepted candidate: its turn, verdict status and timing."""
        best = run.best_candidate
        if best is None:
            return None
        verdict = best.verdict or {}
        # Lists annotate the kernel's id (RunViewSet.get_queryset: one query, not one per run); a single run asks.
        if hasattr(run, "best_kernel_id"):
            kernel = run.best_kernel_id
        else:
            kernel = Kernel.objects.filter(candidate=best).values_list("pk", flat=True).first()
        return {"turn": best.turn, "status": verdict.get("status"), "timing": verdict.get("timing"), "kernel": kernel}


class EventSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    kind = serializers.CharField()
    payload = serializers.JSONField()
    at = serializers.DateTimeField()


class EventPageSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    status = serializers.CharField()
    events = EventSerializer(many=True)
    next_after = serializers.IntegerField(help_text="pass as ?after= to get the next page")
    has_more = serializers.BooleanField()


class KernelSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    problem_name = serializers.CharField(source="problem.name", read_only=True)
    run = serializers.IntegerField(source="candidate.run_id", read_only=True)

    class Meta:
        model = Kernel
        fields = ["id", "name", "problem", "problem_name", "problem_hash", "owner", "run", "backend", "device", "policy",
                  "model_name", "hardware", "speedup_vs_eager", "speedup_vs_compile", "source_hash", "shared",
                  "created_at", "verified_at"]
        read_only_fields = fields


class KernelDetailSerializer(KernelSerializer):
    """With its provenance: the verified source, toolchain, verification evidence, timing and trajectory."""

    produced_by = serializers.CharField(source="produced_by.username", read_only=True, allow_null=True)

    class Meta(KernelSerializer.Meta):
        fields = KernelSerializer.Meta.fields + ["produced_by", "source", "toolchain", "verification", "timing",
                                                 "trajectory"]
        read_only_fields = fields


class EndpointSerializer(serializers.ModelSerializer):
    class Meta:
        model = ModelEndpoint
        fields = ["id", "name", "kind", "model", "notes"]
        read_only_fields = fields


class SourceSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    source = SourceField()


class BatchCreateSerializer(AgentConfigSerializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    problems = serializers.PrimaryKeyRelatedField(queryset=Problem.objects.none(), many=True, required=False,
                                                  default=list, help_text="ids of problems you can see")
    sources = SourceSerializer(many=True, required=False, default=list,
                               help_text="new problems, created (and checked) first")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:
            self.fields["problems"].child_relation.queryset = Problem.objects.visible_to(request.user)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not data["problems"] and not data["sources"]:
            raise serializers.ValidationError({"problems": ["List problem ids, or give sources, or both."]})
        return data


class BatchSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    endpoint = serializers.CharField(source="endpoint.name", read_only=True)
    progress = serializers.SerializerMethodField()
    runs = serializers.SerializerMethodField()

    class Meta:
        model = Batch
        # progress first: reading it marks a batch whose runs are all over as finished, before status is read.
        fields = ["id", "name", "owner", "kind", "endpoint", "budgets", "device", "instructions", "progress", "status",
                  "runs", "shared", "created_at", "finished_at"]
        read_only_fields = fields

    def get_progress(self, batch: Batch) -> dict[str, Any]:
        from apps.batches.services import progress

        return progress(batch)

    def get_runs(self, batch: Batch) -> list[dict[str, Any]]:
        return [{"problem": problem, "run": run} for problem, run in batch.items.values_list("problem_id", "run_id")]


class ReportRowSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    problem_id = serializers.IntegerField()
    problem = serializers.CharField()
    run_id = serializers.IntegerField()
    run_status = serializers.CharField()
    verdict = serializers.CharField()
    correct = serializers.BooleanField()
    speedup_vs_eager = serializers.FloatField(allow_null=True)
    speedup_vs_compile = serializers.FloatField(allow_null=True)
    kernel_id = serializers.IntegerField(allow_null=True)


FastP = type("FastPSerializer", (serializers.Serializer,),
             {fast_p_key(p): serializers.FloatField(help_text=f"share correct and > {p:g}x eager") for p in FAST_P})


class ReportSummarySerializer(serializers.Serializer):
    problems = serializers.IntegerField()
    finished = serializers.IntegerField()
    correct = serializers.IntegerField()
    correctness_rate = serializers.FloatField()
    fast_p = FastP()
    geomean_speedup_vs_eager = serializers.FloatField(allow_null=True)
    geomean_speedup_vs_compile = serializers.FloatField(allow_null=True)


class ReportSerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.CharField()
    configuration = serializers.JSONField()
    rows = ReportRowSerializer(many=True)
    summary = ReportSummarySerializer()

