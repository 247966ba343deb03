"""Vectors shared by every system, from the bottom up.

- :mod:`.ops`: pure numpy (unit rows, max pooling);
- :mod:`.codec`: content keys and the int8 + hex encoding;
- :mod:`.keyed`: a matrix addressed by string keys, with memoised query scores;
- :mod:`.chat`: a chat's matrix, located by message id and content;
- :mod:`.files`: the embedding file format, atomic saves, damaged files set aside.
"""
