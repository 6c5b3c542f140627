from django import forms


class ModuleForm(forms.Form):
    """A module from a file (preferred when given) or from the editor's text."""

    file = forms.FileField(required=False, help_text="a .py file")
    source = forms.CharField(required=False, widget=forms.Textarea(attrs={"class": "code-fallback", "rows": 20}))


class ProblemForm(ModuleForm):
    name = forms.CharField(max_length=200, required=False, help_text="defaults to the file name")
    model_name = forms.CharField(max_length=100, initial="Model", label="model class")
    get_inputs_name = forms.CharField(max_length=100, initial="get_inputs", label="inputs function")
    get_init_inputs_name = forms.CharField(max_length=100, initial="get_init_inputs", label="init inputs function")
    shared = forms.BooleanField(required=False, help_text="let every user see it")


class CandidateForm(ModuleForm):
    backend = forms.ChoiceField(required=False, choices=[("", "guess from the code"), ("cpp", "C++ (CPU)"),
                                                         ("cuda", "CUDA C++"), ("nvrtc", "NVRTC"), ("triton", "Triton")])
    shared = forms.BooleanField(required=False, help_text="let every user see the run and its kernel")


class AgentRunForm(forms.Form):
    """"Optimize with the agent": which model, how much it may spend, what to tell it."""

    endpoint = forms.ModelChoiceField(queryset=None, empty_label=None, label="model",
                                      help_text="configured by admins under Model endpoints")
    turns = forms.IntegerField(min_value=1, required=False, help_text="model turns (default: the studio's)")
    tokens = forms.IntegerField(min_value=1, required=False, help_text="prompt + completion tokens over the run")
    agent_wall_seconds = forms.IntegerField(min_value=1, required=False, label="wall seconds",
                                            help_text="time spent in model calls and tools")
    instructions = forms.CharField(required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 3}),
                                   help_text="optional: what to aim for (e.g. 'fuse the bias and the activation')")
    shared = forms.BooleanField(required=False, help_text="let every user see the run and its kernel")

    def __init__(self, *args: object, **kwargs: object) -> None:
        from apps.endpoints.models import ModelEndpoint

        super().__init__(*args, **kwargs)
        self.fields["endpoint"].queryset = ModelEndpoint.objects.filter(enabled=True)
