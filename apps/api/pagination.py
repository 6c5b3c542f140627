from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    """?page=N&page_size=M (at most 200); the answer says count, next and previous."""

    page_size_query_param = "page_size"
    max_page_size = 200
