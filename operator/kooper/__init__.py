"""kooper: KIP-415 incremental cooperative rebalancing of connectors and tasks on Kubernetes."""

__version__ = "0.1.0"
__all__ = ["__version__"]
