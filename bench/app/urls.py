"""The application's URLs: Django's admin site, nothing of our own."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
