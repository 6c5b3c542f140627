from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator

from agent.described import help_of
from agent.engine import BACKENDS, LABELS
from agent.loop import Budgets
from apps.endpoints.models import ModelEndpoint


class ModuleForm(forms.Form):
    """A module from a file (preferred when given) or from the editor's text."""

    file = forms.FileField(required=False, help_text="a .py file")
    # Not stripped: the module is stored as written (its final newline too), so its hash is the file's.
    source = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"class": "code-fallback", "rows": 20}))


class ProblemForm(ModuleForm):
    name = forms.CharField(max_length=200, required=False, help_text="defaults to the file name")
    model_name = forms.CharField(max_length=100, initial="Model", label="model class")
    get_inputs_name = forms.CharField(max_length=100, initial="get_inputs", label="inputs function")
    get_init_inputs_name = forms.CharField(max_length=100, initial="get_init_inputs", label="init inputs function")
    shared = forms.BooleanField(required=False, help_text="let every user see it")


class CandidateForm(ModuleForm):
    backend = forms.ChoiceField(required=False, choices=[("", "guess from the code"),
                                                         *((name, LABELS[name]) for name in sorted(BACKENDS))])
    shared = forms.BooleanField(required=False, help_text="let every user see the run and its kernel")


class AgentRunForm(forms.Form):
    """"Optimize with the agent": which model, how much it may spend, what to tell it."""

    endpoint = forms.ModelChoiceField(queryset=None, empty_label=None, label="model",
                                      help_text="configured by admins under Model endpoints")
    turns = forms.IntegerField(min_value=1, required=False, help_text=help_of(Budgets, "max_turns"))
    tokens = forms.IntegerField(min_value=1, required=False, help_text=help_of(Budgets, "max_tokens"))
    agent_wall_seconds = forms.IntegerField(min_value=1, required=False, label="wall seconds",
                                            help_text=help_of(Budgets, "max_wall_seconds"))
    device = forms.ChoiceField(required=False, choices=[("cpu", "CPU"), ("cuda", "GPU (CUDA)")],
                               help_text="where candidates are built and timed (default: the studio's)")
    instructions = forms.CharField(required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 3}),
                                   help_text="optional: what to aim for (e.g. 'fuse the bias and the activation')")
    shared = forms.BooleanField(required=False, help_text="let every user see the run and its kernel")

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].queryset = ModelEndpoint.objects.filter(enabled=True)
        # Every budget has the studio's maximum (read now, so a changed setting applies).
        for name, setting in (("turns", "KSTUDIO_AGENT_MAX_TURNS"), ("tokens", "KSTUDIO_AGENT_MAX_TOKENS"),
                              ("agent_wall_seconds", "KSTUDIO_AGENT_WALL_SECONDS")):
            limit = getattr(settings, setting)
            field = self.fields[name]
            field.max_value = limit
            field.validators.append(MaxValueValidator(limit))
            field.widget.attrs["max"] = limit
            field.initial = limit  # the default budget is the maximum: the box shows what the run will get
        self.fields["device"].initial = settings.KSTUDIO_DEVICE
