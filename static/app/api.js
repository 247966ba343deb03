// The sidecar's HTTP API (docs/contract.md §7), and a reader for server-sent events over fetch.

export class ApiError extends Error {
  /** `data`: the error payload, which may carry the stored user and assistant messages. */
  constructor(message, status, data = null) {
    super(message);
    this.status = status;
    this.data = data;
  }
}

async function request(method, path, body) {
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: body === undefined ? { Accept: "application/json" } : {
        Accept: "application/json",
        "Content-Type": "application/json",
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError("The sidecar is not reachable. Is `smart-context serve` still running?", 0);
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const message = (data && data.error) || `The sidecar answered ${response.status}.`;
    throw new ApiError(message, response.status);
  }
  return data;
}

export const listChats = () => request("GET", "/api/chats").then((d) => d.chats || []);
/** The chat list and the chat files set aside as damaged: {chats, damaged: [{chat_id, file}]}. */
export const chatIndex = () =>
  request("GET", "/api/chats").then((d) => ({ chats: d.chats || [], damaged: d.damaged || [] }));
export const createChat = (title) => request("POST", "/api/chats", title ? { title } : {});
export const loadChat = (id) => request("GET", `/api/chats/${encodeURIComponent(id)}`);

/** A dry run: what sending `content` to chat `chatId` now would use; nothing is stored. */
export const dryRun = (chatId, content) =>
  request("POST", `/api/chats/${encodeURIComponent(chatId)}/context`, { content });

/** Answer a tool call the reply is waiting on: run it (`approve` true) or decline it. */
export const answerToolCall = (chatId, callId, approve) =>
  request(
    "POST",
    `/api/chats/${encodeURIComponent(chatId)}/tool-calls/${encodeURIComponent(callId)}`,
    { approve: Boolean(approve) },
  );

/**
 * Post a message and read the streamed reply. `handlers.token(data)` per token event,
 * `handlers.tool_call(data)` and `handlers.tool_result(data)` around each tool call; resolves
 * with the `done` payload ({user_message, assistant_message}); rejects with an
 * ApiError for an `error` event, an HTTP error or a broken stream.
 */
export async function sendMessage(chatId, content, handlers = {}, signal) {
  let response;
  try {
    response = await fetch(`/api/chats/${encodeURIComponent(chatId)}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify({ content }),
      signal,
    });
  } catch (err) {
    throw new ApiError("The sidecar is not reachable. Is `smart-context serve` still running?", 0);
  }
  const type = response.headers.get("Content-Type") || "";
  if (!response.ok || !type.includes("text/event-stream")) {
    const data = await response.json().catch(() => null);
    if (response.ok && data && data.assistant_message) return data; // a host that does not stream
    throw new ApiError((data && data.error) || `The sidecar answered ${response.status}.`, response.status);
  }
  let result = null;
  for await (const event of readEvents(response.body)) {
    if (event.name === "token" && handlers.token) handlers.token(event.data || {});
    else if (event.name === "tool_call" && handlers.tool_call) handlers.tool_call(event.data || {});
    else if (event.name === "tool_result" && handlers.tool_result) handlers.tool_result(event.data || {});
    else if (event.name === "done") result = event.data;
    else if (event.name === "error") {
      const data = event.data || {};
      throw new ApiError(data.error || "The reply failed.", response.status, data);
    }
  }
  if (!result) throw new ApiError("The reply stream ended before the reply was complete.", 0);
  return result;
}

/** Yield {name, data} for each event of a text/event-stream body (data parsed as JSON). */
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parseBlock(block);
        if (event) yield event;
      }
    }
    const tail = parseBlock(buffer);
    if (tail) yield tail;
  } finally {
    reader.releaseLock();
  }
}

function parseBlock(block) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue; // blank or a comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  const text = data.join("\n");
  try {
    return { name, data: JSON.parse(text) };
  } catch {
    return { name, data: { text } };
  }
}
