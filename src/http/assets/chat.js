// The web chat: `POST /webchat/messages` as Server-Sent Events, the answer rendered as markdown while it
// streams, and the five token cards of the chat's session kept fresh. Replies that come later (a sub-agent's
// result, a goal's background batches) arrive on `GET /webchat/events?user=…` and are added as they come.
// Files are attached with the 📎 input or pasted; they go as base64 in the message, and the files a reply
// carries are shown as links (images as thumbnails) to `/media/<sha256>`, served under the page's sign-in.
import { $, api, h, sessionPath } from './api.js';
import { renderMarkdown } from './markdown.js';
import { renderCards, renderFiles, renderHistory } from './session-parts.js';

/** The names the web chat takes (the server's rule). */
const NAME = /^[\w.@+-]{1,128}$/;
const NAME_HINT = '1-128 letters, digits or . _ @ + - (no spaces)';

let chatKey = sessionStorage.getItem('switchboard-chat-key') ?? undefined;
let busy = false;
/** The session whose history the log shows (later replies are added to it, else the next load has them). */
let historyKey;
let loadingHistory = false;
let reloadHistory = false;
/** The event stream of the current name's later replies. */
let live;
/** Files attached to the next message: `{ name, mime, size, dataBase64, thumb? }`. */
let pending = [];
/** Settles when the files being read are attached (a message sent meanwhile waits for them). */
let attaching = Promise.resolve();

const userName = () => $('chat-user').value.trim() || 'web';
const chatShown = () => !$('view-chat').hidden;

export function initChat() {
  const user = $('chat-user');
  user.value = sessionStorage.getItem('switchboard-chat-user') ?? 'web';
  // The `v`-flag pattern of the server's rule: the browser marks a name it would refuse.
  user.setAttribute('pattern', '[\\w.@+\\-]{1,128}');
  user.maxLength = 128;
  user.title = `Your name in the chat: ${NAME_HINT}.`;
  user.addEventListener('input', () => user.setCustomValidity(''));
  user.addEventListener('change', () => {
    if (!checkName(false)) return;
    sessionStorage.setItem('switchboard-chat-user', userName());
    chatKey = undefined;
    historyKey = undefined;
    sessionStorage.removeItem('switchboard-chat-key');
    $('chat-log').replaceChildren();
    listen();
    void refresh();
  });
  $('chat-form').addEventListener('submit', (e) => {
    e.preventDefault();
    void send();
  });
  $('chat-files').addEventListener('change', (e) => {
    void attach([...e.target.files]);
    e.target.value = '';
  });
  $('chat-text').addEventListener('paste', (e) => {
    const files = [...(e.clipboardData?.files ?? [])];
    if (!files.length) return;
    // A pasted screenshot: the file. Text copied with a picture of itself (office apps) stays text too.
    if (!e.clipboardData.types.includes('text/plain')) e.preventDefault();
    void attach(files);
  });
  $('chat-text').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void send();
    }
  });
  listen();
}

/** A file's bytes as base64 (what `POST /webchat/messages` takes) and, for an image, a `data:` URL to show. */
function readFile(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      const mime = file.type || 'application/octet-stream';
      resolve({ name: file.name || 'pasted', mime, size: file.size, dataBase64: url.slice(url.indexOf(',') + 1), thumb: mime.startsWith('image/') ? url : undefined });
    };
    reader.onerror = () => reject(reader.error ?? new Error(`could not read ${file.name}`));
    reader.readAsDataURL(file);
  });
}

function attach(files) {
  attaching = attaching.then(async () => {
    for (const file of files) {
      try {
        pending.push(await readFile(file));
      } catch (e) {
        $('chat-log').append(h('li', { class: 'msg error', role: 'alert', 'data-role': 'notice', text: `Could not attach ${file.name}: ${e.message}` }));
      }
    }
    showPending();
  });
  return attaching;
}

/** The files waiting to be sent, each with a button that takes it off. */
function showPending() {
  const list = $('chat-pending');
  list.hidden = pending.length === 0;
  list.replaceChildren(...pending.map((f) => {
    const remove = h('button', { type: 'button', class: 'ghost small', 'aria-label': `Remove ${f.name}`, text: '×' });
    remove.addEventListener('click', () => {
      pending = pending.filter((p) => p !== f);
      showPending();
    });
    return h('li', { 'data-role': 'pending-file' }, h('span', { text: f.name }), remove);
  }));
}

/** True when the name is one the server takes; otherwise says so (the input, a line in the log, and with `report` the browser's bubble). */
function checkName(report = true) {
  const user = $('chat-user');
  if (NAME.test(userName())) {
    user.setCustomValidity('');
    return true;
  }
  const message = `"${userName()}" cannot be your name in the chat: use ${NAME_HINT}.`;
  user.setCustomValidity(message);
  if (report) user.reportValidity();
  const item = h('li', { class: 'msg error', role: 'alert', 'data-role': 'notice', text: message });
  $('chat-log').append(item);
  item.scrollIntoView({ block: 'end' });
  return false;
}

