"""What a request sends: :mod:`.assemble` builds it, section by section; :mod:`.topic_filter` is
the topic rule of docs/contract.md §6."""
