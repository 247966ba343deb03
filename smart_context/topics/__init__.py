"""The topic map: what each chat is about, and which messages are standing instructions.

- :mod:`.model`: the result of an extraction and its shape on the chat file;
- :mod:`.prompt`, :mod:`.transcript`: what the fast model is asked;
- :mod:`.reply`, :mod:`.labels`: its reply, parsed as hostile input, and label cleaning;
- :mod:`.offline`: the extractor that needs no model (clustering, key phrases, instructions);
- :mod:`.extract`: which extractor runs; :mod:`.refresh`: the background pass of one chat.
"""
