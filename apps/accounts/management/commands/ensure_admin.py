"""Create the first admin account on a fresh database and print its password once (never again)."""
from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Create an admin account with a random password if no superuser exists yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: object, username: str, **options: object) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username, "", password)
        self.stdout.write(self.style.SUCCESS(
            f"\n  First admin account created. Log in at http://127.0.0.1:8000/ with\n"
            f"    username: {username}\n    password: {password}\n"
            f"  (shown only this once; change it in the admin, or use `manage.py changepassword {username}`)\n"))
