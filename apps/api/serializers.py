"""What the API reads and writes. Input serializers only validate; the views call one domain function."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from agent.described import help_of
from agent.engine import BACKENDS
from agent.loop import Budgets
from apps.batches.models import Batch
from apps.batches.services import DEVICES, FAST_P, fast_p_key, progress, stages
from apps.endpoints.models import ModelEndpoint
from apps.kernels.models import Kernel
from apps.problems.models import Problem
from apps.runs.models import Run
from apps.runs.stored_verdict import StoredVerdict


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
    """An agent run's budgets: each at most the studio's maximum for it (read when a request comes)."""

    MAXIMA = {"turns": "KSTUDIO_AGENT_MAX_TURNS", "tokens": "KSTUDIO_AGENT_MAX_TOKENS",
              "agent_wall_seconds": "KSTUDIO_AGENT_WALL_SECONDS", "gpu_seconds": "KSTUDIO_AGENT_MAX_GPU_SECONDS"}
    FIELDS = {"turns": "max_turns", "tokens": "max_tokens", "agent_wall_seconds": "max_wall_seconds",
              "gpu_seconds": "max_gpu_seconds"}  # the studio's names for agent.loop.Budgets' fields

    def get_fields(self) -> dict[str, serializers.Field]:
        fields: dict[str, serializers.Field] = {}
        for name, setting in self.MAXIMA.items():
            limit = getattr(settings, setting)
            kind = serializers.FloatField if name == "gpu_seconds" else serializers.IntegerField
            fields[name] = kind(min_value=0.001 if name == "gpu_seconds" else 1, max_value=limit, required=False,
                                help_text=f"{help_of(Budgets, self.FIELDS[name])} At most {limit:g} ({setting}).")
        return fields


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


class ProfileRequestSerializer(serializers.Serializer):
    """Which candidate of the run to profile."""

    turn = serializers.IntegerField(min_value=0, max_value=1_000_000, help_text="the candidate's turn, as its page and the run's candidates show it")


class RunCreateSerializer(AgentConfigSerializer):
    problem = serializers.PrimaryKeyRelatedField(queryset=Problem.objects.none())
    kind = serializers.ChoiceField(choices=Run.Kind.choices)
    source = SourceField(required=False, help_text="evaluate: the candidate (ModelNew) module")
    backend = serializers.ChoiceField(choices=["", *sorted(BACKENDS)], required=False, default="")
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


class VariantTimingSerializer(serializers.Serializer):
    """One of the problem's input variants (get_input_variants), timed on its own shapes."""

    label = serializers.CharField(required=False, help_text="variant1, variant2, ... in the problem's order")
    candidate_ms = serializers.FloatField(required=False, allow_null=True)
    eager_ms = serializers.FloatField(required=False, allow_null=True)
    compile_ms = serializers.FloatField(required=False, allow_null=True)
    speedup_vs_best = serializers.FloatField(required=False, allow_null=True)
    speedup_vs_eager = serializers.FloatField(required=False, allow_null=True)
    speedup_vs_compile = serializers.FloatField(required=False, allow_null=True)


class VerdictTimingSerializer(serializers.Serializer):
    """A verdict's timing (agent/engine/verdict.py Timing; the JSON has more fields than described here, and a verdict stored
    before a field existed lacks it: none is required)."""

    candidate_ms = serializers.FloatField(required=False)
    eager_ms = serializers.FloatField(required=False)
    compile_ms = serializers.FloatField(required=False, allow_null=True)
    speedup_vs_best = serializers.FloatField(required=False, allow_null=True, help_text="the headline: against the "
                                             "faster of eager and torch.compile (paired per round)")
    interval_vs_best = serializers.ListField(required=False, child=serializers.FloatField(), allow_null=True,
                                             help_text="[low, high]: a >= 90% interval for speedup_vs_best")
    speedup_vs_eager = serializers.FloatField(required=False)
    speedup_vs_compile = serializers.FloatField(required=False, allow_null=True)
    sol_fraction = serializers.FloatField(required=False, allow_null=True, help_text="the kernel's share of the speed "
                                          "of light: the problem's least time at the device's measured peaks over its time")
    sol_ms = serializers.FloatField(required=False, allow_null=True)
    sol_bound = serializers.CharField(required=False, help_text="memory or compute: the roof that sets sol_ms")
    variants = VariantTimingSerializer(many=True, required=False,
                                       help_text="each input variant's timing; the headline is the main inputs'")


