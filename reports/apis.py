"""The reports app's API: a stored review's build status (what the progress page shows)."""

from typing import Any

from django.utils.translation import gettext_lazy
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from governance.toolkit.api import NOT_FOUND
from reports.selectors.stored_reviews import review_get


class ReviewStatusApi(APIView):
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.CharField(help_text=gettext_lazy("queued, building, done or failed"))
        progress = serializers.IntegerField(help_text=gettext_lazy("Percent done (0-100)."))
        version = serializers.IntegerField()
        built_at = serializers.DateTimeField(allow_null=True)
        error = serializers.CharField()
        url = serializers.SerializerMethodField()

        class Meta:
            ref_name = "ReviewStatus"

        def get_url(self, obj: Any) -> str:
            return str(obj.get_absolute_url())

    @extend_schema(
        operation_id="reviews_status_retrieve",
        tags=["reviews"],
        summary=gettext_lazy("The build status of a stored monthly review (ops)"),
        responses={200: OutputSerializer, 404: NOT_FOUND},
        examples=[
            OpenApiExample(
                "Building",
                value={
                    "id": 7,
                    "status": "building",
                    "progress": 40,
                    "version": 2,
                    "built_at": None,
                    "error": "",
                    "url": "/monthly-reviews/7/",
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, pk: int) -> Response:
        review = review_get(user=request.user, pk=pk)
        return Response(self.OutputSerializer(review).data)
