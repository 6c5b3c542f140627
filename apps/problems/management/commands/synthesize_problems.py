from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.problems.synthetic import synthesize_for
from trainer.synthesis.config import SynthesisConfig


class Command(BaseCommand):
    help = ("Compose new problems from seed PyTorch ops (trainer.synthesis), keep those that pass every check "
            "(eager, torch.compile, deterministic, non-constant, runtime window, not a near-duplicate of the "
            "owner's problems or the examples) and store them for the owner tagged synthetic; prints the report.")

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, required=True, help="how many problems to keep")
        parser.add_argument("--owner", required=True, help="the username that will own the problems")
        parser.add_argument("--seed", type=int, default=0, help="seeds the composition and the checks' inputs")
        parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                            help="where the checks run and what the sizes are chosen for")
        parser.add_argument("--max-attempts", type=int, default=None, help="give up after this many candidates "
                            "(default: 20 x count)")
        parser.add_argument("--min-ms", type=float, default=None, help="the runtime window's low end in ms of eager "
                            "median (default: 0.05)")
        parser.add_argument("--max-ms", type=float, default=None, help="the runtime window's high end (default: 20 on "
                            "cpu, 50 on cuda)")
        parser.add_argument("--no-compile-check", action="store_true", help="skip the torch.compile check (the "
                            "slowest: seconds per problem)")
        parser.add_argument("--shared", action="store_true", help="let every user see them")

    def handle(self, *args, count: int, owner: str, seed: int, device: str, max_attempts: int | None,
               min_ms: float | None, max_ms: float | None, no_compile_check: bool, shared: bool, **options):
        try:
            user = get_user_model().objects.get(username=owner)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user {owner!r}; create it first (manage.py createsuperuser).") from None
        try:
            config = SynthesisConfig(count=count, seed=seed, device=device, max_attempts=max_attempts, min_ms=min_ms,
                                     max_ms=max_ms, compile_check=not no_compile_check)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        stored, report = synthesize_for(user, config, shared=shared)
        self.stdout.write(report.text())
        if report.kept < config.count:
            self.stderr.write(f"only {report.kept} of {config.count} kept in {report.attempts} attempts: raise "
                              "--max-attempts or widen the runtime window (--min-ms, --max-ms)")
        for name, why in stored.invalid:
            self.stderr.write(f"not stored {name}: {why}")
        self.stdout.write(f"stored {len(stored.created)}, already there {len(stored.existing)}, "
                          f"invalid {len(stored.invalid)}")
