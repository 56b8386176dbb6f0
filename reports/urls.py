from django.urls import path

from reports import views

urlpatterns = [
    path("", views.home, name="home"),
    path("vendor/plotly-<str:version>.min.js", views.plotly_js, name="plotly_js"),
]
