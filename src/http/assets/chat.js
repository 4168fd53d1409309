// The web chat: `POST /webchat/messages` as Server-Sent Events, the answer rendered as markdown while it
// streams, and the five token cards of the chat's session kept fresh.
import { $, api, h, sessionPath } from './api.js';
import { renderMarkdown } from './markdown.js';
import { renderCards, renderHistory } from './session-parts.js';

let chatKey = sessionStorage.getItem('switchboard-chat-key') ?? undefined;
let busy = false;

export function initChat() {
  const user = $('chat-user');
  user.value = sessionStorage.getItem('switchboard-chat-user') ?? 'web';
  user.addEventListener('change', () => {
    sessionStorage.setItem('switchboard-chat-user', user.value.trim() || 'web');
    chatKey = undefined;
    sessionStorage.removeItem('switchboard-chat-key');
    $('chat-log').replaceChildren();
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
}

/** Shows the chat; the history of its session is loaded once, when the log is empty. */
export async function showChat() {
  await refresh($('chat-log').children.length === 0);
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
  try {
    const [entry, history] = await Promise.all([api(sessionPath(chatKey)), withHistory ? api(`${sessionPath(chatKey)}/history?limit=100`) : undefined]);
    renderCards($('chat-cards'), entry);
    if (history && $('chat-log').children.length === 0) renderHistory($('chat-log'), history.entries);
  } catch {
    renderCards($('chat-cards'), undefined);
  }
}

function bubble(role, text) {
  const body = renderMarkdown(h('div'), text);
  const item = h('li', { class: `msg ${role}`, 'data-role': role }, h('span', { class: 'who', text: role === 'user' ? $('chat-user').value : 'assistant' }), body);
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
  if (!text || busy) return;
  busy = true;
  $('chat-send').disabled = true;
  $('chat-text').value = '';
  const user = $('chat-user').value.trim() || 'web';
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
