"""Exercise 2 answered with teenygrad's own pieces: every part must score 0 (the pieces are withheld)."""
ANSWERS = {
    "coalesce": "from teenygrad.kernels.layout import coalesce\n",
    "indexing": "import teenygrad.tensor_views as _views\n\n\n"
                "def parse_key(shape, key):\n"
                "    return _views.parse_key(shape, key)\n\n\n"
                "def index_view(shape, strides, offset, key):\n"
                "    return _views.index_view(shape, strides, offset, key)\n",
    "view_strides": "import teenygrad.kernels.layout as _layout\n\n\n"
                    "def view_strides(old_shape, old_strides, new_shape):\n"
                    "    return _layout.view_strides(old_shape, old_strides, new_shape)\n",
    "copy": "from teenygrad.kernels.movement import copy\n",
}
