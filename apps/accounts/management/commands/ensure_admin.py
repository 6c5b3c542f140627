"""Create the first admin account on a fresh database and print its password once (never again)."""
from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Create an admin account with a random password if no superuser exists yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        # Where `serve` will listen (make run passes its HOST and PORT), so the printed address is the real one.
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args: object, username: str, host: str, port: int, **options: object) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username, "", password)
        self.stdout.write(self.style.SUCCESS(
            f"\n  First admin account created. Log in at http://{host}:{port}/ with\n"
            f"    username: {username}\n    password: {password}\n"
            f"  (shown only this once; change it in the admin, or use `manage.py changepassword {username}`)\n"))
