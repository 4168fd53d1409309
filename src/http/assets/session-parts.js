// Parts of a session shown in the session detail and in the web chat: the five token cards and the history.
import { fmt, h } from './api.js';
import { renderMarkdown } from './markdown.js';

const CARDS = [['input', 'input'], ['output', 'output'], ['cacheRead', 'cache read'], ['cacheWrite', 'cache write']];

/** The five token cards of an entry as `GET /admin/sessions/:key` gives it (all its turns, across resets). */
export function renderCards(container, entry) {
  const t = entry?.tokens ?? {};
  container.replaceChildren(
    ...CARDS.map(([field, label]) => card(field, label, t[field])),
    card('total', 'total', entry?.totalTokens, 'card total'),
  );
}

function card(name, label, value, cls = 'card') {
  return h('div', { class: cls, 'data-card': name }, h('span', { class: 'label', text: label }), h('span', { class: 'value', text: fmt(value) }));
}

const clip = (text, n) => (text.length > n ? `${text.slice(0, n)}…` : text);
const time = (iso) => (iso ? new Date(iso).toLocaleTimeString() : '');

function pretty(json) {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

/** One transcript entry as list items: messages (markdown), tool calls and results (collapsed), compactions. */
export function historyItems(entry, toolNames) {
  if (entry.type === 'compaction') {
    return [h('li', { class: 'msg notice' }, h('details', {},
      h('summary', { text: `earlier messages summarized (${fmt(entry.tokensBefore)} → ${fmt(entry.tokensAfter)} tokens)` }),
      renderMarkdown(h('div'), entry.summary)))];
  }
  if (entry.type !== 'message') return [];
  if (entry.role === 'tool') {
    const name = toolNames.get(entry.toolCallId) ?? 'tool';
    return [h('li', { class: 'msg tool', 'data-role': 'tool-result' }, h('details', {},
      h('summary', { text: `← ${name} result (${fmt(entry.content.length)} characters)` }), h('pre', { text: clip(entry.content, 4000) })))];
  }
  const items = [];
  if (entry.content) {
    const who = entry.role === 'user' ? (entry.name ?? 'user') : 'assistant';
    items.push(h('li', { class: `msg ${entry.role}`, 'data-role': entry.role },
      h('span', { class: 'who', text: `${who} · ${time(entry.at)}` }), renderMarkdown(h('div'), entry.content)));
  }
  for (const call of entry.toolCalls ?? []) {
    toolNames.set(call.id, call.name);
    items.push(h('li', { class: 'msg tool', 'data-role': 'tool-call' }, h('details', {},
      h('summary', { text: `→ ${call.name}` }), h('pre', { text: clip(pretty(call.arguments), 4000) }))));
  }
  return items;
}

/** Replaces a list's items with a history (oldest first), keeping the view at the bottom if it was there. */
export function renderHistory(list, entries, scroller = list) {
  const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
  const names = new Map();
  const items = entries.flatMap((e) => historyItems(e, names));
  list.replaceChildren(...(items.length ? items : [h('li', { class: 'msg notice', text: 'No messages in this session yet.' })]));
  if (atBottom) scroller.scrollTop = scroller.scrollHeight;
}