class BestSerializer(serializers.Serializer):
    turn = serializers.IntegerField(required=False)
    status = serializers.CharField(required=False, allow_null=True)
    timing = VerdictTimingSerializer(allow_null=True, required=False)
    kernel = serializers.IntegerField(required=False, allow_null=True)


class RunSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    problem_name = serializers.CharField(source="problem.name", read_only=True)
    best = serializers.SerializerMethodField()

    class Meta:
        model = Run
        fields = ["id", "problem", "problem_name", "owner", "kind", "status", "stage", "message", "config", "budgets",
                  "last_seq", "best_speedup", "best", "shared", "created_at", "started_at", "finished_at"]
        read_only_fields = fields

    @extend_schema_field(BestSerializer(allow_null=True))
    def get_best(self, run: Run) -> dict[str, Any] | None:
        """The best accepted candidate: its turn, verdict status and timing."""
        best = run.best_candidate
        if best is None:
            return None
        verdict = StoredVerdict(best.verdict or {})
        # Lists annotate the kernel's id (RunViewSet.get_queryset: one query, not one per run); a single run asks.
        if hasattr(run, "best_kernel_id"):
            kernel = run.best_kernel_id
        else:
            kernel = Kernel.objects.filter(candidate=best).values_list("pk", flat=True).first()
        return {"turn": best.turn, "status": verdict.status, "timing": verdict.timing, "kernel": kernel}


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
                                                 "measurements", "trajectory"]
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

    def validate_sources(self, sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
        limit = settings.KSTUDIO_BATCH_MAX_SOURCES  # each is checked in the sandbox while the request waits
        if len(sources) > limit:
            raise serializers.ValidationError(f"A batch takes at most {limit} new sources, not {len(sources)}; upload "
                                              "the others as problems first (POST /api/v1/problems/) and list their ids "
                                              "in `problems`.")
        return sources

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
        fields = ["id", "name", "owner", "kind", "endpoint", "budgets", "device", "instructions", "progress", "status",
                  "runs", "shared", "created_at", "finished_at"]
        read_only_fields = fields

    def get_progress(self, batch: Batch) -> dict[str, Any]:
        return progress(batch)

    def get_runs(self, batch: Batch) -> list[dict[str, Any]]:
        """Each problem's run as it stands (status, stage, candidates so far): what a watcher prints as it changes."""
        now = stages(batch)
        return [{"problem": problem, "problem_name": name, **now[position]}
                for problem, name, position in batch.items.values_list("problem_id", "problem__name", "position")]


class ReportRowSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    problem_id = serializers.IntegerField()
    problem = serializers.CharField()
    run_id = serializers.IntegerField()
    run_status = serializers.CharField()
    verdict = serializers.CharField()
    correct = serializers.BooleanField()
    speedup_vs_best = serializers.FloatField(allow_null=True, help_text="the headline: against the faster of eager and torch.compile")
    speedup_vs_eager = serializers.FloatField(allow_null=True)
    speedup_vs_compile = serializers.FloatField(allow_null=True)
    sol_fraction = serializers.FloatField(allow_null=True, help_text="the kernel's share of the device's speed of light "
                                          "(the problem's bytes and FLOPs at the device's measured peaks)")
    kernel_id = serializers.IntegerField(allow_null=True)


FastP = type("FastPSerializer", (serializers.Serializer,),
             {fast_p_key(p): serializers.FloatField(help_text=f"share correct and > {p:g}x eager") for p in FAST_P})
FastPBest = type("FastPBestSerializer", (serializers.Serializer,),
                 {fast_p_key(p): serializers.FloatField(help_text=f"share correct and > {p:g}x the faster of eager and "
                                                                  "torch.compile") for p in FAST_P})


class ReportSummarySerializer(serializers.Serializer):
    problems = serializers.IntegerField()
    finished = serializers.IntegerField()
    correct = serializers.IntegerField()
    correctness_rate = serializers.FloatField()
    fast_p = FastP()
    fast_p_vs_best = FastPBest()
    geomean_speedup_vs_best = serializers.FloatField(allow_null=True)
    geomean_speedup_vs_eager = serializers.FloatField(allow_null=True)
    geomean_speedup_vs_compile = serializers.FloatField(allow_null=True)
    geomean_sol_fraction = serializers.FloatField(allow_null=True)


class ReportSerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    name = serializers.CharField()
    status = serializers.CharField()
    configuration = serializers.JSONField()
    rows = ReportRowSerializer(many=True)
    summary = ReportSummarySerializer()

