"""The knowledge base: the vault's own notes, indexed incrementally and searched per
request with the references' selector; passages sent cited by path (docs/contract.md §9)."""
