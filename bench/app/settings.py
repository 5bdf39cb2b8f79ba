"""Django settings for bench/app.sh's application: Django's own admin and auth apps
(code no one in this project wrote) on PostgreSQL through psycopg 3 and Django's
connection pool (psycopg_pool). Everything the bench varies comes from the environment:
the database's host, port, name, user and passfile (CB_APP_DB_*)."""

import os

SECRET_KEY = "connbench-bench-app-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "urls"
WSGI_APPLICATION = None
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# A pool of one: the server (serve.py) is one process with one thread, which uses one
# connection at a time; psycopg_pool's sizing rule is a connection per thread. Each HTTP
# request borrows it (Django's request_started) and gives it back (request_finished).
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ.get("CB_APP_DB_HOST", "127.0.0.1"),
        "PORT": os.environ.get("CB_APP_DB_PORT", "5432"),
        "NAME": os.environ.get("CB_APP_DB_NAME", "app"),
        "USER": os.environ.get("CB_APP_DB_USER", "app"),
        "OPTIONS": {
            "passfile": os.environ.get("CB_APP_DB_PASSFILE", ""),
            "sslmode": "disable",
            "pool": {"min_size": 1, "max_size": 1},
        },
    }
}

# bench/app.sh's diagnosis run (APP_FAST_HASHER=1): Django's own test suites' hasher, so a
# password costs microseconds instead of PBKDF2's ~1 s, most of it inside the admin's
# add-user transaction. The acceptance's run keeps Django's default hashers.
if os.environ.get("CB_APP_FAST_HASHER") == "1":
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
