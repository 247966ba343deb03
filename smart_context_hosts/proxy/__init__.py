"""``smart-context proxy``: Smart Context for any client that speaks OpenAI's chat API.

:mod:`.conversation` and :mod:`.identity` are pure (the client's messages as a chat, and which
chat a request belongs to); :mod:`.body` reads a request on from where the chat's last
one ended; :mod:`.replies` reads the upstream's answer; :mod:`.relay` runs one
turn through the vault's plugins; :mod:`.app` is the HTTP layer and :mod:`.serve` the command.
"""