/** Listens for the replies sent to the current name outside a request. */
function listen() {
  live?.close();
  live = undefined;
  if (!NAME.test(userName())) return;
  const source = new EventSource(`/webchat/events?user=${encodeURIComponent(userName())}`);
  live = source;
  let connected = false;
  source.addEventListener('ready', (e) => {
    const { sessionKey, exists } = JSON.parse(e.data);
    // After a dropped connection, replies may have come meanwhile: the history has them.
    if (connected && !busy) historyKey = undefined;
    connected = true;
    if (exists && sessionKey !== chatKey) {
      chatKey = sessionKey;
      historyKey = undefined;
      sessionStorage.setItem('switchboard-chat-key', chatKey);
    } else if (!exists && sessionKey === chatKey && !busy) {
      // Remembered, but gone (a new state folder): a new session starts with the next message.
      chatKey = undefined;
      sessionStorage.removeItem('switchboard-chat-key');
    }
    if (chatShown()) void refresh(historyKey !== chatKey);
  });
  source.addEventListener('reply', (e) => {
    const reply = JSON.parse(e.data);
    if (loadingHistory) reloadHistory = true;
    else if (historyKey === chatKey) bubble('assistant', reply.text, reply.kind, reply.files);
    if (chatShown()) void refresh(historyKey !== chatKey && !loadingHistory);
  });
  source.addEventListener('error', () => {
    // The browser retries by itself after a network error; a refused stream (401, 503) needs a new one.
    if (source.readyState === EventSource.CLOSED) setTimeout(() => { if (live === source) listen(); }, 5000);
  });
}

/** Shows the chat; the history of its session is loaded unless the log shows it already. */
export async function showChat() {
  await refresh(historyKey !== chatKey);
  $('chat-text').focus();
}

/** Live update: the chat's session changed (a turn here or from another client). */
export function onSessionEvents(keys) {
  if (chatKey && keys.has(chatKey)) void refresh();
}

async function refresh(withHistory = false) {
  $('chat-key').replaceChildren(chatKey ? h('a', { href: `#/sessions/${encodeURIComponent(chatKey)}`, text: chatKey }) : 'new session: send a message');
  if (!chatKey) {
    renderCards($('chat-cards'), undefined);
    return;
  }
  const key = chatKey;
  if (withHistory) loadingHistory = true;
  try {
    const [entry, history] = await Promise.all([api(sessionPath(key)), withHistory ? api(`${sessionPath(key)}/history?limit=100`) : undefined]);
    if (key !== chatKey) return;
    renderCards($('chat-cards'), entry);
    if (history && !busy) {
      renderHistory($('chat-log'), history.entries);
      historyKey = key;
    }
  } catch {
    renderCards($('chat-cards'), undefined);
  } finally {
    if (withHistory) {
      loadingHistory = false;
      // A reply came while the history was on its way: load it again so that it is there.
      if (reloadHistory) {
        reloadHistory = false;
        void refresh(true);
      }
    }
  }
}

function bubble(role, text, kind, files) {
  const body = renderMarkdown(h('div'), text);
  const style = kind === 'error' || kind === 'notice' ? ` ${kind}` : '';
  const item = h('li', { class: `msg ${role}${style}`, 'data-role': role }, h('span', { class: 'who', text: role === 'user' ? userName() : 'assistant' }), body,
    files?.length ? renderFiles(files) : undefined);
  $('chat-log').append(item);
  item.scrollIntoView({ block: 'end' });
  return { item, body };
}

/** Server-Sent Events of a fetch response, as `{event, data}`. */
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: ?(.*)$/m.exec(block)?.[1] ?? 'message';
      const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.replace(/^data: ?/, '')).join('\n');
      yield { event, data: data ? JSON.parse(data) : {} };
    }
  }
}

async function send() {
  if (busy) return;
  await attaching;
  const text = $('chat-text').value.trim();
  if ((!text && !pending.length) || busy || !checkName()) return;
  busy = true;
  $('chat-send').disabled = true;
  $('chat-text').value = '';
  const user = userName();
  const files = pending;
  pending = [];
  showPending();
  bubble('user', text, undefined, files);
  const answer = bubble('assistant', '…');
  answer.item.setAttribute('aria-busy', 'true');
  let streamed = '';
  let frame;
  const show = (markdown) => {
    renderMarkdown(answer.body, markdown);
    answer.item.scrollIntoView({ block: 'end' });
  };
  try {
    const response = await fetch('/webchat/messages', {
      method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ user, text, ...(files.length ? { attachments: files.map(({ name, mime, dataBase64 }) => ({ name, mime, dataBase64 })) } : {}) }),
    });
    if (response.status === 401) location.reload();
    if (!response.ok && files.length && !pending.length) {
      // Refused (too large, bad file): the files wait again for the next try.
      pending = files;
      showPending();
    }
    if (!response.ok) throw new Error((await response.json().catch(() => ({}))).error?.message ?? `HTTP ${response.status}`);
    for await (const { event, data } of events(response)) {
      if (event === 'delta') {
        streamed += data.text;
        frame ??= requestAnimationFrame(() => { frame = undefined; show(streamed); });
      } else if (event === 'done') {
        cancelAnimationFrame(frame);
        show(data.reply || streamed || (data.files?.length ? '' : '(no reply)'));
        if (data.files?.length) answer.item.append(renderFiles(data.files));
        chatKey = data.sessionKey;
        historyKey = chatKey;
        sessionStorage.setItem('switchboard-chat-key', chatKey);
      } else if (event === 'error') {
        throw new Error(data.error?.message ?? 'The message could not be handled.');
      }
    }
  } catch (e) {
    cancelAnimationFrame(frame);
    answer.item.classList.add('error');
    answer.body.textContent = `Error: ${e.message}`;
  } finally {
    answer.item.removeAttribute('aria-busy');
    busy = false;
    $('chat-send').disabled = false;
    $('chat-text').focus();
    void refresh();
  }
}
