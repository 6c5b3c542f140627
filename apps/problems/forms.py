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
