"""Stand-in of Tailor's memory plugin: one JSON file per chat in ``.memory/``.

Its commands read and write synchronously inside ``async def`` (as Tailor's do), and it
appends each turn at ``pipeline.output`` with priority 10, loading, appending and saving
through its own commands. ``yield_in_commands`` (a test setting) makes each command also give
way to other tasks: before reading and after writing, where Tailor's would if they did I/O
asynchronously, so that writers interleave with ours far more often.
"""

import asyncio
import json
import uuid

from sidecar.api.plugin_base import PluginBase
from sidecar.pipeline.events import PipelineEvents


class Plugin(PluginBase):
    def __init__(self, plugin_dir, vault_path, config=None):
        super().__init__(plugin_dir, vault_path, config)
        self.memory_dir = vault_path / ".memory"
        self.yields = bool(self.config.get("yield_in_commands", False))

    def register_commands(self):
        self.brain.register_command("memory.load_chat", self.load_chat, self.name)
        self.brain.register_command("memory.save_chat", self.save_chat, self.name)
        self.brain.register_command("chat.get_history", self.get_history, self.name)

    async def on_load(self):
        await super().on_load()
        self.memory_dir.mkdir(parents=True, exist_ok=True)
        self.subscribe(PipelineEvents.OUTPUT, self.save_interaction, priority=10)

    def _path(self, chat_id):
        safe = "".join(c for c in chat_id if c.isalnum() or c in "-_")
        return self.memory_dir / f"{safe}.json"

    async def load_chat(self, chat_id="", **kwargs):
        if not chat_id:
            return {"status": "error", "error": "chat_id required"}
        if self.yields:
            await asyncio.sleep(0)
        path = self._path(chat_id)
        if not path.exists():
            return {"status": "success", "data": {"messages": []}}
        return {"status": "success", "data": json.loads(path.read_text("utf-8"))}

    async def save_chat(self, chat_id="", data=None, **kwargs):
        if not chat_id or data is None:
            return {"status": "error", "error": "chat_id and data required"}
        self._path(chat_id).write_text(json.dumps(data, indent=2), "utf-8")
        if self.yields:
            await asyncio.sleep(0)
        return {"status": "success"}

    async def get_history(self, chat_id="", **kwargs):
        result = await self.brain.execute_command("memory.load_chat", chat_id=chat_id)
        return {
            "status": "success",
            "chat_id": chat_id,
            "history": result["data"].get("messages", []),
        }

    async def save_interaction(self, ctx):
        if not ctx.response:
            return
        chat_id = ctx.metadata["chat_id"]
        data = (await self.brain.execute_command("memory.load_chat", chat_id=chat_id))["data"]
        data.setdefault("messages", [])
        user = {"id": uuid.uuid4().hex[:8], "role": "user", "content": ctx.message}
        assistant = {"id": uuid.uuid4().hex[:8], "role": "assistant", "content": ctx.response}
        data["messages"] += [user, assistant]
        await self.brain.execute_command("memory.save_chat", chat_id=chat_id, data=data)
        ctx.metadata["generated_ids"] = {
            "user_message_id": user["id"],
            "assistant_message_id": assistant["id"],
        }
