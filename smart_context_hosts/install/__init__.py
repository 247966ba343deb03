"""Installers that put Smart Context into a host's vault (``smart-context install-tailor``)."""
