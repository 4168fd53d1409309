// The web chat: `POST /webchat/messages` as Server-Sent Events, the answer rendered as markdown while it
// streams, and the five token cards of the chat's session kept fresh. Replies that come later (a sub-agent's
// result, a goal's background batches) arrive on `GET /webchat/events?user=…` and are added as they come.
import { $, api, h, sessionPath } from './api.js';
import { renderMarkdown } from './markdown.js';
import { renderCards, renderHistory } from './session-parts.js';

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
  $('chat-text').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void send();
    }
  });
  listen();
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
    else if (historyKey === chatKey) bubble('assistant', reply.text, reply.kind);
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

function bubble(role, text, kind) {
  const body = renderMarkdown(h('div'), text);
  const style = kind === 'error' || kind === 'notice' ? ` ${kind}` : '';
  const item = h('li', { class: `msg ${role}${style}`, 'data-role': role }, h('span', { class: 'who', text: role === 'user' ? userName() : 'assistant' }), body);
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
  const text = $('chat-text').value.trim();
  if (!text || busy || !checkName()) return;
  busy = true;
  $('chat-send').disabled = true;
  $('chat-text').value = '';
  const user = userName();
  bubble('user', text);
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
      method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify({ user, text }),
    });
    if (response.status === 401) location.reload();
    if (!response.ok) throw new Error((await response.json().catch(() => ({}))).error?.message ?? `HTTP ${response.status}`);
    for await (const { event, data } of events(response)) {
      if (event === 'delta') {
        streamed += data.text;
        frame ??= requestAnimationFrame(() => { frame = undefined; show(streamed); });
      } else if (event === 'done') {
        cancelAnimationFrame(frame);
        show(data.reply || streamed || '(no reply)');
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
