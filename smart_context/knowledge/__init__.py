"""The knowledge base (seed 004): the vault's own notes, indexed incrementally and searched per
request with the references' selector; passages sent cited by path (CONTRACT §9)."""
