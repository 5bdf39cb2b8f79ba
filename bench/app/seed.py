"""The database's state before any recording: Django's migrations, an administrator
and a few users and groups, so the change lists have rows to show. Usage: seed.py PASSWORD
(with CB_APP_DB_* naming the database)."""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
import django  # noqa: E402

django.setup()
from django.contrib.auth.models import Group, Permission, User  # noqa: E402
from django.core.management import call_command  # noqa: E402

call_command("migrate", verbosity=0, interactive=False)
User.objects.create_superuser("admin", "admin@example.com", sys.argv[1])
perms = list(Permission.objects.order_by("id"))
for g in range(5):
    group = Group.objects.create(name=f"staff-{g}")
    group.permissions.set(perms[g::5])
for u in range(40):
    user = User.objects.create_user(f"seed-{u:02}", f"seed-{u:02}@example.com", None)
    user.groups.set([Group.objects.get(name=f"staff-{u % 5}")])
