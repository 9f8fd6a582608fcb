"""optree's tree functions in the namespace of `vmapx.config.pytree_namespace`.

optree keeps a registry of pytree classes per namespace: a library registers its classes
with `optree.register_pytree_node(cls, flatten, unflatten, namespace="mylib")`, and they
are nodes only where that namespace is asked for. Every tree walk of the transforms goes
through this module (imported as `optree`), so that setting
`vmapx.config.pytree_namespace = "mylib"` makes those classes containers under `vmap`,
`grad`, `jit` and the rest. The default, `""`, is optree's global namespace only.

The signatures take and give `Any`: optree's `PyTree[T]` type does not describe the
tuples, dicts and user classes that are passed to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optree
from optree import PyTreeSpec

from ._config import config

__all__ = [
    "PyTreeSpec",
    "tree_broadcast_prefix",
    "tree_flatten",
    "tree_flatten_one_level",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_map",
    "tree_paths",
    "tree_structure",
    "tree_unflatten",
]

IsLeaf = Callable[[Any], bool] | None


def tree_flatten(
    tree: Any, is_leaf: IsLeaf = None, *, none_is_leaf: bool = False
) -> tuple[list[Any], PyTreeSpec]:
    """`optree.tree_flatten` in the configured namespace."""
    return optree.tree_flatten(
        tree, is_leaf, none_is_leaf=none_is_leaf, namespace=config.pytree_namespace
    )


def tree_flatten_with_path(
    tree: Any, is_leaf: IsLeaf = None, *, none_is_leaf: bool = False
) -> tuple[list[tuple[Any, ...]], list[Any], PyTreeSpec]:
    """`optree.tree_flatten_with_path` in the configured namespace."""
    return optree.tree_flatten_with_path(
        tree, is_leaf, none_is_leaf=none_is_leaf, namespace=config.pytree_namespace
    )


def tree_flatten_one_level(
    tree: Any, is_leaf: IsLeaf = None, *, none_is_leaf: bool = False
) -> tuple[list[Any], Any, tuple[Any, ...], Callable[[Any, Any], Any]]:
    """`optree.tree_flatten_one_level` in the configured namespace."""
    children, meta, entries, unflatten = optree.tree_flatten_one_level(
        tree, is_leaf, none_is_leaf=none_is_leaf, namespace=config.pytree_namespace
    )
    return list(children), meta, tuple(entries), unflatten


def tree_unflatten(treespec: PyTreeSpec, leaves: Any) -> Any:
    """`optree.tree_unflatten` (the spec holds its namespace)."""
    return optree.tree_unflatten(treespec, leaves)


def tree_leaves(tree: Any, is_leaf: IsLeaf = None, *, none_is_leaf: bool = False) -> list[Any]:
    """`optree.tree_leaves` in the configured namespace."""
    return optree.tree_leaves(
        tree, is_leaf, none_is_leaf=none_is_leaf, namespace=config.pytree_namespace
    )


def tree_structure(tree: Any, is_leaf: IsLeaf = None, *, none_is_leaf: bool = False) -> PyTreeSpec:
    """`optree.tree_structure` in the configured namespace."""
    return optree.tree_structure(
        tree, is_leaf, none_is_leaf=none_is_leaf, namespace=config.pytree_namespace
    )


def tree_paths(
    tree: Any, is_leaf: IsLeaf = None, *, none_is_leaf: bool = False
) -> list[tuple[Any, ...]]:
    """`optree.tree_paths` in the configured namespace."""
    return optree.tree_paths(
        tree, is_leaf, none_is_leaf=none_is_leaf, namespace=config.pytree_namespace
    )


def tree_map(
    func: Callable[..., Any],
    tree: Any,
    *rests: Any,
    is_leaf: IsLeaf = None,
    none_is_leaf: bool = False,
) -> Any:
    """`optree.tree_map` in the configured namespace."""
    return optree.tree_map(
        func,
        tree,
        *rests,
        is_leaf=is_leaf,
        none_is_leaf=none_is_leaf,
        namespace=config.pytree_namespace,
    )


def tree_broadcast_prefix(
    prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf = None, *, none_is_leaf: bool = False
) -> Any:
    """`optree.tree_broadcast_prefix` in the configured namespace."""
    return optree.tree_broadcast_prefix(
        prefix_tree,
        full_tree,
        is_leaf,
        none_is_leaf=none_is_leaf,
        namespace=config.pytree_namespace,
    )
