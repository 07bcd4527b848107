"""What examples and notebooks may import: the package, its documented subpackages and modules, and the loaders."""

PUBLIC_MODULES = {"bayesval", "bayesval.divergence", "bayesval.estimators", "bayesval.games", "bayesval.models"}
PUBLIC_MODULES |= {"bayesval.experiments", "bayesval.parties.rewards"}


def is_public(module: str) -> bool:
    return module in PUBLIC_MODULES or module == "bayesval.datasets" or module.startswith("bayesval.datasets.")


def internal_imports(source: str) -> list[str]:
    """The bayesval modules `source` imports from that are not public."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bayesval"):
            found += [] if is_public(node.module) else [node.module]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("bayesval") and not is_public(a.name)]
    return found
