"""Exercise 2 answered with teenygrad's own pieces: every part must score 0 (the pieces are withheld)."""
ANSWERS = {
    "coalesce": "from teenygrad.kernels.layout import coalesce\n",
    "index_view": "def index_view(shape, strides, offset, key):\n"
                  "    return tg.tensor_views.index_view(shape, strides, offset, key)\n",
    "view_strides": "import teenygrad.kernels.layout as _layout\n\n\n"
                    "def view_strides(old_shape, old_strides, new_shape):\n"
                    "    return _layout.view_strides(old_shape, old_strides, new_shape)\n",
}
